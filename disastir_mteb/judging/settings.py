"""How a judge job talks to its servers, built once: :class:`JudgeSettings`.

The holes job and the agreement check take the same value, so the two ask the same servers the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from disastir_mteb.endpoints.pool import DEFAULT_KEY_ENV, DEFAULT_TIMEOUT
from disastir_mteb.util.install_hint import require_extra
from disastir_mteb.vocabulary.taxonomy import canonical_task_name

if TYPE_CHECKING:  # the job's modules load when a job runs: the command line reads these defaults at every start
    from disastir_mteb.endpoints.pool import EndpointPool
    from disastir_mteb.judging.job import Price
    from disastir_mteb.judging.store import JudgementStore, Pair

__all__ = ["JudgeSettings"]


@dataclass(frozen=True)
class JudgeSettings:
    """The judge model, its servers and when to ask before sending.

    ``judge_model`` is part of every judgement's key; ``base_urls`` is empty for the Batch API; ``timeout`` bounds a
    try's connect, each read and its whole answer; above ``confirm_above`` requests the job asks first, unless ``yes``.
    """

    judge_model: str
    base_urls: tuple[str, ...] = ()
    api_key_env: str = DEFAULT_KEY_ENV
    concurrency: int = 8
    timeout: float = DEFAULT_TIMEOUT
    price: Price | None = None
    tasks: tuple[str, ...] | None = None
    confirm_above: int = 2000
    yes: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        """``tasks`` spelled as the tasks are; servers without the ``judge`` extra refused before any result is read.

        Raises:
            ImportError: ``base_urls`` without the openai client installed (the ``judge`` extra).
        """
        if self.base_urls:
            require_extra("openai", extra="judge", needed_by="The judge")
        if self.tasks is not None:
            object.__setattr__(self, "tasks", tuple(canonical_task_name(name) for name in self.tasks))

    @classmethod
    def from_options(cls, options: Any) -> JudgeSettings:
        """The ``judge`` command's parsed options as one value (``--price`` read here: a bad one is one sentence)."""
        from disastir_mteb.judging.job import Price

        return cls(judge_model=options.model, base_urls=tuple(options.base_url or ()),
                   api_key_env=options.api_key_env, concurrency=options.concurrency, timeout=options.timeout,
                   price=Price.parse(options.price) if options.price else None,
                   tasks=tuple(options.tasks) if options.tasks else None,
                   confirm_above=options.confirm_above, yes=options.yes)

    def judge_planned(self, pairs: Sequence[Pair], store: JudgementStore, *, what: str,
                      go_ahead: Callable[[str, int], bool], say: Callable[[str], None]) -> bool:
        """Say the plan for ``pairs``, ask, and judge what the store lacks; False when ``go_ahead`` said no."""
        from disastir_mteb.judging.job import judge_pairs, plan_job

        plan = plan_job(pairs, store)
        text = f"{what}: {plan.describe(self.price)}"
        say(text)
        if not plan.to_judge:
            return True
        if not go_ahead(text, plan.requests):
            say(f"{what} not sent.")
            return False
        say(judge_pairs(pairs, store, self.pool(), judge_model=self.judge_model).describe())
        return True

    def pool(self) -> EndpointPool[Any, Any]:
        """A pool of this job's servers (one per call: a pool lives for one job)."""
        from disastir_mteb.endpoints.pool import EndpointPool

        return EndpointPool(list(self.base_urls), key_env=self.api_key_env, concurrency=self.concurrency,
                            timeout=self.timeout)

"""One run's settings as one value: how a model encodes and searches, built once and passed down.

``disastir-mteb run`` builds it from its options, ``disastir_mteb.evaluate`` and ``SharedCorpusSearch``
from their keywords (both through :meth:`RunSettings.from_options`, which checks every option once,
before any model loads); everything below them (``build_search``, the search model, the store) reads
the value and never re-checks it. What a run evaluates (tasks, query set, data, output folder) is not
here: it does not change a vector or a ranking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.ann_params import DEFAULT_PRESET, AnnParams, resolve_params
from disastir_mteb.vocabulary.instructions import InstructionConfig, resolve_instructions
from disastir_mteb.vocabulary.settings import DEFAULT_BATCH_SIZE, EXACT, Precision, check_count, parse_precision

__all__ = ["ANN", "RunSettings", "Search"]

#: The approximate search mode (USearch HNSW); the other is :data:`~disastir_mteb.vocabulary.settings.EXACT`.
ANN = "ann"
Search = Literal["exact", "ann"]


@dataclass(frozen=True)
class RunSettings:
    """How one run encodes and searches.

    Attributes:
        ann: the USearch parameters (a preset name such as ``"paper"`` is resolved), or None for exact search.
        instructions: what goes in front of queries (and passages), or None for the model as it is.
        batch_size: texts per forward pass; None leaves it to the caller: mteb's ``encode_kwargs`` for a
            search model used by plain ``mteb.evaluate``, :data:`DEFAULT_BATCH_SIZE` for the runner.
        precision: ``fp32``, ``fp16`` or ``bf16`` weights, or None for the model's own dtype.
        devices: devices to spread corpus encoding over (a list becomes a tuple), ``"auto"`` (every visible
            GPU when there are two or more) or None (one process).
        tokenize_threads: threads tokenising passages ahead of the model; None = automatic.
        cache_dir: where embeddings persist (None: ``DISASTIR_CACHE_DIR``); False keeps them in memory.
        progress: progress bars while encoding and evaluating.
        model_revision: the revision the model's results are filed under, and the version that identifies a model
            with no weights or files to read (a plain callable), whose vectors are otherwise never reused.
    """

    ann: AnnParams | None = None  # a preset name is accepted and resolved
    instructions: InstructionConfig | None = None
    batch_size: int | None = None
    precision: Precision | None = None
    devices: tuple[str, ...] | str | None = "auto"
    tokenize_threads: int | None = None
    cache_dir: str | Path | Literal[False] | None = None
    progress: bool = True
    model_revision: str | None = None

    def __post_init__(self) -> None:
        """Refuse a value no run can use, in one sentence naming it (the same checks for every front)."""
        if isinstance(self.ann, str):
            object.__setattr__(self, "ann", resolve_params(self.ann))
        if isinstance(self.devices, Sequence) and not isinstance(self.devices, str):
            object.__setattr__(self, "devices", tuple(self.devices))
        check_count("batch_size", self.batch_size, 1, f"the default, {DEFAULT_BATCH_SIZE}")
        check_count("tokenize_threads", self.tokenize_threads, 0, "automatic")
        object.__setattr__(self, "precision", parse_precision(self.precision))
        if self.model_revision is not None and (not isinstance(self.model_revision, str)
                                                or not self.model_revision.strip() or "/" in self.model_revision):
            raise InvalidInput(f"model_revision={self.model_revision!r} is not a revision: give a non-empty name "
                               "without '/', e.g. a commit or 'v2'.")

    @classmethod
    def from_options(
        cls,
        *,
        search: Search | str = EXACT,
        ann_preset: str | AnnParams | None = None,
        ann_params: Mapping[str, Any] | None = None,
        instructions: str | Mapping[str, str] | InstructionConfig | None = None,
        template: str | None = None,
        instruct_passages: bool = False,
        batch_size: int | None = None,
        precision: str | None = None,
        devices: Sequence[str] | str | None = "auto",
        tokenize_threads: int | None = None,
        cache_dir: str | Path | Literal[False] | None = None,
        progress: bool = True,
        model_revision: str | None = None,
    ) -> RunSettings:
        """The settings the user-facing options name, each checked once (the command line's and ``evaluate``'s).

        Args:
            search: ``"exact"`` or ``"ann"``.
            ann_preset: an ANN preset name (``paper``, ``exact``, ``f16``, ``i8``, ``b1``) or ready parameters;
                None: ``paper`` (:data:`~disastir_mteb.vocabulary.ann_params.DEFAULT_PRESET`) for ANN search.
            ann_params: overrides of single ANN parameters, e.g. ``{"expansion_search": 128}``.
            instructions: None (the model as it is), a set name, a mapping {intent: instruction} or a config.
            template: the instruction template (default: the set's published one).
            instruct_passages: also put the instruction before passages.
            batch_size: texts per forward pass (None: see the attribute).
            precision: ``fp32``, ``fp16``, ``bf16`` (or ``half``, ``float16``, ...), None for the model's own.
            devices: a list of devices, ``"auto"`` or None (see the attribute).
            tokenize_threads: threads tokenising passages ahead of the model; None = automatic.
            cache_dir: where embeddings persist; False keeps them in memory.
            progress: progress bars.
            model_revision: the model's version (see the attribute).

        Raises:
            ValueError: an unknown search mode, preset, parameter, instruction set, template or precision,
                an ANN preset or ANN parameters for exact search (never silently ignored), or a count out of range.
        """
        if search == ANN:
            ann: AnnParams | None = resolve_params(DEFAULT_PRESET if ann_preset is None else ann_preset,
                                                   **dict(ann_params or {}))
        elif search == EXACT:
            given = ([f"ann_preset={ann_preset!r}"] if ann_preset is not None else []) + (
                [f"ANN parameters {sorted(ann_params)}"] if ann_params else [])
            if given:
                raise InvalidInput(f"{' and '.join(given)} {'were' if ann_params else 'was'} given for "
                                   f"search='exact'; add search='ann', or leave {'them' if ann_params else 'it'} out.")
            ann = None
        else:
            raise InvalidInput(f"Unknown search {search!r}; expected 'exact' or 'ann'.")
        config = None if instructions is None else resolve_instructions(instructions, template,
                                                                        passages=instruct_passages)
        return cls(ann=ann, instructions=config, batch_size=batch_size, precision=precision,  # type: ignore[arg-type]
                   devices=devices, tokenize_threads=tokenize_threads, cache_dir=cache_dir,  # type: ignore[arg-type]
                   progress=progress, model_revision=model_revision)

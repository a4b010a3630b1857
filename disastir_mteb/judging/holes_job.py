"""``disastir-mteb judge`` as one function: the result sets' holes found, judged and stored.

Lines for the user go through ``say`` (results) and ``warn`` (notes): the function prints nothing itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from disastir_mteb.endpoints.pool import EndpointError
from disastir_mteb.judging.holes import Holes, find_holes
from disastir_mteb.judging.job import judge_pairs, plan_job
from disastir_mteb.judging.protocol import PROMPT_VERSION
from disastir_mteb.judging.settings import JudgeSettings
from disastir_mteb.judging.store import JudgementStore, Pair

__all__ = ["judge_holes"]

#: ``go_ahead(plan text, requests) -> bool``: whether to send that many requests (asked of a terminal, or not).
GoAhead = Callable[[str, int], bool]


def judge_holes(result_sets: Sequence[Any], *, settings: JudgeSettings, store_path: Path, data: Path | None,
                go_ahead: GoAhead, without_rankings: Sequence[str] = (), considered: int = 0,
                agreement: int | None = None, fill_anyway: bool = False, batch_requests: str | None = None,
                batch_results: str | None = None, quiet: bool = False, say: Callable[[str], None] = print,
                warn: Callable[[str], None] = print) -> int:
    """Judge the unjudged top-10 pairs of ``result_sets`` into the store at ``store_path``; the command's exit code.

    The agreement check comes first when ``agreement`` asks for it, and stops below its band unless ``fill_anyway``;
    then the Batch API's files (``batch_results`` read, ``batch_requests`` written) or the online job. When every
    ``considered`` task is ``without_rankings`` (plain ``mteb run``), only the agreement check runs. ``data`` is the
    folder the runs read (None: the Hub's).

    Returns:
        0 when done, 1 when a pair got no readable answer, the job was not sent, or it stopped below the band.
    """
    only_agreement = bool(without_rankings) and len(without_rankings) == considered
    if only_agreement:
        holes = Holes(result_sets=[s.label for s in result_sets], without_rankings=list(without_rankings))
    else:
        holes = find_holes(result_sets, data, tasks=list(settings.tasks) if settings.tasks else None)
        if without_rankings:
            warn(f"No per-query rankings for {len(without_rankings)} of {considered} task(s) (e.g. "
                 f"{without_rankings[0]}; plain mteb run writes none): their holes are not judged; rerun them with "
                 "disastir-mteb run to judge them.")
    say(f"{len(result_sets)} result set(s): {holes.retrieved:,} top-10 hits, {holes.unjudged:,} unjudged "
        f"({100 * holes.unjudged_share:.1f} %), {len(holes.pairs):,} distinct pair(s) to judge.")
    pairs = [Pair(hole.intent, hole.query, hole.passage, settings.judge_model) for hole in holes.pairs]
    with JudgementStore(store_path) as store:
        if agreement:
            from disastir_mteb.judging.agreement import run_agreement

            measured = run_agreement(result_sets, agreement, store=store, settings=settings, go_ahead=go_ahead,
                                     data_dir=data)
            if only_agreement:
                return 1
            if measured is not None and measured.warning() is not None and not fill_anyway:
                say(f"Stopped before filling the {len(pairs):,} hole(s): this judge is below the agreement band. "
                    "Judge with a stronger model, or pass --fill-anyway to fill them with this one.")
                return 1
        if batch_requests or batch_results:
            return _batch_round(pairs, store, store_path, settings, batch_requests, batch_results, say)
        return _online(pairs, store, store_path, settings, go_ahead, quiet, say)


def _batch_round(pairs: list[Pair], store: JudgementStore, store_path: Path, settings: JudgeSettings,
                 batch_requests: str | None, batch_results: str | None, say: Callable[[str], None]) -> int:
    """Read a Batch API output file into the store, and write the next round's requests file."""
    from disastir_mteb.judging.batch import read_batch_results, write_batch_requests

    if batch_results:
        say(read_batch_results(pairs, store, batch_results).describe_read(batch_results))
    if batch_requests:
        round_ = write_batch_requests(pairs, store, batch_requests, judge_model=settings.judge_model)
        where = f"written to {batch_requests}" if round_.requests else "nothing left to ask"
        say(f"{round_.requests} request(s) for {round_.remaining} pair(s) {where}; upload it to the Batch API, then "
            "rerun with --batch-results <its output file> (and --batch-requests for the next round). Store: "
            f"{store_path}.")
    return 0


def _online(pairs: list[Pair], store: JudgementStore, store_path: Path, settings: JudgeSettings, go_ahead: GoAhead,
            quiet: bool, say: Callable[[str], None]) -> int:
    """The job against the servers: its plan, the go-ahead, the answers under a progress bar, the summary."""
    plan = plan_job(pairs, store)
    text = plan.describe(settings.price)
    say(text)
    if not plan.to_judge:
        say(f"Nothing to ask: every pair has a grade in {store_path}.")
        return 0
    if not go_ahead(text, plan.requests):
        say("Not sent.")
        return 1
    pool = settings.pool()
    from disastir_mteb.util.progress import live, progress_bar

    with progress_bar(total=plan.to_judge, desc="judging", unit="pair", disable=quiet) as bar:
        if not quiet and live():  # a long wait shown on the bar, not silence; in a log, the pool's warning says it
            pool.on_wait = bar.set_postfix_str

        def answered(count: int, servers: str) -> None:  # requests count as they return: never a silent bar
            bar.set_postfix_str(f"{count:,} answer(s) of ~{plan.requests:,}; {servers}", refresh=True)

        try:
            summary = judge_pairs(pairs, store, pool, judge_model=settings.judge_model, progress=bar.update,
                                  on_answer=None if quiet else answered)
        except EndpointError as error:
            raise EndpointError(f"{str(error).rstrip('.')}; every answer received is kept in {store_path}, and the "
                                "same command asks only what is missing.") from None
    say(summary.describe())
    counts = store.counts()
    say(f"Store {store_path}: {counts['judged']:,} graded pair(s), {counts['failed']:,} without a grade; prompt "
        f"version {PROMPT_VERSION}. Completed scores: disastir-mteb report RESULTS --judgements {store_path}.")
    return 0 if not summary.failed else 1

"""Re-scoring a per-query file's top 10s against the data they were computed on: the evidence behind a score.

The numbers in a file can be edited; the rankings, scored again against the judgements, say what they must be.
Every top 10 is scored through the task's own scoring (its gain, its policies for duplicate texts and unjudged
passages: nothing re-implemented here), and every metric a top 10 gives is compared with the task file. What a top
10 cannot give (metrics at 20 and 100, the ``nauc_*`` ones) is not re-scored, and readers say so where they show it.
The Hub is never read: a run whose data folder is not on this machine, or changed since, is checked against its
task files only, and :meth:`Rescoring.note` says so. mteb is imported only when some data is at hand.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disastir_mteb.data.layout import read_marker
from disastir_mteb.data.published import GAINS
from disastir_mteb.data.source import DataSource
from disastir_mteb.results.metrics import Metric, get_metric
from disastir_mteb.results.per_query import DIGEST_KEY, PerQuery, data_digests
from disastir_mteb.results.score_checks import TOLERANCE, per_query_data
from disastir_mteb.scoring.authors import TOP_K
from disastir_mteb.util.mteb_internals import retrieval_scores
from disastir_mteb.vocabulary.metadata import K_VALUES, MAIN_SCORE_KEY
from disastir_mteb.vocabulary.task_record import GAIN_KEY, local_data
from disastir_mteb.vocabulary.taxonomy import TASK_NAMES, Split, benchmark_name, get_spec

if TYPE_CHECKING:
    from disastir_mteb.tasks.retrieval import AbsTaskDisastIR

__all__ = ["CUTOFFS", "METRIC_TOLERANCE", "Evidence", "Rescoring", "rescorable", "rescore"]

_REASON_LENGTH = 200  # characters of a load error kept in the one-line note
#: mteb's cut-offs of a DisastIR task that a top 10 gives (1, 3, 5, 10): its metrics at 20 and 100 read deeper.
CUTOFFS: tuple[int, ...] = tuple(k for k in K_VALUES if k <= TOP_K)
#: How far a task file's metric other than NDCG@10 may lie from what its top 10s give: mteb rounds its means to 5
#: decimals, so two summations of one number may land one step (1e-5) apart; twice :data:`~.score_checks.TOLERANCE`
#: is a fifth of the smallest change a report can show (0.01 at x100).
METRIC_TOLERANCE = 2 * TOLERANCE
_SUBSET = "default"  # mteb's one subset of a monolingual task
_SHOWN = 3  # metrics named after the first that differs


def rescorable(metric: str | Metric) -> bool:
    """Whether a top 10 gives ``metric``: a metric a report can show whose cut-off is at most 10.

    The ``nauc_*`` metrics read the similarities of each query's whole run, which no per-query file keeps.
    """
    try:
        return get_metric(metric).cutoff <= TOP_K
    except ValueError:  # nauc_* and anything else no report shows
        return False


@dataclass(frozen=True)
class Evidence:
    """One task file (its stem is the task's name), its score block, and the per-query file beside it."""

    path: Path
    record: Mapping[str, Any]
    per_query_path: Path
    per_query: PerQuery


@dataclass(frozen=True)
class Rescoring:
    """What re-scoring found: (task file, what contradicts its data), the files re-scored, (file, why not) skipped.

    ``metrics`` are the keys compared with the re-scored files' values; the files' other metrics are taken as they are.
    """

    problems: tuple[tuple[Path, str], ...] = ()
    rescored: tuple[Path, ...] = ()
    skipped: tuple[tuple[Path, str], ...] = ()
    metrics: frozenset[str] = frozenset()

    def note(self, folder: Path) -> str | None:
        """One line naming the per-query files of ``folder`` not re-scored and why; None when none was skipped."""
        if not self.skipped:
            return None
        reasons: dict[str, list[str]] = {}
        for path, reason in self.skipped:
            reasons.setdefault(reason, []).append(path.stem)
        parts = [f"{tasks[0]}{f' and {len(tasks) - 1} more' if len(tasks) > 1 else ''}: {reason}"
                 for reason, tasks in reasons.items()]
        total = len(self.skipped) + len(self.rescored)
        return (f"{folder}: {len(self.skipped)} of {total} per-query file(s) not re-scored against their data "
                f"({'; '.join(parts)}); their numbers were checked against their task files only.")


def _at_hand(evidence: Evidence) -> tuple[str, str | None, str] | str:
    """(data folder, extra judgements folder or None, gain) to re-score ``evidence`` with; else why not."""
    split = get_spec(evidence.path.stem).split
    if split is not Split.full:
        return f"{benchmark_name(split)} per-query files do not record the DevLite folder their queries came from"
    data = evidence.per_query.data
    source = data.get("source") if data is not None else None
    if data is None or not isinstance(source, str):
        return "their per-query files do not record their data"
    if source.startswith("hf:"):
        return f"their data is the Hub's ({source}), which is never downloaded to check results"
    folder = Path(source)
    if not folder.is_dir():
        return f"their data folder {source} is not on this machine"
    then, now = per_query_data(data), local_data(folder, read_marker(folder))
    if now != then:
        return f"their data folder {source} now holds {now}, not the {then} they were scored on"
    digest, task = data.get(DIGEST_KEY), evidence.path.stem
    if isinstance(digest, str) and data_digests(folder, [task])[task] != digest:
        others = data_digests(folder, [name for name in TASK_NAMES if name != task])
        if digest not in others.values():  # else the folder is as it was, and this is another task's file: re-scored
            return f"their data folder {source} no longer holds the files they were scored on (changed since the run)"
    extra = data.get("extra_judgements")
    if extra is not None and not Path(str(extra)).is_dir():
        return f"their extra judgements folder {extra} is not on this machine"
    gain = evidence.record.get(GAIN_KEY)
    if gain not in GAINS:
        return "their task files do not record the gain"
    return str(folder), None if extra is None else str(extra), str(gain)


@contextlib.contextmanager
def _quiet(log: logging.Logger) -> Iterator[None]:
    """The tasks' load reports silenced: they were shown when the run read the data; re-reading it says nothing new."""
    level = log.level
    try:
        log.setLevel(logging.ERROR)
        yield
    finally:
        log.setLevel(level)


_corpus_ids_held: list[tuple[weakref.ref[Any], frozenset[str]]] = []  # the ids of the one corpus the data layer holds


def _corpus_ids(corpus: Any) -> frozenset[str]:
    """The passage ids of ``corpus``, kept by weak reference: never a corpus in memory the data layer has let go."""
    if _corpus_ids_held and _corpus_ids_held[0][0]() is corpus:
        return _corpus_ids_held[0][1]
    ids = frozenset(str(doc_id) for doc_id in corpus["id"])
    _corpus_ids_held[:] = [(weakref.ref(corpus), ids)]
    return ids


def _count(count: int, singular: str, plural: str) -> str:
    return f"{count} {singular if count == 1 else plural}"


def _contradiction(evidence: Evidence, task: AbsTaskDisastIR, folder: str) -> str | None:
    """What the data in ``folder`` (loaded into ``task``) says against ``evidence``'s queries, passages and NDCG@10."""
    split = task.metadata.eval_splits[0]
    where, name = evidence.per_query_path, evidence.path.stem
    stored, top10 = evidence.per_query.ndcg_at_10, evidence.per_query.top10
    rescored = task.ndcg_at_10_per_query(top10, split)
    unjudged, missing = sorted(set(stored) - set(rescored)), sorted(set(rescored) - set(stored))
    if unjudged or missing:
        parts = [f"{_count(len(unjudged), 'query', 'queries')} that the data does not judge for {name} (first: "
                 f"{unjudged[0]!r})"] if unjudged else []
        if missing:
            parts.append(f"no score for {_count(len(missing), 'query', 'queries')} it judges (first: {missing[0]!r})")
        return (f"{where} does not hold the queries of {name} in the data in {folder}: it holds "
                f"{' and '.join(parts)}; a per-query file of another task or data")
    ids = _corpus_ids(task.dataset["default"][split]["corpus"])
    outside = [(qid, doc) for qid, docs in top10.items() for doc in docs if doc not in ids]
    if outside:
        passages = _count(len(outside), "passage", "passages")
        return (f"{where} ranks {passages} that the corpus in {folder} does not hold (first: {outside[0][1]!r} in "
                f"the top 10 of query {outside[0][0]!r})")
    off = [(qid, rescored[qid], value) for qid, value in sorted(stored.items())
           if abs(rescored[qid] - value) > TOLERANCE]
    if off:
        qid, ours, theirs = off[0]
        queries = _count(len(stored), "query", "queries")
        return (f"{where} says NDCG@10 {theirs:.6f} for query {qid!r}, but its top 10 re-scored against the data in "
                f"{folder} gives {ours:.6f} ({len(off)} of {queries} differ, unless the data there changed since the "
                "run)")
    ndcg = evidence.record.get(MAIN_SCORE_KEY)
    mean = sum(rescored.values()) / len(rescored) if rescored else float("nan")
    if isinstance(ndcg, int | float) and not abs(mean - ndcg) <= TOLERANCE:
        return (f"{evidence.path} holds {MAIN_SCORE_KEY} {ndcg!r}, but the top 10s of {where} re-scored against the "
                f"data in {folder} give {mean:.6f} (they must agree within {TOLERANCE:g})")
    return None


def _metrics(task: AbsTaskDisastIR, top10: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Every metric a top 10 gives, unrounded, computed as the task computed its result file: mteb's, then its own.

    The run given is the top 10s with similarities falling by rank, so that both rank them as stored; a metric at a
    cut-off of 10 or less reads nothing below rank 10, so it is the number of the full run.
    """
    split = task.metadata.eval_splits[0]
    qrels = task.dataset[_SUBSET][split]["relevant_docs"]
    run = {query_id: {doc: float(len(docs) - rank) for rank, doc in enumerate(docs)}
           for query_id, docs in top10.items()}
    per_query, scores = retrieval_scores(qrels, run, CUTOFFS)
    scores.update(task.task_specific_scores(per_query, qrels, run, split, _SUBSET))
    return {key: float(value) for key, value in scores.items()
            if rescorable(key) and isinstance(value, int | float) and not isinstance(value, bool)}


def _other_metric(evidence: Evidence, metrics: Mapping[str, float], folder: str) -> str | None:
    """The first metric of the task file but ``ndcg_at_10`` that its top 10s do not give; None if all agree."""
    off = [(key, value, metrics[key]) for key, value in evidence.record.items()
           if key in metrics and key != MAIN_SCORE_KEY and isinstance(value, int | float)
           and not isinstance(value, bool) and not abs(value - metrics[key]) <= METRIC_TOLERANCE]
    if not off:
        return None
    key, stored, ours = off[0]
    rest = [name for name, _, _ in off[1:]]
    more = (f"; {len(rest)} more metric(s) differ: {', '.join(rest[:_SHOWN])}{' ...' if len(rest) > _SHOWN else ''}"
            if rest else "")
    return (f"{evidence.path} holds {key} {stored!r}, but the top 10s of {evidence.per_query_path} re-scored against "
            f"the data in {folder} give {ours:.6f} (they must agree within {METRIC_TOLERANCE:g}{more})")


def _task_class(name: str, folder: str) -> type[AbsTaskDisastIR]:
    """The class of task ``name``: DisastIR's, or the built benchmark's in ``folder``.

    Raises:
        KeyError: ``folder`` holds no built benchmark with that task.
        ValueError, OSError: the built benchmark in ``folder`` cannot be read.
    """
    from disastir_mteb.tasks.retrieval import ALL_TASK_CLASSES

    if name in ALL_TASK_CLASSES:
        return ALL_TASK_CLASSES[name]
    from disastir_mteb.tasks.built import read_built

    return read_built(folder).task_classes[name]


def rescore(evidence: Sequence[Evidence]) -> Rescoring:
    """Re-score the top 10s of one result set's per-query files against their data, where it is at hand."""
    problems: list[tuple[Path, str]] = []
    rescored: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    compared: set[str] = set()
    groups: dict[tuple[str, str | None], list[tuple[Evidence, str]]] = {}
    for item in evidence:
        hand = _at_hand(item)
        if isinstance(hand, str):
            skipped.append((item.path, hand))
        else:
            groups.setdefault(hand[:2], []).append((item, hand[2]))
    if not groups:
        return Rescoring(skipped=tuple(skipped))
    from disastir_mteb.tasks.retrieval import mteb_logger  # mteb: only when there is work

    for (folder, extra), items in groups.items():
        source = DataSource(Path(folder), extra_judgements=None if extra is None else Path(extra))
        with _quiet(mteb_logger):
            for item, gain in items:
                try:
                    task = _task_class(item.path.stem, folder)(gain=gain, data=source)  # type: ignore[arg-type]
                    task.load_data()
                except (OSError, ValueError, KeyError) as error:  # the folder is there but no longer loads
                    reason = " ".join(str(error).split())[:_REASON_LENGTH]
                    skipped.append((item.path, f"the data in {folder} does not load ({reason})"))
                    continue
                rescored.append(item.path)
                problem = _contradiction(item, task, folder)
                if problem is None:  # the queries and passages are the data's: every other metric, scored again
                    metrics = _metrics(task, item.per_query.top10)
                    compared.update(key for key in metrics if key in item.record)
                    problem = _other_metric(item, metrics, folder)
                if problem:
                    problems.append((item.path, problem))
    return Rescoring(problems=tuple(problems), rescored=tuple(rescored), skipped=tuple(skipped),
                     metrics=frozenset(compared))

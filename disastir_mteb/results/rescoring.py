"""Re-scoring a per-query file's top 10s against the data they were computed on: the evidence behind a score.

A per-query file (:mod:`~disastir_mteb.results.per_query`) keeps each query's top 10 beside its NDCG@10. The
numbers can be edited; the rankings, scored again against the judgements, say what they must be. Where the data
a file records is at hand, :func:`rescore` loads the task on it and scores every top 10 through the one public
scoring of a stored ranking, :meth:`AbsTaskDisastIR.ndcg_at_10_per_query
<disastir_mteb.tasks.retrieval.AbsTaskDisastIR.ndcg_at_10_per_query>` (the task's own gain, its own policies for
duplicate texts and unjudged passages, nothing re-implemented here), and finds, per task file:

- a per-query file holding other queries than the data judges for the task (another task's, or edited);
- a top-10 passage the corpus does not hold;
- a query whose stored NDCG@10 is not what its top 10 scores (within :data:`~.score_checks.TOLERANCE`);
- a task whose ``ndcg_at_10`` is not the mean of its re-scored queries.

The data at hand: the folder the per-query file's ``data`` record names (``source``, the ``DISASTIR_DATA_DIR``
of the run), when it is a folder on this machine still holding what the run read (its name and generator marker
give the task file's ``disastir_data``, and its task's files the content digest the run recorded, where it recorded
one: :func:`~disastir_mteb.results.per_query.with_data_digest`), with the extra judgements folder the run read, if
any, on this machine too, and the task's recorded gain (``disastir_gain``). The Hub is never read: a run on the
Hub's data is not re-scored, nor one whose folder is elsewhere or changed, nor a DisastIR-Test or DevLite task (its
per-query file does not record the DevLite folder). :meth:`Rescoring.note` says so in one line, and their numbers
stay checked against their task files only (:mod:`~disastir_mteb.results.score_checks`).

Cost: the tasks of one data folder are loaded one after another, each given that folder as its data; the
data layer reads the shared corpus once per process (:func:`~disastir_mteb.data.reading.load_corpus`), so each
task adds its query and qrels files, and scoring 10 passages per query. The task classes (and with them mteb)
are imported only when some data is at hand.
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
from disastir_mteb.results.per_query import DIGEST_KEY, PerQuery, data_digests
from disastir_mteb.results.score_checks import TOLERANCE, per_query_data
from disastir_mteb.vocabulary.metadata import MAIN_SCORE_KEY
from disastir_mteb.vocabulary.task_record import GAIN_KEY, local_data
from disastir_mteb.vocabulary.taxonomy import TASK_NAMES, Split, benchmark_name, get_spec

if TYPE_CHECKING:
    from disastir_mteb.tasks.retrieval import AbsTaskDisastIR

__all__ = ["Evidence", "Rescoring", "rescore"]

_REASON_LENGTH = 200  # characters of a load error kept in the one-line note


@dataclass(frozen=True)
class Evidence:
    """One task file and the per-query file beside it, as :func:`rescore` reads them.

    Attributes:
        path: the task file (its stem is the task's name).
        record: its score block (:func:`~disastir_mteb.results.score_checks.task_record_of`).
        per_query_path: the per-query file.
        per_query: what it holds.
    """

    path: Path
    record: Mapping[str, Any]
    per_query_path: Path
    per_query: PerQuery


@dataclass(frozen=True)
class Rescoring:
    """What re-scoring found.

    Attributes:
        problems: (task file, the clause saying what contradicts its data), in the order found.
        rescored: the task files whose per-query files were re-scored.
        skipped: (task file, why its data is not at hand) for the others.
    """

    problems: tuple[tuple[Path, str], ...] = ()
    rescored: tuple[Path, ...] = ()
    skipped: tuple[tuple[Path, str], ...] = ()

    def note(self, folder: Path) -> str | None:
        """One line naming the per-query files of ``folder`` not re-scored and why; None when none was skipped.

        Examples:
            ``REV: 3 of 3 per-query file(s) not re-scored against their data (DisastIR-FC-Geo and 2 more: their data
            is the Hub's (hf:DMIR01/DisastIR@65525d5), which is never downloaded to check results); their numbers
            were checked against their task files only.``
        """
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
    """The passage ids of ``corpus`` (a ``datasets.Dataset``), computed once while the data layer keeps it.

    A weak reference: the ids never keep a corpus in memory that the data layer has let go.
    """
    if _corpus_ids_held and _corpus_ids_held[0][0]() is corpus:
        return _corpus_ids_held[0][1]
    ids = frozenset(str(doc_id) for doc_id in corpus["id"])
    _corpus_ids_held[:] = [(weakref.ref(corpus), ids)]
    return ids


def _count(count: int, singular: str, plural: str) -> str:
    return f"{count} {singular if count == 1 else plural}"


def _contradiction(evidence: Evidence, task: AbsTaskDisastIR, folder: str) -> str | None:
    """What the data in ``folder`` (loaded into ``task``) says against ``evidence``; None when it agrees."""
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


def rescore(evidence: Sequence[Evidence]) -> Rescoring:
    """Re-score the top 10s of every per-query file whose data is at hand against that data.

    Args:
        evidence: the task files of one result set with the per-query files beside them.

    Returns:
        What contradicts the data, what was re-scored, and what was not (with why).
    """
    problems: list[tuple[Path, str]] = []
    rescored: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    groups: dict[tuple[str, str | None], list[tuple[Evidence, str]]] = {}
    for item in evidence:
        hand = _at_hand(item)
        if isinstance(hand, str):
            skipped.append((item.path, hand))
        else:
            groups.setdefault(hand[:2], []).append((item, hand[2]))
    if not groups:
        return Rescoring(skipped=tuple(skipped))
    from disastir_mteb.tasks.retrieval import ALL_TASK_CLASSES, mteb_logger  # mteb: only when there is work

    for (folder, extra), items in groups.items():
        source = DataSource(Path(folder), extra_judgements=None if extra is None else Path(extra))
        with _quiet(mteb_logger):
            for item, gain in items:
                task = ALL_TASK_CLASSES[item.path.stem](gain=gain, data=source)  # type: ignore[arg-type]
                try:
                    task.load_data()
                except (OSError, ValueError, KeyError) as error:  # the folder is there but no longer loads
                    reason = " ".join(str(error).split())[:_REASON_LENGTH]
                    skipped.append((item.path, f"the data in {folder} does not load ({reason})"))
                    continue
                rescored.append(item.path)
                if problem := _contradiction(item, task, folder):
                    problems.append((item.path, problem))
    return Rescoring(problems=tuple(problems), rescored=tuple(rescored), skipped=tuple(skipped))

"""Published DisastIR layout -> mteb's ``RetrievalSplitData``: text-keyed judgements joined to ids, grades to gains.

The published dataset (``DMIR01/DisastIR``) keys its judgements by text; :func:`join_task` states how they become
ids, the authors' evaluation code being the reference. DisastIR-Test and DevLite join through it too.
"""

from __future__ import annotations

import json
import logging
import os
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from disastir_mteb.data.extra_qrels import ExtraReport, extra_grades
from disastir_mteb.data.layout import TaskFiles, find_task_files, resolve_data_dir
from disastir_mteb.data.reading import Corpus, check_query_texts, load_corpus, read_records, text_digest
from disastir_mteb.util.digest import short_digest
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import MAX_GRADE, TaskSpec

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

__all__ = [
    "Gain",
    "LoadReport",
    "TaskFiles",
    "find_task_files",
    "grade_to_gain",
    "join_task",
    "load_corpus",
    "load_task",
    "log_report",
    "query_dataset",
    "read_queries",
    "resolve_data_dir",
    "shared_texts",
]

Gain = Literal["exponential", "linear"]
GAINS: tuple[Gain, ...] = ("exponential", "linear")
GAIN_ENV = "DISASTIR_GAIN"


def grade_to_gain(grade: int, gain: Gain = "exponential") -> int:
    """The qrels value handed to trec_eval for a DisastIR grade: ``2**g - 1`` (exponential) or the grade (linear).

    trec_eval takes the value as a linear gain, so the exponential mapping makes its ``ndcg_cut_10`` the authors'
    NDCG@10, while MAP, recall, precision and MRR (which ask only whether it is above 0) are unchanged.
    """
    if gain == "exponential":
        return (1 << grade) - 1
    if gain == "linear":
        return grade
    raise InvalidInput(f"Unknown gain {gain!r}; expected one of {list(GAINS)}.")


def default_gain() -> Gain:
    """The gain named by ``DISASTIR_GAIN`` (default ``exponential``), validated."""
    value = os.environ.get(GAIN_ENV, "exponential").strip().lower() or "exponential"
    if value not in GAINS:
        raise InvalidInput(f"{GAIN_ENV}={value!r} is not a gain; expected one of {list(GAINS)}.")
    return value  # type: ignore[return-value]


# --------------------------------------------------------------------------- one task


@dataclass
class LoadReport:
    """What joining one task's text-keyed qrels to ids found; logged, and kept on the task.

    ``repeated_pairs`` counts id pairs graded more than once, ``conflicting_pairs`` text pairs whose rows disagree (the
    last row's grade kept; ``conflict_examples`` names up to three); ``duplicate_judged_texts`` counts judged texts
    that several corpus ids hold, each scored once as the authors count it.
    """

    task: str
    query_file: str
    qrels_file: str
    queries: int = 0
    queries_kept: int = 0
    queries_without_judgements: int = 0
    duplicate_query_texts: int = 0
    qrels_rows: int = 0
    judgements: int = 0
    unmatched_query_rows: int = 0
    unmatched_passage_rows: int = 0
    repeated_pairs: int = 0
    conflicting_pairs: int = 0
    conflict_examples: list[str] = field(default_factory=list)
    duplicate_judged_texts: int = 0
    duplicate_judged_ids: int = 0
    grade_counts: dict[int, int] = field(default_factory=dict)
    unmatched_examples: list[str] = field(default_factory=list)
    #: DisastIR-Test / DevLite only: qrels rows of the other split's queries of the same task (expected, skipped).
    other_split_rows: int = 0
    #: DevLite only: rows whose passage is in the full corpus, not the pooled one (dropped; counted, no error).
    outside_corpus_rows: int = 0
    #: Extra judgements read on request (:mod:`disastir_mteb.data.extra_qrels`); None when none were asked for.
    extra: ExtraReport | None = None

    @property
    def clean(self) -> bool:
        """True when every row and every query found its match."""
        return not (self.unmatched_query_rows or self.unmatched_passage_rows or self.duplicate_query_texts
                    or self.repeated_pairs or self.queries_without_judgements)

    def summary(self) -> str:
        """One line for the log."""
        return (f"{self.task}: {self.queries_kept}/{self.queries} queries, {self.judgements} judgements from "
                f"{self.qrels_rows} qrels rows; unmatched rows: {self.unmatched_query_rows} query text, "
                f"{self.unmatched_passage_rows} passage text; {self.repeated_pairs} repeated pair(s), "
                f"{self.duplicate_query_texts} duplicate query text(s), "
                f"{self.queries_without_judgements} quer(y/ies) without judgements"
                + (f"; {self.other_split_rows} row(s) of the other split's queries skipped" if self.other_split_rows
                   else "")
                + (f"; {self.outside_corpus_rows} judgement(s) outside the pooled corpus dropped"
                   if self.outside_corpus_rows else "")
                + (f"; {self.conflicting_pairs} pair(s) graded differently by their repeated rows, each keeping its "
                   f"last row's grade as the authors' code does (e.g. {'; '.join(self.conflict_examples)})"
                   if self.conflicting_pairs else "")
                + (f"; {self.duplicate_judged_texts} judged text(s) held by {self.duplicate_judged_ids} corpus ids, "
                   "each text scored once as the authors key by text" if self.duplicate_judged_texts else ""))

    def count_shared(self, same_text: Mapping[str, str]) -> None:
        """Set the duplicate judged text counts from a task's :attr:`TaskData.same_text`."""
        self.duplicate_judged_texts = len(set(same_text.values()))
        self.duplicate_judged_ids = len(same_text)


@dataclass
class TaskData:
    """One task's data joined to ids: queries, gains for mteb, the raw grades, and the report.

    ``relevant_docs`` holds mteb's qrels (gains), ``grades`` the same pairs' raw grades; ``same_text`` maps each judged
    id whose text other ids also hold to the id standing for that text (:func:`shared_texts`), for scoring by text.
    """

    queries: Dataset
    corpus: Dataset
    relevant_docs: dict[str, dict[str, int]]
    grades: dict[str, dict[str, int]]
    report: LoadReport
    same_text: dict[str, str] = field(default_factory=dict)


def query_dataset(ids: list[str], texts: list[str]) -> Dataset:
    """A task's queries as mteb takes them, fingerprinted by their digest (``datasets`` would pickle the table)."""
    import pyarrow as pa
    from datasets import Dataset

    fingerprint = short_digest(json.dumps([ids, texts], ensure_ascii=False).encode("utf-8"))[:16]
    table = pa.table({"id": pa.array(ids, pa.string()), "text": pa.array(texts, pa.string())})
    return Dataset(table, fingerprint=fingerprint)


def log_report(report: LoadReport, log: logging.Logger) -> None:
    """The one-line load report, info when clean, else a warning with examples (the join's and the data cache's)."""
    if report.clean:
        log.info("%s", report.summary())
    else:
        log.warning("%s%s", report.summary(),
                    f" (e.g. {'; '.join(report.unmatched_examples)})" if report.unmatched_examples else "")


def shared_texts(grades: Mapping[str, Mapping[str, float]], first_copy: Mapping[str, str]) -> dict[str, str]:
    """The judged ids that share their text with other ids: {id: the first id holding its text}, for scoring by text."""
    judged = {doc_id for docs in grades.values() for doc_id in docs}
    return {doc_id: first_copy[doc_id] for doc_id in sorted(judged) if doc_id in first_copy}


def read_queries(spec: TaskSpec, query_path: Path) -> dict[str, str]:
    """A published query file as {query id: text}, in file order.

    Raises:
        ValueError: malformed rows, one id twice (the message names the file and task), or a query whose text is
            empty or only whitespace (:func:`~disastir_mteb.data.reading.check_query_texts`).
    """
    query_text_by_id: dict[str, str] = {}
    rows: list[tuple[str, str | None, str]] = []
    for where, record in read_records(query_path, ("query_id", "user_query")):
        query_id, text = str(record["query_id"]), str(record["user_query"])
        if query_id in query_text_by_id:
            raise InvalidInput(f"{query_path}: query_id {query_id!r} appears twice in task {spec.name}; "
                               "ids must be unique.")
        query_text_by_id[query_id] = text
        rows.append((where, query_id, text))
    check_query_texts(query_path, rows, field="user_query")
    return query_text_by_id


def load_task(spec: TaskSpec, files: TaskFiles, *, gain: Gain = "exponential",
              log: logging.Logger | None = None, extra: Path | None = None, keep: bool = True) -> TaskData:
    """Load one task: its queries, its qrels joined to query and corpus ids, and the shared corpus.

    The load report goes to ``log`` (the mteb tasks pass one under mteb's, so ``mteb run``'s verbosity shows or hides
    it). ``extra`` names a file of extra judgements, read only when given; ``keep`` keeps the corpus in the data cache.

    Raises:
        FileNotFoundError: the task has no query or qrels file.
        ValueError: malformed rows, grades outside the intent's scale, a task left without queries or judgements
            after the join, or a fraction among the extra grades.
    """
    query_path, qrels_path = files.for_task(spec)
    corpus = load_corpus(files.corpus, keep=keep)
    report = LoadReport(task=spec.name, query_file=str(query_path), qrels_file=str(qrels_path))
    queries = read_queries(spec, query_path)
    data = join_task(spec, queries, qrels_path, corpus, report=report, gain=gain, log=log,
                     query_source=query_path.name, corpus_source=files.corpus.name)
    if extra is None:
        return data
    report.extra = extra_grades(spec, extra, queries=queries, corpus=corpus, published=data.grades)
    for query_id, judged in report.extra.grades.items():
        data.grades[query_id].update(judged)
        data.relevant_docs[query_id].update({doc: grade_to_gain(g, gain) for doc, g in judged.items()})
    data.same_text = shared_texts(data.grades, corpus.first_copy)  # an added text may have copies too
    report.count_shared(data.same_text)
    (log or logger).info("%s: %s", spec.name, report.extra.summary())
    return data


def join_task(spec: TaskSpec, queries: Mapping[str, str], qrels_path: Path, corpus: Corpus, *, report: LoadReport,
              gain: Gain = "exponential", log: logging.Logger | None = None, query_source: str, corpus_source: str,
              other_queries: frozenset[str] = frozenset(), outside: Corpus | None = None) -> TaskData:
    """Join one task's text-keyed qrels rows to the ids of ``queries`` {id: text} and ``corpus``; gains and report.

    As the authors evaluate: texts match after ``strip()``, exactly otherwise, and every copy of a judged text takes its
    grade; rows whose texts are not found are dropped and counted; a pair judged twice keeps its last grade; queries
    without a judged passage are dropped; unjudged passages count as non-relevant. Rows of ``other_queries`` (the other
    split's texts) and of passages only in ``outside`` (the full corpus around a pooled one) are skipped and counted
    apart. ``report`` is filled in place.

    Raises:
        ValueError: grades outside the intent's scale, or a task left without queries or judgements.
    """
    query_ids_by_text: dict[str, list[str]] = defaultdict(list)
    for query_id, text in queries.items():
        query_ids_by_text[text.strip()].append(query_id)
    query_text_by_id = dict(queries)
    report.queries = len(query_text_by_id)
    report.duplicate_query_texts = sum(len(v) - 1 for v in query_ids_by_text.values())

    top = MAX_GRADE[spec.intent]
    grades: dict[str, dict[str, int]] = defaultdict(dict)
    first_grade: dict[tuple[str, bytes], int] = {}  # (query text, passage digest) -> the grade of its first row
    later_grades: dict[tuple[str, bytes], tuple[str, list[int]]] = {}  # repeated pairs: (passage, later grades)
    ids_by_text = corpus.ids_by_text
    for where, record in read_records(qrels_path, ("user_query", "passage", "score")):
        report.qrels_rows += 1
        grade = record["score"]
        if isinstance(grade, float) and grade.is_integer():
            grade = int(grade)
        if not isinstance(grade, int) or isinstance(grade, bool) or not 0 <= grade <= top:
            raise InvalidInput(f"{qrels_path}: {where} has score {record['score']!r}; task {spec.name} "
                               f"grades are integers 0..{top}.")
        query_text = str(record["user_query"]).strip()
        query_ids = query_ids_by_text.get(query_text)
        if not query_ids:
            if query_text in other_queries:
                report.other_split_rows += 1
                continue
            report.unmatched_query_rows += 1
            if len(report.unmatched_examples) < 3:
                report.unmatched_examples.append(f"query {str(record['user_query'])[:60]!r}")
            continue
        passage_digest = text_digest(str(record["passage"]))  # once a row: corpus.ids_for(passage), the pair's key
        doc_ids = ids_by_text.get(passage_digest, [])
        if not doc_ids:
            if outside is not None and outside.ids_for(str(record["passage"])):
                report.outside_corpus_rows += 1
                continue
            report.unmatched_passage_rows += 1
            if len(report.unmatched_examples) < 3:
                report.unmatched_examples.append(f"passage {str(record['passage'])[:60]!r}")
            continue
        pair = (query_text, passage_digest)
        if pair in first_grade:
            later_grades.setdefault(pair, (str(record["passage"]).strip(), []))[1].append(grade)
        else:
            first_grade[pair] = grade
        for query_id in query_ids:
            judged = grades[query_id]
            for doc_id in doc_ids:
                if doc_id in judged:
                    report.repeated_pairs += 1
                judged[doc_id] = grade

    for pair, (passage, later) in later_grades.items():
        given = [first_grade[pair], *later]
        if len(set(given)) > 1:
            report.conflicting_pairs += 1
            if len(report.conflict_examples) < 3:
                report.conflict_examples.append(f"query {pair[0][:60]!r}, passage {passage[:60]!r}: graded "
                                                f"{', then '.join(map(str, given))}; kept {given[-1]}")
    kept = [qid for qid in query_text_by_id if grades.get(qid)]
    report.queries_kept = len(kept)
    report.queries_without_judgements = report.queries - len(kept)
    report.judgements = sum(len(v) for v in grades.values())
    counts: dict[int, int] = defaultdict(int)
    for judged in grades.values():
        for grade in judged.values():
            counts[grade] += 1
    report.grade_counts = dict(sorted(counts.items()))
    kept_grades = {qid: dict(grades[qid]) for qid in kept}
    same_text = shared_texts(kept_grades, corpus.first_copy)
    report.count_shared(same_text)

    if not kept or not report.judgements:
        raise InvalidInput(
            f"Task {spec.name} has no usable judgements: {qrels_path} has {report.qrels_rows} rows, of which "
            f"{report.unmatched_query_rows} name no query of {query_source} ({report.queries} queries) and "
            f"{report.unmatched_passage_rows} name no passage of {corpus_source}"
            f"{' (e.g. ' + '; '.join(report.unmatched_examples) + ')' if report.unmatched_examples else ''}."
        )
    log_report(report, log or logger)

    # models see stripped queries, as in the authors' pipeline (they strip every user_query)
    query_set = query_dataset(kept, [query_text_by_id[q].strip() for q in kept])
    relevant = {qid: {doc: grade_to_gain(g, gain) for doc, g in grades[qid].items()} for qid in kept}
    return TaskData(queries=query_set, corpus=corpus.dataset, relevant_docs=relevant, grades=kept_grades,
                    report=report, same_text=same_text)

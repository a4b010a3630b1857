"""Extra judgements, only when asked: a ``qrels_with_added/`` folder whose rows fill pairs the published qrels lack.

``disastir-mteb judge`` writes such a folder, and a run reads it only when asked (``run --extra-judgements``, or
:data:`EXTRA_QRELS_ENV` under plain ``mteb run``). A task that read one records it in its ``disastir_data``, so its
scores are never taken for official ones.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disastir_mteb.data.reading import Corpus, read_records, text_digest
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import MAX_GRADE, Split, TaskSpec, parse_task_file

__all__ = ["ADDED_MARKER", "EXTRA_QRELS_ENV", "ExtraReport", "describe_judges", "extra_grades",
           "extra_qrels_file", "read_added_marker", "round_grade"]

#: The environment variable naming the folder of extra judgements (unset: none are read).
EXTRA_QRELS_ENV = "DISASTIR_EXTRA_QRELS_DIR"
#: The export's record of who judged, beside the qrels files.
ADDED_MARKER = "DISASTIR_ADDED_JUDGEMENTS.json"
_JSON_SUFFIXES = (".json", ".jsonl")


def round_grade(grade: float) -> int:
    """A grade rounded half up (1.5 -> 2, 1.33 -> 1, 2.67 -> 3): how a judge's mean vote becomes an integer.

    Half up, not Python's ``round`` (half to even: ``round(2.5) == 2``): a mean of 2 and 3 counts as 3.
    """
    return math.floor(grade + 0.5)


def extra_qrels_file(folder: Path, spec: TaskSpec) -> Path | None:
    """The file of ``spec``'s task in ``folder``, or None when the folder has none for it.

    Raises:
        ValueError: ``spec`` is not a full-set task, or two files of the folder name its task.
    """
    if spec.split is not Split.full:
        raise InvalidInput(f"Extra judgements apply to the full query set's tasks (DisastIR-<Intent>-<Category>), not "
                           f"{spec.name}; run {spec.base.name} with them, or {spec.name} without extra judgements.")
    found = []
    for path in sorted(folder.iterdir()):
        if not path.is_file() or path.name.startswith(".") or path.suffix not in _JSON_SUFFIXES \
                or path.name == ADDED_MARKER:
            continue
        try:
            placed = parse_task_file(path.stem)
        except ValueError:
            continue
        if placed == spec:
            found.append(path)
    if len(found) > 1:
        raise InvalidInput(f"{folder}: both {found[0].name!r} and {found[1].name!r} map to task {spec.name}; remove "
                           "one "
                           "of them.")
    return found[0] if found else None


def read_added_marker(folder: Path) -> dict[str, Any] | None:
    """The export's record in ``folder`` (:data:`ADDED_MARKER`), or None without a readable one."""
    path = folder / ADDED_MARKER
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def describe_judges(folder: Path) -> str | None:
    """Who judged, as the folder's export recorded it (``gpt-4o-mini, prompt version v``); None when not recorded."""
    marker = read_added_marker(folder)
    judges = marker.get("judges") if marker is not None else None
    if not isinstance(judges, list) or not judges:
        return None
    named = [f"{judge.get('judge_model')}, prompt version {judge.get('prompt_version')}" for judge in judges
             if isinstance(judge, dict)]
    rounded = " (grades rounded half up)" if marker is not None and marker.get("rounded") else ""
    return "; ".join(named) + rounded if named else None


@dataclass
class ExtraReport:
    """What reading one task's extra judgements found: rows counted by what became of them, and the grades added."""

    file: str
    rows: int = 0
    added: int = 0
    published: int = 0
    unscored_query_rows: int = 0
    unmatched_query_rows: int = 0
    unmatched_passage_rows: int = 0
    grades: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)

    def summary(self) -> str:
        """One line for the log."""
        return (f"{self.file}: {self.added} extra judgement(s) added from {self.rows} row(s); {self.published} row(s) "
                f"of published pairs kept as published; unmatched rows: {self.unmatched_query_rows} query text, "
                f"{self.unmatched_passage_rows} passage text; {self.unscored_query_rows} row(s) of unscored queries")


def extra_grades(spec: TaskSpec, path: Path, *, queries: Mapping[str, str], corpus: Corpus,
                 published: Mapping[str, Mapping[str, int]]) -> ExtraReport:
    """The grades ``path`` adds to a task: pairs of scored queries that ``published`` leaves without a grade.

    Published grades win (rows of published pairs are counted and left alone). Rows are keyed by text, as the published
    ones, and unmatched rows are counted; only queries with published judgements take extra grades, so the query set
    stays the published one. The report's ``grades`` hold what to add.

    Raises:
        ValueError: a score that is not an integer on the intent's scale (mteb scores integer grades: export a judge's
            mean votes rounded), or two rows grading one pair differently (row order must not pick a score).
    """
    query_ids_by_text: dict[str, list[str]] = defaultdict(list)
    for query_id, text in queries.items():
        query_ids_by_text[text.strip()].append(query_id)
    top = MAX_GRADE[spec.intent]
    report = ExtraReport(file=str(path))
    grades: dict[str, dict[str, int]] = defaultdict(dict)
    first_row: dict[tuple[str, bytes], tuple[int, str]] = {}  # (query text, passage digest) -> (grade, where)
    conflicts: list[tuple[str, str, str, int]] = []  # (query, passage, where, grade) of each row that disagrees
    conflicting: set[tuple[str, bytes]] = set()
    for where, record in read_records(path, ("user_query", "passage", "score")):
        report.rows += 1
        grade = record["score"]
        if isinstance(grade, float) and grade.is_integer():
            grade = int(grade)
        if isinstance(grade, float) and math.isfinite(grade) and 0 <= grade <= top:
            raise InvalidInput(f"{path}: {where} has score {grade!r}, a fraction (a judge's mean vote); mteb scores "
                               f"integer grades, so extra judgements for task {spec.name} must be integers 0..{top}: "
                               "export them with rounded grades (half up), or read the fractions in the completed "
                               "scores (disastir-mteb report --judgements).")
        if not isinstance(grade, int) or isinstance(grade, bool) or not 0 <= grade <= top:
            raise InvalidInput(f"{path}: {where} has score {record['score']!r}; task {spec.name} grades are integers "
                               f"0..{top}.")
        query_text = str(record["user_query"]).strip()
        query_ids = query_ids_by_text.get(query_text)
        if not query_ids:
            report.unmatched_query_rows += 1
            continue
        doc_ids = corpus.ids_for(str(record["passage"]))
        if not doc_ids:
            report.unmatched_passage_rows += 1
            continue
        scored = [query_id for query_id in query_ids if published.get(query_id)]
        if not scored:
            report.unscored_query_rows += 1
            continue
        if all(doc_id in published[query_id] for query_id in scored for doc_id in doc_ids):
            report.published += 1
            continue
        pair = (query_text, text_digest(str(record["passage"])))
        earlier = first_row.setdefault(pair, (grade, where))
        if earlier[0] != grade:
            conflicts.append((query_text, str(record["passage"]).strip(), where, grade))
            conflicting.add(pair)
        for query_id in scored:
            for doc_id in doc_ids:
                if doc_id not in published[query_id]:
                    grades[query_id][doc_id] = grade
    if conflicts:
        query, passage, where, grade = conflicts[0]
        first_grade, first_where = first_row[(query, text_digest(passage))]
        raise InvalidInput(f"{path} grades {len(conflicting)} (query, passage) pair(s) differently in two rows, the "
                           f"first query {query[:60]!r} with passage {passage[:60]!r}: {first_grade} in {first_where}, "
                           f"{grade} in {where}; keep one row per pair (extra judgements give each pair one grade, and "
                           "row order must not pick a score).")
    report.grades = {query_id: dict(judged) for query_id, judged in grades.items()}
    report.added = sum(len(judged) for judged in report.grades.values())
    return report

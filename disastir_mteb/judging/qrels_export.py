"""The completed judgements as files: ``OUT/qrels_with_added/{Intent}_{event}_qrels.json``, the authors' layout.

What DMRetriever's evaluation reads: per task, the published rows as they are, then one row per text pair the merge
fills, sorted so that the same store always writes the same bytes. A marker file beside them says who judged.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from disastir_mteb.data.extra_qrels import ADDED_MARKER, round_grade
from disastir_mteb.data.layout import find_task_files
from disastir_mteb.data.reading import read_records
from disastir_mteb.data.source import DataSource
from disastir_mteb.judging.completed import AddedJudgements, Judge, load_added, merge_grades
from disastir_mteb.judging.holes import load_task_texts
from disastir_mteb.judging.store import JudgementStore
from disastir_mteb.util.atomic import write_json_atomic
from disastir_mteb.util.errors import ExistingOutput
from disastir_mteb.vocabulary.taxonomy import TASK_NAMES, canonical_task_name, get_spec, parse_task_file, task_file_stem

logger = logging.getLogger(__name__)

__all__ = ["FOLDER", "MARKER_FORMAT", "QrelsExport", "export_qrels", "export_store", "qrels_file_name"]

#: The folder the authors' evaluation reads (``QRELS_DIR`` in DMRetriever's ``eva/utils/config.py``).
FOLDER = "qrels_with_added"
#: The format of :data:`~disastir_mteb.data.extra_qrels.ADDED_MARKER`.
MARKER_FORMAT = 1
_KEYS = ("user_query", "passage", "score")


def qrels_file_name(task: str) -> str:
    """``DisastIR-FC-Bio`` -> ``FactCheck_Biological_qrels.json``: the published and the authors' file name."""
    spec = get_spec(task)
    return f"{task_file_stem(spec.intent, spec.category)}_qrels.json"


@dataclass(frozen=True)
class QrelsExport:
    """What :func:`export_qrels` wrote, per task; ``removed`` lists the files of an earlier export it replaced."""

    folder: Path
    files: dict[str, Path]
    published: dict[str, int]
    added: dict[str, int]
    judges: dict[Judge, int]
    rounded: bool
    removed: tuple[Path, ...] = ()

    def describe(self) -> str:
        """One sentence for the command line."""
        judges = "; ".join(f"{model} (prompt version {version}): {count:,}"
                           for (model, version), count in sorted(self.judges.items())) or "none"
        how = "rounded half up" if self.rounded else "as judged"
        return (f"Wrote {len(self.files)} qrels file(s) to {self.folder}: {sum(self.published.values()):,} published "
                f"row(s) kept and {sum(self.added.values()):,} added row(s), grades {how}; judges: {judges}.")


def _grade(value: float, rounded: bool) -> int | float:
    if rounded:
        return round_grade(value)
    return int(value) if float(value).is_integer() else value


def export_qrels(out: str | Path, added: AddedJudgements, data_dir: str | Path | None = None, *,
                 tasks: Iterable[str] | None = None, rounded: bool = False, overwrite: bool = False) -> QrelsExport:
    """Write ``out/qrels_with_added/``: each task's published rows, then the rows ``added`` fills (default: 48 tasks).

    Grades stay as judged (a mean vote 1.67, as the authors' scorer writes it) unless ``rounded``: half up, for
    ``run --extra-judgements``, which takes integers only. ``overwrite`` replaces an earlier export and removes its
    task files this one does not write, so the folder never mixes two exports.

    Raises:
        FileExistsError: ``out/qrels_with_added`` already holds files and ``overwrite`` is False.
        ValueError: a task that is not a full-set task, or bad data.
        FileNotFoundError: no data.
    """
    folder = Path(out) / FOLDER
    names = list(dict.fromkeys(map(canonical_task_name, tasks))) if tasks is not None else list(TASK_NAMES)
    earlier = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")) \
        if folder.is_dir() else []
    if earlier and not overwrite:
        raise ExistingOutput(f"{folder} already holds {len(earlier)} file(s) (first: {earlier[0].name}); pass "
                             "overwrite=True (--overwrite) to replace that export, or choose another folder.")
    data = Path(data_dir) if data_dir is not None else DataSource.from_environment().main_folder()
    published_files = find_task_files(data).qrels
    files: dict[str, Path] = {}
    kept: dict[str, int] = {}
    appended: dict[str, int] = {}
    judges: Counter[Judge] = Counter()
    for task in names:
        spec = get_spec(task)
        texts = load_task_texts(task, data)
        merged = merge_grades(texts, added)
        rows: list[dict[str, Any]] = [record for _, record in read_records(published_files[spec], _KEYS)]
        kept[task] = len(rows)
        seen: set[tuple[str, str]] = set()
        for query_id, doc_id in sorted(merged.added):
            query, passage = texts.queries[query_id], texts.passages[doc_id]
            if (query.strip(), passage.strip()) in seen:
                continue  # copies of one text: one row gives its grade to every copy
            seen.add((query.strip(), passage.strip()))
            rows.append({"user_query": query, "passage": passage,
                         "score": _grade(merged.grades[query_id][doc_id], rounded)})
            judges[merged.added[(query_id, doc_id)]] += 1
        appended[task] = len(rows) - kept[task]
        files[task] = write_json_atomic(folder / qrels_file_name(task), rows)
    removed = []
    for path in earlier:
        try:
            stale = path.name != ADDED_MARKER and parse_task_file(path.stem).name not in files
        except ValueError:
            stale = False
        if stale:
            path.unlink()
            removed.append(path)
    write_json_atomic(folder / ADDED_MARKER, {
        "format": MARKER_FORMAT, "store": added.store, "rounded": rounded,
        "judges": [{"judge_model": model, "prompt_version": version, "rows": count}
                   for (model, version), count in sorted(judges.items())],
        "tasks": {task: {"published_rows": kept[task], "added_rows": appended[task]} for task in names}})
    export = QrelsExport(folder, files, kept, appended, dict(judges), rounded, tuple(removed))
    logger.info("%s", export.describe())
    return export


def export_store(store_path: str | Path, out: str | Path, *, judge_model: str | None = None,
                 prompt_version: str | None = None, data: DataSource | None = None,
                 tasks: Iterable[str] | None = None, rounded: bool = False, overwrite: bool = False) -> QrelsExport:
    """``export --format qrels-with-added``: a store's graded judgements (of one judge, if named) added to the qrels."""
    with JudgementStore(store_path) as store:
        added = load_added(store, judge_model=judge_model, prompt_version=prompt_version)
    return export_qrels(out, added, data.main_folder() if data is not None else None, tasks=tasks, rounded=rounded,
                        overwrite=overwrite)

"""The completed judgements as files: ``OUT/qrels_with_added/{Intent}_{event}_qrels.json``, the authors' layout.

The DMRetriever authors evaluate against ``qrels_with_added/``: per task, the published qrels rows plus the rows
added after the pool was built, each row a JSON object ``{"user_query", "passage", "score"}`` in one JSON array.
:func:`export_qrels` writes that folder from the published data and a judgement store:

- **File names** as the published files and the authors' evaluation name them: the task's published stem
  (:func:`~disastir_mteb.vocabulary.taxonomy.task_file_stem`: ``INTENT_FILE_KEYS`` and the category's full name,
  ``FactCheck_Biological``) and ``_qrels.json``.
- **Published rows as they are**, in their order, then the added rows: one per (query text, passage text) the
  merge fills (:func:`~disastir_mteb.judging.completed.merge_grades`: never a pair with a published grade), texts
  as published, sorted by query id and corpus id so that the same store always writes the same bytes.
- **Grades**: as judged (a mean vote stays 1.67, as the authors' scorer writes it), or rounded half up
  (``rounded=True``, :func:`~disastir_mteb.data.extra_qrels.round_grade`) for a run that reads the folder as
  extra judgements: mteb scores integer grades, and the loader refuses fractions.
- **Who judged**: :data:`~disastir_mteb.data.extra_qrels.ADDED_MARKER` beside the files (store, judge models and
  prompt versions, counts per task, whether rounded); a run reading the folder names the judges from it.

Every file is written atomically; nothing is written into result files or the data folder.
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
    """What :func:`export_qrels` wrote.

    Attributes:
        folder: ``OUT/qrels_with_added``.
        files: task -> its file.
        published: task -> published rows kept.
        added: task -> rows appended.
        judges: judge (model, prompt version) -> rows appended over every task.
        rounded: whether grades were rounded half up.
        removed: files of an earlier export removed (``overwrite``), tasks this one did not write.
    """

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
    """Write ``out/qrels_with_added/``: each task's published rows, then the rows ``added`` fills.

    Args:
        out: the folder to write ``qrels_with_added/`` into.
        added: the judgements (:func:`~disastir_mteb.judging.completed.load_added`).
        data_dir: the published data (default: ``DISASTIR_DATA_DIR``, else the Hub).
        tasks: the full-set tasks to write (default: all 48, as the authors' folder holds).
        rounded: round every added grade half up (for ``run --extra-judgements``, which takes integers only).
        overwrite: replace an earlier export there (its task files this export does not write are removed, so the
            folder never mixes two exports).

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
    """``export --format qrels-with-added``: a store's graded judgements added to the qrels, by :func:`export_qrels`.

    ``judge_model``, ``prompt_version``: whose judgements (:func:`~disastir_mteb.judging.completed.load_added`);
    ``data``: the published data (default: the environment's, else the Hub).
    """
    with JudgementStore(store_path) as store:
        added = load_added(store, judge_model=judge_model, prompt_version=prompt_version)
    return export_qrels(out, added, data.main_folder() if data is not None else None, tasks=tasks, rounded=rounded,
                        overwrite=overwrite)

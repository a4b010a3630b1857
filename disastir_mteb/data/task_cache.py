"""The full set's tasks loaded from the data cache: each task's join read back instead of computed again.

An entry holds the join's result, never a second implementation of it, keyed by the content of the task's files
and of the code. Tasks read with extra judgements, and the Test and DevLite tasks, are joined at every load. A file
the load refuses never gets an entry: the checks run first, and their code is part of the key.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import sys
from collections.abc import Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from disastir_mteb.data import published, reading
from disastir_mteb.data.data_cache import (
    cache_folder,
    code_digest,
    entry_key,
    read_entry,
    source_digest,
    unusable,
    write_entry,
)
from disastir_mteb.data.layout import TaskFiles
from disastir_mteb.data.published import (
    Gain,
    LoadReport,
    TaskData,
    grade_to_gain,
    load_task,
    log_report,
    query_dataset,
)
from disastir_mteb.data.reading import Corpus, load_corpus
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary import taxonomy
from disastir_mteb.vocabulary.taxonomy import Split, TaskSpec

logger = logging.getLogger(__name__)

__all__ = ["load_cached_task"]

#: Report fields that name the files read: filled from the folder being read, never from the entry.
_NAMES = ("task", "query_file", "qrels_file", "extra")


def load_cached_task(spec: TaskSpec, files: TaskFiles, *, gain: Gain = "exponential",
                     log: logging.Logger | None = None, extra: Path | None = None, keep: bool = True) -> TaskData:
    """:func:`~disastir_mteb.data.published.load_task`, its join read from the data cache when it holds it.

    With ``extra`` judgements, or with ``keep`` False (the cache off), the task is joined and nothing is written.

    Raises:
        FileNotFoundError: as ``load_task``.
        ValueError: as ``load_task``; or ``spec`` is a DisastIR-Test or DevLite task (those load through
            :func:`disastir_mteb.data.devlite.load_split_task`).
    """
    if spec.split is not Split.full:
        raise InvalidInput(f"{spec.name} is not a full-set task; load it with "
                           "disastir_mteb.data.devlite.load_split_task.")
    folder = cache_folder(keep)
    if folder is None or extra is not None:
        return load_task(spec, files, gain=gain, log=log, extra=extra, keep=keep)
    query_path, qrels_path = files.for_task(spec)
    corpus = load_corpus(files.corpus)
    sources = {"query": query_path, "qrels": qrels_path, "corpus": files.corpus}
    digests = {name: source_digest(path) for name, path in sources.items()}
    key = entry_key(f"task {spec.name}", code_digest(published, reading, taxonomy, sys.modules[__name__]), digests)
    entry = folder / spec.name / f"{key}.checked"
    data = _cached(entry, key, spec, corpus, gain=gain, log=log or published.logger,
                   files=(query_path, qrels_path))
    if data is None:
        data = load_task(spec, files, gain=gain, log=log)
        if {name: source_digest(path) for name, path in sources.items()} == digests:  # never another file's join
            _keep(entry, key, data, corpus)
    return data


def _keep(entry: Path, key: str, data: TaskData, corpus: Corpus) -> None:
    """Write a task's entry: its kept queries and report as JSON, its judged pairs and shared texts as arrays."""
    import numpy as np

    judged = list(data.grades.values())
    doc_ids = list(chain.from_iterable(judged))
    report = {name: value for name, value in dataclasses.asdict(data.report).items() if name not in _NAMES}
    report["grade_counts"] = [[grade, count] for grade, count in data.report.grade_counts.items()]
    queries = data.queries.data
    meta = {"queries": {"id": queries.column("id").to_pylist(), "text": queries.column("text").to_pylist()},
            "report": report}
    write_entry(entry, key, meta, {
        "offsets": np.cumsum([0, *map(len, judged)], dtype=np.int64).tobytes(),
        "rows": np.array(_pick(corpus.rows, doc_ids), dtype=np.int32).tobytes(),
        "grades": np.fromiter(chain.from_iterable(map(dict.values, judged)), dtype=np.int8,
                              count=len(doc_ids)).tobytes(),
        "same_text": np.array([_pick(corpus.rows, list(side)) for side in (data.same_text, data.same_text.values())],
                              dtype=np.int32).T.tobytes(),  # rows of (id, the id standing for its text), in order
    })


def _pick(values: Sequence[Any] | Mapping[Any, Any], keys: list[Any]) -> list[Any]:
    """``[values[key] for key in keys]``, at C speed."""
    return list(operator.itemgetter(*keys)(values)) if len(keys) > 1 else [values[key] for key in keys]


def _cached(entry: Path, key: str, spec: TaskSpec, corpus: Corpus, *, gain: Gain, log: logging.Logger,
            files: tuple[Path, Path]) -> TaskData | None:
    """A task read back from its entry, or None (absent, or damaged: one warning)."""
    import numpy as np

    found = read_entry(entry, key, f"task {spec.name}")
    if found is None:
        return None
    try:
        queries: dict[str, Any] = found.meta["queries"]
        offsets = np.frombuffer(found.sections["offsets"], dtype=np.int64).tolist()
        rows = np.frombuffer(found.sections["rows"], dtype=np.int32)
        grade_array = np.frombuffer(found.sections["grades"], dtype=np.int8)
        pairs = np.frombuffer(found.sections["same_text"], dtype=np.int32).reshape(-1, 2).tolist()
        if len(offsets) != len(queries["id"]) + 1 or len(queries["text"]) != len(queries["id"]) \
                or offsets[0] != 0 or not offsets[-1] == len(rows) == len(grade_array) \
                or (len(rows) and not 0 <= int(rows.min()) <= int(rows.max()) < len(corpus.ids)):
            raise InvalidInput("its arrays do not fit together or the corpus")
        report_fields = dict(found.meta["report"])
        report_fields["grade_counts"] = {int(grade): int(count) for grade, count in report_fields["grade_counts"]}
        report = LoadReport(task=spec.name, query_file=str(files[0]), qrels_file=str(files[1]), **report_fields)
    except (ValueError, KeyError, TypeError) as error:
        unusable(entry, f"task {spec.name}", f"it holds no task this version reads: {error}")
        return None
    doc_ids = _pick(corpus.ids, rows.tolist())
    grade_list = grade_array.tolist()
    gains = [grade_to_gain(grade, gain) for grade in range(int(grade_array.max(initial=0)) + 1)]
    gain_list = np.array(gains, dtype=np.int64)[grade_array].tolist()
    grades: dict[str, dict[str, int]] = {}
    relevant: dict[str, dict[str, int]] = {}
    for number, query_id in enumerate(queries["id"]):
        start, stop = offsets[number], offsets[number + 1]
        judged = doc_ids[start:stop]
        grades[query_id] = dict(zip(judged, grade_list[start:stop], strict=True))
        relevant[query_id] = dict(zip(judged, gain_list[start:stop], strict=True))
    same_text = dict(zip(_pick(corpus.ids, [doc for doc, _ in pairs]), _pick(corpus.ids, [first for _, first in pairs]),
                         strict=True))
    log_report(report, log)
    return TaskData(queries=query_dataset(queries["id"], queries["text"]), corpus=corpus.dataset,
                    relevant_docs=relevant, grades=grades, report=report, same_text=same_text)

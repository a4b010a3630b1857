"""A built benchmark written in DisastIR's published layout, atomically, with the marker that says what it is.

The same files the published data has (``corpus.jsonl``, ``query/<stem>.json``, ``qrels/<stem>_qrels.json``, judged
pairs keyed by their texts), so every reader of the project reads it; only the tasks that have queries get files.
The marker (``DISASTIR_SAMPLE.json``, ``"kind": "built"``) names the benchmark and holds its provenance: sources and
their digests and licences, models, prompt versions, seed. Bytes depend only on the build's inputs, never on time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from disastir_mteb.data.layout import MARKER
from disastir_mteb.util.atomic import error_naming, staged_folder
from disastir_mteb.vocabulary.taxonomy import Category, Intent, task_file_stem

__all__ = ["BUILT_KIND", "BuiltQuery", "write_layout"]

#: The marker's ``kind`` for a built benchmark (beside ``synthetic``, which keeps it out of submissions).
BUILT_KIND = "built"


@dataclass(frozen=True)
class BuiltQuery:
    """One query of a task with its judged passages: (passage text, grade)."""

    query_id: str
    text: str
    judged: Sequence[tuple[str, float]]


def _json_line(row: Mapping[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False)


def write_layout(out: str | Path, corpus: Sequence[tuple[str, str]],
                 tasks: Mapping[tuple[Intent, Category], Sequence[BuiltQuery]], marker: Mapping[str, Any]) -> Path:
    """Write ``corpus`` (id, text) and ``tasks`` into ``out`` as one rename; tasks without queries get no files."""
    out, staging = Path(out), None
    try:
        with staged_folder(out) as staging:
            _write(staging, corpus, tasks, marker)
    except OSError as error:  # a full disk while writing: name the folder being written, not a hidden temporary
        raise error_naming(error, out, staging) from None
    return out


def _write(root: Path, corpus: Sequence[tuple[str, str]],
           tasks: Mapping[tuple[Intent, Category], Sequence[BuiltQuery]], marker: Mapping[str, Any]) -> None:
    with open(root / "corpus.jsonl", "w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(_json_line({"corpus_id": pid, "text": text}) + "\n" for pid, text in corpus)
    (root / "query").mkdir()
    (root / "qrels").mkdir()
    for (intent, category), queries in sorted(tasks.items(), key=lambda item: task_file_stem(*item[0])):
        if not queries:
            continue
        stem = task_file_stem(intent, category)
        rows = [_json_line({"query_id": q.query_id, "user_query": q.text}) for q in queries]
        (root / "query" / f"{stem}.json").write_text("[\n" + ",\n".join(rows) + "\n]\n", encoding="utf-8")
        judged = [_json_line({"user_query": q.text, "passage": passage, "score": _grade(grade)})
                  for q in queries for passage, grade in q.judged]
        (root / "qrels" / f"{stem}_qrels.json").write_text("[\n" + ",\n".join(judged) + "\n]\n",
                                                             encoding="utf-8")
    (root / MARKER).write_text(json.dumps({"synthetic": True, "kind": BUILT_KIND, **marker}, indent=1,
                                          ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")


def _grade(grade: float) -> float | int:
    """A grade as the published files write it: an integer where it is one (the mean of three votes may not be)."""
    return int(grade) if float(grade).is_integer() else round(float(grade), 6)

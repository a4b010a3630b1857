"""Export DisastIR tasks as BEIR folders, for tools that speak BEIR, not mteb.

One ``GenericDataLoader`` folder per task; the corpus is written once and linked into each::

    <out>/corpus.jsonl              {"_id", "title": "", "text"}
    <out>/<Task>/corpus.jsonl       hard link to ../corpus.jsonl (else symlink, else copy)
    <out>/<Task>/queries.jsonl      {"_id", "text"}
    <out>/<Task>/qrels/test.tsv     query-id, corpus-id, score (integer gain)
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disastir_mteb.data.published import GAINS
from disastir_mteb.exports.common import (
    EXPORT_MARKER,
    check_corpus,
    describe_source,
    export_data,
    export_task_names,
    load_for_export,
    staged_export,
)
from disastir_mteb.util.errors import InvalidInput

if TYPE_CHECKING:
    from datasets import Dataset

    from disastir_mteb.data.source import DataSource

logger = logging.getLogger(__name__)

__all__ = ["export_beir"]

_GAIN_TEXT = {
    "exponential": "exponential gain, score = 2^grade - 1 (the authors' NDCG@10 under trec_eval / pytrec_eval)",
    "linear": "linear gain, score = the raw grade (0-3, 0-5 for STS)",
}


def _share(src: Path, dst: Path) -> str:
    """Make ``dst`` the same file as ``src``: hard link, else relative symlink, else a copy."""
    try:
        os.link(src, dst)
        return "hard link"
    except OSError:
        pass
    try:
        os.symlink(os.path.relpath(src, dst.parent), dst)
        logger.info("%s: hard links refused, symlinked the shared corpus instead.", dst.parent)
        return "symlink"
    except OSError:
        logger.info("%s: links refused, copied the shared corpus instead.", dst.parent)
        shutil.copyfile(src, dst)
        return "copy"


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def _beir_corpus_rows(corpus: Dataset) -> Iterator[dict[str, Any]]:
    for batch in corpus.iter(batch_size=10_000):
        titles = batch.get("title") or [""] * len(batch["id"])
        for doc_id, title, text in zip(batch["id"], titles, batch["text"], strict=True):
            yield {"_id": doc_id, "title": title or "", "text": text}


def _write_qrels_tsv(path: Path, relevant_docs: dict[str, dict[str, int]], name: str) -> int:
    """BEIR's qrels file; ids holding a tab, newline or quote would be misread, so they are refused."""
    rows = 0
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for query_id, judged in relevant_docs.items():
            for doc_id, score in judged.items():
                if any(c in query_id + doc_id for c in '\t\n\r"'):
                    raise InvalidInput(f"Task {name}: id {query_id!r} or {doc_id!r} holds a tab, newline or quote, "
                                       "which BEIR's qrels TSV cannot carry.")
                handle.write(f"{query_id}\t{doc_id}\t{int(score)}\n")
                rows += 1
    return rows


def export_beir(
    out: str | Path,
    tasks: Iterable[str] | None = None,
    *,
    gain: str | None = None,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
    data: DataSource | None = None,
) -> list[Path]:
    """Write each task (all 48 when None) as a BEIR folder under ``out``, and return the task folders.

    ``gain`` (``"exponential"`` or ``"linear"``) sets the qrels values; None keeps the tasks' own, so the export
    scores like the tasks. ``progress`` gets one line per task.

    Raises:
        KeyError: an unknown task name.
        ValueError: an unknown gain, or no tasks.
        FileExistsError: ``out`` is not empty and ``overwrite`` is False, or is not an earlier export.
    """
    if gain is not None and gain not in GAINS:
        raise InvalidInput(f"Unknown gain {gain!r} for the BEIR export; expected one of {list(GAINS)} or None.")
    names = export_task_names(tasks)
    source = export_data(data)
    out = Path(out).expanduser().absolute()
    say = progress or (lambda _message: None)
    shared: Dataset | None = None
    used_gain = gain
    with staged_export(out, overwrite) as tmp:
        corpus_file = tmp / "corpus.jsonl"
        for name in names:
            task, data = load_for_export(name, gain, source)  # type: ignore[arg-type]  # validated above
            if shared is None:
                shared, used_gain = data["corpus"], task.gain
                _write_jsonl(corpus_file, _beir_corpus_rows(shared))
            check_corpus(shared, data["corpus"], name)
            folder = tmp / name
            (folder / "qrels").mkdir(parents=True)
            how = _share(corpus_file, folder / "corpus.jsonl")
            _write_jsonl(folder / "queries.jsonl",
                         ({"_id": q, "text": t} for q, t in zip(data["queries"]["id"], data["queries"]["text"],
                                                                 strict=True)))
            rows = _write_qrels_tsv(folder / "qrels" / "test.tsv", data["relevant_docs"], name)
            say(f"{name}: {len(data['queries'])} queries, {rows} judgements, corpus by {how}")
        passages = len(shared) if shared is not None else 0
        readme = _beir_readme(names, used_gain, passages, describe_source(source))
        (tmp / "README.md").write_text(readme, encoding="utf-8")
    logger.info("Exported %d DisastIR task(s) in BEIR format to %s (%s gain).", len(names), out, used_gain)
    return [out / name for name in names]


def _beir_readme(names: list[str], gain: str | None, passages: int, source: str) -> str:
    return f"""# DisastIR in BEIR format

{EXPORT_MARKER}

{len(names)} DisastIR task(s) exported by `disastir_mteb.export.export_beir` from {source}.
Each task folder is a BEIR `GenericDataLoader` folder (`corpus.jsonl`, `queries.jsonl`,
`qrels/test.tsv`). The {passages:,}-passage corpus is shared by all tasks: it is written once as
`corpus.jsonl` here and linked into every task folder (hard link, else symlink, else copy).

Qrels `score`: {_GAIN_TEXT.get(gain or "", gain)}. Unjudged passages count as non-relevant.

```python
from beir.datasets.data_loader import GenericDataLoader
from beir.retrieval.evaluation import EvaluateRetrieval

corpus, queries, qrels = GenericDataLoader(data_folder="{names[0]}").load(split="test")
# results = {{query_id: {{doc_id: similarity}}}} from your retriever, top 10 at least
ndcg, _map, recall, precision = EvaluateRetrieval.evaluate(qrels, results, [10])
```

Tasks: {", ".join(names)}.
"""

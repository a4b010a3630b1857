"""Export DisastIR tasks as one mteb-native Hugging Face dataset, ready to push to the Hub for upstreaming.

One dataset repository for all tasks::

    <out>/README.md                         dataset card; its ``configs:`` block maps names to files
    <out>/corpus/test.parquet               id, text (shared by every task)
    <out>/queries/<subset>/test.parquet     id, text
    <out>/qrels/<subset>/test.parquet       query-id, corpus-id, score (int32), grade (int32)

mteb's ``RetrievalDatasetLoader`` with ``config="QA-Bio"`` reads the configs ``QA-Bio-corpus``, ``-queries`` and
``-qrels``. ``score`` is the exponential gain 2^grade - 1, so stock mteb (pytrec_eval, linear in ``score``)
reports the authors' NDCG@10; ``grade`` is the raw grade, which mteb's loader does not read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disastir_mteb.exports.common import (
    EXPORT_MARKER,
    check_corpus,
    describe_source,
    export_data,
    export_task_names,
    load_for_export,
    staged_export,
)
from disastir_mteb.vocabulary.taxonomy import get_spec

if TYPE_CHECKING:
    import pyarrow as pa
    from datasets import Dataset

    from disastir_mteb.data.source import DataSource

logger = logging.getLogger(__name__)

__all__ = ["export_mteb", "mteb_subset"]


def mteb_subset(task: str) -> str:
    """The config prefix of a task in the mteb export: ``DisastIR-QA-Bio`` -> ``QA-Bio``.

    Raises:
        KeyError: ``task`` is not one of the 48 task names.
    """
    spec = get_spec(task)
    return f"{spec.intent.value}-{spec.category.value}"


def export_mteb(
    out: str | Path,
    tasks: Iterable[str] | None = None,
    *,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
    data: DataSource | None = None,
) -> Path:
    """Write the tasks (all 48 when None) as an mteb-native dataset folder ``out``, and return it.

    Raises:
        KeyError: an unknown task name.
        ValueError: no tasks.
        FileExistsError: ``out`` is not empty and ``overwrite`` is False, or is not an earlier export.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = export_task_names(tasks)
    source = export_data(data)
    out = Path(out).expanduser().absolute()
    say = progress or (lambda _message: None)
    qrels_schema = pa.schema([("query-id", pa.string()), ("corpus-id", pa.string()),
                              ("score", pa.int32()), ("grade", pa.int32())])
    shared: Dataset | None = None
    with staged_export(out, overwrite) as tmp:
        for name in names:
            task, data = load_for_export(name, "exponential", source)
            if shared is None:
                shared = data["corpus"]
                (tmp / "corpus").mkdir()
                pq.write_table(_arrow(shared), tmp / "corpus" / "test.parquet")
            check_corpus(shared, data["corpus"], name)
            subset = mteb_subset(name)
            grades = task.grades(task.metadata.eval_splits[0])  # raw grades kept by the task beside its gains
            rows: dict[str, list[Any]] = {"query-id": [], "corpus-id": [], "score": [], "grade": []}
            for query_id, judged in data["relevant_docs"].items():
                for doc_id, score in judged.items():
                    rows["query-id"].append(query_id)
                    rows["corpus-id"].append(doc_id)
                    rows["score"].append(int(score))
                    rows["grade"].append(grades[query_id][doc_id])
            for part in ("queries", "qrels"):
                (tmp / part / subset).mkdir(parents=True)
            pq.write_table(_arrow(data["queries"]), tmp / "queries" / subset / "test.parquet")
            pq.write_table(pa.table(rows, schema=qrels_schema), tmp / "qrels" / subset / "test.parquet")
            say(f"{name}: subset {subset}, {len(data['queries'])} queries, {len(rows['score'])} judgements")
        passages = len(shared) if shared is not None else 0
        (tmp / "README.md").write_text(_dataset_card(names, passages, describe_source(source)), encoding="utf-8")
    logger.info("Exported %d DisastIR task(s) as an mteb dataset to %s.", len(names), out)
    return out


def _arrow(dataset: Dataset) -> pa.Table:
    """The rows of a ``Dataset`` as one Arrow table (no copy when it has no index mapping)."""
    return dataset.with_format("arrow")[:]


def _config(name: str, path: str) -> str:
    return f"- config_name: {name}\n  data_files:\n  - split: test\n    path: {path}\n"


def _dataset_card(names: list[str], passages: int, source: str) -> str:
    # Every <subset>-corpus config points at the one corpus file. No config is named "query": mteb's loader would
    # read it instead of <subset>-queries.
    configs = [_config("corpus", "corpus/test.parquet")]
    for name in names:
        subset = mteb_subset(name)
        configs += [_config(f"{subset}-corpus", "corpus/test.parquet"),
                    _config(f"{subset}-queries", f"queries/{subset}/test.parquet"),
                    _config(f"{subset}-qrels", f"qrels/{subset}/test.parquet")]
    first = names[0]
    return f"""---
license: cc-by-4.0
language:
- en
task_categories:
- text-retrieval
pretty_name: DisastIR (mteb format)
configs:
{"".join(configs)}---

# DisastIR (mteb format)

{EXPORT_MARKER}

{len(names)} DisastIR disaster-management retrieval task(s) in the format mteb's `RetrievalDatasetLoader`
reads, exported by `disastir_mteb.export.export_mteb` from {source}. All tasks share one corpus of
{passages:,} passages (`corpus/test.parquet`); task `DisastIR-{{Intent}}-{{Category}}` has the configs
`{{Intent}}-{{Category}}-corpus`, `-queries` and `-qrels`.

Qrels: `score` = 2^grade - 1 (exponential gain; mteb's `ndcg_at_10` then equals the authors' NDCG@10),
`grade` = the raw grade (0-3, 0-5 for STS). Unjudged passages count as non-relevant.

```python
import datasets
qrels = datasets.load_dataset("<this repo>", "{mteb_subset(first)}-qrels", split="test")

# the loader mteb's upstream DisastIR tasks use (their data goes to the `default` subset)
from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader
split = RetrievalDatasetLoader("<this repo>", "<commit>", config="{mteb_subset(first)}").load()
```

Config prefixes: {", ".join(mteb_subset(n) for n in names)}.
"""

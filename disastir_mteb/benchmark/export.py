"""Export DisastIR tasks as BEIR folders or as an mteb-native Hugging Face dataset.

Both exports read the data through the mteb task objects (``task.load_data()``), so what is
written is by construction what the tasks score: same ids, same stripped texts, same judgements.
The shared corpus is loaded once per process (:func:`disastir_mteb.benchmark.data.load_corpus` caches it)
and written once per export.

BEIR layout (:func:`export_beir`), one ``GenericDataLoader`` folder per task::

    <out>/README.md                 what this is, the gain used, how to load it
    <out>/corpus.jsonl              {"_id", "title": "", "text"}, written once
    <out>/<Task>/corpus.jsonl       hard link to ../corpus.jsonl (else symlink, else copy)
    <out>/<Task>/queries.jsonl      {"_id", "text"}
    <out>/<Task>/qrels/test.tsv     query-id, corpus-id, score (integer gain)

mteb layout (:func:`export_mteb`), one Hugging Face dataset repository for all tasks::

    <out>/README.md                         dataset card; its ``configs:`` block maps names to files
    <out>/corpus/test.parquet               id, text (shared by every task)
    <out>/queries/<subset>/test.parquet     id, text
    <out>/qrels/<subset>/test.parquet       query-id, corpus-id, score (int32), grade (int32)

Subset naming: task ``DisastIR-{Intent}-{Category}`` is hf_subset ``{Intent}-{Category}``
(``DisastIR-QA-Bio`` -> ``QA-Bio``, see :func:`mteb_subset`). mteb's ``RetrievalDatasetLoader``
reads configs ``<subset>-corpus``, ``<subset>-queries`` and ``<subset>-qrels`` for a task whose
``eval_langs`` is ``{"<subset>": ["eng-Latn"]}``; every ``<subset>-corpus`` config points at the one
corpus file, so 48 tasks share one repository and one copy of the corpus with no custom loading
code. A plain ``corpus`` config is there too for people who just want the passages. No config is
named ``query``: mteb's loader would read it instead of ``<subset>-queries``.

Scores in the mteb export: ``score`` is the exponential gain 2^grade - 1 (0, 1, 3, 7; 15 and 31
for STS) and ``grade`` the raw grade. mteb evaluates with pytrec_eval, which takes ``score`` as a
linear gain, so an upstream task reading this dataset reports the authors' NDCG@10 with stock
mteb code; MAP, recall, precision and MRR only ask whether ``score`` > 0 and do not change.
mteb's loader selects only ``query-id``, ``corpus-id`` and ``score``, so the extra ``grade`` column
costs nothing there; the grade is also recoverable as log2(score + 1).

Writes are atomic at folder level: everything is written into a temporary folder beside ``out``
and renamed into place with ``os.replace``, so a killed export leaves no half-written file or
folder behind. A folder that is not empty is refused unless ``overwrite=True``, and even then
only an earlier export (its README carries this module's marker) is replaced. Nothing is written
through a symbolic link: links inside ``out`` go with the old folder, and an ``out`` that is a
link is replaced by the new folder, leaving its target untouched.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disastir_mteb.benchmark.data import DATA_DIR_ENV, GAINS, Gain
from disastir_mteb.benchmark.taxonomy import TASK_NAMES, get_spec

if TYPE_CHECKING:
    import pyarrow as pa
    from datasets import Dataset
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData

    from disastir_mteb.benchmark.tasks import AbsTaskDisastIR

logger = logging.getLogger(__name__)

__all__ = ["export_beir", "export_mteb", "mteb_subset"]

_MARKER = "<!-- written by disastir_mteb.benchmark.export -->"
_GAIN_TEXT = {
    "exponential": "exponential gain, score = 2^grade - 1 (the authors' NDCG@10 under trec_eval / pytrec_eval)",
    "linear": "linear gain, score = the raw grade (0-3, 0-5 for STS)",
}


def mteb_subset(task: str) -> str:
    """The hf_subset of a task in the mteb export: ``DisastIR-QA-Bio`` -> ``QA-Bio``.

    Raises:
        KeyError: ``task`` is not one of the 48 task names.
    """
    spec = get_spec(task)
    return f"{spec.intent.value}-{spec.category.value}"


# --------------------------------------------------------------------------- shared helpers


def _task_names(tasks: Iterable[str] | None) -> list[str]:
    """Validated task names in the given order, without repeats; all 48 when None."""
    if tasks is None:
        return list(TASK_NAMES)
    names = list(dict.fromkeys([tasks] if isinstance(tasks, str) else tasks))
    for name in names:
        get_spec(name)  # KeyError with close matches for an unknown name
    if not names:
        raise ValueError("No DisastIR tasks to export: pass task names, or None for all 48.")
    return names


def _load(name: str, gain: Gain | None) -> tuple[AbsTaskDisastIR, RetrievalSplitData]:
    """One task loaded exactly as mteb loads it, and its evaluation split."""
    from disastir_mteb.benchmark.tasks import TASK_CLASSES

    task = TASK_CLASSES[name](gain=gain)
    task.load_data()
    return task, task.dataset["default"][task.metadata.eval_splits[0]]


def _source() -> str:
    """Where the exported data came from, for the README."""
    from disastir_mteb.benchmark.tasks import DATASET_REPO, DATASET_REVISION

    local = os.environ.get(DATA_DIR_ENV)
    return f"the local folder {local} ({DATA_DIR_ENV})" if local else f"{DATASET_REPO} at revision {DATASET_REVISION}"


def _check_corpus(shared: Dataset, corpus: Dataset, name: str) -> None:
    """Every task must see the one corpus written once (data.py caches it per process)."""
    if corpus is not shared and len(corpus) != len(shared):
        raise ValueError(f"Task {name} loaded a corpus of {len(corpus)} passages, not the {len(shared)} already "
                         "exported; the data folder changed during the export, so rerun it.")


def _refuse(out: Path, overwrite: bool) -> None:
    """Raise unless ``out`` is absent, empty, or (with ``overwrite``) an earlier export."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"Cannot export to {out}: it is a file, not a folder.")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not overwrite:
        raise FileExistsError(f"Refusing to export to {out}: it exists and is not empty; pass overwrite=True "
                              "(--overwrite) to replace an earlier export.")
    readme = out / "README.md"
    if not (readme.is_file() and _MARKER in readme.read_text(encoding="utf-8", errors="replace")):
        raise FileExistsError(f"Refusing to overwrite {out}: it is not a DisastIR export (no README.md written "
                              "by disastir_mteb.benchmark.export), so choose a new or empty folder.")


@contextmanager
def _staged_folder(out: Path, overwrite: bool) -> Iterator[Path]:
    """Yield a temporary folder beside ``out``; on success rename it to ``out`` (atomically)."""
    _refuse(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        _refuse(out, overwrite)  # another process may have written it meanwhile
        if out.is_dir() and any(out.iterdir()):
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            _remove(old)
            os.replace(out, old)
            os.replace(tmp, out)
            _remove(old)
        else:
            if out.is_symlink():  # a link to an empty folder: replace the link, not its target
                out.unlink()
            elif out.is_dir():
                out.rmdir()
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _remove(path: Path) -> None:
    """Remove a folder, or only the link when ``path`` is a symbolic link (never what it points to)."""
    if path.is_symlink():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


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
                    raise ValueError(f"Task {name}: id {query_id!r} or {doc_id!r} holds a tab, newline or quote, "
                                     "which BEIR's qrels TSV cannot carry.")
                handle.write(f"{query_id}\t{doc_id}\t{int(score)}\n")
                rows += 1
    return rows


# --------------------------------------------------------------------------- BEIR


def export_beir(
    out: str | Path,
    tasks: Iterable[str] | None = None,
    *,
    gain: str | None = None,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write each task as a BEIR ``GenericDataLoader`` folder, for tools that speak BEIR, not mteb.

    Args:
        out: the export folder; one subfolder per task, named after the task.
        tasks: task names such as ``DisastIR-QA-Bio``; all 48 when None.
        gain: ``"exponential"`` or ``"linear"`` qrels values; None uses the tasks' own gain
            (``DISASTIR_GAIN``, exponential by default), so the export scores like the tasks.
        overwrite: replace an earlier export in ``out``.
        progress: called with one line per exported task.

    Returns:
        The task folders, in the order of ``tasks``.

    Raises:
        KeyError: an unknown task name.
        ValueError: an unknown gain, or no tasks.
        FileExistsError: ``out`` is not empty and ``overwrite`` is False, or is not an earlier export.
    """
    if gain is not None and gain not in GAINS:
        raise ValueError(f"Unknown gain {gain!r} for the BEIR export; expected one of {list(GAINS)} or None.")
    names = _task_names(tasks)
    out = Path(out).expanduser().absolute()
    say = progress or (lambda _message: None)
    shared: Dataset | None = None
    used_gain = gain
    with _staged_folder(out, overwrite) as tmp:
        corpus_file = tmp / "corpus.jsonl"
        for name in names:
            task, data = _load(name, gain)  # type: ignore[arg-type]  # validated above
            if shared is None:
                shared, used_gain = data["corpus"], task.gain
                _write_jsonl(corpus_file, _beir_corpus_rows(shared))
            _check_corpus(shared, data["corpus"], name)
            folder = tmp / name
            (folder / "qrels").mkdir(parents=True)
            how = _share(corpus_file, folder / "corpus.jsonl")
            _write_jsonl(folder / "queries.jsonl",
                         ({"_id": q, "text": t} for q, t in zip(data["queries"]["id"], data["queries"]["text"],
                                                                 strict=True)))
            rows = _write_qrels_tsv(folder / "qrels" / "test.tsv", data["relevant_docs"], name)
            say(f"{name}: {len(data['queries'])} queries, {rows} judgements, corpus by {how}")
        passages = len(shared) if shared is not None else 0
        (tmp / "README.md").write_text(_beir_readme(names, used_gain, passages), encoding="utf-8")
    logger.info("Exported %d DisastIR task(s) in BEIR format to %s (%s gain).", len(names), out, used_gain)
    return [out / name for name in names]


def _beir_readme(names: list[str], gain: str | None, passages: int) -> str:
    return f"""# DisastIR in BEIR format

{_MARKER}

{len(names)} DisastIR task(s) exported by `disastir_mteb.benchmark.export.export_beir` from {_source()}.
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


# --------------------------------------------------------------------------- mteb-native


def export_mteb(
    out: str | Path,
    tasks: Iterable[str] | None = None,
    *,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Write an mteb-native Hugging Face dataset folder, ready to push to the Hub for upstreaming.

    The layout, the subset naming and the choice of scores are explained in the module docstring;
    ``datasets.load_dataset(str(out), "QA-Bio-qrels")`` and mteb's ``RetrievalDatasetLoader`` both
    read the folder as it is.

    Args:
        out: the dataset folder.
        tasks: task names such as ``DisastIR-QA-Bio``; all 48 when None.
        overwrite: replace an earlier export in ``out``.
        progress: called with one line per exported task.

    Returns:
        ``out``.

    Raises:
        KeyError: an unknown task name.
        ValueError: no tasks.
        FileExistsError: ``out`` is not empty and ``overwrite`` is False, or is not an earlier export.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = _task_names(tasks)
    out = Path(out).expanduser().absolute()
    say = progress or (lambda _message: None)
    qrels_schema = pa.schema([("query-id", pa.string()), ("corpus-id", pa.string()),
                              ("score", pa.int32()), ("grade", pa.int32())])
    shared: Dataset | None = None
    with _staged_folder(out, overwrite) as tmp:
        for name in names:
            task, data = _load(name, "exponential")
            if shared is None:
                shared = data["corpus"]
                (tmp / "corpus").mkdir()
                pq.write_table(_arrow(shared), tmp / "corpus" / "test.parquet")
            _check_corpus(shared, data["corpus"], name)
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
        (tmp / "README.md").write_text(_dataset_card(names, passages), encoding="utf-8")
    logger.info("Exported %d DisastIR task(s) as an mteb dataset to %s.", len(names), out)
    return out


def _arrow(dataset: Dataset) -> pa.Table:
    """The rows of a ``Dataset`` as one Arrow table (no copy when it has no index mapping)."""
    return dataset.with_format("arrow")[:]


def _config(name: str, path: str) -> str:
    return f"- config_name: {name}\n  data_files:\n  - split: test\n    path: {path}\n"


def _dataset_card(names: list[str], passages: int) -> str:
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

{_MARKER}

{len(names)} DisastIR disaster-management retrieval task(s) in the format mteb's `RetrievalDatasetLoader`
reads, exported by `disastir_mteb.benchmark.export.export_mteb` from {_source()}. All tasks share one corpus of
{passages:,} passages (`corpus/test.parquet`); task `DisastIR-{{Intent}}-{{Category}}` is the subset
`{{Intent}}-{{Category}}` with configs `<subset>-corpus`, `<subset>-queries` and `<subset>-qrels`.

Qrels: `score` = 2^grade - 1 (exponential gain; mteb's `ndcg_at_10` then equals the authors' NDCG@10),
`grade` = the raw grade (0-3, 0-5 for STS). Unjudged passages count as non-relevant.

```python
import datasets
qrels = datasets.load_dataset("<this repo>", "{mteb_subset(first)}-qrels", split="test")

# an mteb task reading it (the subset is the task's only hf_subset)
metadata = TaskMetadata(name="{first}", dataset={{"path": "<this repo>", "revision": "<commit>"}},
                        eval_langs={{"{mteb_subset(first)}": ["eng-Latn"]}}, main_score="ndcg_at_10", ...)
```

Subsets: {", ".join(mteb_subset(n) for n in names)}.
"""

"""Published DisastIR layout -> mteb's ``RetrievalSplitData``.

The published dataset (``DMIR01/DisastIR``) keys its judgements by TEXT: each qrels row holds
a query text, a passage text and an integer grade. This module finds the files (a local folder
named by ``DISASTIR_DATA_DIR`` or the Hugging Face snapshot), places every file on one of the 48
tasks through the alias table in :mod:`disastir_mteb.benchmark.taxonomy`, joins texts to ids, turns grades
into gains, and loads the one shared corpus once per process for all tasks.

Evaluation policies (the authors' evaluation code is the reference):

- Texts are matched after ``str.strip()`` and otherwise exactly (the authors strip corpus and
  query texts, and look qrels up by exact text); models also receive the stripped texts.
- A qrels text that matches several ids (duplicate texts) gives its grade to every one of them:
  the authors retrieve by text, so every copy of a judged text earns its gain.
- Qrels rows whose query or passage text is not found are dropped and counted; the counts are
  logged and kept in :class:`LoadReport`. A task left without queries or judgements is an error.
- A (query, passage) pair judged twice keeps the last grade, as the authors' dict does; counted.
- Queries without any judged passage are dropped (the authors skip them); counted.
- Unjudged passages count as non-relevant (gain 0): the "zero-fill" variant the paper reports.
- Gain: ``2**grade - 1`` by default, so trec_eval's linear-gain NDCG equals the authors'
  exponential-gain NDCG@10; ``gain="linear"`` keeps the grades as they are.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from disastir_mteb.benchmark.taxonomy import MAX_GRADE, TASK_SPECS, TaskSpec, parse_task_file, task_file_stem

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

__all__ = [
    "Gain",
    "LoadReport",
    "TaskFiles",
    "find_task_files",
    "grade_to_gain",
    "load_corpus",
    "load_task",
    "resolve_data_dir",
]

Gain = Literal["exponential", "linear"]
GAINS: tuple[Gain, ...] = ("exponential", "linear")
DATA_DIR_ENV = "DISASTIR_DATA_DIR"
GAIN_ENV = "DISASTIR_GAIN"
_JSON_SUFFIXES = (".json", ".jsonl")
_BOM = b"\xef\xbb\xbf"


def grade_to_gain(grade: int, gain: Gain = "exponential") -> int:
    """The qrels value handed to trec_eval for a DisastIR grade.

    ``exponential``: 2^g - 1 (0, 1, 3, 7, 15, 31), the gain of the authors' NDCG
    (DMRetriever ``eva/evaluation/metrics.py``). trec_eval uses the qrels value as a linear
    gain, so this mapping makes its ``ndcg_cut_10`` equal the authors' NDCG@10, while MAP,
    recall, precision and MRR are unchanged (they only ask whether the value is > 0).
    ``linear``: the grade itself.
    """
    if gain == "exponential":
        return (1 << grade) - 1
    if gain == "linear":
        return grade
    raise ValueError(f"Unknown gain {gain!r}; expected one of {list(GAINS)}.")


def default_gain() -> Gain:
    """The gain named by ``DISASTIR_GAIN`` (default ``exponential``), validated."""
    value = os.environ.get(GAIN_ENV, "exponential").strip().lower() or "exponential"
    if value not in GAINS:
        raise ValueError(f"{GAIN_ENV}={value!r} is not a gain; expected one of {list(GAINS)}.")
    return value  # type: ignore[return-value]


# --------------------------------------------------------------------------- locating the data


def resolve_data_dir(repo: str, revision: str) -> Path:
    """The folder holding the published layout: ``DISASTIR_DATA_DIR`` or the Hub snapshot.

    The Hub snapshot goes through ``huggingface_hub.snapshot_download``, so it honours
    ``HF_HUB_OFFLINE=1`` and ``HF_HOME`` like every other Hugging Face download.

    Raises:
        FileNotFoundError: ``DISASTIR_DATA_DIR`` names no folder, or the data is neither cached
            nor downloadable.
    """
    local = os.environ.get(DATA_DIR_ENV)
    if local:
        path = Path(local).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"{DATA_DIR_ENV}={local!r} is not a folder; point it at a folder holding "
                                    "corpus.jsonl, query/ and qrels/ (the published DisastIR layout).")
        return path.resolve()
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        snapshot = huggingface_hub.snapshot_download(
            repo_id=repo,
            repo_type="dataset",
            revision=revision,
            allow_patterns=["corpus.jsonl", "corpus/*", "query/*", "qrels/*", "README.md"],
        )
    except LocalEntryNotFoundError:
        raise FileNotFoundError(
            f"DisastIR data {repo}@{revision} is not in the Hugging Face cache and the Hub cannot be reached "
            f"(offline?); download it once online, or set {DATA_DIR_ENV} to a local folder in the published layout."
        ) from None
    return Path(snapshot)


@dataclass(frozen=True)
class TaskFiles:
    """Where each part of the published layout lives inside one data folder."""

    root: Path
    corpus: Path
    queries: dict[TaskSpec, Path]
    qrels: dict[TaskSpec, Path]

    def for_task(self, spec: TaskSpec) -> tuple[Path, Path]:
        """The (query file, qrels file) of one task.

        Raises:
            FileNotFoundError: the folder has no query or no qrels file for this task.
        """
        missing = [kind for kind, files in (("query", self.queries), ("qrels", self.qrels)) if spec not in files]
        if missing:
            stem = task_file_stem(spec.intent, spec.category)
            expected = " and ".join(f"query/{stem}.json" if kind == "query" else f"qrels/{stem}_qrels.json"
                                    for kind in missing)
            absent = sorted(s.name for s in TASK_SPECS if s not in self.queries or s not in self.qrels)
            raise FileNotFoundError(
                f"{self.root}: no {' and no '.join(missing)} file for task {spec.name}; "
                f"{len(absent)} of 48 tasks lack a file ({', '.join(absent[:6])}{', ...' if len(absent) > 6 else ''}); "
                f"expected {expected}."
            )
        return self.queries[spec], self.qrels[spec]


def _place_files(folder: Path) -> dict[TaskSpec, Path]:
    """Place each JSON file of ``query/`` or ``qrels/`` on its task.

    A file that names no task is an error while some task has no file (it is probably that task's
    file, misspelt); once all 48 tasks have theirs, stray files are only a warning naming them.
    """
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    placed: dict[TaskSpec, Path] = {}
    unplaced: list[str] = []
    for path in files:
        try:
            spec = parse_task_file(path.stem) if path.suffix in _JSON_SUFFIXES else None
        except ValueError:
            spec = None
        if spec is None:
            unplaced.append(path.name)
            continue
        if spec in placed:
            raise ValueError(f"{folder}: both {placed[spec].name!r} and {path.name!r} map to task {spec.name}; "
                             "remove one of them.")
        placed[spec] = path
    absent = sorted(s.name for s in TASK_SPECS if s not in placed)
    unplaced_json = [name for name in unplaced if name.endswith(_JSON_SUFFIXES)]
    if unplaced_json and absent:
        raise ValueError(
            f"{folder}: {len(unplaced_json)} file(s) name no DisastIR task ({', '.join(unplaced_json[:5])}"
            f"{', ...' if len(unplaced_json) > 5 else ''}); expected '{{intent}}_{{category}}.json', and "
            f"{len(absent)} task(s) have no file{': ' + ', '.join(absent[:6]) if absent else ''}."
        )
    if unplaced:
        logger.warning("%s: ignoring %d file(s) that are no task's JSON file (%s).",
                       folder, len(unplaced), ", ".join(unplaced[:5]) + (", ..." if len(unplaced) > 5 else ""))
    return placed


def find_task_files(root: str | Path) -> TaskFiles:
    """Scan a folder in the published layout and place every file on one of the 48 tasks.

    Raises:
        FileNotFoundError: ``root`` is no folder, or ``corpus.jsonl``, ``query/`` or ``qrels/`` is missing.
        ValueError: a JSON file names no task while a task has no file, or two files name one task.
    """
    root = Path(root)
    layout = "a DisastIR data folder holds corpus.jsonl, query/ and qrels/ (the published layout)"
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder; {layout}.")
    corpus = root / "corpus.jsonl"
    missing = [f"'{p.name}'" for p in (corpus, root / "query", root / "qrels") if not p.exists()]
    if missing:
        raise FileNotFoundError(f"{root}: missing {', '.join(missing)}; {layout}.")
    return TaskFiles(root=root, corpus=corpus, queries=_place_files(root / "query"),
                     qrels=_place_files(root / "qrels"))


# --------------------------------------------------------------------------- reading files


def _decode(path: Path, raw: bytes, *, offset: int = 0, line: int = 1) -> str:
    """UTF-8 text of ``raw`` (found at byte ``offset``, ``line`` of ``path``), without the BOM Windows editors write.

    Raises:
        ValueError: invalid UTF-8; the message names the byte offset and line in the file.
    """
    skip = 3 if offset == 0 and raw.startswith(_BOM) else 0
    try:
        return raw[skip:].decode("utf-8")
    except UnicodeDecodeError as error:
        at = skip + error.start
        line += raw.count(b"\n", 0, at)
        raise ValueError(f"{path}: not valid UTF-8 at byte offset {offset + at} (line {line}); "
                         "re-save the file as UTF-8.") from None


def _check_row(record: object, keys: tuple[str, ...], path: Path, where: str) -> None:
    """Reject a row that is no object, lacks a key or holds null: ``str(None)`` would silently become 'None'."""
    if not isinstance(record, dict):
        raise ValueError(f"{path}: {where} is a JSON {type(record).__name__}, not an object with keys {list(keys)}.")
    missing = [k for k in keys if k not in record]
    if missing:
        raise ValueError(f"{path}: {where} lacks {missing} (has {sorted(record)}); expected keys {list(keys)}.")
    null = [k for k in keys if record[k] is None]
    if null:
        raise ValueError(f"{path}: {where} has null {null}; every row needs a value for {list(keys)}.")


def _read_records(path: Path, keys: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) pairs of a JSON array or JSON lines file (the Hub's json builder reads both), rows checked.

    Rows are named as a user finds them: ``row i`` (from 0, as in ``jq '.[i]'``) in an array,
    ``line n`` in JSON lines. A lone object that lacks ``keys`` (say ``{id: text}``) is the wrong shape.
    """
    text = _decode(path, path.read_bytes())
    head = text.lstrip()[:1]
    whole: object = None
    if head in ("[", "{"):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError as error:
            if head == "[":
                raise ValueError(f"{path}: not valid JSON at line {error.lineno}, column {error.colno} "
                                 f"({error.msg}).") from None
    if isinstance(whole, dict) and not all(k in whole for k in keys):
        raise ValueError(f"{path}: one JSON object with keys {sorted(whole)[:4]}{'...' if len(whole) > 4 else ''}, "
                         f"not rows; expected a JSON array (or JSON lines) of objects with keys {list(keys)}.")
    rows: list[tuple[str, Any]] = []
    if isinstance(whole, list):
        rows = [(f"row {i}", record) for i, record in enumerate(whole)]
    elif isinstance(whole, dict):  # one object holding the keys: a file of one row
        rows = [("row 0", whole)]
    else:  # JSON lines; split on newlines only: texts may hold U+2028, which str.splitlines() splits on
        for number, line in enumerate(text.split("\n"), 1):
            try:
                rows += [(f"line {number}", json.loads(line))] if line.strip() else []
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}: line {number} is not valid JSON at column {error.colno} "
                                 f"({error.msg}).") from None
    if not rows:
        raise ValueError(f"{path} holds no rows{' (0 bytes)' if not text else ''}; expected objects with keys "
                         f"{list(keys)}.")
    for where, record in rows:
        _check_row(record, keys, path, where)
    return rows


def _corpus_fault(path: Path, *, duplicates: int = 0) -> str | None:
    """The first faulty line of a corpus file, found by a slow scan that runs only once pyarrow has failed.

    pyarrow counts rows from 0 within each 64 MiB block and does not check UTF-8; users need file lines.
    """
    seen: dict[str, int] = {}
    offset = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            where = f"{path}: line {number}"
            try:
                line = _decode(path, raw, offset=offset, line=number)
                offset += len(raw)
                if not line.strip():
                    continue
                record = json.loads(line)
                _check_row(record, ("corpus_id", "text"), path, f"line {number}")
            except json.JSONDecodeError as error:
                return (f"{path} is a JSON array, not JSON lines; expected one object per line." if line[:1] == "["
                        else f"{where} is not valid JSON at column {error.colno} ({error.msg}).")
            except ValueError as error:  # bad UTF-8, not an object, a key missing or null
                return str(error)
            if not isinstance(record["text"], str):
                return f"{where}: text is a JSON {type(record['text']).__name__}, not a string."
            doc_id = str(record["corpus_id"])
            if doc_id in seen:
                return (f"{path}: {max(duplicates, 1)} duplicate corpus_id value(s), the first {doc_id!r} on lines "
                        f"{seen[doc_id]} and {number}; ids must be unique.")
            seen[doc_id] = number
    return None


def _digest(text: str) -> bytes:
    """A 16-byte key of a stripped text: the corpus index holds these, not 240k full strings."""
    return hashlib.blake2b(text.strip().encode("utf-8"), digest_size=16).digest()


@dataclass
class Corpus:
    """The shared corpus: an mteb-ready ``Dataset`` (``id``, ``text``) and a text -> ids index."""

    path: Path
    dataset: Dataset
    ids_by_text: dict[bytes, list[str]]
    duplicate_texts: int

    def ids_for(self, text: str) -> list[str]:
        """Corpus ids whose stripped text equals the stripped ``text`` (empty when unknown)."""
        return self.ids_by_text.get(_digest(text), [])


_CORPUS_CACHE: dict[tuple[str, int, int], Corpus] = {}


def load_corpus(path: str | Path) -> Corpus:
    """Read ``corpus.jsonl`` once per process; later calls for the same unchanged file share it.

    Raises:
        ValueError: the file is empty or not UTF-8 JSON lines, a row lacks ``corpus_id`` or ``text``,
            or two rows share one id; the message names the line.
    """
    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key in _CORPUS_CACHE:
        return _CORPUS_CACHE[key]
    import pyarrow as pa
    import pyarrow.json as paj
    from datasets import Dataset

    shape = "expected one {'corpus_id': ..., 'text': ...} object per line"
    if not stat.st_size:
        raise ValueError(f"{path} is empty (0 bytes); {shape}.")
    try:
        table = paj.read_json(path, read_options=paj.ReadOptions(block_size=1 << 26))
        table.validate(full=True)  # read_json accepts invalid UTF-8; a full validation does not
    except pa.ArrowInvalid as error:  # pyarrow's row numbers restart per block: find the file line
        raise ValueError(_corpus_fault(path) or f"{path}: not valid JSON lines ({error}).") from None
    missing = [c for c in ("corpus_id", "text") if c not in table.column_names]
    if missing or not table.num_rows:
        raise ValueError(f"{path}: corpus rows lack {missing} (columns: {table.column_names}); {shape}."
                         if table.num_rows else f"{path} holds no passages; {shape}.")
    import pyarrow.compute as pc

    table = table.select(["corpus_id", "text"]).rename_columns(["id", "text"])
    table = table.set_column(0, "id", pc.cast(table.column("id"), pa.string()))
    ids, texts = table.column("id"), table.column("text")
    repeated_ids = table.num_rows - ids.null_count - pc.count_distinct(ids).as_py()
    if ids.null_count or texts.null_count or not pa.types.is_string(texts.type) or repeated_ids:
        raise ValueError(_corpus_fault(path, duplicates=repeated_ids)
                         or f"{path}: a row lacks its corpus_id or text; {shape}.")
    # models see stripped passages, as in the authors' pipeline (their ordered corpus strips every text)
    table = table.set_column(1, "text", pc.utf8_trim_whitespace(texts))
    ids_by_text: dict[bytes, list[str]] = defaultdict(list)
    for batch in table.to_batches(max_chunksize=65_536):  # bounded: never all 240k texts as Python strings
        for doc_id, text in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
            ids_by_text[_digest(text)].append(doc_id)
    duplicates = table.num_rows - len(ids_by_text)
    dataset = Dataset(table)  # the Arrow table itself, no copy through Python lists
    corpus = Corpus(path=path, dataset=dataset, ids_by_text=dict(ids_by_text), duplicate_texts=duplicates)
    if duplicates:
        logger.info("%s: %d passage(s) repeat the text of another; a judged text counts for every copy.",
                       path, duplicates)
    _CORPUS_CACHE.clear()  # one corpus in memory at a time: never hold two copies
    _CORPUS_CACHE[key] = corpus
    logger.info("Loaded DisastIR corpus %s: %d passages.", path, table.num_rows)
    return corpus


# --------------------------------------------------------------------------- one task


@dataclass
class LoadReport:
    """What joining one task's text-keyed qrels to ids found; logged, and kept on the task."""

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
    grade_counts: dict[int, int] = field(default_factory=dict)
    unmatched_examples: list[str] = field(default_factory=list)

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
                f"{self.queries_without_judgements} quer(y/ies) without judgements")


@dataclass
class TaskData:
    """One task's data joined to ids: queries, gains for mteb, the raw grades, and the report."""

    queries: Dataset
    corpus: Dataset
    relevant_docs: dict[str, dict[str, int]]
    grades: dict[str, dict[str, int]]
    report: LoadReport


def load_task(spec: TaskSpec, files: TaskFiles, *, gain: Gain = "exponential",
              log: logging.Logger | None = None) -> TaskData:
    """Load one task: its queries, its qrels joined to query and corpus ids, and the shared corpus.

    The one-line load report goes to ``log`` (default: this module's logger; the mteb tasks pass
    one under mteb's, so that ``mteb run``'s verbosity shows or hides it), info when clean, else a warning.

    Raises:
        FileNotFoundError: the task has no query or qrels file.
        ValueError: malformed rows, grades outside the intent's scale, or a task left without
            queries or judgements after the join (the message names file, task and counts).
    """
    from datasets import Dataset

    query_path, qrels_path = files.for_task(spec)
    corpus = load_corpus(files.corpus)
    report = LoadReport(task=spec.name, query_file=str(query_path), qrels_file=str(qrels_path))

    query_ids_by_text: dict[str, list[str]] = defaultdict(list)
    query_text_by_id: dict[str, str] = {}
    for _, record in _read_records(query_path, ("query_id", "user_query")):
        query_id, text = str(record["query_id"]), str(record["user_query"])
        if query_id in query_text_by_id:
            raise ValueError(f"{query_path}: query_id {query_id!r} appears twice in task {spec.name}; "
                             "ids must be unique.")
        query_text_by_id[query_id] = text
        query_ids_by_text[text.strip()].append(query_id)
    report.queries = len(query_text_by_id)
    report.duplicate_query_texts = sum(len(v) - 1 for v in query_ids_by_text.values())

    top = MAX_GRADE[spec.intent]
    grades: dict[str, dict[str, int]] = defaultdict(dict)
    for where, record in _read_records(qrels_path, ("user_query", "passage", "score")):
        report.qrels_rows += 1
        grade = record["score"]
        if isinstance(grade, float) and grade.is_integer():
            grade = int(grade)
        if not isinstance(grade, int) or isinstance(grade, bool) or not 0 <= grade <= top:
            raise ValueError(f"{qrels_path}: {where} has score {record['score']!r}; task {spec.name} "
                             f"grades are integers 0..{top}.")
        query_ids = query_ids_by_text.get(str(record["user_query"]).strip())
        if not query_ids:
            report.unmatched_query_rows += 1
            if len(report.unmatched_examples) < 3:
                report.unmatched_examples.append(f"query {str(record['user_query'])[:60]!r}")
            continue
        doc_ids = corpus.ids_for(str(record["passage"]))
        if not doc_ids:
            report.unmatched_passage_rows += 1
            if len(report.unmatched_examples) < 3:
                report.unmatched_examples.append(f"passage {str(record['passage'])[:60]!r}")
            continue
        for query_id in query_ids:
            judged = grades[query_id]
            for doc_id in doc_ids:
                if doc_id in judged:
                    report.repeated_pairs += 1
                judged[doc_id] = grade

    kept = [qid for qid in query_text_by_id if grades.get(qid)]
    report.queries_kept = len(kept)
    report.queries_without_judgements = report.queries - len(kept)
    report.judgements = sum(len(v) for v in grades.values())
    counts: dict[int, int] = defaultdict(int)
    for judged in grades.values():
        for grade in judged.values():
            counts[grade] += 1
    report.grade_counts = dict(sorted(counts.items()))

    if not kept or not report.judgements:
        raise ValueError(
            f"Task {spec.name} has no usable judgements: {qrels_path} has {report.qrels_rows} rows, of which "
            f"{report.unmatched_query_rows} name no query of {query_path.name} ({report.queries} queries) and "
            f"{report.unmatched_passage_rows} name no passage of {files.corpus.name}"
            f"{' (e.g. ' + '; '.join(report.unmatched_examples) + ')' if report.unmatched_examples else ''}."
        )
    log = log or logger
    if report.clean:
        log.info("%s", report.summary())
    else:
        log.warning("%s%s", report.summary(),
                    f" (e.g. {'; '.join(report.unmatched_examples)})" if report.unmatched_examples else "")

    # models see stripped queries, as in the authors' pipeline (they strip every user_query)
    queries = Dataset.from_dict({"id": kept, "text": [query_text_by_id[q].strip() for q in kept]})
    relevant = {qid: {doc: grade_to_gain(g, gain) for doc, g in grades[qid].items()} for qid in kept}
    return TaskData(queries=queries, corpus=corpus.dataset, relevant_docs=relevant,
                    grades={qid: dict(grades[qid]) for qid in kept}, report=report)

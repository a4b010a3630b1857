"""Reading the published JSON files: rows checked with file and line in every error, and the shared corpus.

The corpus is read by pyarrow once per process and indexed by text, so that text-keyed qrels can be joined to ids;
when pyarrow fails, a slow scan finds the file line to name in the error.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from disastir_mteb.data.data_cache import (
    cache_folder,
    code_digest,
    entry_key,
    read_entry,
    source_digest,
    unusable,
    write_entry,
)
from disastir_mteb.util.errors import InvalidInput

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

__all__ = ["Corpus", "check_query_texts", "field_value", "forget_corpus", "load_corpus", "read_records", "read_rows",
           "text_digest"]

_BOM = b"\xef\xbb\xbf"


def _decode(path: Path, raw: bytes, *, offset: int = 0, line: int = 1) -> str:
    """UTF-8 text of ``raw`` without the BOM Windows editors write; a ValueError names the byte offset and line."""
    skip = 3 if offset == 0 and raw.startswith(_BOM) else 0
    try:
        return raw[skip:].decode("utf-8")
    except UnicodeDecodeError as error:
        at = skip + error.start
        line += raw.count(b"\n", 0, at)
        raise InvalidInput(f"{path}: not valid UTF-8 at byte offset {offset + at} (line {line}); "
                           "re-save the file as UTF-8.") from None


def _check_row(record: object, keys: tuple[str, ...], path: Path, where: str) -> None:
    """Reject a row that is no object, lacks a key or holds null: ``str(None)`` would silently become 'None'."""
    if not isinstance(record, dict):
        raise InvalidInput(f"{path}: {where} is a JSON {type(record).__name__}, not an object with keys {list(keys)}.")
    missing = [k for k in keys if k not in record]
    if missing:
        raise InvalidInput(f"{path}: {where} lacks {missing} (has {sorted(record)}); expected keys {list(keys)}.")
    null = [k for k in keys if record[k] is None]
    if null:
        raise InvalidInput(f"{path}: {where} has null {null}; every row needs a value for {list(keys)}.")


def read_records(path: Path, keys: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) pairs of a JSON array or JSON lines file (the Hub's json builder reads both), rows checked.

    Rows are named as a user finds them: ``row i`` (from 0, as ``jq '.[i]'``) in an array, ``line n`` in JSON lines.
    """
    text = _decode(path, path.read_bytes())
    head = text.lstrip()[:1]
    whole: object = None
    if head in ("[", "{"):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError as error:
            if head == "[":
                raise InvalidInput(f"{path}: not valid JSON at line {error.lineno}, column {error.colno} "
                                   f"({error.msg}).") from None
    if isinstance(whole, dict) and not all(k in whole for k in keys):
        raise InvalidInput(f"{path}: one JSON object with keys {sorted(whole)[:4]}{'...' if len(whole) > 4 else ''}, "
                           f"not rows; expected a JSON array (or JSON lines) of objects with keys {list(keys)}.")
    rows: list[tuple[str, Any]] = []
    if isinstance(whole, list):
        rows = [(f"row {i}", record) for i, record in enumerate(whole)]
    elif isinstance(whole, dict):  # one object holding the keys: a file of one row
        rows = [("row 0", whole)]
    else:
        rows = _json_lines(path, text)
    if not rows:
        raise InvalidInput(f"{path} holds no rows{' (0 bytes)' if not text else ''}; expected objects with keys "
                           f"{list(keys)}.")
    for where, record in rows:
        _check_row(record, keys, path, where)
    return rows


def _json_lines(path: Path, text: str) -> list[tuple[str, Any]]:
    """(``line n``, value) of a JSON lines text, split on newlines only (``splitlines`` also splits on U+2028)."""
    rows: list[tuple[str, Any]] = []
    for number, line in enumerate(text.split("\n"), 1):
        try:
            rows += [(f"line {number}", json.loads(line))] if line.strip() else []
        except json.JSONDecodeError as error:
            raise InvalidInput(f"{path}: line {number} is not valid JSON at column {error.colno} "
                               f"({error.msg}).") from None
    return rows


def read_rows(path: Path) -> list[tuple[str, object]]:
    """(where, value) pairs of a JSON array or JSON lines file; values unchecked (objects or bare strings).

    Raises:
        ValueError: not UTF-8, not JSON, or no rows; the message names the file and line.
    """
    text = _decode(path, path.read_bytes())
    if text.lstrip()[:1] == "[":
        try:
            whole = json.loads(text)
        except json.JSONDecodeError as error:
            raise InvalidInput(f"{path}: not valid JSON at line {error.lineno}, column {error.colno} "
                               f"({error.msg}).") from None
        rows: list[tuple[str, object]] = [(f"row {i}", value) for i, value in enumerate(whole)]
    else:
        rows = _json_lines(path, text)
    if not rows:
        raise InvalidInput(f"{path} holds no rows; expected a JSON array or JSON lines.")
    return rows


def field_value(record: object, names: tuple[str, ...], *, path: Path, where: str, text: bool) -> str | None:
    """The first of ``names`` present and not null in an object row; a bare string row is the text itself.

    ``text`` says the fields hold the row's (required) text rather than its optional id.

    Raises:
        ValueError: the text is absent, or the row is neither an object nor a string.
    """
    if isinstance(record, str):
        return record if text else None
    if not isinstance(record, dict):
        raise InvalidInput(f"{path}: {where} is a JSON {type(record).__name__}, not an object or a string.")
    for name in names:
        if record.get(name) is not None:
            return str(record[name])
    if text:
        raise InvalidInput(f"{path}: {where} has none of {list(names)} (has {sorted(record)}).")
    return None


def check_query_texts(path: Path, queries: Iterable[tuple[str, str | None, str]], *, field: str) -> None:
    """Refuse a query file holding a query whose text is empty or only whitespace.

    Stripped, it would reach the model as ``""`` and be ranked and scored like a real query, a number that means
    nothing. ``queries`` holds ``(where, query id or None, text)`` of each row; ``field`` names the text in the message.

    Raises:
        ValueError: one sentence naming the file, the first such row and its id, and how many more there are.
    """
    blank = [(where, query_id, text) for where, query_id, text in queries if not text.strip()]
    if not blank:
        return
    where, query_id, text = blank[0]
    named = f"{where} (query_id {query_id!r})" if query_id is not None else where
    others = [other for other, _, _ in blank[1:]]
    more = (f", and so do {len(others)} more row(s) ({', '.join(others[:3])}{', ...' if len(others) > 3 else ''})"
            if others else "")
    raise InvalidInput(f"{path}: {named} has a blank {field} ({text!r}){more}; a query needs words to be searched "
                       "with: write its text, or delete the row.")


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


def text_digest(text: str) -> bytes:
    """A 16-byte key of a stripped text: the corpus index holds these, not 240k full strings."""
    return hashlib.blake2b(text.strip().encode("utf-8"), digest_size=16).digest()


class Corpus:
    """The shared corpus: an mteb-ready ``Dataset`` (``id``, stripped ``text``) and a text -> ids index.

    Read from ``corpus.jsonl``, the index is built at once (every join needs it); served by the data cache, it is built
    from the stored text digests at first use, so a run whose tasks all come from the cache never builds it. The
    dataset's fingerprint names the file's content, read from the file or from the cache alike.
    """

    def __init__(self, *, path: Path, dataset: Dataset, duplicate_texts: int,
                 ids_by_text: dict[bytes, list[str]] | None = None, text_digests: bytes | memoryview | None = None
                 ) -> None:
        """The index comes built (``ids_by_text``) or as the 16-byte :func:`text_digest` of each row (``text_digests``).

        Raises:
            ValueError: neither or both of ``ids_by_text`` and ``text_digests`` given.
        """
        if (ids_by_text is None) == (text_digests is None):
            raise InvalidInput("A Corpus needs its text index: ids_by_text or text_digests, one of them.")
        self.path = path
        self.dataset = dataset
        self.duplicate_texts = duplicate_texts
        self._text_digests = text_digests
        if ids_by_text is not None:
            self.ids_by_text = ids_by_text

    @functools.cached_property
    def ids(self) -> list[str]:
        """The corpus ids in row order."""
        ids: list[str] = self.dataset.data.column("id").to_pylist()
        return ids

    @functools.cached_property
    def ids_by_text(self) -> dict[bytes, list[str]]:
        """:func:`text_digest` of a stripped text -> the ids holding it, in file order."""
        digests = memoryview(self._text_digests).cast("B")  # type: ignore[arg-type]
        ids_by_text: dict[bytes, list[str]] = defaultdict(list)
        for row, doc_id in enumerate(self.ids):
            ids_by_text[bytes(digests[16 * row:16 * row + 16])].append(doc_id)
        return dict(ids_by_text)

    @functools.cached_property
    def first_copy(self) -> dict[str, str]:
        """For every id whose text another id also holds, the first id holding it: the one standing for the text."""
        return {doc_id: ids[0] for ids in self.ids_by_text.values() if len(ids) > 1 for doc_id in ids}

    @functools.cached_property
    def rows(self) -> dict[str, int]:
        """The row of each id (ids are unique)."""
        return {doc_id: row for row, doc_id in enumerate(self.ids)}

    def ids_for(self, text: str) -> list[str]:
        """Corpus ids whose stripped text equals the stripped ``text`` (empty when unknown)."""
        return self.ids_by_text.get(text_digest(text), [])


_CORPUS_CACHE: dict[tuple[str, str], Corpus] = {}
_CORPUS_SHAPE = "expected one {'corpus_id': ..., 'text': ...} object per line"


def load_corpus(path: str | Path, *, keep: bool = True) -> Corpus:
    """Read ``corpus.jsonl`` once per process and content; later calls for the same unchanged file share it.

    With ``keep``, what reading it computes goes to the data cache, where a later process finds it, every byte verified.

    Raises:
        ValueError: the file is empty or not UTF-8 JSON lines, a row lacks ``corpus_id`` or ``text``,
            or two rows share one id; the message names the line.
    """
    path = Path(path).resolve()
    source = source_digest(path)
    if (str(path), source) in _CORPUS_CACHE:
        return _CORPUS_CACHE[(str(path), source)]
    key = entry_key("corpus", code_digest(sys.modules[__name__]), {"corpus": source})
    folder = cache_folder(keep)
    entry = folder / "corpus" / f"{key}.checked" if folder is not None else None
    corpus = _cached_corpus(entry, key, path) if entry is not None else None
    if corpus is None:
        corpus, digests = _read_corpus(path, fingerprint=key[:16])
        if entry is not None and source_digest(path) == source:  # the file read is the one the key names
            _keep_corpus(entry, key, corpus, digests)
    if corpus.duplicate_texts:
        logger.info("%s: %d passage(s) repeat the text of another; a judged text counts for every copy.",
                    path, corpus.duplicate_texts)
    _CORPUS_CACHE.clear()  # one corpus in memory at a time: never hold two copies
    _CORPUS_CACHE[(str(path), source)] = corpus
    logger.info("Loaded DisastIR corpus %s: %d passages.", path, len(corpus.dataset))
    return corpus


def forget_corpus() -> None:
    """Forget the corpus this process holds: the next :func:`load_corpus` reads it again (the cache, or the file)."""
    _CORPUS_CACHE.clear()


def _read_corpus(path: Path, *, fingerprint: str) -> tuple[Corpus, bytes]:
    """The corpus read from its JSON lines, and the digest of each text in row order (what the data cache keeps)."""
    import pyarrow as pa
    import pyarrow.json as paj
    from datasets import Dataset

    if not path.stat().st_size:
        raise InvalidInput(f"{path} is empty (0 bytes); {_CORPUS_SHAPE}.")
    try:
        table = paj.read_json(path, read_options=paj.ReadOptions(block_size=1 << 26))
        table.validate(full=True)  # read_json accepts invalid UTF-8; a full validation does not
    except pa.ArrowInvalid as error:  # pyarrow's row numbers restart per block: find the file line
        raise InvalidInput(_corpus_fault(path) or f"{path}: not valid JSON lines ({error}).") from None
    missing = [c for c in ("corpus_id", "text") if c not in table.column_names]
    if missing or not table.num_rows:
        raise InvalidInput(f"{path}: corpus rows lack {missing} (columns: {table.column_names}); {_CORPUS_SHAPE}."
                           if table.num_rows else f"{path} holds no passages; {_CORPUS_SHAPE}.")
    import pyarrow.compute as pc

    table = table.select(["corpus_id", "text"]).rename_columns(["id", "text"])
    table = table.set_column(0, "id", pc.cast(table.column("id"), pa.string()))
    ids, texts = table.column("id"), table.column("text")
    repeated_ids = table.num_rows - ids.null_count - pc.count_distinct(ids).as_py()
    if ids.null_count or texts.null_count or not pa.types.is_string(texts.type) or repeated_ids:
        raise InvalidInput(_corpus_fault(path, duplicates=repeated_ids)
                           or f"{path}: a row lacks its corpus_id or text; {_CORPUS_SHAPE}.")
    # models see stripped passages, as in the authors' pipeline (their ordered corpus strips every text)
    table = table.set_column(1, "text", pc.utf8_trim_whitespace(texts))
    ids_by_text: dict[bytes, list[str]] = defaultdict(list)
    digests = bytearray()
    for batch in table.to_batches(max_chunksize=65_536):  # bounded: never all 240k texts as Python strings
        for doc_id, text in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
            digest = text_digest(text)
            digests += digest
            ids_by_text[digest].append(doc_id)
    # the Arrow table itself, no copy through Python lists; the fingerprint given, as datasets would hash 210 MB
    dataset = Dataset(table, fingerprint=fingerprint)
    corpus = Corpus(path=path, dataset=dataset, ids_by_text=dict(ids_by_text),
                    duplicate_texts=table.num_rows - len(ids_by_text))
    return corpus, bytes(digests)


def _keep_corpus(entry: Path, key: str, corpus: Corpus, digests: bytes) -> None:
    """Write the corpus's data cache entry: its table as an Arrow IPC file, the digests of its texts."""
    import pyarrow.ipc as ipc

    table = corpus.dataset.data.table.select(["id", "text"]).replace_schema_metadata(None)

    def arrow(sink: BinaryIO) -> None:
        with ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=65_536)

    write_entry(entry, key, {"rows": table.num_rows, "duplicate_texts": corpus.duplicate_texts},
                {"table": arrow, "text_digests": digests})


def _cached_corpus(entry: Path, key: str, path: Path) -> Corpus | None:
    """The corpus from its data cache entry, or None (absent, or damaged: one warning)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    from datasets import Dataset

    found = read_entry(entry, key, "the corpus")
    if found is None:
        return None
    try:
        table = ipc.open_file(pa.py_buffer(found.sections["table"])).read_all()
        rows, digests = int(found.meta["rows"]), found.sections["text_digests"]
        if table.column_names != ["id", "text"] or table.num_rows != rows or len(digests) != 16 * rows \
                or not all(pa.types.is_string(column.type) for column in table.columns):
            raise InvalidInput(f"{table.num_rows} rows of {table.column_names}, {len(digests)} bytes of digests")
        return Corpus(path=path, dataset=Dataset(table, fingerprint=key[:16]), text_digests=digests,
                      duplicate_texts=int(found.meta["duplicate_texts"]))
    except (pa.ArrowException, ValueError, KeyError, TypeError) as error:
        unusable(entry, "the corpus", f"it holds no corpus this version reads: {error}")
        return None

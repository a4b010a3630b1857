"""An organisation's documents read from one folder: what each source is, where it came from, under which licence.

Stage 1 of a build. Every source is recorded with its path, digest and licence, since a benchmark made from
someone's documents must say which ones; a file that cannot be read stops the build with one sentence naming it,
before anything is sent to a server.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from disastir_mteb.util.errors import InvalidInput, MissingInput, NotAFolder
from disastir_mteb.util.install_hint import require_extra

__all__ = ["LICENCE_FILES", "MAX_SOURCE_MB", "ROW_SUFFIXES", "SUFFIXES", "Source", "SourceText", "read_sources"]

#: Documents read whole: one text each.
DOCUMENT_SUFFIXES = (".txt", ".md", ".pdf")
#: One text per row (tweets, messages): a JSON object with a ``text`` field per line, or a CSV with a ``text`` column.
ROW_SUFFIXES = (".jsonl", ".csv")
SUFFIXES = DOCUMENT_SUFFIXES + ROW_SUFFIXES
#: A file naming the licence of every source in its folder and below (its first non-empty line).
LICENCE_FILES = ("LICENCE", "LICENSE", "LICENCE.txt", "LICENSE.txt", "LICENCE.md", "LICENSE.md")
#: The largest source read, in MB: a bigger one is most likely an export to split, not a document.
MAX_SOURCE_MB = 25.0

Kind = Literal["document", "row"]


@dataclass(frozen=True)
class Source:
    """One file read: its path below the documents' folder, its SHA-256, its licence and its category folder."""

    path: str
    digest: str
    size: int
    licence: str | None
    category: str | None
    texts: int


@dataclass(frozen=True)
class SourceText:
    """A document's text, or one row's (``path#row`` for rows: a tweet keeps its own place)."""

    source: str
    text: str
    kind: Kind
    category: str | None


def read_sources(folder: str | Path, *, licence: str | None = None,
                 max_mb: float = MAX_SOURCE_MB) -> tuple[list[Source], list[SourceText], Counter[str]]:
    """Every source below ``folder`` in path order, their texts, and the suffixes of the files left out.

    A source's category is the name of its first sub-folder (None for a file at the top). ``licence`` holds for
    every source; without it, the nearest licence file above a source names its licence.

    Raises:
        MissingInput: ``folder`` is missing or holds no source.
        InvalidInput: a source is too big, not UTF-8, not readable as its suffix says, or an encrypted PDF.
    """
    root = Path(folder)
    if not root.exists():
        raise MissingInput(f"{root} does not exist; name the folder of the documents to build from.")
    if not root.is_dir():
        raise NotAFolder(f"{root} is a file; name the folder that holds the documents to build from.")
    files = sorted(path for path in root.rglob("*") if path.is_file() and not _hidden(path, root))
    chosen = [path for path in files if path.suffix.lower() in SUFFIXES and path.name not in LICENCE_FILES]
    skipped = Counter(path.suffix.lower() or path.name for path in files
                      if path not in chosen and path.name not in LICENCE_FILES)
    if not chosen:
        raise MissingInput(f"{root} holds no {', '.join(SUFFIXES)} file; put the documents to build from there "
                           f"(one sub-folder per category).")
    sources, texts = [], []
    for path in chosen:
        relative = path.relative_to(root).as_posix()
        size = path.stat().st_size
        if size > max_mb * 1e6:
            raise InvalidInput(f"{path} is {size / 1e6:.1f} MB, over the {max_mb:g} MB a source may be; split it, "
                               f"or pass --max-file-mb.")
        data = path.read_bytes()
        category = relative.split("/")[0] if "/" in relative else None
        found = list(_texts(path, relative, data, category))
        sources.append(Source(relative, hashlib.sha256(data).hexdigest(), size,
                              licence or _licence_of(path.parent, root), category, len(found)))
        texts.extend(found)
    return sources, texts, skipped


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _licence_of(folder: Path, root: Path) -> str | None:
    """The first non-empty line of the nearest licence file from ``folder`` up to ``root``."""
    while True:
        for name in LICENCE_FILES:
            candidate = folder / name
            if candidate.is_file():
                lines = [line.strip() for line in _decode(candidate, candidate.read_bytes()).splitlines()]
                return next((line for line in lines if line), None)
        if folder == root:
            return None
        folder = folder.parent


def _texts(path: Path, relative: str, data: bytes, category: str | None) -> Iterator[SourceText]:
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        yield SourceText(relative, _pdf_text(path, data), "document", category)
    elif suffix in (".txt", ".md"):
        yield SourceText(relative, _decode(path, data), "document", category)
    elif suffix == ".jsonl":
        for number, line in enumerate(_decode(path, data).splitlines(), start=1):
            if line.strip():
                yield SourceText(f"{relative}#{number}", _json_row(path, number, line), "row", category)
    else:
        reader = csv.DictReader(io.StringIO(_decode(path, data), newline=""))
        if "text" not in (reader.fieldnames or []):
            raise InvalidInput(f"{path} has no 'text' column (its columns: {', '.join(reader.fieldnames or [])}); "
                               f"name the column of the texts 'text'.")
        for number, row in enumerate(reader, start=2):  # line 1 is the header
            if (row["text"] or "").strip():
                yield SourceText(f"{relative}#{number}", row["text"], "row", category)


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InvalidInput(f"{path} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}); "
                           f"convert it (iconv -f cp1252 -t utf-8, for one) or move it out of the folder.") from None


def _json_row(path: Path, number: int, line: str) -> str:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise InvalidInput(f"{path} line {number} is not JSON ({error.msg}); write one JSON object per line.") from None
    if not isinstance(row, dict) or not isinstance(row.get("text"), str):
        raise InvalidInput(f"{path} line {number} has no 'text' string; write one object per line with the text "
                           f"under 'text'.")
    return row["text"]


def _pdf_text(path: Path, data: bytes) -> str:
    require_extra("pypdf", extra="build", needed_by="Reading PDF sources")
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        encrypted = reader.is_encrypted
        text = "" if encrypted else "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except PyPdfError as error:
        raise InvalidInput(f"{path} is not a readable PDF ({error}); re-export it or move it out of the "
                           f"folder.") from None
    if encrypted:
        raise InvalidInput(f"{path} is an encrypted PDF; decrypt it (qpdf --decrypt) or move it out of the folder.")
    if not text.strip():
        raise InvalidInput(f"{path} has no text layer (a scanned PDF); run OCR on it (ocrmypdf) or move it out of "
                           f"the folder.")
    return text

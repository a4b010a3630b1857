"""A persistent, memory-mapped store of corpus and query embeddings: :class:`EmbeddingStore`.

All 48 DisastIR tasks search one corpus of 239,704 passages, hours to encode on a CPU, so it is encoded once per
:class:`StoreKey` and kept as plain ``.npy`` files (never pickles: a cache folder cannot run code). An entry is
written in atomic chunk files (a killed run resumes from its last chunk), then joined into ``embeddings.npy``
with a checksum per row and ``manifest.json`` last; nothing is used before its bytes verify, and a lock keeps
two runs from encoding one entry twice. One module, because these are the stages of one entry's life under one
lock, each reading the files of the one before.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from disastir_mteb.util.atomic import remove_orphans, write_path_atomic, write_stream_atomic
from disastir_mteb.util.cache_dir import cache_root
from disastir_mteb.util.digest import short_digest
from disastir_mteb.util.errors import InvalidInput, MissingInput
from disastir_mteb.util.timings import Phase, clock

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

logger = logging.getLogger(__name__)

__all__ = ["CHUNK_SIZE", "STORE_FORMAT", "EmbeddingStore", "StoreKey", "checksum", "encode_chunks", "encode_in_memory",
           "fingerprint_texts", "row_checksums"]


# ---------------------------------------------------------------------- the key

# Bump when the layout, the manifest or the way vectors are computed changes: entries of another format are then
# not served but encoded again, once, in their folders (one warning each).
STORE_FORMAT = 4
_VERSIONED = ("numpy", "torch", "mteb", "sentence-transformers", "disastir-mteb")


def fingerprint_texts(texts: Iterable[str]) -> str:
    """A 32-hex-character blake2b digest of ``texts`` in order, each length-prefixed (``ab,c`` is not ``a,bc``)."""
    digest = hashlib.blake2b(digest_size=16)
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


@dataclass(frozen=True)
class StoreKey:
    """Everything the vectors of one store entry depend on.

    Attributes:
        model_name: the model's name, e.g. ``sentence-transformers/all-MiniLM-L6-v2``.
        model_revision: the model's revision (commit), ``None`` when unknown.
        model_fingerprint: what the model computes, so that two models under one name and revision (or one
            changed in place) never share vectors; ``None``: the name and revision are trusted.
        side: ``corpus`` for passages, ``queries`` for queries.
        prompt: everything besides the text that decides the vectors (prompt, instructions), ``""`` if none.
        texts_fingerprint: :func:`fingerprint_texts` of the encoded texts.
        dtype: storage precision.
        batch_size: texts per forward pass; a batch's padded length decides the float rounding (about 1e-7).
        precision: the model's weights while encoding (``None`` for encoders without torch weights).
    """

    model_name: str
    model_revision: str | None
    side: Literal["corpus", "queries"]
    prompt: str
    texts_fingerprint: str
    dtype: Literal["float32", "float16"] = "float32"
    batch_size: int | None = None
    precision: str | None = None
    model_fingerprint: str | None = None

    def __post_init__(self) -> None:
        if self.side not in ("corpus", "queries"):
            raise InvalidInput(f"StoreKey.side={self.side!r} is not a side; expected 'corpus' or 'queries'.")
        if self.dtype not in ("float32", "float16"):
            raise InvalidInput(f"StoreKey.dtype={self.dtype!r} is not supported; expected 'float32' or 'float16'.")
        if not self.model_name or not self.texts_fingerprint:
            raise InvalidInput(f"StoreKey needs a model_name and a texts_fingerprint; got {self.describe()!r}.")

    @property
    def digest(self) -> str:
        """A stable 32-hex-character hash of every field (the store format is recorded in the manifest instead)."""
        return short_digest(json.dumps(asdict(self), sort_keys=True, ensure_ascii=False).encode("utf-8"))

    @property
    def folder_name(self) -> str:
        """``<side>/<sanitised model name>/<digest[:16]>``, relative to the store root."""
        model = re.sub(r"[^A-Za-z0-9._-]+", "__", self.model_name).strip(".") or "model"
        return f"{self.side}/{model}/{self.digest[:16]}"

    def describe(self) -> str:
        """One line for logs, e.g. ``corpus of org/m@abc123#9f8e7d6c5b4a (float32, no prompt, texts 1a2b3c4d5e6f)``."""
        prompt = f"prompt {self.prompt!r}" if self.prompt else "no prompt"
        batch = f", batch {self.batch_size}" if self.batch_size else ""
        precision = f", model {self.precision}" if self.precision else ""
        fingerprint = f"#{self.model_fingerprint[:12]}" if self.model_fingerprint else ""
        return (f"{self.side} of {self.model_name}@{self.model_revision or 'unknown revision'}{fingerprint} "
                f"({self.dtype}{precision}{batch}, {prompt}, texts {self.texts_fingerprint[:12]})")


def _model(key: StoreKey) -> tuple[str, str | None, str | None]:
    """The (model name, revision, fingerprint) an entry was encoded by: one model's entries share one dimension."""
    return key.model_name, key.model_revision, key.model_fingerprint


def _library_versions() -> dict[str, str | None]:
    """The installed versions of the libraries in ``_VERSIONED`` (None if absent), recorded in each manifest."""
    return dict(_installed_versions())


@functools.cache
def _installed_versions() -> tuple[tuple[str, str | None], ...]:
    """Read once per process: each read parses the packages' metadata files (about 10 ms per entry written)."""
    from importlib.metadata import PackageNotFoundError, version

    def _version(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return tuple((name, _version(name)) for name in _VERSIONED)

# ---------------------------------------------------------------------- chunk files (an unfinished entry)

_ORDER_FILE = "order.json"
_CHUNK = re.compile(r"chunk_(\d{10})_(\d{10})_([0-9a-f]{32})\.npy")


def checksum(array: np.ndarray) -> str:
    """The xxh3-128 digest (32 hex characters) of an array's bytes in C order.

    xxh3, not SHA-256: every byte is hashed on every run that reads it, and it guards against damage, not forgery.
    """
    import xxhash

    return xxhash.xxh3_128_hexdigest(np.ascontiguousarray(array).data)


def _chunk_name(rows: tuple[int, int], digest: str) -> str:
    return f"chunk_{rows[0]:010d}_{rows[1]:010d}_{digest}.npy"


@clock(Phase.store)
def _chunk_files(folder: Path) -> dict[tuple[int, int], list[Path]]:
    """The chunk files in ``folder`` by the rows they claim (several when runs left more than one)."""
    found: dict[tuple[int, int], list[Path]] = {}
    for path in sorted(folder.glob("chunk_*.npy")):
        match = _CHUNK.fullmatch(path.name)
        if match:
            found.setdefault((int(match[1]), int(match[2])), []).append(path)
    return found


@clock(Phase.store)
def _fill(out: np.ndarray, ranges: list[tuple[int, int]], positions: np.ndarray | None,
          sources: dict[tuple[int, int], Path | np.ndarray]) -> np.ndarray:
    """Put each chunk (an array, or the file it was verified in) at its rows of ``out`` (the texts' order)."""
    for rows in ranges:
        source = sources[rows]
        out[slice(*rows) if positions is None else positions[rows[0]:rows[1]]] = (
            np.load(source, mmap_mode="r") if isinstance(source, Path) else source)
    return out


@clock(Phase.store)
def _unlink_quietly(*paths: Path) -> None:
    """Delete ``paths`` where possible: a read-only cache keeps them, and later loads verify them anyway."""
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _checked_order(order: Sequence[int] | np.ndarray | None, n: int) -> np.ndarray | None:
    """``order`` as an int64 array after checking it is a permutation of ``range(n)``; None stays None."""
    if order is None:
        return None
    positions = np.asarray(order, dtype=np.int64)
    if positions.shape != (n,) or not np.array_equal(np.sort(positions), np.arange(n)):
        raise InvalidInput(f"order must be a permutation of range({n}); got shape {positions.shape}.")
    return positions


def _order_digest(positions: np.ndarray | None) -> str:
    """``as given`` for no order, else a 32-hex digest of the permutation."""
    if positions is None:
        return "as given"
    return short_digest(positions.astype("<i8").tobytes())


@clock(Phase.store)
def _discard_chunks_of_another_order(folder: Path, digest: str) -> None:
    """Delete chunk files encoded under another order (they hold other rows) or format, then record both."""
    path = folder / _ORDER_FILE
    wanted = {"format": STORE_FORMAT, "order": digest}
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = None
    if recorded == wanted:
        return
    chunks = list(folder.glob("chunk_*.npy"))
    if chunks:
        if not isinstance(recorded, dict):
            why = "no record of their order"
        elif recorded.get("format") != STORE_FORMAT:
            why = f"written by store format {recorded.get('format')}, not {STORE_FORMAT}"
        else:
            why = f"encoded in another order ({str(recorded.get('order'))[:12]})"
        logger.warning("Embedding cache %s holds %d chunk file(s) %s: re-encoding them.", folder, len(chunks), why)
        for chunk in chunks:
            chunk.unlink(missing_ok=True)
    write_stream_atomic(path, lambda handle: handle.write(json.dumps(wanted).encode()))


@clock(Phase.store)
def _chunk_texts(texts: Sequence[str], positions: np.ndarray | None, rows: tuple[int, int]) -> list[str]:
    """The texts of one chunk, in encoding order."""
    start, stop = rows
    if positions is None:
        return [texts[i] for i in range(start, stop)]
    return [texts[int(i)] for i in positions[start:stop]]


@clock(Phase.store)
def _chunk_dim(path: Path, n_rows: int, dtype: str) -> int | str:
    """The dimension of a finished chunk file whose bytes match the checksum in its name, or why it cannot be used."""
    try:
        array = np.load(path, mmap_mode="r")
    except (OSError, ValueError, EOFError):  # EOFError: an empty file
        return "unreadable or truncated"
    if array.ndim != 2 or array.shape[0] != n_rows or array.dtype != np.dtype(dtype):
        return f"shape {array.shape} {array.dtype}, expected ({n_rows}, dim) {dtype}"
    if path.stat().st_size != array.offset + array.nbytes:
        return f"{path.stat().st_size} bytes, not {array.offset + array.nbytes}"
    match = _CHUNK.fullmatch(path.name)
    if match is None or checksum(array) != match[3]:
        return "damaged: its bytes fail their checksum"
    return int(array.shape[1])


@clock(Phase.store)
def _check_output(output: Any, start: int, stop: int, dtype: str) -> np.ndarray:
    """The encoder's output for rows ``start:stop`` as a finite 2-D array of ``dtype``."""
    if hasattr(output, "detach"):  # torch tensor, possibly bfloat16 or on a GPU
        output = output.detach().float().cpu().numpy()
    array = np.asarray(output)
    where = f"rows {start}-{stop}"
    if array.ndim != 2 or array.shape[0] != stop - start:
        raise InvalidInput(f"The encoder returned shape {array.shape} for {where}; expected ({stop - start}, dim).")
    if not np.issubdtype(array.dtype, np.floating):
        raise InvalidInput(f"The encoder returned dtype {array.dtype} for {where}; expected a float array.")
    with np.errstate(over="ignore"):  # float16 overflow becomes inf, refused just below
        array = array.astype(dtype, copy=False)
    if not np.isfinite(array).all():
        bad = int(np.flatnonzero(~np.isfinite(array).all(axis=1))[0]) + start
        raise InvalidInput(f"The encoder returned NaN or infinite values (as {dtype}) for {where}, first in row {bad}.")
    return array


@contextlib.contextmanager
def _entry_lock(folder: Path) -> Iterator[None]:
    """Hold the entry's lock (``folder/.lock``) while its files are read and written, after waiting for a holder.

    The kernel drops a killed process's lock, so a ``kill -9`` never leaves an entry locked. A lock file that cannot
    be written means no wait: every file still appears through an atomic rename, so the cost is work, not damage.
    """
    from filelock import FileLock, Timeout

    path = folder / ".lock"
    try:
        holder = path.read_text(encoding="utf-8").strip() if path.is_file() else ""
        lock = FileLock(path)
        try:
            lock.acquire(blocking=False)
        except Timeout:
            logger.warning("Embedding cache %s is being encoded by another run (process %s): waiting for it, so "
                           "that nothing is encoded twice.", folder, holder or "unknown")
            lock.acquire()
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            path.write_text(str(os.getpid()), encoding="utf-8")
        yield
    finally:
        lock.release()

# ---------------------------------------------------------------------- the finished entry

_ROW_CHECKSUM = "xxh3_64 per row"


def row_checksums(array: np.ndarray) -> np.ndarray:
    """The xxh3-64 digest of each row's bytes, as uint64, shape (n_rows,)."""
    import xxhash

    data = memoryview(np.ascontiguousarray(array)).cast("B")
    width = array.shape[1] * array.dtype.itemsize if array.ndim == 2 else 0
    return np.fromiter((xxhash.xxh3_64_intdigest(data[i * width:(i + 1) * width]) for i in range(len(array))),
                       dtype=np.uint64, count=len(array))


@dataclass(frozen=True)
class _Entry:
    """What reading a finished entry found: the memory map, or ``problem`` saying why it cannot be used at all.

    ``damaged`` holds the rows (texts' order) whose bytes fail their checksum.
    """

    array: np.memmap | None
    problem: str = ""
    damaged: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    manifest: dict[str, Any] | None = None

    @property
    def usable(self) -> bool:
        return self.array is not None and not len(self.damaged)

    def describe_damage(self) -> str:
        """``rows 1100-1162, 2001`` (at most three runs of consecutive rows, then ``...``)."""
        runs: list[list[int]] = []
        for row in self.damaged.tolist():
            if runs and row == runs[-1][1] + 1:
                runs[-1][1] = row
            else:
                runs.append([row, row])
        shown = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in runs[:3])
        return f"row{'s' if len(self.damaged) > 1 else ''} {shown}{', ...' if len(runs) > 3 else ''}"

    def chunks(self) -> list[tuple[int, int]]:
        """The ranges of the encoding order the vectors were encoded in, as the manifest records them."""
        return [(int(a), int(b)) for a, b in (self.manifest or {}).get("chunks", [])]


@clock(Phase.store)
def _write_entry(key: StoreKey, folder: Path, n_rows: int, dim: int, ranges: list[tuple[int, int]],
                 positions: np.ndarray | None, fill: Callable[[np.ndarray], np.ndarray], chunk_size: int) -> None:
    """Write ``embeddings.npy`` (``fill(out)`` puts the rows in place), fsync it, then the manifest last."""
    rows = np.zeros(0, np.uint64)

    def write(temporary: Path) -> None:
        nonlocal rows
        out = fill(np.lib.format.open_memmap(temporary, mode="w+", dtype=key.dtype, shape=(n_rows, dim)))
        out.flush()
        rows = row_checksums(out)
        del out

    write_path_atomic(folder / "embeddings.npy", write)
    write_stream_atomic(folder / "checksums.npy", lambda handle: np.save(handle, rows, allow_pickle=False))
    manifest = {**asdict(key), "format": STORE_FORMAT, "n_rows": n_rows, "dim": dim,
                "chunk_size": chunk_size, "chunks": [list(r) for r in ranges], "order": _order_digest(positions),
                "row_checksums": _ROW_CHECKSUM, "checksums": checksum(rows),
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": _library_versions()}
    write_stream_atomic(folder / "manifest.json", lambda handle: handle.write(json.dumps(manifest, indent=2).encode()))


@clock(Phase.store)
def _consolidate(key: StoreKey, n_rows: int, folder: Path, ranges: list[tuple[int, int]], dim: int,
                 chunk_size: int, positions: np.ndarray | None,
                 sources: dict[tuple[int, int], Path | np.ndarray]) -> np.memmap:
    """Join the chunks into ``embeddings.npy`` (in the texts' order), write the manifest, drop the chunk files."""
    try:
        _write_entry(key, folder, n_rows, dim, ranges, positions, lambda out: _fill(out, ranges, positions, sources),
                     chunk_size)
    except FileNotFoundError:  # another process (without a working lock) consolidated and removed the chunks first
        entry = _load_entry(key, n_rows, folder)
        if not entry.usable:
            raise MissingInput(f"Embedding cache {folder}: chunk files vanished while consolidating "
                               f"and no finished entry replaced them ({entry.problem}); run again.") from None
        return entry.array  # type: ignore[return-value]
    for path in folder.glob("chunk_*.npy"):
        path.unlink(missing_ok=True)
    (folder / _ORDER_FILE).unlink(missing_ok=True)
    return _reloaded(key, n_rows, folder)


@clock(Phase.store)
def _repaired(key: StoreKey, folder: Path, entry: _Entry, positions: np.ndarray | None,
              fresh: dict[tuple[int, int], np.ndarray]) -> np.memmap:
    """Rewrite ``embeddings.npy`` with the re-encoded chunks ``fresh`` over the damaged entry's rows."""
    old, manifest = entry.array, entry.manifest or {}
    ranges = entry.chunks()

    def fill(out: np.ndarray) -> np.ndarray:
        step = max(1, (64 << 20) // max(1, out.shape[1] * out.itemsize))  # copy 64 MB at a time
        for start in range(0, len(out), step):
            out[start:start + step] = old[start:start + step]  # type: ignore[index]
        return _fill(out, list(fresh), positions, dict(fresh))

    _write_entry(key, folder, int(manifest["n_rows"]), int(manifest["dim"]), ranges, positions, fill,
                 int(manifest.get("chunk_size", 0)))
    return _reloaded(key, int(manifest["n_rows"]), folder)


@clock(Phase.store)
def _reloaded(key: StoreKey, n_rows: int, folder: Path) -> np.memmap:
    entry = _load_entry(key, n_rows, folder)
    if not entry.usable:
        problem = entry.problem or f"fails its checksum in {entry.describe_damage()}"
        raise OSError(f"Embedding cache {folder} {problem} right after writing it; is the disk full or failing?")
    return entry.array  # type: ignore[return-value]


@clock(Phase.store)
def _load_entry(key: StoreKey, n_rows: int, folder: Path) -> _Entry:
    """Read a finished entry: its memory map and the rows that fail their checksum, or why it cannot be used."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return _Entry(None, "has an unreadable manifest")
    if not isinstance(manifest, dict):
        return _Entry(None, "has an unreadable manifest")
    if manifest.get("format") != STORE_FORMAT:
        return _Entry(None, f"was written by store format {manifest.get('format')}, not {STORE_FORMAT}",
                      manifest=manifest)
    for name, value in asdict(key).items():
        if manifest.get(name) != value:
            return _Entry(None, f"was built for {name}={manifest.get(name)!r}, not {value!r}", manifest=manifest)
    if manifest.get("n_rows") != n_rows:
        unit = "passages" if key.side == "corpus" else "queries"
        return _Entry(None, f"was built for {manifest.get('n_rows')} {unit}, not {n_rows}", manifest=manifest)
    try:
        recorded = np.load(folder / "checksums.npy", allow_pickle=False)
    except (OSError, ValueError, EOFError):
        recorded = None
    if (manifest.get("row_checksums") != _ROW_CHECKSUM or recorded is None or recorded.shape != (n_rows,)
            or recorded.dtype != np.uint64 or checksum(recorded) != manifest.get("checksums")):
        return _Entry(None, "has no sound checksums.npy (a checksum of every row)", manifest=manifest)
    path = folder / "embeddings.npy"
    try:
        array = np.load(path, mmap_mode="r")
    except (OSError, ValueError, EOFError) as error:
        return _Entry(None, f"has an unreadable or truncated embeddings.npy ({error})", manifest=manifest)
    expected = (n_rows, manifest.get("dim"))
    if array.shape != expected or array.dtype != np.dtype(key.dtype):
        return _Entry(None, f"holds a {array.dtype} array of shape {array.shape}, not {key.dtype} {expected}",
                      manifest=manifest)
    if path.stat().st_size != array.offset + array.nbytes:
        return _Entry(None, f"has an embeddings.npy of {path.stat().st_size} bytes, not {array.offset + array.nbytes}",
                      manifest=manifest)
    return _Entry(array, damaged=np.flatnonzero(row_checksums(array) != recorded), manifest=manifest)


# ---------------------------------------------------------------------- the store

#: Texts per chunk file: what a killed run loses at most, for any corpus size.
CHUNK_SIZE = 1024


class EmbeddingStore:
    """Encode a text set once per :class:`StoreKey` and serve it memory-mapped ever after.

    ``root`` defaults to :func:`cache_root`; ``last_encoded_rows`` counts the texts the last :meth:`get_or_encode`
    actually sent to the encoder (0 on a cache hit).
    """

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else cache_root()
        self.last_encoded_rows = 0
        self._unwritable = False
        # (model name, revision, fingerprint) -> (dimension, entry folder, freshly encoded) of the first entry served
        self._dims: dict[tuple[str, str | None, str | None], tuple[int, Path, bool]] = {}

    def folder(self, key: StoreKey) -> Path:
        """The folder holding ``key``'s entry (which may not exist yet)."""
        return self.root / key.folder_name

    @clock(Phase.store)
    def cached(self, key: StoreKey, n_rows: int) -> np.memmap | None:
        """The finished entry of ``key`` with ``n_rows`` rows if every row verifies, else None.

        Nothing is encoded, deleted or logged: :meth:`get_or_encode` says why an entry is not served.
        """
        folder = self.folder(key)
        if not (folder / "manifest.json").is_file():
            return None
        entry = _load_entry(key, n_rows, folder)
        if not entry.usable or self._stale(key, entry.array, folder, fresh=False):  # type: ignore[arg-type]
            return None
        return entry.array

    def get_or_encode(
        self,
        key: StoreKey,
        texts: Sequence[str],
        encode: Callable[[list[str]], Any],
        *,
        chunk_size: int = CHUNK_SIZE,
        progress: bool = True,
        order: Sequence[int] | np.ndarray | None = None,
    ) -> np.memmap:
        """The embeddings of ``texts`` under ``key``, encoding only what is not stored (and verified) yet.

        Args:
            key: the entry; its ``texts_fingerprint`` must be ``fingerprint_texts(texts)``.
            texts: the texts; row ``i`` of the result is text ``i``.
            encode: maps a list of texts to an (n, dim) float array. If it also has ``encode_stream(chunks,
                on_batch=...)``, all missing chunks go through one stream, across chunk boundaries.
            chunk_size: texts per resumable chunk file: what a killed run can lose.
            progress: show a progress bar over the texts.
            order: encode the texts in this order (a permutation), chunk by chunk; the result is in the texts' order.

        Returns:
            A read-only memory map of shape (len(texts), dim) and dtype ``key.dtype``, or an array in memory when the
            cache folder cannot be written (after one warning).

        Raises:
            ValueError: ``texts`` do not match the key, the encoder's output is unusable (rows, shape, dtype, not
                finite), or the model name and revision already served vectors of another dimension.
        """
        if chunk_size < 1:
            raise InvalidInput(f"chunk_size={chunk_size!r} must be at least 1.")
        if len(texts) == 0:
            raise InvalidInput(f"No texts to encode for {key.describe()}.")
        with clock(Phase.store):
            if fingerprint_texts(texts) != key.texts_fingerprint:
                raise InvalidInput(f"The {len(texts)} texts do not match the key's fingerprint "
                                   f"{key.texts_fingerprint!r}; build the key with fingerprint_texts(texts).")
            folder = self.folder(key)
            self.last_encoded_rows = 0
            positions = _checked_order(order, len(texts))
            served = self.cached(key, len(texts))  # a finished, verified entry needs no lock (read-only caches too)
        if served is not None:
            return self._hit(key, folder, served)
        try:
            with clock(Phase.store):
                folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            return self._encode(key, texts, encode, folder, chunk_size, progress, positions,
                                in_memory=self._unpersisted(folder, error))
        with _entry_lock(folder):  # another run encoding this entry finishes first; its chunks are then ours
            return self._serve_or_encode(key, texts, encode, folder, chunk_size, progress, positions)

    def _serve_or_encode(self, key: StoreKey, texts: Sequence[str], encode: Callable[[list[str]], Any], folder: Path,
                         chunk_size: int, progress: bool, positions: np.ndarray | None) -> np.memmap:
        """With the entry's lock held: serve it, repair its damaged chunks, or encode what is missing."""
        if (folder / "manifest.json").is_file():
            entry = _load_entry(key, len(texts), folder)
            if entry.usable and not self._stale(key, entry.array, folder, fresh=False):  # type: ignore[arg-type]
                return self._hit(key, folder, entry.array)  # type: ignore[arg-type]
            if len(entry.damaged) and entry.manifest and entry.manifest.get("order") == _order_digest(positions):
                return self._repair(key, texts, encode, folder, entry, progress, positions)
            problem = entry.problem
            if len(entry.damaged):
                problem = f"fails its checksum in {entry.describe_damage()} and was encoded in another order"
            elif entry.array is not None:
                model_dim = self._dims[_model(key)][0]
                problem = f"holds {entry.array.shape[1]}-dimensional vectors, not the model's {model_dim}"
            logger.warning("Embedding cache %s %s: rebuilding.", folder, problem)
            _unlink_quietly(folder / "manifest.json", folder / "embeddings.npy")
        in_memory = False
        try:
            remove_orphans(folder)
            _discard_chunks_of_another_order(folder, _order_digest(positions))
        except OSError as error:
            in_memory = self._unpersisted(folder, error)
        return self._encode(key, texts, encode, folder, chunk_size, progress, positions, in_memory=in_memory)

    @clock(Phase.store)
    def _hit(self, key: StoreKey, folder: Path, vectors: np.memmap) -> np.memmap:
        """Serve a finished, verified entry; drop chunk files a run killed after writing its manifest left behind."""
        logger.info("Embedding cache hit for %s: %s.", key.describe(), folder)
        _unlink_quietly(*folder.glob("chunk_*.npy"))
        return vectors

    def _encode(self, key: StoreKey, texts: Sequence[str], encode: Callable[[list[str]], Any], folder: Path,
                chunk_size: int, progress: bool, positions: np.ndarray | None, *, in_memory: bool) -> np.memmap:
        """Encode every chunk not on disk yet, then join them into the finished entry (or an array in memory)."""
        ranges = [(start, min(start + chunk_size, len(texts))) for start in range(0, len(texts), chunk_size)]
        dims, sources, unpersisted = self._encode_missing(key, texts, encode, folder, ranges, progress, positions,
                                                          in_memory=in_memory)
        if unpersisted:
            vectors = _fill(np.empty((len(texts), dims), key.dtype), ranges, positions, sources)
        else:
            vectors = _consolidate(key, len(texts), folder, ranges, dims, chunk_size, positions, sources)
        self._stale(key, vectors, folder, fresh=True)
        return vectors  # type: ignore[return-value]

    def _repair(self, key: StoreKey, texts: Sequence[str], encode: Callable[[list[str]], Any], folder: Path,
                entry: _Entry, progress: bool, positions: np.ndarray | None) -> np.memmap:
        """Encode again the chunks that hold the rows failing their checksum, and rewrite the entry.

        The chunks are those the manifest records, in the same order, so each batch holds the texts it held first.
        """
        ranges = entry.chunks()
        n = len(texts)
        rank = np.empty(n, np.int64)
        rank[np.arange(n) if positions is None else positions] = np.arange(n)  # text row -> position in the order
        starts = np.array([a for a, _ in ranges])
        touched = sorted({ranges[i] for i in np.searchsorted(starts, rank[entry.damaged], side="right") - 1})
        again = sum(b - a for a, b in touched)
        logger.warning("Embedding cache %s fails its checksum in %s: the file was damaged on disk; re-encoding "
                       "the %d %s of the %d chunk(s) that hold them.", folder / "embeddings.npy",
                       entry.describe_damage(), again, "passages" if key.side == "corpus" else "queries", len(touched))
        dim = int((entry.manifest or {})["dim"])
        fresh: dict[tuple[int, int], np.ndarray] = {}
        for (start, stop), vectors in self._encoded(key, texts, encode, touched, progress, positions, done=n - again):
            if vectors.shape[1] != dim:
                raise InvalidInput(f"The encoder returned dimension {vectors.shape[1]} for rows {start}-{stop} but "
                                   f"{folder / 'embeddings.npy'} holds {dim}-dimensional vectors of the same model "
                                   "name "
                                   "and revision; a changed model needs another revision, or pass --no-cache.")
            fresh[(start, stop)] = vectors
        return _repaired(key, folder, entry, positions, fresh)

    def _unpersisted(self, folder: Path, error: OSError) -> bool:
        """Warn (once per store) that ``folder`` cannot be written; True: the vectors stay in memory."""
        if not self._unwritable:
            self._unwritable = True
            logger.warning("Embedding cache %s cannot be written (%s): keeping the vectors in memory, nothing is "
                           "persisted. Pass --cache-dir DIR (cache_dir=) for a writable folder, or --no-cache "
                           "(cache_dir=False) to silence this.", folder, error.strerror or error)
        return True

    @clock(Phase.store)
    def _stale(self, key: StoreKey, vectors: np.ndarray, folder: Path, *, fresh: bool) -> bool:
        """Whether cached ``vectors`` are stale: the model name and revision just gave another dimension.

        A cached entry of another dimension served after fresh vectors is stale (the caller rebuilds it); any other
        mismatch means vectors of another model are already in use, which cannot be undone.

        Raises:
            ValueError: the mismatch cannot be repaired by rebuilding this entry.
        """
        dim = int(vectors.shape[1])
        seen = self._dims.setdefault(_model(key), (dim, folder, fresh))
        if seen[0] == dim:
            return False
        if seen[2] and not fresh:
            return True
        model, where = f"{key.model_name}@{key.model_revision or 'unknown revision'}", key.folder_name.split("/")[1]
        raise InvalidInput(f"The embedding cache mixes two models saved as {model}: {folder} holds {dim}-dimensional "
                           f"vectors but {seen[1]} holds {seen[0]}-dimensional ones; delete {self.root}/corpus/{where} "
                           f"and {self.root}/queries/{where}, or pass another --cache-dir (or --no-cache).")

    # ------------------------------------------------------------------ encoding chunk files

    def _encoded(self, key: StoreKey, texts: Sequence[str], encode: Callable[[list[str]], Any],
                 todo: list[tuple[int, int]], progress: bool, positions: np.ndarray | None, *,
                 done: int) -> Iterator[tuple[tuple[int, int], np.ndarray]]:
        """Each chunk of ``todo`` encoded and checked, in order, under a progress bar that starts at ``done``."""
        from disastir_mteb.util.progress import progress_bar

        unit = "passages" if key.side == "corpus" else "queries"
        with progress_bar(total=len(texts), initial=done, unit=f" {unit}", disable=not progress,
                          desc=f"Encoding {key.side}") as bar:
            outputs = encode_chunks(encode, [_chunk_texts(texts, positions, r) for r in todo], on_batch=bar.update)
            try:
                for (start, stop), output in zip(todo, outputs, strict=True):
                    vectors = _check_output(output, start, stop, key.dtype)
                    self.last_encoded_rows += stop - start
                    yield (start, stop), vectors
            finally:
                getattr(outputs, "close", lambda: None)()

    def _encode_missing(self, key: StoreKey, texts: Sequence[str], encode: Callable[[list[str]], Any],
                        folder: Path, ranges: list[tuple[int, int]], progress: bool, positions: np.ndarray | None,
                        *, in_memory: bool) -> tuple[int, dict[tuple[int, int], Path | np.ndarray], bool]:
        """Encode every chunk without a verified file; return the dimension, each chunk's source, and whether in memory.

        Chunk files that fail their checks, or whose dimension differs from the encoder's, are deleted and encoded
        again after one warning. A chunk file that fails to be written switches to memory for the rest.
        """
        files = {} if in_memory else _chunk_files(folder)
        sources: dict[tuple[int, int], Path | np.ndarray] = {}
        done: dict[tuple[int, int], int] = {}
        bad: list[str] = []
        for rows in ranges:
            for path in files.get(rows, []):
                found = _chunk_dim(path, rows[1] - rows[0], key.dtype)
                if isinstance(found, int) and rows not in done:
                    done[rows], sources[rows] = found, path
                    continue
                if isinstance(found, str):
                    bad.append(f"{path.name} (rows {rows[0]}-{rows[1]}): {found}")
                _unlink_quietly(path)
        if bad:
            logger.warning("Embedding cache %s holds %d unusable chunk file(s) (%s): re-encoding them.",
                           folder, len(bad), "; ".join(bad[:3]) + ("; ..." if len(bad) > 3 else ""))
        fresh: int | None = None
        while True:
            todo = [r for r in ranges if r not in done]
            writer = None if in_memory else _ChunkWriter(folder)
            try:
                for (start, stop), vectors in self._encoded(key, texts, encode, todo, progress, positions,
                                                            done=sum(b - a for a, b in done)):
                    if fresh is not None and vectors.shape[1] != fresh:
                        raise InvalidInput(f"The encoder returned dimension {vectors.shape[1]} for rows {start}-{stop} "
                                           f"but {fresh} for earlier rows; it must return one dimension.")
                    fresh = done[(start, stop)] = vectors.shape[1]
                    # on its thread, while the next chunk is encoded; a copy, as the encoder may reuse its array
                    sources[(start, stop)] = vectors if writer is None else writer.write((start, stop), vectors)
            finally:
                failed = writer.finish(sources) if writer is not None else None
            if failed is not None:  # read-only, full disk: the rest stays in memory
                in_memory = self._unpersisted(folder, failed)
            dims = list(done.values())
            reference = fresh if fresh is not None else max(sorted(set(dims)), key=dims.count)
            stale = [r for r, dim in done.items() if dim != reference]
            if not stale:
                return reference, sources, in_memory
            logger.warning("Embedding cache %s holds %d chunk file(s) of dimension %s, not %d: re-encoding them.",
                           folder, len(stale), "/".join(sorted({str(done[r]) for r in stale})), reference)
            for r in stale:
                source = sources.pop(r)
                if isinstance(source, Path):
                    _unlink_quietly(source)
                del done[r]


class _ChunkWriter:
    """Writes finished chunk files on a thread of its own while the encoder works on the next chunk.

    At most :data:`_PENDING` chunks wait, so memory stays bounded; the first failed write (read-only folder, full
    disk) stops the writing, and the chunks not written stay in memory.
    """

    def __init__(self, folder: Path) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.folder = folder
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="disastir-chunk-writer")
        self._pending: list[tuple[tuple[int, int], Any]] = []
        self._written: dict[tuple[int, int], Path] = {}
        self._error: OSError | None = None
        self._stopped = False  # set on the writer's thread by the first write that fails

    def write(self, rows: tuple[int, int], vectors: np.ndarray) -> np.ndarray:
        """Queue a copy of ``vectors`` (an encoder may hand out one array again and again) for its file; return it."""
        held = np.array(vectors, copy=True)
        if self._error is None:
            self._pending.append((rows, self._pool.submit(self._save, rows, held)))
            while len(self._pending) > _PENDING:
                self._settle(*self._pending.pop(0))
        return held

    def _save(self, rows: tuple[int, int], vectors: np.ndarray) -> Path | None:
        if self._stopped:
            return None
        path = self.folder / _chunk_name(rows, checksum(vectors))
        try:
            write_stream_atomic(path, lambda handle: np.save(handle, vectors, allow_pickle=False))
        except BaseException:
            self._stopped = True
            raise
        return path

    @clock(Phase.store)
    def _settle(self, rows: tuple[int, int], future: Any) -> None:
        """Wait for one chunk's file; an OSError is kept (the rest stays in memory), anything else raised here."""
        try:
            path = future.result()
        except OSError as error:
            self._error = self._error or error
        else:
            if path is not None:
                self._written[rows] = path

    def finish(self, sources: dict[tuple[int, int], Path | np.ndarray]) -> OSError | None:
        """Wait for every queued file; point ``sources`` at the written ones; the first write error, if any."""
        try:
            for rows, future in self._pending:
                self._settle(rows, future)
        finally:
            self._pending.clear()
            self._pool.shutdown(wait=True)
        sources.update(self._written)  # the chunk's vectors need not stay in memory
        return self._error


#: Chunks that may wait for their file at once (each 1,024 vectors: 1.5 MB at d=384, 16 MB at d=4096).
_PENDING = 2


# ---------------------------------------------------------------------- encoding chunk by chunk


def encode_chunks(encode: Callable[[list[str]], Any], chunks: Sequence[list[str]],
                  on_batch: Callable[[int], None] | None = None) -> Iterator[Any]:
    """Each chunk's encoder output, in order; ``on_batch`` hears of every text encoded (for a progress bar).

    Through ``encode.encode_stream`` when it has one, so the encoder works across chunk boundaries.
    """
    stream = getattr(encode, "encode_stream", None)
    if callable(stream):
        return stream(chunks, on_batch=on_batch)
    return _per_chunk(encode, chunks, on_batch)


def _per_chunk(encode: Callable[[list[str]], Any], chunks: Sequence[list[str]],
               on_batch: Callable[[int], None] | None) -> Iterator[Any]:
    for chunk in chunks:
        output = encode(chunk)
        if on_batch is not None:
            on_batch(len(chunk))
        yield output


def encode_in_memory(texts: list[str], encode: Callable[[list[str]], Any], order: np.ndarray | None,
                     chunk_size: int, progress: str | None = None) -> np.ndarray:
    """What the store does, without files: encode ``texts`` chunk by chunk in ``order``, return them in theirs.

    The chunks, and so the batches and the float rounding, are the ones :meth:`EmbeddingStore.get_or_encode` would
    make; nothing is written, checked or cached. ``progress`` names the side on the bar (``None``: no bar).
    """
    from disastir_mteb.util.progress import progress_bar

    positions = np.arange(len(texts)) if order is None else np.asarray(order)
    ranges = [positions[start:start + chunk_size] for start in range(0, len(texts), chunk_size)]
    out: np.ndarray | None = None
    unit = " passages" if progress == "corpus" else " queries"
    with progress_bar(total=len(texts), desc=f"Encoding {progress}", unit=unit, disable=progress is None) as bar:
        outputs = encode_chunks(encode, [[texts[int(i)] for i in rows] for rows in ranges], on_batch=bar.update)
        for rows, output in zip(ranges, outputs, strict=True):
            vectors = output.detach().float().cpu().numpy() if hasattr(output, "detach") else np.asarray(output)
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), np.float32)
            out[rows] = vectors
    return out if out is not None else np.zeros((0, 1), np.float32)

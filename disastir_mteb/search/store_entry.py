"""A finished store entry: the chunk files joined into ``embeddings.npy`` under a manifest, verified when read.

``embeddings.npy`` holds row ``i`` = text ``i`` whatever the encoding order; ``checksums.npy`` the
xxh3-64 digest of every row's bytes (:func:`row_checksums`); ``manifest.json`` records the
:class:`~disastir_mteb.search.store_key.StoreKey` fields, the format, shape, the chunks the vectors
were encoded in (ranges of the encoding order), the order's digest, the checksum of
``checksums.npy``, date and library versions. The manifest is written last, so an entry without one
is unfinished. An entry is served only when its manifest matches the key, its array has the
expected shape, dtype and file size, and every row still hashes to its recorded checksum: bytes
damaged on disk (zeroed, flipped, overwritten in place, which leave the shape intact) are found
before a single vector is used.

Why a checksum per row rather than per block: the rows are stored in the texts' order but encoded
in length order, so any block of stored rows holds rows of nearly every encoding chunk. Knowing the
damaged rows themselves, a repair encodes again only the chunks that hold them (a damaged 4 KB page
is at most four chunks, not the corpus). Hashing 239,704 rows of 384 float32 takes about 0.1 s here.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from disastir_mteb.search.store_chunks import _ORDER_FILE, _fill, _order_digest, _replace_atomic, checksum
from disastir_mteb.search.store_key import _FORMAT, StoreKey, _library_versions

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__: list[str] = []  # private helpers of EmbeddingStore, imported by name

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
    """What reading a finished entry found.

    Attributes:
        array: the memory map (None when the entry cannot be used at all).
        problem: why it cannot be used at all ('' when ``array`` is set).
        damaged: rows (texts' order) whose bytes fail their checksum.
        manifest: the manifest as read (None when unreadable).
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


def _write_entry(key: StoreKey, folder: Path, n_rows: int, dim: int, ranges: list[tuple[int, int]],
                 positions: np.ndarray | None, fill: Callable[[np.ndarray], np.ndarray], chunk_size: int) -> None:
    """Write ``embeddings.npy`` (``fill(out)`` puts the rows in place), fsync it, then the manifest last."""
    final = folder / "embeddings.npy"
    temporary = folder / f".embeddings.npy.{os.getpid()}.tmp"
    try:
        out = fill(np.lib.format.open_memmap(temporary, mode="w+", dtype=key.dtype, shape=(n_rows, dim)))
        out.flush()
        rows = row_checksums(out)
        del out
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, final)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _replace_atomic(folder / "checksums.npy", lambda handle: np.save(handle, rows, allow_pickle=False))
    manifest = {**asdict(key), "format": _FORMAT, "n_rows": n_rows, "dim": dim, "chunk_size": chunk_size,
                "chunks": [list(r) for r in ranges], "order": _order_digest(positions),
                "row_checksums": _ROW_CHECKSUM, "checksums": checksum(rows),
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": _library_versions()}
    _replace_atomic(folder / "manifest.json", lambda handle: handle.write(json.dumps(manifest, indent=2).encode()))


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
            raise FileNotFoundError(f"Embedding cache {folder}: chunk files vanished while consolidating "
                                    f"and no finished entry replaced them ({entry.problem}); run again.") from None
        return entry.array  # type: ignore[return-value]
    for path in folder.glob("chunk_*.npy"):
        path.unlink(missing_ok=True)
    (folder / _ORDER_FILE).unlink(missing_ok=True)
    return _reloaded(key, n_rows, folder)


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


def _reloaded(key: StoreKey, n_rows: int, folder: Path) -> np.memmap:
    entry = _load_entry(key, n_rows, folder)
    if not entry.usable:
        problem = entry.problem or f"fails its checksum in {entry.describe_damage()}"
        raise OSError(f"Embedding cache {folder} {problem} right after writing it; is the disk full or failing?")
    return entry.array  # type: ignore[return-value]


def _load_entry(key: StoreKey, n_rows: int, folder: Path) -> _Entry:
    """Read a finished entry: its memory map and the rows that fail their checksum, or why it cannot be used."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return _Entry(None, "has an unreadable manifest")
    if not isinstance(manifest, dict):
        return _Entry(None, "has an unreadable manifest")
    for name, value in {**asdict(key), "format": _FORMAT}.items():
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

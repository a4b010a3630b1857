"""The chunk files of an unfinished store entry: their names, their order, their checksums, their atomic writes.

While an entry is encoded, every finished chunk of the encoding order is a file
``chunk_<start>_<stop>_<checksum>.npy`` (positions ``start:stop`` of that order), written under a
pid-named temporary name, fsynced and renamed, so a run killed at any point resumes from the last
one. The checksum in the name is :func:`checksum` of the vectors the file holds, computed before
they were written: a chunk file is used only if it has a readable header, the expected rows and
dtype, and bytes that still hash to its name (a file damaged in the middle keeps its shape, so
only the checksum catches it). ``order.json`` records the order's digest: chunks written under
another order hold other rows and are discarded. The encoder's output is checked (2-D, float,
finite) before it is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from disastir_mteb.util.atomic import writer_gone

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import IO

logger = logging.getLogger(__name__)

__all__: list[str] = []  # private helpers of EmbeddingStore, imported by name

_ORDER_FILE = "order.json"
_CHUNK = re.compile(r"chunk_(\d{10})_(\d{10})(?:_([0-9a-f]{32}))?\.npy")


def checksum(array: np.ndarray) -> str:
    """The xxh3-128 digest (32 hex characters) of an array's bytes in C order.

    xxh3 rather than SHA-256 (the USearch index's) because every byte of an entry is hashed on
    every run that reads it: 239,704 x 384 float32 (368 MB) take about 0.04 s here, SHA-256 0.34 s.
    It guards against damage, not against someone who forges a cache (a cache is never unpickled).
    """
    import xxhash

    return xxhash.xxh3_128_hexdigest(np.ascontiguousarray(array).data)


def _chunk_name(rows: tuple[int, int], digest: str) -> str:
    return f"chunk_{rows[0]:010d}_{rows[1]:010d}_{digest}.npy"


def _chunk_files(folder: Path) -> dict[tuple[int, int], list[Path]]:
    """The chunk files in ``folder`` by the rows they claim (several when runs left more than one)."""
    found: dict[tuple[int, int], list[Path]] = {}
    for path in sorted(folder.glob("chunk_*.npy")):
        match = _CHUNK.fullmatch(path.name)
        if match:
            found.setdefault((int(match[1]), int(match[2])), []).append(path)
    return found


def _fill(out: np.ndarray, ranges: list[tuple[int, int]], positions: np.ndarray | None,
          sources: dict[tuple[int, int], Path | np.ndarray]) -> np.ndarray:
    """Put each chunk (an array, or the file it was verified in) at its rows of ``out`` (the texts' order)."""
    for rows in ranges:
        source = sources[rows]
        out[slice(*rows) if positions is None else positions[rows[0]:rows[1]]] = (
            np.load(source, mmap_mode="r") if isinstance(source, Path) else source)
    return out


def _unlink_quietly(*paths: Path) -> None:
    """Delete ``paths`` where possible: a read-only cache keeps them, and later loads verify them anyway."""
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            continue

def _checked_order(order: Sequence[int] | np.ndarray | None, n: int) -> np.ndarray | None:
    """``order`` as an int64 array after checking it is a permutation of ``range(n)``; None stays None."""
    if order is None:
        return None
    positions = np.asarray(order, dtype=np.int64)
    if positions.shape != (n,) or not np.array_equal(np.sort(positions), np.arange(n)):
        raise ValueError(f"order must be a permutation of range({n}); got shape {positions.shape}.")
    return positions


def _order_digest(positions: np.ndarray | None) -> str:
    """``as given`` for no order, else a 32-hex digest of the permutation."""
    if positions is None:
        return "as given"
    return hashlib.blake2b(positions.astype("<i8").tobytes(), digest_size=16).hexdigest()


def _discard_chunks_of_another_order(folder: Path, digest: str) -> None:
    """Delete chunk files encoded under another order (they hold other rows), then record ``digest``."""
    path = folder / _ORDER_FILE
    try:
        recorded = json.loads(path.read_text(encoding="utf-8")).get("order")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if recorded == digest:
        return
    chunks = list(folder.glob("chunk_*.npy"))
    if chunks:
        logger.warning("Embedding cache %s holds %d chunk file(s) encoded in another order (%s): re-encoding them.",
                       folder, len(chunks), "no record" if recorded is None else f"order {str(recorded)[:12]}")
        for chunk in chunks:
            chunk.unlink(missing_ok=True)
    _replace_atomic(path, lambda handle: handle.write(json.dumps({"order": digest}).encode()))


def _chunk_texts(texts: Sequence[str], positions: np.ndarray | None, rows: tuple[int, int]) -> list[str]:
    """The texts of one chunk, in encoding order."""
    start, stop = rows
    if positions is None:
        return [texts[i] for i in range(start, stop)]
    return [texts[int(i)] for i in positions[start:stop]]


def _chunk_dim(path: Path, n_rows: int, dtype: str) -> int | str:
    """The dimension of a finished chunk file whose bytes match the checksum in its name, or why it cannot be used."""
    match = _CHUNK.fullmatch(path.name)
    if match is None or match[3] is None:
        return "no checksum in its name (written by an earlier version)"
    try:
        array = np.load(path, mmap_mode="r")
    except (OSError, ValueError, EOFError):  # EOFError: an empty file
        return "unreadable or truncated"
    if array.ndim != 2 or array.shape[0] != n_rows or array.dtype != np.dtype(dtype):
        return f"shape {array.shape} {array.dtype}, expected ({n_rows}, dim) {dtype}"
    if path.stat().st_size != array.offset + array.nbytes:
        return f"{path.stat().st_size} bytes, not {array.offset + array.nbytes}"
    if checksum(array) != match[3]:
        return "damaged: its bytes fail their checksum"
    return int(array.shape[1])


def _check_output(output: Any, start: int, stop: int, dtype: str) -> np.ndarray:
    """The encoder's output for rows ``start:stop`` as a finite 2-D array of ``dtype``."""
    if hasattr(output, "detach"):  # torch tensor, possibly bfloat16 or on a GPU
        output = output.detach().float().cpu().numpy()
    array = np.asarray(output)
    where = f"rows {start}-{stop}"
    if array.ndim != 2 or array.shape[0] != stop - start:
        raise ValueError(f"The encoder returned shape {array.shape} for {where}; expected ({stop - start}, dim).")
    if not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"The encoder returned dtype {array.dtype} for {where}; expected a float array.")
    with np.errstate(over="ignore"):  # float16 overflow becomes inf, refused just below
        array = array.astype(dtype, copy=False)
    if not np.isfinite(array).all():
        bad = int(np.flatnonzero(~np.isfinite(array).all(axis=1))[0]) + start
        raise ValueError(f"The encoder returned NaN or infinite values (as {dtype}) for {where}, first in row {bad}.")
    return array


def _replace_atomic(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write through a pid-named temporary file, fsync, then ``os.replace``: readers never see half a file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _remove_orphan_temporaries(folder: Path) -> None:
    """Delete temporary files left by processes that died mid-write (a killed run's 1 GB leftovers)."""
    for path in folder.glob(".*.tmp"):
        if writer_gone(path.name.rsplit(".", 2)[-2]):
            path.unlink(missing_ok=True)



@contextlib.contextmanager
def _entry_lock(folder: Path) -> Iterator[None]:
    """Hold the entry's lock (``folder/.lock``, POSIX ``flock``) while its files are read and written.

    A second run that needs the same entry waits here (after one warning naming the folder and the
    holder's process id) and then finds the entry finished, or the chunks of a run that died:
    nothing is encoded twice. The kernel drops the lock of a killed process, so a ``kill -9`` never
    leaves an entry locked. Where there is no ``flock`` (Windows) or no writable lock file, runs do
    not wait: every file still appears through an atomic rename, so the cost is work, not damage.
    """
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        handle = open(folder / ".lock", "a+")  # held open for the lock's lifetime
    except OSError:
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            logger.warning("Embedding cache %s is being encoded by another run (process %s): waiting for it, so "
                           "that nothing is encoded twice.", folder, holder)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
        except OSError:
            pass
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

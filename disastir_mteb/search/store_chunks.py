"""The chunk files of an unfinished store entry: their names, their order, their checks, their atomic writes.

While an entry is encoded, every finished chunk of the encoding order is a file
``chunk_<start>_<stop>.npy`` (positions ``start:stop`` of that order), written under a pid-named
temporary name, fsynced and renamed, so a run killed at any point resumes from the last one.
``order.json`` records the order's digest: chunks written under another order hold other rows
and are discarded. A chunk file is used only if it has the expected rows, dtype and a readable
header; the encoder's output is checked (2-D, float, finite) before it is written.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from disastir_mteb.util.atomic import writer_gone

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path
    from typing import IO

logger = logging.getLogger(__name__)

__all__: list[str] = []  # private helpers of EmbeddingStore, imported by name

_ORDER_FILE = "order.json"


def _chunk_name(rows: tuple[int, int]) -> str:
    return f"chunk_{rows[0]:010d}_{rows[1]:010d}.npy"



def _fill(out: np.ndarray, folder: Path, ranges: list[tuple[int, int]], positions: np.ndarray | None,
          memory: dict[tuple[int, int], np.ndarray]) -> np.ndarray:
    """Put each chunk (from ``memory``, else its file) at its rows of ``out`` (the texts' order); return ``out``."""
    for rows in ranges:
        chunk = memory.get(rows)
        out[slice(*rows) if positions is None else positions[rows[0]:rows[1]]] = (
            chunk if chunk is not None else np.load(folder / _chunk_name(rows), mmap_mode="r"))
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
    """The dimension of a finished chunk file, or why it cannot be used."""
    if not path.is_file():
        return "missing"
    try:
        array = np.load(path, mmap_mode="r")
    except (OSError, ValueError, EOFError):  # EOFError: an empty file
        return "unreadable or truncated"
    if array.ndim != 2 or array.shape[0] != n_rows or array.dtype != np.dtype(dtype):
        return f"shape {array.shape} {array.dtype}, expected ({n_rows}, dim) {dtype}"
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


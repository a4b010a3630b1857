"""A finished store entry: the chunk files joined into ``embeddings.npy`` under a manifest, verified when read.

``embeddings.npy`` holds row ``i`` = text ``i`` whatever the encoding order; ``manifest.json``
records the :class:`~disastir_mteb.search.store_key.StoreKey` fields, the format, shape, chunk size,
order digest, date and library versions. The manifest is written last, so an entry without one is
unfinished; an entry is served only when its manifest matches the key and its array has the
expected shape, dtype and file size.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

import numpy as np

from disastir_mteb.search.store_chunks import _ORDER_FILE, _fill, _order_digest, _replace_atomic
from disastir_mteb.search.store_key import _FORMAT, StoreKey, _library_versions

if TYPE_CHECKING:
    from pathlib import Path

__all__: list[str] = []  # private helpers of EmbeddingStore, imported by name


def _consolidate(key: StoreKey, n_rows: int, folder: Path, ranges: list[tuple[int, int]], dim: int,
                 chunk_size: int, positions: np.ndarray | None) -> np.memmap:
    """Join the chunk files into ``embeddings.npy`` (in the texts' order), write the manifest, drop the chunks."""
    final = folder / "embeddings.npy"
    temporary = folder / f".embeddings.npy.{os.getpid()}.tmp"
    try:
        out = _fill(np.lib.format.open_memmap(temporary, mode="w+", dtype=key.dtype, shape=(n_rows, dim)),
                    folder, ranges, positions, {})
        out.flush()
        del out
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, final)
    except FileNotFoundError:  # another process consolidated and removed the chunks first
        temporary.unlink(missing_ok=True)
        cached, problem = _load_verified(key, n_rows, folder)
        if cached is None:
            raise FileNotFoundError(f"Embedding cache {folder}: chunk files vanished while consolidating "
                                    f"and no finished entry replaced them ({problem}); run again.") from None
        return cached
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    manifest = {**asdict(key), "format": _FORMAT, "n_rows": n_rows, "dim": dim, "chunk_size": chunk_size,
                "order": _order_digest(positions),
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": _library_versions()}
    _replace_atomic(folder / "manifest.json", lambda handle: handle.write(json.dumps(manifest, indent=2).encode()))
    for path in folder.glob("chunk_*.npy"):
        path.unlink(missing_ok=True)
    (folder / _ORDER_FILE).unlink(missing_ok=True)
    cached, problem = _load_verified(key, n_rows, folder)
    if cached is None:
        raise OSError(f"Embedding cache {folder} {problem} right after writing it; is the disk full?")
    return cached

def _load_verified(key: StoreKey, n_rows: int, folder: Path) -> tuple[np.memmap | None, str]:
    """The entry's memory map if its manifest, shape, dtype and size all check out, else why not."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, "has an unreadable manifest"
    for name, value in {**asdict(key), "format": _FORMAT}.items():
        if manifest.get(name) != value:
            return None, f"was built for {name}={manifest.get(name)!r}, not {value!r}"
    if manifest.get("n_rows") != n_rows:
        unit = "passages" if key.side == "corpus" else "queries"
        return None, f"was built for {manifest.get('n_rows')} {unit}, not {n_rows}"
    path = folder / "embeddings.npy"
    try:
        array = np.load(path, mmap_mode="r")
    except (OSError, ValueError, EOFError) as error:
        return None, f"has an unreadable or truncated embeddings.npy ({error})"
    expected = (n_rows, manifest.get("dim"))
    if array.shape != expected or array.dtype != np.dtype(key.dtype):
        return None, f"holds a {array.dtype} array of shape {array.shape}, not {key.dtype} {expected}"
    if path.stat().st_size != array.offset + array.nbytes:
        return None, f"has an embeddings.npy of {path.stat().st_size} bytes, not {array.offset + array.nbytes}"
    return array, ""

"""The on-disk cache of built USearch indexes: where an entry lives, what its manifest records, its SHA-256.

USearch maps any file that looks like an index, so the manifest keeps the file's SHA-256, checked before mapping.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from disastir_mteb.search.store import fingerprint_texts
from disastir_mteb.util.atomic import write_bytes_atomic, write_path_atomic
from disastir_mteb.util.digest import short_digest
from disastir_mteb.vocabulary.ann_params import INDEX_FORMAT

if TYPE_CHECKING:
    from pathlib import Path

    from disastir_mteb.search.exact_search import Similarity
    from disastir_mteb.vocabulary.ann_params import AnnParams

__all__ = ["cache_entry", "manifest_mismatch", "write_entry"]


def cache_entry(cache_dir: Path, cache_key: str, kind: Similarity, params: AnnParams, idxs: list[str],
                documents: np.ndarray) -> tuple[Path, Path, dict[str, Any]]:
    """(index file, manifest file, expected manifest) of the entry for ``kind`` under ``cache_dir``."""
    from importlib.metadata import version

    name = f"{re.sub(r'[^A-Za-z0-9._-]+', '_', cache_key)[:80]}-{short_digest(cache_key.encode())[:12]}"
    stem = cache_dir / "usearch" / name / f"{kind}-{params.digest[:16]}"
    sample = np.asarray(documents[np.linspace(0, len(documents) - 1, 64).astype(np.int64)], np.float32)
    return stem.with_suffix(".usearch"), stem.with_suffix(".json"), {
        "format": INDEX_FORMAT, "params": params.as_dict(), "similarity": kind, "n": len(idxs),
        "dim": int(documents.shape[1]), "ids": fingerprint_texts(idxs),
        "vectors": short_digest(sample.tobytes()), "usearch": version("usearch")}


def manifest_mismatch(path: Path, manifest_path: Path, manifest: dict[str, Any]) -> str:
    """Why the entry cannot be used (a field recorded otherwise, then a SHA-256 mismatch), or ``""``.

    Raises:
        OSError: the manifest or the index file cannot be read.
        ValueError: the manifest is not JSON.
    """
    stored = json.loads(manifest_path.read_text(encoding="utf-8"))
    why = next((f"was built for {name}={stored.get(name)!r}, not {value!r}" for name, value in manifest.items()
                if stored.get(name) != value), "")
    if not why and stored.get("sha256") != _file_sha256(path):
        why = f"is damaged or truncated (not memory-mapped): its SHA-256 differs from {manifest_path.name}'s"
    return why


def write_entry(index: Any, path: Path, manifest_path: Path, manifest: dict[str, Any]) -> Exception | None:
    """Write ``index``, then its manifest with the index's SHA-256, each atomically.

    Returns:
        ``None`` once written, or the error from a folder that cannot be written (read-only, full): the caller
        then keeps the index in memory after one warning.
    """
    try:
        manifest_path.unlink(missing_ok=True)  # a crash before the new manifest leaves the entry invalid, not wrong
        write_path_atomic(path, lambda temporary: index.save(str(temporary)))
        manifest = {**manifest, "sha256": _file_sha256(path)}
        write_bytes_atomic(manifest_path, json.dumps(manifest, indent=2).encode())
    except (OSError, RuntimeError) as error:  # usearch reports an unwritable file as RuntimeError
        return error
    return None


def _file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()

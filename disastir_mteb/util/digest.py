"""The digests that name cache entries; :func:`short_digest` is part of the cache formats (changing it changes keys)."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["file_digest", "short_digest"]

_READ = 1 << 20  # bytes per read: larger reads are no faster from the page cache


def short_digest(data: bytes) -> str:
    """The 32-hex-character (128-bit) blake2b digest of ``data``."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def file_digest(path: str | Path) -> str:
    """The xxh3-128 hex digest of the file at ``path``, read through a buffer (not mapped: no ``SIGBUS``).

    Raises:
        OSError: the file cannot be read.
    """
    import xxhash

    digest = xxhash.xxh3_128()
    buffer = bytearray(_READ)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while count := handle.readinto(buffer):
            digest.update(view[:count])
    return digest.hexdigest()

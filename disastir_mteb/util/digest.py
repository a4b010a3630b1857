"""The digests that name cache entries and fingerprint their contents.

:func:`short_digest` is part of the cache formats: changing it changes every cache key.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["file_digest", "short_digest"]

_READ = 1 << 20  # bytes per read: larger reads are no faster from the page cache


def short_digest(data: bytes) -> str:
    """The 32-hex-character (128-bit) blake2b digest of ``data``."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def file_digest(path: str | Path) -> str:
    """The 32-hex-character xxh3-128 digest of every byte of the file at ``path``.

    xxh3, not blake2b: whole data folders are hashed at every run. Read through a buffer, not memory-mapped, so a file
    cut short by another program meanwhile never kills the process (``SIGBUS``).

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

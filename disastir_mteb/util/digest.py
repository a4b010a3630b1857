"""The digests that name cache entries and fingerprint their contents.

- :func:`short_digest`: 32 hex characters of blake2b, so the store's keys, the USearch index cache and the ANN
  parameters' digest are made alike. Changing it changes every cache key (and so rebuilds every cache): it is part
  of the cache formats.
- :func:`file_digest`: the xxh3-128 digest of a file's bytes, read whole: what a content-keyed cache names the
  files it was built from by (:mod:`disastir_mteb.data.data_cache`), so that no change to them goes unseen.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["file_digest", "short_digest"]

_READ = 1 << 20  # bytes per read: larger reads are no faster from the page cache


def short_digest(data: bytes) -> str:
    """The 32-hex-character (128-bit) blake2b digest of ``data``.

    Examples:
        >>> short_digest(b"DisastIR")[:8], len(short_digest(b""))
        ('1fb33b30', 32)
    """
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def file_digest(path: str | Path) -> str:
    """The 32-hex-character xxh3-128 digest of every byte of the file at ``path``.

    xxh3 (the embedding store's checksum) rather than blake2b because whole data folders (1.5 GB at full scale) are
    hashed at every run, and xxh3 takes several times less. The file is read through a 1 MiB buffer, not memory-mapped:
    a file cut short by another program while it is read ends the read early, it never kills the process (``SIGBUS``).

    Raises:
        OSError: the file cannot be read.

    Examples:
        >>> import tempfile, os
        >>> with tempfile.NamedTemporaryFile(delete=False) as handle:
        ...     _ = handle.write(b"DisastIR")
        >>> file_digest(handle.name)[:8], os.unlink(handle.name)
        ('14e4344e', None)
    """
    import xxhash

    digest = xxhash.xxh3_128()
    buffer = bytearray(_READ)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while count := handle.readinto(buffer):
            digest.update(view[:count])
    return digest.hexdigest()

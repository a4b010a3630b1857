"""The short digest that names cache entries and fingerprints their contents: 32 hex characters of blake2b.

One function, so the store's keys, the USearch index cache and the ANN parameters' digest are made alike.
Changing it changes every cache key (and so rebuilds every cache): it is part of the cache formats.
"""

from __future__ import annotations

import hashlib

__all__ = ["short_digest"]


def short_digest(data: bytes) -> str:
    """The 32-hex-character (128-bit) blake2b digest of ``data``.

    Examples:
        >>> short_digest(b"DisastIR")[:8], len(short_digest(b""))
        ('1fb33b30', 32)
    """
    return hashlib.blake2b(data, digest_size=16).hexdigest()

"""Where the package caches everything: generated samples, embeddings and ANN indexes."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_DIR_ENV", "cache_root"]

CACHE_DIR_ENV = "DISASTIR_CACHE_DIR"


def cache_root() -> Path:
    """``DISASTIR_CACHE_DIR``, else ``$XDG_CACHE_HOME/disastir_mteb``, else ``~/.cache/disastir_mteb``."""
    env = os.environ.get(CACHE_DIR_ENV)
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = env or (Path(xdg) / "disastir_mteb" if xdg else Path.home() / ".cache" / "disastir_mteb")
    return Path(root).expanduser()

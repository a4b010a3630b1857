"""Writes that never leave half a file: a temporary file in the same folder, then ``os.replace``."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["write_bytes_atomic", "write_json_atomic", "write_text_atomic"]


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; readers see the old file or the new one."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; readers see the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile("wb", dir=path.parent, suffix=".tmp", delete=False)
    try:
        with handle:
            handle.write(data)
        os.chmod(handle.name, 0o666 & ~_umask())  # temporary files are private (0600); results are not
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_atomic(path: str | Path, payload: Any) -> Path:
    """Write ``payload`` as indented JSON to ``path`` atomically."""
    return write_text_atomic(path, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")

"""A small filesystem for a test: a tmpfs of a given size, mounted for a ``with`` block (test code, not shipped).

Full-disk faults are real here: writes past the size end in ``ENOSPC``. Where mounting is not permitted (no root, no
``mount``), the test is skipped, saying why.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """``folder`` as a tmpfs of ``size`` (``64k``, ``256k``) until the block ends."""
    if shutil.which("mount") is None:
        pytest.skip("no mount command here: cannot make a small filesystem")
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here ({done.stderr.strip() or done.returncode})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def grow(folder: Path, size: str) -> None:
    """Give the tmpfs at ``folder`` a new size (space freed, as a user would free it)."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(folder)], check=True)

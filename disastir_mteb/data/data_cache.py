"""What the data layer derives from a data folder, kept on disk: keyed by content, read back verified.

Joining the full folder takes tens of seconds at every run, so the corpus and each task's join are kept as checked
files (never a pickle), keyed by the content of their data files (never names, sizes or times, which ``cp -p`` or
``os.utime`` keep), the code that computes them, and the Python and pyarrow versions (whose Unicode tables
``strip`` follows). A damaged entry is one warning and is rebuilt.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from disastir_mteb.util.cache_dir import CACHE_DIR_ENV, cache_root
from disastir_mteb.util.checked_file import CheckedFile, DamagedFile, Section, read_checked, write_checked
from disastir_mteb.util.digest import file_digest, short_digest

logger = logging.getLogger(__name__)

__all__ = ["FOLDER", "TASK_CACHE_ENV", "cache_folder", "code_digest", "entry_key", "read_entry",
           "source_digest", "unusable", "write_entry"]

#: The environment variable that turns the cache off: ``0`` (also ``off``, ``false``, ``no``).
TASK_CACHE_ENV = "DISASTIR_TASK_CACHE"
#: The cache's folder under the cache root.
FOLDER = "task-data"
#: Bumped when the layout of an entry changes without a change of the code that reads it.
_FORMAT = 1

_digests: dict[str, tuple[tuple[int, ...], str]] = {}  # resolved path -> (identity, content digest), this process
_unwritable: set[Path] = set()  # folders already warned about


def cache_folder(keep: bool = True) -> Path | None:
    """``<cache root>/task-data``, or None when ``keep`` is False (the data source's ``keep_joins``)."""
    return cache_root() / FOLDER if keep else None


def _identity(stat: os.stat_result) -> tuple[int, ...]:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def source_digest(path: str | Path) -> str:
    """The content digest of a data file, hashed once per process while its identity stays the same.

    The identity holds the change time, which writing or ``os.utime`` sets to the kernel's clock, and the inode, which
    a ``rename`` over the file changes: only a rewrite within one clock tick could pass unseen, in this process alone.

    Raises:
        OSError: the file cannot be read.
    """
    resolved = str(Path(path).resolve())
    identity = _identity(os.stat(resolved))
    known = _digests.get(resolved)
    if known is not None and known[0] == identity:
        return known[1]
    digest = file_digest(resolved)
    if _identity(os.stat(resolved)) == identity:  # not changed while it was read: the digest names this identity
        _digests[resolved] = (identity, digest)
    return digest


@functools.cache
def code_digest(*modules: ModuleType) -> str:
    """A digest of the source of ``modules`` and this module (without a source file: the package's version)."""
    import pyarrow

    from disastir_mteb.util import checked_file

    parts = [f"format {_FORMAT}", f"python {sys.version_info[0]}.{sys.version_info[1]}",
             f"pyarrow {pyarrow.__version__}"]
    for module in (*modules, sys.modules[__name__], checked_file):
        try:
            parts.append(f"{module.__name__} {file_digest(str(module.__file__))}")
        except OSError:  # no source file to read (a frozen or zipped install): the package's version stands for it
            from importlib.metadata import PackageNotFoundError, version

            try:
                parts.append(f"{module.__name__} of disastir-mteb {version('disastir-mteb')}")
            except PackageNotFoundError:
                parts.append(f"{module.__name__} of an unknown version")
    return short_digest("\n".join(parts).encode("utf-8"))


def entry_key(kind: str, code: str, sources: Mapping[str, str]) -> str:
    """The key of an entry: its kind, the code that computes it, and the content digests of its sources."""
    return short_digest(json.dumps({"kind": kind, "code": code, "sources": dict(sorted(sources.items()))},
                                   sort_keys=True).encode("utf-8"))


def read_entry(path: Path, key: str, what: str) -> CheckedFile | None:
    """The checked file at ``path`` if it verifies and holds ``key``, else None (a miss; damage is one warning).

    A file copied over another entry's name holds another key; ``what`` names the entry in the warning.
    """
    try:
        entry = read_checked(path)
    except (FileNotFoundError, NotADirectoryError):  # no entry (a cache folder under a file holds none either)
        return None
    except (DamagedFile, OSError) as error:
        unusable(path, what, error.reason if isinstance(error, DamagedFile)
                 else f"it cannot be read: {error.strerror or error}")
        return None
    if entry.meta.get("key") != key:
        unusable(path, what, f"it holds another entry, key {entry.meta.get('key')!r}")
        return None
    return entry


def unusable(path: Path, what: str, reason: str) -> None:
    """The one warning for an entry that is there but cannot be used (the caller then rebuilds it)."""
    logger.warning("Task cache file %s (%s) cannot be used (%s): rebuilding it from the data files.", path, what,
                   reason)


def write_entry(path: Path, key: str, meta: Mapping[str, Any], sections: Mapping[str, Section]) -> bool:
    """Write an entry (atomically); False, after one warning per folder and process, when it cannot be written."""
    try:
        write_checked(path, {**meta, "key": key}, sections)
    except OSError as error:
        root = path.parent.parent
        if root not in _unwritable:
            _unwritable.add(root)
            logger.warning("Task cache %s cannot be written (%s): the tasks are read and joined from the data files "
                           "at every run (about 18 s for all 48 at full scale). Set %s (--cache-dir) to a writable "
                           "folder, or %s=0 (--no-cache) to silence this.", root, error.strerror or error,
                           CACHE_DIR_ENV, TASK_CACHE_ENV)
        return False
    return True

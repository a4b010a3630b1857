"""Writes that never leave half a file: a temporary file in the same folder, then ``os.replace``.

Temporary names are hidden and carry the writer's process id (``.<name>.<pid>.<random>.tmp``), so
a run killed mid-write leaves no file that passes for a result, and the next write into that
folder removes the leftovers of writers that are gone. ``os.replace`` swaps a symbolic link
itself, never the file it points to. A write that fails (a full disk: ``ENOSPC``) raises an
``OSError`` naming the file it was for, never only the hidden temporary name or nothing at all.
A file that cannot be read back is never deleted: :func:`set_aside` renames it beside itself.
(mteb's result files get the same through ``disastir_mteb.runner.result_cache``.)
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["error_naming", "remove_orphans", "set_aside", "write_bytes_atomic", "write_json_atomic",
           "write_stream_atomic", "write_text_atomic", "writer_gone"]


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; readers see the old file or the new one."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; readers see the old file or the new one."""
    return write_stream_atomic(path, lambda handle: handle.write(data))


def write_stream_atomic(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """Let ``write`` fill ``path`` through an open binary handle, atomically: readers see the old file or the new one.

    For files too large to hold twice in memory (a corpus written as Arrow, record batch by record batch): the
    same temporary name, ``fsync``, ``os.replace`` and error naming as :func:`write_bytes_atomic`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(path.parent, f".{path.name}.")
    handle = tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp",
                                         delete=False)
    try:
        with handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(handle.name, 0o666 & ~_umask())  # temporary files are private (0600); results are not
        os.replace(handle.name, path)
    except OSError as error:
        Path(handle.name).unlink(missing_ok=True)
        raise error_naming(error, path, Path(handle.name)) from None
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return path


def error_naming(error: OSError, path: Path, temporary: Path | None) -> OSError:
    """``error`` naming ``path``, the file being written, where it names nothing or only ``temporary``.

    A failed ``write`` (``[Errno 28] No space left on device``) names no file at all, and the hidden
    temporary name (a file or a staging folder) means nothing to a user.
    """
    named = error.filename
    if named is not None and (temporary is None or not Path(named).is_relative_to(temporary)):
        return error
    return type(error)(error.errno, error.strerror or str(error), str(path))


def set_aside(path: str | Path, why: str = "unreadable") -> Path:
    """Rename ``path`` to ``<name>.<why>-<UTC time>`` in its folder and return the new path; never deletes it.

    For a file a run cannot use but a user may want to look at (a result file cut short). The new name
    ends in neither ``.json`` nor a task name, so mteb's and this package's result loaders pass it by, and
    it never replaces an earlier file set aside (a counter is added when the name is taken).
    """
    path = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target, number = path.with_name(f"{path.name}.{why}-{stamp}"), 1
    while target.exists() or target.is_symlink():
        number += 1
        target = path.with_name(f"{path.name}.{why}-{stamp}-{number}")
    os.rename(path, target)
    return target


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_atomic(path: str | Path, payload: Any) -> Path:
    """Write ``payload`` as indented JSON to ``path`` atomically."""
    return write_text_atomic(path, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def writer_gone(pid: str) -> bool:
    """Whether the process ``pid`` that named a temporary file is gone (a decimal string; else: running)."""
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, owned by someone else
        return False
    return False


def remove_orphans(folder: Path, prefix: str) -> None:
    """Delete the temporary files or folders ``<prefix><pid>...`` in ``folder`` whose writing process is gone."""
    for path in folder.glob(glob.escape(prefix) + "*"):
        if writer_gone(re.match(r"\d*", path.name[len(prefix):]).group()):  # type: ignore[union-attr]
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)

"""Writes that never leave half a file or half a folder: a hidden temporary beside it, then ``os.replace``.

Temporary names carry the writer's process id, so the next write removes leftovers of writers that are gone. A
failed write raises an ``OSError`` naming the file it was for, not the temporary.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from disastir_mteb.util.errors import ExistingOutput

__all__ = ["error_naming", "remove_orphans", "set_aside", "staged_folder", "temporary_beside", "write_bytes_atomic",
           "write_json_atomic", "write_path_atomic", "write_stream_atomic", "write_text_atomic", "writer_gone"]


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; readers see the old file or the new one."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; readers see the old file or the new one."""
    return write_stream_atomic(path, lambda handle: handle.write(data))


def write_stream_atomic(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """Let ``write`` fill ``path`` through an open binary handle, atomically: for files too large to hold twice."""
    def fill(temporary: Path) -> None:
        with open(temporary, "wb") as handle:
            write(handle)

    return write_path_atomic(path, fill)


def write_path_atomic(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Let ``write`` create the file at a hidden temporary path, then ``fsync`` it and rename it to ``path``.

    For libraries that write to a path themselves (usearch, numpy's ``open_memmap``); the other writers come through it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(path.parent, f".{path.name}.")
    temporary = temporary_beside(path)
    try:
        write(temporary)
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o666 & ~_umask())  # temporary files are private (0600); results are not
        os.replace(temporary, path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise error_naming(error, path, temporary) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


@contextmanager
def staged_folder(out: str | Path, before_swap: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """Yield an empty hidden folder beside ``out`` to fill; when the block succeeds, it becomes ``out`` by a rename.

    ``before_swap(out)`` runs just before the swap. An earlier ``out`` is renamed aside, then removed (a symbolic link
    itself, never its target); any failure leaves it as it was.

    Raises:
        FileExistsError: another process put a folder at ``out`` between the check and the rename.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(out.parent, f".{out.name}.")
    staging = temporary_beside(out, folder=True)
    try:
        yield staging
        if before_swap is not None:
            before_swap(out)
        _swap_in(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap_in(staging: Path, out: Path) -> None:
    """Rename ``staging`` to ``out``; an earlier ``out`` (a folder, a file, a link) is renamed aside, then removed."""
    old: Path | None = None
    if out.is_symlink() or out.is_file() or (out.is_dir() and any(out.iterdir())):
        old = temporary_beside(out, folder=True)
        os.replace(out, old / out.name)
    elif out.is_dir():
        out.rmdir()
    try:
        os.replace(staging, out)
    except OSError as error:
        if old is not None:  # put the earlier one back
            os.replace(old / out.name, out)
            shutil.rmtree(old, ignore_errors=True)
        if error.errno in (errno.ENOTEMPTY, errno.EEXIST):  # a folder another process renamed into place meanwhile
            raise ExistingOutput(f"Refusing to replace {out}: another process wrote it first.") from error
        raise error_naming(error, out, staging) from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)  # a link or a file inside it is removed, never what a link points to


def temporary_beside(path: Path, *, folder: bool = False) -> Path:
    """A new hidden ``.<name>.<pid>.<random>.tmp`` beside ``path``: an empty file, or a folder."""
    prefix, suffix = f".{path.name}.{os.getpid()}.", ".tmp"
    if folder:
        return Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=path.parent))
    handle, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=path.parent)
    os.close(handle)
    return Path(name)


def error_naming(error: OSError, path: Path, temporary: Path | None) -> OSError:
    """``error`` naming ``path`` where it names nothing (``ENOSPC``) or only the hidden ``temporary``."""
    named = error.filename
    if named is not None and (temporary is None or not Path(named).is_relative_to(temporary)):
        return error
    return type(error)(error.errno, error.strerror or str(error), str(path))


def set_aside(path: str | Path, why: str = "unreadable") -> Path:
    """Rename ``path`` to ``<name>.<why>-<UTC time>``, which result loaders pass by, and return it; never deletes it."""
    path = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target, number = path.with_name(f"{path.name}.{why}-{stamp}"), 1
    while target.exists() or target.is_symlink():
        number += 1
        target = path.with_name(f"{path.name}.{why}-{stamp}-{number}")
    os.rename(path, target)
    return target


def _umask() -> int:
    """The process's umask, read from ``/proc`` where it can be: the portable way changes it for a moment."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_atomic(path: str | Path, payload: Any) -> Path:
    """Write ``payload`` as indented JSON to ``path`` atomically."""
    return write_text_atomic(path, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def writer_gone(pid: str) -> bool:
    """Whether the process ``pid`` that named a temporary file is gone (a zombie too: it writes nothing)."""
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, owned by someone else
        return False
    try:  # Linux: the state is the field after the command's closing parenthesis
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


# .<name>.<pid>.<random>.tmp, or .<name>.<pid>.tmp as older versions named them
_TEMPORARY = re.compile(r"\.(\d+)(?:\.[A-Za-z0-9_]+)?\.tmp$")


def remove_orphans(folder: Path, prefix: str = ".") -> None:
    """Delete the temporaries ``<prefix>...<pid>.<random>.tmp`` in ``folder`` whose writer process is gone."""
    for path in folder.glob(glob.escape(prefix) + "*.tmp"):
        found = _TEMPORARY.search(path.name)
        if found and writer_gone(found.group(1)):
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)

"""Writes that never leave half a file: a temporary file in the same folder, then ``os.replace``.

Temporary names are hidden and carry the writer's process id (``.<name>.<pid>.<random>.tmp``), so
a run killed mid-write leaves no file that passes for a result, and the next write into that
folder removes the leftovers of writers that are gone. ``os.replace`` swaps a symbolic link
itself, never the file it points to. A write that fails (a full disk: ``ENOSPC``) raises an
``OSError`` naming the file it was for, never only the hidden temporary name or nothing at all.
A file that cannot be read back is never deleted: :func:`set_aside` renames it beside itself.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from disastir_mteb.util.timings import Phase, clock

if TYPE_CHECKING:
    from mteb import ResultCache

logger = logging.getLogger(__name__)

__all__ = ["atomic_result_cache", "set_aside", "write_bytes_atomic", "write_json_atomic", "write_stream_atomic",
           "write_text_atomic", "writer_gone"]


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
    _remove_orphans(path.parent, f".{path.name}.")
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
        raise _naming(error, path, Path(handle.name)) from None
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return path


def _naming(error: OSError, path: Path, temporary: Path | None) -> OSError:
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


def _remove_orphans(folder: Path, prefix: str) -> None:
    """Delete the temporary files or folders ``<prefix><pid>...`` in ``folder`` whose writing process is gone."""
    for path in folder.glob(glob.escape(prefix) + "*"):
        if writer_gone(re.match(r"\d*", path.name[len(prefix):]).group()):  # type: ignore[union-attr]
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def atomic_result_cache(folder: str | Path | None = None) -> ResultCache:
    """An mteb ``ResultCache`` (over ``folder``, else mteb's default) whose saves are atomic.

    mteb writes ``<Task>.json``, ``model_meta.json`` and ``run_settings.jsonl`` in place with
    ``open("w")``: a run killed mid-write leaves half a file, and two runs writing one folder can
    interleave their bytes. This cache lets mteb write them into a hidden staging folder
    (``.disastir-staging-<pid>-*`` at the cache root, outside ``results/``), then moves each one
    into place with ``os.replace``. A save that fails (a full disk) raises an ``OSError`` naming the
    task's result file.

    A run's clock (:mod:`disastir_mteb.util.timings`) counts its saves and reads as ``writing``.

    Reading back: a ``<Task>.json`` that cannot be read as a result (cut short, not JSON, not a
    TaskResult) is not an error that stops a run of 48 tasks: :func:`set_aside` renames it
    (``<Task>.json.unreadable-<UTC time>``), one warning names both names, and mteb sees no result,
    so the task is evaluated again.
    """
    cls = _atomic_result_cache_class()
    return cls(Path(folder)) if folder is not None else cls()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` between processes (POSIX ``flock``; no lock where there is none)."""
    try:
        import fcntl
    except ImportError:  # Windows: runs sharing one output folder may lose a run_settings.jsonl line
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@functools.cache
def _atomic_result_cache_class() -> type[ResultCache]:
    from mteb import ResultCache

    class AtomicResultCache(ResultCache):
        """mteb's ``ResultCache`` with each save staged, then renamed into place file by file."""

        @clock(Phase.writing)
        def save_to_cache(self, task_result: Any, model_name: Any, model_revision: str | None = None, *,
                          encode_kwargs: Any = None) -> None:
            where = {"task_name": task_result.task_name, "model_name": model_name, "model_revision": model_revision}
            if isinstance(model_name, str) and model_revision is None:  # mteb guesses the revision from folders
                super().save_to_cache(task_result, model_name, model_revision, encode_kwargs=encode_kwargs)
                return
            root = Path(self.cache_path)
            target = self.get_task_result_path(**where).parent
            staging_root: Path | None = None
            try:
                root.mkdir(parents=True, exist_ok=True)
                _remove_orphans(root, ".disastir-staging-")
                staging_root = Path(tempfile.mkdtemp(prefix=f".disastir-staging-{os.getpid()}-", dir=root))
                staging = ResultCache(staging_root)
                staged = staging.get_task_result_path(**where).parent
                staged.mkdir(parents=True)
                with _locked(root / ".disastir-results.lock"):  # another run's merge of run_settings.jsonl waits
                    if (target / "run_settings.jsonl").is_file():  # mteb merges its lines with the existing ones
                        shutil.copyfile(target / "run_settings.jsonl", staged / "run_settings.jsonl")
                    staging.save_to_cache(task_result, model_name, model_revision, encode_kwargs=encode_kwargs)
                    target.mkdir(parents=True, exist_ok=True)
                    # the task file last: it marks the task as done, so it never lands without its metadata
                    for file in sorted(staged.iterdir(), key=lambda f: f.name == f"{task_result.task_name}.json"):
                        os.replace(file, target / file.name)
            except OSError as error:  # mteb's json.dump on a full disk: "[Errno 28] No space left on device", no path
                raise _naming(error, target / f"{task_result.task_name}.json", staging_root) from None
            finally:
                if staging_root is not None:
                    shutil.rmtree(staging_root, ignore_errors=True)

        @clock(Phase.writing)
        def load_task_result(self, task_name: str, model_name: Any, model_revision: str | None = None,
                             raise_if_not_found: bool = False, prioritize_remote: bool = False,
                             experiment_name: str | None = None) -> Any:
            try:
                return super().load_task_result(task_name, model_name, model_revision, raise_if_not_found,
                                                prioritize_remote, experiment_name)
            except (ValueError, KeyError, TypeError, AttributeError) as error:  # JSON, UTF-8, pydantic: ValueError
                path = Path(self.get_task_result_path(task_name, model_name, model_revision,
                                                      experiment_name=experiment_name))
                if not path.is_file():
                    raise
                moved = set_aside(path)
                logger.warning("Result file %s cannot be read (%s: %s); moved it to %s beside it and evaluating %s "
                               "again.", path, type(error).__name__, str(error).splitlines()[0] if str(error) else "-",
                               moved.name, task_name)
                return None

    return AtomicResultCache

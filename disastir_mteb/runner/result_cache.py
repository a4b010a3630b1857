"""mteb's result cache with atomic saves: each result file lands whole or not at all."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disastir_mteb.util.atomic import error_naming, remove_orphans, set_aside, temporary_beside
from disastir_mteb.util.timings import Phase, clock

if TYPE_CHECKING:
    from mteb import ResultCache

logger = logging.getLogger(__name__)

__all__ = ["atomic_result_cache"]


def atomic_result_cache(folder: str | Path | None = None) -> ResultCache:
    """An mteb ``ResultCache`` (over ``folder``, else mteb's default) whose saves are atomic.

    mteb writes its files in place, so a killed run leaves half a file; here they are staged, then renamed into place.
    A ``<Task>.json`` that cannot be read back is set aside with a warning, and the task evaluated again.
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
                remove_orphans(root, ".disastir-staging.")
                staging_root = temporary_beside(root / "disastir-staging", folder=True)
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
                raise error_naming(error, target / f"{task_result.task_name}.json", staging_root) from None
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

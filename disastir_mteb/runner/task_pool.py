"""Tasks whose search the shared pass has answered, scored on every core.

Such a task runs no model, only mteb's scoring (Python, one core). Workers are forked after the pass, so they share
the loaded tasks without a copy, and never run torch. ``concurrent.futures`` rather than ``multiprocessing.Pool``:
a killed worker raises instead of hanging. Workers' logs, warnings and failures are re-issued here. Linux only;
``DISASTIR_PROCESSES=N`` caps the workers. Left to itself, a run forks them only for :data:`MIN_FORKED_QUERIES`
queries or more: forking a process that holds torch, and waiting for its workers to end, costs about half a second,
more than scoring a few hundred queries in one process does.
"""

from __future__ import annotations

import copy
import gc
import logging
import multiprocessing
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Generic, TypeVar

from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.util.timings import PhaseClock, WorkerReport, active_clock, peak_rss_bytes, pooled, rss_bytes

logger = logging.getLogger(__name__)

__all__ = ["MIN_FORKED_QUERIES", "PROCESSES_ENV", "evaluate_tasks", "worker_count"]

PROCESSES_ENV = "DISASTIR_PROCESSES"
#: The queries to score below which a run left to its default (``DISASTIR_PROCESSES`` unset) forks no worker: the
#: small sample's 384 break even on two cores, a build's pool of a few dozen runs 2.5x faster in one process.
MIN_FORKED_QUERIES = 1000

T = TypeVar("T")
R = TypeVar("R")

_job: _Job[Any, Any] | None = None
"""What forked workers run: set just before the fork, so every worker inherits it."""
_records: list[logging.LogRecord] = []
"""In a worker: the log records of the task being run, handed back with its result."""
_parent: int | None = None
"""The runner's process id, set before the fork: a worker whose parent is gone stops."""
_forked_rss = 0
"""In a worker: its resident memory when forked (pages it shares with the runner), the base of its growth."""
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class _Job(Generic[T, R]):
    def __init__(self, tasks: Sequence[T], run: Callable[[T], R]) -> None:
        self.tasks, self.run = tasks, run


def worker_count(tasks: int, queries: int | None = None) -> int:
    """How many worker processes ``tasks`` tasks get: the usable cores (at most ``DISASTIR_PROCESSES``), or 0.

    ``queries``: how many they score, where known; with ``DISASTIR_PROCESSES`` unset, fewer than
    :data:`MIN_FORKED_QUERIES` get none.

    Raises:
        ValueError: ``DISASTIR_PROCESSES`` is not an integer >= 1.
    """
    raw = os.environ.get(PROCESSES_ENV, "").strip()
    cap = None
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise InvalidInput(f"{PROCESSES_ENV}={raw!r} is not a number of processes; set an integer >= 1 "
                               "(1 evaluates tasks in the runner's own process) or unset it (all cores).")
        cap = int(raw)
    if sys.platform != "linux" or tasks < 2 or (cap is None and queries is not None and queries < MIN_FORKED_QUERIES):
        return 0
    cores = _usable_cores()
    count = min(cores, tasks, cap or cores)
    return count if count >= 2 else 0


def _usable_cores() -> int:
    """The cores this process may run on, within a container's CPU quota (cgroup v2 ``cpu.max``) if it has one."""
    cores = len(os.sched_getaffinity(0))
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text(encoding="ascii").split()[:2]
    except (OSError, ValueError):
        return cores
    return cores if quota == "max" else max(1, min(cores, -(-int(quota) // int(period))))


def evaluate_tasks(tasks: Sequence[T], run: Callable[[T], R], *, parallel: Callable[[T], bool],
                   queries: Callable[[T], int] | None = None) -> Iterator[tuple[T, R, float]]:
    """``run`` each task; yield ``(task, result, seconds)`` in task order.

    ``parallel``: whether a task may run in a forked worker (only when it calls no model); ``queries``: how many
    queries a task scores (:func:`worker_count`). A task that fails in a worker is run again here, raising as it would.
    """
    forkable = [n for n, task in enumerate(tasks) if parallel(task)]
    processes = worker_count(len(forkable), None if queries is None else sum(queries(tasks[n]) for n in forkable))
    if not processes:
        for task in tasks:
            started = time.perf_counter()
            yield task, run(task), time.perf_counter() - started
        return
    global _job, _parent
    _job, _parent = _Job(tasks, run), os.getpid()
    registry: dict[Any, Any] = {}  # re-issued warnings shown once per place are shown once per call
    running = active_clock()
    executor = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork"),
                                   initializer=_start_worker)
    try:
        with pooled():  # the runner's time here is split in the workers' proportions (their reports)
            futures = _submit(executor, forkable)
        for number, task in enumerate(tasks):
            started = time.perf_counter()
            answer = None
            if number in futures:
                try:
                    with pooled():
                        answer = futures[number].result()
                except BrokenProcessPool:  # a worker was killed (out of memory?): the rest run here
                    logger.warning("A worker process evaluating tasks ended abruptly; evaluating the %d task(s) "
                                   "left in the runner's own process.", len(tasks) - number)
                    futures.clear()
                except Exception as error:  # the answer could not come back (a result that does not pickle)
                    logger.debug("%s's result could not be sent back from its worker (%s); running it here.",
                                 _name(task), error)
            if answer is None:
                yield task, run(task), time.perf_counter() - started
                continue
            result, seconds, records, caught, report = answer
            if running is not None:
                running.add_worker(report)
            _reissue(records, caught, registry)
            if result is None:  # failed in the worker: raise it here, exactly as a serial run would
                logger.debug("%s failed in a worker process; running it again here.", _name(task))
                yield task, run(task), time.perf_counter() - started
                continue
            yield task, result, seconds
    finally:
        _job = None
        # Waited for: with wait=False a short command can reach interpreter exit while the pool's manager thread
        # closes its wakeup pipe, and CPython 3.11's exit hook then writes to it ("OSError: [Errno 9] Bad file
        # descriptor"). Waiting costs the workers' exit, or after an error the tasks in flight.
        executor.shutdown(wait=True, cancel_futures=True)
        if running is not None:
            running.settle()


def _submit(executor: ProcessPoolExecutor, numbers: list[int]) -> dict[int, Future[Any]]:
    """Submit every task; the first submission forks the workers, with the heap frozen so that it stays shared."""
    gc.collect()
    gc.freeze()  # the inherited objects stay out of the workers' collections: shared pages, not copies
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks",
                                    category=DeprecationWarning)
            return {number: executor.submit(_work, number) for number in numbers}
    finally:
        gc.unfreeze()


def _name(task: Any) -> str:
    return str(getattr(getattr(task, "metadata", None), "name", task))


def _start_worker() -> None:
    """In each worker: die with the runner (``PR_SET_PDEATHSIG``), leave Ctrl-C to it, keep logs, new tqdm locks."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if _parent is not None and os.getppid() != _parent:  # the runner died before the line above
        os._exit(1)
    global _forked_rss
    _forked_rss = rss_bytes()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.Logger.callHandlers = _keep_record  # type: ignore[method-assign]
    try:
        from tqdm import std

        std.TqdmDefaultWriteLock.th_lock = std.TRLock()
        std.tqdm.set_lock(std.TqdmDefaultWriteLock())
    except ImportError:
        pass


def _keep_record(self: logging.Logger, record: logging.LogRecord) -> None:
    _records.append(record)


def _work(number: int) -> tuple[Any, float, list[logging.LogRecord], list[dict[str, Any]], WorkerReport]:
    """In a worker: run task ``number`` on a clock of its own; (result or None, seconds, logs, warnings, timings)."""
    if _job is None:
        raise RuntimeError("No job in this worker process: it was not forked by evaluate_tasks.")
    _records.clear()
    started = time.perf_counter()
    result: Any = None
    with PhaseClock() as task_clock, warnings.catch_warnings(record=True) as caught:
        try:
            result = _job.run(_job.tasks[number])
        except Exception as error:  # not hidden: the task runs again in the runner's process, raising it as it is
            logger.debug("Task %d failed in worker %d: %s: %s", number, os.getpid(), type(error).__name__, error)
    seconds = time.perf_counter() - started
    report = WorkerReport(phases=task_clock.seconds(), pid=os.getpid(),
                          rss_growth_bytes=max(0, peak_rss_bytes() - _forked_rss))
    return result, seconds, [_portable(r) for r in _records], [_portable_warning(w) for w in caught], report


def _portable(record: logging.LogRecord) -> logging.LogRecord:
    """``record`` with its message formatted and its traceback as text, so that it pickles."""
    record = copy.copy(record)
    record.msg, record.args = record.getMessage(), None
    if record.exc_info:
        record.exc_text = record.exc_text or logging.Formatter().formatException(record.exc_info)
        record.exc_info = None
    for key, value in list(vars(record).items()):
        if not isinstance(value, (str, int, float, bool, type(None))):
            setattr(record, key, repr(value))
    return record


def _portable_warning(caught: warnings.WarningMessage) -> dict[str, Any]:
    category = caught.category if isinstance(caught.category, type) else UserWarning
    return {"message": str(caught.message), "category": category, "filename": caught.filename,
            "lineno": caught.lineno}


def _reissue(records: list[logging.LogRecord], caught: list[dict[str, Any]], registry: dict[Any, Any]) -> None:
    """Hand a worker's log records to this process's loggers and re-issue its warnings (filters apply here)."""
    for record in records:
        target = logging.getLogger(record.name)
        if target.isEnabledFor(record.levelno):
            target.handle(record)
    for warning in caught:
        warnings.warn_explicit(warning["message"], warning["category"], warning["filename"], warning["lineno"],
                               registry=registry)

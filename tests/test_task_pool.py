"""Tasks evaluated in forked worker processes behave as in one process: order, logs, warnings, errors."""

from __future__ import annotations

import logging
import os
import warnings

import pytest
from sentences import says
from workers import forks_workers

from disastir_mteb.runner.task_pool import PROCESSES_ENV, evaluate_tasks, worker_count

needs_two_cores = pytest.mark.skipif(not forks_workers(2), reason="one usable core or not Linux: tasks run in-process")


@pytest.fixture(autouse=True)
def default_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool as a run gets it by default: DISASTIR_PROCESSES unset (the suite sets it to 1 under xdist)."""
    monkeypatch.delenv(PROCESSES_ENV, raising=False)
PARENT = os.getpid()


def _square(number: int) -> tuple[int, int]:
    logging.getLogger("disastir_mteb.test_pool").info("task %d in %s", number, "a worker")
    if number == 3:
        warnings.warn(f"task {number} warns", UserWarning, stacklevel=1)
    return number * number, os.getpid()


def _quiet_square(number: int) -> tuple[int, int]:
    return number * number, os.getpid()


@needs_two_cores
def test_a_few_hundred_queries_are_scored_here_unless_workers_are_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forking costs more than scoring a few hundred queries saves; asking with DISASTIR_PROCESSES forks whatever."""
    from disastir_mteb.runner.task_pool import MIN_FORKED_QUERIES

    per_task = MIN_FORKED_QUERIES // 8
    few = list(evaluate_tasks(range(6), _quiet_square, parallel=lambda n: True, queries=lambda n: per_task))
    many = list(evaluate_tasks(range(9), _quiet_square, parallel=lambda n: True, queries=lambda n: per_task))
    assert {result[1] for _, result, _ in few} == {PARENT} and PARENT not in {result[1] for _, result, _ in many}
    monkeypatch.setenv(PROCESSES_ENV, "2")
    asked = list(evaluate_tasks(range(6), _quiet_square, parallel=lambda n: True, queries=lambda n: per_task))
    assert PARENT not in {result[1] for _, result, _ in asked}
    assert [result[0] for _, result, _ in few] == [result[0] for _, result, _ in asked] == [n * n for n in range(6)]


@needs_two_cores
def test_results_logs_and_warnings_come_back_in_task_order(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="disastir_mteb.test_pool"), pytest.warns(UserWarning, match="task 3"):
        done = list(evaluate_tasks(range(8), _square, parallel=lambda n: n != 5))
    assert [task for task, _, _ in done] == list(range(8))
    assert [result[0] for _, result, _ in done] == [n * n for n in range(8)]
    pids = {task: result[1] for task, result, _ in done}
    assert pids[5] == PARENT and all(pid != PARENT for task, pid in pids.items() if task != 5)
    assert [r.getMessage() for r in caplog.records] == [f"task {n} in a worker" for n in range(8)]
    assert all((r.process == PARENT) == (n == 5) for n, r in enumerate(caplog.records))  # re-issued from workers
    assert all(seconds >= 0 for _, _, seconds in done)


def _fails_on_four(number: int) -> int:
    if number == 4:
        raise ValueError(f"task {number} cannot be scored (raised in process {os.getpid()})")
    return number


@needs_two_cores
def test_a_task_failing_in_a_worker_raises_its_own_error_here() -> None:
    done: list[int] = []
    with pytest.raises(ValueError, match=f"task 4 cannot be scored \\(raised in process {PARENT}\\)"):
        for _task, result, _ in evaluate_tasks(range(8), _fails_on_four, parallel=lambda n: True):
            done.append(result)
    assert done == [0, 1, 2, 3]


def _dies_in_workers(number: int) -> int:
    if os.getpid() != PARENT:
        os._exit(3)  # a worker killed from outside (out of memory): the pool breaks
    return number


@needs_two_cores
def test_a_worker_killed_from_outside_leaves_its_tasks_to_this_process(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.runner.task_pool"):
        done = [result for _, result, _ in evaluate_tasks(range(6), _dies_in_workers, parallel=lambda n: True)]
    assert done == list(range(6))
    assert sum("ended abruptly" in r.getMessage() for r in caplog.records) == 1


def test_one_process_when_asked_or_when_there_is_one_task(monkeypatch: pytest.MonkeyPatch) -> None:
    assert worker_count(1) == 0
    monkeypatch.setenv(PROCESSES_ENV, "1")
    assert worker_count(48) == 0
    done = list(evaluate_tasks(range(3), _square, parallel=lambda n: True))
    assert {result[1] for _, result, _ in done} == {PARENT}
    monkeypatch.setenv(PROCESSES_ENV, "all")
    with pytest.raises(ValueError) as refused:
        worker_count(48)
    says(str(refused.value), f"{PROCESSES_ENV}='all'", "integer >= 1")


@needs_two_cores
@pytest.mark.parametrize("stop", ["finished", "stopped early"])
def test_no_worker_is_left_running_when_the_tasks_are_done(stop: str) -> None:
    """The pool is shut down and its workers joined before the generator ends, also when its consumer stops.

    A pool left to end in the background races the interpreter's exit on CPython 3.11 (an ``OSError: [Errno 9]
    Bad file descriptor`` printed after a successful ``run``); nothing of it may outlive the call.
    """
    import multiprocessing

    done = evaluate_tasks(range(6), _quiet_square, parallel=lambda n: True)
    if stop == "finished":
        assert [result[0] for _, result, _ in done] == [n * n for n in range(6)]
    else:
        next(done)
        done.close()  # what a KeyboardInterrupt or an error in the consumer does to the generator
    assert multiprocessing.active_children() == []

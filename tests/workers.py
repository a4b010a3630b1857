"""Whether this machine forks scoring workers when a run is left to its default (``DISASTIR_PROCESSES`` unset).

The suite runs with ``DISASTIR_PROCESSES=1`` under pytest-xdist (``conftest.py``: its workers already share the
cores), so a test of the pool asks for workers itself and is skipped only where the machine could not fork any.
"""

from __future__ import annotations

import pytest

from disastir_mteb.runner.task_pool import PROCESSES_ENV, worker_count


def forks_workers(tasks: int) -> bool:
    """Whether ``tasks`` tasks get worker processes here with ``DISASTIR_PROCESSES`` unset (Linux, two cores)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(PROCESSES_ENV, raising=False)
        return worker_count(tasks) > 0

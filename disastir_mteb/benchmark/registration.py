"""The benchmark layer's half of registration: the tasks and the DisastIR benchmarks into mteb.

The tasks are the 48 full ones, then their 48 ``DisastIR-Test-*`` and 48 ``DisastIR-DevLite-*`` versions
(:data:`disastir_mteb.benchmark.tasks.ALL_TASK_CLASSES`, in that order); the benchmarks are those of
:func:`disastir_mteb.benchmark.suites.benchmarks` (``DisastIR``, one per intent, ``DisastIR-Test``, ``-DevLite``).

mteb (2.26) has no plugin mechanism: ``mteb.get_task``/``get_tasks`` read a registry dict and a
task tuple built when ``mteb.get_tasks`` is imported, and ``mteb.get_benchmark`` reads an
``lru_cache``d registry built from ``mteb.benchmarks.benchmarks``. Those private names are listed
in :data:`disastir_mteb.registry.MTEB_INTERNALS`, which checks them before this step runs.

Benchmarks are added lazily: the registry builder is wrapped, so the 48 task instances behind
them are only created when someone asks for a benchmark, not at every ``import mteb``.
"""

from __future__ import annotations

import functools
import importlib
import logging
from typing import Any

from disastir_mteb.util.deferred import DeferredStep

logger = logging.getLogger(__name__)

__all__ = ["TASKS_STEP"]


def _wrap_benchmark_registry(module: Any) -> None:
    """Make ``mteb.get_benchmark``'s registry include the DisastIR benchmarks, built on first use."""
    original = module._build_registry
    if getattr(original, "_disastir", False):
        return

    @functools.lru_cache
    def _build_registry() -> dict[str, Any]:
        from disastir_mteb.benchmark.suites import benchmarks

        registry = dict(original())
        for benchmark in benchmarks():
            if benchmark.name in registry:  # mteb ships it (upstreamed): mteb's own wins, as for the tasks
                logger.warning("mteb already has a benchmark named %s; keeping mteb's own.", benchmark.name)
                continue
            registry[benchmark.name] = benchmark
        return registry

    _build_registry._disastir = True  # type: ignore[attr-defined]
    _build_registry.__wrapped__ = original  # type: ignore[attr-defined]
    module._build_registry = _build_registry


def _register_tasks() -> None:
    get_tasks_module = importlib.import_module("mteb.get_tasks")
    from disastir_mteb.benchmark.tasks import ALL_TASK_CLASSES as TASK_CLASSES

    registry: dict[str, Any] = get_tasks_module._TASKS_REGISTRY
    for name, cls in TASK_CLASSES.items():
        existing = registry.get(name)
        if existing is not None and existing is not cls and existing.__module__ != cls.__module__:
            logger.warning("mteb already has a task named %s (%s); keeping mteb's own.", name, existing)
            continue
        registry[name] = cls
    known = set(get_tasks_module.TASK_LIST)
    get_tasks_module.TASK_LIST = (
        *get_tasks_module.TASK_LIST,
        *(cls for cls in TASK_CLASSES.values() if cls not in known and registry.get(cls.metadata.name) is cls),
    )
    _wrap_benchmark_registry(importlib.import_module("mteb.benchmarks.get_benchmark"))
    logger.debug("Registered %d DisastIR tasks with mteb.", len(TASK_CLASSES))


#: Waits for :mod:`disastir_mteb.benchmark.tasks`, which imports mteb at its top.
TASKS_STEP = DeferredStep("disastir_mteb.benchmark.tasks", _register_tasks)

r"""Registration of the DisastIR tasks, benchmarks and models into mteb: the one place that writes into mteb.

mteb 2.x has no plugin mechanism (the entry point it would need: ``docs/upstream/plugins.md``), so registration
writes into the private registries of :data:`MTEB_INTERNALS`, checked on the releases of ``CHECKED_ON``
(:mod:`disastir_mteb.util.mteb_internals`); :func:`check_internals` names any a new release renamed. Benchmarks
are built on first use, not at every ``import mteb``; where mteb ships a name itself, its own entry wins.

It runs right after ``import mteb`` (the autoload hook), at ``import disastir_mteb`` when the hook will not, and
from :func:`disastir_mteb.evaluate`.
"""

from __future__ import annotations

import functools
import importlib
import logging
import threading
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["MTEB_INTERNALS", "check_internals", "is_registered", "register"]

#: (module, attribute) pairs the registration writes into.
MTEB_INTERNALS: tuple[tuple[str, str], ...] = (
    ("mteb.get_tasks", "_TASKS_REGISTRY"),
    ("mteb.get_tasks", "TASK_LIST"),
    ("mteb.benchmarks.get_benchmark", "_build_registry"),
    ("mteb.models.model_implementations", "MODEL_REGISTRY"),
)

_lock = threading.RLock()
_registered = False


def check_internals() -> list[str]:
    """The mteb internals this module needs that are missing, as ``module.attribute`` strings."""
    missing = []
    for module_name, attribute in MTEB_INTERNALS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            missing.append(f"{module_name} (module)")
            continue
        if not hasattr(module, attribute):
            missing.append(f"{module_name}.{attribute}")
    return missing


def is_registered() -> bool:
    """True once the tasks, the benchmarks and the models are all registered in this process."""
    return _registered


def register() -> None:
    """Register the DisastIR tasks, the benchmarks and the models with mteb; a no-op the second time.

    Raises:
        RuntimeError: mteb no longer has the internals listed in :data:`MTEB_INTERNALS`.
    """
    global _registered
    with _lock:
        if _registered:
            return
        missing = check_internals()
        if missing:
            import mteb

            raise RuntimeError(
                f"disastir-mteb cannot register with mteb {getattr(mteb, '__version__', '?')}: missing "
                f"{', '.join(missing)}. Install a supported mteb (see pyproject.toml) or upgrade disastir-mteb."
            )
        _register_tasks()
        wrap_benchmark_registry(importlib.import_module("mteb.benchmarks.get_benchmark"))
        _register_models()
        _registered = True


def _register_tasks() -> None:
    from disastir_mteb.tasks.retrieval import ALL_TASK_CLASSES

    get_tasks_module = importlib.import_module("mteb.get_tasks")
    registry: dict[str, Any] = get_tasks_module._TASKS_REGISTRY
    for name, cls in ALL_TASK_CLASSES.items():
        existing = registry.get(name)
        if existing is not None and existing is not cls and existing.__module__ != cls.__module__:
            logger.warning("mteb already has a task named %s (%s); keeping mteb's own.", name, existing)
            continue
        registry[name] = cls
    known = set(get_tasks_module.TASK_LIST)
    get_tasks_module.TASK_LIST = (
        *get_tasks_module.TASK_LIST,
        *(cls for cls in ALL_TASK_CLASSES.values() if cls not in known and registry.get(cls.metadata.name) is cls),
    )
    logger.debug("Registered %d DisastIR tasks with mteb.", len(ALL_TASK_CLASSES))


def wrap_benchmark_registry(module: Any) -> None:
    """Make mteb's benchmark registry (``module._build_registry``) include the DisastIR benchmarks, on first use."""
    original = module._build_registry
    if getattr(original, "_disastir", False):
        return

    @functools.lru_cache
    def _build_registry() -> dict[str, Any]:
        from disastir_mteb.tasks.benchmarks import benchmarks

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


def _register_models() -> None:
    from disastir_mteb.models.dmretriever import DMRETRIEVER_MODELS

    models: dict[str, Any] = importlib.import_module("mteb.models.model_implementations").MODEL_REGISTRY
    for name, meta in DMRETRIEVER_MODELS.items():
        models.setdefault(name, meta)

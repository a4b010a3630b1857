"""Registration of the 48 tasks, the DisastIR benchmarks and the DMRetriever models into mteb.

mteb (2.26) has no plugin mechanism: ``mteb.get_task``/``get_tasks`` read a registry dict and a
task tuple built when ``mteb.get_tasks`` is imported, and ``mteb.get_benchmark`` reads an
``lru_cache``d registry built from ``mteb.benchmarks.benchmarks``. This is the only module that
touches those private names (:data:`MTEB_INTERNALS`); :func:`check_internals` names any that a
new mteb release renamed, and a test calls it so the rename fails loudly.

Benchmarks are added lazily: the registry builder is wrapped, so the 48 task instances behind
them are only created when someone asks for a benchmark, not at every ``import mteb``.
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
import threading
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["MTEB_INTERNALS", "check_internals", "is_registered", "register"]

#: (module, attribute) pairs the registration relies on.
MTEB_INTERNALS: tuple[tuple[str, str], ...] = (
    ("mteb.get_tasks", "_TASKS_REGISTRY"),
    ("mteb.get_tasks", "TASK_LIST"),
    ("mteb.benchmarks.get_benchmark", "_build_registry"),
    ("mteb.models.model_implementations", "MODEL_REGISTRY"),
)

_lock = threading.RLock()
_registered = False
_pending = False
#: The plugin's modules that import mteb at their top and that registration imports. When one of them
#: is the first to import mteb, the autoload hook fires while that module is half-executed; registration
#: then waits for the module to call :func:`register_pending` on its last line.
_NEEDED = ("disastir_mteb.tasks", "disastir_mteb.dmretriever")


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
    """True once :func:`register` has completed in this process."""
    return _registered


def _wrap_benchmark_registry(module: Any) -> None:
    """Make ``mteb.get_benchmark``'s registry include the DisastIR benchmarks, built on first use."""
    original = module._build_registry
    if getattr(original, "_disastir", False):
        return

    @functools.lru_cache
    def _build_registry() -> dict[str, Any]:
        from disastir_mteb.tasks import benchmarks

        registry = dict(original())
        registry.update({benchmark.name: benchmark for benchmark in benchmarks()})
        return registry

    _build_registry._disastir = True  # type: ignore[attr-defined]
    _build_registry.__wrapped__ = original  # type: ignore[attr-defined]
    module._build_registry = _build_registry


def _initializing(name: str, caller: str | None = None) -> bool:
    """Whether module ``name`` is being executed right now (imported, not yet whole)."""
    module = sys.modules.get(name)
    return name != caller and module is not None and bool(getattr(module.__spec__, "_initializing", False))


def register_pending(caller: str) -> None:
    """Run a registration that waited for ``caller`` (one of :data:`_NEEDED`) to finish executing."""
    global _pending
    with _lock:
        if not _pending or any(_initializing(name, caller) for name in _NEEDED):
            return
        _pending = False
        _register(caller)


def register() -> None:
    """Register the 48 DisastIR tasks and the benchmarks with mteb; a no-op the second time.

    Raises:
        RuntimeError: mteb no longer has the internals listed in :data:`MTEB_INTERNALS`.
    """
    _register(None)


def _register(caller: str | None) -> None:
    """:func:`register`, where ``caller`` (a module on its last line) counts as whole."""
    global _registered, _pending
    with _lock:
        if _registered:
            return
        if any(_initializing(name, caller) for name in _NEEDED):
            _pending = True
            return
        missing = check_internals()
        if missing:
            import mteb

            raise RuntimeError(
                f"disastir-mteb cannot register with mteb {getattr(mteb, '__version__', '?')}: missing "
                f"{', '.join(missing)}. Install a supported mteb (see pyproject.toml) or upgrade disastir-mteb."
            )
        get_tasks_module = importlib.import_module("mteb.get_tasks")
        from disastir_mteb.tasks import TASK_CLASSES

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
        from disastir_mteb.dmretriever import DMRETRIEVER_MODELS

        models: dict[str, Any] = importlib.import_module("mteb.models.model_implementations").MODEL_REGISTRY
        for name, meta in DMRETRIEVER_MODELS.items():
            models.setdefault(name, meta)  # mteb's own entry wins once it ships one
        _registered = True
        logger.debug("Registered %d DisastIR tasks with mteb.", len(TASK_CLASSES))

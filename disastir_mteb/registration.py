r"""Registration of the DisastIR tasks, benchmarks and models into mteb: the one place that writes into mteb.

mteb 2.x (2.22.2 to 2.26.24, checked in CI: ``CHECKED_ON`` in :mod:`disastir_mteb.util.mteb_internals`) has no
plugin mechanism, so registration writes into private registries (the entry-point group mteb would need is
written up in ``docs/upstream/plugins.md``). These are
exactly the mteb internals it touches (:data:`MTEB_INTERNALS`; :func:`check_internals` names any a new
mteb release renamed, and ``tests/test_mteb_internals.py`` calls it, so a rename fails loudly):

- ``mteb.get_tasks._TASKS_REGISTRY`` (name -> task class) and ``mteb.get_tasks.TASK_LIST`` (the task
  tuple ``mteb.get_tasks`` iterates): the 48 full tasks, then their 48 ``DisastIR-Test-*`` and 48
  ``DisastIR-DevLite-*`` versions (:data:`disastir_mteb.tasks.retrieval.ALL_TASK_CLASSES`).
- ``mteb.benchmarks.get_benchmark._build_registry`` (an ``lru_cache``d builder): wrapped, so the benchmarks
  of :func:`disastir_mteb.tasks.benchmarks.benchmarks` (``DisastIR``, one per intent, ``DisastIR-Test``,
  ``-DevLite``) are built on first use, not at every ``import mteb``.
- ``mteb.models.model_implementations.MODEL_REGISTRY``: the six DMRetriever ``ModelMeta``\\ s.

Where mteb ships a name itself (once upstreamed), mteb's own entry wins, with one warning.

When it runs: right after ``import mteb`` (the autoload hook, ``_disastir_mteb_autoload.py``), at
``import disastir_mteb`` when the hook will not (mteb already imported, or the hook turned off), and
from :func:`disastir_mteb.evaluate`. The modules it reads import mteb first thing (``disastir_mteb.tasks``
and ``disastir_mteb.models`` do so in their ``__init__``), so the hook never finds one half-executed.
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

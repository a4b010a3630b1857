r"""Registration of the DisastIR tasks, benchmarks and models into mteb: the one place that writes into mteb.

mteb 2.x has no plugin mechanism (the entry point it would need: ``docs/upstream/plugins.md``), so registration
writes into the private registries of :data:`MTEB_INTERNALS`, checked on the releases of ``CHECKED_ON``
(:mod:`disastir_mteb.util.mteb_internals`); :func:`check_internals` names any a new release renamed. Benchmarks
are built on first use, not at every ``import mteb``; where mteb ships a name itself, its own entry wins.

It runs right after ``import mteb`` (the autoload hook), at ``import disastir_mteb`` when the hook will not, and
from :func:`disastir_mteb.evaluate`. A built benchmark (``disastir-mteb build``) is registered on request:
:func:`register_built`, or the folders :data:`BUILT_ENV` names, read once by :func:`register`.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from disastir_mteb.tasks.built import BuiltBenchmark

logger = logging.getLogger(__name__)

__all__ = ["BUILT_ENV", "MTEB_INTERNALS", "check_internals", "is_registered", "register", "register_built"]

#: Built benchmark folders to register with the DisastIR tasks, separated by ``os.pathsep``: what ``mteb run`` reads.
BUILT_ENV = "DISASTIR_BUILT"

#: (module, attribute) pairs the registration writes into.
MTEB_INTERNALS: tuple[tuple[str, str], ...] = (
    ("mteb.get_tasks", "_TASKS_REGISTRY"),
    ("mteb.get_tasks", "TASK_LIST"),
    ("mteb.benchmarks.get_benchmark", "_build_registry"),
    ("mteb.models.model_implementations", "MODEL_REGISTRY"),
)

_lock = threading.RLock()
_registered = False
#: The built benchmarks registered in this process, by name: the benchmark registry adds them.
_built: dict[str, BuiltBenchmark] = {}


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


def register(environ: Mapping[str, str] | None = None) -> None:
    """Register the DisastIR tasks, the benchmarks and the models with mteb; a no-op the second time.

    The first time, the built benchmarks :data:`BUILT_ENV` in ``environ`` (``os.environ`` when None) names are
    registered too; one that cannot be read is a warning naming it, never an error that would break mteb.

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
        from disastir_mteb.tasks.retrieval import ALL_TASK_CLASSES

        _register_tasks(ALL_TASK_CLASSES)
        wrap_benchmark_registry(importlib.import_module("mteb.benchmarks.get_benchmark"))
        _register_models()
        _registered = True
        environ = os.environ if environ is None else environ
        for folder in filter(None, environ.get(BUILT_ENV, "").split(os.pathsep)):
            try:
                register_built(folder)
            except (OSError, ValueError) as error:
                logger.warning("%s: %s is not registered (%s).", BUILT_ENV, folder, error)


def register_built(folder: str | Path) -> BuiltBenchmark:
    """Register the built benchmark in ``folder`` with mteb: its tasks (``MyOrg-QA-MH``, ...) and the benchmark.

    Registers the DisastIR tasks first if they are not; a second call for the same folder is a no-op. Afterwards
    ``mteb.get_tasks(["MyOrg-QA-MH"])`` and ``mteb.get_benchmark("MyOrg")`` find them in this process (``mteb run``,
    another process, finds the folders :data:`BUILT_ENV` names).

    Returns:
        The built benchmark read from ``folder``.

    Raises:
        FileNotFoundError: ``folder`` is no folder in the published layout.
        ValueError: its marker does not say it is a built benchmark, or names it badly; or another folder of the
            same name was registered in this process.
    """
    from disastir_mteb.tasks.built import read_built
    from disastir_mteb.util.errors import InvalidInput

    with _lock:
        register()
        built = read_built(folder)
        known = _built.get(built.name)
        if known is built:
            return built
        if known is not None and known.folder != built.folder:
            raise InvalidInput(f"A built benchmark named {built.name} is registered already, from {known.folder}; "
                               f"{built.folder} cannot be registered under the same name in this process.")
        _register_tasks(built.task_classes)
        _built[built.name] = built
        importlib.import_module("mteb.benchmarks.get_benchmark")._build_registry.cache_clear()
        logger.debug("Registered the built benchmark %s (%d tasks) from %s.", built.name, len(built.task_names),
                     built.folder)
        return built


def _register_tasks(classes: Mapping[str, Any]) -> None:
    get_tasks_module = importlib.import_module("mteb.get_tasks")
    registry: dict[str, Any] = get_tasks_module._TASKS_REGISTRY
    for name, cls in classes.items():
        existing = registry.get(name)
        if existing is not None and existing is not cls and existing.__module__ != cls.__module__:
            logger.warning("mteb already has a task named %s (%s); keeping mteb's own.", name, existing)
            continue
        registry[name] = cls
    known = set(get_tasks_module.TASK_LIST)
    get_tasks_module.TASK_LIST = (
        *get_tasks_module.TASK_LIST,
        *(cls for cls in classes.values() if cls not in known and registry.get(cls.metadata.name) is cls),
    )
    logger.debug("Registered %d tasks with mteb.", len(classes))


def wrap_benchmark_registry(module: Any) -> None:
    """Make mteb's benchmark registry (``module._build_registry``) include the DisastIR benchmarks, on first use."""
    original = module._build_registry
    if getattr(original, "_disastir", False):
        return

    @functools.lru_cache
    def _build_registry() -> dict[str, Any]:
        from disastir_mteb.tasks.benchmarks import benchmarks

        registry = dict(original())
        for benchmark in (*benchmarks(), *(built.benchmark for built in _built.values())):
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

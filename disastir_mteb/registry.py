"""Registration of the 48 tasks, the DisastIR benchmarks and the DMRetriever models into mteb.

mteb (2.26) has no plugin mechanism, so registration writes into private registries. Each layer
registers what it owns (:mod:`disastir_mteb.benchmark.registration` the tasks and benchmarks,
:mod:`disastir_mteb.models.registration` the models); this module checks first that mteb still has
the internals both rely on (:data:`MTEB_INTERNALS`). :func:`check_internals` names any that a new
mteb release renamed, and a test calls it so the rename fails loudly.
"""

from __future__ import annotations

import importlib
import threading

from disastir_mteb.benchmark.registration import TASKS_STEP
from disastir_mteb.models.registration import MODELS_STEP

__all__ = ["MTEB_INTERNALS", "check_internals", "is_registered", "register"]

#: (module, attribute) pairs the registration relies on.
MTEB_INTERNALS: tuple[tuple[str, str], ...] = (
    ("mteb.get_tasks", "_TASKS_REGISTRY"),
    ("mteb.get_tasks", "TASK_LIST"),
    ("mteb.benchmarks.get_benchmark", "_build_registry"),
    ("mteb.models.model_implementations", "MODEL_REGISTRY"),
)

_lock = threading.RLock()


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
    return TASKS_STEP.done and MODELS_STEP.done


def register() -> None:
    """Register the 48 DisastIR tasks, the benchmarks and the models with mteb; a no-op the second time.

    When the plugin module that owns a step is the one importing mteb right now, that step runs on
    the module's last line instead (:class:`~disastir_mteb.util.deferred.DeferredStep`).

    Raises:
        RuntimeError: mteb no longer has the internals listed in :data:`MTEB_INTERNALS`.
    """
    with _lock:
        if is_registered():
            return
        missing = check_internals()
        if missing:
            import mteb

            raise RuntimeError(
                f"disastir-mteb cannot register with mteb {getattr(mteb, '__version__', '?')}: missing "
                f"{', '.join(missing)}. Install a supported mteb (see pyproject.toml) or upgrade disastir-mteb."
            )
        TASKS_STEP.run()
        MODELS_STEP.run()

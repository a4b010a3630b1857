"""disastir-mteb: the DisastIR disaster-management retrieval benchmark as 48 mteb tasks.

Importing the package registers the tasks and benchmarks with mteb: at once when mteb is
already imported, otherwise the moment it is (the same finder the autoload hook uses), so that
``import disastir_mteb`` and the ``disastir-mteb`` command stay fast (mteb and torch take
seconds to import) and ``--help`` answers at once. The names below are the public API; those
that need mteb load on first use.
"""

from __future__ import annotations

import sys

from disastir_mteb.benchmark.taxonomy import CATEGORIES, INTENTS, TASK_NAMES, Category, Intent
from disastir_mteb.models.instructions import INSTRUCTION_SETS, TEMPLATES
from disastir_mteb.registry import register
from disastir_mteb.runner import evaluate
from disastir_mteb.util import moved_modules

__all__ = [
    "CATEGORIES",
    "DATASET_REPO",
    "DATASET_REVISION",
    "INSTRUCTION_SETS",
    "INTENTS",
    "PRESETS",
    "TASK_NAMES",
    "TEMPLATES",
    "AnnParams",
    "Category",
    "Intent",
    "UsearchIndex",
    "evaluate",
    "get_tasks",
    "register",
    "with_instructions",
]

#: Names imported on first use, by module: they import mteb (seconds) or USearch.
_LAZY = {
    "PRESETS": "search.ann_params", "AnnParams": "search.ann_params", "UsearchIndex": "search.usearch_index",
    "DATASET_REPO": "benchmark.tasks", "DATASET_REVISION": "benchmark.tasks", "get_tasks": "benchmark.tasks",
    "with_instructions": "models.adapter",
}


def __getattr__(name: str) -> object:
    """The names of :data:`_LAZY`, imported on first use."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"disastir_mteb.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'disastir_mteb' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _register_with_mteb() -> None:
    """Register now if mteb is loaded; otherwise right after it is (whatever DISASTIR_MTEB_AUTOLOAD says)."""
    if "mteb" in sys.modules:
        register()
        return
    try:
        from _disastir_mteb_autoload import arm
    except ImportError:  # the hook module is not on the path (a vendored copy): register eagerly
        register()
        return
    arm()


moved_modules.install()
_register_with_mteb()

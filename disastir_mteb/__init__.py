"""disastir-mteb: the DisastIR disaster-management retrieval benchmark as 48 mteb tasks.

Importing the package registers the tasks, benchmarks and models with mteb (:mod:`disastir_mteb.registration`),
through the autoload hook the moment mteb is imported, so ``import disastir_mteb`` and ``--help`` stay fast. The
names below are the public API; those that need mteb load on first use.
"""

from __future__ import annotations

import sys

from disastir_mteb.registration import register, register_built
from disastir_mteb.vocabulary.instructions import INSTRUCTION_SETS, TEMPLATES
from disastir_mteb.vocabulary.taxonomy import CATEGORIES, INTENTS, TASK_NAMES, Category, Intent

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
    "EvaluationResult",
    "Intent",
    "UsearchIndex",
    "evaluate",
    "get_tasks",
    "register",
    "register_built",
    "with_instructions",
]

#: Names imported on first use, by module: they import mteb (seconds) or USearch.
_LAZY = {
    "PRESETS": "vocabulary.ann_params", "AnnParams": "vocabulary.ann_params", "UsearchIndex": "search.usearch_index",
    "DATASET_REPO": "vocabulary.metadata", "DATASET_REVISION": "vocabulary.metadata", "get_tasks": "tasks.retrieval",
    "with_instructions": "models.adapter", "evaluate": "runner.run",
    "EvaluationResult": "runner.evaluation_result",
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


def _autoload_hook_is_waiting() -> bool:
    """The autoload hook's finder is on ``sys.meta_path``, waiting for mteb (it marks itself for this check)."""
    return any(getattr(finder, "registers_disastir_mteb", False) for finder in sys.meta_path)


if "mteb" in sys.modules or not _autoload_hook_is_waiting():
    register()

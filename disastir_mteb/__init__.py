"""disastir-mteb: the DisastIR disaster-management retrieval benchmark as 48 mteb tasks.

Importing the package registers the tasks and benchmarks with mteb (the same call the
autoload hook makes when mteb is imported). The names below are the public API.
"""

from __future__ import annotations

from disastir_mteb.registry import register
from disastir_mteb.taxonomy import CATEGORIES, INTENTS, TASK_NAMES, Category, Intent

register()

from disastir_mteb.adapter import with_instructions  # noqa: E402
from disastir_mteb.instructions import INSTRUCTION_SETS, TEMPLATES  # noqa: E402
from disastir_mteb.runner import evaluate  # noqa: E402
from disastir_mteb.tasks import DATASET_REPO, DATASET_REVISION, get_tasks  # noqa: E402

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

_LAZY = {"PRESETS", "AnnParams", "UsearchIndex"}  # from usearch_index: kept out of every `import mteb` (~10 ms)


def __getattr__(name: str) -> object:
    """The ANN names, imported on first use (the autoload hook imports this package whenever mteb loads)."""
    if name in _LAZY:
        from disastir_mteb import usearch_index

        return getattr(usearch_index, name)
    raise AttributeError(f"module 'disastir_mteb' has no attribute {name!r}")

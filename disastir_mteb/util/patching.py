"""The other libraries' names the plugin's patches use, as ``{module: (name, ...)}``, checked in one way."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence

__all__ = ["missing_names"]


def missing_names(required: Mapping[str, Sequence[str]]) -> list[str]:
    """``module.name`` for each required name the installed libraries lack, or ``module`` when it cannot be imported."""
    lost = []
    for module_name, names in required.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            lost.append(module_name)
            continue
        lost += [f"{module_name}.{name}" for name in names if not _has(module, name)]
    return lost


def _has(owner: object, dotted: str) -> bool:
    """Whether ``owner.a.b...`` exists for ``dotted`` = ``"a.b..."``."""
    for part in dotted.split("."):
        if not hasattr(owner, part):
            return False
        owner = getattr(owner, part)
    return True

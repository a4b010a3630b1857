"""The flat module paths of disastir-mteb before the layered layout, still importable with a warning.

Until the package was split into layers (``benchmark``, ``models``, ``search``, ``results``,
``util``), every module sat at the top: ``from disastir_mteb.compare import compare_sets`` was in
the README. Those paths keep working: :class:`MovedModuleFinder` answers an import of an old path
with the module at its new path (the same module object, so a monkeypatch through either name
holds for both) and a ``DeprecationWarning`` naming the new path. ``search`` and ``results`` are
now the packages themselves, so their old names are forwarded by :func:`forward_attribute`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from importlib.machinery import ModuleSpec
from types import CodeType, ModuleType

__all__ = ["MOVED", "MovedModuleFinder", "forward_attribute", "install"]

#: Old flat module name -> new dotted path below ``disastir_mteb``.
MOVED: dict[str, str] = {
    "atomic": "util.atomic",
    "taxonomy": "benchmark.taxonomy", "data": "benchmark.data", "tasks": "benchmark.tasks",
    "statistics": "benchmark.statistics", "sample": "benchmark.sample", "export": "benchmark.export",
    "instructions": "models.instructions", "adapter": "models.adapter", "dmretriever": "models.dmretriever",
    "bundled": "models.bundled", "hashing_encoder": "models.hashing_encoder",
    "encoding": "search.encoding", "store": "search.store", "exact_search": "search.exact_search",
    "usearch_index": "search.usearch_index", "search": "search.shared_corpus",
    "per_query": "results.per_query", "grid": "results.grid", "results": "results.result_sets",
    "report": "results.report", "plots": "results.plots", "compare": "results.compare",
    "significance": "results.significance", "published": "results.published", "submit": "results.submit",
    "submission_checks": "results.submission_checks",
}
_PREFIX = "disastir_mteb."


def _warn(old: str, new: str, stacklevel: int = 3) -> None:
    warnings.warn(f"{old} moved to {new}; the old path will be removed in a future release.",
                  DeprecationWarning, stacklevel=stacklevel)


class _Alias:
    """Hands out the module at its new path; ``get_code`` lets ``python -m <old path>`` run it."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        _warn(spec.name, self.new)
        module = importlib.import_module(self.new)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the module is already executed); give back the spec the import system replaced."""
        module.__spec__ = self._spec

    def get_code(self, fullname: str) -> CodeType | None:
        _warn(fullname, self.new)
        spec = importlib.util.find_spec(self.new)
        loader = spec.loader if spec is not None else None
        return loader.get_code(self.new) if hasattr(loader, "get_code") else None


class MovedModuleFinder:
    """Finds ``disastir_mteb.<old>`` for the old flat names that are no longer packages."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> ModuleSpec | None:
        """An alias spec for an old flat path, else ``None`` (the regular finders decide)."""
        if not fullname.startswith(_PREFIX):
            return None
        old = fullname[len(_PREFIX):]
        new = MOVED.get(old)
        if new is None or "." not in new or old == new.split(".")[0]:
            return None
        return ModuleSpec(fullname, _Alias(_PREFIX + new))


def forward_attribute(package: str, name: str) -> object:
    """``disastir_mteb.<package>.<name>`` for a name the old flat module ``<package>`` had.

    The value is then kept on the package, so the warning comes once per name (``from ... import``
    looks a name up twice).
    """
    new = _PREFIX + MOVED[package]
    module = importlib.import_module(new)
    if name.startswith("__") or not hasattr(module, name):
        raise AttributeError(f"module {_PREFIX + package!r} has no attribute {name!r}")
    _warn(f"{_PREFIX}{package}.{name}", f"{new}.{name}", stacklevel=4)
    value = getattr(module, name)
    setattr(sys.modules[_PREFIX + package], name, value)
    return value


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (after the regular finders: real modules win)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())

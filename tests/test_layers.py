"""The package's architecture, checked: layers import downward only, modules stay short, the API stays put."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import disastir_mteb
from disastir_mteb.util.moved_modules import MOVED

PACKAGE = Path(disastir_mteb.__file__).parent

#: Each layer and the layers it may import (itself included). Everything else in the package root
#: (cli, demo, runner, registry, the package itself) is the top and may import any layer.
ALLOWED: dict[str, set[str]] = {
    "util": {"util"},
    "benchmark": {"util", "benchmark"},
    "models": {"util", "benchmark", "models"},
    "search": {"util", "benchmark", "models", "search"},
    "results": {"util", "benchmark", "results"},  # results are read from files: no model, no search
}
TOP = "top"
MAX_LINES = 350
LONG_REASON = "Longer than 350 lines because"

#: The public API: ``disastir_mteb.__all__`` exactly.
PUBLIC = [
    "CATEGORIES", "DATASET_REPO", "DATASET_REVISION", "INSTRUCTION_SETS", "INTENTS", "PRESETS", "TASK_NAMES",
    "TEMPLATES", "AnnParams", "Category", "Intent", "UsearchIndex", "evaluate", "get_tasks", "register",
    "with_instructions",
]


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "task_metadata" not in p.parts)


def _layer(module: str) -> str:
    """``disastir_mteb.search.store`` -> ``search``; a module in the package root -> the top."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ALLOWED) else TOP


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def _imported(path: Path) -> list[tuple[int, str]]:
    """Every ``disastir_mteb`` module ``path`` imports, anywhere in it (functions and TYPE_CHECKING too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "disastir_mteb":
                found += [(node.lineno, f"disastir_mteb.{alias.name}") for alias in node.names]
            elif node.module.startswith("disastir_mteb."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append((node.lineno, "relative import"))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("disastir_mteb.")]
    return found


def test_every_module_sits_in_a_known_layer() -> None:
    """A new subpackage must be given a place in :data:`ALLOWED` (and in the README's drawing)."""
    folders = {p.parent.name for p in _modules() if p.parent != PACKAGE}
    assert folders == set(ALLOWED)


def test_layers_import_downward_only() -> None:
    wrong = []
    for path in _modules():
        layer = _layer(_module_name(path))
        if layer == TOP:
            continue
        for line, target in _imported(path):
            target_layer = "relative import" if target == "relative import" else _layer(target)
            if target_layer not in ALLOWED[layer]:
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} ({layer}) imports {target} ({target_layer})")
    assert not wrong, "imports against the layering (see the README's design section):\n" + "\n".join(wrong)


def test_private_names_stay_inside_their_layer() -> None:
    """``_name`` is a layer's internal: modules of one layer share them, no other layer imports them."""
    wrong = []
    for path in _modules():
        layer = _layer(_module_name(path))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("disastir_mteb."):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private and _layer(node.module) != layer:
                    wrong.append(f"{path.relative_to(PACKAGE)}:{node.lineno} imports {private} from {node.module}")
    assert not wrong, "private names imported across layers:\n" + "\n".join(wrong)


def test_the_layering_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The check itself can fail: a lower layer importing a higher one is reported."""
    module = tmp_path / "probe.py"
    module.write_text("def f():\n    from disastir_mteb.search.store import EmbeddingStore\n")
    (target,) = _imported(module)
    assert _layer(target[1]) == "search" and "search" not in ALLOWED["benchmark"]


def test_no_module_is_long_without_a_reason() -> None:
    long = [f"{p.relative_to(PACKAGE)} ({n} lines)" for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
            and LONG_REASON not in (ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or "")]
    assert not long, f"past {MAX_LINES} lines with no '{LONG_REASON} ...' in the docstring: {long}"


def test_public_api_is_unchanged() -> None:
    assert disastir_mteb.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(disastir_mteb, name) is not None


def test_cli_entry_point_and_autoload_hook_resolve() -> None:
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "disastir-mteb"]
    assert script.value == "disastir_mteb.cli:main" and callable(script.load())
    done = subprocess.run([sys.executable, "-c", "import mteb; print(mteb.get_task('DisastIR-QA-Bio').metadata.name)"],
                          capture_output=True, text=True, timeout=300, cwd="/")
    assert done.stdout.strip() == "DisastIR-QA-Bio", done.stderr


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_flat_paths_still_import_with_a_warning(old: str) -> None:
    """Code written against the flat layout (``from disastir_mteb.compare import ...``) keeps working."""
    new = importlib.import_module(f"disastir_mteb.{MOVED[old]}")
    if old not in {"search", "results"}:
        sys.modules.pop(f"disastir_mteb.{old}", None)  # imported once already: import it afresh
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if old in {"search", "results"}:  # now the layer's package: the old module's names are forwarded
            name = next(n for n in new.__all__ if n not in vars(sys.modules[f"disastir_mteb.{old}"]))
            value = getattr(importlib.import_module(f"disastir_mteb.{old}"), name)
            assert value is getattr(new, name)
        else:
            assert importlib.import_module(f"disastir_mteb.{old}") is new
            assert new.__spec__.name == new.__name__ == f"disastir_mteb.{MOVED[old]}"
    assert any(issubclass(w.category, DeprecationWarning) and MOVED[old] in str(w.message) for w in caught)


def test_old_sample_path_runs_as_a_script() -> None:
    """``python -m disastir_mteb.sample`` was in the README."""
    done = subprocess.run([sys.executable, "-m", "disastir_mteb.sample", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "--scale" in done.stdout, done.stderr

"""The architecture, checked: layers import downward, private names stay in their module, the API stays put."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path

import disastir_mteb

PACKAGE = Path(disastir_mteb.__file__).parent

ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def _allowed() -> dict[str, set[str]]:
    """Each layer and the layers it may import (itself included): the table of docs/architecture.md, read.

    Everything else in the package root (cli, commands, demo, registration, the package itself) is the top and may
    import any layer.
    """
    text = ARCHITECTURE.read_text(encoding="utf-8")
    table = text[text.index("| folder | may import | why |"):].split("\n\n", 1)[0].splitlines()[2:]
    allowed = {}
    for row in table:
        folder, imports = (cell.strip() for cell in row.strip("|").split("|")[:2])
        name = folder.strip("`").rstrip("/")
        allowed[name] = {name} | ({part.strip() for part in imports.split(",")} - {"nothing"})
    return allowed


ALLOWED = _allowed()
TOP = "top"

#: The public API: ``disastir_mteb.__all__`` exactly.
PUBLIC = [
    "CATEGORIES", "DATASET_REPO", "DATASET_REVISION", "INSTRUCTION_SETS", "INTENTS", "PRESETS", "TASK_NAMES",
    "TEMPLATES", "AnnParams", "Category", "EvaluationResult", "Intent", "UsearchIndex", "evaluate", "get_tasks",
    "register", "register_built", "with_instructions",
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
    """A new subpackage must be given a row in docs/architecture.md's table (:data:`ALLOWED` reads it)."""
    folders = {p.parent.name for p in _modules() if p.parent != PACKAGE}
    assert folders == set(ALLOWED), "folders without a row in docs/architecture.md, or rows without a folder"
    assert all(layers <= set(ALLOWED) for layers in ALLOWED.values()), "a row names a folder that does not exist"


def test_layers_import_downward_only() -> None:
    wrong = [error for path in _modules() if (layer := _layer(_module_name(path))) != TOP
             for error in _layering_errors(path, layer)]
    assert not wrong, "imports against the layering (see docs/architecture.md):\n" + "\n".join(wrong)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_reads(path: Path) -> list[str]:
    """Where ``path`` takes another module's ``_name``: ``from m import _x``, or ``m._x`` on a module it imported."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules: set[str] = set()  # local names bound to disastir_mteb modules
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("disastir_mteb"):
            private = [a.name for a in node.names if _private(a.name)]
            if private:
                wrong.append(f"{path.name}:{node.lineno} imports {private} from {node.module}")
            for alias in node.names:  # ``from disastir_mteb.search import store``: ``store`` is a module
                if (PACKAGE.parent / f"{node.module}.{alias.name}".replace(".", "/")).with_suffix(".py").is_file():
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name.startswith("disastir_mteb"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and ast.unparse(node.value) in modules:
            wrong.append(f"{path.name}:{node.lineno} reads {ast.unparse(node)}")
    return wrong


def _layering_errors(path: Path, layer: str) -> list[str]:
    wrong = []
    for line, target in _imported(path):
        target_layer = "relative import" if target == "relative import" else _layer(target)
        if target_layer not in ALLOWED[layer]:
            wrong.append(f"{path.name}:{line} ({layer}) imports {target} ({target_layer})")
    return wrong


def test_no_module_reads_another_modules_private_names() -> None:
    """``_name`` is its module's own: no other module imports it or reads it off the module object."""
    wrong = [error for path in _modules() for error in _private_reads(path)]
    assert not wrong, "private names taken across modules:\n" + "\n".join(wrong)


#: The modules that read private names of other libraries (mteb, datasets, sentence-transformers, scikit-learn),
#: each with the list of them its canary checks (``tests/test_mteb_internals.py``): the door, and the three that
#: write into or patch mteb deliberately.
DOORS = {
    "util/mteb_internals.py": "REQUIRED, INSTANCE_ATTRIBUTES",
    "registration.py": "MTEB_INTERNALS",
    "leaderboard/mteb_patch.py": "REQUIRED",
    "runner/scoring_patch.py": "REQUIRED",
}


#: Strings in the doors that look like private names but are data: string -> what it is.
NOT_NAMES = {"_experiment_id": "a column of mteb's leaderboard tables (leaderboard/mteb_patch.py EXPERIMENT_COLUMN)"}


def _own_private_names() -> set[str]:
    """Every ``_name`` the package defines itself: functions, classes, globals, and attributes it assigns."""
    own = set()
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.arg):
                own.add(node.arg)
    return {name for name in own if _private(name)}


def _private_path(module: str) -> bool:
    return any(_private(part) for part in module.split(".")[1:])


def _foreign_private_reads(path: Path, own: set[str], *, strings: bool = False) -> list[str]:
    """Where ``path`` reads a private name of another library: a private module path, ``from m import _x``,
    ``x._y`` or ``getattr(x, "_y")`` of a name the package does not define (the standard library aside: its
    ``os._exit`` is documented). ``strings``: also every ``"_name"`` string (the names a patch loops over)."""
    wrong = []
    for node in sorted(ast.walk(ast.parse(path.read_text(encoding="utf-8"))),
                       key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
        where = f"{path.relative_to(PACKAGE).as_posix()}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and not (
                node.module.split(".")[0] == "disastir_mteb"):
            if _private_path(node.module):
                wrong.append(f"{where} imports from {node.module}")
            wrong += [f"{where} imports {a.name} from {node.module}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Import):
            wrong += [f"{where} imports {a.name}" for a in node.names if _private_path(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if not (isinstance(root, ast.Name) and root.id in sys.stdlib_module_names):
                wrong.append(f"{where} reads {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[-1 if len(node.args) == 1 else 1],
                                                                      ast.Constant):
            name, called = node.args[-1 if len(node.args) == 1 else 1].value, ast.unparse(node.func)
            if called in ("getattr", "hasattr", "setattr", "delattr") and isinstance(name, str) and _private(name) \
                    and name not in own:
                wrong.append(f"{where} reads {name} through {called}")
            elif called.endswith("import_module") and isinstance(name, str) and _private_path(name):
                wrong.append(f"{where} imports {name}")
        elif strings and isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier() \
                and _private(node.value) and node.value not in own and node.value not in NOT_NAMES:
            wrong.append(f"{where} names {node.value}")
    return wrong


def test_only_the_doors_read_private_names_of_other_libraries() -> None:
    """mteb's, datasets' and sentence-transformers' private names go through ``util/mteb_internals.py`` (and the
    three modules that patch or register into mteb): an upgrade that moves one breaks there and in one canary."""
    own = _own_private_names()
    wrong = [error for path in _modules() if path.relative_to(PACKAGE).as_posix() not in DOORS
             for error in _foreign_private_reads(path, own)]
    assert not wrong, "private names of other libraries read outside the doors (add an accessor to " \
                      "disastir_mteb/util/mteb_internals.py):\n" + "\n".join(wrong)


def test_each_door_lists_every_private_name_it_reads() -> None:
    """What the canary checks is what the door reads: each private name a door reads is in its list."""
    own = _own_private_names()
    unlisted = []
    for relative, lists in DOORS.items():
        module = importlib.import_module(_module_name(PACKAGE / relative))
        declared = set()
        for list_name in lists.split(", "):
            value = getattr(module, list_name)
            for entry in (value.items() if isinstance(value, Mapping) else value):
                for part in (entry[0], *([entry[1]] if isinstance(entry[1], str) else entry[1])):
                    declared.update(part.split("."))
        for error in _foreign_private_reads(PACKAGE / relative, own, strings=True):
            name = error.rsplit(" ", 3 if " through " in error else 1)[-3 if " through " in error else -1]
            if not {part for part in name.replace("(", ".").split(".") if _private(part)} <= declared:
                unlisted.append(f"{error} (not in {lists})")
    assert not unlisted, "private names a door reads but its canary list lacks:\n" + "\n".join(unlisted)


def test_the_private_name_check_catches_each_way_of_reading_one(tmp_path: Path) -> None:
    probe = tmp_path / "pkg" / "probe.py"
    probe.parent.mkdir()
    probe.write_text("import os\nimport importlib\nfrom mteb._create_dataloaders import create_dataloader\n"
                     "from datasets import _private\n\n\ndef f(task, data, model):\n"
                     "    os._exit(0)\n    model._can_flatten_inputs()\n"
                     "    importlib.import_module('mteb.benchmarks._create_table')\n"
                     "    return task._top_k, getattr(data, '_fingerprint', None), task._mine\n")
    global PACKAGE
    package, PACKAGE = PACKAGE, tmp_path / "pkg"
    try:
        found = _foreign_private_reads(probe, {"_mine"})
    finally:
        PACKAGE = package
    assert found == ["probe.py:3 imports from mteb._create_dataloaders", "probe.py:4 imports _private from datasets",
                     "probe.py:9 reads model._can_flatten_inputs", "probe.py:10 imports mteb.benchmarks._create_table",
                     "probe.py:11 reads task._top_k", "probe.py:11 reads _fingerprint through getattr"]


#: Private names tests still read, each because no public way exists: test file -> {read: why}.
TESTS_READING_PRIVATE_NAMES = {
    "test_exact_search.py": {"kernel._exact_top_tensor": "a spy counting the blocked kernel's calls"},
    "test_timings.py": {"commands._task_line": "the one moment between the start of a run and its end, to make the "
                                               "--timings-json folder a file while the run runs"},
}


def test_tests_use_public_names_where_one_exists() -> None:
    """Tests follow public behaviour: a test reads a private name only where it is listed above, with why."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.parent.joinpath("tests").glob("*.py")):
        for error in _private_reads(path):
            found.setdefault(path.name, set()).add(error.split(" ", 2)[2])  # "reads x._y" / "imports [...] from m"
    allowed = {name: set(reads) for name, reads in TESTS_READING_PRIVATE_NAMES.items()}
    assert found == allowed, "tests reading private names (use a public way, or list it with why):\n" + "\n".join(
        f"{name}: {sorted(reads)}" for name, reads in sorted(found.items()))


def test_the_checks_catch_an_upward_import_and_a_private_read(tmp_path: Path) -> None:
    """The checks themselves can fail: run on a probe module that breaks both rules, they report it."""
    probe = tmp_path / "probe.py"
    probe.write_text("from disastir_mteb.search import store\n\n\ndef f():\n"
                     "    from disastir_mteb.search.store import EmbeddingStore, _internal\n"
                     "    return store._LOCK, EmbeddingStore, _internal\n")
    assert _layering_errors(probe, "data") == [
        "probe.py:1 (data) imports disastir_mteb.search (search)",
        "probe.py:5 (data) imports disastir_mteb.search.store (search)"]
    assert _private_reads(probe) == ["probe.py:5 imports ['_internal'] from disastir_mteb.search.store",
                                     "probe.py:6 reads store._LOCK"]


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

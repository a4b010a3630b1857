"""DisastIR as mteb itself would ship it: the mteb-side files of the pull request, written into a checkout.

The task module, its registration, the ``DISASTIR`` benchmark and the 48 statistics files, rendered from the
objects the plugin's tasks are made of. Only the DisastIR entries of mteb's shared files are touched, a file is
rewritten only when its text changes (a rerun changes nothing), and every refusal comes before any write.
Written against mteb 2.26.24.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from disastir_mteb.exports.upstream_source import (
    BENCHMARK_VARIABLE,
    TASK_MODULE,
    benchmark_source,
    task_module_source,
)
from disastir_mteb.util.atomic import write_text_atomic
from disastir_mteb.util.errors import InvalidInput, MissingInput

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["UpstreamResult", "check_checkout", "write_upstream"]

_TASKS_INIT = Path("mteb/tasks/retrieval/eng/__init__.py")
_BENCHMARKS = Path("mteb/benchmarks/benchmarks/benchmarks.py")
_BENCHMARKS_INIT = Path("mteb/benchmarks/benchmarks/__init__.py")
_BENCHMARK_CLASSES = Path("mteb/benchmarks/benchmark.py")
_REQUIRED = (_TASKS_INIT, _BENCHMARKS, _BENCHMARKS_INIT, _BENCHMARK_CLASSES, Path("mteb/descriptive_stats"))
_FULL_REVISION = re.compile(r"[0-9a-f]{40}")
#: TaskMetadata fields whose values must be among the Literal values the checkout's mteb declares.
_VOCABULARY_FIELDS = ("type", "category", "modalities", "domains", "task_subtypes", "license",
                      "annotations_creators", "sample_creation")


@dataclass
class UpstreamResult:
    """What one run did: the files it changed, those already up to date, and what is still a placeholder."""

    root: Path
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    placeholder_revision: bool = True
    groupings: bool = True

    def to_text(self) -> str:
        """A few lines for the command line."""
        lines = [f"{self.root}: {len(self.written)} file(s) written, {len(self.unchanged)} already up to date."]
        stats = [path for path in self.written if path.suffix == ".json"]
        lines += [f"  {path.relative_to(self.root)}" for path in self.written if path not in stats]
        if stats:
            lines.append(f"  {stats[0].parent.relative_to(self.root)}/: {len(stats)} statistics file(s)")
        if self.placeholder_revision:
            lines.append("The dataset revision is a TODO placeholder: push `disastir-mteb export --format mteb` to "
                         "the Hub, then rerun with --revision <full commit hash>.")
        if not self.groupings:
            lines.append("This mteb has no CustomGrouping: the benchmark keeps the mean over tasks only "
                         "(no Intent/Category columns).")
        return "\n".join(lines)


def check_checkout(root: str | Path) -> Path:
    """The root of an mteb source checkout (``pyproject.toml`` of the mteb project beside ``mteb/``).

    Raises:
        ValueError: ``root`` is not one, in one sentence (an installed ``site-packages/mteb`` is not one either).
    """
    path = Path(root).expanduser().resolve()
    pyproject = path / "pyproject.toml"
    named = pyproject.is_file() and re.search(r'^name\s*=\s*"mteb"\s*$', pyproject.read_text(encoding="utf-8"), re.M)
    if not named or not all((path / part).exists() for part in _REQUIRED):
        raise InvalidInput(f"{root} is not an mteb checkout (no pyproject.toml naming the mteb project beside "
                           f"{_TASKS_INIT.parent}/ and {_BENCHMARKS.parent}/); pass the root of a clone of "
                           "https://github.com/embeddings-benchmark/mteb.")
    return path


def write_upstream(mteb_dir: str | Path, *, revision: str | None = None, dataset_path: str | None = None,
                   stats_dir: str | Path | None = None) -> UpstreamResult:
    """Write or update the DisastIR tasks, benchmark and statistics in an mteb checkout.

    Args:
        mteb_dir: the root of the checkout.
        revision: the commit of the mteb-format dataset on the Hub; default ``task_metadata/dataset.json``'s
            (a TODO placeholder while null).
        dataset_path: its Hub repository; default ``dataset.json``'s.
        stats_dir: ``<task>.json`` files from ``disastir-mteb stats --out``; default the plugin's own.

    Raises:
        ValueError: not an mteb checkout, a revision that is not 40 hex digits, or a file in the
            checkout without the list this edits.
        FileNotFoundError: ``stats_dir`` lacks a task's file.
    """
    from disastir_mteb.tasks.benchmarks import benchmarks
    from disastir_mteb.tasks.retrieval import TASK_CLASSES
    from disastir_mteb.vocabulary.metadata import DATASET

    root = check_checkout(mteb_dir)
    revision = revision or DATASET.get("mteb_dataset_revision")
    if revision is not None and not _FULL_REVISION.fullmatch(revision):
        raise InvalidInput(f"--revision {revision!r} is not a full commit hash; pass the 40 hex digits of the "
                           "dataset's commit on the Hub.")
    _check_vocabulary(root, TASK_CLASSES.values())
    groupings = "class CustomGrouping" in (root / _BENCHMARK_CLASSES).read_text(encoding="utf-8")
    metadatas = {name: cls.metadata for name, cls in TASK_CLASSES.items()}
    classes = [cls.__name__ for cls in TASK_CLASSES.values()]
    (benchmark,) = [b for b in benchmarks() if b.name == "DisastIR"]

    def current(relative: Path) -> str:
        return (root / relative).read_text(encoding="utf-8")

    # Everything is rendered (and every input read) first, so a refusal leaves the checkout as it was.
    tasks_init = _set_import(current(_TASKS_INIT), TASK_MODULE, classes)
    benchmark_imports = ["CustomGroup", "CustomGrouping"] if groupings else []
    benchmarks_init = _edit_list(current(_BENCHMARKS_INIT), "from mteb.benchmarks.benchmarks.benchmarks import (",
                                 [BENCHMARK_VARIABLE], _BENCHMARKS_INIT, quoted=False)
    planned = {
        _TASKS_INIT.parent / f"{TASK_MODULE}.py": task_module_source(
            metadatas, dataset_path=dataset_path or DATASET["mteb_dataset"], revision=revision,
            corpus_size=DATASET["corpus_size"]),
        _TASKS_INIT: _edit_list(tasks_init, "__all__ = [", classes, _TASKS_INIT, quoted=True, ours="DisastIR"),
        _BENCHMARKS: _set_benchmark(
            _edit_list(current(_BENCHMARKS), "from mteb.benchmarks.benchmark import (", benchmark_imports,
                       _BENCHMARKS, quoted=False),
            benchmark_source(benchmark, groupings=groupings)),
        _BENCHMARKS_INIT: _edit_list(benchmarks_init, "__all__ = [", [BENCHMARK_VARIABLE], _BENCHMARKS_INIT,
                                     quoted=True),
    }
    for name, metadata in metadatas.items():
        source = Path(stats_dir) / f"{name}.json" if stats_dir is not None else metadata.descriptive_stat_path
        if not source.is_file():
            raise MissingInput(f"{source}: no descriptive statistics for {name}; write them with "
                               "`disastir-mteb stats --out DIR` (all 48 tasks).")
        stats = json.loads(source.read_text(encoding="utf-8"))
        planned[_stats_folder(root) / f"{name}.json"] = json.dumps(stats, indent=4) + "\n"  # mteb's own format

    result = UpstreamResult(root=root, placeholder_revision=revision is None, groupings=groupings)
    for relative, text in planned.items():
        path = root / relative
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            result.unchanged.append(path)
        else:
            write_text_atomic(path, text)
            result.written.append(path)
    return result


def _check_vocabulary(root: Path, classes: Iterable[type]) -> None:
    """Refuse an mteb whose ``TaskMetadata`` would reject a value the tasks use (its import would fail)."""
    sources = [root / "mteb/abstasks/task_metadata.py", *sorted((root / "mteb/types").glob("*.py"))]
    known = "\n".join(path.read_text(encoding="utf-8") for path in sources if path.is_file())
    unknown: dict[tuple[str, str], list[str]] = {}
    for cls in classes:
        for key in _VOCABULARY_FIELDS:
            value = getattr(cls.metadata, key)  # type: ignore[attr-defined]
            for item in value if isinstance(value, list) else [value]:
                if f'"{item}"' not in known:
                    unknown.setdefault((key, item), []).append(cls.metadata.name)  # type: ignore[attr-defined]
    if unknown:
        (key, item), tasks = next(iter(unknown.items()))
        more = f" and {len(unknown) - 1} other value(s)" if len(unknown) > 1 else ""
        raise InvalidInput(f"The mteb in {root} does not know {key} {item!r} (used by {tasks[0]} and "
                           f"{len(tasks) - 1} other task(s)){more}, so the tasks would not import there; update the "
                           "checkout to a newer mteb (this was written against mteb 2.26.24).")


def _stats_folder(root: Path) -> Path:
    """Where mteb looks for a Retrieval task's statistics (``TaskMetadata.descriptive_stat_path``)."""
    base = Path("mteb/descriptive_stats")
    return base / "Image" / "Retrieval" if (root / base / "Image" / "Retrieval").is_dir() else base / "Retrieval"


def _natural(text: str) -> list[object]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _member_key(name: str) -> tuple[int, list[object]]:
    """How ruff's isort orders imported names: constants, classes, then the rest; case-insensitive."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, _natural(name.lower())


def _all_key(name: str) -> tuple[int, list[object]]:
    """How ruff's RUF022 orders ``__all__``: SCREAMING_CASE, CamelCase, the rest; case-sensitive."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, _natural(name)


def _edit_list(text: str, opening: str, names: list[str], where: Path, *, quoted: bool, ours: str | None = None) -> str:
    """Add ``names`` to the one-per-line list opened by the line ``opening``, each at its sorted place.

    With ``ours``, entries starting with it that are not in ``names`` are dropped (tasks this package no longer has).
    """
    lines = text.split("\n")
    try:
        start = lines.index(opening)
        end = lines.index(opening[-1].replace("[", "]").replace("(", ")"), start)
    except ValueError:
        raise InvalidInput(f"{where}: no line {opening!r} followed by a one-per-line list; is this an mteb "
                           "checkout of 2.x?") from None
    pattern = re.compile(r'^    "?([^",]+)"?,$')
    entries = [m.group(1) if (m := pattern.match(line)) else None for line in lines[start + 1:end]]
    kept = [(e, line) for e, line in zip(entries, lines[start + 1:end], strict=True)
            if not (ours and e and e.startswith(ours) and e not in names)]
    key = _all_key if quoted else _member_key
    for name in names:
        if any(e == name for e, _ in kept):
            continue
        at = next((i for i, (e, _) in enumerate(kept) if e is not None and key(e) > key(name)), len(kept))
        kept.insert(at, (name, f'    "{name}",' if quoted else f"    {name},"))
    return "\n".join([*lines[:start + 1], *(line for _, line in kept), *lines[end:]])


def _import_statements(lines: list[str]) -> list[tuple[int, int, str]]:
    """(first line, last line, module) of each ``from .x import ...`` statement."""
    found, i = [], 0
    while i < len(lines):
        match = re.match(r"from \.(\w+) import", lines[i])
        last = lines.index(")", i) if match and lines[i].endswith("(") else i
        if match:
            found.append((i, last, match.group(1)))
        i = last + 1
    return found


def _set_import(text: str, module: str, names: list[str]) -> str:
    """``from .<module> import (...)`` with ``names``, at its sorted place among the ``from .x import`` lines."""
    lines = text.split("\n")
    for first, last, name in reversed(_import_statements(lines)):
        if name == module:
            del lines[first:last + 1]
    statements = _import_statements(lines)
    later = [first for first, _, name in statements if _natural(name.lower()) > _natural(module.lower())]
    at = later[0] if later else statements[-1][1] + 1 if statements else 0
    lines[at:at] = [f"from .{module} import (", *(f"    {n}," for n in sorted(names, key=_member_key)), ")"]
    return "\n".join(lines)


def _set_benchmark(text: str, block: str) -> str:
    """The DisastIR block of ``benchmarks.py``: replaced where it is, appended at the end the first time."""
    lines = text.rstrip("\n").split("\n")
    head = f"{BENCHMARK_VARIABLE} = Benchmark("
    if head in lines:
        first = next(i for i, line in enumerate(lines) if line.startswith(("_DISASTIR_INTENTS =", head)))
        last = lines.index(")", lines.index(head))
        kept = [*lines[:first], *lines[last + 1:]]
        before, after = "\n".join(kept[:first]).rstrip("\n"), "\n".join(kept[first:]).strip("\n")
        return before + "\n\n\n" + block + ("\n\n" + after + "\n" if after else "")
    return "\n".join(lines) + "\n\n\n" + block

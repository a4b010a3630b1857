"""Which tasks a run evaluates, grouped by corpus; names in any case, answered before any work.

A run on a built benchmark (its folder as the data) knows its names too: ``built`` (the folder's
:class:`~disastir_mteb.vocabulary.taxonomy.BuiltNames`) resolves ``MyOrg-QA-MH`` and ``MyOrg`` in any case, and is
what a run with no names evaluates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from disastir_mteb.util.errors import InvalidInput, UnknownName
from disastir_mteb.vocabulary.taxonomy import (
    ALL_TASK_NAMES,
    BENCHMARK_NAMES,
    SPLIT_TASK_NAMES,
    BuiltNames,
    Split,
    benchmark_task_names,
    canonical_benchmark_name,
    canonical_task_name,
    closest_names,
    get_spec,
    is_task_name,
    parse_split,
    task_name,
)

if TYPE_CHECKING:
    from mteb import AbsTask

    from disastir_mteb.data.source import DataSource

__all__ = ["Names", "built_names", "canonical_names", "corpus_groups", "resolve_tasks", "selected_task_names"]


@dataclass(frozen=True)
class Names:
    """What a run was asked for, task names (or objects) and benchmark names, each in its canonical spelling."""

    tasks: tuple[str | AbsTask, ...]
    benchmarks: tuple[str, ...]


def _given(tasks: Iterable[str | AbsTask] | str | None) -> list[str | AbsTask]:
    """``tasks`` as a list, read once (it may be a generator); one sentence for an empty name."""
    given = [tasks] if isinstance(tasks, str) else list(tasks or ())
    if any(isinstance(task, str) and not task.strip() for task in given):
        raise InvalidInput("A task name is empty (''): name tasks like DisastIR-QA-Bio (disastir-mteb tasks lists "
                           "the 48), or name none for all of them.")
    return given


def built_names(data: DataSource | None) -> BuiltNames | None:
    """The names of the built benchmark ``data`` reads (its folder's marker says built), or None.

    Raises:
        FileNotFoundError: a built folder without task files.
        ValueError: a built folder whose marker names it badly.
    """
    if data is None or data.folder is None:
        return None
    from disastir_mteb.data.layout import built_name, find_task_files

    return find_task_files(data.folder).built_names if built_name(data.folder) is not None else None


def _task_spelling(task: str, built: BuiltNames | None) -> str:
    """A task name of the built benchmark or of DisastIR in its canonical spelling; another library's as given."""
    if built is not None and (own := built.task(task)) is not None:
        return own
    name = canonical_task_name(task)
    if built is not None and name in ALL_TASK_NAMES:
        raise InvalidInput(f"Task {name!r} is DisastIR's, but the data is the built benchmark {built.name}, whose "
                           f"tasks are {', '.join(built.tasks)}; name those (or -b {built.name}), or run {name} "
                           "without that --data.")
    return name


def _disastir_spelling(tasks: Iterable[str | AbsTask] | str | None, benchmarks: Iterable[str] | None,
                       built: BuiltNames | None = None) -> Names:
    """Every DisastIR (or built) name in its canonical spelling, from the vocabulary alone; other names as given."""
    return Names(tuple(_task_spelling(task, built) if isinstance(task, str) else task for task in _given(tasks)),
                 tuple(built.name if built is not None and built.is_benchmark(name) else canonical_benchmark_name(name)
                       for name in benchmarks or ()))


def _known(built: BuiltNames | None) -> tuple[frozenset[str], frozenset[str]]:
    """The task and benchmark names answered from the vocabulary alone (DisastIR's, and the built benchmark's)."""
    if built is None:
        return ALL_TASK_NAMES, frozenset(BENCHMARK_NAMES)
    return ALL_TASK_NAMES | frozenset(built.tasks), frozenset((*BENCHMARK_NAMES, built.name))


def _mteb_benchmark(name: str) -> str:
    """Another library's benchmark name as mteb spells it; a ``KeyError`` names the closest."""
    import mteb

    try:
        mteb.get_benchmark(name)
        return name
    except KeyError:
        pass
    known = [spelling for benchmark in mteb.get_benchmarks()
             for spelling in (benchmark.name, *(benchmark.aliases or ()))]
    spelled = {spelling.casefold(): spelling for spelling in known}
    if name.casefold() in spelled:
        return spelled[name.casefold()]
    close = closest_names(name, known)
    hint = f"Did you mean {', '.join(close)}?" if close else "No known benchmark is close."
    raise UnknownName(f"Unknown benchmark {name!r}. {hint} The DisastIR benchmarks: {', '.join(BENCHMARK_NAMES)} "
                      "(mteb.get_benchmarks() lists every benchmark).")


def _mteb_task(name: str) -> str:
    """Another library's task name as mteb spells it; a ``KeyError`` names the closest."""
    import mteb

    try:
        mteb.get_task(name)
        return name
    except KeyError:
        pass
    known = [task.metadata.name for task in mteb.get_tasks()]
    spelled = {spelling.casefold(): spelling for spelling in known}
    if name.casefold() in spelled:
        return spelled[name.casefold()]
    close = closest_names(name, known)
    hint = f"Did you mean {', '.join(close)}?" if close else "No known task is close."
    raise UnknownName(f"Unknown task {name!r}. {hint} The DisastIR tasks are named like DisastIR-QA-Bio "
                      "(disastir-mteb tasks lists them; mteb.get_tasks() every task).")


def canonical_names(tasks: Iterable[str | AbsTask] | str | None = None,
                    benchmarks: Iterable[str] | None = None, *, built: BuiltNames | None = None) -> Names:
    """Task and benchmark names in any case, spelled as mteb knows them (or ``built``, the built benchmark read).

    Raises:
        KeyError: an unknown task or benchmark name, with the closest known names.
        ValueError: an empty task name; a DisastIR task with a built benchmark's data.
    """
    spelled = _disastir_spelling(tasks, benchmarks, built)
    tasks_known, benchmarks_known = _known(built)
    return Names(
        tuple(task if not isinstance(task, str) or task in tasks_known else _mteb_task(task)
              for task in spelled.tasks),
        tuple(name if name in benchmarks_known else _mteb_benchmark(name) for name in spelled.benchmarks))


def _in_split(name: str, split: Split | None) -> str:
    """``name`` in the query set ``split``: a full-set DisastIR name becomes the split's, another set's is refused."""
    if split is None or name not in ALL_TASK_NAMES:
        return name
    spec = get_spec(name)
    if spec.split is Split.full:
        return task_name(spec.intent, spec.category, split)
    if spec.split is not split:
        raise InvalidInput(f"Task {name!r} is in {spec.split.value!r}, but split={split.value!r} was asked for; drop "
                           f"the split to run the names as given, or name the task of the full set "
                           f"({spec.base.name!r}), which the split turns into its own.")
    return name


def _benchmark_tasks(benchmark: str, built: BuiltNames | None) -> tuple[str, ...]:
    return built.tasks if built is not None and benchmark == built.name else benchmark_task_names(benchmark)


def selected_task_names(tasks: Iterable[str | AbsTask] | str | None = None, benchmarks: Iterable[str] | None = None,
                        *, split: Split | str | None = None, built: BuiltNames | None = None) -> list[str] | None:
    """The DisastIR task names a selection resolves to, from the vocabulary alone (nothing imported).

    None where only mteb can tell (another library's name, a task object). With ``built`` (a built benchmark is the
    data), its names are known too, and no names select all its tasks.

    Raises:
        KeyError: an unknown DisastIR or built task or benchmark name (with the closest valid names).
        ValueError: an unknown split, an empty task name, a task of another query set than ``split``, or a split or a
            DisastIR task with a built benchmark's data.
    """
    wanted = None if split is None else parse_split(split)
    if built is not None and wanted not in (None, Split.full):
        raise InvalidInput(f"A built benchmark ({built.name}) has one query set: drop split={wanted.value!r}.")
    spelled = _disastir_spelling(tasks, benchmarks, built)
    tasks_known, benchmarks_known = _known(built)
    ours = [name for benchmark in spelled.benchmarks if benchmark in benchmarks_known
            for name in _benchmark_tasks(benchmark, built)]
    ours += [task for task in spelled.tasks if isinstance(task, str) and task in tasks_known]
    names = [_in_split(name, wanted) for name in ours]  # every DisastIR name checked, whatever else is given
    others = [task for task in spelled.tasks if not isinstance(task, str) or task not in tasks_known]
    if others or any(benchmark not in benchmarks_known for benchmark in spelled.benchmarks):
        return None
    return list(dict.fromkeys(names or (built.tasks if built is not None else SPLIT_TASK_NAMES[wanted or Split.full])))


def resolve_tasks(tasks: Iterable[str | AbsTask] | str | None = None,
                  benchmarks: Iterable[str] | None = None, *, split: Split | str | None = None,
                  data: DataSource | None = None) -> list[AbsTask]:
    """Task objects from names, task objects and/or benchmark names; the 48 of ``split`` when nothing is given.

    A ``split`` renames the full set's tasks (``DisastIR-QA-Bio`` -> ``DisastIR-Test-QA-Bio``). Tasks read ``data``; a
    DisastIR task object given unloaded is copied to read it, never changed. Where ``data`` is a built benchmark's
    folder, its tasks are known by name, and nothing given means all of them.

    Raises:
        KeyError: an unknown task or benchmark name (with the closest valid names).
        ValueError: an unknown split, or a task of another query set than ``split``.
    """
    import mteb

    from disastir_mteb.tasks.retrieval import ALL_TASK_CLASSES, AbsTaskDisastIR

    names_of_built = built_names(data)
    classes = dict(ALL_TASK_CLASSES)
    if names_of_built is not None and data is not None and data.folder is not None:
        from disastir_mteb.tasks.built import read_built

        classes.update(read_built(data.folder).task_classes)

    def built(name: str) -> AbsTask:
        return classes[name](data=data) if name in classes else mteb.get_task(name)

    def given(task: AbsTask) -> AbsTask:
        if data is None or not isinstance(task, AbsTaskDisastIR) or task.data_loaded or task.data == data:
            return task
        if task.data is not None:
            raise InvalidInput(f"Task {task.metadata.name} was built to read {task.data.describe()}, but the run reads "
                               f"{data.describe()}; pass the task by name, or leave the run's data unset.")
        return type(task)(gain=task.gain, data=data)

    named = [tasks] if isinstance(tasks, str) else list(tasks or ())  # read once: ``tasks`` may be a generator
    benchmarks = list(benchmarks or ())
    selected_task_names(named, benchmarks, split=split, built=names_of_built)  # the plugin's own message for ours
    names = canonical_names(named, benchmarks, built=names_of_built)  # any case; others checked by mteb
    wanted = None if split is None else parse_split(split)
    chosen: list[str | AbsTask] = []
    for benchmark in names.benchmarks:
        chosen.extend(names_of_built.tasks if names_of_built is not None and benchmark == names_of_built.name
                      else mteb.get_benchmark(benchmark).tasks)
    chosen.extend(names.tasks)
    if not chosen:
        chosen = list(names_of_built.tasks if names_of_built is not None else SPLIT_TASK_NAMES[wanted or Split.full])
    unique: dict[str, AbsTask] = {}
    for task in chosen:
        name = task if isinstance(task, str) else task.metadata.name
        own = _in_split(name, wanted)
        if own not in unique:
            unique[own] = built(own) if isinstance(task, str) or own != name else given(task)
    return list(unique.values())


def corpus_groups(tasks: Sequence[AbsTask]) -> list[list[AbsTask]]:
    """The tasks grouped by the corpus they search, in first-seen order; the runner encodes once per group."""
    def corpus(task: AbsTask) -> str:
        name = task.metadata.name
        if not is_task_name(name):
            return "other"
        spec = get_spec(name)
        return f"built {spec.built}" if spec.built else "devlite" if spec.split is Split.devlite else "disastir"

    groups: dict[str, list[AbsTask]] = {}
    for task in tasks:
        groups.setdefault(corpus(task), []).append(task)
    if len([key for key in groups if key != "other"]) <= 1:
        return [list(tasks)]  # one DisastIR corpus: the order as given, as before DevLite
    return list(groups.values())

"""Which tasks a run evaluates, grouped by corpus; names in any case, answered before any work."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from disastir_mteb.util.errors import InvalidInput, UnknownName
from disastir_mteb.vocabulary.taxonomy import (
    ALL_TASK_NAMES,
    BENCHMARK_NAMES,
    SPLIT_TASK_NAMES,
    Split,
    benchmark_task_names,
    canonical_benchmark_name,
    canonical_task_name,
    closest_names,
    get_spec,
    parse_split,
    task_name,
)

if TYPE_CHECKING:
    from mteb import AbsTask

    from disastir_mteb.data.source import DataSource

__all__ = ["Names", "canonical_names", "corpus_groups", "resolve_tasks", "selected_task_names"]


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


def _disastir_spelling(tasks: Iterable[str | AbsTask] | str | None, benchmarks: Iterable[str] | None) -> Names:
    """Every DisastIR name in its canonical spelling, from the vocabulary alone; other names as given."""
    return Names(tuple(canonical_task_name(task) if isinstance(task, str) else task for task in _given(tasks)),
                 tuple(canonical_benchmark_name(name) for name in benchmarks or ()))


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
                    benchmarks: Iterable[str] | None = None) -> Names:
    """Task and benchmark names in any case, spelled as mteb knows them.

    Raises:
        KeyError: an unknown task or benchmark name, with the closest known names.
        ValueError: an empty task name.
    """
    spelled = _disastir_spelling(tasks, benchmarks)
    return Names(
        tuple(task if not isinstance(task, str) or task in ALL_TASK_NAMES else _mteb_task(task)
              for task in spelled.tasks),
        tuple(name if name in BENCHMARK_NAMES else _mteb_benchmark(name) for name in spelled.benchmarks))


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


def selected_task_names(tasks: Iterable[str | AbsTask] | str | None = None, benchmarks: Iterable[str] | None = None,
                        *, split: Split | str | None = None) -> list[str] | None:
    """The DisastIR task names a selection resolves to, from the vocabulary alone (nothing imported).

    None where only mteb can tell (another library's name, a task object).

    Raises:
        KeyError: an unknown DisastIR task or benchmark name (with the closest valid names).
        ValueError: an unknown split, an empty task name, or a task of another query set than ``split``.
    """
    wanted = None if split is None else parse_split(split)
    spelled = _disastir_spelling(tasks, benchmarks)
    ours = [name for benchmark in spelled.benchmarks if benchmark in BENCHMARK_NAMES
            for name in benchmark_task_names(benchmark)]
    ours += [task for task in spelled.tasks if isinstance(task, str) and task in ALL_TASK_NAMES]
    names = [_in_split(name, wanted) for name in ours]  # every DisastIR name checked, whatever else is given
    others = [task for task in spelled.tasks if not isinstance(task, str) or task not in ALL_TASK_NAMES]
    if others or any(benchmark not in BENCHMARK_NAMES for benchmark in spelled.benchmarks):
        return None
    return list(dict.fromkeys(names or SPLIT_TASK_NAMES[wanted or Split.full]))


def resolve_tasks(tasks: Iterable[str | AbsTask] | str | None = None,
                  benchmarks: Iterable[str] | None = None, *, split: Split | str | None = None,
                  data: DataSource | None = None) -> list[AbsTask]:
    """Task objects from names, task objects and/or benchmark names; the 48 of ``split`` when nothing is given.

    A ``split`` renames the full set's tasks (``DisastIR-QA-Bio`` -> ``DisastIR-Test-QA-Bio``). Tasks read ``data``; a
    DisastIR task object given unloaded is copied to read it, never changed.

    Raises:
        KeyError: an unknown task or benchmark name (with the closest valid names).
        ValueError: an unknown split, or a task of another query set than ``split``.
    """
    import mteb

    from disastir_mteb.tasks.retrieval import ALL_TASK_CLASSES, AbsTaskDisastIR

    def built(name: str) -> AbsTask:
        return ALL_TASK_CLASSES[name](data=data) if name in ALL_TASK_CLASSES else mteb.get_task(name)

    def given(task: AbsTask) -> AbsTask:
        if data is None or not isinstance(task, AbsTaskDisastIR) or task.data_loaded or task.data == data:
            return task
        if task.data is not None:
            raise InvalidInput(f"Task {task.metadata.name} was built to read {task.data.describe()}, but the run reads "
                               f"{data.describe()}; pass the task by name, or leave the run's data unset.")
        return type(task)(gain=task.gain, data=data)

    named = [tasks] if isinstance(tasks, str) else list(tasks or ())  # read once: ``tasks`` may be a generator
    benchmarks = list(benchmarks or ())
    selected_task_names(named, benchmarks, split=split)  # the plugin's own message for a DisastIR name or split
    names = canonical_names(named, benchmarks)  # any case; other libraries' names checked by mteb, one sentence
    wanted = None if split is None else parse_split(split)
    chosen: list[str | AbsTask] = []
    for benchmark in names.benchmarks:
        chosen.extend(mteb.get_benchmark(benchmark).tasks)
    chosen.extend(names.tasks)
    if not chosen:
        chosen = list(SPLIT_TASK_NAMES[wanted or Split.full])
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
        if name not in ALL_TASK_NAMES:
            return "other"
        return "devlite" if get_spec(name).split is Split.devlite else "disastir"

    groups: dict[str, list[AbsTask]] = {}
    for task in tasks:
        groups.setdefault(corpus(task), []).append(task)
    if len([key for key in groups if key != "other"]) <= 1:
        return [list(tasks)]  # one DisastIR corpus: the order as given, as before DevLite
    return list(groups.values())

"""Which tasks a run evaluates: task names, benchmarks and the query set, grouped by the corpus they search.

:func:`resolve_tasks` turns names, task objects and benchmark names into mteb tasks; a ``split``
(:class:`~disastir_mteb.vocabulary.taxonomy.Split`) turns the full set's DisastIR names into that query
set's (``DisastIR-QA-Bio`` -> ``DisastIR-Test-QA-Bio``). :func:`corpus_groups` orders them so that tasks
searching one corpus run together: the full set's and DisastIR-Test's tasks search DisastIR's corpus,
DisastIR-DevLite's tasks a corpus of their own; the runner encodes, indexes and prefetches once per group.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import (
    ALL_TASK_NAMES,
    SPLIT_TASK_NAMES,
    Split,
    get_spec,
    parse_split,
    task_name,
)

if TYPE_CHECKING:
    from mteb import AbsTask

    from disastir_mteb.data.source import DataSource

__all__ = ["corpus_groups", "resolve_tasks", "selected_task_names"]




def _in_split(name: str, split: Split | None) -> str:
    """``name`` in the query set ``split``: a full-set DisastIR name becomes the split's; other names stay.

    Raises:
        ValueError: ``name`` is a task of another query set than ``split``.
    """
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
    """The DisastIR task names a selection resolves to, from the vocabulary alone: nothing is imported.

    The command line calls it before mteb and torch load, so a misspelled task name, an unknown split or a task
    of another query set than ``--split`` is answered at once, not after seconds (minutes on a loaded machine)
    of imports. :func:`resolve_tasks` raises the same errors for the same selection.

    Returns:
        The names, in order, without repeats; None where only mteb can tell (a benchmark, a task of another
        library or a task object), after every DisastIR name of the selection was checked.

    Raises:
        KeyError: an unknown DisastIR task name (with the closest valid names).
        ValueError: an unknown split, or a task of another query set than ``split``.
    """
    wanted = None if split is None else parse_split(split)
    given = [tasks] if isinstance(tasks, str) else list(tasks or ())
    if any(isinstance(task, str) and not task.strip() for task in given):
        raise InvalidInput("A task name is empty (''): name tasks like DisastIR-QA-Bio (disastir-mteb tasks lists "
                           "the 48), or name none for all of them.")
    names: list[str] = []
    for task in given:
        if isinstance(task, str) and task.startswith("DisastIR-"):
            get_spec(task)  # the plugin's own message for a mistyped DisastIR name
            names.append(_in_split(task, wanted))
    if benchmarks or len(names) < len(given):
        return None
    return list(dict.fromkeys(names or SPLIT_TASK_NAMES[wanted or Split.full]))


def resolve_tasks(tasks: Iterable[str | AbsTask] | str | None = None,
                  benchmarks: Iterable[str] | None = None, *, split: Split | str | None = None,
                  data: DataSource | None = None) -> list[AbsTask]:
    """Task objects from names, task objects and/or benchmark names; the 48 of ``split`` when nothing is given.

    Args:
        tasks: task names or objects; a name of any query set selects that set (``DisastIR-Test-QA-Bio``).
        benchmarks: benchmark names (``DisastIR``, ``DisastIR-QA``, ``DisastIR-Test``, ...).
        split: ``full``, ``test`` or ``devlite``: the tasks' query set. The full set's DisastIR names (given or
            from a benchmark) become that split's (``DisastIR-QA-Bio`` -> ``DisastIR-DevLite-QA-Bio``);
            with no tasks and no benchmarks, the split's 48 tasks. None (default): the names as given, and
            the full set's 48 tasks when none are.
        data: the data every DisastIR task reads (:class:`~disastir_mteb.data.source.DataSource`). Tasks built here
            are given it, and so is a DisastIR task object given without data of its own and not loaded yet (as a
            new task of its class and gain: the caller's object is never changed); a loaded one keeps what it read.
            None: each task reads the folders the environment names when it loads.

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
    selected_task_names(named, split=split)  # the plugin's own message for a mistyped DisastIR name or split
    wanted = None if split is None else parse_split(split)
    chosen: list[str | AbsTask] = []
    for benchmark in benchmarks or ():
        chosen.extend(mteb.get_benchmark(benchmark).tasks)
    chosen.extend(named)
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
    """The tasks grouped by the corpus they search, in first-seen order; one group when they share one.

    DisastIR's corpus serves the full set's and DisastIR-Test's tasks, DevLite's corpus DevLite's; other
    tasks (each with its own corpus, searched task by task) stay in one group of their own.
    """
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

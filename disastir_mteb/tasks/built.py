"""A built benchmark as mteb tasks: a folder ``disastir-mteb build`` wrote, its tasks named after it.

The folder is in DisastIR's published layout and holds only some of the 48 intent x category tasks; its marker names
it (``MyOrg``). Its tasks (``MyOrg-QA-MH``, ...) are made by the one factory of the DisastIR tasks
(:func:`~disastir_mteb.tasks.retrieval.make_task_class`), so they load and score as DisastIR's do; only their names,
metadata and data differ. Classes are made once per folder and marker in a process, and bound into this module.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disastir_mteb.data.layout import MARKER, find_task_files
from disastir_mteb.data.published import Gain
from disastir_mteb.data.source import DataSource
from disastir_mteb.tasks.retrieval import AbsTaskDisastIR, make_task_class
from disastir_mteb.util.digest import short_digest
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.metadata import CITATION
from disastir_mteb.vocabulary.taxonomy import CATEGORY_FULL_NAMES, INTENTS, BuiltNames, TaskSpec

if TYPE_CHECKING:
    from mteb import Benchmark

__all__ = ["BuiltBenchmark", "read_built"]

_lock = threading.Lock()
_read: dict[tuple[Path, str], BuiltBenchmark] = {}


@dataclass(frozen=True, eq=False)
class BuiltBenchmark:
    """A built benchmark read from its folder: its name, its task classes in the paper's order, and its marker.

    ``marker`` holds the builder's provenance (sources, models, prompt versions, seed), which every result carries.
    """

    name: str
    folder: Path
    marker: dict[str, Any]
    task_classes: dict[str, type[AbsTaskDisastIR]]

    @property
    def task_names(self) -> tuple[str, ...]:
        """``MyOrg-QA-MH``, ...: the tasks that have files, in the paper's order (intent-major)."""
        return tuple(self.task_classes)

    @property
    def names(self) -> BuiltNames:
        """Its name and its tasks' names, to resolve names in any case."""
        return BuiltNames(self.name, self.task_names)

    def get_tasks(self, *, data: DataSource | None = None, gain: Gain | None = None) -> list[AbsTaskDisastIR]:
        """Instances of all its tasks, reading ``data`` (None: its own folder)."""
        return [cls(gain=gain, data=data) for cls in self.task_classes.values()]

    @cached_property
    def benchmark(self) -> Benchmark:
        """The mteb ``Benchmark`` named after it, grouped by intent and by category as DisastIR's is."""
        from mteb import Benchmark
        from mteb.benchmarks.benchmark import BenchmarkAggregation, CustomGroup, CustomGrouping

        tasks = tuple(self.get_tasks())
        by_intent = CustomGrouping(name="Intent", groups=tuple(
            CustomGroup(label=intent.value, tasks=chosen) for intent in INTENTS
            if (chosen := tuple(t for t in tasks if t.spec.intent is intent))))
        by_category = CustomGrouping(name="Category", groups=tuple(
            CustomGroup(label=full, tasks=chosen) for category, full in CATEGORY_FULL_NAMES.items()
            if (chosen := tuple(t for t in tasks if t.spec.category is category))))
        return Benchmark(
            name=self.name,
            display_name=f"{self.name} (built benchmark)",
            tasks=tasks,
            description=(f"{self.name}: a built benchmark, not DisastIR: {len(tasks)} retrieval tasks over one shared "
                         "corpus made from an organisation's documents by disastir-mteb build, scored as DisastIR "
                         "scores (exponential-gain NDCG@10, the per-intent instructions)."),
            reference=None,
            citation=CITATION,
            aggregations=(BenchmarkAggregation.MEAN_TASK, by_intent, by_category),
        )


def read_built(folder: str | Path) -> BuiltBenchmark:
    """The built benchmark in ``folder``: read once per process while its marker is unchanged.

    Raises:
        FileNotFoundError: ``folder`` is no folder in the published layout, or holds no task files.
        ValueError: its marker does not say it is a built benchmark, or names it badly (one sentence each).
    """
    root = Path(folder).expanduser().resolve()
    marker_path = root / MARKER
    marker_bytes = marker_path.read_bytes() if marker_path.is_file() else b""
    key = (root, short_digest(marker_bytes))
    with _lock:
        if key in _read:
            return _read[key]
        files = find_task_files(root)
        if files.built is None:
            raise InvalidInput(f"{root} is no built benchmark: its {MARKER} does not say \"kind\": \"built\" with a "
                               "name (disastir-mteb build writes one); a DisastIR folder is read with --data alone.")
        classes = {spec.name: _task_class(spec, root, key[1]) for spec in files.built_specs}
        built = BuiltBenchmark(name=files.built, folder=root, marker=json.loads(marker_bytes), task_classes=classes)
        _read[key] = built
        return built


def _task_class(spec: TaskSpec, folder: Path, revision: str) -> type[AbsTaskDisastIR]:
    """One built task's class, bound into this module's globals (``repr``, pickling) under its class name."""
    cls = make_task_class(spec, folder=folder, revision=revision, module=__name__)
    globals()[cls.__name__] = cls
    return cls

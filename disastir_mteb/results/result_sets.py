"""Finding and reading DisastIR result sets in mteb's results layout.

A result set is one folder of mteb task files for one model setting and one query set: mteb files every task of a
setting in one folder, so ``DisastIR-QA-Bio.json``, ``DisastIR-Test-QA-Bio.json`` and
``DisastIR-DevLite-QA-Bio.json`` side by side are three sets. Scores are keyed by the full set's task names
whatever the query set, so grids, means and comparisons work alike. Every set is read through
:func:`load_result_set`, which believes a set only when its files agree with themselves, with each other and with
their data: what ``report``, ``compare``, the leaderboard and ``submit`` show has passed these checks. A built
benchmark's files (``MyOrg-QA-MH.json``) are a set of their own beside them, keyed alike (``DisastIR-QA-MH``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disastir_mteb.results.describe import describe_search, describe_setting
from disastir_mteb.results.grid import ScoreGrid
from disastir_mteb.results.metrics import MAIN_METRIC, Metric, get_metric, missing_metric
from disastir_mteb.results.per_query import PerQuery, per_query_file, read_per_query
from disastir_mteb.results.rescoring import Evidence, rescorable, rescore
from disastir_mteb.results.score_checks import (
    file_problem,
    read_task_file,
    read_task_record,
    refuse_contradictions,
    task_record_of,
)
from disastir_mteb.results.set_provenance import pair_problem, provenance_problem, recorded
from disastir_mteb.util.errors import InvalidInput, MissingInput
from disastir_mteb.vocabulary.ann_params import ANN_PREFIX
from disastir_mteb.vocabulary.settings import EXACT, SEARCH_KEY
from disastir_mteb.vocabulary.task_record import DATA_KEY, is_synthetic
from disastir_mteb.vocabulary.taxonomy import (
    SPLITS,
    Split,
    TaskSpec,
    benchmark_name,
    get_spec,
    is_task_name,
    parse_split,
    task_name,
)

__all__ = ["QuerySet", "ResultSet", "collect_result_sets", "describe_search", "describe_setting", "find_result_sets",
           "load_result_set", "load_result_sets", "model_folder_name", "not_rescored", "resolve_result_set"]

#: Which task files a folder is searched for: DisastIR's and built benchmarks' (``MyOrg-QA-MH.json``).
_TASK_FILES = "*-*-*.json"
#: One query set of a folder: its split, and the built benchmark's name (None for DisastIR's).
QuerySet = tuple[Split, str | None]
_ANY = object()


def _task_files(paths: object, split: Split | None = None, built: object = _ANY) -> list[Path]:
    """Only files named exactly after a task of ``split`` (of any for None), not ``<Task>_predictions.json``.

    ``built``: only a built benchmark's of that name (None: only DisastIR's; unset: any).
    """
    return sorted(path for path in paths if is_task_name(path.stem)  # type: ignore[attr-defined]
                  and (split is None or get_spec(path.stem).split is split)
                  and (built is _ANY or get_spec(path.stem).built == built))


@dataclass
class ResultSet:
    """The DisastIR results of one model setting on one query set (``split``).

    ``scores`` maps the full set's task name (``DisastIR-QA-Bio``) to the main score, NDCG@10, also for a Test or
    DevLite set (:meth:`file_task` maps back). ``unchecked`` is one line naming the per-query files not re-scored
    against their data, and why; ``rescored`` and ``rescored_metrics`` say which tasks and metrics were.
    """

    folder: Path
    model: str
    revision: str
    experiment: dict[str, Any]
    scores: dict[str, float]
    split: Split = Split.full
    #: The built benchmark whose files the set holds (``MyOrg``), or None for DisastIR's.
    built: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, repr=False)
    unchecked: str | None = field(default=None, repr=False)
    rescored: tuple[str, ...] = field(default=(), repr=False)
    rescored_metrics: frozenset[str] = field(default=frozenset(), repr=False)
    _per_query: dict[str, PerQuery] = field(default_factory=dict, repr=False)
    _records: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def search(self) -> str:
        """``exact``, or the ANN label (``ann-hnsw-ip-f32-M16-...``) of an ANN run."""
        return str(self.experiment.get(SEARCH_KEY, EXACT))

    @property
    def is_ann(self) -> bool:
        """Whether the set was searched approximately."""
        return self.search.startswith(ANN_PREFIX)

    @property
    def benchmark(self) -> str:
        """The query set's benchmark name: ``DisastIR``, ``DisastIR-Test``, ``DisastIR-DevLite`` or a built one's."""
        return self.built if self.built is not None else benchmark_name(self.split)

    @property
    def is_disastir(self) -> bool:
        """Whether the set is of DisastIR's own full set (not Test, DevLite or a built benchmark)."""
        return self.split is Split.full and self.built is None

    @property
    def query_set(self) -> QuerySet:
        """The set's split and built benchmark name: what sets must share to be compared task by task."""
        return self.split, self.built

    @property
    def label(self) -> str:
        """The model with its raw settings and query set, unique per set: ``org/model (disastir_search=ann-...)``."""
        settings = ", ".join(f"{k}={v}" for k, v in sorted(self.experiment.items()))
        label = f"{self.model} ({settings})" if settings else self.model
        return label if self.is_disastir else f"{label} [{self.benchmark}]"

    @property
    def setting(self) -> str:
        """The readable setting, e.g. ``exact``, ``ANN (HNSW M=16, ef=64)`` or ``DisastIR-Test; exact``."""
        setting = describe_setting(self.experiment)
        return setting if self.is_disastir else f"{self.benchmark}; {setting}"

    @property
    def display_label(self) -> str:
        """The model with its readable setting, e.g. ``org/model — ANN (HNSW M=16, ef=64)``."""
        return f"{self.model} — {self.setting}"

    def file_task(self, task: str) -> str:
        """The set's own name of a :attr:`scores` key, its file's stem: ``DisastIR-Test-QA-Bio`` in a Test set."""
        if self.is_disastir or not is_task_name(task):
            return task
        spec = get_spec(task)
        if self.built is not None:
            return TaskSpec(spec.intent, spec.category, built=self.built).name
        return task_name(spec.intent, spec.category, self.split)

    @property
    def file_scores(self) -> dict[str, float]:
        """:attr:`scores` under the set's own task names (``DisastIR-Test-QA-Bio``), as mteb files and lists them."""
        return {self.file_task(task): score for task, score in self.scores.items()}

    def _readable_per_query(self, task: str) -> PerQuery | None:
        if not self.has_per_query(task):
            return None
        try:
            return self.per_query(task)
        except ValueError:  # a damaged per-query file: the report still goes out, making no claim
            return None

    def task_data(self, task: str) -> dict[str, Any] | None:
        """The data record of one task's per-query file; None without a file, a record, or a readable file."""
        record = self._readable_per_query(task)
        return dict(record.data) if record is not None and record.data is not None else None

    def task_encoding(self, task: str) -> dict[str, Any] | None:
        """How one task's vectors were computed (its per-query file's ``encoding``: ``model_dtype``, ...); else None."""
        record = self._readable_per_query(task)
        return dict(record.encoding) if record is not None and record.encoding is not None else None

    @property
    def data_sources(self) -> list[dict[str, Any]]:
        """The distinct data records of the set's per-query files."""
        found: list[dict[str, Any]] = []
        for task in sorted(self.scores):
            data = self.task_data(task)
            if data is not None and data not in found:
                found.append(data)
        return found

    def task_record(self, task: str) -> dict[str, Any]:
        """A task file's score block (``scores["test"][0]``) with its ``dataset_revision``; {} if unreadable."""
        if task not in self._records:
            try:
                self._records[task] = read_task_record(self.folder / f"{self.file_task(task)}.json")
            except (OSError, ValueError):
                self._records[task] = {}
        return self._records[task]

    def task_synthetic(self, task: str) -> bool | None:
        """Whether ``task`` ran on generated data, by its task file or per-query record; None when neither says."""
        data = self.task_record(task).get(DATA_KEY)
        record = self.task_data(task)
        said = [is_synthetic(data)] if isinstance(data, str) else []
        said += [bool(record.get("synthetic"))] if record is not None else []
        return any(said) if said else None

    @property
    def synthetic(self) -> bool | None:
        """True if any task ran on generated data, False if every task is recorded as real data, else None."""
        said = [self.task_synthetic(task) for task in sorted(self.scores)]
        if any(said):
            return True
        return False if said and all(value is not None for value in said) else None

    @property
    def grid(self) -> ScoreGrid:
        """The 6 x 8 grid of the set's main scores (NDCG@10)."""
        return ScoreGrid(self.scores, tasks=self._grid_tasks)

    def scores_of(self, metric: str | Metric = MAIN_METRIC) -> dict[str, float]:
        """One metric's value per task, keyed like :attr:`scores` (``recall_at_100`` -> 0.41, a fraction).

        Raises:
            ValueError: not a metric a report can show, or a task file lacks it.
        """
        metric = get_metric(metric)
        if metric.is_main:
            return dict(self.scores)
        found: dict[str, float] = {}
        for task in self.scores:
            record = self.task_record(task)
            value = record.get(metric.key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidInput(missing_metric(metric, self.folder / f"{self.file_task(task)}.json", record))
            found[task] = float(value)
        return found

    def grid_of(self, metric: str | Metric = MAIN_METRIC) -> ScoreGrid:
        """The 6 x 8 grid of one metric (:meth:`scores_of`); :attr:`grid` for the main score.

        Raises:
            ValueError: as :meth:`scores_of`.
        """
        return ScoreGrid(self.scores_of(metric), tasks=self._grid_tasks)

    @property
    def _grid_tasks(self) -> frozenset[str] | None:
        """The tasks a grid of the set is of: a built benchmark's are those the set holds; None: DisastIR's 48."""
        return None if self.built is None else frozenset(self.scores)

    @property
    def task_count(self) -> int:
        """How many tasks the set's benchmark has: 48 for DisastIR's, those the set holds for a built one's."""
        return self.grid.task_count

    def has_per_query(self, task: str) -> bool:
        """Whether per-query scores were saved for ``task``."""
        return task in self._per_query or per_query_file(self.folder, self.file_task(task)).is_file()

    def per_query(self, task: str) -> PerQuery:
        """The task's per-query scores and rankings (read once).

        Raises:
            FileNotFoundError: the set has none for ``task`` (e.g. written by plain ``mteb run``).
        """
        if task not in self._per_query:
            self._per_query[task] = read_per_query(per_query_file(self.folder, self.file_task(task)))
        return self._per_query[task]


def not_rescored(shown: Sequence[tuple[ResultSet, Collection[str]]], metric: str | Metric = MAIN_METRIC) -> str | None:
    """The line a report or comparison prints where ``metric`` is shown from task files it did not re-score, or None.

    ``shown`` holds each set shown with the tasks of it shown.
    """
    metric = get_metric(metric)
    if not rescorable(metric):
        return (f"{metric.key}: taken from the task files, not re-scored (a top 10 cannot give it: {metric.name} reads "
                f"down to rank {metric.cutoff}, and the per-query files keep each query's top 10).")
    tasks = {id(result): (result, set()) for result, _ in shown}
    for result, names in shown:
        tasks[id(result)][1].update(names)
    why: dict[str, int] = {}
    total = 0
    for result, names in tasks.values():
        for task in names:
            total += 1
            file = result.file_task(task)
            if file in result.rescored and metric.key in result.rescored_metrics:
                continue
            reason = ("without a per-query file, which plain mteb run does not write" if not result.has_per_query(task)
                      else "whose data is not at hand, as said on stderr" if file not in result.rescored
                      else "whose re-scoring does not give it")
            why[reason] = why.get(reason, 0) + 1
    if not why:
        return None
    across = f" of {len(tasks)} result sets" if len(tasks) > 1 else ""
    parts = "; ".join(f"{count} {reason}" for reason, count in why.items())
    return (f"{metric.key}: taken from the task files, not re-scored for {sum(why.values())} of {total} "
            f"task{'s' if total != 1 else ''}{across}: {parts}.")


def _splits_in(folder: Path) -> list[Split]:
    """The splits of the DisastIR task files directly in ``folder``, in :data:`SPLITS` order."""
    return [split for split, built in _query_sets_in(folder) if built is None]


def _query_sets_in(folder: Path) -> list[QuerySet]:
    """The query sets of the task files directly in ``folder``: DisastIR's in :data:`SPLITS` order, then built ones."""
    specs = [get_spec(path.stem) for path in _task_files(folder.glob(_TASK_FILES))]
    found = {(spec.split, spec.built) for spec in specs}
    return ([(split, None) for split in SPLITS if (split, None) in found]
            + sorted((key for key in found if key[1] is not None), key=lambda key: str(key[1])))


def model_folder_name(name: str) -> str:
    """A model's folder name in mteb's results layout: ``ModelMeta.model_name_as_path()`` (``org/m`` -> ``org__m``)."""
    return name.replace("/", "__").replace(" ", "_")


def _read_meta(path: Path) -> dict[str, Any]:
    """A result set's ``model_meta.json`` ({} without one); a damaged one is refused, naming it."""
    if not path.is_file():
        return {}
    fix = "restore it, or rerun the model with --overwrite (mteb writes it with every run)"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError alike
        raise InvalidInput(f"{path} is damaged: it is not valid JSON ({error}); {fix}.") from None
    if not isinstance(meta, dict):
        raise InvalidInput(f"{path} is damaged: it holds a JSON {type(meta).__name__}, not the object mteb writes; "
                           f"{fix}.")
    return meta


def _misfiled(revision_folder: Path, meta: dict[str, Any], meta_path: Path) -> str | None:
    """Where a set in mteb's layout is not filed where its ``model_meta.json`` says; None outside that layout.

    A set moved, or given another's ``model_meta.json``, would be shown and submitted as a run it is not.
    """
    if revision_folder.parent.parent.name != "results":
        return None
    name, revision = meta.get("name"), meta.get("revision")
    fix = "move the folder back or restore the file"
    if isinstance(name, str) and revision_folder.parent.name != model_folder_name(name):
        return (f"{meta_path} names the model {name!r}, but the set is filed under the model folder "
                f"{revision_folder.parent.name!r}, not {model_folder_name(name)!r} where mteb files that model's runs; "
                f"{fix}.")
    if isinstance(revision, str) and revision_folder.name not in (revision, "external"):
        return (f"{meta_path} names the revision {revision!r}, but the set is filed under the revision folder "
                f"{revision_folder.name!r} (mteb files a run under its model's revision); {fix}.")
    return None


def load_result_set(folder: str | Path, *, split: Split | str = Split.full, built: str | None = None) -> ResultSet:
    """Read one query set's task files and the model metadata of one result-set folder, checked.

    ``built`` names a built benchmark whose files to read (``MyOrg-QA-MH.json``), in place of DisastIR's.

    Each file is checked against itself (:mod:`~disastir_mteb.results.score_checks`), the files against each other
    and ``model_meta.json`` (:mod:`~disastir_mteb.results.set_provenance`), and the top 10s against their data
    where it is at hand (:mod:`~disastir_mteb.results.rescoring`).

    Raises:
        FileNotFoundError: the folder holds no task file of ``split`` (the message names the splits it holds).
        ValueError: a file contradicts itself, the set's other files, ``model_meta.json`` or its data; or ``split``
            is not a split. One sentence, naming the file.
    """
    folder, split = Path(folder), parse_split(split)
    files = _task_files(folder.glob(_TASK_FILES), split, built)
    if not files and built is not None:
        raise MissingInput(f"{folder} holds no result files of the built benchmark {built} ({built}-*.json).")
    if not files:
        held = _splits_in(folder)
        hint = (f"; it holds {', '.join(benchmark_name(s) for s in held)} files (split="
                f"{' or '.join(repr(s.value) for s in held)}, or load_result_sets for all)") if held else ""
        pattern = "DisastIR-*.json" if split is Split.full else f"{benchmark_name(split)}-*.json"
        raise MissingInput(f"{folder} holds no DisastIR result files ({pattern}){hint}.")
    meta_path = folder / "model_meta.json"
    meta = _read_meta(meta_path)
    revision_folder = folder.parent.parent if folder.parent.name == "experiments" else folder
    if misfiled := _misfiled(revision_folder, meta, meta_path):
        raise InvalidInput(misfiled)
    model = str(meta.get("name") or revision_folder.parent.name.replace("__", "/"))
    contents = {path: read_task_file(path) for path in files}
    beside = {path: per_query_file(folder, path.stem) for path in files}
    per_query = {path: (beside[path], kept) for path in files if (kept := _per_query_at(beside[path])) is not None}
    refuse_contradictions([(path, problem) for path in files if (problem := file_problem(
        path, contents[path], per_query=per_query.get(path, (None, None))[1],
        per_query_path=beside[path]))], model=model)  # what report, compare, the leaderboard and submit read
    records = {path: task_record_of(path, contents[path]) for path in files}
    refuse_contradictions([(path, problem) for path, (where, found) in per_query.items()
                           if (problem := pair_problem(path, records[path], found, where))], model=model)
    experiment = dict(meta.get("experiment_kwargs") or {})
    if mixed := provenance_problem({path: recorded(path, records[path], per_query.get(path, (None, None))[1])
                                    for path in files}, experiment=experiment, meta_path=meta_path, model=model):
        raise InvalidInput(mixed)  # one set, one provenance: a file of another run is never shown as this one's
    rescoring = rescore([Evidence(path, records[path], *per_query[path]) for path in files if path in per_query])
    refuse_contradictions(rescoring.problems, model=model)
    task = {path: get_spec(path.stem).base.name for path in files}  # scores are keyed by the full set's names
    return ResultSet(folder=folder, model=model, revision=revision_folder.name, experiment=experiment,
                     scores={task[path]: record["main_score"] for path, record in records.items()}, split=split,
                     built=built, meta=meta, unchecked=rescoring.note(folder),
                     rescored=tuple(path.stem for path in rescoring.rescored), rescored_metrics=rescoring.metrics,
                     _records={task[path]: record for path, record in records.items()},
                     _per_query={task[path]: found for path, (_, found) in per_query.items()})


def _per_query_at(path: Path) -> PerQuery | None:
    """The per-query record at ``path``; None when there is none or it cannot be read (no claim then)."""
    try:
        return read_per_query(path) if path.is_file() else None
    except ValueError:
        return None


def load_result_sets(folder: str | Path) -> list[ResultSet]:
    """Every result set of one folder: one per query set whose task files it holds (full, Test, DevLite, built).

    Raises:
        FileNotFoundError: the folder holds no DisastIR or built benchmark task file.
        ValueError: a task file is not an mteb result.
    """
    folder = Path(folder)
    query_sets = _query_sets_in(folder)
    if not query_sets:
        raise MissingInput(f"{folder} holds no DisastIR result files (DisastIR-*.json).")
    return [load_result_set(folder, split=split, built=built) for split, built in query_sets]


def find_result_sets(path: str | Path, *, split: Split | str | None = Split.full) -> list[Path]:
    """Every result-set folder at or under ``path`` holding task files of ``split`` (None: of any).

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    path = Path(path)
    if not path.exists():
        raise MissingInput(f"No results at {path}: the folder does not exist.")
    if path.is_file():
        path = path.parent
    wanted = None if split is None else parse_split(split)
    folders = {file.parent for file in _task_files(path.rglob(_TASK_FILES), wanted)}
    return sorted(folders)


def collect_result_sets(path: str | Path) -> list[ResultSet]:
    """Every result set at or under ``path``: one per (folder, query set), by folder, then full, Test, DevLite.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a task file is not an mteb result.
    """
    return [result for folder in find_result_sets(path, split=None) for result in load_result_sets(folder)]


def resolve_result_set(path: str | Path, *, split: Split | str | None = Split.full) -> ResultSet:
    """The one result set of ``split`` (None: of any) at or under ``path``.

    Raises:
        FileNotFoundError: no result set there.
        ValueError: several result sets there (they are listed, to pick one).
    """
    wanted = None if split is None else parse_split(split)
    sets = collect_result_sets(path) if wanted is None else [
        load_result_set(folder, split=wanted, built=built) for folder in find_result_sets(path, split=wanted)
        for query_split, built in _query_sets_in(folder) if query_split is wanted]
    if not sets:
        which = "" if wanted in (None, Split.full) else f" of {benchmark_name(wanted)}"
        raise MissingInput(f"{path} holds no DisastIR result files{which} (DisastIR-*.json).")
    if len(sets) > 1:
        listed = "; ".join(f"{result.folder} [{result.search}"
                           f"{'' if result.is_disastir else ', ' + result.benchmark}]" for result in sets)
        raise InvalidInput(f"{path} holds {len(sets)} result sets; pass one of them: {listed}.")
    return sets[0]

"""Finding and reading DisastIR result sets in mteb's results layout.

A result set is one folder of mteb task files for one model setting:
``<output>/results/<org>__<model>/<revision>/`` for a plain run, or
``.../<revision>/experiments/<name>/`` for a run with experiment settings (instructions, ANN). Each
holds ``<Task>.json`` files and ``model_meta.json``; sets written by ``disastir-mteb run`` also hold
``disastir_per_query/`` (see :mod:`disastir_mteb.results.per_query`). Reports and comparisons accept any
folder and resolve it to the result sets beneath it.

Query sets: mteb files every task of a model setting in one folder, so one folder may hold
``DisastIR-QA-Bio.json`` (full), ``DisastIR-Test-QA-Bio.json`` and ``DisastIR-DevLite-QA-Bio.json`` side by
side: three result sets, one per :class:`~disastir_mteb.vocabulary.taxonomy.Split`. :attr:`ResultSet.scores`
are keyed by the full set's task names whatever the split (grids, means, comparisons and plots work alike),
:attr:`ResultSet.split` says which queries they were computed on, :meth:`ResultSet.file_task` gives a task's
own name (:attr:`ResultSet.file_scores`: the scores under those). Labels people read name the split.

Reading: :func:`load_result_set` and :func:`find_result_sets` read the full set unless given another
``split`` (what they always did, so their callers see no Test or DevLite set by accident);
:func:`load_result_sets` gives every set of one folder, :func:`collect_result_sets` every set under a path.
Every set is read through :func:`load_result_set`, which believes a set only when its files agree with themselves:
a damaged ``model_meta.json``, or one naming another model or revision than the folders the set is filed under, a
task file holding another task's results, other splits or subsets, or an impossible score, a per-query file
contradicting its task file (:mod:`~disastir_mteb.results.score_checks`) or its data
(:mod:`~disastir_mteb.results.rescoring`: every metric a top 10 gives), and a file of another run than its siblings
(another model, setting, data or gain: :mod:`~disastir_mteb.results.set_provenance`) are refused in one sentence:
what ``report``, ``compare``, the leaderboard and ``submit`` show has passed these checks.

Metrics: :attr:`ResultSet.scores` are the main score, NDCG@10; :meth:`ResultSet.scores_of` and
:meth:`ResultSet.grid_of` give any metric the task files hold (``recall_at_100``, ``map_at_10``:
:mod:`~disastir_mteb.results.metrics`), and name the file and the metrics it holds when one lacks it;
:func:`not_rescored` is the line saying which of them were taken from the task files without being re-scored.

Labels: :attr:`ResultSet.setting` is readable ("ANN (HNSW M=16, ef=64)", :mod:`disastir_mteb.results.describe`,
whose :func:`describe_setting` and :func:`describe_search` this module re-exports); the raw values stay in
:attr:`ResultSet.label` and in the files' metadata.
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
    ALL_TASK_NAMES,
    SPLITS,
    Split,
    benchmark_name,
    get_spec,
    parse_split,
    task_name,
)

__all__ = ["ResultSet", "collect_result_sets", "describe_search", "describe_setting", "find_result_sets",
           "load_result_set", "load_result_sets", "model_folder_name", "not_rescored", "resolve_result_set"]

def _task_files(paths: object, split: Split | None = None) -> list[Path]:
    """Only files named exactly after a DisastIR task of ``split`` (of any split for None).

    Not ``<Task>_predictions.json`` and the like.
    """
    return sorted(path for path in paths if path.stem in ALL_TASK_NAMES  # type: ignore[attr-defined]
                  and (split is None or get_spec(path.stem).split is split))


@dataclass
class ResultSet:
    """The DisastIR results of one model setting.

    Attributes:
        folder: the folder holding the task files.
        model: the model name (``model_meta.json``, else the folder names).
        revision: the model revision folder name.
        experiment: mteb experiment settings (instructions, ``disastir_search``), empty for a plain run.
        scores: task name of the full set (``DisastIR-QA-Bio``) -> main score (NDCG@10, fraction). A Test or
            DevLite set files its tasks' scores (``DisastIR-Test-QA-Bio.json``) under the same names, so that
            grids, means, comparisons and plots treat every split alike; :meth:`file_task` maps back. Another
            metric's scores, keyed alike: :meth:`scores_of`.
        split: the query set the scores were computed on (full, DisastIR-Test or DisastIR-DevLite).
        meta: the folder's ``model_meta.json`` as read (empty without one).
        unchecked: one line naming the per-query files whose top 10s were not re-scored against their data, and
            why (the data is the Hub's, or not on this machine: :mod:`~disastir_mteb.results.rescoring`); None when
            every per-query file was, or the set has none.
        rescored: the tasks (the set's own names) whose per-query top 10s were re-scored against their data, and agree.
        rescored_metrics: the metrics (mteb's keys) of those tasks' files that were re-scored, all that a top 10 gives
            (:func:`~disastir_mteb.results.rescoring.rescorable`); :func:`not_rescored` says what was not.
    """

    folder: Path
    model: str
    revision: str
    experiment: dict[str, Any]
    scores: dict[str, float]
    split: Split = Split.full
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
        """The query set's benchmark name: ``DisastIR``, ``DisastIR-Test`` or ``DisastIR-DevLite``."""
        return benchmark_name(self.split)

    @property
    def label(self) -> str:
        """The model name with its raw experiment settings, e.g. ``org/model (disastir_search=ann-...)``.

        Unique per setting and query set (it keys comparisons and error messages): a Test or DevLite set
        ends in ``[DisastIR-Test]``; for people, :attr:`display_label`.
        """
        settings = ", ".join(f"{k}={v}" for k, v in sorted(self.experiment.items()))
        label = f"{self.model} ({settings})" if settings else self.model
        return label if self.split is Split.full else f"{label} [{self.benchmark}]"

    @property
    def setting(self) -> str:
        """The readable setting (:func:`describe_setting`), e.g. ``exact`` or ``ANN (HNSW M=16, ef=64)``.

        A Test or DevLite set names its query set first: ``DisastIR-Test; exact``.
        """
        setting = describe_setting(self.experiment)
        return setting if self.split is Split.full else f"{self.benchmark}; {setting}"

    @property
    def display_label(self) -> str:
        """The model with its readable setting, e.g. ``org/model — ANN (HNSW M=16, ef=64)``."""
        return f"{self.model} — {self.setting}"

    def file_task(self, task: str) -> str:
        """The set's own name of ``task`` (a full-set name such as a :attr:`scores` key): its file's stem.

        ``DisastIR-QA-Bio`` in a Test set is ``DisastIR-Test-QA-Bio``; in a full set, and for a name that is no
        DisastIR task, the name itself.
        """
        if self.split is Split.full or task not in ALL_TASK_NAMES:
            return task
        spec = get_spec(task)
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
        """The distinct data records (:func:`~disastir_mteb.results.per_query.data_provenance`) of the set's tasks.

        Read from the per-query files; tasks without one, or whose file predates the record, add nothing.
        """
        found: list[dict[str, Any]] = []
        for task in sorted(self.scores):
            data = self.task_data(task)
            if data is not None and data not in found:
                found.append(data)
        return found

    def task_record(self, task: str) -> dict[str, Any]:
        """A task file's score block (``scores["test"][0]``) with its ``dataset_revision``; {} without a readable file.

        Besides the scores the block holds what the task records about itself (``disastir_version``,
        ``disastir_gain``, ``disastir_data``: :mod:`disastir_mteb.vocabulary.task_record`), in files written since.
        """
        if task not in self._records:
            try:
                self._records[task] = read_task_record(self.folder / f"{self.file_task(task)}.json")
            except (OSError, ValueError):
                self._records[task] = {}
        return self._records[task]

    def task_synthetic(self, task: str) -> bool | None:
        """Whether ``task`` ran on generated data, by its task file's ``disastir_data`` or its per-query record.

        None when neither says (plain ``mteb run`` before the record, older runs): no claim either way.
        """
        data = self.task_record(task).get(DATA_KEY)
        record = self.task_data(task)
        said = [is_synthetic(data)] if isinstance(data, str) else []
        said += [bool(record.get("synthetic"))] if record is not None else []
        return any(said) if said else None

    @property
    def synthetic(self) -> bool | None:
        """True if any task ran on generated data, False if every task is recorded as real data, else None.

        None (unknown) when some task records nothing (task files from before the record, without
        per-query files): no claim either way.
        """
        said = [self.task_synthetic(task) for task in sorted(self.scores)]
        if any(said):
            return True
        return False if said and all(value is not None for value in said) else None

    @property
    def grid(self) -> ScoreGrid:
        """The 6 x 8 grid of the set's main scores (NDCG@10)."""
        return ScoreGrid(self.scores)

    def scores_of(self, metric: str | Metric = MAIN_METRIC) -> dict[str, float]:
        """One metric's value per task, keyed like :attr:`scores` (``recall_at_100`` -> 0.41, a fraction).

        The main score is :attr:`scores` itself (its files' ``main_score``, checked equal to ``ndcg_at_10``); any
        other metric is read from each task file's score block (:meth:`task_record`), as mteb wrote it.

        Args:
            metric: mteb's key of the metric (``recall_at_100``), or a :class:`~disastir_mteb.results.metrics.Metric`.

        Raises:
            ValueError: not a metric a report can show, or a task file lacks it (the sentence names the metric, the
                file and the metrics the file holds).
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
        return ScoreGrid(self.scores_of(metric))

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
    """The line a report or a comparison prints where ``metric`` is shown from task files it did not re-score, or None.

    A metric a top 10 cannot give (:func:`~disastir_mteb.results.rescoring.rescorable`: ``recall_at_100``) is never
    re-scored; one it can give is, for every task whose per-query file was re-scored against its data
    (:attr:`ResultSet.rescored`), and the line counts the others: without a per-query file (plain ``mteb run``), or
    with one whose data is not at hand (why: :attr:`ResultSet.unchecked`, on stderr).

    Args:
        shown: each set shown, with the tasks of it shown (names as :attr:`ResultSet.scores` keys them).
        metric: the metric shown (mteb's key), NDCG@10 by default.

    Examples:
        ``recall_at_100: taken from the task files, not re-scored (a top 10 cannot give it: Recall@100 reads down to
        rank 100, and the per-query files keep each query's top 10).``
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
    found = {get_spec(path.stem).split for path in _task_files(folder.glob("DisastIR-*.json"))}
    return [split for split in SPLITS if split in found]


def model_folder_name(name: str) -> str:
    """A model's folder name in mteb's results layout: ``ModelMeta.model_name_as_path()`` (``org/m`` -> ``org__m``)."""
    return name.replace("/", "__").replace(" ", "_")


def _read_meta(path: Path) -> dict[str, Any]:
    """A result set's ``model_meta.json`` ({} without one).

    Raises:
        ValueError: the file is damaged (not JSON, or not an object); the sentence names it.
    """
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
    """Where a set in mteb's layout (``.../results/<model>/<revision>/``) is not where its ``model_meta.json`` says.

    mteb files a run under its model's name and revision (``ResultCache.get_task_result_path``); a set moved, or
    given another's ``model_meta.json``, would be shown and submitted as a run it is not. Sets outside that layout
    (a folder of task files anywhere) make no claim; neither does the results repository's ``external`` folder.
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


def load_result_set(folder: str | Path, *, split: Split | str = Split.full) -> ResultSet:
    """Read the DisastIR task files of one query set and the model metadata of one result-set folder, checked.

    Every file is checked against itself before anything is returned (:mod:`~disastir_mteb.results.score_checks`:
    name, splits, ranges, the per-query file beside it), the files against each other and the set's
    ``model_meta.json`` (:mod:`~disastir_mteb.results.set_provenance`: one model, setting, data and gain), and each
    per-query file's top 10s are re-scored against their data where it is at hand, every metric they give
    (:mod:`~disastir_mteb.results.rescoring`); :attr:`ResultSet.unchecked` says in one line which were not, and why.

    Args:
        folder: the folder holding the task files.
        split: which query set's files to read: ``full`` (default, ``DisastIR-QA-Bio.json`` ...), ``test``
            or ``devlite``; the folder's other files are left alone (:func:`load_result_sets` reads all).

    Raises:
        FileNotFoundError: the folder holds no task file of ``split`` (the message names the splits it holds).
        ValueError: ``model_meta.json`` is damaged or names another model or revision than the folders; a task file
            is not an mteb result, holds another task's results, other splits or subsets, or an impossible score
            (out of range, not finite, or unlike its per-query file), or its per-query file contradicts it or its
            data (any metric its top 10s give); a file records another model, setting, data or gain than the set's
            other files or its ``model_meta.json``; or ``split`` is not a split. One sentence, naming the file.
    """
    folder, split = Path(folder), parse_split(split)
    files = _task_files(folder.glob("DisastIR-*.json"), split)
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
                     meta=meta, unchecked=rescoring.note(folder),
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
    """Every result set of one folder: one per query set whose task files it holds (full, Test, DevLite order).

    Raises:
        FileNotFoundError: the folder holds no DisastIR task file.
        ValueError: a task file is not an mteb result.
    """
    folder = Path(folder)
    splits = _splits_in(folder)
    if not splits:
        raise MissingInput(f"{folder} holds no DisastIR result files (DisastIR-*.json).")
    return [load_result_set(folder, split=split) for split in splits]


def find_result_sets(path: str | Path, *, split: Split | str | None = Split.full) -> list[Path]:
    """Every result-set folder at or under ``path`` (folders directly holding DisastIR task files).

    Args:
        path: a folder at any level (mteb output, model, revision, result set) or a file in one.
        split: only folders holding task files of this query set (default: the full set, as before query
            sets existed); None: of any (each folder once, whatever it holds).

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    path = Path(path)
    if not path.exists():
        raise MissingInput(f"No results at {path}: the folder does not exist.")
    if path.is_file():
        path = path.parent
    wanted = None if split is None else parse_split(split)
    folders = {file.parent for file in _task_files(path.rglob("DisastIR-*.json"), wanted)}
    return sorted(folders)


def collect_result_sets(path: str | Path) -> list[ResultSet]:
    """Every result set at or under ``path``: one per (folder, query set), by folder, then full, Test, DevLite.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a task file is not an mteb result.
    """
    return [result for folder in find_result_sets(path, split=None) for result in load_result_sets(folder)]


def resolve_result_set(path: str | Path, *, split: Split | str | None = Split.full) -> ResultSet:
    """The one result set at or under ``path``.

    Args:
        path: a folder at any level, or a file in one.
        split: the query set to look for (default: the full set); None: any, so a folder holding the full
            set and DisastIR-Test holds two sets.

    Raises:
        FileNotFoundError: no result set there.
        ValueError: several result sets there (they are listed, to pick one).
    """
    wanted = None if split is None else parse_split(split)
    sets = collect_result_sets(path) if wanted is None else [
        load_result_set(folder, split=wanted) for folder in find_result_sets(path, split=wanted)]
    if not sets:
        which = "" if wanted in (None, Split.full) else f" of {benchmark_name(wanted)}"
        raise MissingInput(f"{path} holds no DisastIR result files{which} (DisastIR-*.json).")
    if len(sets) > 1:
        listed = "; ".join(f"{result.folder} [{result.search}"
                           f"{'' if result.split is Split.full else ', ' + result.benchmark}]" for result in sets)
        raise InvalidInput(f"{path} holds {len(sets)} result sets; pass one of them: {listed}.")
    return sets[0]

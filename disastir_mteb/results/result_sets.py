"""Finding and reading DisastIR result sets in mteb's results layout.

A result set is one folder of mteb task files for one model setting:
``<output>/results/<org>__<model>/<revision>/`` for a plain run, or
``.../<revision>/experiments/<name>/`` for a run with experiment settings (instructions, ANN). Each
holds ``<Task>.json`` files and ``model_meta.json``; sets written by ``disastir-mteb run`` also hold
``disastir_per_query/`` (see :mod:`disastir_mteb.results.per_query`). Reports and comparisons accept any
folder and resolve it to the result sets beneath it.

Labels: mteb files a setting under its raw experiment values (``disastir_search=ann-hnsw-ip-f32-M16-
efC128-ef64-k10-t16``); :func:`describe_setting` turns them into what a reader needs ("ANN (HNSW
M=16, ef=64)", "instructions: disastir"), for headings, titles, legends and comparisons. The raw
values stay in :attr:`ResultSet.label` and in the files' metadata.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disastir_mteb.benchmark.task_record import DATA_KEY, is_synthetic
from disastir_mteb.benchmark.taxonomy import TASK_NAMES
from disastir_mteb.results.grid import ScoreGrid
from disastir_mteb.results.per_query import PerQuery, per_query_file, read_per_query

__all__ = ["ResultSet", "describe_search", "describe_setting", "find_result_sets", "load_result_set",
           "resolve_result_set"]

_TASKS = frozenset(TASK_NAMES)

# The ANN label of AnnParams.label() with the "ann-" prefix the search adds, e.g.
# ann-hnsw-ip-f32-M16-efC128-ef64-k10-t16-x4 or ann-exact-ip-f32-kall-t16.
_ANN_LABEL = re.compile(r"ann-(?P<kind>hnsw|exact)-(?P<metric>[a-z]+)-(?P<dtype>[a-z0-9]+)"
                        r"(?:-M(?P<M>\d+)-efC(?P<efC>\d+)-ef(?P<ef>\d+))?-k(?P<k>\d+|all)-t\d+(?:-x(?P<x>\d+))?")
# The paper preset's values (disastir_mteb.search.usearch_index.PRESETS["paper"]): only departures are named.
_PAPER_ANN = {"dtype": "f32", "efC": "128", "k": "10"}
# The template each instruction set was published with (disastir_mteb.models.instructions.DEFAULT_TEMPLATE).
_OWN_TEMPLATE = {"disastir": "instruct-query", "dmretriever": "colon", "none": "raw", "model": "model"}


def describe_search(search: str) -> str:
    """A readable name for a ``disastir_search`` value: ``exact``, ``ANN (HNSW M=16, ef=64)``.

    Parses :meth:`disastir_mteb.search.usearch_index.AnnParams.label`, which has no parser of its own. The
    build threads are left out (they change a few edges, not the setting); dtype, rescoring,
    efConstruction and the depth appear only where they depart from the paper preset. A value this
    parser does not know is returned as it is.
    """
    if search == "exact":
        return "exact"
    match = _ANN_LABEL.fullmatch(search)
    if match is None:
        return search
    part = match.groupdict()
    details = [f"HNSW M={part['M']}", f"ef={part['ef']}"] if part["kind"] == "hnsw" else []
    if part["kind"] == "hnsw" and part["efC"] != _PAPER_ANN["efC"]:
        details.append(f"efC={part['efC']}")
    if part["dtype"] != _PAPER_ANN["dtype"]:
        details.append(part["dtype"])
    if part["x"]:
        details.append(f"rescore x{part['x']}")
    if part["k"] != _PAPER_ANN["k"]:
        details.append(f"k={part['k']}")
    if part["kind"] == "exact":  # the brute-force reference of the ANN presets, through USearch
        return f"USearch brute force ({', '.join(details)})" if details else "USearch brute force"
    return f"ANN ({', '.join(details)})"


def describe_setting(experiment: Mapping[str, Any]) -> str:
    """A readable name for mteb experiment settings: ``exact``, ``ANN (HNSW M=16, ef=64); instructions: disastir``.

    A plain run (no settings) is ``exact``; exact search is implied whenever other settings are named.
    Unknown settings are shown as ``name=value``.
    """
    rest = {k: v for k, v in experiment.items() if k != "disastir_search"}
    search = str(experiment.get("disastir_search", "exact"))
    parts: list[str] = [describe_search(search)] if search != "exact" else []
    if "disastir_instructions" in rest:
        name = str(rest.pop("disastir_instructions"))
        template = str(rest.pop("disastir_template", _OWN_TEMPLATE.get(name, "instruct-query")))
        text = "instructions: model's own" if name == "model" else f"instructions: {name}"
        if template != _OWN_TEMPLATE.get(name, "instruct-query"):  # custom mappings default to instruct-query
            text += f" (template {template})"
        if rest.pop("disastir_passages", None) == "instructed":
            text += ", also on passages"
        parts.append(text)
    if "disastir_precision" in rest:
        parts.append(f"{rest.pop('disastir_precision')} weights")
    parts += [f"{k.removeprefix('disastir_')}={v}" for k, v in sorted(rest.items())]
    return "; ".join(parts) or "exact"


def _task_files(paths: object) -> list[Path]:
    """Only files named exactly after a DisastIR task (not ``<Task>_predictions.json`` and the like)."""
    return sorted(path for path in paths if path.stem in _TASKS)  # type: ignore[attr-defined]


@dataclass
class ResultSet:
    """The DisastIR results of one model setting.

    Attributes:
        folder: the folder holding the task files.
        model: the model name (``model_meta.json``, else the folder names).
        revision: the model revision folder name.
        experiment: mteb experiment settings (instructions, ``disastir_search``), empty for a plain run.
        scores: task name -> main score (NDCG@10, fraction).
    """

    folder: Path
    model: str
    revision: str
    experiment: dict[str, Any]
    scores: dict[str, float]
    _per_query: dict[str, PerQuery] = field(default_factory=dict, repr=False)
    _records: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def search(self) -> str:
        """``exact``, or the ANN label (``ann-hnsw-ip-f32-M16-...``) of an ANN run."""
        return str(self.experiment.get("disastir_search", "exact"))

    @property
    def is_ann(self) -> bool:
        """Whether the set was searched approximately."""
        return self.search.startswith("ann-")

    @property
    def label(self) -> str:
        """The model name with its raw experiment settings, e.g. ``org/model (disastir_search=ann-...)``.

        Unique per setting (it keys comparisons and error messages); for people, :attr:`display_label`.
        """
        settings = ", ".join(f"{k}={v}" for k, v in sorted(self.experiment.items()))
        return f"{self.model} ({settings})" if settings else self.model

    @property
    def setting(self) -> str:
        """The readable setting (:func:`describe_setting`), e.g. ``exact`` or ``ANN (HNSW M=16, ef=64)``."""
        return describe_setting(self.experiment)

    @property
    def display_label(self) -> str:
        """The model with its readable setting, e.g. ``org/model — ANN (HNSW M=16, ef=64)``."""
        return f"{self.model} — {self.setting}"

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
        ``disastir_gain``, ``disastir_data``: :mod:`disastir_mteb.benchmark.task_record`), in files written since.
        """
        if task not in self._records:
            try:
                self._records[task] = _read_record(self.folder / f"{task}.json")
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
        """The 6 x 8 grid of the set's scores."""
        return ScoreGrid(self.scores)

    def has_per_query(self, task: str) -> bool:
        """Whether per-query scores were saved for ``task``."""
        return task in self._per_query or per_query_file(self.folder, task).is_file()

    def per_query(self, task: str) -> PerQuery:
        """The task's per-query scores and rankings (read once).

        Raises:
            FileNotFoundError: the set has none for ``task`` (e.g. written by plain ``mteb run``).
        """
        if task not in self._per_query:
            self._per_query[task] = read_per_query(per_query_file(self.folder, task))
        return self._per_query[task]


def _read_record(path: Path) -> dict[str, Any]:
    """The test score block of a task file, with ``dataset_revision`` and a float ``main_score``.

    Raises:
        ValueError: not an mteb result file with a test score.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        block = dict(data["scores"]["test"][0])
        return {**block, "main_score": float(block["main_score"]), "dataset_revision": data.get("dataset_revision")}
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise ValueError(f"{path} is not an mteb result file with a test score ({type(error).__name__}: "
                         f"{error}).") from None


def load_result_set(folder: str | Path) -> ResultSet:
    """Read the DisastIR task files and the model metadata of one result-set folder.

    Raises:
        FileNotFoundError: the folder holds no ``DisastIR-*.json`` file.
        ValueError: a task file is not an mteb result.
    """
    folder = Path(folder)
    files = _task_files(folder.glob("DisastIR-*.json"))
    if not files:
        raise FileNotFoundError(f"{folder} holds no DisastIR result files (DisastIR-*.json).")
    meta_path = folder / "model_meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    revision_folder = folder.parent.parent if folder.parent.name == "experiments" else folder
    model = meta.get("name") or revision_folder.parent.name.replace("__", "/")
    records = {path.stem: _read_record(path) for path in files}
    return ResultSet(folder=folder, model=str(model), revision=revision_folder.name,
                     experiment=dict(meta.get("experiment_kwargs") or {}),
                     scores={task: record["main_score"] for task, record in records.items()}, _records=records)


def find_result_sets(path: str | Path) -> list[Path]:
    """Every result-set folder at or under ``path`` (folders directly holding ``DisastIR-*.json``).

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No results at {path}: the folder does not exist.")
    if path.is_file():
        path = path.parent
    folders = {file.parent for file in _task_files(path.rglob("DisastIR-*.json"))}
    return sorted(folders)


def resolve_result_set(path: str | Path) -> ResultSet:
    """The one result set at or under ``path``.

    Raises:
        FileNotFoundError: no result set there.
        ValueError: several result sets there (they are listed, to pick one).
    """
    folders = find_result_sets(path)
    if not folders:
        raise FileNotFoundError(f"{path} holds no DisastIR result files (DisastIR-*.json).")
    if len(folders) > 1:
        listed = "; ".join(f"{folder} [{load_result_set(folder).search}]" for folder in folders)
        raise ValueError(f"{path} holds {len(folders)} result sets; pass one of them: {listed}.")
    return load_result_set(folders[0])

"""Finding and reading DisastIR result sets in mteb's results layout.

A result set is one folder of mteb task files for one model setting:
``<output>/results/<org>__<model>/<revision>/`` for a plain run, or
``.../<revision>/experiments/<name>/`` for a run with experiment settings (instructions, ANN). Each
holds ``<Task>.json`` files and ``model_meta.json``; sets written by ``disastir-mteb run`` also hold
``disastir_per_query/`` (see :mod:`disastir_mteb.per_query`). Reports and comparisons accept any
folder and resolve it to the result sets beneath it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disastir_mteb.grid import ScoreGrid
from disastir_mteb.per_query import PerQuery, per_query_file, read_per_query
from disastir_mteb.taxonomy import TASK_NAMES

__all__ = ["ResultSet", "find_result_sets", "load_result_set", "resolve_result_set"]

_TASKS = frozenset(TASK_NAMES)


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
        """The model name with its experiment settings, e.g. ``org/model (disastir_search=ann-...)``."""
        settings = ", ".join(f"{k}={v}" for k, v in sorted(self.experiment.items()))
        return f"{self.model} ({settings})" if settings else self.model

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


def _main_score(path: Path) -> float:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return float(data["scores"]["test"][0]["main_score"])
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
    return ResultSet(folder=folder, model=str(model), revision=revision_folder.name,
                     experiment=dict(meta.get("experiment_kwargs") or {}),
                     scores={path.stem: _main_score(path) for path in files})


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

"""The rows of the DisastIR leaderboard: the user's result sets and the authors' published models.

mteb shows one row per model name, so a row's name says what it is as well as who:
``all-MiniLM-L6-v2 — ANN (HNSW M=16, ef=64)``, ``... — generated sample data``, ``e5-large-v2 (published:
DisastIR paper)``. Published rows (the paper's appendix, Tables 19-23) are never merged with a re-run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from disastir_mteb.results.describe import describe_setting
from disastir_mteb.results.provenance import provenance_of
from disastir_mteb.results.published import SOURCES, published_per_task
from disastir_mteb.results.result_sets import ResultSet, collect_result_sets
from disastir_mteb.util.errors import InvalidInput, MissingInput
from disastir_mteb.vocabulary.taxonomy import Split

logger = logging.getLogger(__name__)

__all__ = ["PUBLISHED_MARK", "SYNTHETIC_MARK", "BoardRow", "published_reference", "published_rows",
           "result_rows"]

PUBLISHED_MARK = "(published: DisastIR paper)"
"""What a published row's name ends with."""
SYNTHETIC_MARK = "generated sample data"
"""What the name of a run on the generated sample says (its scores are not DisastIR scores)."""

_PAPER = "https://github.com/KaiYin97/Disaster_IR"
_PUBLISHED_DETAILS = (
    ("Source", SOURCES["paper-tables19-23"]),
    ("Data", "the full DisastIR (9,600 queries, 239,704 passages)"),
    ("Gain", "exponential (the authors' NDCG@10)"),
    ("Instructions", "disastir (template instruct-query)"),
    ("Search", "exact"),
    ("Precision", "as the authors ran each model"),
)


@dataclass(frozen=True)
class BoardRow:
    """One leaderboard row.

    Attributes:
        name: the row's model name in the leaderboard (see the module docstring).
        model: the model it is a run of (``org/name``).
        revision: the model revision of a run; ``published`` for a published row.
        scores: task name (the set's own) -> NDCG@10 (fraction).
        details: (label, value) pairs shown under the table: a run's provenance, a published row's source.
        folder: the result-set folder of a run (None for a published row).
        task_files: task name -> the mteb result file of a run.
        meta: a run's ``model_meta.json`` (empty when there is none).
    """

    name: str
    model: str
    revision: str
    scores: Mapping[str, float]
    details: tuple[tuple[str, str], ...]
    folder: Path | None = None
    task_files: Mapping[str, Path] = field(default_factory=dict)
    meta: Mapping[str, object] = field(default_factory=dict)

    @property
    def published(self) -> bool:
        """Whether the row shows published numbers rather than a run."""
        return self.folder is None

    @property
    def short_name(self) -> str:
        """What the leaderboard's Model column shows: the part after the last ``/``."""
        return self.name.rsplit("/", 1)[-1]


def _row_name(result_set: ResultSet, synthetic: bool | None) -> str:
    parts = [describe_setting(result_set.experiment).replace("/", "-")] if result_set.experiment else []
    if result_set.split is not Split.full:  # its own benchmark in the menu; named so a copied table stays clear
        parts.insert(0, result_set.benchmark)
    if synthetic:
        parts.append(SYNTHETIC_MARK)
    return " — ".join([result_set.model, *parts])


def result_rows(paths: Iterable[str | Path]) -> list[BoardRow]:
    """One row per result set at or under ``paths``; a built benchmark's sets are refused (left out, said once).

    Raises:
        FileNotFoundError: a path does not exist, or no path holds a DisastIR result set.
        ValueError: two folders hold the same run (model, revision and settings), which would be one row; or the
            paths hold only a built benchmark's results.
    """
    paths = [Path(path) for path in paths]
    sets: dict[tuple[Path, Split], ResultSet] = {}
    built: list[ResultSet] = []
    for path in paths:
        for result_set in collect_result_sets(path):
            if result_set.built is not None:
                built.append(result_set)
                continue
            sets.setdefault((result_set.folder.resolve(), result_set.split), result_set)
    if built:
        names = ", ".join(sorted({result_set.built for result_set in built if result_set.built is not None}))
        refusal = (f"the leaderboard shows DisastIR's results only, not those of the built benchmark {names} "
                   f"({'; '.join(str(result_set.folder) for result_set in built)}); disastir-mteb report and compare "
                   "read them")
        if not sets:
            raise InvalidInput(f"Refusing to show {', '.join(map(str, paths))}: {refusal}.")
        logger.warning("Left out: %s.", refusal)
    if not sets:
        raise MissingInput(f"No DisastIR result files (DisastIR-*.json) under {', '.join(map(str, paths))}; "
                           "run `disastir-mteb demo` or `disastir-mteb run` first, or pass the folder they wrote.")
    rows: list[BoardRow] = []
    seen: dict[tuple[str, str], Path] = {}
    for (folder, _), result_set in sets.items():
        provenance = provenance_of(result_set)
        name = _row_name(result_set, provenance.synthetic)
        if (name, result_set.revision) in seen:
            raise InvalidInput(f"{seen[name, result_set.revision]} and {folder} hold the same run ({name}, revision "
                               f"{result_set.revision}); pass one of them.")
        seen[name, result_set.revision] = folder
        rescored = f"{len(result_set.rescored)} of {len(result_set.scores)} tasks against their data"
        details = (("Folder", str(folder)), *provenance.fields(), ("Top 10s re-scored", rescored))
        rows.append(BoardRow(name=name, model=result_set.model, revision=result_set.revision,
                             scores=result_set.file_scores, details=details, folder=folder,
                             task_files={task: folder / f"{task}.json" for task in result_set.file_scores},
                             meta=result_set.meta))
    return rows


def published_rows() -> list[BoardRow]:
    """The DisastIR paper's 30 models with their 48 task scores (appendix, exact search), best first."""
    rows = [BoardRow(name=f"{model if '/' in model else 'published/' + model} {PUBLISHED_MARK}", model=model,
                     revision="published", scores=dict(record.tasks or {}), details=_PUBLISHED_DETAILS)
            for model, record in published_per_task().items()]
    return sorted(rows, key=lambda row: -sum(row.scores.values()))


def published_reference() -> str:
    """Where the published numbers come from (the link of a published row)."""
    return _PAPER

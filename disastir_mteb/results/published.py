"""The authors' published DisastIR numbers (x100 NDCG@10, as printed), looked up by Hugging Face model id.

The sources (:data:`SOURCES`) ship in ``resources/published/``; each scores one query set (:data:`SOURCE_SPLITS`),
so a run is set beside only the numbers of its own. The tables name models differently ("e5-small-v2",
"intfloat-e5-small-v2"): names are matched through Table 18's links and DMRetriever's ``hf_id`` column, then
through one normalisation of the short name.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

from disastir_mteb.util.errors import UnknownName
from disastir_mteb.vocabulary.taxonomy import CATEGORIES, INTENTS, Category, Intent, Split, task_name

__all__ = [
    "SOURCES",
    "SOURCE_SPLITS",
    "PublishedScores",
    "published_for",
    "published_per_task",
    "published_sizes",
    "published_source",
]

SOURCES: MappingProxyType[str, str] = MappingProxyType({
    "repo-2025-09": "DisastIR repository leaderboard, Sept 2025 (disastir instructions)",
    "paper-table3": "DisastIR paper, Table 3 (disastir instructions)",
    "paper-tables19-23": "DisastIR paper, Tables 19-23, per task (disastir instructions)",
    "dmretriever-table2": "DMRetriever paper, Table 2, DisastIR-Test (dmretriever instructions)",
})
#: The query set each source scores: a run is set beside a source only on the same query set.
SOURCE_SPLITS: MappingProxyType[str, Split] = MappingProxyType({
    "repo-2025-09": Split.full,
    "paper-table3": Split.full,
    "paper-tables19-23": Split.full,
    "dmretriever-table2": Split.test,
})

_INTENT_COLUMNS = {Intent.QA: "QA", Intent.QAdoc: "QAdoc", Intent.Twitter: "TW", Intent.FC: "FC",
                   Intent.NLI: "NLI", Intent.STS: "STS"}
_APPENDIX_INTENTS = {**_INTENT_COLUMNS, Intent.Twitter: "Twitter"}
_APPENDIX_CATEGORIES = {"Biological": Category.Bio, "Chemical": Category.Chem, "Environmental": Category.Env,
                        "Extraterrestrial": Category.Extra, "Geohazard": Category.Geo,
                        "Meteorological&hydrological": Category.MH, "Societal": Category.Soc,
                        "Technological": Category.Tech}  # the appendix's "Avg." rows are recomputed, not read


@dataclass(frozen=True)
class PublishedScores:
    """One model's numbers in one published source (``name``: as that table spells it), as fractions."""

    source: str
    name: str
    intents: dict[Intent, float]
    overall: float | None
    ann_overall: float | None = None
    tasks: MappingProxyType[str, float] | None = None


def _rows(file: str) -> list[dict[str, str]]:
    path = resources.files("disastir_mteb") / "resources" / "published" / file
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _short(name: str) -> str:
    """One spelling per model: no org, lower case, without the tables' optional prefixes and suffixes."""
    name = re.sub(r"\s*\[sic\]|\s*\(ours\)|\s*\(unverified id\)", "", name.strip()).split("/")[-1].lower()
    name = name.replace("mulling-", "multilingual-")
    for prefix in ("snowflake-", "thenlper-"):
        name = name.removeprefix(prefix)
    return name.removesuffix("-english")


@functools.cache
def _links() -> dict[str, str]:
    """Normalised table name -> Hugging Face id (Table 18 and DMRetriever's hf_id column)."""
    links = {}
    for row in _rows("disastir_paper_table18_model_links.csv"):
        hub_id = row["Link"].removeprefix("https://huggingface.co/").strip("/")
        links[_short(row["Model Name"])] = hub_id.replace("large-instructt", "large")  # a typo in Table 18
    for row in _rows("dmretriever_paper_table2_test.csv"):
        links.setdefault(_short(row["model"]), re.sub(r"\s*\(.*\)", "", row["hf_id"]))
    return links


def _hub_id(name: str) -> str:
    return _links().get(_short(name), name)


def _pct(value: str) -> float:
    return float(value) / 100


@functools.cache
def _table() -> dict[str, list[PublishedScores]]:
    """Hugging Face id (lower case) -> its published scores, in :data:`SOURCES` order."""
    found: dict[str, list[PublishedScores]] = {}

    def add(hub_id: str, scores: PublishedScores) -> None:
        found.setdefault(hub_id.lower(), []).append(scores)

    for source, file in (("repo-2025-09", "disastir_repo_readme_2025-09_exact_vs_ann.csv"),
                         ("paper-table3", "disastir_paper_table3_overall_exact_vs_ann.csv")):
        for row in _rows(file):
            add(_hub_id(row["model"]), PublishedScores(
                source, row["model"], {i: _pct(row[c]) for i, c in _INTENT_COLUMNS.items()}, _pct(row["exact_avg"]),
                _pct(row["ann_avg"])))
    appendix: dict[str, dict[str, float]] = {}
    for row in _rows("disastir_paper_tables19-23_per_task_exact.csv"):
        if row["category"] not in _APPENDIX_CATEGORIES:
            continue
        category = _APPENDIX_CATEGORIES[row["category"]]
        cells = appendix.setdefault(row["model_as_in_appendix"], {})
        for intent, column in _APPENDIX_INTENTS.items():
            cells[task_name(intent, category)] = _pct(row[column])
    by_appendix_name = {hub_id.replace("/", "-").lower(): hub_id for hub_id in _links().values()}
    for name, cells in appendix.items():
        hub_id = by_appendix_name.get(name.lower(), name)
        intents = {i: sum(cells[task_name(i, c)] for c in CATEGORIES) / len(CATEGORIES) for i in INTENTS}
        add(hub_id, PublishedScores("paper-tables19-23", name, intents, sum(intents.values()) / len(intents),
                                    tasks=MappingProxyType(cells)))
    for row in _rows("dmretriever_paper_table2_test.csv"):
        add(re.sub(r"\s*\(.*\)", "", row["hf_id"]), PublishedScores(
            "dmretriever-table2", row["model"], {i: _pct(row[c]) for i, c in _INTENT_COLUMNS.items()},
            _pct(row["Avg"])))
    order = list(SOURCES)
    return {key: sorted(values, key=lambda s: order.index(s.source)) for key, values in found.items()}


def published_for(model: str, split: Split | None = None) -> list[PublishedScores]:
    """The published records of a Hugging Face id, best source first; with ``split``, only that query set's."""
    return [record for record in _table().get(model.lower(), [])
            if split is None or SOURCE_SPLITS[record.source] is split]


def published_per_task() -> dict[str, PublishedScores]:
    """Hugging Face id (as Table 18 spells it) -> the appendix's 48 task scores: the only source per task."""
    cased = {hub_id.lower(): hub_id for hub_id in _links().values()}
    return {cased.get(key, records[0].name): record for key, records in _table().items()
            for record in records if record.source == "paper-tables19-23"}


def published_source(source: str) -> list[tuple[str, PublishedScores]]:
    """Every (Hugging Face id, record) of one source of :data:`SOURCES`, in the table's order.

    Raises:
        KeyError: ``source`` is not a key of :data:`SOURCES`.
    """
    if source not in SOURCES:
        raise UnknownName(f"Unknown published source {source!r}; expected one of {list(SOURCES)}.")
    return [(hub_id, record) for hub_id, records in _table().items() for record in records if record.source == source]


def _parameters(text: str) -> int | None:
    """``7B`` -> 7_000_000_000, ``335M`` -> 335_000_000; None for anything else."""
    text = text.strip().upper()
    scale = {"B": 1e9, "M": 1e6}.get(text[-1:])
    try:
        return int(float(text[:-1]) * scale) if scale else None
    except ValueError:
        return None


@functools.cache
def published_sizes() -> dict[str, tuple[int | None, int | None]]:
    """Hugging Face id (lower case) -> (parameters, embedding size) of the paper's 30 models (Table 17)."""
    return {_hub_id(row["Model Name"]).lower(): (_parameters(row["Param Size"]), int(row["Embed. Size"]) or None)
            for row in _rows("disastir_paper_table17_models.csv")}

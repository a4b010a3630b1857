"""Descriptive statistics of the 144 tasks: what the papers state, and mteb's full figures recomputed.

mteb requires a statistics file of every task, and a file must never pass guesses for measurements: the shipped ones
hold published figures only, each labelled with where it comes from under ``provenance``.
"""

from __future__ import annotations

import csv
import json
from importlib import resources
from pathlib import Path
from typing import Any

from disastir_mteb.data.source import DataSource
from disastir_mteb.util.atomic import write_json_atomic
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import (
    CATEGORIES,
    INTENTS,
    SPLIT_LABELS,
    SPLIT_TASK_SPECS,
    SPLITS,
    TASK_SPECS,
    Split,
    TaskSpec,
    canonical_task_name,
    get_spec,
    parse_category,
    parse_intent,
)

__all__ = ["PROVENANCE_KINDS", "compute_statistics", "paper_statistics"]

#: How a number of a shipped statistics file was obtained: the first word of each ``provenance`` entry.
PROVENANCE_KINDS = ("published", "derived", "assumed", "not published", "not applicable")

_DISASTIR = "DisastIR paper"
_DMRETRIEVER = "DMRetriever paper"
_CITED = {_DISASTIR: "DisastIR paper (Yin et al., EMNLP 2025 Findings)",
          _DMRETRIEVER: "DMRetriever paper (Yin et al., 2025; github.com/KaiYin97/DMRETRIEVER)"}
_RECOMPUTE = ("not published: needs the real data; `disastir-mteb stats --out DIR` computes it from the data the "
              "tasks load")


def _published_csv(name: str) -> list[dict[str, str]]:
    text = (resources.files("disastir_mteb") / "resources" / "published" / name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def _metadata_facts(name: str) -> dict[str, Any]:
    """One ``task_metadata/*.json`` file (the facts the task metadata is built from), comments dropped."""
    from disastir_mteb.vocabulary.metadata import metadata_dir


    data: dict[str, Any] = json.loads((metadata_dir() / name).read_text(encoding="utf-8"))
    return {key: value for key, value in data.items() if not key.startswith("_")}


def _judgements() -> dict[TaskSpec, tuple[int, dict[int, int]]]:
    """Per full task, the judged pairs (Table 1) and the pairs per grade (Table 14), checked to agree."""
    grades = {
        _row_task(row): {g: int(row[f"rel{g}"]) for g in range(6) if int(row[f"rel{g}"]) or g <= 3}
        for row in _published_csv("disastir_paper_table14_qrels_by_grade.csv")
    }
    pairs: dict[TaskSpec, int] = {}
    for row in _published_csv("disastir_paper_table1_labelled_pairs.csv"):
        for spec in TASK_SPECS:
            if parse_category(row["category"]) is spec.category:
                pairs[spec] = int(row[f"{spec.intent.value}_pairs"])
    for spec in TASK_SPECS:
        if sum(grades[spec].values()) != pairs[spec]:
            raise InvalidInput(f"Published tables disagree for {spec.name}: Table 14 sums to "
                               f"{sum(grades[spec].values())}, Table 1 says {pairs[spec]}; fix "
                               "disastir_mteb/resources/published/.")
    return {spec: (pairs[spec], grades[spec]) for spec in TASK_SPECS}


def _row_task(row: dict[str, str]) -> TaskSpec:
    """The full task of a published CSV row with ``intent`` and ``category`` columns."""
    return TaskSpec(parse_intent(row["intent"]), parse_category(row["category"]))


def _full(judged: tuple[int, dict[int, int]], dataset: dict[str, Any]) -> dict[str, Any]:
    """A full task: the DisastIR paper's counts, with the judged pairs and grades of its Tables 1 and 14."""
    pairs, counts = judged
    queries, corpus = int(dataset["queries_per_task"]), int(dataset["corpus_size"])
    return {
        "num_samples": corpus + queries,
        "num_documents": corpus,
        "num_queries": queries,
        "number_of_characters": None,
        "documents_text_statistics": None,
        "queries_text_statistics": None,
        "relevant_docs_statistics": {
            "num_judged_pairs": pairs,
            "num_relevant_docs": pairs - counts[0],
            "grade_counts": {str(g): n for g, n in counts.items()},
            "average_judged_per_query": round(pairs / queries, 2),
        },
        "top_ranked_statistics": None,
        "source": (f"{_CITED[_DISASTIR]}: Section 3 and Table 2 (queries, corpus), Table 1 (judged pairs), "
                   "Table 14 (pairs per grade). Text statistics need the real data: run `disastir-mteb stats "
                   "--out DIR` on it."),
        "provenance": {
            "num_documents": (f"published: {_DISASTIR}, Section 3 and Table 2 ({corpus:,} passages, one corpus "
                              "shared by all 48 tasks)"),
            "num_queries": f"published: {_DISASTIR}, Section 3 ({queries} queries per task)",
            "num_samples": "derived: num_documents + num_queries",
            "relevant_docs_statistics.num_judged_pairs": f"published: {_DISASTIR}, Table 1",
            "relevant_docs_statistics.grade_counts": (f"published: {_DISASTIR}, Table 14 (its rows sum to Table "
                                                      "1's judged pairs, checked when this file is built)"),
            "relevant_docs_statistics.num_relevant_docs": ("derived: judged pairs (Table 1) minus the pairs of "
                                                           "grade 0 (Table 14)"),
            "relevant_docs_statistics.average_judged_per_query": ("derived: judged pairs / num_queries, rounded to "
                                                                  "2 decimals"),
            **_unknown_text(),
        },
    }


def _unknown_text() -> dict[str, str]:
    return {"number_of_characters": _RECOMPUTE, "documents_text_statistics": _RECOMPUTE,
            "queries_text_statistics": _RECOMPUTE,
            "top_ranked_statistics": "not applicable: retrieval over the whole corpus, no candidate lists"}


def _split(spec: TaskSpec, judged: tuple[int, dict[int, int]], dataset: dict[str, Any],
           devlite: dict[str, Any]) -> dict[str, Any]:
    """DisastIR-Test or DisastIR-DevLite: DMRetriever's Table 6 totals, per task under the even-split assumption."""
    full_queries, corpus = int(dataset["queries_per_task"]), int(dataset["corpus_size"])
    per_intent = int(devlite["devlite_queries"]) // len(INTENTS)
    per_task_devlite = int(devlite["devlite_queries_per_task"])
    even = (f"the {_DMRETRIEVER} (Appendix E) samples {per_intent} DevLite queries per search intent at random "
            f"and does not say how they fall on its {len(CATEGORIES)} categories; an even split is assumed here")
    if spec.split is Split.test:
        queries, documents = int(devlite["test_queries_per_task"]), corpus
        num_queries = (f"assumed: {full_queries} queries of the full task (the {_DISASTIR}, Section 3) minus "
                       f"{per_task_devlite} DevLite queries; {even}; Table 6's total of "
                       f"{int(devlite['test_queries']):,} Test queries holds either way")
        num_documents = (f"published: {_DMRETRIEVER}, Table 6 (DisastIR-Test searches the full corpus of "
                         f"{corpus:,} passages)")
        judged_note = (f"not published: the Test queries' share of the full task's {judged[0]:,} judged pairs "
                       f"({_DISASTIR}, Table 1) depends on which queries DevLite took")
    else:
        queries, documents = per_task_devlite, int(devlite["devlite_corpus_size"])
        num_queries = (f"assumed: {even} ({per_intent} / {len(CATEGORIES)} = {per_task_devlite} per task); "
                       f"Table 6's total of {int(devlite['devlite_queries'])} DevLite queries holds either way")
        num_documents = (f"published: {_DMRETRIEVER}, Table 6 (the pooled DevLite corpus of {documents:,} "
                         "passages, shared by all 48 DevLite tasks)")
        judged_note = ("not published: DevLite inherits the judgements of its queries restricted to the pooled "
                       f"corpus ({_DMRETRIEVER}, Appendix E); neither count is published")
    return {
        "num_samples": documents + queries,
        "num_documents": documents,
        "num_queries": queries,
        "number_of_characters": None,
        "documents_text_statistics": None,
        "queries_text_statistics": None,
        "relevant_docs_statistics": None,
        "top_ranked_statistics": None,
        "source": (f"{_CITED[_DMRETRIEVER]}: Table 6 (DisastIR-{SPLIT_LABELS[spec.split]} queries and passages) "
                   f"and Appendix E ({per_intent} DevLite queries per intent), over the {_CITED[_DISASTIR]}, "
                   f"Section 3 ({full_queries} queries per task). The per-task query count is an assumption (see "
                   "provenance); judged pairs and text statistics need the real data: run `disastir-mteb stats "
                   "--out DIR -t ...` on it."),
        "provenance": {
            "num_documents": num_documents,
            "num_queries": num_queries,
            "num_samples": "derived: num_documents + num_queries (so it inherits num_queries' assumption)",
            "relevant_docs_statistics": judged_note,
            **_unknown_text(),
        },
    }


def paper_statistics(splits: tuple[Split, ...] = SPLITS) -> dict[str, dict[str, Any]]:
    """Per task of ``splits``, mteb-shaped statistics holding only published figures, each labelled in ``provenance``.

    Raises:
        ValueError: the published Tables 1 and 14 disagree for a task.
    """
    dataset, devlite = _metadata_facts("dataset.json"), _metadata_facts("devlite.json")
    judgements = _judgements()
    eval_split = str(dataset["eval_splits"][0])
    stats: dict[str, dict[str, Any]] = {}
    for split in splits:
        for spec in SPLIT_TASK_SPECS[split]:
            judged = judgements[spec.base]
            block = (_full(judged, dataset) if split is Split.full
                     else _split(spec, judged, dataset, devlite))
            stats[spec.name] = {eval_split: block}
    return stats


def compute_statistics(task_names: list[str], out_dir: str | Path, data: DataSource | None = None) -> list[Path]:
    """Recompute mteb's full descriptive statistics of the tasks, one JSON per task, naming its data source."""
    from disastir_mteb.tasks.retrieval import ALL_TASK_CLASSES
    from disastir_mteb.vocabulary.metadata import DATASET_REPO, DATASET_REVISION

    data = data if data is not None else DataSource.from_environment()
    source = (f"local folder {data.folder} (not the published data unless it is a copy of it)" if data.folder
              else f"Hugging Face {DATASET_REPO}@{DATASET_REVISION}")
    written = []
    for name in map(canonical_task_name, task_names):  # any case
        path = Path(out_dir) / f"{name}.json"
        task = ALL_TASK_CLASSES[get_spec(name).name](data=data)
        task.metadata = task.metadata.with_statistics_at(path)  # mteb writes there, never into the package
        task.load_data()
        stats: dict[str, dict[str, Any]] = task.calculate_descriptive_statistics(overwrite_results=True)
        write_json_atomic(path, {split: {**block, "source": source} for split, block in stats.items()})
        written.append(path)
    return written

"""Descriptive statistics of the 48 tasks: what the paper states, and mteb's full figures recomputed.

The package ships ``task_metadata/descriptive_stats/<task>.json`` built by
:func:`paper_statistics` from the paper's Tables 1 and 14 (200 queries per task, a shared
corpus of 239,704 passages, judged pairs and the count of each grade). mteb's full statistics
(text lengths, relevant documents per query, ...) need the real data: :func:`compute_statistics`
recomputes them from whatever data the tasks load and labels the output with that source, so
figures measured on the synthetic sample can never pass for DisastIR's.
"""

from __future__ import annotations

import csv
import os
from importlib import resources
from pathlib import Path
from typing import Any

from disastir_mteb.benchmark.taxonomy import TASK_SPECS, parse_category, parse_intent, task_name
from disastir_mteb.util.atomic import write_json_atomic

__all__ = ["compute_statistics", "paper_statistics"]

_PAPER_SOURCE = ("DisastIR paper (Yin et al., EMNLP 2025 Findings): Section 3 / Table 2 (200 queries per task, "
                 "239,704 passages), Table 1 (judged pairs), Table 14 (pairs per grade). Text statistics need "
                 "the real data: run `disastir-mteb stats --out DIR` on it.")


def _published_csv(name: str) -> list[dict[str, str]]:
    text = (resources.files("disastir_mteb") / "resources" / "published" / name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def paper_statistics(corpus_size: int = 239_704, queries_per_task: int = 200) -> dict[str, dict[str, Any]]:
    """Per task, mteb-shaped statistics holding only what the paper states."""
    grades = {
        task_name(parse_intent(row["intent"]), parse_category(row["category"])): {
            g: int(row[f"rel{g}"]) for g in range(6) if int(row[f"rel{g}"]) or g <= 3
        }
        for row in _published_csv("disastir_paper_table14_qrels_by_grade.csv")
    }
    pairs: dict[str, int] = {}
    for row in _published_csv("disastir_paper_table1_labelled_pairs.csv"):
        for spec in TASK_SPECS:
            if parse_category(row["category"]) is spec.category:
                pairs[spec.name] = int(row[f"{spec.intent.value}_pairs"])
    stats = {}
    for spec in TASK_SPECS:
        counts = grades[spec.name]
        if sum(counts.values()) != pairs[spec.name]:
            raise ValueError(f"Published tables disagree for {spec.name}: Table 14 sums to "
                             f"{sum(counts.values())}, Table 1 says {pairs[spec.name]}.")
        stats[spec.name] = {"test": {
            "num_samples": corpus_size + queries_per_task,
            "num_documents": corpus_size,
            "num_queries": queries_per_task,
            "number_of_characters": None,
            "documents_text_statistics": None,
            "queries_text_statistics": None,
            "relevant_docs_statistics": {
                "num_judged_pairs": pairs[spec.name],
                "num_relevant_docs": pairs[spec.name] - counts[0],
                "grade_counts": {str(g): n for g, n in counts.items()},
                "average_judged_per_query": round(pairs[spec.name] / queries_per_task, 2),
            },
            "top_ranked_statistics": None,
            "source": _PAPER_SOURCE,
        }}
    return stats


def compute_statistics(task_names: list[str], out_dir: str | Path) -> list[Path]:
    """Recompute mteb's full descriptive statistics for the tasks and write one JSON per task.

    The data come from wherever the tasks load them (``DISASTIR_DATA_DIR`` or the Hub
    snapshot); each file records that source under ``source``.
    """
    import mteb

    from disastir_mteb.benchmark.tasks import DATASET_REPO, DATASET_REVISION

    local = os.environ.get("DISASTIR_DATA_DIR")
    source = (f"local folder {local} (not the published data unless it is a copy of it)" if local
              else f"Hugging Face {DATASET_REPO}@{DATASET_REVISION}")
    written = []
    for name in task_names:
        task = mteb.get_task(name)
        task.load_data()
        split = task.metadata.eval_splits[0]
        stats: dict[str, Any] = dict(task._calculate_descriptive_statistics_from_split(split))
        stats["source"] = source
        path = Path(out_dir) / f"{name}.json"
        write_json_atomic(path, {split: stats})
        written.append(path)
    return written

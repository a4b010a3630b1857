"""The facts of ``task_metadata/`` (dataset, intents, categories, DevLite split, citation), read without mteb."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from disastir_mteb.util.errors import MissingInput

__all__ = [
    "CATEGORIES_METADATA",
    "CITATION",
    "DATASET",
    "DATASET_REPO",
    "DATASET_REVISION",
    "DEVLITE",
    "DEVLITE_REPO",
    "DEVLITE_REVISION",
    "INTENTS_METADATA",
    "K_VALUES",
    "MAIN_SCORE_KEY",
    "metadata_dir",
    "read_metadata",
]


def metadata_dir() -> Path:
    """The ``task_metadata`` folder: inside the installed wheel, or beside the package in a checkout."""
    here = Path(__file__).resolve().parents[1]  # the disastir_mteb package folder
    for candidate in (here / "task_metadata", here.parent / "task_metadata"):
        if (candidate / "dataset.json").is_file():
            return candidate
    raise MissingInput(f"task_metadata/ not found beside {here}; the installation is incomplete.")


def read_metadata(name: str) -> dict[str, Any]:
    """One JSON file of ``task_metadata/``, without its ``_comment``-style keys."""
    with (metadata_dir() / name).open(encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return {k: v for k, v in data.items() if not k.startswith("_")}


#: ``dataset.json``: the published dataset every full task reads (repo, revision, sizes, mteb metadata fields).
DATASET = read_metadata("dataset.json")
#: ``intents.json`` and ``categories.json``: titles and descriptions, keyed by the short names (``QA``, ``Bio``).
INTENTS_METADATA = read_metadata("intents.json")
CATEGORIES_METADATA = read_metadata("categories.json")
#: ``devlite.json``: DMRetriever's DisastIR-DevLite and DisastIR-Test query sets.
DEVLITE = read_metadata("devlite.json")
CITATION = (metadata_dir() / "citation.bib").read_text(encoding="utf-8").strip()

#: The Hugging Face dataset every task reads, and the one pinned revision (change it in dataset.json only).
DATASET_REPO: str = DATASET["repo"]
DATASET_REVISION: str = DATASET["revision"]
K_VALUES: tuple[int, ...] = tuple(DATASET["k_values"])
#: The key of DisastIR's main score in mteb's score records (``ndcg_at_10``); every module reads it from here.
MAIN_SCORE_KEY: str = DATASET["main_score"]
#: Where DisastIR-DevLite's queries and pooled corpus come from; the revision is a placeholder (see devlite.json).
DEVLITE_REPO: str = DEVLITE["repo"]
DEVLITE_REVISION: str = DEVLITE["revision"]

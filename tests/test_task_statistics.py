"""mteb's own checks of task metadata, for all 144 tasks, and where each shipped statistic comes from.

mteb's repository tests every registered task in ``tests/test_tasks/test_metadata.py``
(``test_all_metadata_is_filled_and_valid``): valid and filled metadata, no remote code, a simplified
task type, descriptive statistics with ``n_samples``, and a dict prompt only on retrieval tasks. Run
with this plugin registered, that file failed for the 96 DisastIR-Test and DisastIR-DevLite tasks
(no statistics). The same properties are asserted here over the tasks as mteb lists them, so CI
catches a task mteb's suite would reject, without a copy of mteb's file.

The statistics files (``task_metadata/descriptive_stats``) hold only published figures, and label
each of their numbers under ``provenance``: published, derived, assumed, or not published.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mteb
import pytest
from mteb.abstasks import AbsTaskRetrieval

from disastir_mteb.tasks.statistics import PROVENANCE_KINDS, compute_statistics, paper_statistics
from disastir_mteb.vocabulary.metadata import metadata_dir
from disastir_mteb.vocabulary.taxonomy import ALL_TASK_NAMES, SPLIT_TASK_NAMES, Split

NAMES = sorted(ALL_TASK_NAMES)


def _listed() -> dict[str, Any]:
    """Our tasks as mteb's metadata test lists every task: superseded, aggregate and beta ones included."""
    listed = mteb.get_tasks(exclude_superseded=False, exclude_aggregate=False, exclude_beta=False)
    return {task.metadata.name: task for task in listed if task.metadata.name in ALL_TASK_NAMES}


LISTED = _listed()


def test_mteb_lists_all_144_tasks() -> None:
    assert sorted(LISTED) == NAMES and len(NAMES) == 144


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_metadata_passes_mtebs_own_task_checks(name: str) -> None:
    task = LISTED[name]
    metadata = task.metadata
    metadata._validate_metadata()
    assert metadata.is_filled(), f"Metadata for {name} is not filled"
    assert metadata.dataset.get("trust_remote_code", False) is False
    assert isinstance(metadata.simplified_task_type, str)
    assert not task.is_aggregate  # mteb skips the statistics checks only for aggregate tasks
    assert metadata.descriptive_stats is not None, f"{name} should have descriptive stats"
    assert metadata.n_samples is not None
    if isinstance(metadata.prompt, dict):  # mteb allows a dict prompt on retrieval tasks only
        assert isinstance(task, AbsTaskRetrieval)


def _labelled(block: dict[str, Any], provenance: dict[str, str], prefix: str = "") -> dict[str, Any]:
    """Every field of a statistics block by dotted path, down to where ``provenance`` labels it."""
    found: dict[str, Any] = {}
    for key, value in block.items():
        path = f"{prefix}{key}"
        if path in ("source", "provenance"):
            continue
        if isinstance(value, dict) and path not in provenance:
            found.update(_labelled(value, provenance, f"{path}."))
        else:
            found[path] = value
    return found


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_every_statistic_says_where_it_comes_from(name: str) -> None:
    (block,) = mteb.get_task(name).metadata.descriptive_stats.values()
    provenance: dict[str, str] = block["provenance"]
    fields = _labelled(block, provenance)
    assert set(provenance) == set(fields), f"{name}: provenance and fields differ"
    for path, value in fields.items():
        kind = provenance[path].split(":")[0]
        assert kind in PROVENANCE_KINDS, f"{name}: {path} labelled {kind!r}"
        if value is None:
            assert kind in ("not published", "not applicable"), f"{name}: {path} is null but labelled {kind!r}"
        else:
            assert kind in ("published", "derived", "assumed"), f"{name}: {path} = {value!r} labelled {kind!r}"
    assert block["num_samples"] == block["num_documents"] + block["num_queries"]


def _split_blocks(split: Split) -> list[dict[str, Any]]:
    return [next(iter(mteb.get_task(name).metadata.descriptive_stats.values())) for name in SPLIT_TASK_NAMES[split]]


def test_split_statistics_add_up_to_dmretrievers_table_6() -> None:
    test, devlite = _split_blocks(Split.test), _split_blocks(Split.devlite)
    assert sum(block["num_queries"] for block in test) == 9_120  # Table 6
    assert sum(block["num_queries"] for block in devlite) == 480  # Table 6 (80 per intent, Appendix E)
    assert {block["num_documents"] for block in test} == {239_704}
    assert {block["num_documents"] for block in devlite} == {9_316}
    assert all(block["relevant_docs_statistics"] is None for block in test + devlite)  # not published per split
    assert all(block["provenance"]["num_queries"].startswith("assumed:") for block in test + devlite)


def test_shipped_files_are_exactly_a_fresh_build() -> None:
    """The 144 files are what ``disastir-mteb stats --paper`` writes, and nothing else is in the folder."""
    built = paper_statistics()
    folder = metadata_dir() / "descriptive_stats"
    assert sorted(built) == NAMES
    assert sorted(path.stem for path in folder.glob("*.json")) == NAMES
    for name, stats in built.items():
        assert json.loads((folder / f"{name}.json").read_text(encoding="utf-8")) == stats, name


def test_recomputed_statistics_are_mtebs_own_and_leave_the_shipped_files_alone(sample_data: Path, tmp_path: Path,
                                                                               use_data: object) -> None:
    """``disastir-mteb stats --out DIR``: mteb's public ``calculate_descriptive_statistics``, written into DIR only."""
    use_data(sample_data)
    shipped = (metadata_dir() / "descriptive_stats" / "DisastIR-QA-Bio.json").read_bytes()
    [path] = compute_statistics(["disastir-qa-bio"], tmp_path)
    stats = json.loads(path.read_text(encoding="utf-8"))["test"]
    task = mteb.get_task("DisastIR-QA-Bio")
    task.load_data()
    assert stats["num_queries"] == len(task.dataset["default"]["test"]["queries"])
    assert stats["num_documents"] == sum(1 for _ in (sample_data / "corpus.jsonl").open())
    assert stats["source"].startswith(f"local folder {sample_data}")
    assert path == tmp_path / "DisastIR-QA-Bio.json" and sorted(tmp_path.iterdir()) == [path]
    assert (metadata_dir() / "descriptive_stats" / "DisastIR-QA-Bio.json").read_bytes() == shipped

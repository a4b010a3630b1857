from __future__ import annotations

import re

import mteb
import pytest
from sentences import says

import disastir_mteb
from disastir_mteb.tasks.retrieval import TASK_CLASSES, AbsTaskDisastIR
from disastir_mteb.vocabulary.metadata import DATASET_REPO, DATASET_REVISION, K_VALUES
from disastir_mteb.vocabulary.taxonomy import (
    BENCHMARK_NAMES,
    SPLIT_TASK_NAMES,
    TASK_NAMES,
    Split,
    benchmark_task_names,
    get_spec,
)

DISASTIR_INSTRUCTIONS = {
    "QA": "Given the question, retrieve the most relevant passage answering it",
    "QAdoc": "Given the question, retrieve the most relevant document answering it",
    "Twitter": "Given the user query, retrieve the most relevant Twitter text",
    "FC": "Given the claim, retrieve the most relevant document that supports or refutes it",
    "NLI": "Given the premise, retrieve the most relevant entailed hypothesis",
    "STS": "Given the sentence, retrieve a semantically equivalent sentence",
}


@pytest.mark.parametrize("name", TASK_NAMES, ids=TASK_NAMES)
def test_metadata_is_complete_and_valid(name: str) -> None:
    task = mteb.get_task(name)
    metadata = task.metadata
    assert isinstance(task, AbsTaskDisastIR)
    assert metadata.name == name
    metadata._validate_metadata()
    assert metadata.is_filled()
    assert metadata.type == "Retrieval" and metadata.main_score == "ndcg_at_10"
    assert metadata.dataset == {"path": "DMIR01/DisastIR", "revision": DATASET_REVISION}
    assert "trust_remote_code" not in metadata.dataset
    assert metadata.license == "cc-by-4.0" and metadata.eval_langs == ["eng-Latn"]
    assert metadata.prompt == {"query": DISASTIR_INSTRUCTIONS[get_spec(name).intent.value]}
    assert metadata.descriptive_stats is not None and metadata.n_samples == {"test": 239_904}
    assert max(task.k_values) <= 100 and 10 in task.k_values
    assert get_spec(name).category.value in name and metadata.description.count("DisastIR") >= 1


def test_the_disastir_instruction_set_is_the_tasks_prompts() -> None:
    """``--instructions disastir`` sends exactly the benchmark's texts, read from the one file the prompts come from."""
    from disastir_mteb.vocabulary.instructions import INSTRUCTION_SETS

    disastir = INSTRUCTION_SETS["disastir"]
    assert disastir is not None
    assert {intent.value: text for intent, text in disastir.items()} == DISASTIR_INSTRUCTIONS


def test_descriptions_differ_per_task() -> None:
    assert len({mteb.get_task(n).metadata.description for n in TASK_NAMES}) == 48


def test_bibtex_parses_as_one_entry() -> None:
    bibtex = TASK_CLASSES["DisastIR-QA-Bio"].metadata.bibtex_citation
    assert re.match(r"^@inproceedings\{yin2025disastir,", bibtex)
    assert bibtex.count("{") == bibtex.count("}")
    assert TASK_CLASSES["DisastIR-QA-Bio"].metadata.intext_citation() == r"\cite{yin2025disastir}"


def test_one_revision_constant() -> None:
    assert DATASET_REPO == "DMIR01/DisastIR"
    assert {cls.metadata.dataset["revision"] for cls in TASK_CLASSES.values()} == {DATASET_REVISION}
    assert K_VALUES == (1, 3, 5, 10, 20, 100)


def test_paper_statistics_match_the_published_tables() -> None:
    total = sum(mteb.get_task(n).metadata.descriptive_stats["test"]["relevant_docs_statistics"]["num_judged_pairs"]
                for n in TASK_NAMES)
    assert total == 1_341_986
    stats = mteb.get_task("DisastIR-STS-Bio").metadata.descriptive_stats["test"]
    assert stats["relevant_docs_statistics"]["grade_counts"] == {"0": 9189, "1": 8880, "2": 5229, "3": 2303,
                                                                  "4": 1350, "5": 114}
    assert "paper" in stats["source"]


def test_shipped_statistics_equal_a_fresh_build_from_the_csvs() -> None:
    from disastir_mteb.tasks.statistics import paper_statistics

    for name, stats in paper_statistics().items():
        assert mteb.get_task(name).metadata.descriptive_stats == stats


def test_generated_classes_look_hand_written() -> None:
    cls = TASK_CLASSES["DisastIR-NLI-Soc"]
    assert cls.__name__ == "DisastIRNLISoc" and cls.__module__ == "disastir_mteb.tasks.retrieval"
    import disastir_mteb.tasks.retrieval as module

    assert module.DisastIRNLISoc is cls


def test_package_get_tasks_filters_by_intent_and_category() -> None:
    names = [t.metadata.name for t in disastir_mteb.get_tasks(["FactCheck"], ["Bio", "chemical"])]
    assert names == ["DisastIR-FC-Bio", "DisastIR-FC-Chem"]
    assert len(disastir_mteb.get_tasks()) == 48
    with pytest.raises(ValueError) as refused:
        disastir_mteb.get_tasks(["Retrieval"])
    says(str(refused.value), "DisastIR intent", "'Retrieval'", "FactCheck")


def test_gain_option_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    assert mteb.get_task("DisastIR-QA-Bio").gain == "exponential"
    monkeypatch.setenv("DISASTIR_GAIN", "linear")
    assert mteb.get_task("DisastIR-QA-Bio").gain == "linear"
    monkeypatch.setenv("DISASTIR_GAIN", "quadratic")
    with pytest.raises(ValueError, match="DISASTIR_GAIN"):
        mteb.get_task("DisastIR-QA-Bio")


def test_benchmarks() -> None:
    full = mteb.get_benchmark("DisastIR")
    assert [t.metadata.name for t in full.tasks] == list(TASK_NAMES)
    for intent in ("QA", "QAdoc", "Twitter", "FC", "NLI", "STS"):
        bench = mteb.get_benchmark(f"DisastIR-{intent}")
        assert [t.metadata.name for t in bench.tasks] == [f"DisastIR-{intent}-{c}" for c in
                                                           ("Bio", "Chem", "Env", "Extra", "Geo", "MH", "Soc", "Tech")]
    for name in BENCHMARK_NAMES:  # what the command line checks names against before mteb loads
        assert [t.metadata.name for t in mteb.get_benchmark(name).tasks] == list(benchmark_task_names(name))
    groupings = {g.name: g for g in full.aggregations if hasattr(g, "groups")}
    assert set(groupings) == {"Intent", "Category"}
    assert [g.label for g in groupings["Intent"].groups] == ["QA", "QAdoc", "Twitter", "FC", "NLI", "STS"]


SPLIT_NAMES = SPLIT_TASK_NAMES[Split.test] + SPLIT_TASK_NAMES[Split.devlite]


@pytest.mark.parametrize("name", SPLIT_NAMES, ids=SPLIT_NAMES)
def test_split_task_metadata_is_valid_and_tells_its_query_set(name: str) -> None:
    spec = get_spec(name)
    metadata = mteb.get_task(name).metadata
    full = mteb.get_task(spec.base.name).metadata
    metadata._validate_metadata()
    assert metadata.is_filled() and metadata.name == name and metadata.adapted_from == [spec.base.name]
    assert metadata.description.startswith(f"DisastIR-{'Test' if spec.split is Split.test else 'DevLite'} ")
    assert metadata.dataset["path"] == ("DMIR01/DisastIR" if spec.split is Split.test else "DMIR01/DisastIR-DevLite")
    same = ("main_score", "prompt", "eval_splits", "eval_langs", "domains", "task_subtypes", "license", "type")
    assert all(getattr(metadata, key) == getattr(full, key) for key in same)
    assert type(mteb.get_task(name)).__name__ == spec.class_name and len({*SPLIT_NAMES, *TASK_NAMES}) == 144

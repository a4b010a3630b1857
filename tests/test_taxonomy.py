from __future__ import annotations

from collections.abc import Callable

import pytest
from sentences import says

from disastir_mteb.vocabulary.taxonomy import (
    ALL_TASK_NAMES,
    BENCHMARK_NAMES,
    TASK_NAMES,
    Category,
    Intent,
    canonical_benchmark_name,
    canonical_task_name,
    get_spec,
    parse_category,
    parse_intent,
    parse_task_file,
)

PINNED = [
    f"DisastIR-{i}-{c}"
    for i in ("QA", "QAdoc", "Twitter", "FC", "NLI", "STS")
    for c in ("Bio", "Chem", "Env", "Extra", "Geo", "MH", "Soc", "Tech")
]


def test_the_48_names_are_pinned_in_paper_order() -> None:
    assert list(TASK_NAMES) == PINNED
    assert len(set(TASK_NAMES)) == 48


@pytest.mark.parametrize(("text", "intent"), [
    ("QA", Intent.QA), ("qa", Intent.QA), ("QAdoc", Intent.QAdoc), ("qadoc", Intent.QAdoc),
    ("Twitter", Intent.Twitter), ("TW", Intent.Twitter), ("tw", Intent.Twitter),
    ("FactCheck", Intent.FC), ("FC", Intent.FC), ("fact_check", Intent.FC), ("NLI", Intent.NLI), ("sts", Intent.STS),
])
def test_intent_aliases(text: str, intent: Intent) -> None:
    assert parse_intent(text) is intent


@pytest.mark.parametrize(("text", "category"), [
    ("Bio", Category.Bio), ("biological", Category.Bio), ("CHEMICAL", Category.Chem), ("env", Category.Env),
    ("Extraterrestrial", Category.Extra), ("geohazard", Category.Geo), ("MH", Category.MH),
    ("Meteorological & Hydrological", Category.MH), ("Meteorological&hydrological", Category.MH),
    ("meteorological_hydrological", Category.MH), ("Meteorological and Hydrological", Category.MH),
    ("societal", Category.Soc), ("Technological", Category.Tech),
])
def test_category_aliases(text: str, category: Category) -> None:
    assert parse_category(text) is category


@pytest.mark.parametrize(("stem", "name"), [
    ("FactCheck_Biological", "DisastIR-FC-Bio"),
    ("FactCheck_Biological_qrels", "DisastIR-FC-Bio"),
    ("QA_bio", "DisastIR-QA-Bio"),
    ("QAdoc_Meteorological&hydrological_qrels", "DisastIR-QAdoc-MH"),
    ("QAdoc_Meteorological_Hydrological", "DisastIR-QAdoc-MH"),
    ("TW_extraterrestrial", "DisastIR-Twitter-Extra"),
    ("twitter Societal", "DisastIR-Twitter-Soc"),
    ("NLI-Tech", "DisastIR-NLI-Tech"),
    ("STS_Geohazard", "DisastIR-STS-Geo"),
])
def test_file_stems_map_to_tasks(stem: str, name: str) -> None:
    assert parse_task_file(stem).name == name


@pytest.mark.parametrize("stem", ["README", "QA", "QA_Volcanic", "corpus", "Retrieval_Bio"])
def test_unplaceable_stems_raise_one_clear_error(stem: str) -> None:
    with pytest.raises(ValueError, match="names no task"):
        parse_task_file(stem)


def test_unknown_values_list_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="FactCheck"):
        parse_intent("Summarization")
    with pytest.raises(ValueError, match="Biological"):
        parse_category("Volcanic")
    with pytest.raises(KeyError, match="DisastIR-QA-Bio"):
        get_spec("DisastIR-QA-Bioo")


def test_names_are_taken_in_any_case_and_spelled_as_their_task_or_benchmark() -> None:
    """``disastir-qa-bio`` is ``DisastIR-QA-Bio``, ``DISASTIR-qa`` is ``DisastIR-QA``: the name mteb knows."""
    for name in ALL_TASK_NAMES:
        assert canonical_task_name(name.lower()) == canonical_task_name(name.upper()) == name
    for name in BENCHMARK_NAMES:
        assert canonical_benchmark_name(name.lower()) == canonical_benchmark_name(name.swapcase()) == name
    assert canonical_task_name("scifact") == "scifact"  # another library's: mteb checks it
    assert canonical_benchmark_name("MTEB(eng, v2)") == "MTEB(eng, v2)"


@pytest.mark.parametrize(("spell", "name", "facts"), [
    (canonical_task_name, "disastir-qa-bioo", ["'disastir-qa-bioo'", "DisastIR-QA-Bio"]),
    (canonical_task_name, "DisastIR-qa", ["'DisastIR-qa'", "benchmark", "-b DisastIR-QA"]),
    (canonical_benchmark_name, "DisastIR-QAA", ["'DisastIR-QAA'", "DisastIR-QA", "DisastIR-DevLite"]),
    (canonical_benchmark_name, "disastir-fc-geo", ["'disastir-fc-geo'", "task", "-t DisastIR-FC-Geo"]),
], ids=["task", "benchmark-as-task", "benchmark", "task-as-benchmark"])
def test_a_misspelled_disastir_name_is_one_sentence_with_the_closest(spell: Callable[[str], str], name: str,
                                                                     facts: list[str]) -> None:
    with pytest.raises(KeyError) as raised:
        spell(name)
    says(str(raised.value), *facts)

from __future__ import annotations

import pytest

from disastir_mteb.vocabulary.taxonomy import (
    TASK_NAMES,
    Category,
    Intent,
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

"""Loading the published layout from a local folder: aliases, joins, reports and every error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mteb
import pytest
from sentences import says

from conftest import write_layout
from disastir_mteb.data.layout import find_task_files, resolve_data_dir
from disastir_mteb.data.published import load_task
from disastir_mteb.data.reading import load_corpus
from disastir_mteb.vocabulary.taxonomy import TASK_SPECS, get_spec

CORPUS = {"d1": "Flood warning for the river delta.", "d2": "Boil water before drinking after floods.",
          "d3": "Earthquake drills in schools.", "d4": " Flood warning for the river delta. "}
QUERIES = [{"query_id": "q1", "user_query": "How to prepare for a flood?"},
           {"query_id": "q2", "user_query": "Is tap water safe after a flood?"},
           {"query_id": "q3", "user_query": "A query nobody judged"}]
QRELS = [{"user_query": "How to prepare for a flood?", "passage": "Flood warning for the river delta.", "score": 3},
         {"user_query": "How to prepare for a flood?", "passage": "Earthquake drills in schools.", "score": 0},
         {"user_query": " Is tap water safe after a flood?", "passage": "Boil water before drinking after floods.",
          "score": 2},
         {"user_query": "Unknown query text", "passage": "Boil water before drinking after floods.", "score": 1},
         {"user_query": "How to prepare for a flood?", "passage": "A passage that is not in the corpus", "score": 1}]


def _all_tasks(root: Path) -> Path:
    """A full 48-task folder where every task has the same tiny content."""
    return write_layout(root, CORPUS, {f"{s.intent.value}_{s.category.value}": (QUERIES, QRELS) for s in TASK_SPECS})


def test_local_folder_loads_joins_and_reports(tmp_path: Path, use_data: object) -> None:
    use_data(_all_tasks(tmp_path))
    task = mteb.get_task("DisastIR-QA-Bio")
    task.load_data()
    split = task.dataset["default"]["test"]
    assert split["queries"]["id"] == ["q1", "q2"]  # q3 has no judgement: dropped, as the authors skip it
    # d1 and d4 hold the same stripped text: both copies carry the grade (authors match by text)
    assert split["relevant_docs"] == {"q1": {"d1": 7, "d4": 7, "d3": 0}, "q2": {"d2": 3}}
    report = task.load_report
    assert (report.qrels_rows, report.unmatched_query_rows, report.unmatched_passage_rows) == (5, 1, 1)
    assert report.queries == 3 and report.queries_kept == 2 and report.queries_without_judgements == 1
    assert report.grade_counts == {0: 1, 2: 1, 3: 2} and not report.clean


def test_corpus_is_read_once_and_shared_by_all_tasks(tmp_path: Path, use_data: object) -> None:
    use_data(_all_tasks(tmp_path))
    first, second = mteb.get_task("DisastIR-QA-Bio"), mteb.get_task("DisastIR-STS-Tech")
    first.load_data()
    second.load_data()
    assert first.dataset["default"]["test"]["corpus"] is second.dataset["default"]["test"]["corpus"]
    assert load_corpus(tmp_path / "corpus.jsonl").dataset is first.dataset["default"]["test"]["corpus"]


@pytest.mark.parametrize("style", ["authors", "abbrev", "lower", "ampersand", "spaces"])
def test_every_file_name_style_reaches_all_48_tasks(tmp_path: Path, style: str) -> None:
    def stem(spec: object) -> str:
        from disastir_mteb.vocabulary.taxonomy import CATEGORY_FULL_NAMES, INTENT_FILE_KEYS

        full = CATEGORY_FULL_NAMES[spec.category]
        return {"authors": f"{INTENT_FILE_KEYS[spec.intent]}_{full.replace(' & ', '_')}",
                "abbrev": f"{spec.intent.value}_{spec.category.value}",
                "lower": f"{spec.intent.value.lower()}_{full.lower().replace(' & ', '&')}",
                "ampersand": f"{'TW' if spec.intent.value == 'Twitter' else spec.intent.value}_{full}",
                "spaces": f"{spec.intent.value} {spec.category.value}"}[style]

    write_layout(tmp_path, CORPUS, {stem(s): (QUERIES, QRELS) for s in TASK_SPECS})
    files = find_task_files(tmp_path)
    assert set(files.queries) == set(files.qrels) == set(TASK_SPECS)


def test_sample_data_loads_cleanly_for_every_task(sample_data: Path, use_data: object) -> None:
    use_data(sample_data)
    for spec in TASK_SPECS:
        task = mteb.get_task(spec.name)
        task.load_data()
        assert task.load_report.clean, task.load_report.summary()
        assert task.load_report.queries_kept == task.load_report.queries > 0


# ----------------------------------------------------------------------------- errors


def _expect(tmp_path: Path, match: str, error: type[Exception] = ValueError, name: str = "DisastIR-QA-Bio") -> None:
    with pytest.raises(error, match=match):
        load_task(get_spec(name), find_task_files(tmp_path))


def test_missing_corpus_is_named(tmp_path: Path) -> None:
    _all_tasks(tmp_path)
    (tmp_path / "corpus.jsonl").unlink()
    with pytest.raises(FileNotFoundError) as missing:
        find_task_files(tmp_path)
    says(str(missing.value), tmp_path, "'corpus.jsonl'")


def test_missing_qrels_folder_is_named(tmp_path: Path) -> None:
    _all_tasks(tmp_path)
    shutil.rmtree(tmp_path / "qrels")
    with pytest.raises(FileNotFoundError, match=r"missing 'qrels'"):
        find_task_files(tmp_path)


def test_data_dir_env_must_be_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISASTIR_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="DISASTIR_DATA_DIR"):
        resolve_data_dir("DMIR01/DisastIR", "65525d5")


def test_unplaceable_file_lists_it_and_the_tasks_left_without(tmp_path: Path) -> None:
    _all_tasks(tmp_path)
    (tmp_path / "query" / "QA_Bio.json").rename(tmp_path / "query" / "QA_Biologic.json")
    with pytest.raises(ValueError) as refused:
        find_task_files(tmp_path)
    says(str(refused.value), tmp_path / "query", "1 file(s)", "QA_Biologic.json", "'{intent}_{category}.json'",
         "DisastIR-QA-Bio")


def test_two_files_for_one_task(tmp_path: Path) -> None:
    _all_tasks(tmp_path)
    shutil.copy(tmp_path / "query" / "QA_Bio.json", tmp_path / "query" / "QA_biological.json")
    with pytest.raises(ValueError) as refused:
        find_task_files(tmp_path)
    says(str(refused.value), tmp_path / "query", "'QA_Bio.json'", "'QA_biological.json'", "DisastIR-QA-Bio",
         "remove one")


def test_task_without_file(tmp_path: Path) -> None:
    _all_tasks(tmp_path)
    (tmp_path / "qrels" / "NLI_Soc_qrels.json").unlink()
    load_task(get_spec("DisastIR-QA-Bio"), find_task_files(tmp_path))  # other tasks still load
    _expect(tmp_path, r"no qrels file for task DisastIR-NLI-Soc; 1 of 48", FileNotFoundError, "DisastIR-NLI-Soc")


def test_malformed_json(tmp_path: Path) -> None:
    _all_tasks(tmp_path)
    (tmp_path / "qrels" / "QA_Bio_qrels.json").write_text("[{\"user_query\": ", encoding="utf-8")
    _expect(tmp_path, r"QA_Bio_qrels.json: not valid JSON")


def test_missing_keys(tmp_path: Path) -> None:
    _all_tasks(tmp_path)
    rows = [{"query": "How to prepare for a flood?", "passage": "x", "score": 1}]
    (tmp_path / "qrels" / "QA_Bio_qrels.json").write_text(json.dumps(rows), encoding="utf-8")
    _expect(tmp_path, r"row 0 lacks \['user_query'\]")


@pytest.mark.parametrize("score", [4, -1, 1.5, "2"])
def test_grades_outside_the_scale(tmp_path: Path, score: object) -> None:
    _all_tasks(tmp_path)
    rows = [{"user_query": "How to prepare for a flood?", "passage": CORPUS["d1"], "score": score}]
    (tmp_path / "qrels" / "QA_Bio_qrels.json").write_text(json.dumps(rows), encoding="utf-8")
    _expect(tmp_path, r"grades are integers 0..3")


def test_sts_accepts_grade_five(tmp_path: Path) -> None:
    _all_tasks(tmp_path)
    rows = [{"user_query": "How to prepare for a flood?", "passage": CORPUS["d1"], "score": 5}]
    (tmp_path / "qrels" / "STS_Bio_qrels.json").write_text(json.dumps(rows), encoding="utf-8")
    data = load_task(get_spec("DisastIR-STS-Bio"), find_task_files(tmp_path))
    assert data.relevant_docs["q1"]["d1"] == 31


def test_task_left_without_judgements_fails_with_counts(tmp_path: Path) -> None:
    _all_tasks(tmp_path)
    rows = [{"user_query": "Some other query", "passage": CORPUS["d1"], "score": 1},
            {"user_query": "How to prepare for a flood?", "passage": "not in corpus", "score": 1}]
    (tmp_path / "qrels" / "QA_Bio_qrels.json").write_text(json.dumps(rows), encoding="utf-8")
    _expect(tmp_path, r"Task DisastIR-QA-Bio has no usable judgements: .*QA_Bio_qrels.json has 2 rows, of which 1 name "
                      r"no query of QA_Bio.json \(3 queries\) and 1 name no passage of corpus.jsonl")


def test_duplicate_query_ids(tmp_path: Path) -> None:
    _all_tasks(tmp_path)
    rows = [*QUERIES, {"query_id": "q1", "user_query": "again"}]
    (tmp_path / "query" / "QA_Bio.json").write_text(json.dumps(rows), encoding="utf-8")
    _expect(tmp_path, r"query_id 'q1' appears twice in task DisastIR-QA-Bio")


def test_duplicate_corpus_ids(tmp_path: Path) -> None:
    _all_tasks(tmp_path)
    with (tmp_path / "corpus.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"corpus_id": "d1", "text": "another"}) + "\n")
    _expect(tmp_path, r"1 duplicate corpus_id")


def test_json_lines_files_are_accepted(tmp_path: Path) -> None:
    _all_tasks(tmp_path)
    path = tmp_path / "qrels" / "QA_Bio_qrels.json"
    path.write_text("\n".join(json.dumps(r) for r in QRELS), encoding="utf-8")
    assert load_task(get_spec("DisastIR-QA-Bio"), find_task_files(tmp_path)).report.qrels_rows == 5


def test_hub_snapshot_is_read_offline_from_the_hf_cache(tmp_path: Path, sample_data: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without DISASTIR_DATA_DIR the data come from the Hub snapshot (here: a seeded offline cache)."""
    import huggingface_hub.constants

    revision = "0" * 40
    repo = tmp_path / "datasets--DMIR01--DisastIR"
    shutil.copytree(sample_data, repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "65525d5").write_text(revision)
    monkeypatch.delenv("DISASTIR_DATA_DIR", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert resolve_data_dir("DMIR01/DisastIR", "65525d5") == repo / "snapshots" / revision
    with pytest.raises(FileNotFoundError) as missing:
        resolve_data_dir("DMIR01/DisastIR", "1234567")
    says(str(missing.value), "DMIR01/DisastIR@1234567", "Hugging Face cache", "DISASTIR_DATA_DIR",
         "disastir-mteb sample --out DIR")

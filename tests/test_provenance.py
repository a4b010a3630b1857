"""Provenance: task files record plugin version, gain and data; each set states six facts; the report shows them."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
from pathlib import Path
from typing import Any

import mteb
import pytest
from mteb.cache import ResultCache

from conftest import write_layout
from disastir_mteb.data.layout import describe_data
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.results.provenance import PLAIN_INSTRUCTIONS, PRECISION_NAMES, provenance_of
from disastir_mteb.results.report import write_report
from disastir_mteb.results.result_sets import ResultSet, find_result_sets, load_result_set
from disastir_mteb.runner.run import evaluate
from disastir_mteb.tasks import retrieval as task_module
from disastir_mteb.tasks.retrieval import get_tasks
from disastir_mteb.vocabulary.metadata import DATASET_REPO, DATASET_REVISION
from disastir_mteb.vocabulary.settings import PRECISIONS
from disastir_mteb.vocabulary.task_record import RECORD_KEYS

TASKS = ["DisastIR-QA-Bio", "DisastIR-FC-Geo", "DisastIR-STS-Tech"]
VERSION = importlib.metadata.version("disastir-mteb")
SAMPLE_DATA = "local folder {name} (synthetic sample, scale small, seed 0)"
ANN_DMRETRIEVER = ("dmretriever (template colon)", "ANN (HNSW M=16, ef=64)")


@pytest.fixture(scope="module")
def runs(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, ResultSet]:
    """Real runs on the sample: the runner (exact; ANN with dmretriever instructions), plain mteb, linear gain."""
    out = tmp_path_factory.mktemp("provenance")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISASTIR_DATA_DIR", str(sample_data))
        task_module.forget_data_files()
        run = {"cache_dir": False, "show_progress": False}
        evaluate(HashingEncoder(), TASKS, output_folder=out / "runner", **run)
        evaluate(HashingEncoder(), TASKS[:2], output_folder=out / "runner", search="ann", instructions="dmretriever",
                 **run)
        mteb.evaluate(HashingEncoder(), [mteb.get_task(TASKS[0])], cache=ResultCache(out / "plain"),
                      show_progress_bar=False)  # what `mteb run -t DisastIR-QA-Bio` does: no runner, no per-query files
        patch.setenv("DISASTIR_GAIN", "linear")
        evaluate(HashingEncoder(), TASKS[:1], output_folder=out / "linear", **run)
        task_module.forget_data_files()
    sets = {load_result_set(folder).search: load_result_set(folder) for folder in find_result_sets(out / "runner")}
    return {"exact": sets["exact"], "ann": next(s for k, s in sets.items() if k != "exact"),
            "plain": load_result_set(find_result_sets(out / "plain")[0]),
            "linear": load_result_set(find_result_sets(out / "linear")[0])}


def _files(result: ResultSet) -> list[Path]:
    return sorted(result.folder.glob("DisastIR-*.json"))


def _copy(result: ResultSet, to: Path, edit: Any = None) -> ResultSet:
    """A copy of the set's folder, each task file's score block passed through ``edit(task, block)``."""
    shutil.copytree(result.folder, to, ignore=shutil.ignore_patterns("experiments"))
    for path in _files(load_result_set(to)):
        data = json.loads(path.read_text())
        if edit is not None:
            edit(path.stem, data["scores"]["test"][0])
        path.write_text(json.dumps(data))
    return load_result_set(to)


def test_every_task_file_records_version_gain_and_data(runs: dict[str, ResultSet], sample_data: Path) -> None:
    expected = {"disastir_version": VERSION, "disastir_gain": "exponential",
                "disastir_data": SAMPLE_DATA.format(name=sample_data.name)}
    for name in ("exact", "ann", "plain"):
        for path in _files(runs[name]):
            text = path.read_text()
            block = json.loads(text)["scores"]["test"][0]
            assert {key: block[key] for key in RECORD_KEYS} == expected, (name, path.name)
            assert str(sample_data) not in text  # no local path in a file people submit
            assert block["main_score"] == block["ndcg_at_10"]
            loaded = mteb.TaskResult.from_disk(path)  # mteb still reads it, main score unchanged
            assert loaded.get_score() == block["main_score"]
            assert loaded.scores["test"][0]["disastir_gain"] == "exponential"
    results = ResultCache(runs["plain"].folder.parents[2]).load_results(tasks=[TASKS[0]])
    assert [r.get_score() for m in results.model_results for r in m.task_results] == [runs["plain"].scores[TASKS[0]]]
    linear = json.loads(_files(runs["linear"])[0].read_text())["scores"]["test"][0]
    assert linear["disastir_gain"] == "linear" and linear["main_score"] == linear["ndcg_at_10"]


def test_the_data_string_names_the_hub_revision_or_a_folder_never_its_path(tmp_path: Path, use_data: Any) -> None:
    own = write_layout(tmp_path / "deep" / "own-data", {"d1": "text"},
                       {"QA_Bio": ([{"query_id": "q1", "user_query": "q"}],
                                   [{"user_query": "q", "passage": "text", "score": 2}])})
    assert describe_data(None, repo=DATASET_REPO, revision=DATASET_REVISION) == f"hf:DMIR01/DisastIR@{DATASET_REVISION}"
    assert describe_data(own, repo=DATASET_REPO, revision=DATASET_REVISION) == "local folder own-data"  # no marker
    use_data(own)
    (task,) = get_tasks(["QA"], ["Bio"], gain="linear")
    task.load_data()
    record = task.task_specific_scores({}, {}, {}, "test", "default")  # what a run on that folder records
    assert {key: record[key] for key in RECORD_KEYS} == {"disastir_version": VERSION, "disastir_gain": "linear",
                                                        "disastir_data": "local folder own-data"}


def test_provenance_of_runner_sets(runs: dict[str, ResultSet], sample_data: Path) -> None:
    exact = provenance_of(runs["exact"])
    assert (exact.plugin_version, exact.dataset, exact.synthetic, exact.gain, exact.gain_inferred) == (
        VERSION, SAMPLE_DATA.format(name=sample_data.name), True, "exponential", False)
    assert (exact.instructions, exact.search, exact.precision) == (PLAIN_INSTRUCTIONS[None], "exact", None)
    ann = provenance_of(runs["ann"])
    assert (ann.instructions, ann.search) == ANN_DMRETRIEVER and ann.dataset == exact.dataset
    assert provenance_of(runs["linear"]).gain == "linear"
    plain = provenance_of(runs["plain"])  # plain mteb: no per-query files, the task files say it all
    assert (plain.plugin_version, plain.dataset, plain.synthetic) == (VERSION, exact.dataset, True)
    assert exact.fields() == [
        ("Plugin version", VERSION), ("Data", exact.dataset), ("Gain", "exponential"),
        ("Instructions", "model's own, if any (plain run)"), ("Search", "exact"), ("Precision", "not recorded")]
    assert exact.one_line() == (f"plugin version: {VERSION}; data: {exact.dataset}; gain: exponential; instructions: "
                                "model's own, if any (plain run); search: exact; precision: not recorded")
    assert exact.conflicts() == []


def test_precision_and_instructions_of_a_real_model(bundled_model: object, tmp_path: Path, use_data: Any) -> None:
    assert PRECISION_NAMES == {dtype: name for name, dtype in PRECISIONS.items()}  # one vocabulary with --precision
    surge = "Evacuate before the surge."
    data = write_layout(tmp_path / "data", {"d0": surge, "d1": "Boil water after floods."},
                        {"QA_Bio": ([{"query_id": "q0", "user_query": "storm surge?"}],
                                    [{"user_query": "storm surge?", "passage": surge, "score": 3}])})
    use_data(data)
    evaluate(bundled_model, ["DisastIR-QA-Bio"], cache_dir=False, output_folder=tmp_path / "r", show_progress=False)
    result = load_result_set(find_result_sets(tmp_path / "r")[0])
    minilm = provenance_of(result)  # registry MiniLM: use_instructions False, float32 weights
    assert (minilm.instructions, minilm.precision, minilm.dataset, minilm.synthetic) == (
        "none (plain run)", "fp32", "local folder data", False)
    cast = ResultSet(folder=result.folder, model=result.model, revision=result.revision, scores=result.scores,
                     meta=result.meta, experiment={"disastir_precision": "bf16", "disastir_instructions": "model",
                                 "disastir_template": "model"})
    assert (provenance_of(cast).precision, provenance_of(cast).instructions) == ("bf16", "model's own")
    passages = ResultSet(folder=result.folder, model=result.model, revision=result.revision, scores=result.scores,
                         meta=result.meta,
                         experiment={"disastir_instructions": "disastir", "disastir_template": "colon",
                                     "disastir_passages": "instructed"})
    assert provenance_of(passages).instructions == "disastir (template colon), also on passages"


def test_old_files_say_not_recorded_and_the_gain_is_inferred(runs: dict[str, ResultSet], tmp_path: Path) -> None:
    def strip(task: str, block: dict[str, Any]) -> None:
        for key in RECORD_KEYS:
            del block[key]

    old = provenance_of(_copy(runs["plain"], tmp_path / "old", strip))  # plain mteb run before the record
    assert (old.plugin_version, old.synthetic, old.gain, old.gain_inferred) == (None, None, "exponential", True)
    assert old.dataset == f"DMIR01/DisastIR@{DATASET_REVISION} (declared by the task)"
    assert dict(old.fields())["Plugin version"] == "not recorded"
    assert dict(old.fields())["Gain"] == "exponential (inferred from the scores)"
    assert provenance_of(_copy(runs["linear"], tmp_path / "old-linear", strip)).gain == "linear"

    def tied(task: str, block: dict[str, Any]) -> None:  # both variants equal: nothing to infer from
        strip(task, block)
        block["ndcg_at_10_linear_gain"] = block["ndcg_at_10_exponential_gain"]

    assert provenance_of(_copy(runs["plain"], tmp_path / "tied", tied)).gain is None


def test_disagreeing_tasks_are_shown_not_hidden(runs: dict[str, ResultSet], tmp_path: Path) -> None:
    def resumed(task: str, block: dict[str, Any]) -> None:  # one task scored by an older plugin, one before the record
        if task == "DisastIR-QA-Bio":
            block["disastir_version"] = "0.0.9"
        if task == "DisastIR-STS-Tech":
            del block["disastir_version"]

    mixed = provenance_of(_copy(runs["exact"], tmp_path / "mixed", resumed))
    assert mixed.plugin_version == f"0.0.9, {VERSION}, not recorded"
    assert mixed.conflicts() == [f"Plugin version: 0.0.9 in 1 task (DisastIR-QA-Bio); {VERSION} in 1 task "
                                 "(DisastIR-FC-Geo); not recorded in 1 task (DisastIR-STS-Tech)"]


def test_report_shows_a_provenance_table(runs: dict[str, ResultSet], sample_data: Path, tmp_path: Path) -> None:
    def older(task: str, block: dict[str, Any]) -> None:
        if task == "DisastIR-QA-Bio":
            block["disastir_version"] = "0.0.9"

    sets = [runs["exact"], runs["ann"], _copy(runs["exact"], tmp_path / "resumed", older)]
    write_report(sets, tmp_path / "report", formats=["md"])
    markdown = (tmp_path / "report" / "report.md").read_text()
    data = SAMPLE_DATA.format(name=sample_data.name)
    assert "## Provenance\n" in markdown
    assert "| model | plugin version | data | gain | instructions | search | precision |" in markdown
    assert (f"| disastir-mteb/hashing-encoder | {VERSION} | {data} | exponential | model's own, if any (plain run) "
            "| exact | not recorded |") in markdown
    assert f"| {VERSION} | {data} | exponential | {' | '.join(ANN_DMRETRIEVER)} | not recorded |" in markdown
    assert f"| 0.0.9, {VERSION} | " in markdown
    assert "its tasks disagree. Plugin version: 0.0.9 in 1 task (DisastIR-QA-Bio); " in markdown
    assert markdown.index("## Provenance") < markdown.index("## disastir-mteb/hashing-encoder — exact")
    assert "Data:" not in markdown and str(sample_data) not in markdown  # said once, by folder name

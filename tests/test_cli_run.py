"""`disastir-mteb run` with the bundled model: three instruction settings, three labelled records.

The data here is a tiny hand-made folder in the published layout, so that the three runs (three
corpus encodings) stay fast; the same command on the bundled sample is in the README.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sentences import says

from conftest import write_layout
from disastir_mteb import cli
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.runner.run import evaluate
from disastir_mteb.runner.task_selection import resolve_tasks
from disastir_mteb.vocabulary.taxonomy import Category

PASSAGES = {f"d{i}": text for i, text in enumerate([
    "Evacuate low-lying coastal areas before the storm surge arrives.",
    "Boil tap water for one minute after flooding.",
    "Aftershocks can continue for weeks after a major earthquake.",
    "Keep a battery radio for official warnings during hurricanes.",
    "Wildfire smoke harms people with asthma; stay indoors.",
])}
QUERIES = ["What should coastal residents do before a storm surge?", "Is tap water safe after a flood?",
           "How long do aftershocks last?"]


@pytest.fixture
def data_dir(tmp_path: Path, use_data: object) -> Path:
    qrels = [{"user_query": q, "passage": PASSAGES[f"d{i}"], "score": 3} for i, q in enumerate(QUERIES)]
    qrels += [{"user_query": q, "passage": PASSAGES["d4"], "score": 1} for q in QUERIES]
    queries = [{"query_id": f"q{i}", "user_query": q} for i, q in enumerate(QUERIES)]
    root = write_layout(tmp_path / "data", PASSAGES, {"QA_Bio": (queries, qrels)})
    use_data(root)
    return root


def test_three_instruction_sets_give_three_labelled_result_sets(data_dir: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    for name in ("disastir", "dmretriever", "none"):
        code = cli.main(["run", "-m", "bundled", "--data", str(data_dir), "-t", "DisastIR-QA-Bio",
                         "--instructions", name, "--output-folder", str(out), "--quiet"])
        assert code == 0
    assert "QA" in capsys.readouterr().out

    metas = {}
    scores = {}
    for result in out.rglob("DisastIR-QA-Bio.json"):
        meta = json.loads((result.parent / "model_meta.json").read_text())
        label = meta["experiment_kwargs"]["disastir_instructions"]
        metas[label] = meta["experiment_kwargs"]
        scores[label] = json.loads(result.read_text())["scores"]["test"][0]["ndcg_at_10"]
        assert result.parent.parent.name == "experiments"
    assert metas == {
        "disastir": {"disastir_instructions": "disastir", "disastir_template": "instruct-query"},
        "dmretriever": {"disastir_instructions": "dmretriever", "disastir_template": "colon"},
        "none": {"disastir_instructions": "none", "disastir_template": "raw"},
    }
    assert all(0 < s <= 1 for s in scores.values()), scores


def test_run_errors_are_one_sentence(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["run", "-m", "bundled", "-t", "DisastIR-QA-Bioo", "--output-folder", str(tmp_path)])
    assert code == 2
    says(capsys.readouterr().err, "disastir-mteb run:", "'DisastIR-QA-Bioo'", "DisastIR-QA-Bio")
    code = cli.main(["run", "-m", "bundled", "-t", "DisastIR-QA-Bio", "--instructions", "disaster",
                     "--output-folder", str(tmp_path)])
    assert code == 2
    says(capsys.readouterr().err, "disastir-mteb run:", "'disaster'", "disastir")
    code = cli.main(["run", "-m", "bundled", "-t", "DisastIR-QA-Bio", "--search", "ann", "--connectivity", "0",
                     "--output-folder", str(tmp_path)])
    assert code == 2
    says(capsys.readouterr().err, "disastir-mteb run:", "AnnParams.connectivity=0", ">= 2")


def test_batch_size_precision_and_tokenisation_options(data_dir: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    code = cli.main(["run", "-m", "bundled", "--data", str(data_dir), "-t", "DisastIR-QA-Bio", "--batch-size", "2",
                     "--precision", "bf16", "--tokenize-threads", "2", "--no-cache", "--output-folder", str(out),
                     "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert ("Passages: 5 texts in length-sorted batches of 2 (bfloat16, cpu) via pipelined, tokenised by 2 thread(s) "
            "ahead of the model; max_seq_length 256, 0 at the limit (truncated)") in printed
    [result] = out.rglob("DisastIR-QA-Bio.json")
    assert result.parent.name == "disastir_precision_bf16"  # another precision, another results folder
    with pytest.raises(SystemExit) as exited:  # argparse refuses it before anything is imported or loaded
        cli.main(["run", "-m", "bundled", "-t", "DisastIR-QA-Bio", "--batch-size", "0", "--output-folder",
                  str(tmp_path)])
    assert exited.value.code == 2
    says(capsys.readouterr().err, "--batch-size", ">= 1", "0")


def test_task_and_benchmark_names_are_taken_in_any_case(data_dir: Path, tmp_path: Path) -> None:
    """``-t disastir-qa-bio`` runs DisastIR-QA-Bio, as ``evaluate(tasks=[...])`` and ``-b disastir-qa`` take theirs.

    Before: mteb's ``KeyError`` traceback after the imports, 22-42 s into the run.
    """
    out = tmp_path / "results"
    assert cli.main(["run", "-m", "disastir-mteb/hashing-encoder", "--data", str(data_dir), "-t", "disastir-qa-bio",
                     "--no-cache", "--output-folder", str(out), "--quiet"]) == 0
    assert len(list(out.rglob("DisastIR-QA-Bio.json"))) == 1 and not list(out.rglob("disastir-qa-bio*"))
    result = evaluate(HashingEncoder(), ["DISASTIR-QA-BIO"], data=data_dir, cache_dir=False,
                      output_folder=tmp_path / "python", show_progress=False)
    assert [task_result.task_name for task_result in result.task_results] == ["DisastIR-QA-Bio"]
    assert ([task.metadata.name for task in resolve_tasks(benchmarks=["disastir-qa"])]
            == [f"DisastIR-QA-{category.value}" for category in Category])

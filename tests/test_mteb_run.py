"""`mteb run` in a subprocess, offline: the plugin is found without import, the result is the authors' number."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from authors_metric import authors_ndcg_at_10
from disastir_mteb.data.published import find_task_files
from disastir_mteb.models.bundled import BUNDLED_MODEL, seed_hf_cache
from disastir_mteb.vocabulary.taxonomy import get_spec

ROUNDED = 1e-6  # mteb stores task scores rounded to 6 decimals (ndcg_at_10 to 5)


@pytest.fixture(scope="module")
def sample_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sample of 300 passages, 3 queries per task with 14 judgements each: mteb's own search encodes the whole
    corpus, which for the 1,500 passages of the small sample was most of this file's time."""
    from disastir_mteb.sample.generator import SampleScale, write_sample

    scale = SampleScale("tiny", n_passages=300, queries_per_task=3, judged_per_query=14, passage_words=32)
    return write_sample(tmp_path_factory.mktemp("tiny") / "data", scale=scale)


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hf-hub")
    seed_hf_cache(root)
    return root


def test_mteb_run_cli_scores_like_the_authors(sample_data: Path, hub_cache: Path, tmp_path: Path) -> None:
    mteb_cli = Path(sys.executable).with_name("mteb")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub_cache), "DISASTIR_DATA_DIR": str(sample_data),
           "COLUMNS": "400"}  # mteb logs through rich, which would wrap the lines checked below
    env.pop("DISASTIR_MTEB_AUTOLOAD", None)
    proc = subprocess.run(
        [str(mteb_cli), "run", "-m", BUNDLED_MODEL, "-t", "DisastIR-QA-Bio", "--output-folder", str(tmp_path / "out"),
         "--prediction-folder", str(tmp_path / "pred"), "--batch-size", "64"],
        capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    logged = proc.stdout + proc.stderr  # mteb run -v 2 (its default) shows the task's load report and its score
    assert "DisastIR-QA-Bio: 3/3 queries, 42 judgements from 42 qrels rows" in logged
    assert re.search(r"DisastIR-QA-Bio: ndcg@10 \d+\.\d\d over 3 queries", logged)

    files = list((tmp_path / "out").rglob("DisastIR-QA-Bio.json"))
    assert len(files) == 1, list((tmp_path / "out").rglob("*"))
    result = json.loads(files[0].read_text())
    assert files[0].parent.parent.name == "sentence-transformers__all-MiniLM-L6-v2"
    assert (files[0].parent / "model_meta.json").is_file()
    assert result["task_name"] == "DisastIR-QA-Bio" and result["dataset_revision"]
    scores = result["scores"]["test"][0]
    assert scores["hf_subset"] == "default" and scores["languages"] == ["eng-Latn"]
    assert scores["main_score"] == scores["ndcg_at_10"]
    assert (scores["disastir_gain"], scores["disastir_data"]) == (  # the task's record, under plain mteb run too
        "exponential", f"local folder {sample_data.name} (synthetic sample, scale tiny, seed 0)")
    assert scores["disastir_version"] == importlib.metadata.version("disastir-mteb")
    assert 0.05 < scores["ndcg_at_10"] < 0.999  # a real model on varied texts: neither random nor perfect

    predictions = json.loads((tmp_path / "pred" / "DisastIR-QA-Bio_predictions.json").read_text())["default"]["test"]
    ranked = {q: sorted(docs, key=lambda d: (docs[d], d), reverse=True) for q, docs in predictions.items()}
    query_file, qrels_file = find_task_files(sample_data).for_task(get_spec("DisastIR-QA-Bio"))
    expected = authors_ndcg_at_10(query_file, qrels_file, sample_data / "corpus.jsonl", ranked)
    assert scores["ndcg_at_10"] == pytest.approx(expected, abs=1e-5)
    assert scores["ndcg_at_10_exponential_gain"] == pytest.approx(expected, abs=ROUNDED)

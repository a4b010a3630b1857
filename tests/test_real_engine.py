"""The judge against a real llama.cpp ``llama-server`` (SmolLM2-135M-Instruct Q4_1), when one is built here.

Marked ``real_engine``: it runs where ``benchmarks/llama_engine.py`` has built the server into the cache folder
(``python benchmarks/llama_engine.py``, minutes, once) and is skipped elsewhere (CI does not build it). What it
checks is what the loopback servers stand in for: the real engine honours ``response_format`` ``json_schema`` (every
answer readable), gives logprobs at the grade token under the schema (so grade probabilities are stored), and a pool
study runs through it end to end.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from llama_engine import MODEL_ALIAS, LlamaServer, built_server, smollm2_gguf

from disastir_mteb import cli
from disastir_mteb.judging.store import JudgementStore

pytestmark = [pytest.mark.real_engine,
              pytest.mark.skipif(built_server() is None, reason="no llama-server built here (python "
                                 "benchmarks/llama_engine.py builds it once)")]

TASK = "DisastIR-STS-Geo"


@pytest.fixture(scope="module")
def server() -> LlamaServer:
    with LlamaServer(built_server(), smollm2_gguf()) as running:  # type: ignore[arg-type]
        yield running


def test_a_real_llama_server_answers_every_step_readably_with_grade_probabilities(
        server: LlamaServer, sample_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.runner.run import evaluate

    for dim in (128, 384, 768):
        evaluate(HashingEncoder(dim=dim, name=f"disastir-mteb/hashing-{dim}"), [TASK], cache_dir=False,
                 output_folder=tmp_path / "runs", show_progress=False, data=sample_data)
    store = tmp_path / "j.sqlite"
    code = cli.main(["judge", str(tmp_path / "runs"), "--model", MODEL_ALIAS, "--base-url", server.base_url,
                     "--store", str(store), "--agreement", "8", "--yes", "--quiet", "-t", TASK, "--data",
                     str(sample_data), "--concurrency", "2"])
    printed = capsys.readouterr().out
    assert code in (0, 1)  # 1: below the band, stopped before the holes (a 135M judge)
    with JudgementStore(store) as opened:
        judged = list(opened.judgements(judge_model=MODEL_ALIAS))
        counts = opened.counts()
        learned = opened.learned_format(server.base_url, MODEL_ALIAS)
    assert len(judged) >= 8 and counts["unparseable"] == 0  # grammar-constrained: every answer readable
    assert all(j.p_relevant is not None and 0 <= j.p_relevant <= 1 for j in judged)
    assert learned == ("json_schema", True)
    assert "Grade probabilities (read at the grade token" in printed

    study = tmp_path / "study.json"
    runs = sorted(str(path.parent) for path in (tmp_path / "runs").rglob("model_meta.json"))
    assert cli.main(["judge-study", *runs, "--model", MODEL_ALIAS, "--base-url", server.base_url, "--store",
                     str(store), "--yes", "--quiet", "-t", TASK, "--data", str(sample_data), "--json",
                     str(study)]) == 0
    assert len(json.loads(study.read_text())["runs"]) == 3

"""The leave-one-run-out pool study: real runs (five hashing encoders on the sample), a real judge server on loopback.

A judge answering each pair's published grade must give every run its official NDCG@10 back exactly, (c) = (a); one
flipping relevance on a growing, nested share of the pairs must lose the official ranking step by step.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from judge_servers import JudgeServer, constrained
from loopback import grade_judge
from sentences import says

from disastir_mteb import cli
from disastir_mteb.judging.holes import load_task_texts, result_sets_of
from disastir_mteb.judging.pool_study import run_study
from disastir_mteb.judging.settings import JudgeSettings
from disastir_mteb.judging.store import JudgementStore
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.runner.run import evaluate
from disastir_mteb.vocabulary.taxonomy import MAX_GRADE, get_spec

TASKS = ["DisastIR-STS-Geo", "DisastIR-STS-Bio", "DisastIR-FC-Chem", "DisastIR-STS-Env", "DisastIR-FC-Soc"]
MODEL = "judge-model"
DIMS = (256, 320, 384, 512, 768)  # close in quality: a judge's flips can reorder them


@pytest.fixture(scope="module")
def runs(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Five result sets of the same tasks on the sample: hashing encoders of five widths (five rankings)."""
    root = tmp_path_factory.mktemp("study-runs")
    for dim in DIMS:
        evaluate(HashingEncoder(dim=dim, name=f"disastir-mteb/hashing-{dim}"), TASKS, cache_dir=False,
                 output_folder=root, show_progress=False, data=sample_data)
    return sorted(path.parent for path in root.rglob("model_meta.json"))


@pytest.fixture(scope="module")
def scales(sample_data: Path) -> dict[tuple[str, str], tuple[int, int]]:
    """Every published (query text, passage text) of the study's tasks -> (grade, the top of its intent's scale)."""
    found = {}
    for task in TASKS:
        texts = load_task_texts(task, sample_data)
        for query, judged in texts.grades.items():
            for doc, grade in judged.items():
                found[texts.queries[query], texts.passages[doc]] = (grade, MAX_GRADE[get_spec(task).intent])
    return found


@pytest.fixture(scope="module")
def published(scales: dict[tuple[str, str], tuple[int, int]]) -> dict[tuple[str, str], int]:
    return {pair: grade for pair, (grade, _) in scales.items()}


def _flipped(scales: dict[tuple[str, str], tuple[int, int]], share: float) -> dict[tuple[str, str], int]:
    """Relevance flipped on the pairs whose digest falls below ``share`` (nested: a larger share flips a superset):
    a relevant pair graded 0, an irrelevant one the top of its scale."""
    flipped = {}
    for (query, passage), (grade, top) in scales.items():
        draw = int(hashlib.sha256(f"{query}\0{passage}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        flipped[query, passage] = (0 if grade > 0 else top) if draw < share else grade
    return flipped


def _study(runs: list[Path], grades: dict[tuple[str, str], int], store: Path, sample_data: Path) -> Any:
    with JudgeServer(constrained(grade_judge(grades))) as server, JudgementStore(store) as opened:
        settings = JudgeSettings(MODEL, (server.base_url,), concurrency=4)
        study = run_study(result_sets_of(runs), store=opened, settings=settings, data_dir=sample_data,
                          say=lambda line: None)
        return study, len(server.requests)


def test_a_judge_answering_the_published_grades_gives_every_run_its_official_score(
        runs: list[Path], published: dict[tuple[str, str], int], sample_data: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "study.json"
    with JudgeServer(constrained(grade_judge(published))) as server:
        assert cli.main(["judge-study", *map(str, runs), "--model", MODEL, "--base-url", server.base_url, "--store",
                         str(tmp_path / "j.sqlite"), "--yes", "--quiet", "--json", str(out), "--data",
                         str(sample_data)]) == 0
        asked = len(server.requests)
    printed = capsys.readouterr().out
    study = json.loads(out.read_text())
    assert len(study["runs"]) == len(DIMS) and sorted(study["tasks"]) == sorted(TASKS)
    for run in study["runs"]:
        assert run["judged"] == run["official"]  # exactly: the hidden grades came back as they were
        assert run["filled"] == run["unique_pairs"]
    assert any(run["holes"] != run["official"] for run in study["runs"])  # the holes did move the scores
    assert sum(run["unique_pairs"] for run in study["runs"]) > 0 and asked > 0
    assert study["tau_judged"] == 1.0
    assert "Pool study (leave one run out) of 5 runs over 5 task(s)" in printed and "Kendall's tau-b" in printed

    with JudgeServer(constrained(grade_judge(published))) as server:  # again: every judgement from the store
        assert cli.main(["judge-study", *map(str, runs), "--model", MODEL, "--base-url", server.base_url, "--store",
                         str(tmp_path / "j.sqlite"), "--yes", "--quiet", "--data", str(sample_data)]) == 0
        assert server.requests == []


def test_a_judge_flipping_relevance_loses_the_ranking_step_by_step(
        runs: list[Path], scales: dict[tuple[str, str], tuple[int, int]], sample_data: Path, tmp_path: Path) -> None:
    taus, errors = [], []
    for share in (0.0, 0.25, 0.5, 1.0):
        study, _ = _study(runs, _flipped(scales, share), tmp_path / f"j-{share}.sqlite", sample_data)
        taus.append(study.tau_judged)
        errors.append(sum(abs(run.judged - run.official) for run in study.runs))
    assert taus[0] == 1.0 and errors[0] == 0.0
    assert all(later <= earlier for earlier, later in itertools.pairwise(taus)), taus
    assert all(later >= earlier for earlier, later in itertools.pairwise(errors)), errors
    assert taus[-1] < 1.0 and errors[-1] > 0.0


def test_fewer_than_three_runs_is_one_sentence(runs: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["judge-study", *map(str, runs[:2]), "--model", MODEL, "--base-url", "http://127.0.0.1:9/v1",
                     "--yes"]) == 2
    says(capsys.readouterr().err, "disastir-mteb judge-study:", "at least 3 result sets", "same data", "2 given")

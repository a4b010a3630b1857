"""The demo: bundled model on the bundled sample, all 48 tasks, one corpus encoding, a full grid."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from disastir_mteb.vocabulary.task_record import SYNTHETIC_NOTICE
from disastir_mteb.vocabulary.taxonomy import TASK_NAMES


def test_demo_evaluates_all_48_tasks_with_one_corpus_encoding(
        cache_dir: Path, sample_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb.demo import run_demo
    from disastir_mteb.tasks import retrieval as tasks

    monkeypatch.setenv("DISASTIR_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("DISASTIR_DATA_DIR", "")  # the demo hands the sample to its tasks itself
    tasks.forget_data_files()
    spent: list = []
    grid = run_demo(output_folder=tmp_path / "results", show_progress=False, report=tmp_path / "report",
                    timings=spent.append)
    tasks.forget_data_files()
    assert os.environ["DISASTIR_DATA_DIR"] == ""  # the tasks were given the sample: the environment is untouched

    assert set(grid.scores) == set(TASK_NAMES)
    assert all(0.0 < s < 1.0 for s in grid.scores.values())
    assert grid.overall() is not None and 0.05 < grid.overall() < 0.99
    out = capsys.readouterr().out
    assert f"48 task result(s) in {(tmp_path / 'results').resolve()}" in out
    assert "search: exact (blocked inner product), 1 index build(s)" in out
    assert SYNTHETIC_NOTICE in out  # as `run --data sample` says it
    assert "QAdoc" in out and "Mean" in out and f"{100 * grid.overall():.2f}" in out
    written = [path for path in (tmp_path / "results").rglob("DisastIR-*.json") if path.stem in TASK_NAMES]
    assert len(written) == 48
    assert len(list((tmp_path / "results").rglob("*_per_query.json"))) == 48
    report = (tmp_path / "report" / "report.md").read_text()
    heatmap = next((tmp_path / "report").glob("heatmap-*.png"))
    assert heatmap.name in report and heatmap.read_bytes()[:4] == b"\x89PNG" and "Report with heatmap" in out
    assert json.loads(written[0].read_text())["scores"]["test"][0]["main_score"] > 0
    [timings] = spent  # the run's table, the report included (as writing), printed last
    assert out.rstrip().endswith(timings.to_text()) and timings.phases["writing"] > 0
    assert abs(sum(timings.phases.values()) - timings.total) < 1e-6
    assert f"; {timings.passages_encoded} passages and {timings.queries_encoded} queries encoded;" in out
    assert out.count(" s wall clock") == 1 and " s; results in" not in out  # one total: the table's (it printed two)

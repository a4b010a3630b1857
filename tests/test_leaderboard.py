"""The DisastIR leaderboard: mteb's own gradio app, offline, the demo's run beside the paper's models.

Real mteb app, real gradio, the demo's real MiniLM results; the page check loads it in headless
Chromium (skipped without one, except in CI, where `.ci/run` installs it and a missing browser fails).
"""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

import pytest

from disastir_mteb import cli
from disastir_mteb.benchmark.taxonomy import TASK_NAMES
from disastir_mteb.results.leaderboard_rows import (
    PUBLISHED_MARK,
    SYNTHETIC_MARK,
    published_rows,
    result_rows,
)

pytest.importorskip("gradio", reason="the leaderboard extra is part of the test extra")

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def runs(cache_dir: Path, sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's results (bundled MiniLM, 48 tasks), an ANN run and a DisastIR-Test run of 6 tasks, in one folder."""
    from disastir_mteb.benchmark import tasks
    from disastir_mteb.demo import run_demo

    out = tmp_path_factory.mktemp("leaderboard") / "results"
    saved = {name: os.environ.get(name) for name in ("DISASTIR_CACHE_DIR", "DISASTIR_DATA_DIR")}
    os.environ["DISASTIR_CACHE_DIR"] = str(cache_dir)  # embeddings the demo test already computed
    try:
        tasks._task_files.cache_clear()
        run_demo(output_folder=out, show_progress=False, report=None)
        assert cli.main(["run", "-m", "bundled", "--data", "sample", "--search", "ann", "--ann-threads", "1",
                         "-t", *TASK_NAMES[:6], "--output-folder", str(out), "--cache-dir", str(cache_dir),
                         "--quiet"]) == 0
        assert cli.main(["run", "-m", "bundled", "--data", "sample", "--split", "test", "-t", *TASK_NAMES[:6],
                         "--output-folder", str(out), "--cache-dir", str(cache_dir), "--quiet"]) == 0
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        tasks._task_files.cache_clear()
    return out


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_rows_say_what_each_is(runs: Path) -> None:
    rows = {row.name: row for row in result_rows([runs, runs / "results"])}  # the same sets twice count once
    plain = f"{MINILM} — {SYNTHETIC_MARK}"
    ann = next(name for name in rows if "ANN (HNSW M=16, ef=64)" in name)
    test = f"{MINILM} — DisastIR-Test — {SYNTHETIC_MARK}"
    assert set(rows) == {plain, ann, test}
    assert len(rows[plain].scores) == 48 and len(rows[ann].scores) == 6
    assert sorted(rows[test].scores) == sorted(f"DisastIR-Test-{name.removeprefix('DisastIR-')}"
                                               for name in TASK_NAMES[:6])
    assert rows[ann].short_name.startswith("all-MiniLM-L6-v2 — ANN") and SYNTHETIC_MARK in rows[ann].short_name
    details = dict(rows[plain].details)
    assert details["Search"] == "exact" and details["Gain"].startswith("exponential")
    assert details["Plugin version"] not in ("", "not recorded") and "synthetic" in details["Data"]

    published = published_rows()
    assert len(published) == 30 and all(row.name.endswith(PUBLISHED_MARK) and row.published for row in published)
    assert all(set(row.scores) == set(TASK_NAMES) for row in published)
    best = published[0]  # the paper's Table 3: inf-retriever-v1 first, 68.52 exact
    assert best.model == "infly/inf-retriever-v1"
    assert round(100 * sum(best.scores.values()) / 48, 2) == 68.52


def test_the_same_run_in_two_folders_is_refused(runs: Path, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(runs, tmp_path / "copy")
    with pytest.raises(ValueError, match="hold the same run"):
        result_rows([runs, tmp_path / "copy"])
    assert cli.main(["leaderboard", str(tmp_path / "nothing"), "--no-published"]) == 2


def test_mteb_internals_the_page_needs_are_there_and_restored() -> None:
    """The canary: if mteb renames what leaderboard_patch touches, this fails before users see a broken page."""
    import mteb.leaderboard.app as app
    import mteb.leaderboard.table as table
    from mteb.models.model_implementations import MODEL_REGISTRY

    from disastir_mteb.leaderboard import _menu
    from disastir_mteb.leaderboard_patch import missing, patched

    assert missing() == []
    before = (app.GP_BENCHMARK_ENTRIES, app.R_BENCHMARK_ENTRIES, app.DEFAULT_BENCHMARK_NAME,
              table._apply_summary_table_styling, len(MODEL_REGISTRY))
    meta = MODEL_REGISTRY[MINILM].model_copy(update={"name": "someone/thing (published: x)"})
    with patched(_menu(), "DisastIR", [meta]):
        assert [entry.name for entry in app.GP_BENCHMARK_ENTRIES] == ["Disaster management"]
        assert app.DEFAULT_BENCHMARK_NAME == "DisastIR" and "someone/thing (published: x)" in MODEL_REGISTRY
    assert (app.GP_BENCHMARK_ENTRIES, app.R_BENCHMARK_ENTRIES, app.DEFAULT_BENCHMARK_NAME,
            table._apply_summary_table_styling, len(MODEL_REGISTRY)) == before


def test_a_changed_mteb_gets_a_warning_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    import mteb.leaderboard.app as app

    from disastir_mteb.leaderboard_patch import missing, patched

    monkeypatch.delattr(app, "R_BENCHMARK_ENTRIES")
    assert missing() == ["mteb.leaderboard.app.R_BENCHMARK_ENTRIES"]
    with pytest.warns(UserWarning, match=r"changed its leaderboard app \(mteb.leaderboard.app.R_BENCHMARK_ENTRIES\)"):
        with patched([], "DisastIR", []):
            pass


def test_without_gradio_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from disastir_mteb.leaderboard import _require_gradio

    monkeypatch.setitem(sys.modules, "gradio", None)
    with pytest.raises(ImportError, match=r"pip install 'disastir-mteb\[leaderboard\]'"):
        _require_gradio()


def test_the_app_tables_hold_the_run_and_the_published_rows(runs: Path) -> None:
    import gradio

    from disastir_mteb.leaderboard import leaderboard_app

    with leaderboard_app([runs]) as (app, rows):
        frames = [block.value for block in app.blocks.values() if isinstance(block, gradio.DataFrame)]
        summary = next(frame for frame in frames if "Mean (Task)" in frame["headers"])
        names = [row[summary["headers"].index("Model")] for row in summary["data"]]
        markdown = " ".join(str(block.value) for block in app.blocks.values() if isinstance(block, gradio.Markdown))
    assert len(names) == 32 and "_experiment_id" not in summary["headers"]
    assert sum(PUBLISHED_MARK in name for name in names) == 30
    assert any(f"all-MiniLM-L6-v2 — {SYNTHETIC_MARK}" in name for name in names)
    assert "## Provenance" in markdown and "Plugin version" in markdown and "ANN (HNSW M=16, ef=64)" in markdown
    assert len(rows) == 33  # the Test run is a row of the DisastIR-Test benchmark, not of this table


def test_page_in_a_real_browser_shows_the_demo_beside_the_published_models(
        runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`disastir-mteb leaderboard --screenshot`: served, loaded in headless Chromium, PNG + rendered HTML."""
    from disastir_mteb.leaderboard import find_browser

    if find_browser() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser check: .ci/run installs chromium")
        pytest.skip("no Chromium-family browser installed (apt-get install chromium)")
    png = tmp_path / "page.png"
    assert cli.main(["leaderboard", str(runs), "--port", str(_free_port()), "--screenshot", str(png)]) == 0
    assert "3 run(s), 30 published model(s)" in capsys.readouterr().out
    page = re.sub(r"<script.*?</script>", "", png.with_suffix(".html").read_text())  # rendered, not the config
    table = page[page.index("Rank (Borda)"):page.index("Provenance of these rows")]
    assert table.count(PUBLISHED_MARK) >= 30  # every row in view: the table does not scroll them away
    assert f"all-MiniLM-L6-v2 — {SYNTHETIC_MARK}" in table
    assert "DisastIR-QA" in page and "Disaster management" in page and "Plugin version" in page
    assert "DisastIR-DevLite" in page and "DisastIR-Test" in page
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 100_000

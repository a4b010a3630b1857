"""``evaluate(data=)`` means what ``run --data`` means, for the call only; the Makefile's torch build is chosen."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from sentences import says

from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.runner.data_source import data_source
from disastir_mteb.runner.run import evaluate

ROOT = Path(__file__).resolve().parents[1]
TASK = "DisastIR-QA-Bio"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """30 passages, one task, in the published layout."""
    from conftest import write_layout

    passages = {f"p{i}": f"Passage {i} about floods and evacuation route number {i}." for i in range(30)}
    queries = [{"query_id": f"q{j}", "user_query": f"Which flood passage is number {j}?"} for j in range(3)]
    qrels = [{"user_query": q["user_query"], "passage": passages[f"p{j}"], "score": 2} for j, q in enumerate(queries)]
    return write_layout(tmp_path / "my data", passages, {"QA_Biological": (queries, qrels)})


def _data_of(result: object) -> str:
    return result.task_results[0].scores["test"][0]["disastir_data"]  # type: ignore[attr-defined]


def test_evaluate_reads_the_data_given_for_this_call_only(folder: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``data=`` wins over ``DISASTIR_DATA_DIR`` during the call, and the environment is as it was after it."""
    monkeypatch.setenv("DISASTIR_DATA_DIR", str(tmp_path / "elsewhere"))  # not even a folder: never read
    result = evaluate(HashingEncoder(), [TASK], data=folder, cache_dir=False, output_folder=tmp_path / "a",
                      show_progress=False)
    assert _data_of(result) == "local folder my data"
    assert os.environ["DISASTIR_DATA_DIR"] == str(tmp_path / "elsewhere")
    monkeypatch.delenv("DISASTIR_DATA_DIR")
    again = evaluate(HashingEncoder(), [TASK], data=str(folder), cache_dir=False, output_folder=tmp_path / "b",
                     show_progress=False)
    assert "DISASTIR_DATA_DIR" not in os.environ
    assert again.task_results[0].get_score() == result.task_results[0].get_score()


def test_evaluate_data_sample_is_the_command_lines_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from disastir_mteb.sample.generator import sample_dir

    monkeypatch.delenv("DISASTIR_DATA_DIR", raising=False)
    result = evaluate(HashingEncoder(), [TASK], data="sample", cache_dir=False, output_folder=tmp_path / "out",
                      show_progress=False)
    assert _data_of(result).startswith(f"local folder {sample_dir('small').name} (synthetic sample, scale small")
    assert data_source("sample").folder == sample_dir("small").resolve()  # what `run --data sample` reads


@pytest.mark.parametrize("given", ["missing", "file"])
def test_a_bad_data_folder_is_one_sentence_before_any_model_loads(tmp_path: Path, given: str) -> None:
    path = tmp_path / "data"
    if given == "file":
        path.write_text("not a folder")
    what = "not a folder" if given == "file" else "no such folder"
    with pytest.raises(FileNotFoundError) as raised:  # the model would fail to load: the data is checked first
        evaluate("no-such-org/no-such-model", [TASK], data=path, cache_dir=False, output_folder=tmp_path / "out")
    says(str(raised.value), f"data={str(path)!r}:", what, "published DisastIR layout", "(corpus.jsonl, query/, qrels/)",
         "'sample'")
    with pytest.raises(FileNotFoundError) as raised:  # the CLI's spelling
        data_source(path, as_options=True)
    says(str(raised.value), f"--data {path}:", what, "(corpus.jsonl, query/, qrels/)")


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_test_runs_one_worker_per_core_up_to_4_and_test_workers_0_runs_one_process() -> None:
    """The Makefile's promise and getting started's: TEST_WORKERS defaults to the cores, at most 4; 0: one process."""
    def pytest_line(*extra: str) -> str:
        done = subprocess.run(["make", "-n", "test", *extra], cwd=ROOT, capture_output=True, text=True, check=True)
        return " ".join(line for line in done.stdout.replace("\\\n", " ").splitlines() if "-m pytest" in line)

    assert f" -n {min(4, os.cpu_count() or 1)} --dist loadfile" in pytest_line()
    assert " -n 0 --dist loadfile" in pytest_line("TEST_WORKERS=0")
    assert pytest_line().startswith("PYTHONDONTWRITEBYTECODE= ")  # the bytecode compiled on first import is kept


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_the_makefile_installs_torch_from_the_index_it_is_given(tmp_path: Path) -> None:
    """README: pip's configuration picks the torch build; ``TORCH_INDEX=`` names PyTorch's CPU index instead."""
    def torch_line(*extra: str) -> str:
        done = subprocess.run(["make", "-n", "-B", "setup", f"VENV={tmp_path / 'venv'}", *extra], cwd=ROOT,
                              capture_output=True, text=True, check=True)
        [line] = [line for line in done.stdout.splitlines() if '"torch==' in line]
        return " ".join(line.split())

    venv = tmp_path / "venv"
    assert torch_line() == f'{venv}/bin/python -m pip install --quiet --no-compile "torch==2.13.0"'
    assert torch_line("TORCH_INDEX=https://download.pytorch.org/whl/cpu") == (
        f'{venv}/bin/python -m pip install --quiet --no-compile --index-url https://download.pytorch.org/whl/cpu '
        '"torch==2.13.0"')

"""Progress bars (:mod:`disastir_mteb.util.progress`): live on a terminal, a few lines in a log.

Before, every bar redrew itself into a log file as it does on a terminal: a judge job refreshed its bar at each
answer and wrote 4.6 MB into its log. The command cases run the real ``judge`` against a loopback chat server,
with standard error captured (not a terminal), as ``disastir-mteb judge ... 2> log`` has it.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from loopback import LoopbackServer, grade_judge

from disastir_mteb import cli
from disastir_mteb.util import progress
from disastir_mteb.util.progress import progress_bar


class _Terminal(io.StringIO):
    """A stream that says it is a terminal, as ``sys.stderr`` does in an interactive shell."""

    def isatty(self) -> bool:
        return True


def _busy_bar(stream: io.StringIO, steps: int) -> None:
    """``steps`` steps, each refreshing the bar's text as the judge does at every answer."""
    with progress_bar(total=steps, desc="judging", unit="pair", file=stream) as bar:
        for step in range(steps):
            bar.update()
            bar.set_postfix_str(f"{step + 1:,} answer(s)", refresh=True)


def test_a_bar_into_a_file_writes_its_start_and_end_however_often_it_is_refreshed() -> None:
    log = io.StringIO()
    _busy_bar(log, 20_000)
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in log.getvalue(), lines  # the start and the final count, one line each
    assert "0/20000" in lines[0] and "20000/20000" in lines[1] and "20,000 answer(s)" in lines[1]


def test_a_bar_into_a_file_writes_one_line_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long job still says how far it is, every :data:`REDRAW_SECONDS` (here 0.1 s, over about 0.6 s)."""
    monkeypatch.setattr(progress, "REDRAW_SECONDS", 0.1)
    log = io.StringIO()
    with progress_bar(total=60, desc="Encoding corpus", unit=" passages", file=log) as bar:
        for _ in range(60):
            time.sleep(0.01)
            bar.update()
    lines = log.getvalue().splitlines()
    assert 4 <= len(lines) <= 9, lines  # the start, about one per 0.1 s, the end
    assert all(line.startswith("Encoding corpus:") for line in lines)


def test_a_bar_over_an_iterable_left_or_not_ends_with_its_count_in_a_file() -> None:
    log = io.StringIO()
    assert list(progress_bar(range(500), desc="Loading tasks", unit=" tasks", leave=False, file=log)) == list(
        range(500))
    assert log.getvalue().splitlines()[-1].startswith("Loading tasks: 100%")
    assert len(log.getvalue().splitlines()) == 2


def test_a_terminal_still_gets_a_live_bar() -> None:
    screen = _Terminal()
    _busy_bar(screen, 300)
    assert screen.getvalue().count("\r") > 300  # redrawn in place at every refresh, as tqdm does


def test_a_quiet_bar_writes_nothing() -> None:
    log = io.StringIO()
    with progress_bar(total=10, desc="judging", unit="pair", disable=True, file=log) as bar:
        bar.update(10)
    assert log.getvalue() == ""


# -- a command with its standard error in a file -----------------------------------------------------------------

TASKS = ["DisastIR-QA-Bio", "DisastIR-STS-Geo"]  # the judge tests' runs, made once per session


@pytest.fixture(scope="module")
def runs(hashing_runs: Callable[..., Path]) -> Path:
    return hashing_runs(*TASKS)


def test_the_judge_writes_a_few_lines_into_a_log_not_a_redraw_per_answer(
        runs: Path, holes: list, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without ``--quiet``, standard error captured: the bar's first and last lines, whatever the answers."""
    with LoopbackServer(answer=grade_judge({})) as server:
        assert cli.main(["judge", str(runs), "--model", "judge-model", "--store", str(tmp_path / "j.sqlite"),
                         "--yes", "--base-url", server.base_url]) == 0
        answers = sum(server.stats().requests.values())
    err = capsys.readouterr().err
    bar_lines = [line for line in err.splitlines() if line.startswith("judging:")]
    assert answers > 50 and "\r" not in err
    assert len(bar_lines) == 2, err  # before: a redraw per answer and per wait, 4.6 MB in the log
    assert f"{len(holes)}/{len(holes)}" in bar_lines[-1]
    assert len(err.encode()) < 2_000, err


def test_a_run_writes_each_bar_as_a_start_and_an_end_line_into_a_log(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``disastir-mteb run ... 2> log`` (model-free encoder, the bundled sample): tasks loaded, corpus, tasks."""
    assert cli.main(["run", "-m", "disastir-mteb/hashing-encoder", "--data", "sample", "--no-cache",
                     "--output-folder", str(tmp_path), "-t", "DisastIR-QA-Bio", "DisastIR-FC-Geo"]) == 0
    err = capsys.readouterr().err
    bars = [line.split(":", 1)[0] for line in err.splitlines() if "%|" in line]
    assert "\r" not in err and {"Loading tasks", "Encoding corpus", "Evaluating tasks"} <= set(bars), err
    assert all(bars.count(bar) == 2 for bar in bars), err  # each bar's start and its final count

"""Where a run's time went: the phase clock, and the table a run ends with, through the real command line.

The clock's own rules (innermost phase wins, other threads are not counted, the workers' proportions split
the runner's waiting) are checked on a clock whose time source is a counter the test advances, so the
checks are exact and never depend on how fast this machine is. The runs are real: ``disastir-mteb run`` with
the model-free hashing encoder on the small sample, with worker processes and without. No assertion is
about speed: timings are benchmark output (``benchmarks/runner_phases.py``), here only their bookkeeping is
checked (they add up, the JSON and the table agree, scoring and writing are accounted for).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sentences import says
from workers import forks_workers

from disastir_mteb import cli
from disastir_mteb.runner.task_pool import PROCESSES_ENV
from disastir_mteb.util import timings as timings_module
from disastir_mteb.util.timings import Phase, PhaseClock, Timings, WorkerReport, clock, pooled, run_clock
from disastir_mteb.vocabulary.settings import HASHING_ENCODER

PHASES = [phase.value for phase in Phase]
KEYS = {"phases": dict, "total": float, "passages_encoded": int, "queries_encoded": int, "device": str,
        "peak_rss_bytes": int}
ROW = re.compile(r"^  (\w+) +(\d+\.\d) s +(\d+\.\d) %$")


# ---------------------------------------------------------------------- the clock, on a counter


@pytest.fixture
def ticks(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The clock's time source replaced by a counter: ``ticks.now`` is what ``perf_counter`` returns."""
    fake = SimpleNamespace(now=100.0)
    monkeypatch.setattr(timings_module, "time", SimpleNamespace(perf_counter=lambda: fake.now))
    return fake


def test_innermost_phase_wins_and_the_phases_add_up_to_the_total(ticks: SimpleNamespace) -> None:
    with PhaseClock() as running:
        ticks.now += 1  # in no phase: other
        with clock(Phase.passages):
            ticks.now += 2
            with clock(Phase.store):  # a store write inside the encoding loop is store, not passages
                ticks.now += 3
            ticks.now += 4
        with clock(Phase.search):
            ticks.now += 5
    seconds = running.seconds()
    assert list(seconds) == PHASES
    assert seconds["passages"] == 6 and seconds["store"] == 3 and seconds["search"] == 5 and seconds["other"] == 1
    assert running.total == 15 == sum(seconds.values())


def test_a_decorated_function_is_its_phase_wherever_it_is_called(ticks: SimpleNamespace) -> None:
    @clock(Phase.writing)
    def write() -> str:
        ticks.now += 2
        return "written"

    with PhaseClock() as running, clock(Phase.scoring):
        ticks.now += 1
        assert write() == "written"
    assert running.seconds()["writing"] == 2 and running.seconds()["scoring"] == 1
    assert write() == "written"  # without a running clock: the function as it was


def test_other_threads_are_not_counted(ticks: SimpleNamespace) -> None:
    """A hook on a helper thread (tokenising ahead of the model) leaves the main thread's phase alone."""
    with PhaseClock() as running, clock(Phase.passages):
        def helper() -> None:
            with clock(Phase.store):
                ticks.now += 7

        thread = threading.Thread(target=helper)
        thread.start()
        thread.join()
    assert running.seconds()["passages"] == 7 and running.seconds()["store"] == 0


def test_the_runners_wait_for_workers_is_split_by_what_they_measured(ticks: SimpleNamespace,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timings_module, "peak_rss_bytes", lambda: 1000)  # this process's peak
    with PhaseClock() as running:
        with pooled():
            ticks.now += 8  # waiting for two workers
        running.add_worker(WorkerReport({"scoring": 3.0, "writing": 1.0}, pid=11, rss_growth_bytes=100))
        running.add_worker(WorkerReport({"scoring": 3.0, "writing": 1.0}, pid=12, rss_growth_bytes=50))
        running.add_worker(WorkerReport({"scoring": 0.0, "writing": 0.0}, pid=11, rss_growth_bytes=70))
        running.settle()
        with pooled():
            ticks.now += 2  # a stage whose tasks all ran here after all: no proportions, so other
        running.settle()
    seconds = running.seconds()
    assert seconds["scoring"] == 6 and seconds["writing"] == 2 and seconds["other"] == 2
    assert sum(seconds.values()) == running.total == 10
    spent = running.timings(passages_encoded=1, queries_encoded=2, device="cpu")
    assert spent.peak_rss_bytes == 1000 + 100 + 50  # this process, plus each worker's largest growth, once


def test_a_run_inside_a_run_joins_its_clock(ticks: SimpleNamespace) -> None:
    with run_clock() as outer:
        ticks.now += 1
        with run_clock() as inner:
            assert inner is outer
            with clock(Phase.tasks):
                ticks.now += 2
    assert outer.seconds()["tasks"] == 2 and outer.total == 3


def test_timings_round_trip_and_the_table() -> None:
    phases = dict.fromkeys(PHASES, 0.0) | {"tasks": 1.25, "search": 2.0, "other": 0.25}
    spent = Timings(phases=phases, total=3.5, passages_encoded=1500, queries_encoded=384, device="cpu",
                    peak_rss_bytes=3 * 2**29)
    assert Timings.from_dict(json.loads(json.dumps(spent.as_dict()))) == spent
    assert spent.outside(Phase.search) == 1.5
    text = spent.to_text().splitlines()
    assert text[0] == "Where the time went (3.5 s wall clock):"
    assert [ROW.match(line)[1] for line in text[1:-1]] == [*PHASES, "total"]  # type: ignore[index]
    assert text[-1] == ("1,500 passages and 384 queries encoded on cpu; peak resident memory 1.50 GiB (this process "
                        "and its workers).")
    with pytest.raises(ValueError) as refused:
        Timings.from_dict({"phases": {}, "passages_encoded": 1, "queries_encoded": 1, "peak_rss_bytes": 0})
    says(str(refused.value), "Not a timings record", "no total, device", "disastir-mteb run --timings-json")
    with pytest.raises(ValueError) as refused:
        Timings.from_dict({**spent.as_dict(), "phases": {"encoding": 1.0}})
    says(str(refused.value), "'encoding'", ", ".join(PHASES))


# ---------------------------------------------------------------------- runs through the command line


def _table(printed: str) -> dict[str, float]:
    """The phase rows of the table a run printed last, as numbers (seconds, as shown)."""
    lines = printed.splitlines()
    start = max(n for n, line in enumerate(lines) if line.startswith("Where the time went ("))
    rows = {}
    for line in lines[start + 1:]:
        match = ROW.match(line)
        if match is None:
            break
        rows[match[1]] = float(match[2])
    return rows


@contextlib.contextmanager
def _data(folder: Path) -> Iterator[None]:
    """``--data`` sets DISASTIR_DATA_DIR for the process: restored after, the tasks' file cache reset."""
    from disastir_mteb.tasks import retrieval as tasks

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISASTIR_DATA_DIR", str(folder))
        tasks.forget_data_files()
        try:
            yield
        finally:
            tasks.forget_data_files()


def _run(argv: list[str], processes: str) -> tuple[int, str, str]:
    """``disastir-mteb run ...`` in this process with DISASTIR_PROCESSES set; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        patch.setenv(PROCESSES_ENV, processes)
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def runs(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three runs of the 48 tasks on the small sample: cold with workers, warm in one process, warm with workers."""
    work = tmp_path_factory.mktemp("timed-runs")
    done: dict[str, Any] = {}
    with _data(sample_data):
        for name, processes in (("cold", "2"), ("warm-serial", "1"), ("warm-pooled", "2")):
            file = work / f"{name}.json"
            argv = ["run", "-m", HASHING_ENCODER, "--data", str(sample_data), "--cache-dir", str(work / "store"),
                    "--output-folder", str(work / name), "--quiet", "--timings-json", str(file)]
            code, printed, err = _run(argv, processes)
            assert code == 0, err
            done[name] = {"printed": printed, "json": json.loads(file.read_text(encoding="utf-8")), "file": file,
                          "out": work / name}
    done["corpus"] = sum(1 for _ in (sample_data / "corpus.jsonl").open(encoding="utf-8"))
    return done


@pytest.mark.parametrize("name", ["cold", "warm-serial", "warm-pooled"])
def test_the_table_ends_the_run_and_adds_up(runs: dict[str, Any], name: str) -> None:
    printed = runs[name]["printed"]
    rows = _table(printed)
    assert list(rows) == [*PHASES, "total"]
    assert abs(sum(seconds for phase, seconds in rows.items() if phase != "total") - rows["total"]) <= 1.0
    assert printed.rstrip().splitlines()[-1] == f"Timings written to {runs[name]['file'].resolve()}."
    assert len(list(runs[name]["out"].rglob("DisastIR-*_per_query.json"))) == 48  # a real run: every task written


@pytest.mark.parametrize("name", ["cold", "warm-serial", "warm-pooled"])
def test_the_json_has_the_documented_keys_and_equals_the_table(runs: dict[str, Any], name: str) -> None:
    written = runs[name]["json"]
    assert {key: type(value) for key, value in written.items()} == KEYS
    assert list(written["phases"]) == PHASES and all(isinstance(s, float) for s in written["phases"].values())
    assert abs(sum(written["phases"].values()) - written["total"]) < 1e-6  # exactly, up to float rounding
    shown = _table(runs[name]["printed"])
    assert shown == {**{phase: round(s, 1) for phase, s in written["phases"].items()},
                     "total": round(written["total"], 1)}
    encoded = f"{written['passages_encoded']:,} passages and {written['queries_encoded']:,} queries encoded on cpu"
    assert encoded in runs[name]["printed"] and written["device"] == "cpu"
    assert written["peak_rss_bytes"] > 100 * 2**20  # mteb and torch alone take more


def test_a_cold_run_encodes_the_corpus_and_a_warm_one_nothing(runs: dict[str, Any]) -> None:
    cold, warm = runs["cold"]["json"], runs["warm-serial"]["json"]
    assert cold["passages_encoded"] == runs["corpus"] and cold["queries_encoded"] > 0
    assert warm["passages_encoded"] == 0 and warm["queries_encoded"] == 0
    assert cold["phases"]["passages"] > 0 and cold["phases"]["store"] > 0 and warm["phases"]["store"] > 0


@pytest.mark.skipif(not forks_workers(48), reason="one usable core or not Linux: tasks run in-process")
def test_scoring_and_writing_are_accounted_with_workers_and_without(runs: dict[str, Any]) -> None:
    """With workers the runner never scores or writes itself: those seconds can only come from their reports."""
    for name in ("cold", "warm-serial", "warm-pooled"):
        phases = runs[name]["json"]["phases"]
        assert phases["scoring"] > 0 and phases["writing"] > 0, (name, phases)
        assert phases["other"] < phases["scoring"], (name, phases)  # the runner's wait did not land in other


def test_evaluate_hands_the_same_value_to_its_callable_once(sample_data: Path, use_data: Any, tmp_path: Path) -> None:
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.runner.run import build_search, evaluate
    from disastir_mteb.vocabulary.run_settings import RunSettings

    use_data(sample_data)
    searcher = build_search(HashingEncoder(), RunSettings(cache_dir=tmp_path / "store", progress=False))
    received: list[Timings] = []
    evaluate(searcher, ["DisastIR-QA-Bio", "DisastIR-FC-Geo"], output_folder=tmp_path / "out", show_progress=False,
             timings=received.append)
    [spent] = received
    assert isinstance(spent, Timings) and spent.queries_encoded == searcher.queries_encoded > 0
    assert list(spent.phases) == PHASES and abs(sum(spent.phases.values()) - spent.total) < 1e-6
    assert spent.passages_encoded == searcher.passages_encoded > 0 and spent.device == "cpu"
    assert json.loads(json.dumps(spent.as_dict())) == spent.as_dict()


def test_the_hashing_encoder_is_a_model_name_on_the_command_line(runs: dict[str, Any]) -> None:
    """``-m disastir-mteb/hashing-encoder`` resolved beside ``bundled``: no Hub, filed under its own name."""
    assert (runs["cold"]["out"] / "results" / "disastir-mteb__hashing-encoder").is_dir()
    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    assert "'disastir-mteb/hashing-encoder': a model-free" in " ".join(help_text.getvalue().split())


# ---------------------------------------------------------------------- a --timings-json that cannot be written


def _bad_paths(tmp_path: Path) -> list[tuple[str, str]]:
    file = tmp_path / "notes.txt"
    file.write_text("a file, not a folder")
    cases = [(str(tmp_path), f"--timings-json {tmp_path} is a folder; name a file, e.g. {tmp_path / 'timings.json'}."),
             (str(file / "timings.json"), f"--timings-json {file / 'timings.json'} cannot be written: {file} is a "
                                          "file, not a folder; name a file in a folder.")]
    if sys.platform == "linux" and Path("/sys/kernel").is_dir():  # no one may create files there, root included
        cases.append(("/sys/kernel/timings.json", "--timings-json /sys/kernel/timings.json cannot be written: "
                                                  "/sys/kernel: "))
    return cases


@pytest.mark.parametrize("command", ["run", "demo"])
def test_a_bad_timings_path_is_one_sentence_before_the_model_loads(tmp_path: Path, command: str) -> None:
    """The model named here cannot be loaded (offline, unknown): the sentence about the path comes first."""
    for path, sentence in _bad_paths(tmp_path):
        argv = (["run", "-m", "org/no-such-model", "--data", "sample", "--output-folder", str(tmp_path / "out")]
                if command == "run" else ["demo", "--output-folder", str(tmp_path / "out")])
        code, printed, err = _run([*argv, "--quiet", "--timings-json", path], "1")
        assert code == 2 and printed == ""
        [line] = err.strip().splitlines()
        assert line.startswith(f"disastir-mteb {command}: {sentence}"), line
        assert not (tmp_path / "out").exists()  # stopped before anything ran


def test_a_timings_path_that_becomes_unwritable_during_the_run_says_the_results_are_written(
        sample_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder of --timings-json replaced by a file while the run runs (checked writable at its start). Before:
    "File exists" after the results were written, with nothing saying they were."""
    from disastir_mteb import commands

    folder = tmp_path / "timings"
    folder.mkdir()  # there when the run starts, checked writable
    task_line = commands._task_line

    def replace_the_folder(*args: Any) -> None:
        if folder.is_dir():
            folder.rmdir()
            folder.write_text("now a file")
        task_line(*args)

    monkeypatch.setattr(commands, "_task_line", replace_the_folder)
    argv = ["run", "-m", HASHING_ENCODER, "--data", str(sample_data), "-t", "DisastIR-QA-Bio", "--no-cache",
            "--output-folder", str(tmp_path / "out"), "--timings-json", str(folder / "t.json")]
    code, _, err = _run(argv, "1")
    assert code == 2
    last = err.strip().splitlines()[-1]
    says(last, "disastir-mteb run:", f"{folder / 't.json'}:", "results are written", "timings")
    assert next((tmp_path / "out").rglob("DisastIR-QA-Bio.json")).is_file()

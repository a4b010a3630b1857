"""Bad command lines and faults met by a run: each ends in one sentence, or in a correct run.

Bad options end in one sentence naming the option, before any model is loaded. Faults met by a run
(an unreadable earlier result, a full disk, Ctrl-C, no data offline) are provoked for real: files cut
short on disk, a small tmpfs filled up, a child process sent SIGINT, ``mteb run`` in a subprocess.
The cases and their outcomes are listed in ``docs/faults/cli.md``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_cases import CaseOutcome, run_in_one_interpreter
from sentences import says
from small_disk import tmpfs

from disastir_mteb import cli
from disastir_mteb.cli import main
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.ann_params import resolve_params
from disastir_mteb.vocabulary.settings import HASHING_ENCODER

RUN = ["run", "-m", "bundled", "--data", "sample", "--quiet", "--no-cache"]

CASES = [
    # (arguments, exit code, the sentence's telling part)
    (["-t", "DisastIR-QA-Foo"], 2, "Unknown DisastIR task 'DisastIR-QA-Foo'. Did you mean DisastIR-QA-"),
    (["--search", "annn"], 2, "argument --search: invalid choice: 'annn' (choose from 'exact', 'ann')"),
    (["--search", "ann", "--ann-k", "0"], 2, "AnnParams.k=0 must be an integer >= 1"),
    (["--search", "ann", "--ann-k", "-3"], 2, "AnnParams.k=-3 must be an integer >= 1"),
    (["--ann-k", "5"], 2, "--ann-k 5 applies to --search ann, but the search is exact: add --search ann"),
    (["--search", "ann", "--ann-preset", "fast"], 2, "'fast'"),
    (["--batch-size", "0"], 2, "argument --batch-size: must be an integer >= 1, not 0"),
    (["--batch-size", "many"], 2, "argument --batch-size: must be an integer >= 1, not 'many'"),
    (["--tokenize-threads", "-1"], 2, "argument --tokenize-threads: must be an integer >= 0, not -1"),
    (["--precision", "fp8"], 2, "argument --precision: invalid choice: 'fp8'"),
    (["--instructions", "shouting"], 2, "shouting"),
]


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exited:  # argparse's own one-line error
        return int(exited.code or 0)


@pytest.mark.parametrize(("extra", "code", "sentence"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_run_options_are_one_sentence(extra: list[str], code: int, sentence: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert _run([*RUN, *extra]) == code
    err = capsys.readouterr().err
    assert sentence in says(err, "disastir-mteb run:")  # one line naming the command: no usage block above it


@pytest.mark.parametrize(("argv", "command", "facts"), [
    (["run"], "disastir-mteb run", ["-m/--model"]),
    (["run", "-m", "bundled", "--bogus"], "disastir-mteb run", ["--bogus"]),
    (["export", "--format", "csv", "--out", "x"], "disastir-mteb export", ["--format", "'csv'", "'beir'"]),
    (["runn"], "disastir-mteb", ["'runn'", "'run'"]),
    ([], "disastir-mteb", ["command"]),
], ids=["missing -m", "unknown option", "bad choice", "unknown command", "no command"])
def test_a_usage_error_is_one_sentence_and_where_to_read_the_usage(
        argv: list[str], command: str, facts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """argparse printed its whole usage, 20 lines for run, above its one sentence; the usage is one --help away."""
    assert _run(argv) == 2
    error = says(capsys.readouterr().err, *facts, f"see {command} --help")
    assert error.startswith(f"{command}: ") and "usage:" not in error


FAST_CASES = [
    # (arguments after `run -m bundled --quiet`, the sentence's telling part): answered before a library loads
    (["-t", "DisastIR-QA-Bioo"], "Unknown DisastIR task 'DisastIR-QA-Bioo'. Did you mean DisastIR-QA-Bio"),
    (["-t", "DisastIR-Test-QA-Bio", "--split", "devlite"], "Task 'DisastIR-Test-QA-Bio' is in 'test', but "
                                                           "split='devlite' was asked for"),
    (["--data", "no-such-folder"], "--data no-such-folder: no such folder; pass"),
    (["--ann-k", "5"], "--ann-k 5 applies to --search ann, but the search is exact: add --search ann"),
    (["--ann-preset", "paper"], "--ann-preset paper applies to --search ann, but the search is exact: add --search "
                                "ann, or leave it out."),
    (["--search", "exact", "--ann-preset", "f16", "--connectivity", "8", "--ann-threads", "1"],
     "--ann-preset f16, --connectivity 8, --ann-threads 1 apply to --search ann, but the search is exact"),
    (["--embeddings-revision", "abc"], "--embeddings-revision pins a served model: pass it with --embeddings-url."),
    (["-t", ""], "A task name is empty (''): name tasks like DisastIR-QA-Bio"),
    (["-m", ""], "-m is empty: name a model"),
    (["--output-folder", "/etc/hostname"], "--output-folder /etc/hostname is a file, not a folder: name a folder"),
    # names in any case; a DisastIR name that is none, with the closest (issue 50; before: mteb's KeyError traceback)
    (["-b", "disastir-qa", "--data", "no-such-folder"], "--data no-such-folder: no such folder"),  # the name taken
    (["-t", "disastir-qa-bio", "--data", "no-such-folder"], "--data no-such-folder: no such folder"),
    (["-b", "DisastIR-QAA"], "Unknown DisastIR benchmark 'DisastIR-QAA'. Did you mean DisastIR-QA"),
    (["-t", "disastir-qa"], "'disastir-qa' is a benchmark, not a task: name it as one (disastir-mteb run -b "
                            "DisastIR-QA"),
    (["-b", "disastir-qa-bio"], "'disastir-qa-bio' is a task, not a benchmark"),
    (["-b", "disastir-test", "--split", "devlite"], "Task 'DisastIR-Test-QA-Bio' is in 'test', but split='devlite'"),
]


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
@pytest.mark.parametrize("command", ["judge", "judge-study"])
def test_a_judge_timeout_must_be_positive_and_finite(command: str, value: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Before: accepted, and a request with no time to run (or forever) was the result."""
    assert _run([command, "results", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--timeout", value]) == 2
    says(capsys.readouterr().err.strip().splitlines()[-1], "--timeout", "positive, finite", "seconds", repr(value))


@pytest.fixture(scope="module")
def fast_outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[CaseOutcome]:
    """Every FAST_CASES command line, in turn, in one fresh interpreter (one each cost an interpreter's start)."""
    return run_in_one_interpreter([["run", "-m", "bundled", "--quiet", *extra] for extra, _ in FAST_CASES],
                                  heavy=("mteb", "torch", "datasets"), cwd=tmp_path_factory.mktemp("fast"))


@pytest.mark.parametrize(("case", "sentence"), [(n, c[1]) for n, c in enumerate(FAST_CASES)],
                         ids=[" ".join(c[0]) for c in FAST_CASES])
def test_bad_input_is_answered_before_mteb_or_torch_is_imported(case: int, sentence: str,
                                                                fast_outcomes: list[CaseOutcome]) -> None:
    """A typo costs no import of mteb or torch (seconds on an idle machine, minutes under load)."""
    done = fast_outcomes[case]
    assert done["code"] == 2, done["stderr"]
    lines = done["stderr"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("disastir-mteb run: ") and sentence in lines[0], done["stderr"]
    assert done["stdout"] == "" and done["imported"] == []  # refused before mteb, torch or datasets was imported


@pytest.mark.parametrize(("option", "name", "facts"), [
    ("-b", "NotABenchmark", ["'NotABenchmark'", "DisastIR-QA", "mteb.get_benchmarks()"]),
    ("-b", "mteb(eng,v2)", ["'mteb(eng,v2)'", "MTEB(eng, v2)"]),
    ("-t", "NotATask", ["'NotATask'", "DisastIR-QA-Bio", "mteb.get_tasks()"]),
])
def test_an_unknown_name_of_another_library_is_one_sentence_before_any_work(
        option: str, name: str, facts: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Only mteb knows other libraries' names: it is asked before the data, the model or the output is touched.

    Before: mteb's ``KeyError`` traceback, 22-42 s into the run. The data folder and the model named here do not
    exist: the sentence is the name's all the same, and nothing is written.
    """
    argv = ["run", "-m", "no-org/no-such-model", "--data", str(tmp_path / "no-data"), "--quiet", option, name,
            "--output-folder", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    says(err, *facts)
    assert err.startswith("disastir-mteb run: Unknown ") and not (tmp_path / "out").exists()
    assert main([*argv[:-4], "-t", "scifact", *argv[-2:]]) == 2  # mteb's SciFact, in another case: taken
    says(capsys.readouterr().err, "disastir-mteb run:", "no-data", "no such folder")


@pytest.mark.parametrize("argv", [
    ["export", "--format", "beir", "--out", "OUT", "-t", "disastir-qa-bioo"],
    ["stats", "--out", "OUT", "-t", "disastir-qa-bioo"],
    ["judge", "results", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "-t", "disastir-qa-bioo"],
], ids=["export", "stats", "judge"])
def test_every_command_taking_task_names_takes_them_in_any_case(argv: list[str], tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``-t`` of every command: one sentence with the closest name for a misspelled one, before anything runs."""
    from disastir_mteb.exports.common import export_task_names
    from disastir_mteb.judging.settings import JudgeSettings

    assert main([str(tmp_path / a) if a == "OUT" else a for a in argv]) == 2
    says(capsys.readouterr().err, f"disastir-mteb {argv[0]}:", "'disastir-qa-bioo'", "DisastIR-QA-Bio")
    assert not (tmp_path / "OUT").exists()
    assert export_task_names(["disastir-qa-bio", "DisastIR-QA-Bio"]) == ["DisastIR-QA-Bio"]  # and in Python
    assert JudgeSettings("m", tasks=("disastir-fc-geo",)).tasks == ("DisastIR-FC-Geo",)


@pytest.mark.parametrize(("option", "value", "sentence"), [
    ("--intents", "Foo", "Unknown DisastIR intent 'Foo'; expected one of"),
    ("--categories", "Bioo", "Unknown DisastIR category 'Bioo'; expected an abbreviation"),
])
def test_unknown_intent_or_category(option: str, value: str, sentence: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", option, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("disastir-mteb tasks: ") and sentence in err[0]


# ---------------------------------------------------------------------- ANN parameters (all bad values, memory)


def test_every_bad_ann_value_is_named_in_one_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    """``--connectivity 0 --expansion-search -5 --ann-k 0``: all three, not only the first."""
    assert _run([*RUN, "--search", "ann", "--connectivity", "0", "--expansion-search", "-5", "--ann-k", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["disastir-mteb run: AnnParams.connectivity=0 must be an integer >= 2, expansion_search=-5 an "
                   "integer >= 1 and k=0 an integer >= 1 or None."]


def test_each_ann_option_sets_its_field_and_every_tunable_field_has_one() -> None:
    """The options are read from :class:`AnnParams`' fields: a new field with an option needs no edit elsewhere."""
    from disastir_mteb.cli import build_parser
    from disastir_mteb.vocabulary.ann_params import ANN_OPTIONS, AnnParams

    assert {option.field for option in ANN_OPTIONS} == {"dtype", "connectivity", "expansion_add", "expansion_search",
                                                        "threads", "rescore", "k"}
    given = {"dtype": "f16", "connectivity": 8, "expansion_add": 40, "expansion_search": 30, "threads": 1,
             "rescore": 3, "k": 5}
    argv = [*RUN, "--search", "ann"]
    for option in ANN_OPTIONS:
        argv += [option.flag, str(given[option.field])]
    args = build_parser().parse_args(argv)
    assert resolve_params("paper", **{o.field: getattr(args, o.dest) for o in ANN_OPTIONS}) == AnnParams(**given)


def test_connectivity_one_is_refused_before_usearch_refuses_it(capsys: pytest.CaptureFixture[str]) -> None:
    """USearch itself raises "Connectivity must be at least 2" at build time, after the corpus is encoded."""
    from usearch.index import Index

    with pytest.raises(ValueError, match="at least 2"):
        Index(ndim=8, connectivity=1).add(0, np.ones(8, np.float32))
    assert _run([*RUN, "--search", "ann", "--connectivity", "1"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "disastir-mteb run: AnnParams.connectivity=1 must be an integer >= 2."]


@pytest.mark.parametrize(("n", "dims", "connectivity", "dtype"), [
    (3000, 64, 16, "f32"), (3000, 64, 2, "f32"), (3000, 100, 300, "f16"), (3000, 384, 32, "i8"),
    (3000, 384, 16, "b1"), (20000, 32, 8, "f32"),
])
def test_memory_estimate_matches_usearch(n: int, dims: int, connectivity: int, dtype: str) -> None:
    """``AnnParams.memory_bytes`` against the bytes of the real USearch index (what it saves and holds)."""
    from disastir_mteb.search.usearch_index import UsearchIndex

    params = resolve_params("paper", connectivity=connectivity, dtype=dtype, threads=2)
    vectors = np.random.default_rng(0).standard_normal((n, dims)).astype(np.float32)
    index = UsearchIndex(params, similarity="cosine")
    index.add_documents(vectors, [str(i) for i in range(n)])
    real = index.usearch_index.serialized_length
    assert params.memory_bytes(n, dims) == pytest.approx(real, rel=0.01)


def test_memory_warning_threshold() -> None:
    """Warn above 256 MiB *and* 2x the paper's connectivity on the same vectors; never for the presets."""
    full, mib = 239_704, 2**20
    paper = resolve_params("paper")
    # 8 + 2 bytes of key and level, the vector, 4 + 8M bytes on level 0, (4 + 4M) / (M - 1) above it
    assert paper.memory_bytes(full, 384) == round(full * (8 + 2 + 384 * 4 + 4 + 8 * 16 + (4 + 4 * 16) / 15))
    for name in ("paper", "f16", "i8", "b1", "exact"):
        for dims in (384, 1024, 4096):  # d=4096 f32: 3.9 GB of vectors, needed whatever M: no warning
            assert resolve_params(name).memory_warning(full, dims) is None, (name, dims)
    assert resolve_params("paper", connectivity=128).memory_warning(full, 384) is None  # 618 MB < 2 x 403 MB
    assert resolve_params("paper", connectivity=256).memory_warning(full, 384) is not None  # 863 MB
    small = resolve_params("paper", connectivity=100_000)
    assert small.memory_bytes(300, 384) < 256 * mib and small.memory_warning(300, 384) is None  # 240 MB: quiet


def test_a_huge_connectivity_warns_with_the_memory_it_needs(sample_data: Path, use_data: Any, tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """The issue's case: ``--connectivity 100000 --ann-k 5000`` on the 1,500-passage sample (1.2 GB graph)."""
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.runner.run import evaluate

    use_data(sample_data)
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.usearch_index"):
        evaluate(HashingEncoder(), ["DisastIR-QA-Bio"], search="ann", ann_params={"connectivity": 100_000, "k": 5000},
                 cache_dir=False, output_folder=tmp_path / "out", show_progress=False)
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1, warned
    # the setting, what it costs against the paper's, why it buys nothing here, and the option to lower
    says(warned[0], "connectivity=100000", "1.2 GB", "1,500 vectors", "384 dimensions", "476x", "connectivity 16",
         "1,499 neighbours", "--connectivity")


# ---------------------------------------------------------------------- faults met by a run

TASKS = ["DisastIR-QA-Bio", "DisastIR-FC-Geo", "DisastIR-STS-Tech"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 passages, 2 queries per task: all 48 tasks, encoded in moments."""
    from disastir_mteb.sample.generator import SampleScale, write_sample

    scale = SampleScale("tiny", n_passages=200, queries_per_task=2, judged_per_query=6, passage_words=16)
    return write_sample(tmp_path_factory.mktemp("tiny") / "data", scale=scale)


def _cut(path: Path, keep: int) -> bytes:
    """Cut ``path`` to its first ``keep`` bytes (a file truncated by a full disk or a copy); returns them."""
    data = path.read_bytes()[:keep]
    path.write_bytes(data)
    return data


def _set_aside(folder: Path, name: str) -> list[Path]:
    return sorted(folder.glob(f"{name}.unreadable-*"))


def test_unreadable_result_files_are_set_aside_and_computed_again(tiny: Path, use_data: Any, tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A result file, a per-query file, or both, cut short: renamed beside themselves, one warning each, rerun."""

    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.runner.run import evaluate

    use_data(tiny)
    out = tmp_path / "out"

    def run() -> dict[str, float]:
        result = evaluate(HashingEncoder(), TASKS, cache_dir=False, output_folder=out, show_progress=False)
        return {r.task_name: r.get_score() for r in result.task_results}

    clean = run()
    folder = next(out.rglob("DisastIR-QA-Bio.json")).parent
    per_query = folder / "disastir_per_query"
    damaged = {  # what each file held after the damage: kept, under its new name
        "DisastIR-QA-Bio.json": _cut(folder / "DisastIR-QA-Bio.json", 2000),
        "DisastIR-FC-Geo_per_query.json": _cut(per_query / "DisastIR-FC-Geo_per_query.json", 300),
        "DisastIR-STS-Tech.json": _cut(folder / "DisastIR-STS-Tech.json", 100),
        "DisastIR-STS-Tech_per_query.json": _cut(per_query / "DisastIR-STS-Tech_per_query.json", 0),
    }
    with caplog.at_level(logging.WARNING):
        assert run() == clean  # evaluated again: the same scores
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 4, warned
    for name, data in damaged.items():
        where = per_query if name.endswith("_per_query.json") else folder
        [moved] = _set_aside(where, name)
        assert moved.read_bytes() == data  # never deleted, never overwritten
        assert sum(str(where / name) in w and f"moved it to {moved.name} beside it" in w for w in warned) == 1, name
        assert json.loads((where / name).read_text())  # whole again
    says(warned[0], folder / "DisastIR-QA-Bio.json", "JSONDecodeError", "DisastIR-QA-Bio", "again")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert run() == clean  # nothing left to set aside, nothing warned
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(list(folder.rglob("*.unreadable-*"))) == 4


def test_run_sets_a_truncated_result_aside_with_one_warning(tiny: Path, tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """The issue's case through the command line: it stopped with rc 2 and a JSON error naming no file.

    (In a terminal the warning is the one line on stderr: Python's last-resort handler prints it.)
    """
    argv = ["run", "-m", HASHING_ENCODER, "--data", str(tiny), "-t", "DisastIR-QA-Bio", "DisastIR-FC-Geo", "--quiet",
            "--no-cache", "--output-folder", str(tmp_path / "out")]
    assert main(argv) == 0
    result = next((tmp_path / "out").rglob("DisastIR-QA-Bio.json"))
    _cut(result, 2000)
    with caplog.at_level(logging.WARNING):
        assert main(argv) == 0
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    [moved] = _set_aside(result.parent, result.name)
    assert len(warned) == 1
    says(warned[0], result, "JSONDecodeError", moved.name, "DisastIR-QA-Bio", "again")
    assert "line " in warned[0] and "column " in warned[0]  # json's own position of the damage
    assert json.loads(result.read_text())["task_name"] == "DisastIR-QA-Bio"


@pytest.fixture
def full_disk(tmp_path: Path) -> Any:
    """A 64 KiB tmpfs, filled up: writes end in ENOSPC. Skipped where mounting is not permitted."""
    with tmpfs(tmp_path / "full", "64k") as mount:
        with (mount / "filler").open("wb") as handle:
            try:
                handle.write(b"\0" * 128 * 1024)
            except OSError:
                pass  # full now
        yield mount


def test_a_full_output_disk_names_the_file_and_what_to_do(full_disk: Path, tiny: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``--output-folder`` on a full disk: one sentence naming the result file, nothing half-written."""
    from disastir_mteb.models.hashing_encoder import HashingEncoder

    out = full_disk / "out"
    code = main(["run", "-m", HASHING_ENCODER, "--data", str(tiny), "-t", "DisastIR-QA-Bio", "--quiet", "--no-cache",
                 "--output-folder", str(out)])
    assert code == 2
    meta = HashingEncoder().mteb_model_meta
    path = out / "results" / meta.name.replace("/", "__") / meta.revision / "DisastIR-QA-Bio.json"
    assert capsys.readouterr().err.strip().splitlines() == [
        f"disastir-mteb run: {path}: No space left on device; free space on that disk or write to another one "
        "(--output-folder), then run the same command again, which resumes: finished tasks are kept."]
    assert not [p for p in out.rglob("*") if p.is_file() and p.name != ".disastir-results.lock"]  # no half file


def test_a_full_disk_names_the_file_in_every_atomic_write(full_disk: Path) -> None:
    """Per-query files, reports, exports: the failed write names the file, not the hidden temporary or nothing."""
    from disastir_mteb.util.atomic import write_json_atomic

    target = full_disk / "disastir_per_query" / "DisastIR-QA-Bio_per_query.json"
    with pytest.raises(OSError) as raised:
        write_json_atomic(target, {"queries": {str(i): i for i in range(5000)}})
    assert raised.value.errno == 28 and raised.value.filename == str(target)
    assert [p.name for p in target.parent.iterdir()] == []  # its temporary file is gone too


def test_a_full_disk_under_a_command_that_writes_plainly_names_its_output_folder(
        full_disk: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``sample --out`` writes with plain ``write()``, whose error names no file: the folder given is named."""
    assert main(["sample", "--out", str(full_disk / "data"), "--quiet"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"disastir-mteb sample: {full_disk / 'data'}: No space left on device; free space on that disk or write to "
        "another one (--out), then run the same command again."]


_INTERRUPTED = ("disastir-mteb run: interrupted; run the same command again to resume: the results of finished tasks "
                "and the embedding cache are kept.")


#: ``disastir-mteb run`` whose model-free encoder, once it has encoded a whole chunk (argv[1] texts, the corpus's
#: first), waits at every later call: the chunk's file is stored, and nothing after it is encoded before the signal
_WAITS_AFTER_A_CHUNK = """
import sys, time
from disastir_mteb import cli
from disastir_mteb.models.hashing_encoder import HashingEncoder

embed, chunk, chunk_encoded = HashingEncoder.embed, int(sys.argv[1]), []

def waits(self, texts):
    if chunk_encoded:
        time.sleep(600)
    vectors = embed(self, texts)
    if len(texts) == chunk:
        chunk_encoded.append(True)
    return vectors

HashingEncoder.embed = waits
sys.exit(cli.main(sys.argv[2:]))
"""


def test_ctrl_c_is_one_line_exit_130_and_the_same_command_resumes(tmp_path: Path) -> None:
    """SIGINT to a real ``disastir-mteb run`` while it encodes the corpus: one line, 130; the rerun resumes.

    The corpus is one chunk and a bit, encoded by the model-free encoder (what is tested is the process, not a
    model's numbers); once it has encoded the first chunk, the first run's encoder waits, so the signal always
    comes mid-corpus, and the rerun, the plain command, encodes the rest only and writes every result.
    """
    from disastir_mteb.sample.generator import SampleScale, write_sample
    from disastir_mteb.search.store import CHUNK_SIZE

    extra = 76
    scale = SampleScale("ctrl-c", n_passages=CHUNK_SIZE + extra, queries_per_task=1, judged_per_query=4,
                        passage_words=8)
    data = write_sample(tmp_path / "data", scale=scale)
    out, cache = tmp_path / "out", tmp_path / "cache"
    argv = ["run", "-m", "disastir-mteb/hashing-encoder", "--data", str(data), "-t", "DisastIR-QA-Bio",
            "DisastIR-FC-Geo", "--quiet", "--cache-dir", str(cache), "--output-folder", str(out)]
    child = subprocess.Popen([sys.executable, "-c", _WAITS_AFTER_A_CHUNK, str(CHUNK_SIZE), *argv],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not list(cache.rglob("chunk_*.npy")) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == 130, stderr[-3000:]
    assert stderr.strip().splitlines() == [_INTERRUPTED]  # was a traceback of 60-130 lines
    assert not list(out.rglob("DisastIR-*.json"))  # interrupted before any task: nothing half-written either

    rerun = subprocess.run([sys.executable, "-m", "disastir_mteb.cli", *argv], capture_output=True, text=True,
                           timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"2 task result(s) in {next(out.rglob('DisastIR-QA-Bio.json')).parent}; {extra} passages and" in rerun.stdout


def test_offline_mteb_run_without_data_says_what_to_set_on_its_last_line(tmp_path: Path) -> None:
    """The README's offline recipe without ``DISASTIR_DATA_DIR``: mteb's traceback ends in what to set."""

    from disastir_mteb.models.bundled import BUNDLED_MODEL, seed_hf_cache

    hub = tmp_path / "hf-cache"
    seed_hf_cache(hub)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DISASTIR_", "HF_"))}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(hub), HF_HOME=str(tmp_path / "hf-home"), COLUMNS="400",
               DISASTIR_CACHE_DIR=str(tmp_path / "cache"))  # nothing cached: no dataset anywhere
    done = subprocess.run([str(Path(sys.executable).with_name("mteb")), "run", "-m", BUNDLED_MODEL, "-t",
                           "DisastIR-QA-Bio", "--output-folder", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("FileNotFoundError: DisastIR data DMIR01/DisastIR@"), done.stderr[-2000:]
    says(last, "Hugging Face cache", "offline?", "DISASTIR_DATA_DIR", "--data DIR", "disastir-mteb sample --out DIR")


# ---------------------------------------------------------------------- the user's errors, and bugs


@pytest.mark.parametrize("raised, code", [
    (InvalidInput("--out names nothing usable; name a folder."), 2),
    (OSError(28, "No space left on device", "/out/x.json"), 2),  # the surroundings: one sentence too
    (KeyError("x"), None), (ValueError("a bug"), None), (ImportError("a bug"), None), (TypeError("a bug"), None),
])
def test_the_users_errors_are_one_sentence_and_a_bug_keeps_its_traceback(
        raised: Exception, code: int | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    """cli.main turned any KeyError, ImportError or ValueError into one line and exit 2: a bug showed no traceback."""
    from disastir_mteb import commands

    def fails(args: object) -> int:
        raise raised

    monkeypatch.setattr(commands, "sample", fails)
    argv = ["sample", "--out", str(tmp_path / "data")]
    if code is None:
        with pytest.raises(type(raised)):
            cli.main(argv)
        return
    assert cli.main(argv) == code
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("disastir-mteb sample: ") and "Traceback" not in line

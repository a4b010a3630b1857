"""Commands that read results remember the data their runs read: ``report``/``compare --judgements`` and ``judge``.

A run made with ``--data DIR`` records the folder and the digest of each task's files in its per-query files; the
commands read it from there (``--data`` still wins, checked against the same digests), say in one line which folder
they read, and refuse in one sentence where the folder is gone, changed, other data, or where the result sets read
different data. Everything goes through the real command line, on runs of the real runner over copies of the
generated sample, with a real loopback chat server as the judge.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from loopback import LoopbackServer
from sentences import says

from disastir_mteb import cli
from disastir_mteb.data.layout import DATA_DIR_ENV
from disastir_mteb.judging.holes import find_holes, result_sets_of
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.results.per_query import DIGEST_KEY, data_digests
from disastir_mteb.runner.run import evaluate
from disastir_mteb.sample.generator import write_sample
from disastir_mteb.vocabulary.taxonomy import Intent, get_spec, task_file_stem

TASKS = ["DisastIR-QA-Bio", "DisastIR-STS-Geo"]
STS = "DisastIR-STS-Geo"
JUDGE = "remembering-judge"


def _run(data: Path, out: Path, tasks: list[str], *, dim: int = 64, instructions: str | None = None) -> Path:
    evaluate(HashingEncoder(dim=dim, name=f"disastir-mteb/hashing-{dim}"), tasks, cache_dir=False, output_folder=out,
             show_progress=False, instructions=instructions, data=data)
    return out


def _store(path: Path) -> Path:
    """A store with one graded judgement (what ``--judgements`` needs to go on to the data)."""
    with JudgementStore(path) as store:
        pair = Pair(Intent.STS, "a query", "a passage", JUDGE)
        store.add_pairs([pair])
        store.record_judgement(pair.key, 3, {"zero_shot": 3})
    return path


def _edit_a_grade(data: Path, task: str) -> None:
    spec = get_spec(task)
    path = data / "qrels" / f"{task_file_stem(spec.intent, spec.category)}_qrels.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    rows[0]["score"] = (rows[0]["score"] + 1) % 4
    path.write_text(json.dumps(rows), encoding="utf-8")


@pytest.fixture(autouse=True)
def no_data_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's DISASTIR_DATA_DIR is not read by these tests (a command restores the one it sets itself)."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)


def _judge_refuses(results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``judge`` on ``results`` exits 2 having asked nothing; returns its last line on stderr."""
    with LoopbackServer() as server:
        assert cli.main(["judge", str(results), "--model", JUDGE, "--base-url", server.base_url, "--store",
                         str(tmp_path / "judge.sqlite"), "--yes", "--quiet"]) == 2
        assert not server.stats().answered  # nothing asked about other data
    return capsys.readouterr().err.splitlines()[-1]


@pytest.fixture(scope="module")
def data_a(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(shutil.copytree(sample_data, tmp_path_factory.mktemp("remembered") / "A")).resolve()


@pytest.fixture(scope="module")
def runs_a(data_a: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain run and an instructions run of one model on folder A (two sets, for compare)."""
    root = tmp_path_factory.mktemp("remembered-runs")
    for instructions in (None, "disastir"):
        _run(data_a, root, TASKS, instructions=instructions)
    return root


@pytest.fixture
def careless(sample_data: Path, tmp_path: Path) -> tuple[Path, Path]:
    """(data folder, results): a fresh run on a copy of the sample the test may change or remove."""
    data = Path(shutil.copytree(sample_data, tmp_path / "data")).resolve()
    return data, _run(data, tmp_path / "results", [STS])


def test_each_per_query_file_records_the_digest_of_its_tasks_files(runs_a: Path, data_a: Path) -> None:
    files = sorted(runs_a.rglob("*_per_query.json"))
    assert len(files) == 2 * len(TASKS)
    for path in files:
        record = json.loads(path.read_text(encoding="utf-8"))["data"]
        task = path.name.removesuffix("_per_query.json")
        assert record["source"] == str(data_a)
        assert record[DIGEST_KEY] == data_digests(data_a, [task])[task]
    assert len({json.loads(p.read_text())["data"][DIGEST_KEY] for p in files}) == len(TASKS)  # one per task
    # a DevLite task also reads a DevLite folder, which the record does not name; no layout, no digest
    others = ["DisastIR-Test-QA-Bio", "NotATask"]
    assert data_digests(data_a, others) == dict.fromkeys(others)
    assert data_digests(data_a / "nowhere", TASKS) == dict.fromkeys(TASKS)


def test_files_written_before_the_digest_are_checked_by_the_folders_name_and_marker(
        careless: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, results = careless
    for path in results.rglob("*_per_query.json"):  # as an earlier version wrote them
        content = json.loads(path.read_text(encoding="utf-8"))
        del content["data"][DIGEST_KEY]
        path.write_text(json.dumps(content), encoding="utf-8")
    store = _store(tmp_path / "store.sqlite")
    assert cli.main(["report", str(results), "--judgements", str(store)]) == 0
    says(capsys.readouterr().err.splitlines()[0], "disastir-mteb report:", f"data: {data},", "the folder the runs read",
         "checked by its name", "--data overrides")
    write_sample(data, seed=1, overwrite=True)  # another sample in its place: the marker says so
    assert cli.main(["report", str(results), "--judgements", str(store)]) == 2
    says(capsys.readouterr().err.splitlines()[-1], "disastir-mteb report:", f"data folder {data}", "no longer holds",
         f"{STS} changed since", "pass --data", "rerun them")


def test_report_compare_and_judge_read_the_folder_the_run_read(
        runs_a: Path, data_a: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``DisastIR data DMIR01/DisastIR@65525d5 is not in the Hugging Face cache ...``, exit 2, unless --data."""
    line = (f"data: {data_a}, the folder the runs read (recorded in their result files; its files checked unchanged; "
            "--data overrides).")
    store = tmp_path / "store.sqlite"
    with LoopbackServer() as server:
        assert cli.main(["judge", str(runs_a), "--model", JUDGE, "--base-url", server.base_url, "--store", str(store),
                         "--yes", "--quiet", "-t", STS]) == 0
        answered = len(server.stats().answered)
    judged = capsys.readouterr().out.splitlines()
    assert "D" + line[1:] in judged
    monkeypatch.setenv(DATA_DIR_ENV, str(data_a))
    holes = find_holes(result_sets_of([runs_a]), tasks=[STS])
    monkeypatch.delenv(DATA_DIR_ENV)
    assert answered == len(holes.pairs) > 20  # STS: one request per pair, every hole of the folder's data
    assert any(f"{len(holes.pairs):,} distinct pair(s) to judge" in printed for printed in judged)

    assert cli.main(["report", str(runs_a), "--judgements", str(store)]) == 0
    remembered = capsys.readouterr()
    assert f"disastir-mteb report: {line}" in remembered.err.splitlines()
    assert "Completed NDCG@10 (estimate)" in remembered.out
    assert cli.main(["report", str(runs_a), "--judgements", str(store), "--data", str(data_a)]) == 0
    given = capsys.readouterr()
    assert given.out == remembered.out  # the same numbers as when told
    says(next(line for line in given.err.splitlines() if line.startswith("disastir-mteb report: data:")),
         f"data: {data_a}", f"--data {data_a};", f"the runs read in {data_a})")
    assert cli.main(["compare", str(runs_a), "--judgements", str(store)]) == 0
    compared = capsys.readouterr()
    assert f"disastir-mteb compare: {line}" in compared.err.splitlines()
    assert compared.out.count("Completed NDCG@10 (estimate):") == 2


def test_a_copy_of_the_data_elsewhere_is_the_same_data(runs_a: Path, data_a: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    moved = Path(shutil.copytree(data_a, tmp_path / "moved")).resolve()
    store = _store(tmp_path / "store.sqlite")
    assert cli.main(["report", str(runs_a), "--judgements", str(store), "--data", str(moved)]) == 0
    says(next(line for line in capsys.readouterr().err.splitlines() if line.startswith("disastir-mteb report: data:")),
         f"data: {moved}", f"--data {moved};", f"the runs read in {data_a})")


def test_the_folder_the_run_read_changed_since_is_refused(careless: tuple[Path, Path], sample_data: Path,
                                                          tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, results = careless
    store = _store(tmp_path / "store.sqlite")
    _edit_a_grade(data, STS)
    facts = (f"data folder {data}", "no longer holds", f"{STS} changed since", "pass --data", "rerun them")
    assert cli.main(["report", str(results), "--judgements", str(store)]) == 2
    says(capsys.readouterr().err.splitlines()[-1], "disastir-mteb report:", *facts)
    says(_judge_refuses(results, tmp_path, capsys), "disastir-mteb judge:", *facts)
    # the plain report still reads the set, saying its data changed instead of re-scoring it against other data
    assert cli.main(["report", str(results)]) == 0
    says(next(line for line in capsys.readouterr().err.splitlines() if str(data) in line), f"data folder {data}",
         "no longer holds", "changed since the run")
    # the data the run read, given with --data, is used
    assert cli.main(["report", str(results), "--judgements", str(store), "--data", str(sample_data)]) == 0
    says(next(line for line in capsys.readouterr().err.splitlines() if line.startswith("disastir-mteb report: data:")),
         f"data: {sample_data}", f"--data {sample_data};", f"the runs read in {data})")


def test_the_folder_the_run_read_removed_is_refused(careless: tuple[Path, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    data, results = careless
    store = _store(tmp_path / "store.sqlite")
    shutil.rmtree(data)
    facts = (f"data folder {data}", "not on this machine", "pass --data", "the same files")
    assert cli.main(["report", str(results), "--judgements", str(store)]) == 2
    says(capsys.readouterr().err.splitlines()[-1], "disastir-mteb report:", *facts)
    says(_judge_refuses(results, tmp_path, capsys), "disastir-mteb judge:", *facts)


def test_data_given_that_is_not_what_the_run_read_is_refused(careless: tuple[Path, Path], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    data, results = careless
    other = write_sample(tmp_path / "other", seed=1).resolve()
    store = _store(tmp_path / "store.sqlite")
    assert cli.main(["report", str(results), "--judgements", str(store), "--data", str(other)]) == 2
    says(capsys.readouterr().err.splitlines()[-1], "disastir-mteb report:", f"--data {other}", "does not hold",
         f"the files of {STS}", f"the runs read in {data};", "pass the folder the runs read", "rerun them")
    monkeypatch.setenv(DATA_DIR_ENV, str(other))  # a variable left from another session: checked the same way
    says(_judge_refuses(results, tmp_path, capsys), "disastir-mteb judge:", f"{DATA_DIR_ENV}={other}", "does not hold",
         f"the files of {STS}", f"the runs read in {data};")


def test_result_sets_on_different_data_in_one_folder_are_never_mixed(
        careless: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two models' runs on two folders written into one output folder: one command reads one data folder."""
    data, results = careless
    other = write_sample(tmp_path / "other", seed=1).resolve()
    _run(other, results, [STS], dim=32)
    store = _store(tmp_path / "store.sqlite")
    folders = {s.model: s.folder for s in result_sets_of([results])}
    assert len(folders) == 2
    facts = ("different data", f"{data} ({STS} of {folders['disastir-mteb/hashing-64']})",
             f"{other} ({STS} of {folders['disastir-mteb/hashing-32']})", "one data folder", "one folder at a time",
             "--data")
    assert cli.main(["report", str(results), "--judgements", str(store)]) == 2
    says(capsys.readouterr().err.splitlines()[-1], "disastir-mteb report:", *facts)
    pair = [str(folders["disastir-mteb/hashing-64"]), str(folders["disastir-mteb/hashing-32"])]
    assert cli.main(["compare", *pair, "--judgements", str(store)]) == 2
    says(capsys.readouterr().err.splitlines()[-1], "disastir-mteb compare:", *facts)
    assert cli.main(["compare", *pair]) == 2  # without --judgements too, as before: the difference would be the data's
    says(capsys.readouterr().err.splitlines()[-1], "disastir-mteb compare:", *pair, STS, "measures the data",
         "the same data")
    says(_judge_refuses(results, tmp_path, capsys), "disastir-mteb judge:", *facts)
    # with --data, the set of the other folder is refused by its digest
    assert cli.main(["report", str(results), "--judgements", str(store), "--data", str(data)]) == 2
    says(capsys.readouterr().err.splitlines()[-1], "disastir-mteb report:", f"--data {data}",
         f"the runs read in {other};", "pass the folder the runs read")
    # each model's folder alone reads its own data
    for folder, read in ((folders["disastir-mteb/hashing-64"], data), (folders["disastir-mteb/hashing-32"], other)):
        assert cli.main(["report", str(folder), "--judgements", str(store)]) == 0
        says(capsys.readouterr().err.splitlines()[0], "disastir-mteb report:", f"data: {read},",
             "the folder the runs read")


def test_a_set_whose_tasks_were_rerun_on_other_data_is_never_completed(
        careless: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One model run on folder A, then one of its tasks rerun on folder B into the same output folder: the set is
    refused by every reader (before, the plain report said its tasks disagree and showed both, exit 0)."""
    data, results = careless
    _run(data, results, ["DisastIR-QA-Bio"])
    other = write_sample(tmp_path / "other", seed=1).resolve()
    _run(other, results, [STS])  # replaces STS's file: the set now holds QA-Bio on A and STS-Geo on B
    store = _store(tmp_path / "store.sqlite")
    [folder] = {path.parent for path in results.rglob(f"{STS}.json")}
    facts = (folder / f"{STS}.json", "'local folder other (synthetic sample, scale small, seed 1)'", "(disastir_data)",
             "'local folder data (synthetic sample, scale small, seed 0)'", "remove it",
             f"disastir-mteb run -m disastir-mteb/hashing-64 -t {STS} --overwrite")
    for command in (["report", str(results)], ["report", str(results), "--judgements", str(store)]):
        assert cli.main(command) == 2
        says(capsys.readouterr().err.splitlines()[-1], "disastir-mteb report:", *facts)


def test_compare_refuses_two_runs_on_one_folder_whose_files_changed_between_them(
        careless: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: compared (the folder's name and marker are the same), the difference partly the data's."""
    data, results = careless
    _edit_a_grade(data, STS)
    after = _run(data, tmp_path / "after", [STS], dim=32)
    [first], [second] = result_sets_of([results]), result_sets_of([after])
    assert cli.main(["compare", str(first.folder), str(second.folder)]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    digests = [json.loads(next(s.folder.rglob("*_per_query.json")).read_text())["data"][DIGEST_KEY][:12]
               for s in (first, second)]
    assert digests[0] != digests[1]
    says(err, "disastir-mteb compare:", STS, f"(files {digests[0]}) in the first",
         f"(files {digests[1]}) in the second", "measures the data")

"""compare with several models: one Table 3 row each, Kendall's tau between the exact and ANN rankings; and on
partial or mixed folders (a few tasks, two result roots, a revision folder against an experiment), what the tasks
present allow, every row labelled by its settings, each empty cell and each missing tau explained once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sentences import says

from disastir_mteb import cli
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.runner.run import evaluate
from disastir_mteb.vocabulary.provenance import PROVENANCE_ENTRY_KEYS
from disastir_mteb.vocabulary.taxonomy import TASK_NAMES


def test_several_models_give_rows_and_kendall_tau(sample_data: Path, use_data: object, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    use_data(sample_data)  # type: ignore[operator]
    for dim in (64, 128, 384):
        model = HashingEncoder(dim=dim, name=f"disastir-mteb/hashing-{dim}")
        evaluate(model, TASK_NAMES, cache_dir=tmp_path / "cache", output_folder=tmp_path / "exact",
                 show_progress=False)
        evaluate(model, TASK_NAMES, search="ann", cache_dir=tmp_path / "cache", output_folder=tmp_path / "ann",
                 show_progress=False)
    assert cli.main(["compare", str(tmp_path / "exact"), str(tmp_path / "ann")]) == 0
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if line.startswith("hashing-")]
    assert len(rows) == 3 and "Ex. Avg" in printed
    overall = next(line for line in printed.splitlines() if "(overall, 3 rows)" in line)
    assert -1.0 <= float(overall.split()[-1]) <= 1.0
    assert printed.count("Kendall's tau") == 7  # overall and the six intents

    one_folder = tmp_path / "both"
    shutil.copytree(tmp_path / "exact", one_folder)
    shutil.copytree(tmp_path / "ann", one_folder, dirs_exist_ok=True)
    assert cli.main(["compare", str(one_folder)]) == 0
    assert printed.splitlines()[0] == capsys.readouterr().out.splitlines()[0]

    exact_64, ann_64 = (next(p.parent for p in (tmp_path / side).rglob("model_meta.json") if "hashing-64" in str(p))
                        for side in ("exact", "ann"))
    assert cli.main(["compare", str(exact_64), str(ann_64)]) == 0
    labels = capsys.readouterr().out.splitlines()[:2]  # readable: no raw `disastir_search=ann-hnsw-...-t16`
    assert labels[0].startswith("Exact: disastir-mteb/hashing-64 — exact (synthetic data)  [")
    assert labels[1].startswith("ANN: disastir-mteb/hashing-64 — ANN (HNSW M=16, ef=64) (synthetic data)  [")

    for per_query in (tmp_path / "ann").rglob("disastir_per_query"):
        shutil.rmtree(per_query)  # as if written by plain `mteb run`
    single_exact = next((tmp_path / "exact").rglob("model_meta.json")).parent
    single_ann = next(p.parent for p in (tmp_path / "ann").rglob("model_meta.json") if single_exact.parent.name
                      in str(p))
    assert cli.main(["compare", str(single_exact), str(single_ann)]) == 0
    detail = capsys.readouterr().out
    assert "Recall@10 and the tests need per-query files" in detail and "48 task(s) lack them" in detail


TASKS = ["DisastIR-QA-Bio", "DisastIR-FC-Geo", "DisastIR-STS-Tech"]  # one category of QA, FC and STS


@pytest.fixture(scope="module")
def partial_runs(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three tasks, four settings: ``exact-ann`` holds exact and ANN runs, ``plain`` exact and instructions runs,
    ``ann`` ANN and ANN-with-instructions runs (one embedding cache: each text is encoded once)."""
    from disastir_mteb.tasks import retrieval as task_module

    root = tmp_path_factory.mktemp("partial")
    runs = [("exact-ann", {}), ("exact-ann", {"search": "ann"}), ("plain", {}),
            ("plain", {"instructions": "disastir"}), ("ann", {"search": "ann"}),
            ("ann", {"search": "ann", "instructions": "disastir"})]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISASTIR_DATA_DIR", str(sample_data))
        task_module.forget_data_files()
        try:
            for folder, settings in runs:
                evaluate(HashingEncoder(), TASKS, cache_dir=root / "cache", output_folder=root / folder,
                         show_progress=False, **settings)
        finally:
            task_module.forget_data_files()
    return root


def _lines(printed: str, start: str) -> list[str]:
    return [line for line in printed.splitlines() if line.startswith(start)]


def _revision(folder: Path) -> Path:
    """The one revision folder under an output folder."""
    [meta] = [path for path in folder.rglob("model_meta.json") if "experiments" not in path.parts]
    return meta.parent


def test_three_tasks_exact_and_ann_give_partial_means(partial_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb.results.result_sets import load_result_set

    exact = load_result_set(_revision(partial_runs / "exact-ann"))
    assert cli.main(["compare", str(partial_runs / "exact-ann")]) == 0
    printed = capsys.readouterr().out
    [row] = _lines(printed, "hashing-encoder — exact vs ANN (HNSW M=16, ef=")  # labelled by its settings
    cells = row.split(")")[-1].split()
    qa, fc, sts = (100 * exact.scores[task] for task in TASKS)
    assert cells[:6] == [f"{qa:.2f}†", "-", "-", f"{fc:.2f}†", "-", f"{sts:.2f}†"]  # before: every cell "-"
    assert cells[6] == f"{(qa + fc + sts) / 3:.2f}†"  # the overall over the three intents present
    [intent_qa] = _lines(printed, "QA ")
    assert intent_qa.split()[1] == f"{qa:.2f}†" and intent_qa.split()[-1] != "-"  # the paired test on QA-Bio's queries
    assert printed.count("'-' in QAdoc, Twitter, NLI: no task of these intents in both sets.") == 1
    assert printed.count("†: mean over the tasks both sets hold") == 1
    assert "QA 1 of 8, FC 1 of 8, STS 1 of 8; Avg over 3 of 6 intents" in printed


def test_one_whole_intent_says_only_how_many_intents_are_averaged(sample_data: Path, use_data: object,
                                                                  tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The 8 QA tasks: every intent held is whole, so the note printed "(here ; Avg over 1 of 6 intents)"."""
    use_data(sample_data)
    qa = [name for name in TASK_NAMES if name.startswith("DisastIR-QA-")]
    for settings in ({}, {"search": "ann"}):
        evaluate(HashingEncoder(), qa, cache_dir=tmp_path / "cache", output_folder=tmp_path / "runs",
                 show_progress=False, **settings)
    assert cli.main(["compare", str(tmp_path / "runs")]) == 0
    printed = capsys.readouterr().out
    assert "fewer than the paper's (Avg over 1 of 6 intents); compare it only" in printed and "(here" not in printed


def test_two_result_roots_give_labelled_rows_and_one_tau_reason(partial_runs: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compare", str(partial_runs / "plain"), str(partial_runs / "ann")]) == 0
    printed = capsys.readouterr().out
    rows = _lines(printed, "hashing-encoder — ")
    assert len(rows) == 2 and rows[0] != rows[1]  # before: two identical "hashing-encoder" rows of "-"
    assert {row.split("  ")[0] for row in rows} == {
        "hashing-encoder — exact vs ANN (HNSW M=16, ef=64)",
        "hashing-encoder — instructions: disastir vs ANN (HNSW M=16, ef=64); instructions: disastir"}
    assert "found 0" not in printed  # before: "Kendall's tau ... found 0" seven times
    assert printed.count("Kendall's tau (QAdoc, Twitter, NLI): not computed: no task of these intents in every "
                         "pair.") == 1
    assert len(_lines(printed, "Kendall's tau")) <= 5  # overall, QA, FC, STS (or one reason for them), one for the rest
    assert "4 of 4 sets ran on synthetic data" in printed

    copy = partial_runs / "plain-copy"  # two roots of the same runs: each setting against itself, by name
    shutil.copytree(partial_runs / "plain", copy, dirs_exist_ok=True)
    assert cli.main(["compare", str(partial_runs / "plain"), str(copy)]) == 0
    assert [row.split("  ")[0] for row in _lines(capsys.readouterr().out, "hashing-encoder — ")] == [
        "hashing-encoder — exact vs exact", "hashing-encoder — instructions: disastir vs instructions: disastir"]


def test_a_revision_folder_against_an_instructions_experiment(partial_runs: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    experiment = next((partial_runs / "plain").rglob("disastir_instructions_*"))
    assert cli.main(["compare", str(_revision(partial_runs / "exact-ann")), str(experiment)]) == 0  # before: refused
    printed = capsys.readouterr().out
    assert sorted(row.split("  ")[0] for row in _lines(printed, "hashing-encoder — ")) == [  # ranked by A's score:
        "hashing-encoder — ANN (HNSW M=16, ef=64) vs instructions: disastir",  # a 2-thread graph may beat exact
        "hashing-encoder — exact vs instructions: disastir"]
    assert "Not paired" not in printed

    # a revision folder against its own experiment: the experiment is never compared with itself
    assert cli.main(["compare", str(_revision(partial_runs / "plain")), str(experiment)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("A: disastir-mteb/hashing-encoder — exact (synthetic data)  [")
    assert "\nB: disastir-mteb/hashing-encoder — instructions: disastir (synthetic data)  [" in printed
    assert cli.main(["compare", str(partial_runs / "plain"), str(partial_runs / "plain")]) == 2
    says(capsys.readouterr().err, "disastir-mteb compare:", "No pair to compare", "same model and settings")


def test_compare_on_another_metric_shows_the_result_files_numbers(partial_runs: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``--metric map_at_10``: mteb's numbers, read here from the JSON files; no per-query test is invented."""
    from disastir_mteb.results.compare import compare_sets
    from disastir_mteb.results.result_sets import collect_result_sets
    from disastir_mteb.vocabulary.taxonomy import Intent

    exact, ann = sorted(collect_result_sets(partial_runs / "exact-ann"), key=lambda result: result.is_ann)

    def files(folder: Path, key: str) -> dict[str, float]:
        return {task: json.loads((folder / f"{task}.json").read_text())["scores"]["test"][0][key] for task in TASKS}

    a, b = files(exact.folder, "map_at_10"), files(ann.folder, "map_at_10")
    assert a != files(exact.folder, "ndcg_at_10")  # another number than NDCG@10
    comparison = compare_sets(exact, ann, metric="map_at_10")
    qa_bio, fc_geo, sts_tech = TASKS
    assert comparison.scores(Intent.QA) == (a[qa_bio], b[qa_bio]) and comparison.scores(Intent.STS) == (
        a[sts_tech], b[sts_tech])
    assert comparison.scores() == (pytest.approx((a[qa_bio] + a[fc_geo] + a[sts_tech]) / 3),
                                   pytest.approx((b[qa_bio] + b[fc_geo] + b[sts_tech]) / 3))
    assert comparison.paired(Intent.QA) is None and compare_sets(exact, ann).paired(Intent.QA) is not None

    assert cli.main(["compare", str(partial_runs / "exact-ann"), "--metric", "map_at_10"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(comparison.to_text())
    assert "3 of 48 tasks in both sets; MAP@10 x100." in printed and "NDCG@10 x100" not in printed
    assert f"{100 * a[qa_bio]:.2f}†" in _lines(printed, "QA ")[0]
    assert printed.count("B - A and its tests: not run on MAP@10; the per-query files they need hold NDCG@10 only "
                         "(ndcg_at_10, the default metric, has them).") == 1
    assert "Wilcoxon" not in printed

    assert cli.main(["compare", str(partial_runs / "exact-ann"), "--metric", "recall_at_1000"]) == 2
    error = capsys.readouterr().err
    says(error, "disastir-mteb compare:", exact.folder / "DisastIR-FC-Geo.json", "recall_at_1000", "(Recall@1000)",
         "ndcg_at_{1,3,5,10,20,100}", "map_at_{1,3,5,10,20,100}")


def test_sets_scored_on_other_data_are_refused(sample_data: Path, cache_dir: Path, use_data: object, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: B's tasks from a run on another corpus (the sample of another seed), all of A on the same.
    Before: a drop of -435 % with exit 0. A set whose own tasks ran on two corpora (C: QA-Bio on the other seed) is
    refused by every reader, ``report`` too, where before ``report`` on it said its tasks disagree and went on."""
    from disastir_mteb.results.compare import compare_sets
    from disastir_mteb.results.result_sets import load_result_set
    from disastir_mteb.sample.generator import sample_dir

    other = sample_dir("small", cache_dir=cache_dir, seed=1)
    for folder, data, tasks in (("a", sample_data, TASKS[:2]), ("b", other, TASKS[:2]), ("c", sample_data, TASKS[1:2]),
                                ("c", other, TASKS[:1])):
        use_data(data)  # type: ignore[operator]
        evaluate(HashingEncoder(), tasks, cache_dir=tmp_path / "cache", output_folder=tmp_path / folder,
                 show_progress=False)
    a, b, c = _revision(tmp_path / "a"), _revision(tmp_path / "b"), _revision(tmp_path / "c")
    refused = (f"Refusing to compare {a} with {b}: DisastIR-FC-Geo was scored on local folder sample-small-seed0-v2 "
               "(synthetic sample, scale small, seed 0) in the first and on local folder sample-small-seed1-v2 "
               "(synthetic sample, scale small, seed 1) in the second (and 1 more task(s): DisastIR-QA-Bio), so their "
               "difference measures the data, not the model or the search; compare runs on the same data (rerun one "
               "set with the other's data).")

    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err == f"disastir-mteb compare: {refused}\n"
    with pytest.raises(ValueError) as raised:
        compare_sets(load_result_set(a), load_result_set(b))
    assert str(raised.value) == refused

    mixed = (f"{c / 'DisastIR-QA-Bio.json'} records data 'local folder sample-small-seed1-v2 (synthetic sample, scale "
             "small, seed 1)' (disastir_data) but the other file of this set records 'local folder "
             "sample-small-seed0-v2 (synthetic sample, scale small, seed 0)': it was scored on other data; remove it "
             "or rerun the task (disastir-mteb run -m disastir-mteb/hashing-encoder -t DisastIR-QA-Bio --overwrite, "
             "with the run's other options).")
    for command in (["report", str(tmp_path / "c")], ["compare", str(tmp_path / "a"), str(tmp_path / "c")]):
        assert cli.main(command) == 2  # before: report said "its tasks disagree. Data: ..." and showed both, exit 0
        printed = capsys.readouterr()
        assert printed.out == "" and printed.err == f"disastir-mteb {command[0]}: {mixed}\n"

    for path in (c / "DisastIR-QA-Bio.json", c / "disastir_per_query" / "DisastIR-QA-Bio_per_query.json"):
        content = json.loads(path.read_text())  # files from before the data was recorded: no claim either way
        content.pop("data", None)
        content.pop("provenance", None)
        for block in content.get("scores", {}).get("test", []):
            for key in ("disastir_data", *PROVENANCE_ENTRY_KEYS):
                block.pop(key)
        path.write_text(json.dumps(content))
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "c")]) == 0
    printed = capsys.readouterr()
    says(printed.err, "disastir-mteb compare:", c, "1 of 2 per-query file(s)", "not re-scored", "DisastIR-QA-Bio",
         "do not record their data", "task files only")
    assert printed.out.count("ndcg_at_10: taken from the task files, not re-scored for 1 of 4 tasks of 2 result sets: "
                             "1 whose data is not at hand, as said on stderr.") == 1

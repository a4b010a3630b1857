"""`submit`: real runner results -> the results repository's layout, and each of its checks catching a broken copy."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import write_layout
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.results import submission_checks
from disastir_mteb.results.submit import Problem, submit, validate_submission
from disastir_mteb.runner import evaluate

HASHING = "disastir-mteb/hashing-encoder"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
TASKS = ["DisastIR-QA-Bio", "DisastIR-FC-Geo", "DisastIR-STS-Tech"]
UNRELEASED = "not in a released mteb"
UNREGISTERED = "not in mteb's model registry"


def _run(data: Path, model: Any, tasks: list[str], out: Path, **kwargs: Any) -> None:
    """The real runner on ``data`` (a module-scoped stand-in for the ``use_data`` fixture)."""
    from disastir_mteb.benchmark import tasks as task_module

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISASTIR_DATA_DIR", str(data))
        task_module._task_files.cache_clear()
        try:
            evaluate(model, tasks, cache_dir=False, output_folder=out, show_progress=False, **kwargs)
        finally:
            task_module._task_files.cache_clear()


@pytest.fixture(scope="module")
def hashing_results(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain run of three tasks and an instruction experiment of two, as the runner writes them."""
    out = tmp_path_factory.mktemp("hashing-results")
    _run(sample_data, HashingEncoder(), TASKS, out)
    _run(sample_data, HashingEncoder(), TASKS[:2], out, instructions="disastir")
    return out


@pytest.fixture(scope="module")
def minilm_results(bundled_model: object, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled MiniLM (a registry model) on a five-passage layout: two tasks in a few seconds."""
    root = tmp_path_factory.mktemp("minilm")
    passages = {f"d{i}": text for i, text in enumerate([
        "Evacuate low-lying coastal areas before the storm surge arrives.",
        "Boil tap water for one minute after flooding.",
        "Aftershocks can continue for weeks after a major earthquake.",
        "Wildfire smoke harms people with asthma; stay indoors.",
        "Landslides often follow heavy rain on burned slopes."])}
    queries = ["What should coastal residents do before a storm surge?", "Is tap water safe after a flood?",
               "How long do aftershocks last?"]
    rows = [{"query_id": f"q{i}", "user_query": q} for i, q in enumerate(queries)]
    qrels = [{"user_query": q, "passage": passages[f"d{i}"], "score": 3} for i, q in enumerate(queries)]
    data = write_layout(root / "data", passages, {"QA_Bio": (rows, qrels), "FC_Geo": (rows, qrels)})
    _run(data, bundled_model, ["DisastIR-QA-Bio", "DisastIR-FC-Geo"], root / "results")
    return root / "results"


@pytest.fixture
def clean(hashing_results: Path, tmp_path: Path) -> Path:
    """A fresh submission of the hashing run (no errors), to break by hand."""
    assert submit(hashing_results, tmp_path / "out").ok
    return tmp_path / "out"


def _errors(problems: list[Problem] | tuple[Problem, ...]) -> list[Problem]:
    return [problem for problem in problems if problem.severity == "error"]


def test_clean_submission_copies_the_plain_run_only(hashing_results: Path, tmp_path: Path) -> None:
    report = submit(hashing_results, tmp_path / "out")

    assert report.ok and report.errors == ()
    source = hashing_results / "results" / "disastir-mteb__hashing-encoder" / "1"
    target = tmp_path / "out" / "results" / "disastir-mteb__hashing-encoder" / "1"
    assert report.sources == (source,) and len(report.skipped) == 1 and "experiments" in report.skipped[0].parts
    written = sorted(str(path.relative_to(target)) for path in (tmp_path / "out").rglob("*") if path.is_file())
    assert written == sorted([*(f"{task}.json" for task in TASKS), "model_meta.json", "run_settings.jsonl"])
    assert (source / "disastir_per_query").is_dir()  # there, and left behind
    for name in [*(f"{task}.json" for task in TASKS), "model_meta.json", "run_settings.jsonl"]:
        assert (target / name).read_bytes() == (source / name).read_bytes()  # mteb's own files, byte for byte
    assert set(report.written) == {target / name for name in written}

    warnings = {problem.message.split(" ")[0]: problem for problem in report.warnings}
    assert len(report.warnings) == 2
    assert UNREGISTERED in warnings["model"].message and HASHING in warnings["model"].message
    assert UNRELEASED in warnings["3"].message and "mteb.get_task()" in warnings["3"].message
    assert validate_submission(tmp_path / "out") == list(report.problems)
    assert validate_submission(tmp_path / "out" / "results") == list(report.problems)
    assert "No errors" in report.to_text() and "Left out 1 experiment" in report.to_text()

    again = submit(hashing_results, tmp_path / "out")  # idempotent: nothing rewritten
    assert again.written == () and len(again.unchanged) == 5


def test_registry_model_gets_no_registry_warning(minilm_results: Path, tmp_path: Path) -> None:
    report = submit(minilm_results, tmp_path / "out")

    assert report.ok
    assert [problem.message for problem in report.warnings if UNREGISTERED in problem.message] == []
    assert [UNRELEASED in problem.message for problem in report.warnings] == [True]
    (revision,) = (tmp_path / "out" / "results" / "sentence-transformers__all-MiniLM-L6-v2").iterdir()
    assert re.fullmatch(r"[0-9a-f]{40}", revision.name)


def test_model_picks_one_of_several(hashing_results: Path, minilm_results: Path, tmp_path: Path) -> None:
    both = tmp_path / "both"
    shutil.copytree(hashing_results, both, dirs_exist_ok=True)
    shutil.copytree(minilm_results, both, dirs_exist_ok=True)

    report = submit(both, tmp_path / "one", model="sentence-transformers__all-MiniLM-L6-v2")
    models = [path.name for path in (tmp_path / "one" / "results").iterdir()]
    assert models == ["sentence-transformers__all-MiniLM-L6-v2"]
    assert report.ok and len(report.sources) == 1
    assert len(submit(both, tmp_path / "all").sources) == 2  # no model: every plain run
    with pytest.raises(ValueError, match=r"No results for model 'sentence-transformers/all-MiniLM-L6' under .*; "
                                         r"it holds disastir-mteb/hashing-encoder, .* Did you mean '" + MINILM):
        submit(both, tmp_path / "none", model="sentence-transformers/all-MiniLM-L6")
    assert not (tmp_path / "none").exists()


def test_experiment_only_results_are_refused(hashing_results: Path, tmp_path: Path) -> None:
    experiments = hashing_results / "results" / "disastir-mteb__hashing-encoder" / "1" / "experiments"
    refused = (r"holds only experiment results \(disastir-mteb/hashing-encoder \(disastir_instructions=disastir.*\)\), "
               r"which the results repository rejects because an experiments/ folder fails its folder test: run "
               r"`disastir-mteb run -m disastir-mteb/hashing-encoder` without --search ann and --instructions")
    with pytest.raises(ValueError, match=refused):
        submit(experiments, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no DisastIR result files"):
        submit(tmp_path / "empty", tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="No results folder at"):
        validate_submission(tmp_path / "empty")


def test_changed_files_need_overwrite(hashing_results: Path, clean: Path) -> None:
    target = clean / "results" / "disastir-mteb__hashing-encoder" / "1" / "DisastIR-QA-Bio.json"
    source = hashing_results / "results" / "disastir-mteb__hashing-encoder" / "1" / "DisastIR-QA-Bio.json"
    target.write_text(target.read_text().replace('"main_score"', '"main_score" ', 1))
    edited = target.read_bytes()

    with pytest.raises(FileExistsError, match=r"1 file\(s\) in .* differ from the results to submit .* overwrite=True"):
        submit(hashing_results, clean)
    assert target.read_bytes() == edited  # nothing written
    report = submit(hashing_results, clean, overwrite=True)
    assert report.written == (target,) and target.read_bytes() == source.read_bytes()


def test_submitting_into_a_clone_merges_run_settings(hashing_results: Path, tmp_path: Path) -> None:
    target = tmp_path / "clone" / "results" / "disastir-mteb__hashing-encoder" / "1"
    target.mkdir(parents=True)
    old = {"dataset_revision": "x", "task_name": "OldTask", "mteb_version": "2.10.0", "evaluation_time": 1.0,
           "scores": {"test": [{"hf_subset": "default", "languages": ["eng-Latn"], "main_score": 0.5}]}}
    (target / "OldTask.json").write_text(json.dumps(old))  # already in the repository: not part of this PR
    other = json.dumps({"task": "NFCorpus", "splits": ["test"], "subsets": ["default"], "version": {"mteb": "2.20.0"}})
    (target / "run_settings.jsonl").write_text(other + "\n")
    meta = {"name": HASHING, "revision": "1", "written_by": "an older mteb"}
    (target / "model_meta.json").write_text(json.dumps(meta))

    report = submit(hashing_results, tmp_path / "clone")
    lines = (target / "run_settings.jsonl").read_text().splitlines()
    assert lines[0] == other and sorted(json.loads(line)["task"] for line in lines[1:]) == sorted(TASKS)
    assert json.loads((target / "model_meta.json").read_text()) == meta  # same model and revision: kept
    assert target / "model_meta.json" in report.unchanged and report.ok
    full = _errors(validate_submission(tmp_path / "clone"))  # every file, as if all were new
    assert {p.path.name for p in full} == {"OldTask.json"}
    assert sorted(p.message.split(" records")[0] for p in full if " records mteb '2.10.0'" in p.message) == [
        "mteb_version", "scores['test']['default'].mteb_version"]
    assert any(p.message.startswith("has no run_settings.jsonl entry") for p in full)


def test_unknown_task_names_load(clean: Path) -> None:
    folder = clean / "results" / "disastir-mteb__hashing-encoder" / "1"
    path = folder / "DisastIR-QA-Bio.json"
    path.write_text(path.read_text().replace('"DisastIR-QA-Bio"', '"NotAnMtebTask"'))
    path.rename(folder / "NotAnMtebTask.json")
    settings = folder / "run_settings.jsonl"
    settings.write_text(settings.read_text().replace('"DisastIR-QA-Bio"', '"NotAnMtebTask"'))

    problems = validate_submission(clean)
    assert _errors(problems) == []  # mteb.TaskResult.from_disk never looks the task up
    assert any(UNRELEASED in p.message and "NotAnMtebTask" in p.message for p in problems)


def _edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _revision(value: str) -> Callable[[dict[str, Any]], None]:
    return lambda meta: meta.update(revision=value)


def _rename(rev: Path) -> Path:
    (rev / "DisastIR-QA-Bio.json").rename(rev / "DisastIR-QA-Geo.json")
    return rev / "DisastIR-QA-Geo.json"


def _no_meta(rev: Path) -> Path:
    (rev / "model_meta.json").unlink()
    return rev


def _bad_revision(rev: Path) -> Path:
    _edit_json(rev / "model_meta.json", _revision("main"))
    return rev / "model_meta.json"


def _placeholder_revision(rev: Path) -> Path:
    _edit_json(rev / "model_meta.json", _revision("no_revision_available"))
    rev.rename(rev.parent / "no_revision_available")
    return rev.parent / "no_revision_available" / "model_meta.json"


def _other_revision(rev: Path) -> Path:
    _edit_json(rev / "model_meta.json", _revision("2"))
    return rev


def _no_org(rev: Path) -> Path:
    _edit_json(rev / "model_meta.json", lambda meta: meta.update(name="hashing-encoder"))
    return rev / "model_meta.json"


def _model_folder(rev: Path) -> Path:
    rev.parent.rename(rev.parent.parent / "disastir-mteb__hashing")
    return rev.parent.parent / "disastir-mteb__hashing"


def _oversize(rev: Path) -> Path:
    (rev / "DisastIR-FC-Geo.json").write_text(" " * 2_000 + (rev / "DisastIR-FC-Geo.json").read_text())
    return rev / "DisastIR-FC-Geo.json"


def _split_and_splits(rev: Path) -> Path:
    lines = (rev / "run_settings.jsonl").read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), "split": "test"})
    (rev / "run_settings.jsonl").write_text("\n".join(lines) + "\n")
    return rev / "run_settings.jsonl"


def _no_run_settings(rev: Path) -> Path:
    (rev / "run_settings.jsonl").unlink()
    return rev / "run_settings.jsonl"


def _uncovered(rev: Path) -> Path:
    lines = (rev / "run_settings.jsonl").read_text().splitlines()
    (rev / "run_settings.jsonl").write_text("\n".join(lines[1:]) + "\n")
    return rev / f"{json.loads(lines[0])['task']}.json"


def _two_revisions(rev: Path) -> Path:
    shutil.copytree(rev, rev.parent / "2")
    _edit_json(rev.parent / "2" / "model_meta.json", _revision("2"))
    return rev.parent


def _experiments(rev: Path, source: Path) -> Path:
    shutil.copytree(source / "experiments", rev / "experiments")
    return rev / "experiments"


def _per_query(rev: Path, source: Path) -> Path:
    shutil.copytree(source / "disastir_per_query", rev / "disastir_per_query")
    return rev / "disastir_per_query"


def _old_mteb(rev: Path) -> Path:
    def change(data: dict[str, Any]) -> None:
        data["mteb_version"] = "2.13.0"
        for block in data["scores"]["test"]:
            block["mteb_version"] = "2.13.0"

    _edit_json(rev / "DisastIR-STS-Tech.json", change)
    return rev / "DisastIR-STS-Tech.json"


def _unloadable(rev: Path) -> Path:
    _edit_json(rev / "DisastIR-STS-Tech.json", lambda data: data.pop("evaluation_time"))
    return rev / "DisastIR-STS-Tech.json"


def _stray_file(rev: Path) -> Path:
    (rev.parent / "README.md").write_text("notes\n")
    return rev.parent / "README.md"


BREAKAGES: dict[str, tuple[Callable[..., Path], str]] = {
    "file renamed": (_rename, r"has task_name 'DisastIR-QA-Bio' but is named DisastIR-QA-Geo\.json"),
    "model_meta.json removed": (_no_meta, r"has no model_meta\.json"),
    "revision not a sha": (_bad_revision, r"has revision 'main', which is neither a 40-character lowercase hex"),
    "placeholder revision": (_placeholder_revision, r"has revision 'no_revision_available'; .* commit SHA"),
    "revision != folder": (_other_revision, r"is named '1' but model_meta\.json has revision '2'"),
    "name without org": (_no_org, r"names the model 'hashing-encoder', which has no organisation"),
    "model folder != name": (_model_folder, r"does not match the model name 'disastir-mteb/hashing-encoder'"),
    "oversize file": (_oversize, r"is [\d,]+ bytes \(0\.0 MiB\); the results repository accepts files up to "
                                 r"1,000 bytes"),
    "split and splits": (_split_and_splits, r"line 1 has both 'split' and 'splits'"),
    "run_settings.jsonl removed": (_no_run_settings, r"is missing; mteb >= 2\.14 writes it"),
    "run_settings.jsonl incomplete": (_uncovered, r"has no run_settings\.jsonl entry for 1 split/subset\(s\) "
                                                  r"\(test/default\)"),
    "task under two revisions": (_two_revisions, r"3 task\(s\) appear under several revisions: DisastIR-FC-Geo "
                                                 r"\(1, 2\); DisastIR-QA-Bio \(1, 2\); .* one revision per task"),
    "experiments folder": (_experiments, r"an experiments/ folder fails the results repository's folder test"),
    "per-query folder": (_per_query, r"is a subfolder of a revision folder"),
    "mteb too old": (_old_mteb, r"mteb_version records mteb '2\.13\.0'; .* >= 2\.14\.0"),
    "not a TaskResult": (_unloadable, r"does not load with mteb\.TaskResult\.from_disk \(.*evaluation_time"),
    "file beside revisions": (_stray_file, r"is a file at the revision level"),
}


@pytest.mark.parametrize("case", list(BREAKAGES))
def test_each_check_catches_a_broken_copy(case: str, clean: Path, hashing_results: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    rev = clean / "results" / "disastir-mteb__hashing-encoder" / "1"
    source = hashing_results / "results" / "disastir-mteb__hashing-encoder" / "1"
    assert _errors(validate_submission(clean)) == []
    if case == "oversize file":
        monkeypatch.setattr(submission_checks, "MAX_FILE_BYTES", 1_000)
    breaker, expected = BREAKAGES[case]
    path = breaker(rev, source) if case in ("experiments folder", "per-query folder") else breaker(rev)

    errors = _errors(validate_submission(clean))
    assert any(p.path == path and re.search(expected, p.message) for p in errors), "\n".join(map(str, errors))


def test_submit_command_line(minilm_results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb import cli

    out = tmp_path / "results-repo"
    assert cli.main(["submit", str(minilm_results), "--out", str(out)]) == 0
    assert "No errors: ready for a pull request" in capsys.readouterr().out
    assert cli.main(["submit", "--check", "--out", str(out)]) == 0
    meta = next(out.rglob("model_meta.json"))
    meta.unlink()
    assert cli.main(["submit", "--check", "--out", str(out)]) == 1
    assert "model_meta.json" in capsys.readouterr().out
    assert cli.main(["submit", str(tmp_path / "none"), "--out", str(out)]) == 2

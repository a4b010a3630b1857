"""`submit`: real runner results -> the results repository's layout, and each of its checks catching a broken copy.

Every error cites the results repository's check it stands for (``Problem.check``); a fake clone (``_clone``)
carries that repository's exemption lists in its own test files, as a real clone does.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sentences import says

from conftest import write_layout
from disastir_mteb.data.layout import MARKER
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.runner.run import evaluate
from disastir_mteb.submission import results_repository
from disastir_mteb.submission.results_repository import CHECKS
from disastir_mteb.submission.submit import Problem, submit, validate_submission

HASHING = "disastir-mteb/hashing-encoder"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
TASKS = ["DisastIR-QA-Bio", "DisastIR-FC-Geo", "DisastIR-STS-Tech"]
UNRELEASED = "not in a released mteb"
UNREGISTERED = "not in mteb's model registry"
HASHING_REV = Path("disastir-mteb__hashing-encoder") / "1"
EXPERIMENT = "disastir_instructions_disastir__disastir_template_instruct-query"  # mteb's name for the settings


def _run(data: Path, model: Any, tasks: list[str], out: Path, **kwargs: Any) -> None:
    """The real runner on ``data`` (a module-scoped stand-in for the ``use_data`` fixture)."""
    from disastir_mteb.tasks import retrieval as task_module

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISASTIR_DATA_DIR", str(data))
        task_module.forget_data_files()
        try:
            evaluate(model, tasks, cache_dir=False, output_folder=out, show_progress=False, **kwargs)
        finally:
            task_module.forget_data_files()


@pytest.fixture(scope="module")
def own_data(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample's files without the generator's marker: a user's own folder, not generated data.

    ``submit`` refuses results on generated data, so what it is to accept must come from data that is not.
    """
    folder = tmp_path_factory.mktemp("own") / "data"
    shutil.copytree(sample_data, folder, ignore=shutil.ignore_patterns(MARKER))
    return folder


@pytest.fixture(scope="module")
def hashing_results(own_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain run of three tasks and an instruction experiment of two, as the runner writes them."""
    out = tmp_path_factory.mktemp("hashing-results")
    _run(own_data, HashingEncoder(), TASKS, out)
    _run(own_data, HashingEncoder(), TASKS[:2], out, instructions="disastir")
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


def test_clean_submission_files_plain_and_experiment_runs(hashing_results: Path, tmp_path: Path) -> None:
    from mteb.cache import ResultCache
    from mteb.models import ModelMeta

    report = submit(hashing_results, tmp_path / "out")

    assert report.ok and report.errors == ()
    source = hashing_results / "results" / HASHING_REV
    target = tmp_path / "out" / "results" / HASHING_REV
    assert report.sources == (source, source / "experiments" / EXPERIMENT)
    files = ["model_meta.json", "run_settings.jsonl"]
    expected = [*(f"{task}.json" for task in TASKS), *files,
                *(f"experiments/{EXPERIMENT}/{name}" for name in [*(f"{task}.json" for task in TASKS[:2]), *files])]
    written = sorted(str(path.relative_to(target)) for path in (tmp_path / "out").rglob("*") if path.is_file())
    assert written == sorted(expected)  # no disastir_per_query/, here or in the experiment
    assert (source / "disastir_per_query").is_dir()  # there, and left behind
    for name in expected:
        assert (target / name).read_bytes() == (source / name).read_bytes()  # mteb's own files, byte for byte
    assert set(report.written) == {target / name for name in written}

    meta = json.loads((source / "experiments" / EXPERIMENT / "model_meta.json").read_text())
    cache = ResultCache(tmp_path / "cache")  # where mteb itself files the experiment, and the folder test expects it
    filed = cache.get_task_result_path(TASKS[0], ModelMeta.model_validate({**meta, "loader": None})).parent
    assert filed.relative_to(tmp_path / "cache") == Path("results") / HASHING_REV / "experiments" / EXPERIMENT
    expected_by_test = results_repository.expected_folder(tmp_path / "out" / "results",
                                                          target / "experiments" / EXPERIMENT / "model_meta.json", meta)
    assert expected_by_test == target / "experiments" / EXPERIMENT

    warnings = {problem.message.split(" ")[0]: problem for problem in report.warnings}
    assert len(report.warnings) == 2
    assert UNREGISTERED in warnings["model"].message and HASHING in warnings["model"].message
    assert warnings["model"].check == CHECKS["registry"]
    assert UNRELEASED in warnings["3"].message and "mteb.get_task()" in warnings["3"].message
    assert validate_submission(tmp_path / "out") == list(report.problems)
    assert validate_submission(tmp_path / "out" / "results") == list(report.problems)
    assert "No errors" in report.to_text() and "2 result set(s) (1 with experiment settings" in report.to_text()

    again = submit(hashing_results, tmp_path / "out")  # idempotent: nothing rewritten
    assert again.written == () and len(again.unchanged) == 9


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
    assert len(submit(both, tmp_path / "all").sources) == 3  # no model: every result set
    with pytest.raises(ValueError, match=r"No results for model 'sentence-transformers/all-MiniLM-L6' under .*; "
                                         r"it holds disastir-mteb/hashing-encoder, .* Did you mean '" + MINILM):
        submit(both, tmp_path / "none", model="sentence-transformers/all-MiniLM-L6")
    assert not (tmp_path / "none").exists()


def test_an_experiment_needs_its_plain_run(hashing_results: Path, clean: Path, tmp_path: Path) -> None:
    experiments = hashing_results / "results" / HASHING_REV / "experiments"
    refused = (rf"Refusing to submit .*{EXPERIMENT} alone: the results repository needs a model_meta\.json in "
               rf".*{re.escape(str(Path('results') / HASHING_REV))} \(tests/test_ensure_correct_metadata\.py::"
               r"test_model_meta_in_folders\), which only a plain run writes; run `disastir-mteb run -m "
               r"disastir-mteb/hashing-encoder` without --search ann and --instructions, and submit both\.")
    with pytest.raises(ValueError, match=refused):
        submit(experiments, tmp_path / "new")
    assert not (tmp_path / "new").exists()
    report = submit(experiments, clean)  # the plain run is there already: accepted
    assert report.ok and report.written == () and len(report.unchanged) == 4
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError) as missing:
        submit(tmp_path / "empty", tmp_path / "new")
    says(str(missing.value), tmp_path / "empty", "no DisastIR result files", "(DisastIR-*.json)")
    with pytest.raises(FileNotFoundError) as missing:
        validate_submission(tmp_path / "empty")
    says(str(missing.value), "No results folder", tmp_path / "empty", "results/<org>__<model>/<revision>/")


def test_changed_files_need_overwrite(hashing_results: Path, clean: Path) -> None:
    target = clean / "results" / "disastir-mteb__hashing-encoder" / "1" / "DisastIR-QA-Bio.json"
    source = hashing_results / "results" / "disastir-mteb__hashing-encoder" / "1" / "DisastIR-QA-Bio.json"
    target.write_text(target.read_text().replace('"main_score"', '"main_score" ', 1))
    edited = target.read_bytes()

    with pytest.raises(FileExistsError) as refused:
        submit(hashing_results, clean)
    says(str(refused.value), "1 file(s)", clean / "results", "differ", f"(first: {target})", "overwrite=True",
         "(--overwrite)")
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
    problems = validate_submission(tmp_path / "clone")  # every file of the submitted folders, as if all were new
    assert _errors(problems) == []  # an old mteb, a gap in run_settings.jsonl: the results repository accepts both
    old_file = [p for p in problems if p.path.name == "OldTask.json"]
    assert sorted(p.message.split(" records")[0] for p in old_file if " records mteb '2.10.0'" in p.message) == [
        "mteb_version", "scores['test']['default'].mteb_version"]
    assert any(p.message.startswith("has no run_settings.jsonl entry") for p in old_file)
    assert {(p.severity, p.check) for p in old_file} == {("warning", "")}  # advice: no check of that repository


def test_unknown_task_names_load(clean: Path) -> None:
    folder = clean / "results" / "disastir-mteb__hashing-encoder" / "1"
    path = folder / "DisastIR-QA-Bio.json"
    path.write_text(path.read_text().replace('"DisastIR-QA-Bio"', '"NotAnMtebTask"'))
    path.rename(folder / "NotAnMtebTask.json")
    settings = folder / "run_settings.jsonl"
    settings.write_text(settings.read_text().replace('"DisastIR-QA-Bio"', '"NotAnMtebTask"'))

    problems = validate_submission(clean)
    assert _errors(problems) == []  # mteb.TaskResult.from_disk never looks the task up
    assert any(UNRELEASED in p.message and p.message.startswith("4 task(s) (DisastIR-FC-Geo, DisastIR-QA-Bio, "
                                                                "DisastIR-STS-Tech, ...)") for p in problems)


def _edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _revision(value: str) -> Callable[[dict[str, Any]], None]:
    return lambda meta: meta.update(revision=value)


def _clone(folder: Path, without_meta: list[tuple[str, str]], revision_exceptions: list[tuple[str, str]]) -> Path:
    """Make ``folder`` a fake clone: the results repository's two test files, with its exemption lists only."""
    (folder / "tests").mkdir(parents=True, exist_ok=True)
    (folder / "tests" / "test_correct_folder_structure.py").write_text(
        "from pathlib import Path\n\nresults_folder = Path(__file__).parent.parent / 'results'\n\n"
        "folders_without_meta = [  # please do not add to this list\n"
        + "".join(f"    {pair!r},\n" for pair in without_meta) + "]\n")
    (folder / "tests" / "test_ensure_correct_metadata.py").write_text(
        "from tests.test_correct_folder_structure import folders_without_meta, results_folder\n\n"
        f"revision_exceptions = {revision_exceptions!r}\n\n\ndef is_sha1(value):\n    return len(value) == 40\n")
    return folder


# Breaking a clean copy: each case, the folder (path) it breaks, the error expected and the check it cites.
def _rename(rev: Path) -> Path:
    (rev / "DisastIR-QA-Bio.json").rename(rev / "DisastIR-QA-Geo.json")
    return rev / "DisastIR-QA-Geo.json"


def _no_meta(rev: Path) -> Path:
    (rev / "model_meta.json").unlink()
    return rev


def _bad_meta(rev: Path) -> Path:
    (rev / "model_meta.json").write_text("{not json")
    return rev / "model_meta.json"


def _bad_revision(rev: Path) -> Path:
    _edit_json(rev / "model_meta.json", _revision("main"))
    return rev / "model_meta.json"


def _placeholder_revision(rev: Path) -> Path:  # a clone whose lists do not name it: no legacy exemption
    _clone(rev.parents[2], [], [])
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


def _two_revisions(rev: Path) -> Path:
    shutil.copytree(rev, rev.parent / "2")
    _edit_json(rev.parent / "2" / "model_meta.json", _revision("2"))
    return rev.parent


def _same_revision_twice(rev: Path) -> Path:
    shutil.copytree(rev, rev.parent / "2")
    return rev.parent / "2"


def _experiment_misfiled(rev: Path) -> Path:
    (rev / "experiments" / EXPERIMENT).rename(rev / "experiments" / "instructions")
    return rev / "experiments" / "instructions"


def _experiment_without_meta(rev: Path) -> Path:
    (rev / "experiments" / EXPERIMENT / "model_meta.json").unlink()
    return rev / "experiments" / EXPERIMENT


def _per_query(rev: Path, source: Path) -> Path:
    shutil.copytree(source / "disastir_per_query", rev / "disastir_per_query")
    return rev / "disastir_per_query"


def _meta_in_subfolder(rev: Path) -> Path:
    (rev / "extra").mkdir()
    shutil.copy(rev / "model_meta.json", rev / "extra" / "model_meta.json")
    return rev / "extra"


def _unloadable(rev: Path) -> Path:
    _edit_json(rev / "DisastIR-STS-Tech.json", lambda data: data.pop("evaluation_time"))
    return rev / "DisastIR-STS-Tech.json"


def _stray_file(rev: Path) -> Path:
    (rev.parent / "README.md").write_text("notes\n")
    return rev.parent / "README.md"


BREAKAGES: dict[str, tuple[Callable[..., Path], str, str]] = {
    "file renamed": (_rename, r"has task_name 'DisastIR-QA-Bio' but is named DisastIR-QA-Geo\.json", "task_name"),
    "model_meta.json removed": (_no_meta, r"has no model_meta\.json", "meta"),
    "model_meta.json not JSON": (_bad_meta, r"is not valid JSON", "folder"),
    "revision not a sha": (_bad_revision, r"has revision 'main', which is neither a 40-character lowercase hex",
                           "revision"),
    "placeholder revision": (_placeholder_revision, r"has revision 'no_revision_available'; .* commit SHA", "revision"),
    "revision != folder": (_other_revision, r"is named '1' but model_meta\.json has revision '2'", "folder"),
    "name without org": (_no_org, r"names the model 'hashing-encoder', which has no organisation", "organization"),
    "model folder != name": (_model_folder, r"does not match the model name 'disastir-mteb/hashing-encoder'", "folder"),
    "oversize file": (_oversize, r"is [\d,]+ bytes \(0\.0 MiB\); the results repository accepts files up to "
                                 r"1,000 bytes", "size"),
    "task under two revisions": (_two_revisions, r"3 task\(s\) appear under several revisions: DisastIR-FC-Geo "
                                                 r"\(1, 2\); DisastIR-QA-Bio \(1, 2\); .* one revision per task",
                                 "duplicate_task"),
    "revision twice": (_same_revision_twice, r"has revision '1' in model_meta\.json, as 1/ does", "duplicate_revision"),
    "experiment misfiled": (_experiment_misfiled, rf"holds a model_meta\.json that the folder test expects in "
                                                  rf"results/{re.escape(str(HASHING_REV))}/experiments/{EXPERIMENT}/",
                            "folder"),
    "experiment without model_meta.json": (_experiment_without_meta, r"holds 2 \.json file\(s\) with no "
                                                                     r"model_meta\.json beside them", "comparison"),
    "per-query folder": (_per_query, r"holds 3 \.json file\(s\) with no model_meta\.json beside them, which the PR "
                                     r"comparison workflow opens", "comparison"),
    "model_meta.json in a subfolder": (_meta_in_subfolder, r"folder test expects in results/disastir-mteb__hashing-"
                                                           r"encoder/1/", "folder"),
    "not a TaskResult": (_unloadable, r"does not load with mteb\.TaskResult\.from_disk \(.*evaluation_time",
                         "comparison_load"),
    "file beside revisions": (_stray_file, r"is a file at the revision level", "meta"),
}


@pytest.mark.parametrize("case", list(BREAKAGES))
def test_each_check_catches_a_broken_copy(case: str, clean: Path, hashing_results: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    rev = clean / "results" / HASHING_REV
    source = hashing_results / "results" / HASHING_REV
    assert _errors(validate_submission(clean)) == []
    if case == "oversize file":
        monkeypatch.setattr(results_repository, "MAX_FILE_BYTES", 1_000)
    breaker, expected, check = BREAKAGES[case]
    path = breaker(rev, source) if case == "per-query folder" else breaker(rev)

    errors = _errors(validate_submission(clean))
    assert any(p.path == path and re.search(expected, p.message) and CHECKS[check] in p.check.split("; ")
               for p in errors), "\n".join(map(str, errors))
    cited = set(CHECKS.values())
    assert all(p.check and set(p.check.split("; ")) <= cited for p in errors)  # each error: a check it runs


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


def _old_mteb(rev: Path) -> Path:
    def change(data: dict[str, Any]) -> None:
        data["mteb_version"] = "2.13.0"
        for block in data["scores"]["test"]:
            block["mteb_version"] = "2.13.0"

    _edit_json(rev / "DisastIR-STS-Tech.json", change)
    return rev / "DisastIR-STS-Tech.json"


def _experiment_renamed(rev: Path) -> Path:
    folder = rev / "experiments" / EXPERIMENT
    (folder / "DisastIR-QA-Bio.json").rename(folder / "DisastIR-QA-Geo.json")
    return folder / "DisastIR-QA-Geo.json"


def _notes_folder(rev: Path) -> Path:
    (rev / "notes").mkdir()
    (rev / "notes" / "README.md").write_text("how it was run\n")
    return rev / "notes"


def _legacy_folder(rev: Path) -> Path:  # no clone's lists: the generic rule lets a placeholder folder pass
    _edit_json(rev / "model_meta.json", _revision("no_revision_available"))
    shutil.rmtree(rev / "experiments")
    rev.rename(rev.parent / "no_revision_available")
    return rev.parent / "no_revision_available"


# What the results repository does not enforce: a warning for a submitted folder, never an error.
ADVICE: dict[str, tuple[Callable[[Path], Path], str]] = {
    "split and splits": (_split_and_splits, r"line 1 has both 'split' and 'splits'"),
    "run_settings.jsonl removed": (_no_run_settings, r"is missing; the results repository does not require it"),
    "run_settings.jsonl incomplete": (_uncovered, r"has no run_settings\.jsonl entry for 1 split/subset\(s\) "
                                                  r"\(test/default\)"),
    "mteb too old": (_old_mteb, r"mteb_version records mteb '2\.13\.0', not a version >= 2\.14\.0; the results "
                                r"repository accepts it"),
    "experiment file renamed": (_experiment_renamed, r"has task_name 'DisastIR-QA-Bio' but is named "
                                                     r"DisastIR-QA-Geo\.json; .* at the revision level only"),
    "folder outside the layout": (_notes_folder, r"is no part of the results layout"),
    "legacy folder, no clone": (_legacy_folder, r"passes as a legacy 'no_revision_available' folder only because .* "
                                                r"has no tests/test_correct_folder_structure\.py"),
}


@pytest.mark.parametrize("case", list(ADVICE))
def test_what_the_repository_does_not_enforce_is_a_warning(case: str, clean: Path) -> None:
    breaker, expected = ADVICE[case]
    path = breaker(clean / "results" / HASHING_REV)

    problems = validate_submission(clean)
    assert _errors(problems) == []
    assert any(p.severity == "warning" and p.path == path and re.search(expected, p.message) and p.check == ""
               for p in problems), "\n".join(map(str, problems))


def test_a_clone_s_exemptions_and_other_models_stay_quiet(minilm_results: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb import cli

    model = "sentence-transformers__all-MiniLM-L6-v2"
    clone = _clone(tmp_path / "mteb-results", [(model, "no_revision_available")], [(model, "external")])
    legacy = clone / "results" / model / "no_revision_available"  # old results, no model_meta.json
    external = clone / "results" / model / "external"  # another's results, revision "external"
    other = clone / "results" / "acme__newer-model" / ("a" * 40)  # an old mteb, no run_settings.jsonl, and a model
    # this mteb does not know (added to mteb after it): its registry warning is not for this submission
    old = {"dataset_revision": "x", "mteb_version": "1.12.0", "evaluation_time": 1.0,
           "scores": {"test": [{"hf_subset": "default", "languages": ["eng-Latn"], "main_score": 0.5}]}}
    for folder, task, meta in [(legacy, "SciFact", None),
                               (external, "NFCorpus", {"name": MINILM, "revision": "external"}),
                               (other, "ArguAna", {"name": "acme/newer-model", "revision": "a" * 40})]:
        folder.mkdir(parents=True)
        (folder / f"{task}.json").write_text(json.dumps({**old, "task_name": task}))
        if meta is not None:
            (folder / "model_meta.json").write_text(json.dumps(meta))

    report = submit(minilm_results, clone)
    (submitted,) = (path for path in (clone / "results" / model).iterdir() if len(path.name) == 40)
    assert report.ok and report.errors == () and report.warnings  # the unreleased tasks, at least
    assert all(p.path == submitted.parent or submitted in (p.path, *p.path.parents) for p in report.warnings)
    assert cli.main(["submit", "--check", "--out", str(clone)]) == 0
    printed = capsys.readouterr().out
    assert "0 error(s)" in printed and "warning:" in printed
    assert not any(name in printed for name in ("no_revision_available", "external", "acme", "1.12.0"))

    _clone(clone, [], [])  # the same folders, the lists without them: the repository's tests would fail
    errors = _errors(validate_submission(clone))
    assert {(p.path, p.check) for p in errors} == {(legacy, CHECKS["meta"]),
                                                   (external / "model_meta.json", CHECKS["revision"])}


def test_submitting_into_the_results_folder_itself_is_refused(hashing_results: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb import cli

    shutil.copytree(hashing_results, tmp_path / "results")
    monkeypatch.chdir(tmp_path)
    before = sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    for out in ["results", "."]:  # results/results/<model>/... or results/<model>/...: the run's own sets
        assert cli.main(["submit", "results", "--out", out]) == 2
        says(capsys.readouterr().err, "disastir-mteb submit:", f"results into {out}:", "already lie in",
             "onto itself", "--out mteb-results")
    with pytest.raises(ValueError) as refused:
        submit(tmp_path / "results" / "results" / HASHING_REV, tmp_path / "results")
    says(str(refused.value), f"into {tmp_path / 'results'}:", "onto itself",
         "git clone https://github.com/embeddings-benchmark/results mteb-results", "--out mteb-results")
    assert sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before  # nothing written

    assert cli.main(["submit", "results", "--out", "mteb-results"]) == 0  # the README's recipe: named apart
    assert (tmp_path / "mteb-results" / "results" / HASHING_REV / "experiments" / EXPERIMENT).is_dir()


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


def test_results_on_generated_data_are_refused(sample_data: Path, hashing_results: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb import cli

    synthetic = tmp_path / "sample-run"
    _run(sample_data, HashingEncoder(name="org/sample-model"), TASKS[:1], synthetic)
    refused = (r"^Refusing to submit .*org__sample-model/1: its scores were computed on generated data \(local folder "
               r"sample-small-seed0-v2 \(synthetic sample, scale small, seed 0\)\), so they are not DisastIR results; "
               r"run the model on the DisastIR data \(without --data sample or a generated DISASTIR_DATA_DIR\) and "
               r"submit that\.$")
    with pytest.raises(ValueError, match=refused):
        submit(synthetic, tmp_path / "out")
    assert cli.main(["submit", str(synthetic), "--out", str(tmp_path / "out")]) == 2
    printed = capsys.readouterr()
    assert "ready for a pull request" not in printed.out  # before: "No errors: ready for a pull request", rc 0
    assert len(printed.err.splitlines()) == 1 and "are not DisastIR results" in printed.err
    assert not (tmp_path / "out").exists()  # nothing written

    both = tmp_path / "both"  # a real run beside it: refused as a whole, or the real one picked with --model
    shutil.copytree(hashing_results, both)
    shutil.copytree(synthetic, both, dirs_exist_ok=True)
    with pytest.raises(ValueError, match=refused):
        submit(both, tmp_path / "out")
    assert submit(both, tmp_path / "out", model=HASHING).ok


def _copy_as(task: str) -> Callable[[Path], None]:
    def copy(rev: Path) -> None:  # the case: another task's file (and per-query file) under this name
        shutil.copy(rev / f"{task}.json", rev / "DisastIR-QA-Bio.json")
        shutil.copy(rev / "disastir_per_query" / f"{task}_per_query.json",
                    rev / "disastir_per_query" / "DisastIR-QA-Bio_per_query.json")
    return copy


def _scores_of_qa_bio(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda rev: _edit_json(rev / "DisastIR-QA-Bio.json", lambda data: change(data["scores"]))


def _all_ones(rev: Path) -> None:  # every number 1.0, the gain's variant too; the top 10s left as they were
    _scores_of_qa_bio(lambda scores: scores["test"][0].update(ndcg_at_10=1.0, main_score=1.0,
                                                              ndcg_at_10_exponential_gain=1.0))(rev)
    _edit_json(rev / "disastir_per_query" / "DisastIR-QA-Bio_per_query.json",
               lambda data: [query.update(ndcg_at_10=1.0) for query in data["queries"].values()])


CONTRADICTING: dict[str, tuple[Callable[[Path], None], str]] = {  # case: (edit of the plain set, the sentence's start)
    "another task's file under its name": (_copy_as("DisastIR-FC-Geo"), "DisastIR-QA-Bio.json holds the results of "
                                                                         "'DisastIR-FC-Geo' (its task_name)"),
    "an extra split holding 7.5": (_scores_of_qa_bio(lambda scores: scores.update(
        dev=[{**scores["test"][0], "ndcg_at_10": 7.5, "main_score": 7.5}])), "DisastIR-QA-Bio.json holds scores for "
                                                                             "split 'dev'"),
    "a second test/default entry": (_scores_of_qa_bio(lambda scores: scores["test"].append(
        {**scores["test"][0], "main_score": 0.5, "ndcg_at_10": 0.5})), "DisastIR-QA-Bio.json holds 2 entries for "
                                                                       "split 'test', subset 'default'"),
    "every NDCG 1.0": (_all_ones, "disastir_per_query/DisastIR-QA-Bio_per_query.json says NDCG@10 1.000000 for "
                                  "query 'QA-Bio-q001', but its top 10 re-scored against the data in "),
}


@pytest.mark.parametrize("case", list(CONTRADICTING))
def test_a_contradicting_set_is_refused_before_anything_is_written(case: str, hashing_results: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Results on a user's own data (not generated): before, submit copied these and said "ready for a pull request"
    (or wrote the files and refused afterwards, leaving them in --out)."""
    from disastir_mteb import cli

    edit, start = CONTRADICTING[case]
    results = tmp_path / "results"
    shutil.copytree(hashing_results, results)
    edit(results / "results" / HASHING_REV)
    out = tmp_path / "mteb-results"

    assert cli.main(["submit", str(results), "--out", str(out)]) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and len(printed.err.splitlines()) == 1
    assert printed.err.startswith(f"disastir-mteb submit: {results / 'results' / HASHING_REV / start}")
    assert not out.exists()


def test_nothing_is_written_when_the_repository_s_checks_would_fail(hashing_results: Path, clean: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The clone holds the tasks under another revision of the model: the repository allows one. Before: the files
    were written, then the error reported; now the checks run on a copy first and ``out`` stays as it was."""
    from disastir_mteb import cli

    model = clean / "results" / HASHING_REV.parent
    (model / "1").rename(model / "2")
    _edit_json(model / "2" / "model_meta.json", _revision("2"))
    shutil.rmtree(model / "2" / "experiments")
    before = sorted((str(p), p.read_bytes()) for p in clean.rglob("*") if p.is_file())

    report = submit(hashing_results, clean)
    assert not report.ok and report.written == ()
    assert [(p.path, p.check) for p in report.errors] == [(model, CHECKS["duplicate_task"])]
    assert sorted((str(p), p.read_bytes()) for p in clean.rglob("*") if p.is_file()) == before  # nothing written
    assert cli.main(["submit", str(hashing_results), "--out", str(clean)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"Checked 2 result set(s) (1 with experiment settings, filed under experiments/) for "
                        f"{clean / 'results'}: nothing written.")
    says(lines[1], "error:", f"{model}:", "3 task(s)", "several revisions", "DisastIR-FC-Geo (1, 2)")
    assert lines[-1] == "1 error(s): fix them and submit again; nothing was written."
    assert sorted((str(p), p.read_bytes()) for p in clean.rglob("*") if p.is_file()) == before


def test_submit_says_which_sets_were_not_rescored(hashing_results: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A run on the Hub's data: its top 10s are not re-scored (the Hub is never read to check results), and the one
    line says so; the experiment set, on a folder here, is re-scored and says nothing."""
    from disastir_mteb import cli
    from disastir_mteb.vocabulary.metadata import DATASET_REPO, DATASET_REVISION

    results = tmp_path / "results"
    shutil.copytree(hashing_results, results)
    rev, hub = results / "results" / HASHING_REV, f"hf:{DATASET_REPO}@{DATASET_REVISION}"
    for task in TASKS:
        _edit_json(rev / f"{task}.json", lambda data: data["scores"]["test"][0].update(disastir_data=hub))
        _edit_json(rev / "disastir_per_query" / f"{task}_per_query.json",
                   lambda data: data.update(data={"source": hub, "synthetic": False}))

    assert cli.main(["submit", str(results), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr()
    says(printed.err, "disastir-mteb submit:", f"{rev}:", "3 of 3 per-query file(s)", "not re-scored",
         "DisastIR-FC-Geo and 2 more", f"({hub})", "never downloaded", "task files only")
    assert "No errors: ready for a pull request" in printed.out


def test_a_damaged_run_settings_file_is_named_and_nothing_written(hashing_results: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte", naming no file."""
    from disastir_mteb import cli

    results = tmp_path / "results"
    shutil.copytree(hashing_results, results)
    settings = results / "results" / HASHING_REV / "run_settings.jsonl"
    settings.write_bytes(b"\xff" + settings.read_bytes())

    assert cli.main(["submit", str(results), "--out", str(tmp_path / "out")]) == 2
    says(capsys.readouterr().err, "disastir-mteb submit:", settings, "damaged", "not UTF-8 text", "byte 0xff",
         "position 0", "restore it", "delete it", "--overwrite")
    assert not (tmp_path / "out").exists()

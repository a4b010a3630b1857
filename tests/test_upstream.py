"""`disastir-mteb upstream`: the mteb-side files, written into a stand-in mteb checkout and used by mteb alone.

The stand-in is the installed mteb package copied as ``<tmp>/mteb`` beside a ``pyproject.toml`` naming
the mteb project (what the command recognises as a checkout), built once per session. What mteb
makes of the written files is asked in a child process that imports mteb from the stand-in with the
plugin's autoload off, so every answer comes from the upstream files alone.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sentences import says

from disastir_mteb import cli
from disastir_mteb.exports import export_mteb, mteb_subset
from disastir_mteb.tasks.benchmarks import benchmarks
from disastir_mteb.tasks.retrieval import TASK_CLASSES
from disastir_mteb.vocabulary.taxonomy import TASK_NAMES

MTEB_PACKAGE = Path(importlib.util.find_spec("mteb").origin).parent  # type: ignore[arg-type, union-attr]
TASK_FILE = Path("mteb/tasks/retrieval/eng/disastir_retrieval.py")
LOADED = ["DisastIR-QA-Bio", "DisastIR-STS-Tech"]  # STS: grades 0..5, the largest gains

PROBE = r'''
import json, sys
from pathlib import Path

import mteb
from mteb.abstasks import AbsTaskRetrieval

export, loaded = Path(sys.argv[1]), json.loads(sys.argv[2])
out = {"mteb": mteb.__file__}
task = mteb.get_task("DisastIR-QA-Bio")
out["qa_bio_file"] = sys.modules[type(task).__module__].__file__
tasks = [mteb.get_task(name) for name in json.loads(sys.argv[3])]
out["names"] = [t.metadata.name for t in tasks]
problems = {}
for t in tasks:  # what mteb's tests/test_tasks/test_metadata.py asserts, with mteb's own validation
    found = []
    try:
        t.metadata._validate_metadata()
    except Exception as error:
        found.append(repr(error))
    if not t.metadata.is_filled():
        found.append("metadata not filled")
    if t.metadata.dataset.get("trust_remote_code", False) is not False:
        found.append("trusts remote code")
    if not isinstance(t.metadata.simplified_task_type, str):
        found.append("no simplified task type")
    if t.metadata.descriptive_stats is None or t.metadata.n_samples is None:
        found.append("no descriptive statistics")
    if isinstance(t.metadata.prompt, dict) and not isinstance(t, AbsTaskRetrieval):
        found.append("dict prompt on a non-retrieval task")
    if found:
        problems[t.metadata.name] = found
out["problems"] = problems
out["metadata"] = {t.metadata.name: t.metadata.model_dump(mode="json") for t in tasks}
out["hf_subsets"] = {t.metadata.name: t.hf_subsets for t in tasks}
out["n_samples"] = {t.metadata.name: t.metadata.n_samples for t in tasks}
benchmark = mteb.get_benchmark("DisastIR")
out["benchmark"] = {
    "tasks": [t.metadata.name for t in benchmark.tasks],
    "groupings": {a.name: {g.label: [t.metadata.name for t in g.tasks] for g in a.groups}
                  for a in benchmark.aggregations if hasattr(a, "groups")},
    "description": benchmark.description, "reference": benchmark.reference, "citation": benchmark.citation,
}
out["loaded"] = {}
for name in loaded:  # the upstream class itself, pointed at a local export instead of the Hub
    cls = type(mteb.get_task(name))
    local = cls.metadata.model_copy(update={"dataset": {**cls.metadata.dataset, "path": str(export),
                                                        "revision": "main"}})
    task = type("Local", (cls,), {"metadata": local})()
    try:
        task.load_data()
        split = task.dataset["default"]["test"]
        out["loaded"][name] = {"subsets": list(task.dataset), "qrels": split["relevant_docs"],
                               "queries": list(split["queries"]["id"]), "corpus": len(split["corpus"])}
    except Exception as error:  # reported by the one test that asks
        out["loaded"][name] = {"subsets": repr(error)}
out["plugin_imported"] = sorted(m for m in sys.modules if m.split(".")[0] == "disastir_mteb")
print(json.dumps(out))
'''


def _upstream(*args: str) -> tuple[int, str, str]:
    """Run the command in this process: (exit code, stdout, stderr)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["upstream", *args])
    return code, out.getvalue(), err.getvalue()


def _snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of a tree (compiled caches aside): (mtime, content) of the ones the command may write."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            relative = str(path.relative_to(root))
            text = path.read_bytes() if "DisastIR" in relative or "disastir" in relative or path.name in {
                "__init__.py", "benchmarks.py"} else b""
            found[relative] = (path.stat().st_mtime_ns, text)
    return found


@pytest.fixture(scope="session")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A stand-in mteb checkout (the installed mteb + pyproject.toml), the command run on it once, and its output."""
    root = tmp_path_factory.mktemp("mteb-checkout")
    shutil.copytree(MTEB_PACKAGE, root / "mteb", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "pyproject.toml").write_text('[project]\nname = "mteb"\n', encoding="utf-8")
    code, out, err = _upstream("--mteb", str(root))
    assert code == 0, err
    return root, out


@pytest.fixture(scope="session")
def checkout(first_run: tuple[Path, str]) -> Path:
    return first_run[0]


@pytest.fixture(scope="session")
def exported(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Two tasks exported as mteb-format data (the sample), and what the plugin's tasks load from it."""
    from disastir_mteb.tasks import retrieval as tasks

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISASTIR_DATA_DIR", str(sample_data))
        tasks.forget_data_files()
        out = export_mteb(tmp_path_factory.mktemp("export") / "mteb", LOADED)
        plugin = {}
        for name in LOADED:
            task = TASK_CLASSES[name]()
            task.load_data()
            split = task.dataset["default"]["test"]
            plugin[name] = {"qrels": split["relevant_docs"], "queries": list(split["queries"]["id"]),
                            "corpus": len(split["corpus"])}
    tasks.forget_data_files()
    return out, plugin


@pytest.fixture(scope="session")
def probe(checkout: Path, exported: tuple[Path, dict]) -> dict:
    """What mteb, imported from the stand-in without the plugin, says about the DisastIR tasks."""
    env = {**os.environ, "DISASTIR_MTEB_AUTOLOAD": "0", "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    env.pop("DISASTIR_DATA_DIR", None)
    done = subprocess.run([sys.executable, "-c", PROBE, str(exported[0]), json.dumps(LOADED), json.dumps(TASK_NAMES)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=checkout.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_mteb_side_files_are_written(first_run: tuple[Path, str]) -> None:
    checkout, out = first_run
    assert "52 file(s) written, 0 already up to date" in out and "TODO placeholder" in out
    source = (checkout / TASK_FILE).read_text(encoding="utf-8")
    tree = ast.parse(source)
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not [m for m in imported if m and m.startswith("disastir_mteb")]
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and not n.name.startswith("_")]
    assert classes == [cls.__name__ for cls in TASK_CLASSES.values()]
    assert '_DATASET_REVISION = "TODO"' in source and "# TODO: placeholders" in source  # not on the Hub yet
    init = (checkout / "mteb/tasks/retrieval/eng/__init__.py").read_text(encoding="utf-8")
    assert "from .disastir_retrieval import (\n" in init and '    "DisastIRQABio",\n' in init
    assert "    DISASTIR,\n" in (checkout / "mteb/benchmarks/benchmarks/__init__.py").read_text(encoding="utf-8")
    assert "\nDISASTIR = Benchmark(\n" in (checkout / "mteb/benchmarks/benchmarks/benchmarks.py").read_text(
        encoding="utf-8")
    stats = sorted((checkout / "mteb/descriptive_stats/Retrieval").glob("DisastIR-*.json"))
    assert [p.stem for p in stats] == sorted(TASK_NAMES)
    shipped = json.loads(TASK_CLASSES["DisastIR-QA-Bio"].metadata.descriptive_stat_path.read_text(encoding="utf-8"))
    assert json.loads((checkout / "mteb/descriptive_stats/Retrieval/DisastIR-QA-Bio.json").read_text()) == shipped


def test_mteb_finds_the_tasks_in_the_upstream_files_alone(probe: dict, checkout: Path) -> None:
    assert Path(probe["mteb"]).is_relative_to(checkout)
    assert Path(probe["qa_bio_file"]) == checkout / TASK_FILE
    assert probe["plugin_imported"] == []
    assert probe["names"] == list(TASK_NAMES)
    assert probe["hf_subsets"] == {name: ["default"] for name in TASK_NAMES}  # results are filed under default


def test_the_metadata_passes_mtebs_metadata_checks(probe: dict) -> None:
    assert probe["problems"] == {}
    assert probe["n_samples"] == {name: {"test": 239_904} for name in TASK_NAMES}


def test_the_upstream_metadata_is_the_plugins(probe: dict) -> None:
    for name, cls in TASK_CLASSES.items():
        ours = cls.metadata.model_dump(mode="json")
        theirs = probe["metadata"][name]
        assert theirs.pop("dataset") == {"path": "mteb/DisastIR", "revision": "TODO", "name": mteb_subset(name)}
        assert theirs.pop("bibtex_citation").strip() == ours.pop("bibtex_citation").strip()
        ours.pop("dataset")
        assert theirs == ours, name  # name, description, prompt, main score, ... one source


def test_the_upstream_benchmark_is_the_plugins(probe: dict) -> None:
    (plugin,) = [b for b in benchmarks() if b.name == "DisastIR"]
    assert probe["benchmark"]["tasks"] == [t.metadata.name for t in plugin.tasks]
    expected = {a.name: {g.label: [t.metadata.name for t in g.tasks] for g in a.groups}
                for a in plugin.aggregations if hasattr(a, "groups")}
    assert probe["benchmark"]["groupings"] == expected and set(expected) == {"Intent", "Category"}
    assert probe["benchmark"]["description"] == plugin.description
    assert probe["benchmark"]["citation"].strip() == plugin.citation.strip()


def test_the_upstream_tasks_load_the_export_with_mtebs_loader_as_the_plugin_does(probe: dict, exported: tuple) -> None:
    _, plugin = exported
    for name in LOADED:
        loaded = probe["loaded"][name]
        assert loaded.pop("subsets") == ["default"]
        assert loaded == plugin[name], name  # the same ids, the same exponential gains


def test_a_second_run_changes_no_file(checkout: Path) -> None:
    before = _snapshot(checkout)
    code, out, _ = _upstream("--mteb", str(checkout))
    assert code == 0 and "0 file(s) written, 52 already up to date" in out
    assert _snapshot(checkout) == before


def test_revision_and_statistics_options_then_back(checkout: Path, tmp_path: Path) -> None:
    before = _snapshot(checkout)
    stats = tmp_path / "stats"
    stats.mkdir()
    for name, cls in TASK_CLASSES.items():
        shutil.copy(cls.metadata.descriptive_stat_path, stats / f"{name}.json")
    changed = json.loads((stats / "DisastIR-FC-Geo.json").read_text())
    changed["test"]["source"] = "recomputed"
    (stats / "DisastIR-FC-Geo.json").write_text(json.dumps(changed))
    partial = tmp_path / "partial"
    shutil.copytree(stats, partial)
    (partial / "DisastIR-NLI-Env.json").unlink()
    code, _, err = _upstream("--mteb", str(checkout), "--revision", "a" * 40, "--stats", str(partial))
    assert code == 2 and "DisastIR-NLI-Env.json: no descriptive statistics for DisastIR-NLI-Env" in err
    assert _snapshot(checkout) == before  # refused before writing anything
    try:
        code, out, err = _upstream("--mteb", str(checkout), "--revision", "a" * 40, "--stats", str(stats))
        assert code == 0, err
        assert "2 file(s) written" in out and "TODO" not in out
        source = (checkout / TASK_FILE).read_text(encoding="utf-8")
        assert f'_DATASET_REVISION = "{"a" * 40}"' in source and "TODO" not in source
        written = json.loads((checkout / "mteb/descriptive_stats/Retrieval/DisastIR-FC-Geo.json").read_text())
        assert written["test"]["source"] == "recomputed"
        code, _, err = _upstream("--mteb", str(checkout), "--revision", "65525d5")
        assert code == 2 and "is not a full commit hash" in err
    finally:
        assert _upstream("--mteb", str(checkout))[0] == 0
    after = _snapshot(checkout)
    assert {k: v[1] for k, v in after.items()} == {k: v[1] for k, v in before.items()}


def _fake_checkout(root: Path, pyproject: str | None, vocabulary: str = "") -> Path:
    """A tree with the folders the command looks for (empty files) and optionally a pyproject.toml."""
    for part in ("mteb/tasks/retrieval/eng/__init__.py", "mteb/benchmarks/benchmarks/benchmarks.py",
                 "mteb/benchmarks/benchmarks/__init__.py", "mteb/benchmarks/benchmark.py",
                 "mteb/descriptive_stats/Retrieval/.keep", "mteb/types/__init__.py"):
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        (root / part).write_text("", encoding="utf-8")
    (root / "mteb/abstasks").mkdir(parents=True, exist_ok=True)
    (root / "mteb/abstasks/task_metadata.py").write_text(vocabulary, encoding="utf-8")
    if pyproject is not None:
        (root / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    return root


@pytest.mark.parametrize("case", ["empty", "no pyproject", "another project"])
def test_a_folder_that_is_not_an_mteb_checkout_is_refused(case: str, tmp_path: Path) -> None:
    root = tmp_path / "dir"
    root.mkdir()
    if case != "empty":
        _fake_checkout(root, None if case == "no pyproject" else '[project]\nname = "not-mteb"\n')
    before = sorted(root.rglob("*"))
    code, out, err = _upstream("--mteb", str(root))
    assert code == 2 and out == ""
    says(err, "disastir-mteb upstream:", root, "not an mteb checkout")
    assert sorted(root.rglob("*")) == before


def test_an_mteb_too_old_for_the_tasks_is_refused_before_writing(tmp_path: Path) -> None:
    vocabulary = (MTEB_PACKAGE / "abstasks/task_metadata.py").read_text(encoding="utf-8") + "\n".join(
        p.read_text(encoding="utf-8") for p in sorted((MTEB_PACKAGE / "types").glob("*.py")))
    assert '"Event Retrieval"' in vocabulary
    root = _fake_checkout(tmp_path / "old", '[project]\nname = "mteb"\n', vocabulary.replace('"Event Retrieval"', ""))
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    code, _, err = _upstream("--mteb", str(root))
    assert code == 2 and "does not know task_subtypes 'Event Retrieval' (used by DisastIR-Twitter-Bio" in err
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before

"""A built benchmark (``disastir-mteb build``'s output) runs as mteb tasks named after it.

The folders here are written by :func:`write_built` from the synthetic sample's files: DisastIR's layout, only some of
the 48 tasks, and a marker saying ``"kind": "built"`` with its name and the builder's provenance. Runs use the
model-free hashing encoder; ``mteb run`` (one subprocess) the bundled model on a folder of five passages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from conftest import write_layout
from disastir_mteb import cli
from disastir_mteb.data.layout import MARKER, find_task_files
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.vocabulary.taxonomy import Category, Intent, check_built_name, get_spec, task_file_stem

NAME = "MyOrg"
#: Three tasks of two intents, in the paper's order (intent-major, categories in table order).
TASKS = (f"{NAME}-QA-Bio", f"{NAME}-QA-MH", f"{NAME}-FC-Geo")
#: What the builder adds to the marker; every result carries it.
PROVENANCE = {"sources": ["floods-plan.pdf"], "models": {"queries": "gen-model"}, "prompt_versions": {"query": "2"},
              "seed": 7}
HASHING = "disastir-mteb/hashing-encoder"


def write_built(root: Path, source: Path, tasks: Iterable[str], *, name: str = NAME) -> Path:
    """A built benchmark at ``root``: the corpus and the named tasks' files of ``source``, and a built marker."""
    (root / "query").mkdir(parents=True)
    (root / "qrels").mkdir()
    shutil.copyfile(source / "corpus.jsonl", root / "corpus.jsonl")
    for task in tasks:
        _, intent, category = task.rsplit("-", 2)
        stem = task_file_stem(Intent(intent), Category(category))
        shutil.copyfile(source / "query" / f"{stem}.json", root / "query" / f"{stem}.json")
        shutil.copyfile(source / "qrels" / f"{stem}_qrels.json", root / "qrels" / f"{stem}_qrels.json")
    marker = {"synthetic": True, "kind": "built", "name": name, **PROVENANCE}
    (root / MARKER).write_text(json.dumps(marker), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def bench(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_built(tmp_path_factory.mktemp("built") / "bench", sample_data, TASKS)


@pytest.fixture(scope="module")
def runs(bench: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two models' results on the built benchmark, every task (``evaluate(model, tasks=None, data=BENCH)``)."""
    from disastir_mteb.runner.run import evaluate

    root = tmp_path_factory.mktemp("built-runs")
    for dim in (64, 32):
        result = evaluate(HashingEncoder(dim=dim, name=f"disastir-mteb/hashing-{dim}"), None, data=bench,
                          cache_dir=False, output_folder=root / f"hashing-{dim}", show_progress=False)
        assert [r.task_name for r in result.task_results] == list(TASKS)
    return root


def _written(folder: Path) -> list[str]:
    return sorted(path.stem for path in folder.rglob(f"{NAME}-*.json") if not path.stem.endswith("_per_query"))


def test_its_tasks_are_named_after_it_and_scored_as_disastir_scores(bench: Path) -> None:
    import mteb

    from disastir_mteb.tasks.built import read_built

    built = read_built(bench)
    assert (built.name, built.task_names) == (NAME, TASKS)
    assert read_built(bench) is built  # one set of classes per folder in a process
    task = built.task_classes[f"{NAME}-QA-MH"]
    disastir = mteb.get_task("DisastIR-QA-MH").metadata
    meta = task.metadata
    assert "built benchmark" in meta.description and "not DisastIR's data" in meta.description
    assert meta.reference is None and meta.dataset["path"].startswith("local/") and NAME in meta.dataset["path"]
    assert (meta.prompt, meta.main_score) == (disastir.prompt, disastir.main_score)  # the per-intent instruction
    assert task.k_values == mteb.get_task("DisastIR-QA-MH").k_values
    assert get_spec(f"{NAME}-FC-Geo").built == NAME


@pytest.mark.parametrize("name", ["DisastIR-Org", "disastirx", "9Org", "My_Org", "-Org", "Org-", ""])
def test_a_bad_name_is_one_sentence_naming_it(name: str) -> None:
    with pytest.raises(ValueError, match="cannot name a built benchmark") as raised:
        check_built_name(name)
    assert repr(name) in str(raised.value) and "starting with a letter" in str(raised.value)


def test_a_marker_with_a_bad_name_is_refused(bench: Path, tmp_path: Path) -> None:
    copy = shutil.copytree(bench, tmp_path / "copy")
    (copy / MARKER).write_text(json.dumps({"synthetic": True, "kind": "built", "name": "DisastIR-Mine"}))
    with pytest.raises(ValueError, match="'DisastIR-Mine' cannot name a built benchmark") as raised:
        find_task_files(copy)
    assert MARKER in str(raised.value)


def test_missing_task_files_are_fine_for_a_built_folder_not_for_disastirs(bench: Path, tmp_path: Path) -> None:
    assert [spec.name for spec in find_task_files(bench).built_specs] == list(TASKS)
    plain = shutil.copytree(bench, tmp_path / "plain")
    (plain / MARKER).unlink()  # the same files, no longer a built benchmark: 45 tasks lack their files
    with pytest.raises(FileNotFoundError, match="45 of 48 tasks lack a file"):
        find_task_files(plain).for_task(get_spec("DisastIR-QA-Chem"))


def test_run_runs_every_task_and_names_in_any_case(bench: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    everything = tmp_path / "all"
    assert cli.main(["run", "-m", HASHING, "--data", str(bench), "--output-folder", str(everything), "--quiet",
                     "--no-cache"]) == 0
    assert _written(everything) == sorted(TASKS)
    assert f"{NAME} NDCG@10 x100" in capsys.readouterr().out
    task_file = next(everything.rglob(f"{NAME}-QA-MH.json"))
    scores = json.loads(task_file.read_text())["scores"]["test"][0]
    assert f"built benchmark {NAME}" in scores["disastir_data"]
    per_query = json.loads(next(everything.rglob(f"{NAME}-QA-MH_per_query.json")).read_text())
    assert per_query["data"]["generator"] == {"synthetic": True, "kind": "built", "name": NAME, **PROVENANCE}

    one = tmp_path / "one"
    assert cli.main(["run", "-m", HASHING, "--data", str(bench), "-t", "myorg-qa-mh", "--output-folder", str(one),
                     "--quiet", "--no-cache"]) == 0
    assert _written(one) == [f"{NAME}-QA-MH"]
    named = tmp_path / "benchmark"
    assert cli.main(["run", "-m", HASHING, "--data", str(bench), "-b", "MYORG", "--output-folder", str(named),
                     "--quiet", "--no-cache"]) == 0
    assert _written(named) == sorted(TASKS)

    capsys.readouterr()
    assert cli.main(["run", "-m", HASHING, "--data", str(bench), "-t", "MyOrg-QA-Geo", "--quiet"]) == 2
    said = capsys.readouterr().err
    assert "'MyOrg-QA-Geo'" in said and "MyOrg-FC-Geo" in said  # the closest names, as for DisastIR's
    assert cli.main(["run", "-m", HASHING, "--data", str(bench), "-t", "DisastIR-QA-MH", "--quiet"]) == 2
    said = capsys.readouterr().err
    assert "'DisastIR-QA-MH'" in said and f"built benchmark {NAME}" in said


def test_report_and_compare_read_its_results(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb.results.report import report_text
    from disastir_mteb.results.result_sets import collect_result_sets

    sets = collect_result_sets(runs / "hashing-64")
    assert [(s.built, s.benchmark, sorted(s.file_scores)) for s in sets] == [(NAME, NAME, sorted(TASKS))]
    text = report_text(sets)
    assert f"{NAME} report (built benchmark)" in text and "3/3" in text and "3 of 3 tasks" in text
    assert "Missing" not in text and "of 48" not in text and "Published numbers" not in text
    assert sets[0].grid.overall() is not None  # the means are over the tasks it has
    assert sorted(sets[0].rescored) == sorted(TASKS) and sets[0].unchecked is None  # re-scored against its folder

    assert cli.main(["compare", str(runs / "hashing-64"), str(runs / "hashing-32")]) == 0
    printed = capsys.readouterr().out
    assert "3 of 3 tasks in both sets" in printed and f"{NAME}; exact" in printed


def test_its_figures_draw_the_intents_and_categories_it_has(runs: Path, tmp_path: Path) -> None:
    """QA and FC by Bio, Geo and MH: no row or column of DisastIR's others, no n/a for a task it does not have."""
    import xml.etree.ElementTree as ElementTree

    from disastir_mteb.results.report import write_report
    from disastir_mteb.results.result_sets import collect_result_sets
    from disastir_mteb.vocabulary.taxonomy import CATEGORIES

    written = write_report(collect_result_sets(runs / "hashing-64"), tmp_path, formats=[], figure_formats=["svg"])
    texts = {}
    for figure in written:
        root = ElementTree.parse(figure).getroot()
        texts[figure.name.split("-")[0]] = ["".join(n.itertext()) for n in root.iter("{http://www.w3.org/2000/svg}text")]
    heatmap, bars = texts["heatmap"], texts["intents.svg"]
    others = {c.value for c in CATEGORIES} - {"Bio", "Geo", "MH"} | {"Twitter", "NLI", "STS", "QAdoc"}
    assert {"QA", "FC", "Bio", "Geo", "MH", "Mean"} <= set(heatmap) and not others & set(heatmap)
    assert "n/a" not in heatmap  # QA-Geo, FC-Bio and FC-MH are not its tasks: blank, not missing
    assert {"QA", "FC", "Avg"} <= set(bars) and not {"Twitter", "NLI", "STS", "QAdoc", "n/a"} & set(bars)


def test_submit_and_the_leaderboard_refuse_it(runs: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb.leaderboard.rows import result_rows

    assert cli.main(["submit", str(runs / "hashing-64"), "--out", str(tmp_path / "submission")]) == 2
    said = capsys.readouterr().err
    assert f"built benchmark {NAME}" in said and "not DisastIR" in said
    assert not (tmp_path / "submission").exists()
    with pytest.raises(ValueError, match=f"built benchmark {NAME}"):
        result_rows([runs / "hashing-64"])


def test_mteb_finds_it_once_registered(bench: Path) -> None:
    import mteb

    import disastir_mteb

    built = disastir_mteb.register_built(bench)
    assert disastir_mteb.register_built(bench) is built  # a no-op the second time
    assert [t.metadata.name for t in mteb.get_tasks(tasks=[f"{NAME}-QA-MH"])] == [f"{NAME}-QA-MH"]
    assert [t.metadata.name for t in mteb.get_benchmark(NAME).tasks] == list(TASKS)
    assert len(mteb.get_benchmark("DisastIR").tasks) == 48


def test_mteb_run_finds_the_folders_the_environment_names(tmp_path: Path) -> None:
    from disastir_mteb.models.bundled import BUNDLED_MODEL, seed_hf_cache

    passages = {f"d{i}": text for i, text in enumerate([
        "Evacuate low-lying coastal areas before the storm surge arrives.", "Boil tap water after flooding.",
        "Aftershocks can continue for weeks after a major earthquake.", "Keep a radio for hurricane warnings.",
        "Wildfire smoke harms people with asthma; stay indoors."])}
    queries = [{"query_id": "q0", "user_query": "What should coastal residents do before a storm surge?"},
               {"query_id": "q1", "user_query": "Is tap water safe after a flood?"}]
    qrels = [{"user_query": queries[0]["user_query"], "passage": passages["d0"], "score": 3},
             {"user_query": queries[1]["user_query"], "passage": passages["d1"], "score": 2}]
    stem = task_file_stem(Intent.QA, Category.MH)
    source = write_layout(tmp_path / "source", passages, {stem: (queries, qrels)})
    bench = write_built(tmp_path / "bench", source, [f"{NAME}-QA-MH"])
    hub = tmp_path / "hub"
    seed_hf_cache(hub)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub), "DISASTIR_BUILT": str(bench)}
    for name in ("DISASTIR_MTEB_AUTOLOAD", "DISASTIR_DATA_DIR"):
        env.pop(name, None)
    proc = subprocess.run([str(Path(sys.executable).with_name("mteb")), "run", "-m", BUNDLED_MODEL, "-t",
                           f"{NAME}-QA-MH", "--output-folder", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(next((tmp_path / "out").rglob(f"{NAME}-QA-MH.json")).read_text())
    assert f"built benchmark {NAME}" in result["scores"]["test"][0]["disastir_data"]


def test_tasks_lists_a_built_benchmarks_tasks_with_their_instructions(bench: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb.cli import main

    assert main(["tasks", "--data", str(bench)]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(TASKS)
    assert main(["tasks", "--data", str(bench), "--intents", "fc"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == [t for t in TASKS if "-FC-" in t]

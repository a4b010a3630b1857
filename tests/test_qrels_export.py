"""The completed judgements as the authors' ``qrels_with_added/`` files, and a run that reads them only when asked.

The export is read back as JSON and joined to ids here, by text; the run with ``extra_judgements`` is the real
runner, whose NDCG@10 must equal the completed NDCG@10 of the same judgements, whose files say what they are,
which ``submit`` refuses, and after which a plain run scores exactly as before.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from sentences import says

from conftest import write_layout
from disastir_mteb import cli
from disastir_mteb.data.extra_qrels import ADDED_MARKER, extra_qrels_file, round_grade
from disastir_mteb.data.layout import MARKER, find_task_files
from disastir_mteb.data.published import load_task
from disastir_mteb.judging.completed import completed_scores, load_added, merge_grades
from disastir_mteb.judging.holes import find_holes, load_task_texts, result_sets_of
from disastir_mteb.judging.qrels_export import FOLDER, export_qrels, qrels_file_name
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.results.per_query import per_query_file
from disastir_mteb.results.provenance import provenance_of
from disastir_mteb.results.result_sets import collect_result_sets
from disastir_mteb.runner.data_source import data_source
from disastir_mteb.runner.run import evaluate
from disastir_mteb.submission.submit import submit
from disastir_mteb.vocabulary.task_record import is_extended
from disastir_mteb.vocabulary.taxonomy import Category, Intent, Split, TaskSpec, get_spec

TASKS = ["DisastIR-QA-Bio", "DisastIR-STS-Geo"]
JUDGE = "judge-x"
MODEL = HashingEncoder(dim=64, name="disastir-mteb/hashing-64")


def _run(data: Path, out: Path, **kwargs: Any) -> None:
    from disastir_mteb.tasks import retrieval as task_module

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISASTIR_DATA_DIR", str(data))
        task_module.forget_data_files()
        try:
            evaluate(MODEL, TASKS, cache_dir=False, output_folder=out, show_progress=False, **kwargs)
        finally:
            task_module.forget_data_files()


@pytest.fixture(scope="module")
def own_data(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample without the generator's marker: a user's own data, so that only the judgements decide submit."""
    folder = tmp_path_factory.mktemp("own") / "data"
    shutil.copytree(sample_data, folder, ignore=shutil.ignore_patterns(MARKER))
    return folder


@pytest.fixture(scope="module")
def plain(own_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain run (published judgements alone) of two tasks, with per-query files."""
    root = tmp_path_factory.mktemp("plain")
    _run(own_data, root)
    return root


def _grade(intent: Intent, query: str, passage: str, fractions: bool) -> float:
    grades = (0, 1, 2, 3, 1.67, 2.5) if fractions else (0, 1, 2, 3)
    grades = tuple(g + 2 for g in grades) if intent is Intent.STS else grades  # STS: 0-5
    return grades[int(hashlib.sha256(f"{query}\x00{passage}".encode()).hexdigest(), 16) % len(grades)]


def _store(path: Path, plain: Path, data: Path, *, fractions: bool) -> Path:
    holes = find_holes(result_sets_of([plain]), data).pairs
    with JudgementStore(path) as store:
        pairs = [(Pair(h.intent, h.query, h.passage, JUDGE), _grade(h.intent, h.query, h.passage, fractions))
                 for h in holes]
        store.add_pairs(pair for pair, _ in pairs)
        for pair, grade in pairs:
            store.record_judgement(pair.key, grade, {"zero_shot": grade})
    return path


def _added(path: Path) -> Any:
    with JudgementStore(path) as store:
        return load_added(store)


def _grades_from_files(folder: Path, data: Path, task: str) -> dict[str, dict[str, float]]:
    """A qrels file joined to ids here, by stripped text, every copy of a text graded (the later row wins)."""
    spec = get_spec(task)
    queries = json.loads((data / "query" / f"{qrels_file_name(task).removesuffix('_qrels.json')}.json").read_text())
    lines = (data / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    corpus = [json.loads(line) for line in lines]
    query_ids, doc_ids = defaultdict(list), defaultdict(list)
    for row in queries:
        query_ids[row["user_query"].strip()].append(row["query_id"])
    for row in corpus:
        doc_ids[row["text"].strip()].append(row["corpus_id"])
    grades: dict[str, dict[str, float]] = defaultdict(dict)
    for row in json.loads((folder / qrels_file_name(task)).read_text()):
        for query_id in query_ids[row["user_query"].strip()]:
            for doc_id in doc_ids[row["passage"].strip()]:
                grades[query_id][doc_id] = row["score"]
    assert spec.intent is load_task_texts(task, data).intent
    return dict(grades)


def test_the_export_round_trips(own_data: Path, plain: Path, tmp_path: Path) -> None:
    added = _added(_store(tmp_path / "store.sqlite", plain, own_data, fractions=True))
    export = export_qrels(tmp_path / "out", added, own_data, tasks=TASKS)
    folder = tmp_path / "out" / FOLDER
    assert sorted(p.name for p in folder.iterdir()) == sorted([ADDED_MARKER, "QA_Biological_qrels.json",
                                                                 "STS_Geohazard_qrels.json"])
    for task in TASKS:
        published = json.loads(find_task_files(own_data).qrels[get_spec(task)].read_text())
        written = json.loads((folder / qrels_file_name(task)).read_text())
        assert written[:len(published)] == published  # the published rows as they are, in their order
        assert len(written) == len(published) + export.added[task] and export.added[task] > 20
        assert {type(row["score"]) for row in written[len(published):]} == {int, float}  # fractions kept
        merged = merge_grades(load_task_texts(task, own_data), added)
        assert _grades_from_files(folder, own_data, task) == merged.grades  # read back: the merged judgements
    marker = json.loads((folder / ADDED_MARKER).read_text())
    assert marker["judges"] == [{"judge_model": JUDGE, "prompt_version": "disastir-appendix-c/1",
                                 "rows": sum(export.added.values())}]
    assert marker["rounded"] is False and marker["tasks"][TASKS[0]]["added_rows"] == export.added[TASKS[0]]
    with pytest.raises(FileExistsError) as refused:
        export_qrels(tmp_path / "out", added, own_data, tasks=TASKS)
    says(str(refused.value), tmp_path / "out" / FOLDER, "3 file(s)", "overwrite=True", "(--overwrite)")
    again = export_qrels(tmp_path / "out", added, own_data, tasks=TASKS[:1], overwrite=True)
    assert again.removed == (folder / "STS_Geohazard_qrels.json",)
    assert sorted(p.name for p in folder.iterdir()) == sorted([ADDED_MARKER, "QA_Biological_qrels.json"])


def test_the_command_exports_against_the_data_it_is_given(own_data: Path, plain: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``export --format qrels-with-added --data DIR`` reads DIR's qrels, with no DISASTIR_DATA_DIR set."""
    store = _store(tmp_path / "store.sqlite", plain, own_data, fractions=False)
    monkeypatch.delenv("DISASTIR_DATA_DIR", raising=False)
    assert cli.main(["export", "--format", "qrels-with-added", "--judgements", str(store), "--data", str(own_data),
                     "--out", str(tmp_path / "cli"), "-t", *TASKS]) == 0
    export_qrels(tmp_path / "api", _added(store), own_data, tasks=TASKS)
    for task in TASKS:
        assert ((tmp_path / "cli" / FOLDER / qrels_file_name(task)).read_bytes()
                == (tmp_path / "api" / FOLDER / qrels_file_name(task)).read_bytes())


def test_rounded_grades_go_half_up() -> None:
    assert [round_grade(g) for g in (0, 0.33, 0.5, 1.5, 1.67, 2.49, 2.5, 3)] == [0, 0, 1, 2, 2, 2, 3, 3]


def test_extra_judgements_are_read_only_when_asked_labelled_and_refused_by_submit(
        own_data: Path, plain: Path, tmp_path: Path) -> None:
    added = _added(_store(tmp_path / "store.sqlite", plain, own_data, fractions=True))
    export = export_qrels(tmp_path / "out", added, own_data, tasks=TASKS, rounded=True)
    folder = export.folder
    rows = [row for task in TASKS for row in json.loads((folder / qrels_file_name(task)).read_text())]
    assert all(isinstance(row["score"], int) for row in rows)
    # the completed scores of the same (rounded) judgements: what the run must find
    rounded_store = tmp_path / "rounded.sqlite"
    with JudgementStore(rounded_store) as store:
        pairs = [(Pair(i, q, p, JUDGE), round_grade(g)) for (i, q, p), g in added.grades.items()]
        store.add_pairs(pair for pair, _ in pairs)
        for pair, grade in pairs:
            store.record_judgement(pair.key, grade, {})
    [plain_set] = result_sets_of([plain])
    [completed] = completed_scores([plain_set], _added(rounded_store), own_data)

    extended = tmp_path / "extended"
    _run(own_data, extended, extra_judgements=folder)
    [extended_set] = collect_result_sets(extended)
    for task in TASKS:
        record = extended_set.task_record(task)
        assert record["ndcg_at_10"] == pytest.approx(completed.tasks[task].completed.ndcg_zero_fill, abs=1e-5)
        assert record["ndcg_at_10"] > plain_set.scores[task]
        assert record["unjudged_at_10"] == 0.0
        assert is_extended(record["disastir_data"]) and record["disastir_data"] == (
            f"local folder data; extra judgements: {completed.tasks[task].added} added from folder {FOLDER} by "
            f"{JUDGE}, prompt version disastir-appendix-c/1 (grades rounded half up)")
        assert extended_set.task_data(task)["extra_judgements"] == str(folder.resolve())
    assert "extra judgements" in provenance_of(extended_set).dataset  # shown by report
    with pytest.raises(ValueError) as refused:
        submit(extended, tmp_path / "clone")
    says(str(refused.value), extended_set.folder, "DisastIR-QA-Bio", "extra judgements", "per-study estimate",
         "official DisastIR score", "without --extra-judgements")
    assert not (tmp_path / "clone").exists()

    # not asked: the published judgements alone, exactly the plain run's scores (the extended files are rerun)
    _run(own_data, extended)
    [rerun] = collect_result_sets(extended)
    for task in TASKS:
        before = {k: v for k, v in plain_set.task_record(task).items() if k != "evaluation_time"}
        after = {k: v for k, v in rerun.task_record(task).items() if k != "evaluation_time"}
        assert after == before and not is_extended(after["disastir_data"])
        assert "extra_judgements" not in rerun.task_data(task)
        assert json.loads(per_query_file(rerun.folder, task).read_text())["queries"] == \
            json.loads(per_query_file(plain_set.folder, task).read_text())["queries"]
    assert submit(extended, tmp_path / "clone").sources == (rerun.folder,)


def test_a_fraction_is_refused_with_one_sentence(own_data: Path, plain: Path, tmp_path: Path) -> None:
    added = _added(_store(tmp_path / "store.sqlite", plain, own_data, fractions=True))
    folder = export_qrels(tmp_path / "out", added, own_data, tasks=TASKS[:1]).folder
    spec = get_spec(TASKS[0])
    with pytest.raises(ValueError) as refused:
        load_task(spec, find_task_files(own_data), extra=extra_qrels_file(folder, spec))
    says(str(refused.value), folder / "QA_Biological_qrels.json", re.compile(r"row \d+ has score (1\.67|2\.5),"),
         "fraction", "DisastIR-QA-Bio", "integers 0..3", "rounded grades (half up)")


def test_extra_rows_fill_only_what_the_published_rows_leave(tmp_path: Path) -> None:
    data = write_layout(tmp_path / "data", {"d1": "Boil water.", "d2": " Boil water.", "d3": "Evacuate.",
                                            "d4": "Stay indoors."}, {
        "QA_Biological": ([{"query_id": "q1", "user_query": "What to do?"}, {"query_id": "q2", "user_query": "Why?"}],
                          [{"user_query": "What to do?", "passage": "Evacuate.", "score": 2}])})
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "QA_Biological_qrels.json").write_text(json.dumps([
        {"user_query": "What to do?", "passage": "Evacuate.", "score": 0},  # published: stays 2
        {"user_query": " What to do?", "passage": "Boil water.", "score": 3},  # both copies
        {"user_query": "Why?", "passage": "Stay indoors.", "score": 1},  # q2 has no published judgement
        {"user_query": "Who?", "passage": "Evacuate.", "score": 1},
        {"user_query": "What to do?", "passage": "Not in the corpus.", "score": 1}]))
    spec = get_spec("DisastIR-QA-Bio")
    plain = load_task(spec, find_task_files(data))
    with_extra = load_task(spec, find_task_files(data), extra=extra_qrels_file(extra, spec))
    assert plain.grades == {"q1": {"d3": 2}} and plain.report.extra is None
    assert with_extra.grades == {"q1": {"d3": 2, "d1": 3, "d2": 3}}
    assert with_extra.relevant_docs == {"q1": {"d3": 3, "d1": 7, "d2": 7}}  # the gains 2**grade - 1
    report = with_extra.report.extra
    assert (report.rows, report.added, report.published, report.unscored_query_rows, report.unmatched_query_rows,
            report.unmatched_passage_rows) == (5, 2, 1, 1, 1, 1)
    assert list(with_extra.queries["id"]) == list(plain.queries["id"]) == ["q1"]  # the query set stays published
    assert extra_qrels_file(extra, get_spec("DisastIR-FC-Bio")) is None  # no file: the published qrels alone
    with pytest.raises(ValueError) as refused:
        extra_qrels_file(extra, TaskSpec(Intent.QA, Category.Bio, Split.test))
    says(str(refused.value), "Extra judgements", "full query set's tasks", "DisastIR-Test-QA-Bio", "DisastIR-QA-Bio")


def test_the_option_names_a_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(FileNotFoundError) as missing:
        data_source(None, extra_judgements=tmp_path / "nowhere")
    says(str(missing.value), f"extra_judgements={str(tmp_path / 'nowhere')!r}", "no such folder", "qrels_with_added")
    assert cli.main(["run", "-m", "bundled", "-t", "DisastIR-QA-Bio", "--data", str(tmp_path),
                     "--extra-judgements", str(tmp_path / "nowhere")]) == 2
    says(capsys.readouterr().err, "disastir-mteb run:", f"--extra-judgements {tmp_path / 'nowhere'}", "no such folder",
         "qrels_with_added")

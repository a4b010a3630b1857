"""Pool-completed scores: published judgements plus a store's, where none was published, scored the authors' way.

The completed NDCG@10 is checked against an independent computation written here from the authors' formula
(gain ``2**grade - 1``, discount ``log2(rank + 1)``, the ideal from every judgement of the query), on judgements
merged here from the published files (read as JSON) and the grades written into the store; ``report`` and
``compare --judgements`` show it beside the official number.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
from sentences import says

from conftest import write_layout
from disastir_mteb import cli
from disastir_mteb.judging.completed import completed_scores, load_added, merge_grades
from disastir_mteb.judging.holes import find_holes, load_task_texts, result_sets_of
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.results.completed_view import ESTIMATE_NOTE
from disastir_mteb.runner.run import evaluate
from disastir_mteb.vocabulary.taxonomy import Intent, get_spec, task_file_stem

TASKS = ["DisastIR-QA-Bio", "DisastIR-STS-Geo"]  # both scales: 0-3 and 0-5
JUDGE = "judge-a"
#: What the judge answers: fractions too (a mean vote), on each scale.
QA_GRADES = (0, 1, 1.67, 3, 0.33, 2)
STS_GRADES = (0, 4.5, 1, 5, 2.33, 3)


def judge_grade(intent: Intent, query: str, passage: str) -> float:
    grades = STS_GRADES if intent is Intent.STS else QA_GRADES
    return grades[int(hashlib.sha256(f"{query}\x00{passage}".encode()).hexdigest(), 16) % len(grades)]


@pytest.fixture(scope="module")
def runs(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cheap model's plain run and an instructions run (for compare) on two tasks: per-query files, many holes."""
    root = tmp_path_factory.mktemp("completed-runs")
    for instructions in (None, "disastir"):
        evaluate(HashingEncoder(dim=64, name="disastir-mteb/hashing-64"), TASKS, cache_dir=False, output_folder=root,
                 show_progress=False, instructions=instructions, data=sample_data)
    return root


@pytest.fixture
def plain_set(runs: Path, sample_data: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("DISASTIR_DATA_DIR", str(sample_data))
    [plain] = [s for s in result_sets_of([runs]) if not s.experiment]
    return plain


def _published_by_text(data: Path, task: str) -> dict[tuple[str, str], int]:
    spec = get_spec(task)
    rows = json.loads((data / "qrels" / f"{task_file_stem(spec.intent, spec.category)}_qrels.json").read_text())
    return {(row["user_query"].strip(), row["passage"].strip()): row["score"] for row in rows}


def _queries(data: Path, task: str) -> dict[str, str]:
    spec = get_spec(task)
    rows = json.loads((data / "query" / f"{task_file_stem(spec.intent, spec.category)}.json").read_text())
    return {row["query_id"]: row["user_query"] for row in rows}


def _corpus(data: Path) -> dict[str, str]:
    lines = (data / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    return {record["corpus_id"]: record["text"] for record in map(json.loads, lines)}


def _independent_ndcg(data: Path, result_folder: Path, task: str,
                      added: dict[tuple[str, str], float]) -> tuple[float, float]:
    """(NDCG@10 on the published judgements, NDCG@10 on published + added), from the files, the authors' formula."""
    published, queries, corpus = _published_by_text(data, task), _queries(data, task), _corpus(data)
    ranked = json.loads((result_folder / "disastir_per_query" / f"{task}_per_query.json").read_text())["queries"]

    def ndcg(top: list[str], judged: dict[str, float]) -> float:
        dcg = sum((2 ** judged.get(doc, 0) - 1) / math.log2(rank + 1) for rank, doc in enumerate(top, start=1))
        ideal = sorted(judged.values(), reverse=True)[:10]
        best = sum((2 ** grade - 1) / math.log2(rank + 1) for rank, grade in enumerate(ideal, start=1))
        return dcg / best if best else 0.0

    before, after = [], []
    for query_id, record in ranked.items():
        query = queries[query_id].strip()
        judged = {doc: published[(query, text.strip())] for doc, text in corpus.items()
                  if (query, text.strip()) in published}
        merged = dict(judged)
        for doc, text in corpus.items():
            if doc not in merged and (query, text.strip()) in added:
                merged[doc] = added[(query, text.strip())]
        before.append(ndcg(record["top10"], judged))
        after.append(ndcg(record["top10"], merged))
    return sum(before) / len(before), sum(after) / len(after)


def _fill_store(path: Path, pairs: list[tuple[Intent, str, str, float]], model: str = JUDGE) -> None:
    with JudgementStore(path) as store:
        keyed = [(Pair(intent, query, passage, model), grade) for intent, query, passage, grade in pairs]
        store.add_pairs(pair for pair, _ in keyed)
        for pair, grade in keyed:
            store.record_judgement(pair.key, grade, {"zero_shot": grade})


def _judged_holes(plain_set: object, sample_data: Path) -> list[tuple[Intent, str, str, float]]:
    holes = find_holes([plain_set], sample_data)  # type: ignore[list-item]
    assert len(holes.pairs) > 50
    return [(h.intent, h.query, h.passage, judge_grade(h.intent, h.query, h.passage)) for h in holes.pairs]


def test_completed_ndcg_equals_an_independent_computation_on_the_merged_judgements(
        plain_set: object, sample_data: Path, tmp_path: Path) -> None:
    holes = _judged_holes(plain_set, sample_data)
    # published pairs judged otherwise (an agreement check), and a hole's texts under another intent: never used
    published = [(Intent.QA, q, p, (grade + 1) % 4) for (q, p), grade in
                 list(_published_by_text(sample_data, TASKS[0]).items())[:30]]
    other_intent = [(Intent.FC, q, p, 3) for intent, q, p, _ in holes if intent is Intent.QA][:10]
    _fill_store(tmp_path / "store.sqlite", holes + published + other_intent)
    with JudgementStore(tmp_path / "store.sqlite") as store:
        added = load_added(store)
    [found] = completed_scores([plain_set], added, sample_data)  # type: ignore[list-item]
    assert sorted(found.tasks) == TASKS and not found.without_rankings
    for task in TASKS:
        intent = get_spec(task).intent
        mine = {(q, p): grade for i, q, p, grade in holes if i is intent}
        official, completed = _independent_ndcg(sample_data, plain_set.folder, task, mine)  # type: ignore[attr-defined]
        scores = found.tasks[task]
        assert scores.completed.ndcg_zero_fill == pytest.approx(completed, abs=1e-12)
        assert scores.published.ndcg_zero_fill == pytest.approx(official, abs=1e-12)
        assert scores.official == pytest.approx(official, abs=1e-5)  # mteb's file, 5 decimals
        assert completed > official  # the holes' grades count now
        assert scores.completed.unjudged_pairs == 0 < scores.published.unjudged_pairs  # every hole judged
        assert scores.filled == scores.published.unjudged_pairs
        assert scores.judges == {(JUDGE, "disastir-appendix-c/1"): scores.added}
    assert any(isinstance(g, float) and not g.is_integer() for _, _, _, g in holes)  # fractions were scored


def test_published_grades_are_never_overridden(plain_set: object, sample_data: Path, tmp_path: Path) -> None:
    task = TASKS[0]
    texts = load_task_texts(task, sample_data)
    published = _published_by_text(sample_data, task)
    wrong = [(Intent.QA, q, p, (grade + 2) % 4) for (q, p), grade in published.items()]
    _fill_store(tmp_path / "store.sqlite", wrong)
    with JudgementStore(tmp_path / "store.sqlite") as store:
        added = load_added(store)
    merged = merge_grades(texts, added)
    assert merged.grades == texts.grades and not merged.added
    assert merged.not_used == sum(len(judged) for judged in texts.grades.values())
    [found] = completed_scores([plain_set], added, sample_data, tasks=[task])  # type: ignore[list-item]
    assert found.tasks[task].completed == found.tasks[task].published and found.tasks[task].added == 0


def test_an_added_judgement_fills_every_copy_of_its_text_and_only_its_intent(tmp_path: Path) -> None:
    data = write_layout(tmp_path / "data", {"d1": "Boil water.", "d2": "  Boil water.\n", "d3": "Stay indoors.",
                                            "d4": "Evacuate."}, {
        "QA_Biological": ([{"query_id": "q1", "user_query": "What to do? "}, {"query_id": "q2", "user_query": "Why?"}],
                          [{"user_query": "What to do?", "passage": "Evacuate.", "score": 2},
                           {"user_query": "Why?", "passage": "Evacuate.", "score": 1}]),
        "FactCheck_Biological": ([{"query_id": "f1", "user_query": "What to do?"}],
                                 [{"user_query": "What to do?", "passage": "Evacuate.", "score": 3}])})
    _fill_store(tmp_path / "store.sqlite", [(Intent.QA, "What to do?", "Boil water.", 1.67),
                                            (Intent.QA, "What to do?", "Evacuate.", 0),
                                            (Intent.NLI, "What to do?", "Stay indoors.", 3)])
    with JudgementStore(tmp_path / "store.sqlite") as store:
        added = load_added(store)
    qa = merge_grades(load_task_texts("DisastIR-QA-Bio", data), added)
    assert qa.grades == {"q1": {"d4": 2, "d1": 1.67, "d2": 1.67}, "q2": {"d4": 1}}  # both copies; 2 stays 2
    assert set(qa.added) == {("q1", "d1"), ("q1", "d2")} and qa.not_used == 1
    fc = merge_grades(load_task_texts("DisastIR-FC-Bio", data), added)
    assert fc.grades == {"f1": {"d4": 3}} and not fc.added  # QA's and NLI's judgements are not FC's


def test_two_judges_of_one_pair_are_refused_until_one_is_picked(tmp_path: Path) -> None:
    store_path = tmp_path / "store.sqlite"
    _fill_store(store_path, [(Intent.QA, "q", "p", 1), (Intent.QA, "q", "other", 2)], model="judge-a")
    _fill_store(store_path, [(Intent.QA, "q", "p", 3)], model="judge-b")
    with JudgementStore(store_path) as store:
        with pytest.raises(ValueError) as refused:
            load_added(store)
        says(str(refused.value), "1 pair(s)", "more than one judge", "judge-a", "disastir-appendix-c/1", "judge-b",
             "--judge-model")
        assert load_added(store, judge_model="judge-a").grades == {(Intent.QA, "q", "p"): 1.0,
                                                                  (Intent.QA, "q", "other"): 2.0}
        assert load_added(store, judge_model="judge-b").grades == {(Intent.QA, "q", "p"): 3.0}


def _table_row(printed: str, label: str, after: str) -> list[str]:
    """The cells of the first line starting with ``label`` after the line holding ``after``."""
    lines = printed.splitlines()
    start = next(n for n, line in enumerate(lines) if after in line)
    row = next(line for line in lines[start:] if line.startswith(label + " "))
    return row.split()


def test_report_and_compare_show_official_and_completed_side_by_side(
        runs: Path, plain_set: object, sample_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    holes = _judged_holes(plain_set, sample_data)
    store = tmp_path / "store.sqlite"
    _fill_store(store, holes)
    monkeypatch.setenv("DISASTIR_DATA_DIR", str(sample_data))  # restored after: the command sets it for its process
    results = str(plain_set.folder)  # type: ignore[attr-defined]
    assert cli.main(["report", results]) == 0
    plain_report = capsys.readouterr().out
    assert "Completed NDCG@10" not in plain_report  # not asked: the report as it always was
    assert cli.main(["report", results, "--judgements", str(store), "--data", str(sample_data)]) == 0
    printed = capsys.readouterr().out
    lines = iter(printed.splitlines())
    assert all(line in lines for line in plain_report.splitlines())  # the same report, sections added
    assert ESTIMATE_NOTE in printed
    section = f"Completed NDCG@10 (estimate): {plain_set.display_label}"  # type: ignore[attr-defined]
    assert printed.count("Completed NDCG@10 (estimate):") == 2  # the run's folder holds its instructions run too
    assert (f"Judges: {JUDGE}, prompt version disastir-appendix-c/1: {len(holes)} judgement(s), hard grades (the "
            "methods' vote, as the authors grade).") in printed
    for task in TASKS:
        intent = get_spec(task).intent
        official, completed = _independent_ndcg(sample_data, plain_set.folder, task,  # type: ignore[attr-defined]
                                                {(q, p): g for i, q, p, g in holes if i is intent})
        row = _table_row(printed, task, section)
        assert row[1:3] == [f"{100 * official:.2f}", f"{100 * completed:.2f}"]
        assert row[3] == f"{100 * (completed - official):+.2f}"
        assert row[5:] == [row[5], "%", "0.0", "%"] and float(row[5]) > 0  # unjudged before, none after
    overall = _table_row(printed, "Overall", section)
    assert overall[4] == str(len(holes))
    # compare: the plain run against its instructions run, each with its completed numbers
    assert cli.main(["compare", str(runs), "--judgements", str(store), "--data", str(sample_data)]) == 0
    compared = capsys.readouterr().out
    assert compared.count("Completed NDCG@10 (estimate):") == 2 and ESTIMATE_NOTE in compared
    assert _table_row(compared, "Overall", section) == overall


def test_judgement_options_need_a_store_and_a_store_with_grades(runs: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", str(runs), "--judge-model", "x"]) == 2
    says(capsys.readouterr().err, "disastir-mteb report:", "--judge-model", "--judgements STORE")
    assert cli.main(["report", str(runs), "--judgements", str(tmp_path / "none.sqlite")]) == 2
    assert "no such judgement store" in capsys.readouterr().err and not (tmp_path / "none.sqlite").exists()
    _fill_store(tmp_path / "store.sqlite", [(Intent.QA, "q", "p", 1)])
    assert cli.main(["report", str(runs), "--judgements", str(tmp_path / "store.sqlite"), "--judge-model", "x"]) == 2
    says(capsys.readouterr().err, "disastir-mteb report:", tmp_path / "store.sqlite", "no graded judgement", "x")

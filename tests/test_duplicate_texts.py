"""Duplicate judged texts and tied similarities: scored end to end exactly as the authors' code scores them.

The authors (DMRetriever ``eva/evaluation/metrics.py``) key judgements and retrieved lists by passage TEXT: every
retrieved copy of a judged text earns its gain, the ideal DCG and Recall's denominator count the text once, a pair
graded twice keeps its last grade. The fixture below has all of it, in one hand-made task searched through mteb by
an encoder whose vectors are fixed by hand:

- text T graded 3 under ids d1 and d1b (retrieved twice for q1), text W graded 2 under w1 and w2 (tied with K's k1
  at rank 10 for q1: one copy in, one out), text Z graded 0 under z1 and z2 (retrieved twice), text X unjudged
  under x1 and x2 (retrieved twice);
- the pair (q1, Y) graded 1, then 2 (the last row is kept), the pair (q1, U) graded 1 twice (merely repeated);
- q2 judged 0 only (scores 0 and counts); q3 has a three-way tie across rank 10 (w2, w1 in; k1, judged, out).

Expected values are written as arithmetic (gains ``2**g - 1`` over ``log2(rank + 1)``), checked against the
independent text-keyed port of the authors' code in ``tests/authors_metric.py`` on the stored top 10s, and
against the result file and the per-query file of a real run.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import mteb
import numpy as np
import pytest
import pytrec_eval
from sentences import says

from authors_metric import authors_metrics_at_10
from conftest import write_layout
from disastir_mteb.data.layout import find_task_files
from disastir_mteb.data.published import grade_to_gain, load_task
from disastir_mteb.judging.completed import AddedJudgements, completed_scores
from disastir_mteb.judging.holes import result_sets_of
from disastir_mteb.models.adapter import as_mteb_encoder
from disastir_mteb.results.per_query import per_query_path, read_per_query
from disastir_mteb.runner.run import evaluate
from disastir_mteb.scoring.authors import key_by_text, score_query
from disastir_mteb.vocabulary.taxonomy import Intent, get_spec

TASK = "DisastIR-QA-Bio"
Q1, Q2, Q3 = "How do floods spread disease?", "What breeds mosquitoes?", "How should water be treated?"
TEXT = {"T": "Floods spread cholera through dirty water.", "U": "Boil water for a minute after a flood.",
        "Z": "Mosquitoes breed in standing water.", "X": "Vaccines were shipped on Monday.",
        "F1": "The shelter opened at noon.", "F2": "Roads to the coast are closed.",
        "W": "Wash hands with soap after cleaning up.", "K": "Keep wounds clean and covered.",
        "Y": "Chlorine tablets make water safe to drink."}
CORPUS = {"d1": "T", "d1b": "T", "d2": "U", "f1": "F1", "f2": "F2", "k1": "K", "w1": "W", "w2": "W", "x1": "X",
          "x2": "X", "y1": "Y", "z1": "Z", "z2": "Z"}  # file order: the lower id of every tie comes first
#: Cosine of each text with q1, q2, q3 (W and K share one vector: they tie for every query).
COSINES = {"T": (0.9, 0.1, 0.0), "X": (0.8, 0.0, 0.3), "U": (0.7, 0.05, 0.6), "Z": (0.6, 0.5, 0.2),
           "F1": (0.5, 0.45, 0.25), "F2": (0.45, 0.3, 0.35), "W": (0.4, 0.2, 0.15), "K": (0.4, 0.2, 0.15),
           "Y": (0.1, 0.02, 0.5)}
QRELS = [(Q1, "T", 3), (Q1, "U", 1), (Q1, "U", 1), (Q1, "Z", 0), (Q1, "W", 2), (Q1, "K", 1), (Q1, "Y", 1),
         (Q1, "Y", 2), (Q2, "Z", 0), (Q2, "F1", 0), (Q3, "U", 3), (Q3, "T", 2), (Q3, "K", 1)]

#: The scored top 10s: similarity, then id, both descending (trec_eval's order of ties).
TOP10 = {"q1": ["d1b", "d1", "x2", "x1", "d2", "z2", "z1", "f1", "f2", "w2"],   # w1, k1 tie with w2 below rank 10
         "q2": ["z2", "z1", "f1", "f2", "w2", "w1", "k1", "d1b", "d1", "d2"],
         "q3": ["d2", "y1", "f2", "x2", "x1", "f1", "z2", "z1", "w2", "w1"]}   # k1 (graded 1) ties at rank 11


def _gain(grade: int) -> int:
    return 2**grade - 1


def _discount(rank: int) -> float:
    return math.log2(rank + 1)


# q1: T T x x U Z Z f f W retrieved; judged texts T3 W2 Y2 U1 K1 Z0, each once in the ideal.
IDEAL_Q1 = sum(_gain(g) / _discount(r) for r, g in enumerate([3, 2, 2, 1, 1, 0], 1))
NDCG_Q1 = (_gain(3) / _discount(1) + _gain(3) / _discount(2) + _gain(1) / _discount(5) + _gain(2) / _discount(10)
           ) / IDEAL_Q1
NDCG_Q1_REMOVED = (_gain(3) / _discount(1) + _gain(3) / _discount(2) + _gain(1) / _discount(3)
                   + _gain(2) / _discount(6)) / IDEAL_Q1  # T T U Z Z W: the unjudged x x f f removed
RECALL_Q1 = 4 / 5  # hits d1b d1 d2 w2 (two copies of T count twice) over the texts T W Y U K
# q3: U first, nothing else judged in its top 10; judged texts U3 T2 K1.
NDCG_Q3 = _gain(3) / (_gain(3) / _discount(1) + _gain(2) / _discount(2) + _gain(1) / _discount(3))
EXPECTED = {
    "ndcg_at_10": (NDCG_Q1 + 0.0 + NDCG_Q3) / 3,
    "ndcg_at_10_unjudged_removed": (NDCG_Q1_REMOVED + 0.0 + NDCG_Q3) / 3,
    "mrr_at_10": (1 + 0 + 1) / 3,
    "mrr_at_10_unjudged_removed": (1 + 0 + 1) / 3,
    "recall_at_10": (RECALL_Q1 + 0 + 1 / 3) / 3,
    "recall_at_10_unjudged_removed": (RECALL_Q1 + 0 + 1 / 3) / 3,
    "unjudged_at_10": (4 + 7 + 9) / 30,  # q1: x2 x1 f1 f2; q2: all but z2 z1 f1; q3: all but d2
}
#: The same keys in the port's names (tests/authors_metric.py).
PORT = {"ndcg_at_10": "zero_ndcg", "ndcg_at_10_unjudged_removed": "ignore_ndcg", "mrr_at_10": "zero_rr",
        "mrr_at_10_unjudged_removed": "ignore_rr", "recall_at_10": "zero_recall",
        "recall_at_10_unjudged_removed": "ignore_recall", "unjudged_at_10": "unannotated"}


def fixed_vectors(texts: list[str]) -> np.ndarray:
    """Queries on the first three axes; each passage at its cosine to them, the rest on a fourth axis.

    Any other text (the probe texts that identify every model, :mod:`disastir_mteb.models.identity`) lies on the
    fourth axis.
    """
    queries = {Q1: (1.0, 0.0, 0.0, 0.0), Q2: (0.0, 1.0, 0.0, 0.0), Q3: (0.0, 0.0, 1.0, 0.0)}
    passages = {TEXT[name]: (*c, math.sqrt(1 - sum(x * x for x in c))) for name, c in COSINES.items()}
    return np.array([queries.get(text) or passages.get(text, (0.0, 0.0, 0.0, 1.0)) for text in texts])


@pytest.fixture
def duplicates(tmp_path: Path, use_data: Any) -> Path:
    queries = [{"query_id": "q1", "user_query": Q1}, {"query_id": "q2", "user_query": Q2},
               {"query_id": "q3", "user_query": Q3}]
    qrels = [{"user_query": q, "passage": TEXT[p], "score": g} for q, p, g in QRELS]
    qrels[4]["passage"] = f"  {TEXT['W']}\n"  # matched after strip, as every text
    root = write_layout(tmp_path / "data", {doc: TEXT[text] for doc, text in CORPUS.items()},
                        {"QA_Bio": (queries, qrels)})
    use_data(root)
    return root


@pytest.fixture
def run(duplicates: Path, tmp_path: Path) -> tuple[dict[str, Any], dict[str, list[str]], dict[str, float]]:
    """The run through disastir_mteb.evaluate: (result block, per-query top 10s, per-query NDCG@10)."""
    evaluate(fixed_vectors, [TASK], cache_dir=False, output_folder=tmp_path / "results", show_progress=False,
             data=duplicates)
    [path] = (tmp_path / "results").rglob(f"{TASK}.json")
    per_query = read_per_query(per_query_path(path))
    return (json.loads(path.read_text())["scores"]["test"][0], {q: list(t) for q, t in per_query.top10.items()},
            dict(per_query.ndcg_at_10))


def _port(data: Path, top10: dict[str, list[str]]) -> dict[str, float]:
    return authors_metrics_at_10(data / "query" / "QA_Bio.json", data / "qrels" / "QA_Bio_qrels.json",
                                 data / "corpus.jsonl", top10)


def test_the_expected_values_are_the_ports_on_the_scored_top_10s(duplicates: Path) -> None:
    """The arithmetic above is what the authors' code (ported, keyed by text) gives on these lists."""
    port = _port(duplicates, TOP10)
    for key, name in PORT.items():
        assert port[name] == pytest.approx(EXPECTED[key], abs=1e-12), key
    assert NDCG_Q1 > 1  # two copies of T earn 7 each; the ideal holds T once: the authors' definition allows it


def test_a_run_scores_duplicate_texts_and_ties_as_the_authors_code(
        run: tuple[dict[str, Any], dict[str, list[str]], dict[str, float]], duplicates: Path) -> None:
    block, top10, per_query = run
    assert top10 == TOP10  # the stored list is the scored list, ties at rank 10 included
    port = _port(duplicates, top10)
    for key, name in PORT.items():
        # mteb stores every score rounded to 6 decimals, NDCG and recall first to 5 (as mteb's own)
        assert block[key] == pytest.approx(port[name], abs=5e-6), key
        assert block[key] == pytest.approx(EXPECTED[key], abs=5e-6), key
    assert block["main_score"] == block["ndcg_at_10"]
    assert (block["ndcg_at_10"], block["recall_at_10"]) == (round(EXPECTED["ndcg_at_10"], 5),
                                                            round(EXPECTED["recall_at_10"], 5))  # as mteb rounds
    assert block["ndcg_at_10_exponential_gain"] == pytest.approx(EXPECTED["ndcg_at_10"], abs=5e-7)
    assert per_query == pytest.approx({"q1": NDCG_Q1, "q2": 0.0, "q3": NDCG_Q3}, abs=1e-12)
    assert sum(per_query.values()) / 3 == pytest.approx(block["ndcg_at_10"], abs=5e-6)


def test_mtebs_other_metrics_stay_keyed_by_id(run: tuple[dict[str, Any], dict[str, list[str]], dict[str, float]],
                                              duplicates: Path) -> None:
    """ndcg_at_20 counts both copies of T in its ideal (trec_eval on ids); precision is the same either way."""
    block, _, _ = run
    by_id = {q: {doc: grade_to_gain(g) for doc, text in CORPUS.items() for qt, p, g in QRELS
                 if qt == query and p == text} for q, query in (("q1", Q1), ("q2", Q2), ("q3", Q3))}
    similarities = {q: {doc: COSINES[text][axis] for doc, text in CORPUS.items()} for axis, q in
                    enumerate(("q1", "q2", "q3"))}
    scores = pytrec_eval.RelevanceEvaluator(by_id, {"ndcg_cut.10", "ndcg_cut.20"}).evaluate(similarities)
    assert block["ndcg_at_20"] == pytest.approx(sum(s["ndcg_cut_20"] for s in scores.values()) / 3, abs=5e-6)
    by_id_10 = sum(s["ndcg_cut_10"] for s in scores.values()) / 3
    assert abs(by_id_10 - block["ndcg_at_10"]) > 0.05  # the fixture does tell the two keyings apart
    assert block["accuracy"] == pytest.approx((1 / 7 + 0 + 1 / 4) / 3, abs=5e-6)  # Recall@1 over 7 and 4 ids
    # the same under either keying: every retrieved copy of a judged text is a hit
    assert block["precision_at_10"] == pytest.approx((4 / 10 + 0 + 1 / 10) / 3, abs=5e-6)
    assert block["hit_rate_at_10"] == pytest.approx(2 / 3, abs=5e-6) and block["mrr_at_5"] == pytest.approx(2 / 3)


def test_every_metric_of_a_run_with_shared_texts_is_rescored_as_written(
        run: tuple[dict[str, Any], dict[str, list[str]], dict[str, float]], tmp_path: Path) -> None:
    """Re-scoring a stored top 10 (results.rescoring) gives the file's numbers, the text-keyed ones (ndcg_at_10,
    mrr_at_10, recall_at_10 replaced) and mteb's id-keyed ones alike; an edit of a text-keyed one is refused."""
    from disastir_mteb.results.result_sets import load_result_set

    [path] = (tmp_path / "results").rglob(f"{TASK}.json")
    result = load_result_set(path.parent)
    assert result.rescored == (TASK,) and result.unchecked is None
    assert {"ndcg_at_10", "mrr_at_10", "recall_at_10", "accuracy", "map_at_10", "ndcg_at_5",
            "recall_at_10_unjudged_removed"} <= result.rescored_metrics
    content = json.loads(path.read_text())
    content["scores"]["test"][0]["mrr_at_10"] = 0.5  # the authors' 2/3, keyed by text
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError) as refused:
        load_result_set(path.parent)
    says(str(refused.value), path, "mrr_at_10 0.5", "0.666667")


def test_plain_mteb_gets_the_authors_numbers_and_the_load_report_counts(
        run: tuple[dict[str, Any], dict[str, list[str]], dict[str, float]], duplicates: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """``mteb.evaluate`` on the registered task scores alike; the report counts shared texts and the conflict."""
    block, top10, per_query = run
    task = mteb.get_task(TASK)
    with caplog.at_level(logging.WARNING, logger="mteb.disastir"):
        plain = mteb.evaluate(as_mteb_encoder(fixed_vectors), task, cache=None, show_progress_bar=False)
    scores = plain.task_results[0].scores["test"][0]
    for key in [*PORT, "ndcg_at_10_exponential_gain", "ndcg_at_10_linear_gain"]:
        assert scores[key] == pytest.approx(block[key], abs=5e-7), key  # the file rounds to 6 decimals
    assert task.ndcg_at_10_per_query(top10) == per_query  # the public door: the per-query file's numbers
    report = task.load_report
    assert (report.duplicate_judged_texts, report.duplicate_judged_ids) == (3, 6)  # T, W, Z; X is unjudged
    assert (report.repeated_pairs, report.conflicting_pairs) == (2, 1)
    assert report.conflict_examples == [f"query {Q1!r}, passage {TEXT['Y']!r}: graded 1, then 2; kept 2"]
    [warning] = [r.getMessage() for r in caplog.records if r.name == "mteb.disastir" and r.levelno == logging.WARNING]
    assert warning.endswith(
        f"; 1 pair(s) graded differently by their repeated rows, each keeping its last row's grade as the authors' "
        f"code does (e.g. query {Q1!r}, passage {TEXT['Y']!r}: graded 1, then 2; kept 2); 3 judged text(s) held by "
        "6 corpus ids, each text scored once as the authors key by text")


def test_the_linear_gain_is_keyed_by_text_too(duplicates: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISASTIR_GAIN", "linear")
    plain = mteb.evaluate(as_mteb_encoder(fixed_vectors), mteb.get_task(TASK), cache=None, show_progress_bar=False)
    scores = plain.task_results[0].scores["test"][0]
    ideal_q1 = sum(g / _discount(r) for r, g in enumerate([3, 2, 2, 1, 1, 0], 1))
    q1 = (3 / _discount(1) + 3 / _discount(2) + 1 / _discount(5) + 2 / _discount(10)) / ideal_q1
    q3 = 3 / (3 / _discount(1) + 2 / _discount(2) + 1 / _discount(3))
    assert scores["ndcg_at_10"] == pytest.approx((q1 + q3) / 3, abs=5e-6)
    assert scores["ndcg_at_10_linear_gain"] == pytest.approx((q1 + q3) / 3, abs=5e-7)
    assert scores["ndcg_at_10_exponential_gain"] == pytest.approx(EXPECTED["ndcg_at_10"], abs=5e-7)


def test_the_issues_toy_case() -> None:
    """Run [d1, x, d2]; text T graded 3 under d1 and d1b, U graded 1 as d2: 0.983 and recall 1 by text."""
    top, grades = key_by_text({"q": ["d1", "x", "d2"]}, {"q": {"d1": 3, "d1b": 3, "d2": 1}}, {"d1": "d1", "d1b": "d1"})
    assert top == {"q": ["d1", "x", "d2"]} and grades == {"q": {"d1": 3, "d2": 1}}
    by_text = score_query(top["q"], grades["q"])
    dcg = _gain(3) / _discount(1) + _gain(1) / _discount(3)
    assert by_text.ndcg_zero_fill == pytest.approx(dcg / (_gain(3) / _discount(1) + _gain(1) / _discount(2)),
                                                   abs=1e-15)
    assert round(by_text.ndcg_zero_fill, 3) == 0.983 and by_text.recall_zero_fill == 1.0
    by_id = score_query(["d1", "x", "d2"], {"d1": 3, "d1b": 3, "d2": 1})  # what the id-keyed count gave
    assert round(by_id.ndcg_zero_fill, 3) == 0.629 and by_id.recall_zero_fill == 2 / 3


def test_without_shared_texts_mtebs_own_keys_stand(sample_data: Path, use_data: Any) -> None:
    """No judged text under two ids: nothing replaces mteb's numbers, and the text-keyed NDCG is trec_eval's to the bit.

    The generated sample has no duplicate texts; the runner's results there are compared with plain mteb, metric
    for metric, in tests/test_runner.py.
    """
    use_data(sample_data)
    task = mteb.get_task(TASK)
    task.load_data()
    assert task.load_report.duplicate_judged_texts == 0
    split = task.dataset["default"]["test"]
    qrels, query_ids = split["relevant_docs"], split["queries"]["id"]
    vectors = np.random.default_rng(0).random((len(query_ids), 8))
    doc_ids = list(split["corpus"]["id"])
    docs = np.random.default_rng(1).random((len(doc_ids), 8))
    results = {q: dict(zip(doc_ids, (docs @ v).tolist(), strict=True)) for q, v in zip(query_ids, vectors,
                                                                                            strict=True)}
    extra = task.task_specific_scores({}, qrels, results, "test", "default")
    assert not {"ndcg_at_10", "mrr_at_10", "recall_at_10"} & set(extra)
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(results)
    ours = task.ndcg_at_10_per_query({q: sorted(r, key=lambda d: (r[d], d), reverse=True)[:10]
                                      for q, r in results.items()})
    assert ours == {q: s["ndcg_cut_10"] for q, s in trec.items()}  # exactly, not approximately
    assert extra["ndcg_at_10_exponential_gain"] == sum(s["ndcg_cut_10"] for s in trec.values()) / len(trec)


def test_extra_judgements_on_shared_texts_are_scored_once(duplicates: Path, tmp_path: Path) -> None:
    """A text first judged by an extra file, held by two ids, joins the record of shared texts."""
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps([{"user_query": Q2, "passage": TEXT["X"], "score": 2}]), encoding="utf-8")
    spec = get_spec(TASK)
    published = load_task(spec, find_task_files(duplicates))
    assert "x1" not in published.same_text
    data = load_task(spec, find_task_files(duplicates), extra=extra)
    assert data.grades["q2"]["x1"] == data.grades["q2"]["x2"] == 2
    assert data.same_text["x2"] == data.same_text["x1"] == "x1"
    assert (data.report.duplicate_judged_texts, data.report.duplicate_judged_ids) == (4, 8)


def test_completed_scores_are_keyed_by_text_too(
        run: tuple[dict[str, Any], dict[str, list[str]], dict[str, float]], duplicates: Path, tmp_path: Path) -> None:
    """The judge's completed score of a run: its published column is the official number, and a judgement added to a
    text held twice (X, retrieved twice by q1) counts once in the ideal, as the authors' code counts the merged
    qrels (``export --format qrels-with-added``, then their scorer)."""
    block, top10, _ = run
    added = AddedJudgements({(Intent.QA, Q1, TEXT["X"]): 2.0}, {(Intent.QA, Q1, TEXT["X"]): ("judge", "v1")}, "store")
    [found] = completed_scores(result_sets_of([tmp_path / "results"]), added, duplicates)
    scores = found.tasks[TASK]
    assert scores.published.ndcg_zero_fill == pytest.approx(EXPECTED["ndcg_at_10"], abs=1e-12)
    assert scores.published.recall_zero_fill == pytest.approx(EXPECTED["recall_at_10"], abs=1e-12)
    assert (scores.added, scores.filled) == (2, 2)  # both ids of X graded, both in q1's top 10
    merged = tmp_path / "merged_qrels.json"
    rows = json.loads((duplicates / "qrels" / "QA_Bio_qrels.json").read_text())
    merged.write_text(json.dumps([*rows, {"user_query": Q1, "passage": TEXT["X"], "score": 2}]))
    port = authors_metrics_at_10(duplicates / "query" / "QA_Bio.json", merged, duplicates / "corpus.jsonl", top10)
    assert scores.completed.ndcg_zero_fill == pytest.approx(port["zero_ndcg"], abs=1e-12)
    assert scores.completed.recall_zero_fill == pytest.approx(port["zero_recall"], abs=1e-12)
    assert scores.completed.unjudged_share == pytest.approx(port["unannotated"], abs=1e-12)
    assert scores.completed.ndcg_zero_fill != pytest.approx(block["ndcg_at_10"], abs=1e-3)  # the judgement counts

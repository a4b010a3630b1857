"""The authors' metrics (DMRetriever ``eva/evaluation/metrics.py``): by hand, against mteb, and in every task file.

Expected values are written as arithmetic: gains ``2**g - 1`` over ``log2(rank + 1)`` discounts.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores, mrr
from sentences import says

from authors_metric import authors_metrics_at_10
from disastir_mteb import cli
from disastir_mteb.data.published import find_task_files
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.results.metrics import get_metric
from disastir_mteb.results.per_query import per_query_file, read_per_query
from disastir_mteb.results.result_sets import find_result_sets
from disastir_mteb.runner.run import evaluate
from disastir_mteb.scoring.authors import QueryScores, ranking, score_query, score_run
from disastir_mteb.vocabulary.taxonomy import INTENTS, TASK_NAMES, get_spec

#: One task per intent (STS: grades 0-5), different categories.
TASKS = [next(t for t in TASK_NAMES if get_spec(t).intent is intent) for intent in INTENTS]
NEW_KEYS = ["ndcg_at_10_unjudged_removed", "mrr_at_10_unjudged_removed", "recall_at_10_unjudged_removed"]


def _gain(grade: float) -> float:
    return 2**grade - 1


# -- by hand ------------------------------------------------------------------------------------------------------

def test_both_variants_by_hand() -> None:
    """Ranked d1 u1 d2 u2 d3; judged d1=1, d2=3, d3=0, d4=2 (d4 not retrieved); u* unjudged."""
    scores = score_query(["d1", "u1", "d2", "u2", "d3"], {"d1": 1, "d2": 3, "d3": 0, "d4": 2})
    ideal = _gain(3) / math.log2(2) + _gain(2) / math.log2(3) + _gain(1) / math.log2(4) + _gain(0) / math.log2(5)
    zero_fill = _gain(1) / math.log2(2) + _gain(3) / math.log2(4)  # d1 at 1, d2 at 3
    removed = _gain(1) / math.log2(2) + _gain(3) / math.log2(3) + _gain(0) / math.log2(4)  # d1 d2 d3 move up
    assert scores == QueryScores(
        ndcg_zero_fill=pytest.approx(zero_fill / ideal, abs=1e-15),
        ndcg_unjudged_removed=pytest.approx(removed / ideal, abs=1e-15),
        rr_zero_fill=1.0, rr_unjudged_removed=1.0,
        recall_zero_fill=2 / 3, recall_unjudged_removed=2 / 3,  # d1, d2 of d1, d2, d4 (d3 is graded 0)
        retrieved=5, unjudged=2)
    assert scores.ndcg_unjudged_removed > scores.ndcg_zero_fill


def test_reciprocal_rank_moves_up_when_unjudged_are_removed() -> None:
    scores = score_query(["u1", "d0", "u2", "d2"], {"d0": 0, "d2": 2})
    assert (scores.rr_zero_fill, scores.rr_unjudged_removed) == (1 / 4, 1 / 2)  # d2: rank 4, then rank 2 (d0 d2)
    ideal = _gain(2) / math.log2(2)
    assert scores.ndcg_zero_fill == pytest.approx(_gain(2) / math.log2(5) / ideal, abs=1e-15)
    assert scores.ndcg_unjudged_removed == pytest.approx(_gain(2) / math.log2(3) / ideal, abs=1e-15)
    assert scores.recall_zero_fill == scores.recall_unjudged_removed == 1.0


def test_fractional_grades_a_judges_mean_vote() -> None:
    ideal = _gain(1.67) / math.log2(2) + _gain(0.33) / math.log2(3)
    scores = score_query(["u", "a", "b"], {"a": 1.67, "b": 0.33})
    assert scores.ndcg_zero_fill == pytest.approx((_gain(1.67) / math.log2(3) + _gain(0.33) / math.log2(4)) / ideal,
                                                  abs=1e-15)
    assert scores.ndcg_unjudged_removed == pytest.approx(1.0, abs=1e-15)  # a b: the ideal order
    assert (scores.rr_zero_fill, scores.rr_unjudged_removed, scores.recall_zero_fill) == (1 / 2, 1.0, 1.0)
    swapped = score_query(["u", "b", "a"], {"a": 1.67, "b": 0.33})
    assert swapped.ndcg_unjudged_removed == pytest.approx(
        (_gain(0.33) / math.log2(2) + _gain(1.67) / math.log2(3)) / ideal, abs=1e-15)
    assert swapped.rr_unjudged_removed == 1.0  # 0.33 > 0 is relevant


def test_a_query_with_no_relevant_passage_scores_zero_and_one_without_judgement_is_skipped() -> None:
    nothing = score_query(["a", "u", "b"], {"a": 0, "b": 0})
    assert nothing == QueryScores(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, retrieved=3, unjudged=1)  # ideal DCG 0: NDCG 0
    with pytest.raises(ValueError, match="no judgement"):
        score_query(["a"], {})
    with pytest.raises(ValueError) as refused:
        score_query(["a"], {"a": -1})
    says(str(refused.value), "1 grade(s)", ">= 0", "'a': -1")

    run = score_run({"q1": ["d1", "u1", "d2", "u2", "d3"], "q2": ["u", "d0", "u2", "d2"], "q3": ["x", "y"]},
                    {"q1": {"d1": 1, "d2": 3, "d3": 0, "d4": 2}, "q2": {"d0": 0, "d2": 2}, "q9": {"z": 3}})
    q1 = score_query(["d1", "u1", "d2", "u2", "d3"], {"d1": 1, "d2": 3, "d3": 0, "d4": 2})
    assert set(run.per_query) == {"q1", "q2"} and run.queries_scored == 2 and run.queries_skipped == 1
    assert run.mrr_zero_fill == (1 + 1 / 4) / 2 and run.mrr_unjudged_removed == (1 + 1 / 2) / 2
    assert run.ndcg_zero_fill == (q1.ndcg_zero_fill + run.per_query["q2"].ndcg_zero_fill) / 2
    assert run.recall_zero_fill == run.recall_unjudged_removed == (2 / 3 + 1) / 2
    # the authors' pooled ratio: q3's two pairs count as retrieved, none as unjudged (their script's reading)
    assert (run.unjudged_pairs, run.retrieved_pairs) == (2 + 2, 5 + 4 + 2) and run.unjudged_share == 4 / 11


def test_the_list_is_cut_at_k_and_never_refilled_from_below() -> None:
    ranked = [f"u{i}" for i in range(10)] + ["d1"]  # the judged passage is 11th
    scores = score_query(ranked, {"d1": 3})
    assert scores == QueryScores(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, retrieved=10, unjudged=10)
    top3 = score_query(["u", "d1", "d2", "d3"], {"d1": 1, "d2": 1, "d3": 1}, top_k=3)
    assert (top3.retrieved, top3.recall_zero_fill, top3.recall_unjudged_removed) == (3, 2 / 3, 2 / 3)


def test_ties_are_ranked_as_trec_eval_and_mteb_rank_them() -> None:
    """Tied similarities: the higher passage id first. mteb's per-query RR, recall and NDCG equal ours to the bit."""
    results = {
        "q1": {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.9, "e": 0.1},
        "q2": {f"p{i:02d}": 0.25 for i in range(12)},
        "q3": {"x": 0.3, "y": 0.3, "z": 0.2},
    }
    grades = {"q1": {"a": 3, "c": 0, "e": 1, "f": 2}, "q2": {"p00": 2, "p05": 1, "p11": 0, "p03": 3},
              "q3": {"x": 0, "y": 0}}
    assert ranking(results["q1"]) == ["d", "c", "b", "a", "e"]
    assert ranking(results["q2"], 3) == ["p11", "p10", "p09"]
    ours = score_run({q: ranking(r) for q, r in results.items()}, grades)
    qrels = {q: {d: int(_gain(g)) for d, g in judged.items()} for q, judged in grades.items()}
    evaluation = calculate_retrieval_scores(results, qrels, [10])
    reciprocal_ranks = dict(zip(results, mrr(qrels, results, [10])["MRR@10"], strict=True))
    for query, scores in ours.per_query.items():
        assert scores.rr_zero_fill == reciprocal_ranks[query], query
        assert scores.recall_zero_fill == evaluation.all_scores[query]["recall_10"], query
        assert scores.ndcg_zero_fill == pytest.approx(evaluation.all_scores[query]["ndcg_cut_10"], abs=1e-12), query
    q1, q2, q3 = (ours.per_query[q] for q in ("q1", "q2", "q3"))
    assert (q1.rr_zero_fill, q1.rr_unjudged_removed, q1.recall_zero_fill) == (1 / 4, 1 / 2, 2 / 3)  # d c b a e: a
    # p11 (0) p10 p09 p08 p07 p06 p05 (1) p04 p03 (3) p02; p00 (2) is 12th
    assert (q2.rr_zero_fill, q2.rr_unjudged_removed, q2.recall_zero_fill) == (1 / 7, 1 / 2, 2 / 3)
    assert q3 == QueryScores(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, retrieved=3, unjudged=1)


# -- in every task file -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sample_runs(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two cheap models (hashing encoders) on one task per intent of the sample: result files and per-query files."""
    root = tmp_path_factory.mktemp("authors-runs")
    for dim in (384, 64):
        evaluate(HashingEncoder(dim=dim, name=f"disastir-mteb/hashing-{dim}"), TASKS, cache_dir=False,
                 output_folder=root / f"hashing-{dim}", show_progress=False, data=sample_data)
    return root


def test_task_files_hold_the_authors_metrics_of_an_independent_computation(sample_runs: Path,
                                                                           sample_data: Path) -> None:
    """The new keys equal a text-keyed re-implementation on the per-query top 10; mteb's MRR and recall are theirs."""
    [folder] = find_result_sets(sample_runs / "hashing-384")
    files = find_task_files(sample_data)
    for task in TASKS:
        block = json.loads((folder / f"{task}.json").read_text())["scores"]["test"][0]
        top10 = read_per_query(per_query_file(folder, task)).top10
        query_file, qrels_file = files.for_task(get_spec(task))
        expected = authors_metrics_at_10(query_file, qrels_file, sample_data / "corpus.jsonl", dict(top10))
        # mteb writes every score rounded to 6 decimals; recall_at_10 it rounds to 5 first
        assert block["ndcg_at_10_unjudged_removed"] == pytest.approx(expected["ignore_ndcg"], abs=5e-7), task
        assert block["mrr_at_10_unjudged_removed"] == pytest.approx(expected["ignore_rr"], abs=5e-7), task
        assert block["recall_at_10_unjudged_removed"] == pytest.approx(expected["ignore_recall"], abs=5e-7), task
        assert block["unjudged_at_10"] == pytest.approx(expected["unannotated"], abs=5e-7), task
        assert block["ndcg_at_10_exponential_gain"] == pytest.approx(expected["zero_ndcg"], abs=5e-7), task
        assert block["mrr_at_10"] == pytest.approx(expected["zero_rr"], abs=5e-7), task  # no duplicate key needed
        assert block["recall_at_10"] == pytest.approx(expected["zero_recall"], abs=5e-6), task
        assert block["ndcg_at_10"] == pytest.approx(expected["zero_ndcg"], abs=5e-6), task  # official: unchanged
        assert 0 < block["unjudged_at_10"] < 1 and expected["ignore_ndcg"] > expected["zero_ndcg"], task
        assert not {"mrr_at_10_zero_fill", "recall_at_10_zero_fill"} & set(block)


def test_score_checks_know_the_new_keys_ranges() -> None:
    from disastir_mteb.results.score_checks import impossible_score

    path = Path("T.json")
    for key in [*NEW_KEYS, "unjudged_at_10"]:
        assert impossible_score(path, {key: 0.0}) is None and impossible_score(path, {key: 1.0}) is None
        says(impossible_score(path, {key: 1.5}) or "", "T.json", key, "1.5", "[0, 1]")
        says(impossible_score(path, {key: float("nan")}) or "", "T.json", key, "NaN", "[0, 1]")


def test_report_and_compare_show_the_new_keys_on_request(sample_runs: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert [get_metric(key).name for key in NEW_KEYS] == [
        "NDCG@10 (unjudged removed)", "MRR@10 (unjudged removed)", "Recall@10 (unjudged removed)"]
    [folder] = find_result_sets(sample_runs / "hashing-384")
    key = "ndcg_at_10_unjudged_removed"
    files = {task: json.loads((folder / f"{task}.json").read_text())["scores"]["test"][0][key] for task in TASKS}
    out = tmp_path / "report"
    assert cli.main(["report", str(sample_runs / "hashing-384"), "--metric", key, "--out", str(out),
                     "--format", "csv"]) == 0
    printed = capsys.readouterr().out
    assert "NDCG@10 (unjudged removed) x100" in printed
    rows = list(csv.DictReader((out / "scores.csv").open()))
    assert {row["task"]: float(row[key]) for row in rows} == pytest.approx(files, abs=5e-6)  # csv: 5 decimals

    assert cli.main(["report", str(sample_runs / "hashing-384")]) == 0  # the default stays NDCG@10
    default = capsys.readouterr().out
    assert "NDCG@10 x100" in default and "unjudged removed" not in default

    assert cli.main(["compare", str(sample_runs / "hashing-384"), str(sample_runs / "hashing-64"),
                     "--metric", "mrr_at_10_unjudged_removed"]) == 0
    assert "MRR@10 (unjudged removed) x100" in capsys.readouterr().out

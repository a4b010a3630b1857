"""Scoring like the authors: exponential gain through mteb, proven on a hand-computed example."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import mteb
import numpy as np
import pytest
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction

from conftest import write_layout
from disastir_mteb.data.published import grade_to_gain

ROUNDED = 1e-6  # mteb stores task scores rounded to 6 decimals (ndcg_at_10 to 5)

# One query q1 whose fixed embedding ranks: d2 (g1), d4 (g0), d1 (g3), d5 (unjudged), d3 (g2), d6 (g1).
# A second query q2 has only a grade-0 judgement: NDCG 0, still counted, as the authors do.
SIMILARITY = {"d2": 0.9, "d4": 0.8, "d1": 0.7, "d5": 0.6, "d3": 0.5, "d6": 0.1}
GRADES_Q1 = {"d1": 3, "d2": 1, "d3": 2, "d4": 0, "d6": 1}
TEXT = {d: f"passage {d}" for d in SIMILARITY}
Q1, Q2 = "which passage answers?", "a query with nothing relevant"

# Expected values as arithmetic (gain over log2(rank + 1)).
DCG_EXP = 1 / math.log2(2) + 0 + 7 / math.log2(4) + 0 + 3 / math.log2(6) + 1 / math.log2(7)
IDCG_EXP = 7 / math.log2(2) + 3 / math.log2(3) + 1 / math.log2(4) + 1 / math.log2(5)
DCG_LIN = 1 / math.log2(2) + 0 + 3 / math.log2(4) + 0 + 2 / math.log2(6) + 1 / math.log2(7)
IDCG_LIN = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4) + 1 / math.log2(5)
EXPECTED_EXP = (DCG_EXP / IDCG_EXP + 0.0) / 2
EXPECTED_LIN = (DCG_LIN / IDCG_LIN + 0.0) / 2


class FixedEncoder(AbsEncoder):
    """Embeds q1 as [1, 0], q2 as [0, 1] and each passage at a fixed cosine to q1."""

    def __init__(self) -> None:
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={"name": "test/fixed-encoder", "revision": "1",
                                                                  "similarity_fn_name": ScoringFunction.COSINE})
        by_text = {TEXT[d]: s for d, s in SIMILARITY.items()}
        self._vectors = {t: np.array([s, math.sqrt(1 - s * s)]) for t, s in by_text.items()}
        self._vectors[Q1], self._vectors[Q2] = np.array([1.0, 0.0]), np.array([0.0, 1.0])

    def encode(self, inputs: Any, **kwargs: Any) -> np.ndarray:
        return np.stack([self._vectors[t] for batch in inputs for t in batch["text"]]).astype(np.float32)


@pytest.fixture
def hand_data(tmp_path: Path, use_data: object) -> Path:
    qrels = [{"user_query": Q1, "passage": TEXT[d], "score": g} for d, g in GRADES_Q1.items()]
    qrels.append({"user_query": Q2, "passage": TEXT["d5"], "score": 0})
    queries = [{"query_id": "q1", "user_query": Q1}, {"query_id": "q2", "user_query": Q2}]
    root = write_layout(tmp_path / "data", {d: TEXT[d] for d in SIMILARITY}, {"QA_Bio": (queries, qrels)})
    use_data(root)
    return root


def _scores(task: Any, tmp_path: Path) -> dict[str, Any]:
    result = mteb.evaluate(FixedEncoder(), task, cache=None, show_progress_bar=False)
    return result.task_results[0].scores["test"][0]


def test_gain_mapping() -> None:
    assert [grade_to_gain(g) for g in range(6)] == [0, 1, 3, 7, 15, 31]
    assert [grade_to_gain(g, "linear") for g in range(6)] == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="Unknown gain"):
        grade_to_gain(1, "log")  # type: ignore[arg-type]


def test_ndcg_at_10_is_the_authors_exponential_gain_ndcg(hand_data: Path, tmp_path: Path) -> None:
    scores = _scores(mteb.get_task("DisastIR-QA-Bio"), tmp_path)
    assert scores["main_score"] == scores["ndcg_at_10"]
    assert scores["ndcg_at_10"] == pytest.approx(EXPECTED_EXP, abs=1e-5)
    assert scores["ndcg_at_10_exponential_gain"] == pytest.approx(EXPECTED_EXP, abs=ROUNDED)
    assert scores["ndcg_at_10_linear_gain"] == pytest.approx(EXPECTED_LIN, abs=ROUNDED)
    assert scores["unjudged_at_10"] == pytest.approx((1 + 5) / 12)  # q1: d5 unjudged; q2: all but d5
    # binary metrics only ask whether the gain is > 0: q1 has 4 relevant passages, 3 in its top 5; q2 none
    assert scores["recall_at_5"] == pytest.approx((3 / 4 + 0) / 2, abs=1e-5)


def test_linear_gain_option_keeps_grades(hand_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISASTIR_GAIN", "linear")
    scores = _scores(mteb.get_task("DisastIR-QA-Bio"), tmp_path)
    assert scores["ndcg_at_10"] == pytest.approx(EXPECTED_LIN, abs=1e-5)
    assert scores["ndcg_at_10_exponential_gain"] == pytest.approx(EXPECTED_EXP, abs=ROUNDED)
    assert scores["recall_at_5"] == pytest.approx((3 / 4 + 0) / 2, abs=1e-5)


def test_independent_authors_formula_agrees_on_the_hand_example(hand_data: Path) -> None:
    from authors_metric import authors_ndcg_at_10

    ranked = {"q1": sorted(SIMILARITY, key=SIMILARITY.get, reverse=True), "q2": ["d1"]}
    value = authors_ndcg_at_10(hand_data / "query" / "QA_Bio.json", hand_data / "qrels" / "QA_Bio_qrels.json",
                               hand_data / "corpus.jsonl", ranked)
    assert value == pytest.approx(EXPECTED_EXP, abs=1e-12)

"""Every metric the DMRetriever authors report, re-written from their ``eva/evaluation/metrics.py``.

With ``r_i`` the grade at rank ``i`` (1-based) and ``J`` every judged grade of the query: ``DCG = sum_i
gain(r_i) / log2(i + 1)`` (gain ``2**r - 1`` by default); ``NDCG@k = DCG(top k) / DCG(J sorted, cut at k)``, 0 when
the ideal is 0; ``RR@k = 1 / i`` of the first ``r_i > 0``; ``Recall@k`` = retrieved with ``r_i > 0`` / judged > 0.
Two variants: **zero fill** (unjudged = grade 0: the paper's numbers and mteb's) and **unjudged removed** (they
leave the top k, nothing moves up, the ideal stays). A query without judgements is skipped.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from disastir_mteb.util.errors import InvalidInput

__all__ = ["TOP_K", "Gain", "QueryScores", "RunScores", "exponential_gain", "key_by_text", "ranking", "score_query",
           "score_run"]

#: The gain of a grade in the DCG (see :func:`exponential_gain`).
Gain = Callable[[float], float]

#: The authors' cut-off (``DEFAULT_TOPK`` in DMRetriever's ``eva/utils/config.py``).
TOP_K = 10


@dataclass(frozen=True)
class QueryScores:
    """The authors' metrics of one judged query; ``retrieved`` and ``unjudged`` count its top k."""

    ndcg_zero_fill: float
    ndcg_unjudged_removed: float
    rr_zero_fill: float
    rr_unjudged_removed: float
    recall_zero_fill: float
    recall_unjudged_removed: float
    retrieved: int
    unjudged: int


@dataclass(frozen=True)
class RunScores:
    """The authors' metrics of a run, per query and their means; ``retrieved_pairs`` counts skipped queries too."""

    per_query: Mapping[str, QueryScores]
    ndcg_zero_fill: float
    ndcg_unjudged_removed: float
    mrr_zero_fill: float
    mrr_unjudged_removed: float
    recall_zero_fill: float
    recall_unjudged_removed: float
    retrieved_pairs: int
    unjudged_pairs: int
    queries_skipped: int

    @property
    def queries_scored(self) -> int:
        """How many queries the means are over."""
        return len(self.per_query)

    @property
    def unjudged_share(self) -> float:
        """Unjudged pairs / retrieved pairs, pooled over the run (the authors' ``unannotated_ratio``)."""
        return self.unjudged_pairs / self.retrieved_pairs if self.retrieved_pairs else 0.0


def ranking(similarities: Mapping[str, float], top_k: int = TOP_K) -> list[str]:
    """The ``top_k`` passages by similarity, ties broken by the higher passage id, as ``trec_eval`` and mteb order."""
    best = heapq.nlargest(top_k, similarities.items(), key=lambda item: (item[1], item[0]))
    return [doc_id for doc_id, _ in best]


def exponential_gain(grade: float) -> float:
    """``2**grade - 1``: the authors' gain (0, 1, 3, 7 for grades 0-3; 15, 31 for STS's 4 and 5)."""
    return 2.0 ** grade - 1.0


def _dcg(grades: Iterable[float], gain: Gain) -> float:
    """``sum_i gain(g_i) / log2(i + 1)``, added in order as ``trec_eval`` adds (``sum`` would round differently)."""
    total = 0.0
    for rank, grade in enumerate(grades):
        total += gain(grade) / math.log2(rank + 2)
    return total


def key_by_text(top: Mapping[str, Sequence[str]], grades: Mapping[str, Mapping[str, float]],
                same_text: Mapping[str, str]) -> tuple[dict[str, list[str]], dict[str, dict[str, float]]]:
    """Id-keyed rankings and judgements keyed by text, as the authors key them (two copies of a text both earn gain).

    Args:
        top: query -> its ranked passage ids, best first.
        grades: query -> {passage id: grade}.
        same_text: passage id -> the id that stands for its text; an id not in it stands for itself.
    """
    if not same_text:
        return {query: list(ranked) for query, ranked in top.items()}, {q: dict(g) for q, g in grades.items()}
    keyed_top = {query: [same_text.get(doc, doc) for doc in ranked] for query, ranked in top.items()}
    keyed_grades = {query: {same_text.get(doc, doc): grade for doc, grade in judged.items()}
                    for query, judged in grades.items()}
    return keyed_top, keyed_grades


def _at_k(retrieved: Sequence[float], judged: Sequence[float], ideal_dcg: float, top_k: int,
          gain: Gain) -> tuple[float, ...]:
    """(NDCG, RR, recall) of one list of retrieved grades, as the authors' ``_metrics_at_k``."""
    head = retrieved[:top_k]
    ndcg = _dcg(head, gain) / ideal_dcg if ideal_dcg else 0.0
    rr = next((1.0 / (rank + 1) for rank, grade in enumerate(head) if grade > 0), 0.0)
    relevant = sum(1 for grade in judged if grade > 0)
    recall = sum(1 for grade in head if grade > 0) / relevant if relevant else 0.0
    return ndcg, rr, recall


def _check_grades(grades: Mapping[str, float]) -> None:
    values = grades.values()
    if values and set(map(type, values)) == {int} and min(values) >= 0:
        return  # integer grades, as the data layer reads them: checked in C, without the loop below
    bad = [(doc, grade) for doc, grade in grades.items()
           if isinstance(grade, bool) or not isinstance(grade, int | float) or not math.isfinite(grade) or grade < 0]
    if bad:
        raise InvalidInput(f"{len(bad)} grade(s) are not finite numbers >= 0 (first: {bad[0][0]!r}: {bad[0][1]!r}); "
                           "a grade is a judgement on the intent's scale (0-3, STS 0-5), a fraction for a mean vote.")


def score_query(ranked: Sequence[str], grades: Mapping[str, float], top_k: int = TOP_K, *,
                gain: Gain = exponential_gain) -> QueryScores:
    """The authors' metrics of one query, from its ranked passage keys and every judgement (grade 0 included).

    Raises:
        ValueError: ``grades`` is empty or holds a negative or non-finite grade; ``top_k`` below 1.
    """
    if top_k < 1:
        raise InvalidInput(f"top_k is {top_k!r}; it must be at least 1.")
    if not grades:
        raise InvalidInput("The query has no judgement; the authors skip such a query (score_run leaves it out).")
    _check_grades(grades)
    head = list(ranked[:top_k])
    judged = list(grades.values())
    ideal_dcg = _dcg(sorted(judged, reverse=True)[:top_k], gain)
    zero_fill = [grades.get(doc, 0) for doc in head]
    removed = [grades[doc] for doc in head if doc in grades]
    ndcg_z, rr_z, recall_z = _at_k(zero_fill, judged, ideal_dcg, top_k, gain)
    ndcg_r, rr_r, recall_r = _at_k(removed, judged, ideal_dcg, top_k, gain)
    return QueryScores(ndcg_zero_fill=ndcg_z, ndcg_unjudged_removed=ndcg_r, rr_zero_fill=rr_z,
                       rr_unjudged_removed=rr_r, recall_zero_fill=recall_z, recall_unjudged_removed=recall_r,
                       retrieved=len(head), unjudged=len(head) - len(removed))


def score_run(top: Mapping[str, Sequence[str]], grades: Mapping[str, Mapping[str, float]],
              top_k: int = TOP_K, *, gain: Gain = exponential_gain) -> RunScores:
    """The authors' metrics of the queries of ``top``; one without judgements is skipped, as in their script.

    Raises:
        ValueError: a negative or non-finite grade; ``top_k`` below 1.
    """
    if top_k < 1:
        raise InvalidInput(f"top_k is {top_k!r}; it must be at least 1.")
    per_query: dict[str, QueryScores] = {}
    retrieved = skipped = 0
    for query, ranked in top.items():
        judged = grades.get(query)
        if not judged:
            retrieved += len(ranked[:top_k])
            skipped += 1
            continue
        scores = score_query(ranked, judged, top_k, gain=gain)
        retrieved += scores.retrieved
        per_query[query] = scores

    def mean(name: str) -> float:
        return sum(getattr(s, name) for s in per_query.values()) / len(per_query) if per_query else 0.0

    return RunScores(
        per_query=per_query,
        ndcg_zero_fill=mean("ndcg_zero_fill"),
        ndcg_unjudged_removed=mean("ndcg_unjudged_removed"),
        mrr_zero_fill=mean("rr_zero_fill"),
        mrr_unjudged_removed=mean("rr_unjudged_removed"),
        recall_zero_fill=mean("recall_zero_fill"),
        recall_unjudged_removed=mean("recall_unjudged_removed"),
        retrieved_pairs=retrieved,
        unjudged_pairs=sum(s.unjudged for s in per_query.values()),
        queries_skipped=skipped,
    )

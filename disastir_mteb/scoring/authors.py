"""Every metric the DMRetriever authors report, computed as their evaluation code computes it.

The reference is ``eva/evaluation/metrics.py`` of ``KaiYin97/DMRETRIEVER`` (``_dcg``, ``_metrics_at_k``,
``calc_metrics``), re-written here from its definitions. For one query, with ``r_i`` the grade of the passage
at rank ``i`` (1-based) of the retrieved list cut at ``k`` (the authors' ``DEFAULT_TOPK``, 10) and ``J`` the
grades of every passage judged for the query:

- gain ``2**r - 1``; ``DCG = sum_i (2**r_i - 1) / log2(i + 1)``;
- ``NDCG@k = DCG(retrieved) / DCG(ideal)``, the ideal being ``J`` sorted from the highest grade down and cut
  at ``k`` (grade-0 judgements included: they add nothing), and 0 when the ideal DCG is 0;
- ``RR@k = 1 / i`` for the first retrieved passage with ``r_i > 0``, 0 when there is none;
- ``Recall@k`` = retrieved passages with ``r_i > 0`` / judged passages with a grade above 0, 0 when the
  query has none above 0.

Two variants, as the authors report them side by side (their ``metrics_zero_per_event.csv`` and
``metrics_ignore_per_event.csv``):

- **zero fill**: an unjudged retrieved passage has grade 0 (the paper's numbers, and mteb's ``ndcg_at_10``);
- **unjudged removed** (the authors' "ignore list"): unjudged passages are removed from the top ``k``, the
  judged ones behind them move up, and nothing from below rank ``k`` fills the gap: the list gets shorter.
  The ideal stays the same. Recall is the same in both variants by construction (an unjudged passage is
  never counted relevant), MRR and NDCG are never lower than with zero fill.

A query without any judgement is skipped by every metric (the authors' ``if not all_rels: continue``). The
unjudged share is pooled, as the authors' ``retrieval_stats.json``: unjudged retrieved pairs / retrieved
pairs, over the whole run. Like the authors' script, :func:`score_run` counts the retrieved pairs of a
skipped query in the denominator and none of them as unjudged; the tasks drop such queries when loading
(:mod:`disastir_mteb.data.published`), so on a DisastIR task the two readings give one number.

Grades may be fractions (a judge's mean vote such as 1.67, as the authors' scorer writes when no value is
most frequent): every formula takes real grades. Keys are opaque strings, ids or texts alike; nothing here
reads a file or knows mteb. :func:`ranking` turns a run's similarities into the ranked list the way
``trec_eval`` and mteb's ``mrr`` order it, so a score here and mteb's agree on ties.

**Keyed by text.** The authors look every grade up by the passage's TEXT: their judgements are a dict
{query text: {passage text: grade}} (a pair graded twice keeps the last grade), and their retrieved lists hold
texts. Where the corpus holds one judged text under several ids, that means: every retrieved copy earns the
text's gain (in the DCG, and as a hit of RR and Recall), but the ideal DCG and Recall's denominator count the
text once. :func:`key_by_text` turns id-keyed rankings and judgements into exactly these keys (one id stands
for each shared text), after which every formula above is the authors' own. Two consequences of their
definition are kept as they are: a query whose top ``k`` holds two copies of a judged text can score an NDCG
or a Recall above 1 (two hits of a text counted once in the ideal), and such copies are always tied (equal
texts, equal vectors), so :func:`ranking`'s tie rule decides which copy a cut at ``k`` keeps.

``gain``: the NDCG's gain of a grade, ``2**g - 1`` by default (:func:`exponential_gain`, the authors'); the task's
linear-gain variant passes the grade itself. RR and Recall ask only whether a grade is above 0.
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
    """The authors' metrics of one judged query (fractions in [0, 1]).

    Attributes:
        ndcg_zero_fill: NDCG@k, unjudged passages counted as grade 0.
        ndcg_unjudged_removed: NDCG@k of the top k with the unjudged passages removed.
        rr_zero_fill: reciprocal rank of the first passage graded above 0 in the top k.
        rr_unjudged_removed: the same in the top k with the unjudged passages removed.
        recall_zero_fill: passages graded above 0 in the top k / judged passages graded above 0.
        recall_unjudged_removed: the same with the unjudged passages removed (equal by construction).
        retrieved: passages in the top k (k, or fewer for a short ranking).
        unjudged: of those, the ones without a judgement.
    """

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
    """The authors' metrics of a run: per query, and their means over the judged queries.

    Attributes:
        per_query: query -> its scores, for every query of the run that has a judgement.
        ndcg_zero_fill: mean of :attr:`QueryScores.ndcg_zero_fill` (0 when no query was scored); and so on for
            the five other means.
        ndcg_unjudged_removed: mean NDCG@k, unjudged passages removed.
        mrr_zero_fill: mean reciprocal rank (MRR@k), zero fill.
        mrr_unjudged_removed: MRR@k, unjudged passages removed.
        recall_zero_fill: mean Recall@k, zero fill.
        recall_unjudged_removed: mean Recall@k, unjudged passages removed.
        retrieved_pairs: (query, passage) pairs in the top k of every query of the run, skipped ones included.
        unjudged_pairs: pairs of scored queries without a judgement.
        queries_skipped: queries of the run without any judgement (scored by no metric).
    """

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
        """Unjudged pairs / retrieved pairs, pooled over the run (the authors' ``unannotated_ratio``); 0 if none."""
        return self.unjudged_pairs / self.retrieved_pairs if self.retrieved_pairs else 0.0


def ranking(similarities: Mapping[str, float], top_k: int = TOP_K) -> list[str]:
    """The ``top_k`` passages of one query's run, best first, ties broken by passage id, the higher first.

    This is how ``trec_eval`` (so mteb's NDCG and recall) and mteb's ``mrr`` order a run, so metrics computed
    here on this list agree with mteb's on tied similarities too.

    Args:
        similarities: passage -> similarity (higher is better).
        top_k: how many to keep.
    """
    best = heapq.nlargest(top_k, similarities.items(), key=lambda item: (item[1], item[0]))
    return [doc_id for doc_id, _ in best]


def exponential_gain(grade: float) -> float:
    """``2**grade - 1``: the authors' gain (0, 1, 3, 7 for grades 0-3; 15, 31 for STS's 4 and 5)."""
    return 2.0 ** grade - 1.0


def _dcg(grades: Iterable[float], gain: Gain) -> float:
    """``sum_i gain(g_i) / log2(i + 1)`` over 1-based ranks ``i``.

    Added one term at a time from rank 1, as ``trec_eval`` adds them (``sum`` compensates its rounding from
    Python 3.12 on), so an NDCG here equals ``trec_eval``'s ``ndcg_cut`` of the same gains to the bit.
    """
    total = 0.0
    for rank, grade in enumerate(grades):
        total += gain(grade) / math.log2(rank + 2)
    return total


def key_by_text(top: Mapping[str, Sequence[str]], grades: Mapping[str, Mapping[str, float]],
                same_text: Mapping[str, str]) -> tuple[dict[str, list[str]], dict[str, dict[str, float]]]:
    """Id-keyed rankings and judgements keyed as the authors key them: by text (see the module docstring).

    Args:
        top: query -> its ranked passage ids, best first.
        grades: query -> {passage id: grade}, every copy of a judged text graded alike (as the data layer joins
            text-keyed judgements to ids).
        same_text: passage id -> the id that stands for its text, for every id whose text another id also holds
            (the data layer's record of a task's shared judged texts); an id not in it stands for itself.

    Returns:
        ``(top, grades)``: every ranked id replaced by the id standing for its text (a list may then hold one id
        twice: each copy earns the text's gain), and each query's judgements with one entry per text.
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
        return  # integer grades, as the data layer reads them: checked in C, a tenth of the loop below
    bad = [(doc, grade) for doc, grade in grades.items()
           if isinstance(grade, bool) or not isinstance(grade, int | float) or not math.isfinite(grade) or grade < 0]
    if bad:
        raise InvalidInput(f"{len(bad)} grade(s) are not finite numbers >= 0 (first: {bad[0][0]!r}: {bad[0][1]!r}); "
                           "a grade is a judgement on the intent's scale (0-3, STS 0-5), a fraction for a mean vote.")


def score_query(ranked: Sequence[str], grades: Mapping[str, float], top_k: int = TOP_K, *,
                gain: Gain = exponential_gain) -> QueryScores:
    """The authors' metrics of one query.

    Args:
        ranked: passage keys, best first (:func:`ranking` makes one from similarities); cut at ``top_k``.
        grades: passage key -> grade, every judgement of the query (grade 0 included); floats allowed.
        top_k: the cut-off (the authors' 10).
        gain: the NDCG's gain of a grade (default the authors' ``2**g - 1``); RR and recall do not read it.

    Raises:
        ValueError: ``grades`` is empty (the authors skip such a query: no metric is defined), or holds a grade
            that is negative, not finite or not a number; ``top_k`` below 1.
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
    """The authors' metrics of a run: each judged query's, their means, and the pooled unjudged share.

    Args:
        top: query key -> its ranked passage keys, best first (cut at ``top_k``).
        grades: query key -> {passage key: grade}, every judgement (grade 0 included); floats allowed. A query
            of ``top`` without judgements is skipped (counted in :attr:`RunScores.queries_skipped`); a judged
            query missing from ``top`` is not part of the run and is not scored, as in the authors' script,
            which iterates over the retrieved lists.
        top_k: the cut-off (the authors' 10).
        gain: the NDCG's gain of a grade (default the authors' ``2**g - 1``).

    Raises:
        ValueError: a grade that is negative, not finite or not a number; ``top_k`` below 1.
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

"""Quality control after AIR-Bench, on the judge's grades: a query is kept only if its own passages hold up.

AIR-Bench dropped every generated query whose positive the LLM judged not relevant, which raised its agreement with
a human-labelled benchmark (Spearman 0.70 to 0.82). Here the judge grades a query's seed passage and the passage
written with it like any pooled passage (never 3 by fiat); a query is dropped when either is graded below the
relevant grade, or when no pair of its pool is. The judge's verdict alone decides: no retriever filters queries, which
would favour the retrievers used.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from disastir_mteb.vocabulary.taxonomy import MAX_GRADE, Intent

__all__ = ["QC_REASONS", "RELEVANT_GRADE", "JudgedQuery", "quality_control"]

#: The lowest grade that counts as relevant: 2 of 0-3 ("relevant"), 3 of STS's 0-5 ("roughly equivalent").
RELEVANT_GRADE: Mapping[Intent, int] = {intent: 3 if MAX_GRADE[intent] == 5 else 2 for intent in Intent}
#: Why quality control drops a query, in the order the checks apply.
QC_REASONS = ("seed-below-relevant", "generated-below-relevant", "no-relevant-pair")


@dataclass(frozen=True)
class JudgedQuery:
    """A query's grades: passage text -> grade (None: the judge gave none), with its seed and generated passages."""

    intent: Intent
    seed: str
    generated: str | None
    grades: Mapping[str, float | None]


def _below(query: JudgedQuery, passage: str) -> bool:
    """Judged, and below relevant (a pair the judge could not grade is no evidence either way)."""
    grade = query.grades.get(passage)
    return grade is not None and grade < RELEVANT_GRADE[query.intent]


def quality_control(queries: Sequence[JudgedQuery], *, enabled: bool = True) -> tuple[list[str | None], Counter[str]]:
    """Each query's drop reason (None: kept) and the drops per reason.

    ``enabled`` False keeps every query: the study's comparison without this step.
    """
    verdicts: list[str | None] = []
    for query in queries:
        reason = None
        if enabled and _below(query, query.seed):
            reason = "seed-below-relevant"
        elif enabled and query.generated is not None and _below(query, query.generated):
            reason = "generated-below-relevant"
        elif enabled and not any(g is not None and g >= RELEVANT_GRADE[query.intent] for g in query.grades.values()):
            reason = "no-relevant-pair"
        verdicts.append(reason)
    return verdicts, Counter(reason for reason in verdicts if reason is not None)

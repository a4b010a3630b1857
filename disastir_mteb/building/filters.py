"""Cheap filters over written queries, each drop with its reason: the checks InPars made, no model needed.

A query with no readable answer, too short or too long, copied from its own passages, already written for this or
another task, or (where the server gave logprobs) written with a mean log-probability under the floor is dropped.
The first queries of each task that pass, in plan order, are kept; a task left short says so in the report.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from disastir_mteb.building.queries import WrittenQuery

__all__ = ["DROP_REASONS", "MAX_QUERY_WORDS", "MIN_QUERY_WORDS", "FilteredQuery", "filter_queries"]

#: InPars's floor: a query of fewer words is not a search.
MIN_QUERY_WORDS = 3
#: Above the longest slot the prompts ask for ("at least 150 words") with room to spare.
MAX_QUERY_WORDS = 300
#: Why a query is dropped, in the order the filters apply.
DROP_REASONS = ("unanswered", "too-short", "too-long", "copied", "duplicate", "low-logprob")


@dataclass(frozen=True)
class FilteredQuery:
    """A written query and why it was dropped (None: kept)."""

    query: WrittenQuery
    dropped: str | None


def _normal(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def _reason(query: WrittenQuery, seen: set[str], min_logprob: float | None) -> str | None:
    if query.written is None:
        return "unanswered"
    words = len(query.written.query.split())
    if words < MIN_QUERY_WORDS:
        return "too-short"
    if words > MAX_QUERY_WORDS:
        return "too-long"
    normal = _normal(query.written.query)
    sources = [query.plan.seed.text] + ([query.written.passage] if query.written.passage else [])
    if any(normal and normal in _normal(source) for source in sources):
        return "copied"
    if normal in seen:
        return "duplicate"
    if min_logprob is not None and query.logprob is not None and query.logprob < min_logprob:
        return "low-logprob"
    return None


def filter_queries(queries: Sequence[WrittenQuery], *,
                   min_logprob: float | None = None) -> tuple[list[FilteredQuery], Counter[str]]:
    """Every query with its verdict, in order, and the drops per reason; duplicates count across all tasks."""
    seen: set[str] = set()
    verdicts, drops = [], Counter()
    for query in queries:
        reason = _reason(query, seen, min_logprob)
        if reason is None:
            seen.add(_normal(query.written.query))  # type: ignore[union-attr]
        else:
            drops[reason] += 1
        verdicts.append(FilteredQuery(query, reason))
    return verdicts, drops

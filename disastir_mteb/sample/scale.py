"""How big a synthetic dataset is: :class:`SampleScale`, and the two named scales ``small`` and ``full``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FULL", "SCALES", "SMALL", "SampleScale"]


@dataclass(frozen=True)
class SampleScale:
    """How big a synthetic dataset is; ``judged_per_query=None`` means the paper's per-task counts."""

    name: str
    n_passages: int
    queries_per_task: int
    judged_per_query: int | None
    passage_words: int


# Small: 48 x 8 queries x 14 judged pairs stays < 3 MB (qrels repeat passage texts), for tests and the demo.
SMALL = SampleScale("small", n_passages=1500, queries_per_task=8, judged_per_query=14, passage_words=32)
FULL = SampleScale("full", n_passages=239_704, queries_per_task=200, judged_per_query=None, passage_words=120)
SCALES: dict[str, SampleScale] = {"small": SMALL, "full": FULL}

"""The top-k the shared pass filed per task, held by the search model until each task takes it.

Its own module so that the search model (which holds it) and the pass (which fills it) depend on it, not on each
other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mteb.types import RetrievalOutputType

__all__ = ["FiledSearches", "PrefetchKey"]

PrefetchKey = tuple[str, str, str, "tuple[str, str] | None"]  # task, split, subset, held corpus


class FiledSearches:
    """The top-k the shared pass filed per (task, split, subset, held corpus), until each task's search takes it."""

    def __init__(self) -> None:
        self._filed: dict[PrefetchKey, tuple[int, dict[str, dict[str, float]]]] = {}

    def file(self, key: PrefetchKey, top_k: int, rankings: dict[str, dict[str, float]]) -> None:
        """Keep ``rankings`` (``top_k`` deep) for the search of ``key``."""
        self._filed[key] = (top_k, rankings)

    def take(self, key: PrefetchKey, query_ids: Sequence[str], top_k: int) -> RetrievalOutputType | None:
        """The filed top-``top_k`` of ``query_ids`` (dropped from here), or None when the pass did not answer them."""
        ready = self._filed.pop(key, None)
        if ready is None or ready[0] < top_k or not set(query_ids) <= ready[1].keys():
            return None
        return {qid: dict(list(ready[1][qid].items())[:top_k]) for qid in query_ids}

    def holds(self, key: PrefetchKey, top_k: int) -> bool:
        """Whether a search of ``key`` at least ``top_k`` deep is filed."""
        ready = self._filed.get(key)
        return ready is not None and ready[0] >= top_k

    def forget(self, task_name: str) -> None:
        """Drop everything filed for ``task_name``."""
        for key in [key for key in self._filed if key[0] == task_name]:
            del self._filed[key]

    def clear(self) -> None:
        """Drop everything filed (the model computes other vectors now)."""
        self._filed.clear()

"""The 6 x 8 DisastIR score grid of one metric: per task, per intent, per category and overall, as the paper.

Intent score = mean of its 8 categories, category score = mean of its 6 intents, overall = mean of the 6 intent
means. A missing task leaves its row and column means undefined, never averaged over silently. A DisastIR-Test or
DevLite grid files its scores under the full set's task names, so every query set aggregates alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from disastir_mteb.results.metrics import MAIN_METRIC
from disastir_mteb.vocabulary.taxonomy import (
    ALL_TASK_NAMES,
    CATEGORIES,
    INTENTS,
    SPLITS,
    Category,
    Intent,
    Split,
    get_spec,
    task_name,
)

__all__ = ["ScoreGrid", "grid_from_results", "grids_by_split"]


def _mean(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(values) / len(values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ScoreGrid:
    """One metric's scores (fractions, e.g. NDCG@10 = 0.6229) keyed by task name."""

    scores: Mapping[str, float]

    def cell(self, intent: Intent, category: Category) -> float | None:
        """The score of one task, or None when it was not evaluated."""
        return self.scores.get(task_name(intent, category))

    def intent_mean(self, intent: Intent) -> float | None:
        """Mean over the 8 categories of one intent (None if any is missing)."""
        return _mean([self.cell(intent, c) for c in CATEGORIES])

    def category_mean(self, category: Category) -> float | None:
        """Mean over the 6 intents of one category (None if any is missing)."""
        return _mean([self.cell(i, category) for i in INTENTS])

    def overall(self) -> float | None:
        """Mean of the 6 intent means, as the paper's 'Avg' column."""
        return _mean([self.intent_mean(i) for i in INTENTS])

    def categories_held(self, intent: Intent) -> int:
        """How many of the intent's 8 categories the grid holds."""
        return sum(self.cell(intent, c) is not None for c in CATEGORIES)

    def partial_intent_mean(self, intent: Intent) -> float | None:
        """Mean over the categories of ``intent`` the grid holds; whoever shows it must say it is partial."""
        held = [score for c in CATEGORIES if (score := self.cell(intent, c)) is not None]
        return sum(held) / len(held) if held else None

    def partial_overall(self) -> float | None:
        """Mean of the :meth:`partial_intent_mean` of the intents held; :meth:`overall` when all 48 are held."""
        means = [mean for i in INTENTS if (mean := self.partial_intent_mean(i)) is not None]
        return sum(means) / len(means) if means else None

    def to_text(self, title: str | None = None) -> str:
        """A fixed-width table: intents as rows (paper order), categories as columns, with means."""
        title = f"{MAIN_METRIC.name} (x100)" if title is None else title
        def fmt(value: float | None) -> str:
            return f"{100 * value:7.2f}" if value is not None else "      -"

        width = max(len(title), 10)
        header = f"{title:<{width}}" + "".join(f"{c.value:>8}" for c in CATEGORIES) + f"{'Mean':>9}"
        rows = [header, "-" * len(header)]
        for intent in INTENTS:
            rows.append(f"{intent.value:<{width}}" + "".join(f" {fmt(self.cell(intent, c))}" for c in CATEGORIES)
                        + f"  {fmt(self.intent_mean(intent))}")
        rows.append("-" * len(header))
        rows.append(f"{'Mean':<{width}}" + "".join(f" {fmt(self.category_mean(c))}" for c in CATEGORIES)
                    + f"  {fmt(self.overall())}")
        missing = sum(1 for i in INTENTS for c in CATEGORIES if self.cell(i, c) is None)
        if missing:
            rows.append(f"{missing} of 48 tasks missing ('-'): their means are not computed.")
        return "\n".join(rows)


def grid_from_results(task_results: Iterable[object]) -> ScoreGrid:
    """A grid of the main score (NDCG@10) from mteb ``TaskResult`` objects, on the test split; full-set tasks only."""
    return grids_by_split(task_results).get(Split.full, ScoreGrid({}))


def grids_by_split(task_results: Iterable[object]) -> dict[Split, ScoreGrid]:
    """One grid per query set among mteb ``TaskResult`` objects, each keyed by the full set's task names."""
    scores: dict[Split, dict[str, float]] = {}
    for result in task_results:
        name = getattr(result, "task_name", "")
        if name in ALL_TASK_NAMES:
            spec = get_spec(name)
            scores.setdefault(spec.split, {})[spec.base.name] = float(result.get_score())  # type: ignore[attr-defined]
    return {split: ScoreGrid(scores[split]) for split in SPLITS if split in scores}

"""The 6 x 8 DisastIR score grid of one metric: per task, per intent, per category and overall, as the paper.

Intent score = mean of its 8 categories, category score = mean of its 6 intents, overall = mean of the 6 intent
means. A missing task leaves its row and column means undefined, never averaged over silently. A DisastIR-Test or
DevLite grid files its scores under the full set's task names, so every query set aggregates alike. A built
benchmark holds only some of the 48 tasks: its grid names them (``tasks``), and its means are over those.
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
    TASK_NAMES,
    Category,
    Intent,
    Split,
    get_spec,
    parse_built_task_name,
    task_name,
)

__all__ = ["ScoreGrid", "built_grids", "grid_from_results", "grids_by_split"]


def _mean(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(values) / len(values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ScoreGrid:
    """One metric's scores (fractions, e.g. NDCG@10 = 0.6229) keyed by task name.

    ``tasks``: the tasks of the benchmark the grid is of (a built one's, by the full set's names); None: all 48.
    """

    scores: Mapping[str, float]
    tasks: frozenset[str] | None = None

    def holds(self, intent: Intent, category: Category) -> bool:
        """Whether the benchmark has the task (every one of the 48 for DisastIR's)."""
        return self.tasks is None or task_name(intent, category) in self.tasks

    @property
    def task_count(self) -> int:
        """How many tasks the benchmark has: 48 for DisastIR's, fewer for a built one."""
        return len(TASK_NAMES) if self.tasks is None else len(self.tasks)

    def intents(self) -> list[Intent]:
        """The intents the benchmark has tasks of, in the paper's order."""
        return [i for i in INTENTS if any(self.holds(i, c) for c in CATEGORIES)]

    def categories(self) -> list[Category]:
        """The categories the benchmark has tasks of, in the paper's order."""
        return [c for c in CATEGORIES if any(self.holds(i, c) for i in INTENTS)]

    def cell(self, intent: Intent, category: Category) -> float | None:
        """The score of one task, or None when it was not evaluated."""
        return self.scores.get(task_name(intent, category))

    def intent_mean(self, intent: Intent) -> float | None:
        """Mean over the categories of one intent (the 8 of DisastIR's; None if any is missing or it has none)."""
        return _mean([self.cell(intent, c) for c in CATEGORIES if self.holds(intent, c)])

    def category_mean(self, category: Category) -> float | None:
        """Mean over the intents of one category (the 6 of DisastIR's; None if any is missing or it has none)."""
        return _mean([self.cell(i, category) for i in INTENTS if self.holds(i, category)])

    def overall(self) -> float | None:
        """Mean of the intent means (the 6 of DisastIR's), as the paper's 'Avg' column."""
        return _mean([self.intent_mean(i) for i in self.intents()])

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
        """A fixed-width table: intents as rows (paper order), categories as columns, with means.

        A built benchmark's shows the intents and categories it has tasks of.
        """
        title = f"{MAIN_METRIC.name} (x100)" if title is None else title
        def fmt(value: float | None) -> str:
            return f"{100 * value:7.2f}" if value is not None else "      -"

        intents, categories = self.intents(), self.categories()
        width = max(len(title), 10)
        header = f"{title:<{width}}" + "".join(f"{c.value:>8}" for c in categories) + f"{'Mean':>9}"
        rows = [header, "-" * len(header)]
        for intent in intents:
            rows.append(f"{intent.value:<{width}}" + "".join(f" {fmt(self.cell(intent, c))}" for c in categories)
                        + f"  {fmt(self.intent_mean(intent))}")
        rows.append("-" * len(header))
        rows.append(f"{'Mean':<{width}}" + "".join(f" {fmt(self.category_mean(c))}" for c in categories)
                    + f"  {fmt(self.overall())}")
        missing = sum(1 for i in INTENTS for c in CATEGORIES if self.holds(i, c) and self.cell(i, c) is None)
        if missing:
            rows.append(f"{missing} of {self.task_count} tasks missing ('-'): their means are not computed.")
        return "\n".join(rows)


def grid_from_results(task_results: Iterable[object]) -> ScoreGrid:
    """A grid of the main score (NDCG@10) from mteb ``TaskResult`` objects, on the test split; full-set tasks only."""
    return grids_by_split(task_results).get(Split.full, ScoreGrid({}))


def grids_by_split(task_results: Iterable[object]) -> dict[Split, ScoreGrid]:
    """One grid per query set among mteb ``TaskResult`` objects, each keyed by the full set's task names."""
    scores: dict[Split, dict[str, float]] = {}
    for result in task_results:
        name = getattr(result, "task_name", "")
        if name in ALL_TASK_NAMES:  # DisastIR's own: a built benchmark's are in built_grids
            spec = get_spec(name)
            scores.setdefault(spec.split, {})[spec.base.name] = float(result.get_score())  # type: ignore[attr-defined]
    return {split: ScoreGrid(scores[split]) for split in SPLITS if split in scores}


def built_grids(task_results: Iterable[object]) -> dict[str, ScoreGrid]:
    """One grid per built benchmark among mteb ``TaskResult`` objects (by its name), of the tasks it ran."""
    scores: dict[str, dict[str, float]] = {}
    for result in task_results:
        spec = parse_built_task_name(getattr(result, "task_name", ""))
        if spec is not None and spec.built is not None:
            scores.setdefault(spec.built, {})[spec.base.name] = float(result.get_score())  # type: ignore[attr-defined]
    return {name: ScoreGrid(found, tasks=frozenset(found)) for name, found in scores.items()}

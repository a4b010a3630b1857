"""A judge-completed NDCG@10 shown beside the official one: plain data in, report blocks and text out.

The completed score is a per-study estimate, never the official number. The results layer never imports the judge,
so the command line computes the numbers (:func:`disastir_mteb.judging.completed.completed_scores`) and hands them
here as a :class:`CompletedView`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from disastir_mteb.results.grid import ScoreGrid
from disastir_mteb.results.report_format import Block, Heading, Paragraph, Table, render_text
from disastir_mteb.vocabulary.taxonomy import CATEGORIES, INTENTS, TASK_NAMES, Intent, get_spec

__all__ = ["ESTIMATE_NOTE", "CompletedView", "completed_blocks", "completed_text"]

#: The sentence every completed score is shown with.
ESTIMATE_NOTE = ("The completed NDCG@10 is a per-study estimate (the published judgements plus one judge's labels "
                 "of this run's unjudged top-10 passages), not a leaderboard number: the official NDCG@10 counts "
                 "unjudged passages as zero and is the only score that result files, submit and the leaderboard "
                 "hold.")


@dataclass(frozen=True)
class CompletedView:
    """One result set's official and completed NDCG@10 per task, as fractions, with what the judges added.

    ``judges`` and ``agreement`` hold one line per judge, shown as they are.
    """

    folder: Path
    label: str
    official: Mapping[str, float]
    completed: Mapping[str, float]
    unjudged_before: Mapping[str, float]
    unjudged_after: Mapping[str, float]
    added: Mapping[str, int]
    judges: Sequence[str]
    store: str
    without_rankings: Sequence[str] = ()
    agreement: Sequence[str] = ()

    @property
    def tasks(self) -> list[str]:
        """The tasks with a completed score, in the paper's order."""
        order = {name: number for number, name in enumerate(TASK_NAMES)}
        return sorted(self.completed, key=lambda name: order.get(name, len(order)))

    def mean(self, values: Mapping[str, float], intent: Intent | None = None) -> float | None:
        """The mean of ``values`` over this view's tasks: one intent's (its categories held), or the overall."""
        grid = ScoreGrid({task: values[task] for task in self.tasks if task in values})
        return grid.partial_intent_mean(intent) if intent is not None else grid.partial_overall()

    def held(self, intent: Intent) -> int:
        """How many of the intent's 8 tasks have a completed score."""
        return sum(get_spec(task).intent is intent for task in self.tasks)

    def added_in(self, intent: Intent | None = None) -> int:
        """Judgements added to the tasks of ``intent`` (all tasks when None)."""
        return sum(n for task, n in self.added.items() if task in self.completed
                   and (intent is None or get_spec(task).intent is intent))


def _x100(value: float | None) -> str:
    return f"{100 * value:.2f}" if value is not None else "–"


def _signed(value: float | None) -> str:
    return f"{100 * value:+.2f}" if value is not None else "–"


def _share(value: float | None) -> str:
    return f"{100 * value:.1f} %" if value is not None else "–"


def _difference(a: float | None, b: float | None) -> float | None:
    return b - a if a is not None and b is not None else None


def _summary_table(view: CompletedView) -> Table:
    """Per intent and overall: official, completed, difference, judgements added, unjudged share before and after."""
    rows = []
    for intent in INTENTS:
        held = view.held(intent)
        if not held:
            continue
        official, completed = view.mean(view.official, intent), view.mean(view.completed, intent)
        name = intent.value if held == len(CATEGORIES) else f"{intent.value} ({held}/{len(CATEGORIES)})"
        rows.append([name, _x100(official), _x100(completed), _signed(_difference(official, completed)),
                     f"{view.added_in(intent):,}", _share(view.mean(view.unjudged_before, intent)),
                     _share(view.mean(view.unjudged_after, intent))])
    official, completed = view.mean(view.official), view.mean(view.completed)
    rows.append(["Overall", _x100(official), _x100(completed), _signed(_difference(official, completed)),
                 f"{view.added_in():,}", _share(view.mean(view.unjudged_before)),
                 _share(view.mean(view.unjudged_after))])
    return Table(["intent", "official NDCG@10 x100", "completed NDCG@10 x100", "difference", "judgements added",
                  "unjudged before", "unjudged after"], rows)


def _task_table(view: CompletedView) -> Table:
    rows = [[task, _x100(view.official.get(task)), _x100(view.completed[task]),
             _signed(_difference(view.official.get(task), view.completed[task])), f"{view.added.get(task, 0):,}",
             _share(view.unjudged_before.get(task)), _share(view.unjudged_after.get(task))] for task in view.tasks]
    return Table(["task", "official NDCG@10 x100", "completed NDCG@10 x100", "difference", "judgements added",
                  "unjudged before", "unjudged after"], rows)


def completed_blocks(view: CompletedView, *, per_task: bool = True) -> list[Block]:
    """One set's report section: the estimate's note, its judges, per intent and overall, and per task if asked."""
    judges = "; ".join(view.judges) if view.judges else "none (the store adds no judgement to these tasks)"
    reached = sum(1 for count in view.added.values() if count)
    blocks: list[Block] = [
        Heading(f"Completed NDCG@10 (estimate): {view.label}", 3),
        Paragraph(ESTIMATE_NOTE),
        Paragraph(f"Judgements from {view.store}: {view.added_in():,} added to {reached} of {len(view.tasks)} "
                  "task(s), "
                  f"never in place of a published grade. Judges: {judges}. Means are the paper's means of means "
                  "over the tasks shown (n/8: an intent with fewer tasks, partial)."),
        *(Paragraph(line) for line in view.agreement),
        _summary_table(view)]
    if per_task:
        blocks.append(_task_table(view))
    if view.without_rankings:
        blocks.append(Paragraph(f"No per-query rankings, so no completed score: {', '.join(view.without_rankings)}."))
    return blocks


def completed_text(views: Sequence[CompletedView]) -> str:
    """What ``compare --judgements`` adds: each set's per-intent official and completed NDCG@10, fixed width."""
    return render_text([block for view in views for block in completed_blocks(view, per_task=False)])

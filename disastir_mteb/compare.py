"""Two result sets side by side: the paper's exact-vs-ANN columns (Table 3), for any two runs.

Scores are NDCG@10 per task; an intent's score is the mean of its 8 categories and the overall
score the mean of the 6 intents, as in the paper, computed only where BOTH sets hold every task
(a missing task is shown as missing, never averaged over). Drop % = (A - B) / A x 100, the
paper's definition with A = exact and B = ANN. Recall@10 of B against A is, per query, the
share of A's top-10 passages that B also returns in its top-10 (averaged over queries, then
like the scores); it needs the per-query files ``disastir-mteb run`` writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from disastir_mteb.report import ScoreGrid
from disastir_mteb.results import ResultSet
from disastir_mteb.taxonomy import INTENTS, Intent

__all__ = ["Comparison", "compare_sets", "top10_recall"]

_SHORT = {Intent.Twitter: "TW"}  # the paper's Table 3 headings


def top10_recall(a: ResultSet, b: ResultSet, task: str) -> float | None:
    """Mean over queries of |top10(A) & top10(B)| / |top10(A)|, or None without both per-query files."""
    if not (a.has_per_query(task) and b.has_per_query(task)):
        return None
    reference, other = a.per_query(task).top10, b.per_query(task).top10
    shares = [len(set(docs) & set(other.get(qid, []))) / len(docs) for qid, docs in reference.items() if docs]
    return sum(shares) / len(shares) if shares else None


@dataclass(frozen=True)
class Comparison:
    """Scores of two result sets on the tasks both hold, and the top-10 recall of B against A."""

    a: ResultSet
    b: ResultSet
    a_grid: ScoreGrid
    b_grid: ScoreGrid
    recall_grid: ScoreGrid

    @property
    def names(self) -> tuple[str, str]:
        """Column names: ``Exact``/``ANN`` for an exact and an ANN run, else ``A``/``B``."""
        return ("Exact", "ANN") if not self.a.is_ann and self.b.is_ann else ("A", "B")

    @property
    def common_tasks(self) -> int:
        """Tasks held by both sets."""
        return len(self.a_grid.scores)

    def drop(self, a: float | None, b: float | None) -> float | None:
        """(A - B) / A x 100, or None when either is missing or A is 0."""
        return None if a is None or b is None or a == 0 else (a - b) / a * 100

    def to_text(self) -> str:
        """The paper's Table 3 row, then per intent: A, B, drop % and recall@10 of B against A."""
        first, second = self.names

        def pct(value: float | None, width: int = 8) -> str:
            return f"{100 * value:{width}.2f}" if value is not None else f"{'-':>{width}}"

        def plain(value: float | None, width: int = 8) -> str:
            return f"{value:{width}.2f}" if value is not None else f"{'-':>{width}}"

        def recall(value: float | None) -> str:
            return f"{value:11.3f}" if value is not None else f"{'-':>11}"

        a_all, b_all = self.a_grid.overall(), self.b_grid.overall()
        averages = ("Ex. Avg", "ANN Avg") if (first, second) == ("Exact", "ANN") else ("A Avg", "B Avg")
        lines = [f"{first}: {self.a.label}  [{self.a.folder}]", f"{second}: {self.b.label}  [{self.b.folder}]",
                 f"{self.common_tasks} of 48 tasks in both sets; NDCG@10 x100.", ""]
        heads = [_SHORT.get(intent, intent.value) for intent in INTENTS]
        lines.append("Table 3 format (intents of " + first + "):")
        lines.append(f"{'model':<28}" + "".join(f"{h:>8}" for h in heads)
                     + f"{averages[0]:>10}{averages[1]:>10}{'Drop %':>9}")
        name = self.a.model.split("/")[-1][:27]
        lines.append(f"{name:<28}" + "".join(pct(self.a_grid.intent_mean(i)) for i in INTENTS)
                     + pct(a_all, 10) + pct(b_all, 10) + plain(self.drop(a_all, b_all), 9))
        lines += ["", f"{'intent':<10}{first:>9}{second:>9}{'Drop %':>9}{'Recall@10':>11}"]
        for intent in INTENTS:
            a, b = self.a_grid.intent_mean(intent), self.b_grid.intent_mean(intent)
            lines.append(f"{intent.value:<10}{pct(a, 9)}{pct(b, 9)}{plain(self.drop(a, b), 9)}"
                         f"{recall(self.recall_grid.intent_mean(intent))}")
        lines.append(f"{'Avg':<10}{pct(a_all, 9)}{pct(b_all, 9)}{plain(self.drop(a_all, b_all), 9)}"
                     f"{recall(self.recall_grid.overall())}")
        if self.common_tasks < 48:
            lines.append(f"{48 - self.common_tasks} task(s) missing from one or both sets: "
                         "'-' marks means not computed.")
        if len(self.recall_grid.scores) < self.common_tasks:
            lines.append(f"Recall@10 needs per-query files (written by disastir-mteb run); "
                         f"{self.common_tasks - len(self.recall_grid.scores)} task(s) lack them.")
        return "\n".join(lines)


def compare_sets(a: ResultSet, b: ResultSet) -> Comparison:
    """Compare ``b`` with ``a`` (``a`` = the reference, e.g. the exact run) on the tasks both hold.

    Raises:
        ValueError: the sets share no DisastIR task.
    """
    common = sorted(set(a.scores) & set(b.scores))
    if not common:
        raise ValueError(f"{a.folder} and {b.folder} share no DisastIR task.")
    recalls = {task: recall for task in common if (recall := top10_recall(a, b, task)) is not None}
    return Comparison(a, b, ScoreGrid({t: a.scores[t] for t in common}), ScoreGrid({t: b.scores[t] for t in common}),
                      ScoreGrid(recalls))

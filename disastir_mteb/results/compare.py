"""Two result sets side by side: the paper's exact-vs-ANN columns (Table 3), for any two runs.

Scores are NDCG@10 per task; an intent's score is the mean of its 8 categories and the overall
score the mean of the 6 intents, as in the paper, computed only where BOTH sets hold every task
(a missing task is shown as missing, never averaged over). Drop % = (A - B) / A x 100, the
paper's definition with A = exact and B = ANN. Recall@10 of B against A is, per query, the
share of A's top-10 passages that B also returns in its top-10 (averaged over queries, then
like the scores). Per intent, B - A is tested on the paired per-query NDCG@10 of its 8 tasks
(:func:`~disastir_mteb.results.significance.paired_test`). Recall and tests need the per-query files
``disastir-mteb run`` writes.

Several models on each side (e.g. 30 models run exact and ANN) give one Table 3 row per model
and Kendall's tau between the two model rankings.

Both sets must be on one query set (full, DisastIR-Test or DisastIR-DevLite): sets pair by model, settings
(the search aside) and query set. Rankings across query sets (DevLite against the full set) are
:mod:`disastir_mteb.results.split_agreement`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from disastir_mteb.benchmark.taxonomy import CATEGORIES, INTENTS, Intent, task_name
from disastir_mteb.results.grid import ScoreGrid
from disastir_mteb.results.result_sets import ResultSet
from disastir_mteb.results.significance import PairedTest, kendall_tau, paired_test

__all__ = ["Comparison", "compare_sets", "pair_sets", "rankings_text", "top10_recall"]

_SHORT = {Intent.Twitter: "TW"}  # the paper's Table 3 headings


def top10_recall(a: ResultSet, b: ResultSet, task: str) -> float | None:
    """Mean over queries of |top10(A) & top10(B)| / |top10(A)|, or None without both per-query files."""
    if not (a.has_per_query(task) and b.has_per_query(task)):
        return None
    reference, other = a.per_query(task).top10, b.per_query(task).top10
    shares = [len(set(docs) & set(other.get(qid, []))) / len(docs) for qid, docs in reference.items() if docs]
    return sum(shares) / len(shares) if shares else None


def _label(result: ResultSet) -> str:
    """The readable label, marked when the scores come from generated data."""
    return f"{result.display_label} (synthetic data)" if result.synthetic else result.display_label


def _pct(value: float | None, width: int = 8) -> str:
    return f"{100 * value:{width}.2f}" if value is not None else f"{'-':>{width}}"


def _num(value: float | None, width: int = 8, digits: int = 2) -> str:
    return f"{value:{width}.{digits}f}" if value is not None and value == value else f"{'-':>{width}}"


@dataclass(frozen=True)
class Comparison:
    """Scores of two result sets on the tasks both hold, and the top-10 recall of B against A."""

    a: ResultSet
    b: ResultSet
    a_grid: ScoreGrid
    b_grid: ScoreGrid
    recall_grid: ScoreGrid
    _tests: dict[Intent | None, PairedTest | None] = field(default_factory=dict, repr=False, compare=False)

    @property
    def names(self) -> tuple[str, str]:
        """Column names: ``Exact``/``ANN`` for an exact and an ANN run, else ``A``/``B``."""
        return ("Exact", "ANN") if not self.a.is_ann and self.b.is_ann else ("A", "B")

    @property
    def common_tasks(self) -> int:
        """Tasks held by both sets."""
        return len(self.a_grid.scores)

    @staticmethod
    def drop(a: float | None, b: float | None) -> float | None:
        """(A - B) / A x 100, or None when either is missing or A is 0."""
        return None if a is None or b is None or a == 0 else (a - b) / a * 100

    def paired(self, intent: Intent | None = None) -> PairedTest | None:
        """B against A on the paired per-query scores of one intent's 8 tasks (all 48 for None).

        None when a task is missing from either set or lacks per-query files.
        """
        if intent not in self._tests:
            intents = INTENTS if intent is None else (intent,)
            names = [task_name(i, c) for i in intents for c in CATEGORIES]
            a_scores: list[float] = []
            b_scores: list[float] = []
            for name in names:
                if name not in self.a_grid.scores or not (self.a.has_per_query(name) and self.b.has_per_query(name)):
                    self._tests[intent] = None
                    return None
                first, second = self.a.per_query(name).ndcg_at_10, self.b.per_query(name).ndcg_at_10
                for qid in sorted(first.keys() & second.keys()):
                    a_scores.append(first[qid])
                    b_scores.append(second[qid])
            self._tests[intent] = paired_test(a_scores, b_scores) if a_scores else None
        return self._tests[intent]

    def table3_row(self) -> str:
        """One row in the paper's Table 3 columns: per-intent scores of A, both averages, drop %."""
        a_all, b_all = self.a_grid.overall(), self.b_grid.overall()
        name = self.a.model.split("/")[-1][:27]
        return (f"{name:<28}" + "".join(_pct(self.a_grid.intent_mean(i)) for i in INTENTS)
                + _pct(a_all, 10) + _pct(b_all, 10) + _num(self.drop(a_all, b_all), 9)
                + _num(self.recall_grid.overall(), 11, 3))

    def table3_header(self) -> str:
        """The heading line of :meth:`table3_row`."""
        first, second = self.names
        averages = ("Ex. Avg", "ANN Avg") if (first, second) == ("Exact", "ANN") else ("A Avg", "B Avg")
        heads = [_SHORT.get(intent, intent.value) for intent in INTENTS]
        return (f"{'model':<28}" + "".join(f"{h:>8}" for h in heads)
                + f"{averages[0]:>10}{averages[1]:>10}{'Drop %':>9}{'Recall@10':>11}")

    def to_text(self) -> str:
        """The Table 3 row, then per intent: A, B, drop %, recall@10, B - A with its 95% CI and p-value."""
        first, second = self.names
        lines = [f"{first}: {_label(self.a)}  [{self.a.folder}]", f"{second}: {_label(self.b)}  [{self.b.folder}]",
                 f"{self.common_tasks} of 48 tasks in both sets; NDCG@10 x100.", "",
                 f"Table 3 format (intents of {first}):", self.table3_header(), self.table3_row(), "",
                 f"{'intent':<10}{first:>9}{second:>9}{'Drop %':>9}{'Recall@10':>11}{'B - A':>9}"
                 f"{'95% CI':>18}{'p (1-sided)':>13}"]
        for intent in [*INTENTS, None]:
            a = self.a_grid.intent_mean(intent) if intent else self.a_grid.overall()
            b = self.b_grid.intent_mean(intent) if intent else self.b_grid.overall()
            recall = self.recall_grid.intent_mean(intent) if intent else self.recall_grid.overall()
            test = self.paired(intent) if a is not None and b is not None else None
            interval = (f"[{100 * test.ci_low:+.2f}, {100 * test.ci_high:+.2f}]" if test else "-")
            p_value = f"{test.p_value:.2g}{'*' if test.significant() else ' '}" if test else "-"
            lines.append(f"{intent.value if intent else 'Avg':<10}{_pct(a, 9)}{_pct(b, 9)}{_num(self.drop(a, b), 9)}"
                         f"{_num(recall, 11, 3)}{_num(100 * test.difference if test else None, 9)}{interval:>18}"
                         f"{p_value:>13}")
        lines.append("B - A: mean per-query NDCG@10 difference x100 with a paired bootstrap 95% CI; p: one-sided "
                     "Wilcoxon signed-rank in the observed direction (* below 0.05).")
        if self.common_tasks < 48:
            lines.append(f"{48 - self.common_tasks} task(s) missing from one or both sets: "
                         "'-' marks means not computed.")
        if len(self.recall_grid.scores) < self.common_tasks:
            lines.append(f"Recall@10 and the tests need per-query files (written by disastir-mteb run); "
                         f"{self.common_tasks - len(self.recall_grid.scores)} task(s) lack them.")
        return "\n".join(lines)


def compare_sets(a: ResultSet, b: ResultSet) -> Comparison:
    """Compare ``b`` with ``a`` (``a`` = the reference, e.g. the exact run) on the tasks both hold.

    Raises:
        ValueError: the sets are on different query sets, or share no DisastIR task.
    """
    if a.split is not b.split:
        raise ValueError(f"{a.folder} holds {a.benchmark} and {b.folder} {b.benchmark} results: compare_sets compares "
                         "two runs on one query set; for model rankings across query sets use split_agreement "
                         "(disastir-mteb compare with the two query sets' folders).")
    common = sorted(set(a.scores) & set(b.scores))
    if not common:
        raise ValueError(f"{a.folder} and {b.folder} share no DisastIR task.")
    recalls = {task: recall for task in common if (recall := top10_recall(a, b, task)) is not None}
    return Comparison(a, b, ScoreGrid({t: a.scores[t] for t in common}), ScoreGrid({t: b.scores[t] for t in common}),
                      ScoreGrid(recalls))


def _key(result: ResultSet) -> tuple[str, str, str]:
    """What pairs two sets: the model, its settings other than the search, and the query set."""
    settings = {k: v for k, v in result.experiment.items() if k != "disastir_search"}
    return result.model, repr(sorted(settings.items())), result.split.value


def pair_sets(first: Sequence[ResultSet], second: Sequence[ResultSet]) -> list[tuple[ResultSet, ResultSet]]:
    """Pairs (A, B) of the same model, settings (the search aside) and query set; one set each side pairs directly.

    Raises:
        ValueError: no pair could be formed, or a side holds two sets with the same model and settings.
    """
    if len(first) == 1 and len(second) == 1:
        return [(first[0], second[0])]
    by_key: dict[tuple[str, str, str], ResultSet] = {}
    for result in second:
        if _key(result) in by_key:
            raise ValueError(f"Two result sets of {result.display_label} ({by_key[_key(result)].folder} and "
                             f"{result.folder}) "
                             "on one side: pass folders that hold one run per model.")
        by_key[_key(result)] = result
    pairs = [(result, by_key[_key(result)]) for result in first if _key(result) in by_key]
    if not pairs:
        raise ValueError("No model appears on both sides with the same settings; nothing to compare.")
    return pairs


def rankings_text(comparisons: Sequence[Comparison]) -> str:
    """Table 3 rows for several models, then Kendall's tau between the A and B model rankings."""
    ordered = sorted(comparisons, key=lambda c: -(c.a_grid.overall() or -1.0))
    lines = [ordered[0].table3_header(), *(c.table3_row() for c in ordered)]
    for intent in [None, *INTENTS]:
        a_scores = {c.a.label: v for c in comparisons if (v := (c.a_grid.intent_mean(intent) if intent
                                                                 else c.a_grid.overall())) is not None}
        b_scores = {c.a.label: v for c in comparisons if (v := (c.b_grid.intent_mean(intent) if intent
                                                                 else c.b_grid.overall())) is not None}
        try:
            tau, n = kendall_tau(a_scores, b_scores)
        except ValueError as error:
            lines.append(f"Kendall's tau ({intent.value if intent else 'overall'}): {error}")
            continue
        lines.append(f"Kendall's tau between the model rankings ({intent.value if intent else 'overall'}, "
                     f"{n} models): {_num(tau, 0, 3).strip()}")
    return "\n".join(lines)

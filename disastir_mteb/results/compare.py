"""Two result sets side by side: the paper's exact-vs-ANN columns (Table 3), for any two runs.

Scores are means of means, as the paper's, over the tasks both sets hold; a mean over fewer tasks than the paper's
is marked ``†``, and why a cell is partial or empty is said once under the table. Drop % = (A - B) / A x 100, the
paper's definition with A = exact. Recall@10 of B against A and the paired tests need the per-query files, which
hold NDCG@10 only: with another metric no test is run, and the text says so rather than invent per-query scores.
Several pairs give one row each, and Kendall's tau between the A and B rankings of the rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from disastir_mteb.results.completed_view import CompletedView, completed_text
from disastir_mteb.results.grid import ScoreGrid
from disastir_mteb.results.metrics import MAIN_METRIC, Metric, get_metric
from disastir_mteb.results.pairing import Pairing, pair_sets
from disastir_mteb.results.per_query import DIGEST_KEY
from disastir_mteb.results.provenance import recorded_data
from disastir_mteb.results.result_sets import ResultSet, not_rescored
from disastir_mteb.results.significance import PairedTest, kendall_tau, paired_test
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import INTENTS, Intent, get_spec

__all__ = ["PARTIAL", "Comparison", "Pairing", "compare_sets", "pair_sets", "pairing_text", "rankings_text",
           "top10_recall"]  # Pairing and pair_sets are re-exported from pairing

#: Marks a mean over fewer tasks than the paper's (an intent over fewer than 8 categories, an overall over fewer
#: than 6 intents or incomplete ones).
PARTIAL = "†"
_SHORT = {Intent.Twitter: "TW"}  # the paper's Table 3 headings
_NO_TASK = "no task of {which} in {where}"


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


def _mean(grid: ScoreGrid, intent: Intent | None) -> float | None:
    """The grid's mean of ``intent`` over the categories it holds (overall over the intents held for None)."""
    return grid.partial_intent_mean(intent) if intent is not None else grid.partial_overall()


def _complete(grid: ScoreGrid, intent: Intent | None) -> bool:
    """Whether the grid's mean of ``intent`` (overall for None) is over every task it needs: the paper's mean."""
    return (grid.intent_mean(intent) if intent is not None else grid.overall()) is not None


def _cell(value: float | None, width: int, *, partial: bool = False, scale: float = 100, digits: int = 2) -> str:
    """A right-aligned number (``-`` for none), followed by ``†`` when partial or a space (columns stay aligned)."""
    if value is None or value != value:
        return f"{'-':>{width - 1}} "
    return f"{scale * value:{width - 1}.{digits}f}{PARTIAL if partial else ' '}"


def _head(text: str, width: int) -> str:
    """A column heading aligned with :func:`_cell`'s numbers."""
    return f"{text:>{width - 1}} "


@dataclass(frozen=True)
class Comparison:
    """Scores of two result sets on ``metric`` over the tasks both hold, and the top-10 recall of B against A."""

    a: ResultSet
    b: ResultSet
    a_grid: ScoreGrid
    b_grid: ScoreGrid
    recall_grid: ScoreGrid
    metric: Metric = MAIN_METRIC
    _tests: dict[Intent | None, PairedTest | None] = field(default_factory=dict, repr=False, compare=False)

    @property
    def names(self) -> tuple[str, str]:
        """Column names: ``Exact``/``ANN`` for an exact and an ANN run, else ``A``/``B``."""
        return ("Exact", "ANN") if not self.a.is_ann and self.b.is_ann else ("A", "B")

    @property
    def common_tasks(self) -> int:
        """Tasks held by both sets."""
        return len(self.a_grid.scores)

    @property
    def label(self) -> str:
        """The row's name: the model and both settings, e.g. ``all-MiniLM-L6-v2 — exact vs ANN (HNSW M=16, ef=64)``."""
        a_model, b_model = self.a.model.split("/")[-1], self.b.model.split("/")[-1]
        if a_model == self.b.model.split("/")[-1]:
            return f"{a_model} — {self.a.setting} vs {self.b.setting}"
        return f"{a_model} — {self.a.setting} vs {b_model} — {self.b.setting}"

    @staticmethod
    def drop(a: float | None, b: float | None) -> float | None:
        """(A - B) / A x 100, or None when either is missing or A is 0."""
        return None if a is None or b is None or a == 0 else (a - b) / a * 100

    def scores(self, intent: Intent | None = None) -> tuple[float | None, float | None]:
        """A's and B's mean of ``intent`` (overall for None) over the tasks both hold (partial where few are held)."""
        return _mean(self.a_grid, intent), _mean(self.b_grid, intent)

    def partial(self, intent: Intent | None = None) -> bool:
        """Whether the mean of ``intent`` (overall for None) covers fewer tasks than the paper's (marked ``†``)."""
        return _mean(self.a_grid, intent) is not None and not _complete(self.a_grid, intent)

    def paired(self, intent: Intent | None = None) -> PairedTest | None:
        """B against A on the paired per-query NDCG@10 of the intent's tasks (all for None); None if not computable."""
        if not self.metric.is_main:
            return None
        if intent not in self._tests:
            names = sorted(name for name in self.a_grid.scores if intent is None or get_spec(name).intent is intent)
            a_scores: list[float] = []
            b_scores: list[float] = []
            for name in names:
                if not (self.a.has_per_query(name) and self.b.has_per_query(name)):
                    self._tests[intent] = None
                    return None
                first, second = self.a.per_query(name).ndcg_at_10, self.b.per_query(name).ndcg_at_10
                for qid in sorted(first.keys() & second.keys()):
                    a_scores.append(first[qid])
                    b_scores.append(second[qid])
            self._tests[intent] = paired_test(a_scores, b_scores) if a_scores else None
        return self._tests[intent]

    def table3_row(self, width: int = 28, label: str | None = None) -> str:
        """One row in the paper's Table 3 columns: per-intent scores of A, both averages, drop %, recall@10."""
        a_all, b_all = self.scores()
        name = label or self.label
        return (f"{name:<{width}}" + "".join(_cell(self.scores(i)[0], 8, partial=self.partial(i)) for i in INTENTS)
                + _cell(a_all, 10, partial=self.partial()) + _cell(b_all, 10, partial=self.partial())
                + _cell(self.drop(a_all, b_all), 9, scale=1)
                + _cell(_mean(self.recall_grid, None), 11, scale=1, digits=3,
                        partial=not _complete(self.recall_grid, None) and bool(self.recall_grid.scores)))

    def table3_header(self, width: int = 28) -> str:
        """The heading line of :meth:`table3_row`."""
        return _table3_header(self.names, width)

    def notes(self) -> list[str]:
        """Why cells are partial or empty, each said once."""
        return _notes([self])

    def to_text(self) -> str:
        """The Table 3 row, then per intent: A, B, drop %, recall@10, B - A with its 95% CI and p-value."""
        first, second = self.names
        width = max(28, len(self.label) + 2)
        lines = [f"{first}: {_label(self.a)}  [{self.a.folder}]", f"{second}: {_label(self.b)}  [{self.b.folder}]",
                 f"{self.common_tasks} of {self.a_grid.task_count} tasks in both sets; {self.metric.name} x100.", "",
                 f"Table 3 format (intents of {first}):", self.table3_header(width), self.table3_row(width), "",
                 f"{'intent':<10}{_head(first, 9)}{_head(second, 9)}{_head('Drop %', 9)}{_head('Recall@10', 11)}"
                 f"{_head('B - A', 9)}{'95% CI':>18}{'p (1-sided)':>13}"]
        for intent in [*INTENTS, None]:
            a, b = self.scores(intent)
            partial = self.partial(intent)
            recall = _mean(self.recall_grid, intent)
            test = self.paired(intent) if a is not None and b is not None else None
            interval = (f"[{100 * test.ci_low:+.2f}, {100 * test.ci_high:+.2f}]" if test else "-")
            p_value = f"{test.p_value:.2g}{'*' if test.significant() else ' '}" if test else "-"
            lines.append(f"{intent.value if intent else 'Avg':<10}{_cell(a, 9, partial=partial)}"
                         f"{_cell(b, 9, partial=partial)}{_cell(self.drop(a, b), 9, scale=1)}"
                         f"{_cell(recall, 11, scale=1, digits=3, partial=not _complete(self.recall_grid, intent))}"
                         f"{_cell(test.difference if test else None, 9, partial=partial)}{interval:>18}{p_value:>13}")
        lines.append("B - A: mean per-query NDCG@10 difference x100 with a paired bootstrap 95% CI; p: one-sided "
                     "Wilcoxon signed-rank in the observed direction (* below 0.05)." if self.metric.is_main else
                     f"B - A and its tests: not run on {self.metric.name}; the per-query files they need hold "
                     f"{MAIN_METRIC.name} only ({MAIN_METRIC.key}, the default metric, has them).")
        return "\n".join(line.rstrip() for line in [*lines, *self.notes()])


def _table3_header(names: tuple[str, str], width: int) -> str:
    averages = ("Ex. Avg", "ANN Avg") if names == ("Exact", "ANN") else ("A Avg", "B Avg")
    heads = [_SHORT.get(intent, intent.value) for intent in INTENTS]
    return (f"{'pair' if names == ('A', 'B') else 'model':<{width}}" + "".join(_head(h, 8) for h in heads)
            + _head(averages[0], 10) + _head(averages[1], 10) + _head("Drop %", 9) + _head("Recall@10", 11))


def _notes(comparisons: Sequence[Comparison]) -> list[str]:
    """What the ``†`` and ``-`` of these comparisons mean, each reason said once."""
    notes = []
    partial = [c for c in comparisons if c.partial()]
    if partial:
        counts = {i: partial[0].a_grid.categories_held(i) for i in INTENTS}
        cover = ", ".join(f"{i.value} {n} of 8" for i, n in counts.items() if 0 < n < 8)
        intents = sum(n > 0 for n in counts.values())
        held = [f"here {cover}"] if cover else []  # empty when each intent held is whole (all 8 categories)
        which = f" ({'; '.join([*held, f'Avg over {intents} of 6 intents'])})" if len(comparisons) == 1 else ""
        notes.append(f"{PARTIAL}: mean over the tasks both sets hold, fewer than the paper's{which}; compare it only "
                     "with means over the same tasks.")
    empty = [i.value for i in INTENTS if all(c.a_grid.categories_held(i) == 0 for c in comparisons)]
    if empty:
        notes.append(f"'-' in {', '.join(empty)}: " + _NO_TASK.format(
            which="this intent" if len(empty) == 1 else "these intents", where="both sets") + ".")
    lacking = sum(c.common_tasks - len(c.recall_grid.scores) for c in comparisons)
    if lacking:
        notes.append(f"Recall@10 and the tests need per-query files (written by disastir-mteb run); {lacking} task(s) "
                     f"lack them{' in one set or both' if len(comparisons) == 1 else ' across the pairs'}.")
    shown = [(c.a, c.a_grid.scores) for c in comparisons] + [(c.b, c.b_grid.scores) for c in comparisons]
    if comparisons and (unchecked := not_rescored(shown, comparisons[0].metric)):
        notes.append(unchecked)
    return notes


def compare_sets(a: ResultSet, b: ResultSet, *, metric: str | Metric = MAIN_METRIC) -> Comparison:
    """Compare ``b`` with ``a`` (the reference, e.g. the exact run) on ``metric``, over the tasks both hold.

    Raises:
        ValueError: the sets are on different query sets, share no DisastIR task, record different data for a task
            both hold, or the metric is unknown or missing from a task file.
    """
    metric = get_metric(metric)
    if a.query_set != b.query_set:
        raise InvalidInput(f"{a.folder} holds {a.benchmark} and {b.folder} {b.benchmark} results: compare_sets "
                           "compares "
                           "two runs on one query set; for model rankings across query sets use split_agreement "
                           "(disastir-mteb compare with the two query sets' folders).")
    common = sorted(set(a.scores) & set(b.scores))
    if not common:
        raise InvalidInput(f"{a.folder} and {b.folder} share no DisastIR task: {a.display_label} holds "
                           f"{len(a.scores)}, {b.display_label} {len(b.scores)}, none of them the same; run the same "
                           "tasks on both (-t).")
    _refuse_other_data(a, b, common)
    a_scores, b_scores = a.scores_of(metric), b.scores_of(metric)
    recalls = {task: recall for task in common if (recall := top10_recall(a, b, task)) is not None}
    tasks = None if a.built is None else frozenset(a.scores) | frozenset(b.scores)  # a built benchmark's, held
    return Comparison(a, b, ScoreGrid({t: a_scores[t] for t in common}, tasks),
                      ScoreGrid({t: b_scores[t] for t in common}, tasks), ScoreGrid(recalls, tasks), metric)


def _other_data(a: ResultSet, b: ResultSet, task: str) -> tuple[str, str] | None:
    """What each set records of ``task``'s data where it differs, digests included; None if either records nothing."""
    x, y = recorded_data(a, task), recorded_data(b, task)
    if x is None or y is None:
        return None
    if x != y:
        return x, y
    da, db = ((s.task_data(task) or {}).get(DIGEST_KEY) for s in (a, b))
    if isinstance(da, str) and isinstance(db, str) and da != db:
        return f"{x} (files {da[:12]})", f"{y} (files {db[:12]})"
    return None


def _refuse_other_data(a: ResultSet, b: ResultSet, common: Sequence[str]) -> None:
    """Refuse two sets whose files record different data for a task both hold: the difference would measure the data."""
    differ = [(task, *found) for task in common if (found := _other_data(a, b, task)) is not None]
    if not differ:
        return
    task, x, y = differ[0]
    more = f" (and {len(differ) - 1} more task(s): {', '.join(t for t, _, _ in differ[1:])})" if len(differ) > 1 else ""
    raise InvalidInput(f"Refusing to compare {a.folder} with {b.folder}: {a.file_task(task)} was scored on {x} in the "
                       f"first and on {y} in the second{more}, so their difference measures the data, not the model or "
                       "the search; compare runs on the same data (rerun one set with the other's data).")


def _row_labels(comparisons: Sequence[Comparison]) -> list[str]:
    """Each row's :attr:`Comparison.label`, made unique (revision, then a number) where two read alike."""
    labels: list[str] = []
    for comparison in comparisons:
        label = comparison.label
        if sum(c.label == label for c in comparisons) > 1:
            label += f" @{comparison.a.revision[:8]}"
        unique, n = label, 2
        while unique in labels:
            unique, n = f"{label} #{n}", n + 1
        labels.append(unique)
    return labels


def _tau_lines(comparisons: Sequence[Comparison], labels: Sequence[str]) -> list[str]:
    """Kendall's tau between the rows' A and B rankings, overall and per intent; a reason once where it cannot be."""
    if len(comparisons) < 2:
        return [f"Kendall's tau: not computed: it compares the A and B rankings of several rows, and there is "
                f"{len(comparisons)}."]
    shared = set.intersection(*(set(c.a_grid.scores) for c in comparisons))
    lines = []
    if any(len(c.a_grid.scores) != len(shared) for c in comparisons):
        lines.append(f"Kendall's tau ranks the rows on the {len(shared)} task(s) every pair holds.")
    failed: dict[str, list[str]] = {}  # reason -> the scopes it stops, so that each reason is said once
    grids = [(ScoreGrid({t: c.a_grid.scores[t] for t in shared}), ScoreGrid({t: c.b_grid.scores[t] for t in shared}))
             for c in comparisons]
    for intent in [None, *INTENTS]:
        which = intent.value if intent else "overall"
        a_scores = {row: v for row, (a, _) in zip(labels, grids, strict=True) if (v := _mean(a, intent)) is not None}
        b_scores = {row: v for row, (_, b) in zip(labels, grids, strict=True) if (v := _mean(b, intent)) is not None}
        if len(a_scores) < 2:
            failed.setdefault("not computed: " + _NO_TASK.format(which="{which}", where="every pair"), []).append(which)
            continue
        tau, n = kendall_tau(a_scores, b_scores)
        if tau != tau:
            failed.setdefault("undefined: one side ranks every row the same", []).append(which)
            continue
        partial = " over the tasks held" if any(c.partial(intent) for c in comparisons) else ""
        lines.append(f"Kendall's tau between the A and B rankings ({which}, {n} rows{partial}): {tau:.3f}")
    for reason, scopes in failed.items():
        scope = "this intent" if len(scopes) == 1 else "these intents"
        lines.append(f"Kendall's tau ({', '.join(scopes)}): {reason.format(which=scope)}.")
    return lines


def rankings_text(comparisons: Sequence[Comparison]) -> str:
    """Table 3 rows (one per pair, labelled by model and settings), then Kendall's tau between the A and B rankings."""
    ordered = sorted(comparisons, key=lambda c: -(c.scores()[0] or -1.0))
    labels = _row_labels(ordered)
    width = max([28, *(len(label) + 2 for label in labels)])
    names = {c.names for c in ordered}
    lines = [_table3_header(names.pop() if len(names) == 1 else ("A", "B"), width),
             *(c.table3_row(width, label) for c, label in zip(ordered, labels, strict=True))]
    sets = {id(result): result for c in ordered for result in (c.a, c.b)}.values()
    if synthetic := sum(bool(result.synthetic) for result in sets):
        lines.append(f"{synthetic} of {len(sets)} sets ran on synthetic data: these numbers exercise the pipeline and "
                     "are not DisastIR results.")
    return "\n".join(line.rstrip() for line in [*lines, *_notes(ordered), *_tau_lines(ordered, labels)])


def pairing_text(pairing: Pairing, *, metric: str | Metric = MAIN_METRIC,
                 completed: Mapping[Path, CompletedView] | None = None) -> str:
    """What ``disastir-mteb compare`` prints for one query set: one pair in detail, several as ranked rows.

    ``completed`` maps a set's folder to its judge-completed NDCG@10, shown after the tables as an estimate.

    Raises:
        ValueError: no pair shares a task, or the metric is unknown or missing from a task file.
    """
    shared = [(a, b) for a, b in pairing.pairs if set(a.scores) & set(b.scores)]
    disjoint = [f"{a.display_label} and {b.display_label}" for a, b in pairing.pairs if (a, b) not in shared]
    if not shared:
        raise InvalidInput(f"No pair shares a DisastIR task ({'; '.join(disjoint)}); run the same tasks on both (-t).")
    comparisons = [compare_sets(a, b, metric=metric) for a, b in shared]
    lines = [comparisons[0].to_text() if len(comparisons) == 1 else rankings_text(comparisons)]
    if disjoint:
        lines.append(f"Left out, sharing no task: {'; '.join(disjoint)}.")
    if pairing.unpaired:
        lines.append(pairing.unpaired_text())
    views = [completed[result.folder] for pair in shared for result in pair if result.folder in (completed or {})]
    if views:
        lines.append(completed_text(list({id(view): view for view in views}.values())).rstrip("\n"))
    return "\n".join(lines)

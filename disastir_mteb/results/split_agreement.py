"""Do model rankings on a smaller query set agree with the full set's? Kendall's tau across query sets.

The DMRetriever authors develop on DisastIR-DevLite because its model rankings agree with the full set's;
:func:`split_agreement` measures the same for the user's models. Sets are paired across query sets by model and
settings (a set without a counterpart is listed, never ranked), each side ranks its models by the authors' means of
means, and Kendall's tau-b compares the rankings, overall and per intent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from disastir_mteb.results.metrics import MAIN_METRIC, Metric, get_metric
from disastir_mteb.results.result_sets import ResultSet, describe_setting
from disastir_mteb.results.significance import kendall_tau
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import INTENTS, SPLITS, Intent, Split, benchmark_name

__all__ = ["AUTHORS_TAU", "SplitAgreement", "split_agreement"]

#: What the DMRetriever authors report between DevLite and the full set (x100 NDCG@10 rankings of their models).
AUTHORS_TAU = "the DMRetriever authors report 0.90 overall and 0.73-0.91 per intent"

_COLUMN = {Split.full: "Full", Split.test: "Test", Split.devlite: "DevLite"}


def _key(result: ResultSet) -> tuple[str, str]:
    """What pairs sets across query sets: the model and all its settings."""
    return result.model, repr(sorted(result.experiment.items()))


def _score(result: ResultSet, intent: Intent | None, metric: Metric) -> float | None:
    """The set's intent mean of ``metric`` (its overall score for None), or None when a task it needs is missing."""
    grid = result.grid_of(metric)
    return grid.overall() if intent is None else grid.intent_mean(intent)


def _ranks(scores: dict[str, float]) -> dict[str, int]:
    """Competition ranks, best first (1, 2, 2, 4): a tie shares the better rank."""
    return {item: 1 + sum(other > score for other in scores.values()) for item, score in scores.items()}


@dataclass(frozen=True)
class SplitAgreement:
    """Model rankings on ``split`` against ``reference``: (set on ``split``, set on ``reference``) pairs, best first."""

    split: Split
    reference: Split
    pairs: tuple[tuple[ResultSet, ResultSet], ...]
    unpaired: tuple[ResultSet, ...] = ()
    metric: Metric = MAIN_METRIC

    def scores(self, intent: Intent | None = None) -> tuple[dict[str, float], dict[str, float]]:
        """Per pair, by the reference set's label: its score (overall for None) on ``split`` and on ``reference``.

        A pair whose score cannot be computed on a side (a task missing) is absent from that side.
        """
        first: dict[str, float] = {}
        second: dict[str, float] = {}
        for ours, theirs in self.pairs:
            if (value := _score(ours, intent, self.metric)) is not None:
                first[theirs.label] = value
            if (value := _score(theirs, intent, self.metric)) is not None:
                second[theirs.label] = value
        return first, second

    def tau(self, intent: Intent | None = None) -> tuple[float, int]:
        """Kendall's tau-b between the two model rankings (overall for None) and how many models both rank.

        Raises:
            ValueError: fewer than two models ranked on both query sets.
        """
        return kendall_tau(*self.scores(intent))

    def to_text(self) -> str:
        """The paired models' overall scores and ranks on both query sets, then Kendall's tau overall and per intent."""
        mine, theirs = _COLUMN[self.split], _COLUMN[self.reference]
        lines = [f"Model rankings on {benchmark_name(self.split)} and on {benchmark_name(self.reference)}: "
                 f"{len(self.pairs)} model setting(s) paired by model and setting. {self.metric.name} x100, averaged "
                 "as the authors do (intent = mean of its 8 categories, overall = mean of the 6 intents)."]
        synthetic = sum(1 for pair in self.pairs for result in pair if result.synthetic)
        if synthetic:
            lines.append(f"{synthetic} of {2 * len(self.pairs)} sets ran on synthetic data: these rankings exercise "
                         "the pipeline and are not DisastIR results.")
        first, second = self.scores()
        first_ranks, second_ranks = _ranks(first), _ranks(second)
        names = {b.label: f"{a.model.split('/')[-1]} — {describe_setting(a.experiment)}" for a, b in self.pairs}
        width = max([len("model"), *(len(name) for name in names.values())]) + 2
        lines.append(f"{'model':<{width}}{mine:>9}{theirs:>9}{mine + ' rank':>14}{theirs + ' rank':>12}")
        for label, name in names.items():
            cells = [f"{100 * scores[label]:9.2f}" if label in scores else f"{'-':>9}" for scores in (first, second)]
            ranks = [f"{ranking[label]:>{size}}" if label in ranking else f"{'-':>{size}}"
                     for ranking, size in ((first_ranks, 14), (second_ranks, 12))]
            lines.append(f"{name:<{width}}{''.join(cells)}{''.join(ranks)}")
        for intent in [None, *INTENTS]:
            which = intent.value if intent else "overall"
            try:
                tau, n = self.tau(intent)
            except ValueError as error:
                lines.append(f"Kendall's tau ({which}): {error}")
                continue
            value = f"{tau:.3f}" if tau == tau else "undefined (one side ranks every model the same)"
            lines.append(f"Kendall's tau between the model rankings ({which}, {n} models): {value}")
        if {self.split, self.reference} == {Split.devlite, Split.full}:
            ranked = "" if self.metric.is_main else f" (ranking by {MAIN_METRIC.name})"
            lines.append(f"For DevLite against the full set, {AUTHORS_TAU}{ranked}.")
        if self.unpaired:
            lines.append("Not paired (no run of the same model and setting on the other query set): "
                         + "; ".join(result.display_label for result in self.unpaired) + ".")
        return "\n".join(lines)


def _by_key(sets: Sequence[ResultSet], split: Split) -> dict[tuple[str, str], ResultSet]:
    """The sets on ``split`` by model and settings.

    Raises:
        ValueError: two sets of one model and setting on ``split`` (e.g. two revisions).
    """
    found: dict[tuple[str, str], ResultSet] = {}
    for result in sets:
        if result.split is not split:
            continue
        if _key(result) in found:
            raise InvalidInput(f"Two result sets of {result.display_label} ({found[_key(result)].folder} and "
                               f"{result.folder}): pass folders that hold one run per model and setting.")
        found[_key(result)] = result
    return found


def split_agreement(sets: Sequence[ResultSet], *, metric: str | Metric = MAIN_METRIC,
                    paired_only: bool = True) -> list[SplitAgreement]:
    """Each query set among ``sets`` other than the reference (the full set, else Test), ranked against it.

    ``paired_only=False`` returns empty pairings rather than refuse, for a caller that then compares within each.

    Raises:
        ValueError: the sets are on fewer than two query sets, a query set holds two sets of one model and
            setting, no model and setting has runs on two query sets (with ``paired_only``), or the metric is
            unknown or missing from a task file.
    """
    metric = get_metric(metric)
    for result in sets:  # a task file lacking the metric is named before anything is ranked
        result.scores_of(metric)
    present = [split for split in SPLITS if any(result.split is split for result in sets)]
    if len(present) < 2:
        raise InvalidInput(f"Rankings across query sets need result sets on two of them (e.g. DevLite and full); "
                           f"these are all on {', '.join(benchmark_name(s) for s in present) or 'none'}.")
    reference = Split.full if Split.full in present else Split.test
    theirs = _by_key(sets, reference)
    agreements = []
    for split in present:
        if split is reference:
            continue
        mine = _by_key(sets, split)
        pairs = [(mine[key], result) for key, result in theirs.items() if key in mine]
        pairs.sort(key=lambda pair: -(pair[1].grid_of(metric).overall() or -1.0))
        unpaired = [result for key, result in mine.items() if key not in theirs]
        unpaired += [result for key, result in theirs.items() if key not in mine]
        agreements.append(SplitAgreement(split, reference, tuple(pairs), tuple(unpaired), metric))
    if paired_only and not any(agreement.pairs for agreement in agreements):
        raise InvalidInput(f"No model has runs with the same settings on {benchmark_name(reference)} and on "
                           f"{', '.join(benchmark_name(a.split) for a in agreements)}; nothing to rank.")
    return agreements

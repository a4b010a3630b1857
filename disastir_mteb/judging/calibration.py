"""How well probabilities and scores agree with labels: ECE, Brier score, AUROC and Kendall's tau-b.

The measures DIRAS (Ni et al., 2024, Section 3.1) reports for a judge's relevance probability, and the rank
correlation TREC uses for system rankings. The ECE is written here (no library has it); the others are
scikit-learn's and SciPy's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from disastir_mteb.util.errors import InvalidInput

__all__ = ["ECE_BINS", "Calibration", "auroc", "brier_score", "calibration_of", "expected_calibration_error",
           "kendall_tau"]

#: Equal-width probability bins of the ECE.
ECE_BINS = 10


def _check(probabilities: Sequence[float], labels: Sequence[bool]) -> None:
    if len(probabilities) != len(labels):
        raise InvalidInput(f"{len(probabilities)} probabilities for {len(labels)} labels; each pair needs both.")


def expected_calibration_error(probabilities: Sequence[float], labels: Sequence[bool], *,
                               bins: int = ECE_BINS) -> float | None:
    """ECE: per equal-width bin, the gap between mean probability and share relevant, weighted; None without pairs."""
    _check(probabilities, labels)
    if not probabilities:
        return None
    groups: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for p, label in zip(probabilities, labels, strict=True):
        groups[min(int(p * bins), bins - 1)].append((p, label))
    n = len(probabilities)
    gap = sum(len(group) / n * abs(sum(p for p, _ in group) / len(group) - sum(y for _, y in group) / len(group))
              for group in groups if group)
    return round(gap, 12)


def brier_score(probabilities: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Mean of ``(p - y)**2`` (scikit-learn's ``brier_score_loss``), 0 is perfect; None without pairs."""
    from sklearn.metrics import brier_score_loss

    _check(probabilities, labels)
    if not probabilities:
        return None
    return float(brier_score_loss([bool(y) for y in labels], list(probabilities), pos_label=True))


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """P(a relevant pair scores above an irrelevant one), ties half (0.5 is chance); None unless both classes occur."""
    from sklearn.metrics import roc_auc_score

    _check(scores, labels)
    if len(set(map(bool, labels))) < 2:
        return None
    return float(roc_auc_score([bool(y) for y in labels], list(scores)))


def kendall_tau(first: Sequence[float], second: Sequence[float]) -> float | None:
    """Kendall's tau-b (SciPy's) of two scorings of the same items, so ties in either do not count as agreement.

    None for fewer than two items or a ranking of ties only; rounded to 12 decimals as the ECE is (SciPy gives
    0.9999999999999999 for two rankings that agree).
    """
    from scipy.stats import kendalltau

    if len(first) != len(second):
        raise InvalidInput(f"{len(first)} and {len(second)} scores; tau compares the same items.")
    if len(first) < 2:
        return None
    tau = float(kendalltau(list(first), list(second)).statistic)
    return None if math.isnan(tau) else round(tau, 12)


@dataclass(frozen=True)
class Calibration:
    """A judge's P(relevant) against the published relevance; its expected and hard grades against the published."""

    pairs: int
    ece: float | None
    brier: float | None
    auroc: float | None
    tau_expected: float | None
    tau_hard: float | None

    def record(self) -> dict[str, float | int | None]:
        """As JSON, for the store."""
        return {"pairs": self.pairs, "ece": self.ece, "brier": self.brier, "auroc": self.auroc,
                "tau_expected": self.tau_expected, "tau_hard": self.tau_hard}


def calibration_of(rows: Sequence[tuple[str, int, float, float, float]]) -> Calibration | None:
    """The calibration of ``rows`` (intent, published grade, hard grade, expected grade, P(relevant)); None if empty.

    Relevant is a published grade above 0; the taus are per intent (one scale each), then averaged, as the kappas are.
    """
    if not rows:
        return None
    probabilities = [p for *_, p in rows]
    labels = [published > 0 for _, published, *_ in rows]

    def tau_of(column: int) -> float | None:
        values = []
        for intent in sorted({row[0] for row in rows}):
            mine = [row for row in rows if row[0] == intent]
            if (tau := kendall_tau([row[1] for row in mine], [row[column] for row in mine])) is not None:
                values.append(tau)
        return sum(values) / len(values) if values else None

    return Calibration(len(rows), expected_calibration_error(probabilities, labels),
                       brier_score(probabilities, labels), auroc(probabilities, labels), tau_of(3), tau_of(2))

"""Is a difference real? Paired tests on per-query scores and rank agreement between result sets.

- One-sided Wilcoxon signed-rank test on paired per-query NDCG@10, as the DMRetriever paper
  tests its models against baselines; the side is the direction of the observed mean difference.
- A paired bootstrap 95% interval of the mean difference (queries resampled with replacement).
- Kendall's tau between the model rankings of two result sets (exact vs ANN, a subset vs all).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from disastir_mteb.util.errors import InvalidInput

__all__ = ["PairedTest", "kendall_tau", "paired_test"]


@dataclass(frozen=True)
class PairedTest:
    """A paired comparison of B against A over ``n`` queries: means, the one-sided p-value and a 95% interval.

    ``p_value`` tests the observed direction (B > A when ``mean_b >= mean_a``), 1.0 when every pair is tied;
    ``ci_low`` and ``ci_high`` bound ``mean_b - mean_a``.
    """

    n: int
    mean_a: float
    mean_b: float
    p_value: float
    ci_low: float
    ci_high: float

    @property
    def difference(self) -> float:
        """``mean_b - mean_a``."""
        return self.mean_b - self.mean_a

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether the one-sided test rejects "no difference" at ``alpha``."""
        return self.p_value < alpha


def paired_test(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0) -> PairedTest:
    """Wilcoxon signed-rank (one-sided, in the observed direction) and a paired bootstrap interval.

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    from scipy.stats import wilcoxon

    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if x.shape != y.shape or x.size == 0:
        raise InvalidInput(f"A paired test needs two equally long, non-empty score lists; got {x.size} and {y.size}.")
    differences = y - x
    if np.all(differences == 0):
        p_value = 1.0
    else:
        alternative = "greater" if differences.mean() >= 0 else "less"
        p_value = float(wilcoxon(y, x, alternative=alternative, zero_method="wilcox").pvalue)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, 256):  # blocks keep memory flat for 9,600 queries
        stop = min(resamples, start + 256)
        means[start:stop] = differences[rng.integers(0, x.size, (stop - start, x.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return PairedTest(int(x.size), float(x.mean()), float(y.mean()), p_value, float(low), float(high))


def kendall_tau(scores_x: Mapping[str, float], scores_y: Mapping[str, float]) -> tuple[float, int]:
    """Kendall's tau-b between two rankings of the same items (models), and how many items both hold.

    The tau is NaN when one ranking is constant (every model tied).

    Raises:
        ValueError: fewer than two items in common.
    """
    from scipy.stats import kendalltau

    common = sorted(set(scores_x) & set(scores_y))
    if len(common) < 2:
        raise InvalidInput(f"Kendall's tau needs at least two models in both result sets; found {len(common)}.")
    tau = kendalltau([scores_x[m] for m in common], [scores_y[m] for m in common]).statistic
    return float(tau), len(common)

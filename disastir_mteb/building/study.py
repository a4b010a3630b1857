"""Does a built benchmark rank models as a reference does? Kendall's tau and Spearman, with a bootstrap interval.

The papers validate their benchmarks so: DisastIR ranked 30 models on LLM-written and expert-written queries (tau
0.93); AIR-Bench ranked 18 systems on its regenerated MS MARCO and on the human-labelled one (Spearman 0.82 with its
quality control, 0.70 without). A study here scores each model on two benchmarks from their per-query scores and
resamples the queries of both (1,000 times, seeded) for a 95 % interval on each coefficient.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from disastir_mteb.results.significance import kendall_tau
from disastir_mteb.util.errors import InvalidInput

__all__ = ["PAPER_FIGURES", "RankAgreement", "rank_agreement"]

#: What the papers measured, printed beside a study's figures.
PAPER_FIGURES = {"DisastIR, LLM vs expert queries (Kendall's tau)": 0.9264,
                 "AIR-Bench, with quality control (Spearman)": 0.8204,
                 "AIR-Bench, without quality control (Spearman)": 0.7028}

#: model -> query -> score (NDCG@10), of one benchmark.
PerQuery = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class RankAgreement:
    """Two benchmarks' rankings of the same models, and how well they agree."""

    models: tuple[str, ...]
    reference: Mapping[str, float]
    built: Mapping[str, float]
    tau: float
    spearman: float
    tau_interval: tuple[float, float]
    spearman_interval: tuple[float, float]

    def as_dict(self) -> dict[str, object]:
        """The study as JSON holds it (NaN as null)."""
        return {"models": list(self.models), "reference": {m: _rounded(v) for m, v in self.reference.items()},
                "built": {m: _rounded(v) for m, v in self.built.items()}, "kendall_tau": _rounded(self.tau),
                "kendall_tau_interval": [_rounded(v) for v in self.tau_interval],
                "spearman": _rounded(self.spearman),
                "spearman_interval": [_rounded(v) for v in self.spearman_interval], "papers": PAPER_FIGURES}

    def describe(self) -> str:
        """One paragraph: the coefficients, their intervals, the papers' figures beside them."""
        papers = "; ".join(f"{name}: {value:.2f}" for name, value in PAPER_FIGURES.items())
        return (f"{len(self.models)} models: Kendall's tau {self.tau:.3f} (95 % interval {self.tau_interval[0]:.3f} "
                f"to {self.tau_interval[1]:.3f}), Spearman {self.spearman:.3f} ({self.spearman_interval[0]:.3f} to "
                f"{self.spearman_interval[1]:.3f}). The papers: {papers}.")


def _rounded(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def _means(per_query: PerQuery, models: Sequence[str], draws: Mapping[str, Sequence[str]] | None = None
           ) -> dict[str, float]:
    means = {}
    for model in models:
        scores = per_query[model]
        queries = draws[model] if draws is not None else list(scores)
        means[model] = math.fsum(scores[q] for q in queries) / len(queries)
    return means


def _spearman(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    from scipy.stats import spearmanr

    common = sorted(a)
    return float(spearmanr([a[m] for m in common], [b[m] for m in common]).statistic)


def _interval(values: list[float]) -> tuple[float, float]:
    finite = sorted(v for v in values if not math.isnan(v))
    if not finite:
        return (math.nan, math.nan)
    return finite[int(0.025 * (len(finite) - 1))], finite[math.ceil(0.975 * (len(finite) - 1))]


def rank_agreement(a: PerQuery, b: PerQuery, *, resamples: int = 1000, seed: int = 0) -> RankAgreement:
    """How the models both benchmarks scored rank on each (``a`` the reference), from each model's per-query scores.

    Raises:
        ValueError: fewer than three models in common, or a model with no query scored.
    """
    models = tuple(sorted(set(a) & set(b)))
    if len(models) < 3:
        raise InvalidInput(f"A ranking study needs at least three models scored on both benchmarks; found "
                           f"{len(models)} ({', '.join(models) or 'none'}).")
    empty = [m for m in models if not a[m] or not b[m]]
    if empty:
        raise InvalidInput(f"{empty[0]} has no per-query score on one of the benchmarks; run it on both first.")
    scores_a, scores_b = _means(a, models), _means(b, models)
    rng = random.Random(seed)
    queries_a = sorted(set.intersection(*(set(a[m]) for m in models)))
    queries_b = sorted(set.intersection(*(set(b[m]) for m in models)))
    taus, rhos = [], []
    for _ in range(resamples):
        draw_a = [rng.choice(queries_a) for _ in queries_a]
        draw_b = [rng.choice(queries_b) for _ in queries_b]
        mean_a = _means(a, models, dict.fromkeys(models, draw_a))
        mean_b = _means(b, models, dict.fromkeys(models, draw_b))
        taus.append(kendall_tau(mean_a, mean_b)[0])
        rhos.append(_spearman(mean_a, mean_b))
    return RankAgreement(models, scores_a, scores_b, kendall_tau(scores_a, scores_b)[0],
                         _spearman(scores_a, scores_b), _interval(taus), _interval(rhos))

"""The one place the runner makes mteb's per-task scoring cheaper, number for number.

mteb 2.26 scores a retrieval task with ``calculate_retrieval_scores``, and most of that time is not
scoring. Its abstention metrics (``nAUC_*``: 90 per task, each the area under two curves) call
scikit-learn's ``auc`` 180 times per task, 8,640 times for the 48 tasks, and each call spends about 95% of its time
in scikit-learn's argument checks (``validate_params``, then ``column_or_1d`` through narwhals'
dataframe detection) and 5% in the trapezoid it computes. Then ``ResultCache.save_to_cache``, which
mteb calls twice per task, reads five package versions from the installed metadata every time.
mteb offers no setting for either, so while :func:`faster_scoring` is active:

1. ``mteb._evaluators.retrieval_metrics.auc`` is :func:`exact_auc`: for what mteb passes (two 1-D
   float64 arrays of one length, x not decreasing) it returns what scikit-learn's ``auc`` returns,
   through the same trapezoid function (``sklearn.metrics._ranking.trapezoid``), without the checks;
   any other input goes to scikit-learn's ``auc`` itself. ``sklearn.config_context(
   skip_parameter_validation=True)`` would skip only the first of the two checks (about a fifth).
2. ``mteb.cache.result_cache._get_package_versions`` answers from one reading taken on entry.

Both give the same bytes in every result file (``tests/test_scoring_speed.py`` compares every metric
of 48 tasks with plain ``mteb.evaluate``). Everything is restored on exit; nested use is fine. A
name a newer mteb or scikit-learn no longer has is left alone (that step is skipped, scoring is as
slow as mteb's own), and :func:`missing` lists it, for the canary test. The names are checked on the mteb
releases of ``CHECKED_ON`` (:mod:`disastir_mteb.util.mteb_internals`); the change that would make this module
unnecessary is written up for mteb in ``docs/upstream/scoring.md``.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import Any

import numpy as np

from disastir_mteb.util.patching import missing_names

logger = logging.getLogger(__name__)

__all__ = ["REQUIRED", "exact_auc", "faster_scoring", "missing"]

#: module -> the names used from it. The canary test checks each.
REQUIRED: Mapping[str, tuple[str, ...]] = {
    "mteb._evaluators.retrieval_metrics": ("auc", "nauc"),
    "mteb.cache.result_cache": ("_get_package_versions",),
    "sklearn.metrics._ranking": ("auc", "trapezoid"),
}


def missing() -> list[str]:
    """``module.name`` for each name of :data:`REQUIRED` that is not there (empty when all are)."""
    return missing_names(REQUIRED)


def exact_auc(x: Any, y: Any, *, original: Callable[[Any, Any], float] | None = None) -> float:
    """Area under the curve ``y(x)`` by the trapezoidal rule: scikit-learn's ``auc``, bit for bit, minus its checks.

    The fast path takes what mteb's ``nauc`` passes: ``x`` and ``y`` plain 1-D float64 NumPy arrays of
    one length (at least 2), ``x`` never decreasing (mteb's abstention rates 0.0, 0.1, ..., 0.9). There
    scikit-learn's checks change nothing (``column_or_1d`` hands the values on as they are, the
    direction is +1) and its value is ``float(trapezoid(y, x))`` with scikit-learn's own ``trapezoid``
    (SciPy's), which is what this returns. Anything else (lists, another dtype, a decreasing ``x``, a
    memory map) goes to ``original``, so its result and its errors are scikit-learn's.

    Args:
        x: the abscissae.
        y: the curve's values at ``x``.
        original: the ``auc`` to defer to (default: ``sklearn.metrics.auc``).

    Returns:
        The area, a Python float.
    """
    ranking = _sklearn_ranking()
    if (type(x) is np.ndarray and type(y) is np.ndarray and x.dtype == np.float64 and y.dtype == np.float64
            and x.ndim == 1 and x.shape == y.shape and x.shape[0] >= 2 and not np.any(np.diff(x) < 0)):
        return float(ranking.trapezoid(y, x))
    return (original or ranking.auc)(x, y)


@functools.cache
def _sklearn_ranking() -> Any:
    return importlib.import_module("sklearn.metrics._ranking")


@contextmanager
def _set(module: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


@contextmanager
def faster_scoring() -> Iterator[None]:
    """Score and save through mteb without its repeated checks and metadata reads (see the module)."""
    lost = missing()
    if lost:
        logger.debug("Scoring at mteb's own speed for what is missing: %s.", ", ".join(lost))
    with ExitStack() as stack:
        if not any(name.startswith(("mteb._evaluators", "sklearn")) for name in lost):
            metrics = importlib.import_module("mteb._evaluators.retrieval_metrics")
            stack.enter_context(_set(metrics, "auc", functools.partial(exact_auc, original=metrics.auc)))
        if not any(name.startswith("mteb.cache") for name in lost):
            result_cache = importlib.import_module("mteb.cache.result_cache")
            versions = result_cache._get_package_versions()
            stack.enter_context(_set(result_cache, "_get_package_versions", lambda: dict(versions)))
        yield

"""The one place the runner makes mteb's per-task scoring cheaper, number for number.

While :func:`faster_scoring` is active, mteb's ``auc`` is :func:`exact_auc` (scikit-learn's without its argument
checks, which take most of the scoring time) and ``_get_package_versions`` answers from one reading. Result files
keep the same bytes; a name a newer library lacks is left alone and listed by :func:`missing`. Names checked on
the releases of ``CHECKED_ON`` (:mod:`disastir_mteb.util.mteb_internals`); the fix proposed to mteb is
``docs/upstream/scoring.md``.
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
    """Area under ``y(x)`` by the trapezoidal rule: scikit-learn's ``auc``, bit for bit, minus its checks.

    The fast path takes what mteb's ``nauc`` passes (1-D float64 arrays of one length >= 2, ``x`` not decreasing);
    anything else goes to ``original`` (default ``sklearn.metrics.auc``), so its result and errors are scikit-learn's.
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

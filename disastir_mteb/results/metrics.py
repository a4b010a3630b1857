"""The metrics of a DisastIR result file: mteb's keys, the names people read, and the range each lies in.

A metric is named by its key in a task file's score block (``recall_at_100``); people read the name derived from
it by one rule, ``<family>_at_<k>[_<variant>]`` -> ``<Family>@<k> [(<variant>)]`` (``NDCG@10 (linear gain)``).
A new family of mteb's costs one line in :data:`FAMILIES`, and every report, figure and comparison can show it.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.metadata import MAIN_SCORE_KEY

__all__ = ["FAMILIES", "MAIN_METRIC", "VARIANTS", "Metric", "get_metric", "held_metrics", "metric_range",
           "missing_metric"]

#: mteb's metric families (``<family>_at_<k>``) and how people write them: one line per family.
FAMILIES: Mapping[str, str] = MappingProxyType({
    "ndcg": "NDCG",
    "map": "MAP",
    "recall": "Recall",
    "precision": "Precision",
    "mrr": "MRR",
    "hit_rate": "Hit rate",
    "cv_recall": "CV recall",
    "unjudged": "Unjudged",  # the plugin's share of unjudged passages in the top k (tasks.retrieval)
})
#: Variants a key may end in (``ndcg_at_10_linear_gain``), and how people read them.
VARIANTS: Mapping[str, str] = MappingProxyType({
    "exponential_gain": "exponential gain",
    "linear_gain": "linear gain",
    "unjudged_removed": "unjudged removed",  # the authors' second variant: unjudged passages out of the top k
})
#: Fractions named otherwise; ``main_score`` is :data:`MAIN_METRIC` under mteb's generic name.
_OTHER_FRACTIONS: Mapping[str, str] = MappingProxyType({"accuracy": "Accuracy"})
#: The deepest rank each of those reads (mteb's ``accuracy`` is its Recall@1: ``make_score_dict``).
_OTHER_CUTOFFS: Mapping[str, int] = MappingProxyType({"accuracy": 1})

_FAMILY_KEY = re.compile(rf"(?P<family>{'|'.join(sorted(FAMILIES, key=len, reverse=True))})_at_(?P<k>\d+)"
                         rf"(?:_(?P<variant>{'|'.join(VARIANTS)}))?")
_NAUC = re.compile(r"nauc_\w+")
_READABLE = re.compile(r"(?P<family>[A-Za-z ]+)@(?P<k>\d+)")  # what a person may type instead of the key
_MAIN_KEY = "main_score"


@dataclass(frozen=True)
class Metric:
    """One metric of a task file's score block: mteb's ``key`` and the ``name`` people read; see :func:`get_metric`.

    Examples:
        >>> get_metric("recall_at_100")
        Metric(key='recall_at_100', name='Recall@100')
    """

    key: str
    name: str

    @property
    def cutoff(self) -> int:
        """The deepest rank the metric reads: ``k`` of ``<family>_at_<k>``, 1 for ``accuracy`` (mteb's Recall@1)."""
        found = _FAMILY_KEY.fullmatch(self.key)
        return int(found["k"]) if found else _OTHER_CUTOFFS[self.key]

    @property
    def is_main(self) -> bool:
        """Whether this is DisastIR's main score (:data:`MAIN_METRIC`): the one published and kept per query."""
        return self == MAIN_METRIC


def _readable(key: str) -> str | None:
    """``recall_at_100`` -> ``Recall@100``, ``ndcg_at_10_linear_gain`` -> ``NDCG@10 (linear gain)``; else None."""
    if key in _OTHER_FRACTIONS:
        return _OTHER_FRACTIONS[key]
    found = _FAMILY_KEY.fullmatch(key)
    if found is None:
        return None
    variant = found["variant"]
    return f"{FAMILIES[found['family']]}@{found['k']}" + (f" ({VARIANTS[variant]})" if variant else "")


def _main_metric() -> Metric:
    key = MAIN_SCORE_KEY
    name = _readable(key)
    if name is None:  # task_metadata/dataset.json names a main score this vocabulary does not know
        raise RuntimeError(f"DisastIR's main score {key!r} (task_metadata/dataset.json) is not a metric of "
                           "disastir_mteb.results.metrics; add its family to FAMILIES.")
    return Metric(key, name)


#: DisastIR's main score (``task_metadata/dataset.json``): NDCG@10, what every report shows by default.
MAIN_METRIC = _main_metric()


def metric_range(key: str) -> tuple[float, float, bool] | None:
    """The valid range of a metric in a DisastIR task file: (lowest, highest, NaN allowed), or None if unknown.

    Every metric of the families, ``main_score`` and ``accuracy`` is a fraction in [0, 1]. mteb's abstention
    metrics (``nauc_*``, after arXiv:2402.12997) are (AUC - flat AUC) / (oracle AUC - flat AUC): at most 1, with no
    lower bound, and NaN where mteb finds the oracle curve flat. Anything else (a later mteb's metric) makes no claim.

    Examples:
        >>> metric_range("ndcg_at_10")
        (0.0, 1.0, False)
        >>> metric_range("nauc_ndcg_at_10_max")
        (-inf, 1.0, True)
        >>> metric_range("evaluation_time") is None
        True
    """
    if key == _MAIN_KEY or _readable(key) is not None:
        return 0.0, 1.0, False
    if _NAUC.fullmatch(key):
        return -math.inf, 1.0, True
    return None


def get_metric(metric: str | Metric) -> Metric:
    """The metric named by mteb's key (``recall_at_10``); whether the result files hold it is for their reader.

    Raises:
        ValueError: not a metric a report can show (a ``nauc_*`` metric, ``Recall@10`` instead of its key, ...).
    """
    if isinstance(metric, Metric):
        return metric
    key = str(metric).strip()
    if key == _MAIN_KEY:
        return MAIN_METRIC
    name = _readable(key)
    if name is not None:
        return Metric(key, name)
    examples = "ndcg_at_10 (the default), recall_at_100, map_at_10, mrr_at_10, precision_at_5"
    if _NAUC.fullmatch(key):
        raise InvalidInput(f"{key!r} is one of mteb's abstention metrics (nAUC: at most 1, unbounded below), not a "
                           f"score in [0, 1]; a report shows a score such as {examples}.")
    raise InvalidInput(f"Unknown metric {key!r}{_suggestion(key)}: name it as mteb's result files do, "
                       f"<family>_at_<k> with a family among {', '.join(FAMILIES)}: e.g. {examples}.")


def _suggestion(key: str) -> str:
    """``" (did you mean 'recall_at_10'?)"`` for ``Recall@10`` or a near miss, else ""."""
    readable = _READABLE.fullmatch(key)
    by_name = {name.lower(): family for family, name in FAMILIES.items()}
    if readable and readable["family"].strip().lower() in by_name:
        return f" (did you mean '{by_name[readable['family'].strip().lower()]}_at_{readable['k']}'?)"
    close = difflib.get_close_matches(key.lower(), [f"{family}_at_10" for family in FAMILIES], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def held_metrics(record: Mapping[str, Any]) -> list[str]:
    """The keys of the metrics in a task file's score block that a report can show, in the file's order."""
    return [key for key, value in record.items() if metric_range(key) == (0.0, 1.0, False)
            and isinstance(value, int | float) and not isinstance(value, bool)]


def _listed(keys: list[str]) -> str:
    """``ndcg_at_{1,3,5,10}, map_at_{1,3}, accuracy``: the keys of one family and variant written once."""
    groups: dict[tuple[str, str], list[str]] = {}
    for key in keys:
        found = _FAMILY_KEY.fullmatch(key)
        family, variant = (found["family"], found["variant"] or "") if found else (key, "")
        groups.setdefault((family, variant), []).append(found["k"] if found else "")
    parts = []
    for (family, variant), cuts in groups.items():
        tail = f"_{variant}" if variant else ""
        if cuts == [""]:
            parts.append(family)
        else:
            parts.append(f"{family}_at_{cuts[0]}{tail}" if len(cuts) == 1 else
                         f"{family}_at_{{{','.join(cuts)}}}{tail}")
    return ", ".join(parts)


def missing_metric(metric: Metric, path: object, record: Mapping[str, Any]) -> str:
    """The sentence for a task file that lacks ``metric``: the file and the metrics its score block ``record`` holds."""
    if not record:
        return f"{metric.key} ({metric.name}) cannot be read from {path}: there is no readable task file there."
    held = held_metrics(record)
    close = difflib.get_close_matches(metric.key, held, n=1, cutoff=0.8)  # a typo, not another family
    hint = f" (the nearest: {close[0]})" if close else ""
    return (f"{path} holds no {metric.key} ({metric.name}); the metrics it holds: "
            f"{_listed(held) if held else 'none a report can show'}{hint}.")

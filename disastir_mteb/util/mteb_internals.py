"""The one door to the private names of mteb and ``datasets`` that the plugin reads.

Each accessor reads one name those libraries do not make public, and says why no public way does; an upgrade that
moves a name breaks here only, and :func:`missing` says which. Only :mod:`~disastir_mteb.registration`,
:mod:`~disastir_mteb.leaderboard.mteb_patch` and :mod:`~disastir_mteb.runner.scoring_patch` touch private names
too, as they write into or patch the library; the canary test checks all four. Imports happen inside the accessors.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from disastir_mteb.util.patching import missing_names

__all__ = [
    "CHECKED_ON",
    "DATASETS_CHECKED_ON",
    "INSTANCE_ATTRIBUTES",
    "REQUIRED",
    "create_dataloader",
    "dataset_fingerprint",
    "menu_entry",
    "missing",
    "results_frame",
    "retrieval_scores",
]

#: module -> the names read from it (``Class.name``: an attribute of a class there). :func:`missing` checks each.
#: The mteb names have no public equivalent in any mteb 2.x up to the newest checked (:data:`CHECKED_ON`); mteb
#: and sentence-transformers names that found one were dropped (``docs/upstream/index.md`` lists them).
REQUIRED: Mapping[str, tuple[str, ...]] = {
    "mteb._create_dataloaders": ("create_dataloader",),
    "mteb.benchmarks._leaderboard_menu": ("MenuEntry",),
    "mteb._evaluators.retrieval_metrics": ("make_score_dict", "mrr", "parse_metrics_from_scores"),
    "mteb.results.benchmark_results": ("BenchmarkResults._to_results_df",),
}

#: ``module.Class`` -> attributes its instances get (in ``__init__`` or from the library): checked on one instance,
#: on the datasets releases of :data:`DATASETS_CHECKED_ON`.
INSTANCE_ATTRIBUTES: Mapping[str, tuple[str, ...]] = {
    "datasets.Dataset": ("_fingerprint",),
}

#: The mteb releases every mteb name of this module, of :mod:`disastir_mteb.registration`,
#: :mod:`disastir_mteb.leaderboard.mteb_patch` and :mod:`disastir_mteb.runner.scoring_patch` was checked on: the
#: oldest the package supports (``pyproject.toml``'s lower bound, run by ``.ci/compat``) and the newest (what
#: ``make test`` installs). The canary (``tests/test_mteb_internals.py``) runs on both.
CHECKED_ON = ("2.22.2", "2.26.24")
#: The datasets releases ``Dataset._fingerprint`` was checked on (``pyproject.toml``'s lower bound); the canary
#: checks it on whatever release an environment has.
DATASETS_CHECKED_ON = ("5.2.0",)


def missing() -> list[str]:
    """``module.name`` for each name above the installed libraries lack (empty when all are there)."""
    lost = missing_names(REQUIRED)
    for qualified, attributes in INSTANCE_ATTRIBUTES.items():
        module_name, _, class_name = qualified.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            lost.append(qualified)
            continue
        instance = _instance_of(cls)
        lost += [f"{qualified}.{name}" for name in attributes if not hasattr(instance, name)]
    return lost


def _instance_of(cls: type) -> Any:
    """A throwaway ``datasets.Dataset`` (``cls``), built the cheapest way that still runs its ``__init__``."""
    return cls.from_dict({"text": ["probe"]})  # type: ignore[attr-defined]


def create_dataloader(dataset: Any, **options: Any) -> Any:
    """Mteb's ``create_dataloader``: the batches mteb's own evaluators hand an encoder (``options`` passed on).

    Why private: exported nowhere; ``encode`` expects exactly these batches, and they show what a query becomes.
    """
    from mteb._create_dataloaders import create_dataloader as mteb_create_dataloader

    return mteb_create_dataloader(dataset, **options)


def dataset_fingerprint(dataset: Any) -> str | None:
    """``datasets``' fingerprint of ``dataset`` (a hash of its content and transforms), or None when it has none.

    Why private: ``Dataset._fingerprint`` has no public name; it identifies a corpus without reading its texts.
    """
    fingerprint = getattr(dataset, "_fingerprint", None)
    return fingerprint if isinstance(fingerprint, str) and fingerprint else None


def menu_entry(*, name: str, benchmarks: Sequence[Any], open: bool = False, description: str | None = None) -> Any:
    """One entry of mteb's leaderboard menu (``MenuEntry``): a named, foldable group of benchmarks or entries.

    Why private: mteb's menu accepts only ``mteb.benchmarks._leaderboard_menu.MenuEntry``.
    """
    from mteb.benchmarks._leaderboard_menu import MenuEntry

    return MenuEntry(name=name, benchmarks=list(benchmarks), open=open, description=description)


def results_frame(results: Any, tasks: Sequence[Any]) -> Any:
    """The per-task score table of ``results`` (mteb ``BenchmarkResults``) that mteb's leaderboard cache stores.

    Why private: ``BenchmarkResults._to_results_df`` is what mteb itself writes that cache with.
    """
    return results._to_results_df(tasks)


def retrieval_scores(qrels: Mapping[str, Mapping[str, int]], results: Mapping[str, Mapping[str, float]],
                     k_values: Sequence[int]) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Mteb's scores of a retrieval run but its abstention metrics: (per-query scores, means under the file's keys).

    Why private: ``calculate_retrieval_scores`` has no public name; a stored ranking is scored again the same way,
    never by a second scorer. Its body without the slow ``nauc_*`` step; the caller adds the task's own scores last.
    """
    import pytrec_eval
    from mteb._evaluators.retrieval_metrics import make_score_dict, mrr, parse_metrics_from_scores

    cutoffs = ",".join(str(k) for k in k_values)
    measures = {f"{measure}.{cutoffs}" for measure in ("map_cut", "ndcg_cut", "recall", "P", "success")}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(results)
    ndcg, _map, recall, precision, *_, hit_rate = parse_metrics_from_scores(per_query, list(k_values))
    reciprocal = mrr(qrels, results, list(k_values))
    means = make_score_dict(ndcg=ndcg, _map=_map, recall=recall, precision=precision,
                            mrr={k: sum(values) / len(values) for k, values in reciprocal.items()},
                            naucs={}, naucs_mrr={}, hit_rate=hit_rate, task_scores={})
    return dict(per_query), means

"""The one door to the private names of mteb and ``datasets`` that the plugin reads.

Each accessor below reads one name those libraries do not make public, with a line on why no public
way does (sentence-transformers' ``_can_flatten_inputs``, mteb's ``_retrieval_texts``, ``_top_k``,
``_validate_metadata`` and ``_calculate_descriptive_statistics_from_split`` had public ways and are no longer
read). Every other module calls these accessors, so an upgrade that moves a name breaks here only,
and :func:`missing` says which. Three more modules touch private names, deliberately, because they
write into or patch the library: :mod:`disastir_mteb.registration` (mteb's task and benchmark
registries), :mod:`disastir_mteb.leaderboard.mteb_patch` (mteb's leaderboard app) and
:mod:`disastir_mteb.runner.scoring_patch` (mteb's and scikit-learn's scoring). One canary test
(``tests/test_mteb_internals.py``) checks the names of all four against the installed libraries, and
``tests/test_layers.py`` checks that no other module reads a private name of another library.

The libraries are imported inside the accessors: importing this module costs nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from disastir_mteb.util.patching import missing_names

__all__ = [
    "CHECKED_ON",
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

#: ``module.Class`` -> attributes its instances get (in ``__init__`` or from the library): checked on one instance.
INSTANCE_ATTRIBUTES: Mapping[str, tuple[str, ...]] = {
    "datasets.Dataset": ("_fingerprint",),
}

#: The mteb releases every mteb name of this module, of :mod:`disastir_mteb.registration`,
#: :mod:`disastir_mteb.leaderboard.mteb_patch` and :mod:`disastir_mteb.runner.scoring_patch` was checked on: the
#: oldest the package supports (``pyproject.toml``'s lower bound, run by ``.ci/compat``) and the newest (what
#: ``make test`` installs). The canary (``tests/test_mteb_internals.py``) runs on both.
CHECKED_ON = ("2.22.2", "2.26.24")


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
    """Mteb's ``create_dataloader``: the batches mteb's own evaluators hand an encoder.

    Why private: mteb keeps it in ``mteb._create_dataloaders`` and exports it nowhere; an encoder's
    ``encode`` expects exactly these batches, so the plugin builds them the same way, and reads from them
    what a query with an instruction or a conversation becomes before encoding
    (:func:`disastir_mteb.search.routing.retrieval_texts`). ``options`` go to mteb's function as they are
    (``task_metadata``, ``prompt_type``, ``input_column``, ``batch_size``, ...).
    """
    from mteb._create_dataloaders import create_dataloader as mteb_create_dataloader

    return mteb_create_dataloader(dataset, **options)


def dataset_fingerprint(dataset: Any) -> str | None:
    """``datasets``' fingerprint of ``dataset`` (a hash of its content and transforms), or None when it has none.

    Why private: ``datasets`` keeps it as ``Dataset._fingerprint`` with no public name. It identifies a
    corpus without reading its texts; None only costs the caller a fingerprint of the texts themselves.
    """
    fingerprint = getattr(dataset, "_fingerprint", None)
    return fingerprint if isinstance(fingerprint, str) and fingerprint else None


def menu_entry(*, name: str, benchmarks: Sequence[Any], open: bool = False, description: str | None = None) -> Any:
    """One entry of mteb's leaderboard menu (``MenuEntry``): a named, foldable group of benchmarks or entries.

    Why private: mteb's leaderboard menu is built from ``mteb.benchmarks._leaderboard_menu.MenuEntry``
    and accepts nothing else; the DisastIR page puts its own entries there.
    """
    from mteb.benchmarks._leaderboard_menu import MenuEntry

    return MenuEntry(name=name, benchmarks=list(benchmarks), open=open, description=description)


def results_frame(results: Any, tasks: Sequence[Any]) -> Any:
    """The per-task score table of ``results`` (mteb ``BenchmarkResults``) that mteb's leaderboard cache stores.

    Why private: ``BenchmarkResults._to_results_df`` is what mteb itself writes with
    ``save_leaderboard_cache``; the page reads only that cache, so it is written the same way.
    """
    return results._to_results_df(tasks)


def retrieval_scores(qrels: Mapping[str, Mapping[str, int]], results: Mapping[str, Mapping[str, float]],
                     k_values: Sequence[int]) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Mteb's scores of a retrieval run but its abstention metrics: (per-query scores, means under the file's keys).

    Why private: ``calculate_retrieval_scores`` is what ``AbsTaskRetrieval`` scores every task with, in
    ``mteb._evaluators.retrieval_metrics``, with no public name; a stored ranking is scored again the same way, never
    by a second scorer. This is its body without the ``nauc_*`` step, which takes 95% of its time and reads each
    query's whole run: the same ``pytrec_eval`` measures, mteb's ``parse_metrics_from_scores`` (means rounded to 5
    decimals), mteb's ``mrr``, and ``make_score_dict`` naming them as a result file does (``ndcg_at_k``, ``map_at_k``,
    ``recall_at_k``, ``precision_at_k``, ``mrr_at_k``, ``hit_rate_at_k``, ``accuracy``). The task's own scores are
    not added: the caller adds them last, as mteb's task does.
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

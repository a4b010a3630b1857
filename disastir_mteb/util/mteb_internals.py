"""The one door to the private names of mteb, ``datasets`` and sentence-transformers that the plugin reads.

Each accessor below reads one name those libraries do not make public, with a line on why no public
way does. Every other module calls these accessors, so an upgrade that moves a name breaks here only,
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
from types import SimpleNamespace
from typing import Any

from disastir_mteb.util.patching import missing_names

__all__ = [
    "INSTANCE_ATTRIBUTES",
    "REQUIRED",
    "create_dataloader",
    "dataset_fingerprint",
    "may_flatten_inputs",
    "menu_entry",
    "missing",
    "mteb_retrieval_texts",
    "results_frame",
    "retrieval_scores",
    "search_depth",
    "split_statistics",
    "validate_metadata",
]

#: module -> the names read from it (``Class.name``: an attribute of a class there). :func:`missing` checks each.
REQUIRED: Mapping[str, tuple[str, ...]] = {
    "mteb._create_dataloaders": ("create_dataloader", "_retrieval_texts"),
    "mteb.abstasks.task_metadata": ("TaskMetadata._validate_metadata",),
    "mteb.abstasks.abstask": ("AbsTask._calculate_descriptive_statistics_from_split",),
    "mteb.benchmarks._leaderboard_menu": ("MenuEntry",),
    "mteb._evaluators.retrieval_metrics": ("make_score_dict", "mrr", "parse_metrics_from_scores"),
    "mteb.results.benchmark_results": ("BenchmarkResults._to_results_df",),
    "sentence_transformers": ("SentenceTransformer._can_flatten_inputs",),
}

#: ``module.Class`` -> attributes its instances get (in ``__init__`` or from the library): checked on one instance.
INSTANCE_ATTRIBUTES: Mapping[str, tuple[str, ...]] = {
    "mteb.abstasks.retrieval.AbsTaskRetrieval": ("_top_k",),
    "datasets.Dataset": ("_fingerprint",),
}


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
    """A throwaway instance of ``cls``, built the cheapest way that still runs its ``__init__``."""
    if cls.__module__.startswith("datasets"):
        return cls.from_dict({"text": ["probe"]})  # type: ignore[attr-defined]
    # an mteb task: __init__ reads only these two metadata fields
    probe = type("Probe", (cls,), {"metadata": SimpleNamespace(hf_subsets=["default"], is_beta=False)})
    return probe()


def create_dataloader(dataset: Any, **options: Any) -> Any:
    """Mteb's ``create_dataloader``: the batches mteb's own evaluators hand an encoder.

    Why private: mteb keeps it in ``mteb._create_dataloaders`` and exports it nowhere; an encoder's
    ``encode`` expects exactly these batches, so the plugin builds them the same way. ``options`` go to
    mteb's function as they are (``task_metadata``, ``prompt_type``, ``input_column``, ``batch_size``, ...).
    """
    from mteb._create_dataloaders import create_dataloader as mteb_create_dataloader

    return mteb_create_dataloader(dataset, **options)


def mteb_retrieval_texts(dataset: Any, prompt_type: Any) -> Any:
    """Mteb's ``_retrieval_texts``: the texts of a corpus or query set as mteb's retrieval hands them to a model.

    Why private: the only definition of what a passage (title and text) or a query (conversation,
    instruction) becomes before encoding; the plugin's fast path must give the same strings.
    """
    from mteb._create_dataloaders import _retrieval_texts

    return _retrieval_texts(dataset, prompt_type)


def search_depth(task: Any) -> int:
    """How many documents mteb's retrieval evaluator asks a search model for on ``task`` (``AbsTaskRetrieval._top_k``).

    Why private: mteb sets it in the task's ``__init__`` (``max(k_values)``, or a reranking task's
    ``top_k``) and passes it to ``search(top_k=...)``; a search filed ahead of time must be at least as deep.
    """
    return int(task._top_k)


def dataset_fingerprint(dataset: Any) -> str | None:
    """``datasets``' fingerprint of ``dataset`` (a hash of its content and transforms), or None when it has none.

    Why private: ``datasets`` keeps it as ``Dataset._fingerprint`` with no public name. It identifies a
    corpus without reading its texts; None only costs the caller a fingerprint of the texts themselves.
    """
    fingerprint = getattr(dataset, "_fingerprint", None)
    return fingerprint if isinstance(fingerprint, str) and fingerprint else None


def may_flatten_inputs(model: Any) -> bool:
    """Whether a ``SentenceTransformer`` may flatten its inputs, and then batch them in its own interleaved order.

    Why private: sentence-transformers decides it in ``SentenceTransformer._can_flatten_inputs`` and
    names it nowhere public; the plugin's length-ordered pipeline reproduces ``encode`` only when it
    answers False. A model without the method is assumed to flatten, so it keeps its own ``encode``.
    """
    check = getattr(model, "_can_flatten_inputs", None)
    return True if check is None else bool(check())


def split_statistics(task: Any, split: str) -> dict[str, Any]:
    """Mteb's descriptive statistics of one loaded split of ``task``.

    Why private: the public ``calculate_descriptive_statistics`` writes its answer into mteb's own
    installation folder (``metadata.descriptive_stat_path``); this is the step that only computes.
    """
    return dict(task._calculate_descriptive_statistics_from_split(split))


def validate_metadata(metadata: Any) -> None:
    """Mteb's own check of a ``TaskMetadata`` (its evaluation languages), which construction does not run.

    Why private: mteb runs ``TaskMetadata._validate_metadata`` in its test suite only; a task built by
    the plugin's factory is checked the same way when it is built.
    """
    metadata._validate_metadata()


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

"""Every task's queries in one pass over the shared corpus, before mteb asks for them task by task.

One pass for all 48 tasks' queries costs about what a single task's pass does; each task's own ``search`` then
hands back what the pass filed for it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from disastir_mteb.util.timings import Phase, clock
from disastir_mteb.vocabulary.settings import DEFAULT_BATCH_SIZE
from disastir_mteb.vocabulary.taxonomy import is_task_name

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from mteb.types import EncodeKwargs

    from disastir_mteb.search.filed_searches import PrefetchKey
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch

logger = logging.getLogger(__name__)

__all__ = ["answered_by_prefetch", "forget_prefetched", "prefetch", "query_count", "search_depth"]


def search_depth(task: Any) -> int:
    """How many documents mteb's retrieval evaluation asks a search model for on ``task``: ``max(task.k_values)``.

    mteb passes that to ``search(top_k=...)`` for every retrieval task but a reranking one (``top_ranked`` given),
    which is never answered ahead of time here; a deeper ``top_k`` than was filed is searched anew anyway
    (:meth:`~disastir_mteb.search.filed_searches.FiledSearches.take`); a test records what mteb asks.
    """
    return max(task.k_values)



def prefetch(searcher: SharedCorpusSearch, tasks: Sequence[Any], *, encode_kwargs: EncodeKwargs | None = None) -> int:
    """Search all DisastIR tasks' queries in one pass and file each task's top-k in ``searcher``; how many were filed.

    Only DisastIR tasks sharing one corpus and passage prompt are prefetched (else 0); the others are searched as usual.
    """
    from disastir_mteb.util.progress import progress_bar

    encode_kwargs = dict(encode_kwargs or {"batch_size": searcher.batch_size or DEFAULT_BATCH_SIZE})
    ours = [task for task in tasks if is_task_name(task.metadata.name)]  # other tasks keep the per-task path
    with clock(Phase.tasks):
        for task in progress_bar(ours, desc="Loading tasks", unit=" tasks", disable=not searcher.progress,
                                 leave=False):
            if not task.data_loaded:
                task.load_data()
    items: list[tuple[Any, Any]] = []
    owners: list[tuple[PrefetchKey, list[str], int]] = []
    for task in ours:  # the first indexes (encodes) the shared corpus, under its own bar; the rest reuse it
        split, subset = task.metadata.eval_splits[0], "default"
        data = task.dataset[subset][split]
        searcher.index(data["corpus"], task_metadata=task.metadata, hf_split=split, hf_subset=subset,
                       encode_kwargs=encode_kwargs)
        if owners and owners[0][0][3] != searcher.held_corpus:  # not one shared corpus after all: do nothing early
            logger.info("Tasks do not share one corpus; searching task by task.")
            return 0
        items.append((task, data))
        owners.append(((task.metadata.name, split, subset, searcher.held_corpus),
                       [str(i) for i in data["queries"]["id"]], search_depth(task)))
    if not owners:
        return 0
    with clock(Phase.queries):
        blocks = searcher.query_vectors(items, encode_kwargs)
    top_k = max(k for _, _, k in owners)
    with clock(Phase.search):
        values, indices = searcher.search_vectors(np.concatenate(blocks), top_k)
        doc_ids = searcher.corpus_ids
        row = 0
        for key, query_ids, _ in owners:
            searcher.filed.file(key, top_k, {
                qid: {doc_ids[int(i)]: float(v) for v, i in zip(values[row + n], indices[row + n], strict=True)}
                for n, qid in enumerate(query_ids)})
            row += len(query_ids)
    logger.info("Searched %d queries of %d task(s) in one pass over the corpus.", row, len(owners))
    return len(owners)


def answered_by_prefetch(searcher: SharedCorpusSearch, task: Any) -> bool:
    """Whether mteb's evaluation of ``task`` takes every search from the shared pass, so runs no model.

    The runner evaluates such tasks in forked worker processes, which must never run the model; a reranking task
    (``top_ranked``) is searched per task.
    """
    held = searcher.held_corpus
    if not task.data_loaded or held is None:
        return False
    top_k = search_depth(task)
    return all(searcher.filed.holds((task.metadata.name, split, subset, held), top_k) and data is not None
               and data.get("top_ranked") is None for split, subset, data in _evaluated(task))


def query_count(task: Any) -> int:
    """How many queries a loaded task scores, over its evaluation splits and subsets (0 when not loaded)."""
    if not task.data_loaded:
        return 0
    return sum(len(data["queries"]) for _, _, data in _evaluated(task)
               if data is not None and data.get("queries") is not None)


def _evaluated(task: Any) -> Iterator[tuple[str, str, Any]]:
    """Each evaluation split and subset of a loaded task, with its data (None where the task holds none)."""
    for split in task.metadata.eval_splits:
        for subset in task.hf_subsets or ["default"]:
            yield split, subset, task.dataset.get(subset, {}).get(split) if isinstance(task.dataset, dict) else None


def forget_prefetched(searcher: SharedCorpusSearch, task: Any) -> None:
    """Drop what the pass filed for ``task`` (its search ran in a worker process, which took its own copy)."""
    searcher.filed.forget(task.metadata.name)

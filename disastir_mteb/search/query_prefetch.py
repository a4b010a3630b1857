"""Every task's queries searched in ONE pass over the shared corpus, before mteb asks task by task.

:meth:`SharedCorpusSearch.prefetch <disastir_mteb.search.shared_corpus.SharedCorpusSearch.prefetch>`
runs :func:`prefetch_queries`: it indexes the shared corpus, encodes every task's queries
(together, longest first, when they all reach one plain SentenceTransformer), searches them all at
once and files each task's top-k, which that task's own ``search`` then hands back at once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb._create_dataloaders import _retrieval_texts
from mteb.types import PromptType

from disastir_mteb.search.encoder_routes import _DISASTIR, _query_prompt, _sentence_transformer_route
from disastir_mteb.search.encoding import SentenceTransformerPipeline, length_order
from disastir_mteb.search.store import encode_in_memory
from disastir_mteb.vocabulary.settings import DEFAULT_BATCH_SIZE

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mteb.types import EncodeKwargs

    from disastir_mteb.search.shared_corpus import SharedCorpusSearch

logger = logging.getLogger(__name__)

__all__ = ["answered_by_prefetch", "forget_prefetched", "prefetch_queries"]

_PrefetchKey = tuple[str, str, str, "tuple[str, str] | None"]  # task, split, subset, held corpus


def prefetch_queries(searcher: SharedCorpusSearch, tasks: Sequence[Any], *,
                     encode_kwargs: EncodeKwargs | None = None) -> int:
    """:meth:`SharedCorpusSearch.prefetch <disastir_mteb.search.shared_corpus.SharedCorpusSearch.prefetch>`.

    Index the shared corpus, search every DisastIR task's queries at once, file each task's top-k
    in ``searcher``; return how many tasks were prefetched (0 when they do not share one corpus).
    """
    from tqdm.auto import tqdm

    encode_kwargs = dict(encode_kwargs or {"batch_size": searcher.batch_size or DEFAULT_BATCH_SIZE})
    items: list[tuple[Any, Any]] = []
    owners: list[tuple[_PrefetchKey, list[str], int]] = []
    ours = [task for task in tasks if task.metadata.name in _DISASTIR]  # other tasks keep the per-task path
    for task in tqdm(ours, desc="Loading tasks", unit=" tasks", disable=not searcher.progress, leave=False,
                     dynamic_ncols=True):
        if not task.data_loaded:
            task.load_data()
    for task in ours:  # the first indexes (encodes) the shared corpus, under its own bar; the rest reuse it
        split, subset = task.metadata.eval_splits[0], "default"
        data = task.dataset[subset][split]
        searcher.index(data["corpus"], task_metadata=task.metadata, hf_split=split, hf_subset=subset,
                       encode_kwargs=encode_kwargs)
        if owners and owners[0][0][3] != searcher._held:  # not one shared corpus after all: do nothing early
            logger.info("Tasks do not share one corpus; searching task by task.")
            return 0
        items.append((task, data))
        owners.append(((task.metadata.name, split, subset, searcher._held),
                       [str(i) for i in data["queries"]["id"]], int(getattr(task, "_top_k", 100))))
    if not owners:
        return 0
    blocks = _joint_query_embeddings(searcher, items, encode_kwargs)
    if blocks is None:
        blocks = [searcher._query_embeddings(data["queries"], task.metadata, task.metadata.eval_splits[0],
                                             "default", encode_kwargs, None) for task, data in items]
    top_k = max(k for _, _, k in owners)
    values, indices = searcher.index_backend.search(np.concatenate(blocks), top_k,
                                                    similarity_fn=searcher.model.similarity)
    searcher.corpus_passes += 1
    row = 0
    for key, query_ids, _ in owners:
        searcher._prefetched[key] = (top_k, {
            qid: {searcher._doc_ids[int(i)]: float(v) for v, i in zip(values[row + n], indices[row + n], strict=True)}
            for n, qid in enumerate(query_ids)})
        row += len(query_ids)
    logger.info("Searched %d queries of %d task(s) in one pass over the corpus.", row, len(owners))
    return len(owners)


def answered_by_prefetch(searcher: SharedCorpusSearch, task: Any) -> bool:
    """Whether mteb's evaluation of ``task`` takes every search from the shared pass, so runs no model.

    True when each (split, subset) mteb evaluates has its top-k filed, at least as deep as the task
    asks, for the corpus held now, and has no ``top_ranked`` (a reranking task is searched per task).
    The runner evaluates such tasks in forked worker processes (:mod:`disastir_mteb.runner.task_pool`),
    which must never run the model.
    """
    if not task.data_loaded or searcher._held is None:
        return False
    top_k = int(getattr(task, "_top_k", 100))
    for split in task.metadata.eval_splits:
        for subset in task.hf_subsets or ["default"]:
            ready = searcher._prefetched.get((task.metadata.name, split, subset, searcher._held))
            data = task.dataset.get(subset, {}).get(split) if isinstance(task.dataset, dict) else None
            if ready is None or ready[0] < top_k or data is None or data.get("top_ranked") is not None:
                return False
    return True


def forget_prefetched(searcher: SharedCorpusSearch, task: Any) -> None:
    """Drop what the pass filed for ``task`` (its search ran in a worker process, which took its own copy)."""
    name = task.metadata.name
    for key in [key for key in searcher._prefetched if key[0] == name]:
        del searcher._prefetched[key]


def _joint_query_embeddings(searcher: SharedCorpusSearch, items: list[tuple[Any, Any]],
                            encode_kwargs: EncodeKwargs) -> list[np.ndarray] | None:
    """Every task's query vectors from ONE length-sorted pass over all their queries, or None.

    48 encode calls of 200 queries each sort and pad worse and pay the per-call cost 48 times.
    When every task's queries reach the same plain SentenceTransformer through known steps
    (:func:`~disastir_mteb.search.encoder_routes._sentence_transformer_route`), the queries still
    missing from the store are encoded together (per distinct prompt), longest first, then filed per
    task under the same keys as task-by-task encoding; otherwise (None) each task encodes its own.
    """
    routes = [_sentence_transformer_route(searcher.model, task.metadata, PromptType.query) for task, _ in items]
    if not routes or any(r is None or r.model is not routes[0].model for r in routes):  # type: ignore[union-attr]
        return None
    batch_size = searcher._batch_size(encode_kwargs)
    planned = []
    for (task, data), route in zip(items, routes, strict=True):
        raw = _retrieval_texts(data["queries"], PromptType.query)
        key_prompt = _query_prompt(searcher.model, task.metadata)
        cached = None if searcher.store is None else searcher.store.cached(
            searcher._store_key("queries", raw, key_prompt, batch_size), len(raw))
        final = raw if route.transform is None else [route.transform(text) for text in raw]  # type: ignore[union-attr]
        planned.append((raw, key_prompt, final, route.prompt, cached))  # type: ignore[union-attr]
    vectors: dict[int, np.ndarray] = {}
    for prompt in dict.fromkeys(p[3] for p in planned if p[4] is None):
        members = [n for n, p in enumerate(planned) if p[4] is None and p[3] == prompt]
        texts = [text for n in members for text in planned[n][2]]
        pipeline = SentenceTransformerPipeline(routes[0].model, batch_size=batch_size, prompt=prompt,  # type: ignore[union-attr]
                                               tokenize_threads=searcher.tokenize_threads, side="query")
        encoded = encode_in_memory(texts, pipeline, length_order(texts), searcher._chunk_size(batch_size),
                                    progress="queries" if searcher.progress else None)
        searcher.queries_encoded += len(texts)
        row = 0
        for n in members:
            vectors[n] = encoded[row:row + len(planned[n][2])]
            row += len(planned[n][2])
    blocks = []
    for n, (raw, key_prompt, _, _, cached) in enumerate(planned):
        if cached is not None:
            blocks.append(np.asarray(cached))
        else:
            blocks.append(np.asarray(searcher._embed("queries", raw, key_prompt, _Rows(vectors[n]),
                                                     batch_size=batch_size)))
    if vectors:
        logger.info("Encoded the queries of %d task(s) in one length-sorted pass.", len(vectors))
    return blocks


class _Rows:
    """An "encoder" that hands out rows of vectors already computed, in the order chunks ask for them."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors, self.row = vectors, 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = self.vectors[self.row:self.row + len(texts)]
        self.row += len(texts)
        return out

"""One corpus encoding and one index (exact or USearch ANN) for every task that searches the same corpus.

mteb's ``SearchEncoderWrapper`` encodes the corpus again for each task and clears its index after
each one: 48 x 239,704 passage encodings for DisastIR. :class:`SharedCorpusSearch` implements
mteb's ``SearchProtocol`` (``index`` + ``search``) instead. ``index`` recognises a corpus it already
holds (same ``datasets`` fingerprint and the same passage-side prompt) and returns at once;
otherwise it takes the embeddings from the persistent :class:`~disastir_mteb.store.EmbeddingStore`
(encoding only what is missing, resumable) and loads them into one index: an
:class:`~disastir_mteb.exact_search.ExactIndex` (blocked exact top-k; results are those of mteb's
own search) or, with ``ann=``, a :class:`~disastir_mteb.usearch_index.UsearchIndex` built once per
(model, revision, corpus, passage prompt, parameters) and persisted beside the embeddings.
``search`` encodes a task's queries (also through the store) and searches the index. The search
setting joins the model's mteb experiment settings, so ANN results are filed apart from exact ones;
the embeddings, which do not depend on it, are shared by both.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb._create_dataloaders import _retrieval_texts, create_dataloader
from mteb.types import PromptType

from disastir_mteb.exact_search import ExactIndex
from disastir_mteb.instructions import InstructionConfig
from disastir_mteb.store import EmbeddingStore, StoreKey, fingerprint_texts
from disastir_mteb.taxonomy import TASK_NAMES, get_spec
from disastir_mteb.usearch_index import AnnParams, UsearchIndex, resolve_params

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.types import (
        CorpusDatasetType,
        EncodeKwargs,
        QueryDatasetType,
        RetrievalOutputType,
        TopRankedDocumentsType,
    )

logger = logging.getLogger(__name__)

__all__ = ["SharedCorpusSearch"]

_DISASTIR = frozenset(TASK_NAMES)


_PrefetchKey = tuple[str, str, str, "tuple[str, str] | None"]  # task, split, subset, held corpus


def _document_prompt(model: Any, task_metadata: TaskMetadata) -> str:
    """The prompt TEXT a wrapper puts before passages ('' when none; mteb returns prompt names)."""
    get_prompt = getattr(model, "get_prompt", None)
    if not callable(get_prompt):
        return ""
    try:
        name = get_prompt(task_metadata, PromptType.document)
    except Exception:
        return ""
    if not name:
        return ""
    prompts = getattr(model, "model_prompts", None) or {}
    return str(prompts.get(name, name))


def _resolve_devices(devices: Sequence[str] | str | None) -> tuple[str, ...]:
    if devices is None:
        return ()
    if devices == "auto":
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return tuple(f"cuda:{i}" for i in range(count)) if count > 1 else ()
    return (devices,) if isinstance(devices, str) else tuple(devices)


class SharedCorpusSearch:
    """An mteb search model: encode a shared corpus once, index it once, search it for every task.

    Args:
        model: an mteb encoder (possibly wrapped by ``with_instructions``).
        store: where embeddings persist; None keeps them in memory for this process only.
        progress: progress bar (rate, ETA) while encoding the corpus.
        dtype: storage precision of persisted embeddings (``float32`` or ``float16``).
        chunk_size: passages per persisted chunk: a killed run loses at most one chunk of work.
        devices: spread corpus encoding over several devices with sentence-transformers'
            multi-process pool (e.g. ``["cuda:0", "cuda:1"]``); ``"auto"`` = every visible CUDA
            device when there are two or more, else one process (which on CPU uses all cores).
            Only for SentenceTransformer-based models whose passages carry no prompt; others
            encode in one process.
        ann: search with USearch (an :class:`~disastir_mteb.usearch_index.AnnParams` or a preset
            name such as ``"paper"``) instead of exactly; the index persists under the store's root.

    Attributes:
        corpus_indexings: how many times a corpus had to be (re)loaded into the index.
        passages_encoded: passages actually sent to the model (0 on a warm cache).
        queries_encoded: queries actually sent to the model.
        corpus_passes: searches run over the index (one for all tasks when prefetched).
        index_builds: search structures built (HNSW graphs; for exact search, corpus loads into the
            index); ``index_loads``: ANN indexes memory-mapped from the cache instead.
        rankings: with ``keep_rankings`` set (the runner sets it), the last search's results by
            (task, split, subset), for per-query scores; the runner takes each task's out once it
            is scored. Off by default, so plain ``mteb.evaluate`` does not accumulate them.
        mteb_model_meta: the model's metadata; with ``ann`` its ``experiment_kwargs`` also hold
            ``disastir_search`` = the parameters' :meth:`~disastir_mteb.usearch_index.AnnParams.label`.
    """

    def __init__(self, model: Any, *, store: EmbeddingStore | None = None, progress: bool = True,
                 dtype: str = "float32", chunk_size: int = 8192, devices: Sequence[str] | str | None = "auto",
                 ann: AnnParams | str | None = None) -> None:
        self.model = model
        self.ann = resolve_params(ann) if isinstance(ann, str) else ann
        meta = model.mteb_model_meta
        if self.ann is not None and meta is not None:
            experiment = {**(meta.experiment_kwargs or {}), "disastir_search": f"ann-{self.ann.label()}"}
            meta = meta.model_copy(update={"experiment_kwargs": experiment})
        self.mteb_model_meta = meta
        self.store = store
        self.progress = progress
        self.dtype = dtype
        self.chunk_size = chunk_size
        self.devices = _resolve_devices(devices)
        self._prefetched: dict[_PrefetchKey, tuple[int, dict[str, dict[str, float]]]] = {}
        self.index_backend: ExactIndex | UsearchIndex = (
            ExactIndex(keep_on_clear=True) if self.ann is None
            else UsearchIndex(self.ann, keep_on_clear=True, progress=progress))
        self.rankings: dict[tuple[str, str, str], RetrievalOutputType] = {}
        self.keep_rankings = False
        self._held: tuple[str, str] | None = None
        self._doc_ids: list[str] = []
        self._embeddings: np.ndarray | None = None
        self._text_fingerprints: dict[str, str] = {}
        self.corpus_indexings = 0
        self.corpus_passes = 0
        self.passages_encoded = 0
        self.queries_encoded = 0

    @property
    def indexed_passages(self) -> int:
        """Passages in the index now (the size of the shared corpus once a task has run)."""
        return len(self._doc_ids)

    @property
    def corpus_embeddings(self) -> np.ndarray | None:
        """The held corpus vectors (row ``i`` = ``corpus_ids[i]``), e.g. to study ANN settings; None before a task."""
        return self._embeddings

    @property
    def corpus_ids(self) -> list[str]:
        """The ids of the held corpus, in row order."""
        return list(self._doc_ids)

    @property
    def index_builds(self) -> int:
        """Search structures built: HNSW graphs (ANN), or corpus loads into the exact index."""
        backend = self.index_backend
        return backend.builds if isinstance(backend, UsearchIndex) else self.corpus_indexings

    @property
    def index_loads(self) -> int:
        """ANN indexes memory-mapped from the cache instead of built (0 for exact search)."""
        backend = self.index_backend
        return backend.loads if isinstance(backend, UsearchIndex) else 0

    def describe_search(self) -> str:
        """One line: exact, or the ANN parameters."""
        return "exact (blocked inner product)" if self.ann is None else f"ANN {self.ann.describe()}"

    # ------------------------------------------------------------------ identity of an embedding
    def _passage_prompt(self, task_metadata: TaskMetadata) -> str:
        """Everything besides the text that decides a passage embedding; part of the cache key."""
        parts = []
        experiment = getattr(getattr(self.model, "mteb_model_meta", None), "experiment_kwargs", None)
        if experiment:
            parts.append(json.dumps(dict(experiment), sort_keys=True, default=str))
        config = getattr(self.model, "config", None)
        if isinstance(config, InstructionConfig) and config.passages and task_metadata.name in _DISASTIR:
            parts.append(config.format(get_spec(task_metadata.name).intent, "{passage}"))
        prompt = _document_prompt(self.model, task_metadata)
        if prompt:
            parts.append(f"prompt={prompt}")
        if getattr(self.model, "apply_instruction_to_passages", False) and getattr(self.model, "instruction_template",
                                                                                     None):
            parts.append(f"task={task_metadata.name}")  # the model instructs passages per task
        return " | ".join(parts)

    def _model_key(self) -> tuple[str, str | None]:
        meta = self.mteb_model_meta
        return (getattr(meta, "name", None) or type(self.model).__name__, getattr(meta, "revision", None))

    def _embed(self, side: str, texts: list[str], prompt: str, encode: Callable[[list[str]], Any]) -> np.ndarray:
        name, revision = self._model_key()
        if self.store is None:
            return np.asarray(encode(texts), dtype=np.float32)
        key = StoreKey(model_name=name, model_revision=revision, side=side, prompt=prompt,  # type: ignore[arg-type]
                       instructions="", texts_fingerprint=fingerprint_texts(texts), dtype=self.dtype)  # type: ignore[arg-type]
        return self.store.get_or_encode(key, texts, encode, chunk_size=self.chunk_size,
                                        progress=self.progress and side == "corpus")

    def _plain_sentence_transformer(self, task_metadata: TaskMetadata) -> Any:
        """The SentenceTransformer under the wrappers, if passages reach it raw (no prompt), else None."""
        from sentence_transformers import SentenceTransformer

        model = self.model
        for _ in range(4):
            if isinstance(model, SentenceTransformer):
                return model
            config = getattr(model, "config", None)
            if isinstance(config, InstructionConfig) and config.passages:
                return None
            if _document_prompt(model, task_metadata):
                return None
            model = getattr(model, "model", None)
        return None

    def _encoder(self, task_metadata: TaskMetadata, prompt_type: PromptType, hf_split: str, hf_subset: str,
                 encode_kwargs: EncodeKwargs, num_proc: int | None) -> Callable[[list[str]], Any]:
        from datasets import Dataset

        pool_model = (self._plain_sentence_transformer(task_metadata)
                      if prompt_type == PromptType.document and len(self.devices) > 1 else None)
        if pool_model is not None:
            logger.info("Encoding passages on %s with sentence-transformers' multi-process pool.", self.devices)

            def encode_on_devices(texts: list[str]) -> Any:
                output = pool_model.encode(texts, device=list(self.devices), convert_to_numpy=True,
                                           batch_size=int(encode_kwargs.get("batch_size", 32)),
                                           show_progress_bar=False)
                self.passages_encoded += len(texts)
                return output

            return encode_on_devices

        def encode(texts: list[str]) -> Any:
            loader = create_dataloader(Dataset.from_dict({"id": [str(i) for i in range(len(texts))], "text": texts}),
                                       task_metadata=task_metadata, prompt_type=prompt_type, num_proc=num_proc,
                                       **encode_kwargs)
            output = self.model.encode(loader, task_metadata=task_metadata, hf_split=hf_split, hf_subset=hf_subset,
                                       prompt_type=prompt_type, **encode_kwargs)
            if prompt_type == PromptType.document:
                self.passages_encoded += len(texts)
            else:
                self.queries_encoded += len(texts)
            return output

        return encode

    def _query_embeddings(self, queries: QueryDatasetType, task_metadata: TaskMetadata, hf_split: str,
                          hf_subset: str, encode_kwargs: EncodeKwargs, num_proc: int | None) -> np.ndarray:
        texts = _retrieval_texts(queries, PromptType.query)
        if not texts:
            return np.zeros((0, 1), np.float32)
        encode = self._encoder(task_metadata, PromptType.query, hf_split, hf_subset, encode_kwargs, num_proc)
        prompt = f"task={task_metadata.name} | {self._passage_prompt(task_metadata)}"
        return np.asarray(self._embed("queries", texts, prompt, encode))

    def prefetch(self, tasks: Sequence[Any], *, encode_kwargs: EncodeKwargs | None = None) -> int:
        """Search all tasks' queries in ONE pass over the corpus, before mteb asks task by task.

        A task's own ``search`` then returns its share at once. Searching per task streams the
        whole corpus once per task (48 passes); one pass for all 9,600 queries costs about what a
        single task's pass does. Only DisastIR tasks are prefetched, and only when they share one
        corpus and passage prompt; the others are searched as usual. Returns how many were.
        """
        encode_kwargs = dict(encode_kwargs or {"batch_size": 32})
        blocks: list[np.ndarray] = []
        owners: list[tuple[_PrefetchKey, list[str], int]] = []
        for task in tasks:
            if task.metadata.name not in _DISASTIR:
                continue  # other tasks keep the per-task path
            if not task.data_loaded:
                task.load_data()
            split, subset = task.metadata.eval_splits[0], "default"
            data = task.dataset[subset][split]
            self.index(data["corpus"], task_metadata=task.metadata, hf_split=split, hf_subset=subset,
                       encode_kwargs=encode_kwargs)
            if owners and owners[0][0][3] != self._held:  # not one shared corpus after all: do nothing early
                logger.info("Tasks do not share one corpus; searching task by task.")
                return 0
            embeddings = self._query_embeddings(data["queries"], task.metadata, split, subset, encode_kwargs, None)
            blocks.append(embeddings)
            owners.append(((task.metadata.name, split, subset, self._held), [str(i) for i in data["queries"]["id"]],
                           int(getattr(task, "_top_k", 100))))
        if not owners:
            return 0
        top_k = max(k for _, _, k in owners)
        values, indices = self.index_backend.search(np.concatenate(blocks), top_k, similarity_fn=self.model.similarity)
        self.corpus_passes += 1
        row = 0
        for key, query_ids, _ in owners:
            self._prefetched[key] = (top_k, {
                qid: {self._doc_ids[int(i)]: float(v) for v, i in zip(values[row + n], indices[row + n], strict=True)}
                for n, qid in enumerate(query_ids)})
            row += len(query_ids)
        logger.info("Searched %d queries of %d task(s) in one pass over the corpus.", row, len(owners))
        return len(owners)

    # ------------------------------------------------------------------ mteb SearchProtocol
    def index(self, corpus: CorpusDatasetType, *, task_metadata: TaskMetadata, hf_split: str, hf_subset: str,
              encode_kwargs: EncodeKwargs, num_proc: int | None = None, **kwargs: Any) -> None:
        """Make ``corpus`` searchable; a no-op when the same corpus and passage prompt are already held."""
        prompt = self._passage_prompt(task_metadata)
        identity = getattr(corpus, "_fingerprint", None) or str(id(corpus))
        if self._held is not None and self._held[1] == prompt and self._held[0] in (
                identity, self._text_fingerprints.get(identity)):
            logger.debug("%s: corpus already indexed, reused.", task_metadata.name)
            return
        texts = _retrieval_texts(corpus, PromptType.document)
        text_fingerprint = fingerprint_texts(texts)
        self._text_fingerprints[identity] = text_fingerprint
        if self._held == (text_fingerprint, prompt):  # same texts under another datasets fingerprint
            return
        encode = self._encoder(task_metadata, PromptType.document, hf_split, hf_subset, encode_kwargs, num_proc)
        embeddings = self._embed("corpus", texts, prompt, encode)
        self._doc_ids = [str(i) for i in corpus["id"]]
        self._embeddings = embeddings
        if isinstance(self.index_backend, UsearchIndex) and self.store is not None:
            name, revision = self._model_key()
            self.index_backend.cache_dir = self.store.root
            self.index_backend.cache_key = f"{name}@{revision}|{text_fingerprint}|{self.dtype}|{prompt}"
        self.index_backend.add_documents(embeddings, self._doc_ids)
        self._held = (text_fingerprint, prompt)
        self.corpus_indexings += 1
        logger.info("Indexed %d passages for %s (reused by every task on this corpus).", len(texts),
                    task_metadata.name)

    def search(self, queries: QueryDatasetType, *, task_metadata: TaskMetadata, hf_split: str, hf_subset: str,
               top_k: int, encode_kwargs: EncodeKwargs, top_ranked: TopRankedDocumentsType | None = None,
               num_proc: int | None = None, **kwargs: Any) -> RetrievalOutputType:
        """Top-k passages per query, exact, as ``{query_id: {doc_id: similarity}}``."""
        if self._held is None:
            raise ValueError("Corpus must be indexed before searching.")
        query_ids = [str(i) for i in queries["id"]]
        ready = self._prefetched.pop((task_metadata.name, hf_split, hf_subset, self._held), None)
        if ready is not None and top_ranked is None and ready[0] >= top_k and set(query_ids) <= ready[1].keys():
            return self._keep_ranking(task_metadata.name, hf_split, hf_subset,
                                      {qid: dict(list(ready[1][qid].items())[:top_k]) for qid in query_ids})
        query_embeddings = self._query_embeddings(queries, task_metadata, hf_split, hf_subset, encode_kwargs,
                                                  num_proc)
        query_idx_to_id = dict(enumerate(query_ids))
        values, indices = self.index_backend.search(query_embeddings, top_k, similarity_fn=self.model.similarity,
                                                    top_ranked=top_ranked, query_idx_to_id=query_idx_to_id)
        self.corpus_passes += 1
        results: RetrievalOutputType = {}
        for row, query_id in enumerate(query_ids):
            candidates = self._doc_ids if top_ranked is None else list(top_ranked.get(query_id, []))
            results[query_id] = {candidates[int(i)]: float(v) for v, i in zip(values[row], indices[row], strict=True)}
        return self._keep_ranking(task_metadata.name, hf_split, hf_subset, results)

    def _keep_ranking(self, task: str, split: str, subset: str, results: RetrievalOutputType) -> RetrievalOutputType:
        """Remember the last search of each task for per-query scores; return ``results`` unchanged."""
        if self.keep_rankings:
            self.rankings[(task, split, subset)] = results
        return results

"""One corpus encoding and one index (exact or USearch ANN) for every task that searches the same corpus.

mteb's ``SearchEncoderWrapper`` encodes the corpus again for each task and clears its index after
each one: 48 x 239,704 passage encodings for DisastIR. :class:`SharedCorpusSearch` implements
mteb's ``SearchProtocol`` (``index`` + ``search``) instead. ``index`` recognises a corpus it already
holds (same ``datasets`` fingerprint and the same passage-side prompt) and returns at once;
otherwise it takes the embeddings from the persistent :class:`~disastir_mteb.search.store.EmbeddingStore`
(encoding only what is missing, resumable) and loads them into one index: an
:class:`~disastir_mteb.search.exact_search.ExactIndex` (blocked exact top-k; results are those of mteb's
own search) or, with ``ann=``, a :class:`~disastir_mteb.search.usearch_index.UsearchIndex` built once per
(model, revision, corpus, passage prompt, parameters) and persisted beside the embeddings.
``search`` encodes a task's queries (also through the store) and searches the index. The search
setting joins the model's mteb experiment settings, so ANN results are filed apart from exact ones;
the embeddings, which do not depend on it, are shared by both.

How a task's texts reach the model (and which prompts key their vectors) is
:mod:`~disastir_mteb.search.encoder_routes`; searching every task's queries in one pass
(:meth:`SharedCorpusSearch.prefetch`) is :mod:`~disastir_mteb.search.query_prefetch`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb._create_dataloaders import _retrieval_texts
from mteb.types import PromptType

from disastir_mteb.models.adapter import as_mteb_encoder
from disastir_mteb.search.encoder_routes import (
    _declared_dimension,
    _encoder,
    _passage_prompt,
    _query_prompt,
    _resolve_devices,
)
from disastir_mteb.search.encoding import EncodingReport, check_count, length_order
from disastir_mteb.search.exact_search import ExactIndex
from disastir_mteb.search.precision import (
    PRECISIONS,
    apply_precision,
    module_device,
    module_dtype,
    parse_precision,
    torch_module,
)
from disastir_mteb.search.query_prefetch import _PrefetchKey, prefetch_queries
from disastir_mteb.search.store import CHUNK_SIZE, EmbeddingStore, StoreKey, encode_in_memory, fingerprint_texts
from disastir_mteb.search.usearch_index import AnnParams, UsearchIndex, resolve_params
from disastir_mteb.vocabulary.ann_params import search_setting
from disastir_mteb.vocabulary.settings import DEFAULT_BATCH_SIZE, PRECISION_KEY, SEARCH_KEY

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


class SharedCorpusSearch:
    """An mteb search model: encode a shared corpus once, index it once, search it for every task.

    Args:
        model: an mteb encoder (possibly wrapped by ``with_instructions``).
        store: where embeddings persist; None keeps them in memory for this process only.
        progress: progress bar (rate, ETA) while encoding the corpus.
        dtype: storage precision of persisted embeddings (``float32`` or ``float16``).
        chunk_size: passages per persisted chunk (rounded up to whole batches): a killed run loses at most one
            chunk of work. The default, :data:`~disastir_mteb.search.store.CHUNK_SIZE` (1,024), is 15-35 s of
            all-MiniLM-L6-v2 on a 2-core CPU, whatever the corpus size.
        devices: spread corpus encoding over several devices with sentence-transformers'
            multi-process pool (e.g. ``["cuda:0", "cuda:1"]``); ``"auto"`` = every visible CUDA
            device when there are two or more, else one process (which on CPU uses all cores).
            Only for SentenceTransformer-based models whose passages carry no prompt; others
            encode in one process.
        ann: search with USearch (an :class:`~disastir_mteb.search.usearch_index.AnnParams` or a preset
            name such as ``"paper"``) instead of exactly; the index persists under the store's root.
            Exact search runs on the model's GPU when it is on one (same rankings as on the CPU).
        batch_size: texts per forward pass; ``None`` = what mteb passes (``encode_kwargs``, 32 by default).
        precision: ``fp32``, ``fp16`` or ``bf16``: cast the model's weights in place before encoding
            (like ``model.half()``); ``None`` keeps the model's own dtype. A precision other than the
            model's own joins the mteb experiment settings (``disastir_precision``), so its results
            are filed apart; the dtype is part of the embedding cache key either way.
        tokenize_threads: threads tokenising passages ahead of the model on the pipelined path
            (see :class:`~disastir_mteb.search.encoding.SentenceTransformerPipeline`); ``None`` = 1 on a CPU,
            all cores but one (at most 8) on a GPU.

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
            ``disastir_search`` = the parameters' :meth:`~disastir_mteb.search.usearch_index.AnnParams.label`.
        encoding: how the corpus was encoded (path, batches, precision, device, tokenisation,
            ``max_seq_length`` and how many passages reached it), for the run summary.
    """

    def __init__(self, model: Any, *, store: EmbeddingStore | None = None, progress: bool = True,
                 dtype: str = "float32", chunk_size: int = CHUNK_SIZE, devices: Sequence[str] | str | None = "auto",
                 ann: AnnParams | str | None = None, batch_size: int | None = None, precision: str | None = None,
                 tokenize_threads: int | None = None) -> None:
        check_count("batch_size", batch_size, 1, f"mteb's {DEFAULT_BATCH_SIZE}")
        check_count("tokenize_threads", tokenize_threads, 0, "automatic")
        model = as_mteb_encoder(model, "SharedCorpusSearch")
        self.model = model
        self.ann = resolve_params(ann) if isinstance(ann, str) else ann
        self.batch_size = batch_size
        self.tokenize_threads = tokenize_threads
        requested = parse_precision(precision)
        module = torch_module(model)
        own = getattr(module, "_disastir_own_dtype", None) or module_dtype(model)
        self.model_dtype = apply_precision(model, requested)
        if module is not None and own is not None:
            module._disastir_own_dtype = own  # a model cast here keeps its own dtype on record for later searches
        experiment: dict[str, Any] = {}
        if self.model_dtype is not None and own is not None and self.model_dtype != own:
            experiment[PRECISION_KEY] = next(k for k, v in PRECISIONS.items() if v == self.model_dtype)
        if self.ann is not None:
            experiment[SEARCH_KEY] = search_setting(self.ann)
        meta = model.mteb_model_meta
        if experiment and meta is not None:
            meta = meta.model_copy(update={"experiment_kwargs": {**(meta.experiment_kwargs or {}), **experiment}})
        self.mteb_model_meta = meta
        self.encoding: EncodingReport | None = None
        self.store = store
        declared = _declared_dimension(model)
        if store is not None and declared:
            store.expect_dimension(*self._model_key(), declared)
        self.progress = progress
        self.dtype = dtype
        self.chunk_size = chunk_size
        self.devices = _resolve_devices(devices)
        self._prefetched: dict[_PrefetchKey, tuple[int, dict[str, dict[str, float]]]] = {}
        device = module_device(model)
        self.index_backend: ExactIndex | UsearchIndex = (
            ExactIndex(keep_on_clear=True, device=device if device and device.startswith("cuda") else None)
            if self.ann is None else UsearchIndex(self.ann, keep_on_clear=True, progress=progress))
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

    def encoding_settings(self) -> dict[str, object]:
        """What the stored vectors depend on besides model and texts, for result records."""
        report = self.encoding
        return {"batch_size": report.batch_size if report else self.batch_size, "model_dtype": self.model_dtype,
                "device": report.device if report else module_device(self.model),
                "max_seq_length": report.max_seq_length if report else None,
                "path": report.path if report else None, "order": "length (longest first)"}

    def describe_encoding(self) -> str:
        """One line: how the corpus was (or would have been) encoded, or that it came from the cache."""
        report = self.encoding
        if report is None:
            return "not encoded yet"
        if report.texts == 0:
            return f"all from the embedding cache (batch size {report.batch_size}, {report.precision or 'model dtype'})"
        return report.describe()

    def describe_search(self) -> str:
        """One line: exact (and where it runs), or the ANN parameters."""
        if self.ann is None:
            device = getattr(self.index_backend, "device", None)
            return f"exact (blocked inner product{f' on {device}' if device is not None else ''})"
        return f"ANN {self.ann.describe()}"

    # ------------------------------------------------------------------ identity of an embedding
    def _model_key(self) -> tuple[str, str | None]:
        meta = self.mteb_model_meta
        return (getattr(meta, "name", None) or type(self.model).__name__, getattr(meta, "revision", None))

    def _batch_size(self, encode_kwargs: EncodeKwargs) -> int:
        """The batch size in force: the constructor's, else what mteb passes, else mteb's default 32."""
        return int(self.batch_size or encode_kwargs.get("batch_size") or DEFAULT_BATCH_SIZE)

    def _embed(self, side: str, texts: list[str], prompt: str, encode: Callable[[list[str]], Any], *,
               batch_size: int, order: np.ndarray | None = None) -> np.ndarray:
        """Vectors of ``texts`` (row ``i`` = text ``i``) from the store, encoding what is missing in ``order``."""
        if self.store is None:
            return encode_in_memory(texts, encode, order, self._chunk_size(batch_size),
                                     progress=side if self.progress and side == "corpus" else None)
        key = self._store_key(side, texts, prompt, batch_size)
        return self.store.get_or_encode(key, texts, encode, chunk_size=self._chunk_size(batch_size),
                                        progress=self.progress and side == "corpus", order=order)

    def _chunk_size(self, batch_size: int) -> int:
        """``chunk_size`` rounded up to whole batches, so chunks hold the batches of one encode call."""
        return -(-self.chunk_size // batch_size) * batch_size

    def _store_key(self, side: str, texts: list[str], prompt: str, batch_size: int) -> StoreKey:
        name, revision = self._model_key()
        return StoreKey(model_name=name, model_revision=revision, side=side, prompt=prompt,  # type: ignore[arg-type]
                        instructions="", texts_fingerprint=fingerprint_texts(texts), dtype=self.dtype,  # type: ignore[arg-type]
                        batch_size=batch_size, precision=self.model_dtype)

    def _count_passages(self, n: int) -> None:
        self.passages_encoded += n

    def _query_embeddings(self, queries: QueryDatasetType, task_metadata: TaskMetadata, hf_split: str,
                          hf_subset: str, encode_kwargs: EncodeKwargs, num_proc: int | None) -> np.ndarray:
        texts = _retrieval_texts(queries, PromptType.query)
        if not texts:
            return np.zeros((0, 1), np.float32)
        encode = _encoder(self, task_metadata, PromptType.query, hf_split, hf_subset, encode_kwargs, num_proc)
        prompt = _query_prompt(self.model, task_metadata)
        return np.asarray(self._embed("queries", texts, prompt, encode, batch_size=self._batch_size(encode_kwargs)))

    def prefetch(self, tasks: Sequence[Any], *, encode_kwargs: EncodeKwargs | None = None) -> int:
        """Search all tasks' queries in ONE pass over the corpus, before mteb asks task by task.

        A task's own ``search`` then returns its share at once. Searching per task streams the
        whole corpus once per task (48 passes); one pass for all 9,600 queries costs about what a
        single task's pass does. Only DisastIR tasks are prefetched, and only when they share one
        corpus and passage prompt; the others are searched as usual. Returns how many were.
        """
        return prefetch_queries(self, tasks, encode_kwargs=encode_kwargs)

    # ------------------------------------------------------------------ mteb SearchProtocol
    def index(self, corpus: CorpusDatasetType, *, task_metadata: TaskMetadata, hf_split: str, hf_subset: str,
              encode_kwargs: EncodeKwargs, num_proc: int | None = None, **kwargs: Any) -> None:
        """Make ``corpus`` searchable; a no-op when the same corpus and passage prompt are already held."""
        prompt = _passage_prompt(self.model, task_metadata)
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
        encode = _encoder(self, task_metadata, PromptType.document, hf_split, hf_subset, encode_kwargs, num_proc)
        embeddings = self._embed("corpus", texts, prompt, encode, batch_size=self._batch_size(encode_kwargs),
                                 order=length_order(texts))
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

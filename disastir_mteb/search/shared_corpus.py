"""One corpus encoding and one index (exact or USearch ANN) for every task that searches the same corpus.

mteb's ``SearchEncoderWrapper`` encodes the corpus again for each task and clears its index after each one: 48
encodings of 239,704 passages for DisastIR. :class:`SharedCorpusSearch` implements mteb's ``SearchProtocol``
instead, recognising a corpus it already holds and taking embeddings from the persistent store.

The caller's model is never changed: each call into it borrows it (:func:`~disastir_mteb.models.loan.borrow`).
One module because it is one class: the store keys, the held corpus and the counters are its own state.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.types import PromptType

from disastir_mteb.models.identity import ModelIdentity, served_behind
from disastir_mteb.models.loan import borrow
from disastir_mteb.models.precision import module_device, wrapper_chain
from disastir_mteb.models.prepared import prepare_model
from disastir_mteb.search.encoding import EncodingReport, SentenceTransformerPipeline, length_order
from disastir_mteb.search.exact_search import ExactIndex
from disastir_mteb.search.filed_searches import FiledSearches
from disastir_mteb.search.routing import (
    Rows,
    passage_prompt,
    query_prompt,
    resolve_devices,
    retrieval_texts,
    sentence_transformer_route,
    task_encoder,
)
from disastir_mteb.search.store import CHUNK_SIZE, EmbeddingStore, StoreKey, encode_in_memory, fingerprint_texts
from disastir_mteb.search.usearch_index import UsearchIndex
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.util.mteb_internals import dataset_fingerprint
from disastir_mteb.util.timings import Phase, clock
from disastir_mteb.vocabulary.ann_params import AnnParams, search_setting
from disastir_mteb.vocabulary.provenance import ModelProvenance, RunProvenance
from disastir_mteb.vocabulary.run_settings import RunSettings
from disastir_mteb.vocabulary.settings import (
    DEFAULT_BATCH_SIZE,
    EXACT,
    INSTRUCTED_PASSAGES,
    INSTRUCTIONS_KEY,
    PRECISIONS,
    SEARCH_KEY,
    TEMPLATE_KEY,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.models.model_meta import ModelMeta
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

    The model is asked for the vectors of a few fixed texts when the search model is built, so a model that cannot
    embed is refused before any task loads; their fingerprint joins every store and index key, so an unnamed model
    or one changed in place never meets another model's vectors.

    Args:
        model: an mteb encoder, a SentenceTransformer, a callable or a model name.
        settings: how it encodes and searches (default: exact search, the model as it is); every field is
            honoured here but ``cache_dir``, which the ``store`` stands for.
        store: where embeddings persist; None keeps them in memory for this process only.
        dtype: storage precision of persisted embeddings (``float32`` or ``float16``).
        chunk_size: passages per persisted chunk (rounded up to whole batches): a killed run loses at most one.

    Attributes:
        corpus_indexings: how many times a corpus had to be (re)loaded into the index.
        passages_encoded: passages actually sent to the model (0 on a warm cache).
        queries_encoded: queries actually sent to the model.
        corpus_passes: searches run over the index (one for all tasks when prefetched).
        texts_probed: texts sent to the model to identify it.
        filed: the top-k the shared pass filed per task, which each task's :meth:`search` takes.
        encoding: how the corpus was encoded, for the run summary.
    """

    def __init__(self, model: Any, settings: RunSettings | None = None, *, store: EmbeddingStore | None = None,
                 dtype: str = "float32", chunk_size: int = CHUNK_SIZE) -> None:
        self.settings = settings = settings or RunSettings()
        self.store = store
        self.dtype = dtype
        self.chunk_size = chunk_size
        self.encoding: EncodingReport | None = None
        self.filed = FiledSearches()
        self._runs = 0
        self._keep_rankings = False
        # probed now: a model that cannot embed is refused in one sentence before any task loads
        with borrow(model):
            self._prepared = prepare_model(model, precision=settings.precision, instructions=settings.instructions,
                                           model_revision=settings.model_revision, root=self._store_root)
        self.model = self._prepared.encoder
        # the caller's model where the encoder runs it (not a cast copy, not a name): borrowed by each call into it
        self._lent = model if any(node is model for node in wrapper_chain(self.model)) else None
        self.model_dtype = self._prepared.dtype
        self.texts_probed = self._prepared.texts_probed
        self._identity = self._prepared.identity
        meta = self._prepared.meta
        if meta is not None and self.ann is not None:
            meta = meta.model_copy(update={"experiment_kwargs": {**(meta.experiment_kwargs or {}),
                                                                 SEARCH_KEY: search_setting(self.ann)}})
        self._own_meta = meta
        self._rankings: dict[tuple[str, str, str], RetrievalOutputType] = {}
        self._held: tuple[str, str] | None = None
        self._doc_ids: list[str] = []
        self._embeddings: np.ndarray | None = None
        self._text_fingerprints: dict[str, str] = {}
        self.corpus_indexings = 0
        self.corpus_passes = 0
        self.passages_encoded = 0
        self.queries_encoded = 0

    @property
    def identity(self) -> ModelIdentity:
        """Who computes the vectors (probed when the search model is built, again by :meth:`start_run`)."""
        return self._identity

    @property
    def mteb_model_meta(self) -> ModelMeta | None:
        """The model's mteb metadata as its results are filed (an unnamed model's revision is its fingerprint)."""
        meta = self._own_meta
        if meta is not None and not self._identity.pinned:
            meta = meta.model_copy(update={"revision": self._identity.results_revision})
        return meta

    @functools.cached_property
    def devices(self) -> tuple[str, ...]:
        """The devices of the multi-process pool (``settings.devices`` resolved; empty: one process)."""
        return resolve_devices(self.settings.devices)

    @property
    def held_corpus(self) -> tuple[str, str] | None:
        """The corpus in the index now, as (its texts' fingerprint, its passage prompt); None before a task."""
        return self._held

    @property
    def ann(self) -> AnnParams | None:
        """The USearch parameters (``settings.ann``), None for exact search."""
        return self.settings.ann

    @property
    def batch_size(self) -> int | None:
        """Texts per forward pass (``settings.batch_size``); None = what mteb passes."""
        return self.settings.batch_size

    @property
    def tokenize_threads(self) -> int | None:
        """Threads tokenising passages ahead of the model (``settings.tokenize_threads``); None = automatic."""
        return self.settings.tokenize_threads

    @property
    def progress(self) -> bool:
        """Whether progress bars are shown (``settings.progress``)."""
        return self.settings.progress

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

    @property
    def provenance(self) -> RunProvenance:
        """What this search model's rankings depend on besides the data: the model as last identified and the settings.

        Tasks record it in their result files, and the runner reuses a stored result only where it is the same.
        """
        identity = self.identity
        experiment = dict(getattr(self._own_meta, "experiment_kwargs", None) or {})
        config = self.settings.instructions
        settings = {
            "search": search_setting(self.ann) if self.ann is not None else EXACT,
            "instructions": str(experiment.get(INSTRUCTIONS_KEY, "none")),
            "template": str(experiment.get(TEMPLATE_KEY, "none")),
            "passages": INSTRUCTED_PASSAGES if config is not None and config.passages else "raw",
            "precision": next((name for name, dtype in PRECISIONS.items() if dtype == self.model_dtype), "none"),
            "batch_size": str(self.batch_size or DEFAULT_BATCH_SIZE),
        }
        served = served_behind(self.model)  # embedding servers: what they report, beside a pinned revision
        return RunProvenance(ModelProvenance(identity.name, identity.revision, identity.fingerprint,
                                             identity.configuration, identity.content,
                                             served=getattr(served, "served_revision", "")), settings)

    def encoding_settings(self) -> dict[str, object]:
        """What the stored vectors depend on besides the texts, for result records: fingerprint, batches, dtype."""
        report = self.encoding
        return {"model_fingerprint": self.identity.fingerprint,
                "batch_size": report.batch_size if report else self.batch_size, "model_dtype": self.model_dtype,
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
        """One line: exact (and where it runs), or the ANN parameters (and whether its build repeats)."""
        if self.ann is None:
            device = getattr(self.index_backend, "device", None)
            return f"exact (blocked inner product{f' on {device}' if device is not None else ''})"
        racy = "" if self.ann.repeatable else " (a multi-threaded build: its scores do not repeat from build to build)"
        return f"ANN {self.ann.describe()}{racy}"

    # ------------------------------------------------------------------ identity of an embedding
    def start_run(self, *, keep_rankings: bool = False) -> ModelIdentity:
        """Identify the model again if an earlier run used this search model: it may have changed in place since.

        When it computes something else now, the held corpus and every search filed early are dropped, so each vector
        is looked up (or encoded) under the new identity. ``keep_rankings`` keeps each task's last search until
        :meth:`take_ranking` takes it; plain ``mteb.evaluate`` would only accumulate them.
        """
        self._keep_rankings = keep_rankings
        if self._runs:
            identity = self._identify(again=True)
            if identity.fingerprint != self._identity.fingerprint:
                logger.info("The model computes other vectors than in this search model's last run: %s.",
                            identity.describe())
                if identity.passage_fingerprint != self._identity.passage_fingerprint:
                    self._held = None  # its passages too: the corpus is looked up (or encoded) again
                self.filed.clear()
                self._rankings.clear()
            self._identity = identity
        self._runs += 1
        return self.identity

    @functools.cached_property
    def index_backend(self) -> ExactIndex | UsearchIndex:
        """The index every task searches: USearch with ``settings.ann``, else exact (on the model's GPU if on one)."""
        if self.ann is not None:
            return UsearchIndex(self.ann, keep_on_clear=True, progress=self.progress)
        device = module_device(self.model)
        return ExactIndex(keep_on_clear=True, device=device if device and device.startswith("cuda") else None)

    @property
    def _store_root(self) -> Path | None:
        return self.store.root if self.store is not None else None

    @property
    def _lasting_store(self) -> EmbeddingStore | None:
        """The store, for a model whose vectors may be reused later; None for one identified for this call only."""
        return self.store if self._identity.reusable else None

    def _identify(self, *, again: bool) -> ModelIdentity:
        """Probe the model and match its fingerprint in the store (the count of texts probed kept)."""
        with borrow(self._lent):
            identity, probed = self._prepared.identify(self._store_root, again=again)
        self.texts_probed += probed
        return identity

    def _model_key(self) -> tuple[str, str | None]:
        """The model's own name and revision (never the fingerprint revision its results may be filed under)."""
        return self._prepared.key

    def _batch_size(self, encode_kwargs: EncodeKwargs) -> int:
        """The batch size in force: the constructor's, else what mteb passes, else mteb's default 32."""
        return int(self.batch_size or encode_kwargs.get("batch_size") or DEFAULT_BATCH_SIZE)

    def _embed(self, side: str, texts: list[str], prompt: str, encode: Callable[[list[str]], Any], *,
               batch_size: int, order: np.ndarray | None = None, texts_fingerprint: str | None = None) -> np.ndarray:
        """Vectors of ``texts`` (row ``i`` = text ``i``) from the store, encoding what is missing in ``order``."""
        with clock(Phase.passages if side == "corpus" else Phase.queries):  # the store marks its own work
            if self._lasting_store is None:
                return encode_in_memory(texts, encode, order, self._chunk_size(batch_size),
                                        progress=side if self.progress and side == "corpus" else None)
            key = self._store_key(side, texts, prompt, batch_size, texts_fingerprint)
            return self._lasting_store.get_or_encode(key, texts, encode, chunk_size=self._chunk_size(batch_size),
                                            progress=self.progress and side == "corpus", order=order)

    def _chunk_size(self, batch_size: int) -> int:
        """``chunk_size`` rounded up to whole batches, so chunks hold the batches of one encode call."""
        return -(-self.chunk_size // batch_size) * batch_size

    @clock(Phase.store)
    def _store_key(self, side: str, texts: list[str], prompt: str, batch_size: int,
                   texts_fingerprint: str | None = None) -> StoreKey:
        name, revision = self._model_key()
        fingerprint = texts_fingerprint or fingerprint_texts(texts)
        identity = self.identity
        return StoreKey(model_name=name, model_revision=revision, side=side, prompt=prompt,  # type: ignore[arg-type]
                        texts_fingerprint=fingerprint, dtype=self.dtype,  # type: ignore[arg-type]
                        batch_size=batch_size, precision=self.model_dtype,
                        model_fingerprint=identity.passage_fingerprint if side == "corpus" else identity.fingerprint)

    def _encoder(self, task_metadata: TaskMetadata, prompt_type: PromptType, hf_split: str, hf_subset: str,
                 encode_kwargs: EncodeKwargs, num_proc: int | None) -> Callable[[list[str]], Any]:
        """The encoder of one task's texts, counted here; for passages it also starts :attr:`encoding`."""
        passages = prompt_type == PromptType.document
        encode, report = task_encoder(self.model, task_metadata, prompt_type, hf_split, hf_subset, encode_kwargs,
                                      num_proc, batch_size=self._batch_size(encode_kwargs), devices=self.devices,
                                      tokenize_threads=self.tokenize_threads, progress=self.progress,
                                      precision=self.model_dtype,
                                      count=self._count_passages if passages else self._count_queries)
        if passages:
            self.encoding = report
        return encode

    def _count_passages(self, n: int) -> None:
        self.passages_encoded += n

    def _count_queries(self, n: int) -> None:
        self.queries_encoded += n

    def _query_embeddings(self, queries: QueryDatasetType, task_metadata: TaskMetadata, hf_split: str,
                          hf_subset: str, encode_kwargs: EncodeKwargs, num_proc: int | None) -> np.ndarray:
        with clock(Phase.tasks):
            texts = retrieval_texts(queries, PromptType.query, task_metadata=task_metadata)
        if not texts:
            return np.zeros((0, 1), np.float32)
        encode = self._encoder(task_metadata, PromptType.query, hf_split, hf_subset, encode_kwargs, num_proc)
        prompt = query_prompt(self.model, task_metadata)
        return np.asarray(self._embed("queries", texts, prompt, encode, batch_size=self._batch_size(encode_kwargs)))

    def query_vectors(self, items: Sequence[tuple[Any, Any]], encode_kwargs: EncodeKwargs) -> list[np.ndarray]:
        """The query vectors of several tasks, a block per (task, its split's data), through the store.

        In one length-sorted pass over all their queries when they all reach one plain SentenceTransformer, else task
        by task.
        """
        with borrow(self._lent):
            blocks = self._joint_query_embeddings(items, encode_kwargs)
            if blocks is None:
                blocks = [self._query_embeddings(data["queries"], task.metadata, task.metadata.eval_splits[0],
                                                 "default", encode_kwargs, None) for task, data in items]
        return blocks

    def search_vectors(self, vectors: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
        """One pass of ``vectors`` over the held corpus: the top-``top_k`` similarities and row numbers per vector."""
        if self._held is None:
            raise InvalidInput("Corpus must be indexed before searching.")
        self.corpus_passes += 1
        with borrow(self._lent):  # the model's similarity is asked which one it is
            return self.index_backend.search(vectors, top_k, similarity_fn=self.model.similarity)

    def _joint_query_embeddings(self, items: list[tuple[Any, Any]],
                                encode_kwargs: EncodeKwargs) -> list[np.ndarray] | None:
        """Every task's query vectors from one length-sorted pass over all their queries, or None.

        48 encode calls of 200 queries each sort and pad worse and pay the per-call cost 48 times. The queries missing
        from the store are encoded together (per distinct prompt), then filed per task under the keys task-by-task
        encoding uses.
        """
        routes = [sentence_transformer_route(self.model, task.metadata, PromptType.query) for task, _ in items]
        if not routes or any(r is None or r.model is not routes[0].model for r in routes):  # type: ignore[union-attr]
            return None
        batch_size = self._batch_size(encode_kwargs)
        planned = []
        for (task, data), route in zip(items, routes, strict=True):
            with clock(Phase.tasks):
                raw = retrieval_texts(data["queries"], PromptType.query, task_metadata=task.metadata)
            key_prompt = query_prompt(self.model, task.metadata)
            store = self._lasting_store
            cached = None if store is None else store.cached(
                self._store_key("queries", raw, key_prompt, batch_size), len(raw))
            final = raw if route.transform is None else [route.transform(text) for text in raw]  # type: ignore[union-attr]
            planned.append((raw, key_prompt, final, route.prompt, cached))  # type: ignore[union-attr]
        vectors: dict[int, np.ndarray] = {}
        for prompt in dict.fromkeys(p[3] for p in planned if p[4] is None):
            members = [n for n, p in enumerate(planned) if p[4] is None and p[3] == prompt]
            texts = [text for n in members for text in planned[n][2]]
            pipeline = SentenceTransformerPipeline(routes[0].model, batch_size=batch_size, prompt=prompt,  # type: ignore[union-attr]
                                                   tokenize_threads=self.tokenize_threads, side="query")
            encoded = encode_in_memory(texts, pipeline, length_order(texts), self._chunk_size(batch_size),
                                       progress="queries" if self.progress else None)
            self.queries_encoded += len(texts)
            row = 0
            for n in members:
                vectors[n] = encoded[row:row + len(planned[n][2])]
                row += len(planned[n][2])
        blocks = []
        for n, (raw, key_prompt, _, _, cached) in enumerate(planned):
            if cached is not None:
                blocks.append(np.asarray(cached))
            else:
                blocks.append(np.asarray(self._embed("queries", raw, key_prompt, Rows(vectors[n]),
                                                     batch_size=batch_size)))
        if vectors:
            logger.info("Encoded the queries of %d task(s) in one length-sorted pass.", len(vectors))
        return blocks

    # ------------------------------------------------------------------ mteb SearchProtocol
    def index(self, corpus: CorpusDatasetType, *, task_metadata: TaskMetadata, hf_split: str, hf_subset: str,
              encode_kwargs: EncodeKwargs, num_proc: int | None = None, **kwargs: Any) -> None:
        """Make ``corpus`` searchable; a no-op when the same corpus and passage prompt are already held."""
        prompt = passage_prompt(self.model, task_metadata)
        identity = dataset_fingerprint(corpus)  # None: no quick identity, the texts' own fingerprint decides
        if (identity is not None and self._held is not None and self._held[1] == prompt
                and self._held[0] == self._text_fingerprints.get(identity)):
            logger.debug("%s: corpus already indexed, reused.", task_metadata.name)
            return
        with clock(Phase.tasks):
            texts = retrieval_texts(corpus, PromptType.document, task_metadata=task_metadata)
        with clock(Phase.store):
            text_fingerprint = fingerprint_texts(texts)
        if identity is not None:
            self._text_fingerprints[identity] = text_fingerprint
        if self._held == (text_fingerprint, prompt):  # same texts under another datasets fingerprint
            return
        with clock(Phase.passages), borrow(self._lent):
            encode = self._encoder(task_metadata, PromptType.document, hf_split, hf_subset, encode_kwargs, num_proc)
            embeddings = self._embed("corpus", texts, prompt, encode, batch_size=self._batch_size(encode_kwargs),
                                     order=length_order(texts), texts_fingerprint=text_fingerprint)
        with clock(Phase.index):
            self._doc_ids = [str(i) for i in corpus["id"][:]]  # a slice: a Column indexed row by row is slow
            self._embeddings = embeddings
            if isinstance(self.index_backend, UsearchIndex):
                self.index_backend.cache_dir = None
            if isinstance(self.index_backend, UsearchIndex) and self._lasting_store is not None:
                name, revision = self._model_key()
                self.index_backend.cache_dir = self._lasting_store.root
                self.index_backend.cache_key = (f"{name}@{revision}#{self.identity.passage_fingerprint}|"
                                                f"{text_fingerprint}|"
                                                f"{self.dtype}|{prompt}")
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
            raise InvalidInput("Corpus must be indexed before searching.")
        query_ids = [str(i) for i in queries["id"]]
        ready = self.filed.take((task_metadata.name, hf_split, hf_subset, self._held), query_ids, top_k)
        if ready is not None and top_ranked is None:
            return self._keep_ranking(task_metadata.name, hf_split, hf_subset, ready)
        query_idx_to_id = dict(enumerate(query_ids))
        with borrow(self._lent):  # the queries encoded, the model's similarity asked
            query_embeddings = self._query_embeddings(queries, task_metadata, hf_split, hf_subset, encode_kwargs,
                                                      num_proc)
            with clock(Phase.search):
                values, indices = self.index_backend.search(query_embeddings, top_k,
                                                            similarity_fn=self.model.similarity,
                                                            top_ranked=top_ranked, query_idx_to_id=query_idx_to_id)
        with clock(Phase.search):
            self.corpus_passes += 1
            results: RetrievalOutputType = {}
            for row, query_id in enumerate(query_ids):
                candidates = self._doc_ids if top_ranked is None else list(top_ranked.get(query_id, []))
                results[query_id] = {candidates[int(i)]: float(v)
                                     for v, i in zip(values[row], indices[row], strict=True)}
        return self._keep_ranking(task_metadata.name, hf_split, hf_subset, results)

    def _keep_ranking(self, task: str, split: str, subset: str, results: RetrievalOutputType) -> RetrievalOutputType:
        """Remember the last search of each task for per-query scores; return ``results`` unchanged."""
        if self._keep_rankings:
            self._rankings[(task, split, subset)] = results
        return results

    def take_ranking(self, task: str, split: str, subset: str) -> RetrievalOutputType | None:
        """The last search of ``task`` on ``split``/``subset`` kept for its per-query scores (dropped from here)."""
        return self._rankings.pop((task, split, subset), None)

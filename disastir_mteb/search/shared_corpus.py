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

How a task's texts reach the model: a plain SentenceTransformer behind known wrappers
(``with_instructions``, mteb's SentenceTransformer wrapper) is found with its prompt and text
transform (a ``_Route``); its passages then go through the pipelined encoder
(:class:`~disastir_mteb.search.encoding.SentenceTransformerPipeline`) or, over several devices,
sentence-transformers' multi-process pool; everything else goes through mteb's ``encode``. The
prompts found on the way are also what the embedding cache key records besides the texts.

Who computes the vectors: the search model asks its model for the vectors of a few fixed texts when
it is built (and at each later run), and the fingerprint they give
(:mod:`disastir_mteb.models.identity`) joins every store key and the ANN index's key, so an in-memory
model without name or revision, or a model changed in place, never meets another model's vectors; a
model without a revision of its own has its results filed under that fingerprint.

Every task's queries in one pass: :meth:`SharedCorpusSearch.prefetch` indexes the shared corpus,
encodes every task's queries (together, longest first, when they all reach one plain
SentenceTransformer), searches them all at once and files each task's top-k, which that task's own
``search`` then hands back at once. :func:`answered_by_prefetch` tells the runner which tasks need
no model any more, :func:`forget_prefetched` drops what a task did not take.

One module because it is one class: the routes, the encoders and the prefetch read and write the
searcher's own state (its held corpus, its counters, what the pass filed).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.types import PromptType

from disastir_mteb.models.adapter import as_mteb_encoder, with_instructions
from disastir_mteb.models.identity import ModelIdentity, configuration_digest, identify, probe_vectors
from disastir_mteb.search.encoding import (
    EncodingReport,
    SentenceTransformerPipeline,
    length_order,
    plain_sentence_transformer,
)
from disastir_mteb.search.exact_search import ExactIndex
from disastir_mteb.search.precision import in_precision, module_device, module_dtype
from disastir_mteb.search.store import CHUNK_SIZE, EmbeddingStore, StoreKey, encode_in_memory, fingerprint_texts
from disastir_mteb.search.usearch_index import UsearchIndex
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.util.mteb_internals import create_dataloader, dataset_fingerprint, mteb_retrieval_texts, search_depth
from disastir_mteb.util.timings import Phase, clock
from disastir_mteb.vocabulary.ann_params import AnnParams, search_setting
from disastir_mteb.vocabulary.instructions import InstructionConfig
from disastir_mteb.vocabulary.provenance import ModelProvenance, RunProvenance
from disastir_mteb.vocabulary.run_settings import RunSettings
from disastir_mteb.vocabulary.settings import (
    DEFAULT_BATCH_SIZE,
    EXACT,
    INSTRUCTED_PASSAGES,
    INSTRUCTIONS_KEY,
    PRECISION_KEY,
    PRECISIONS,
    QUERY_SIDE_KEYS,
    SEARCH_KEY,
    TEMPLATE_KEY,
)
from disastir_mteb.vocabulary.taxonomy import ALL_TASK_NAMES, get_spec

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

    from disastir_mteb.models.embedding_servers import EmbeddingServers
    from disastir_mteb.util.timings import Timings

logger = logging.getLogger(__name__)

__all__ = ["SharedCorpusSearch", "answered_by_prefetch", "forget_prefetched"]

_DISASTIR = ALL_TASK_NAMES  # every query set's tasks: DisastIR-Test-QA-Bio gets QA's instruction too
_PrefetchKey = tuple[str, str, str, "tuple[str, str] | None"]  # task, split, subset, held corpus


class SharedCorpusSearch:
    """An mteb search model: encode a shared corpus once, index it once, search it for every task.

    Args:
        model: an mteb encoder, a SentenceTransformer or a callable (see ``as_mteb_encoder``).
        settings: how it encodes and searches (:class:`~disastir_mteb.vocabulary.run_settings.RunSettings`;
            default: exact search, the model as it is). Every field is honoured here but ``cache_dir``
            (the store is given as ``store``):

            - ``ann``: search with USearch instead of exactly; the index persists under the store's root.
              Exact search runs on the model's GPU when it is on one (same rankings as on the CPU).
            - ``instructions``: put in front of queries (and passages) here, with ``with_instructions``.
            - ``batch_size``: texts per forward pass; None = what mteb passes (``encode_kwargs``, 32 by default).
            - ``precision``: encode with a copy of the model whose weights are cast to it (the model passed in is
              never changed). A precision other than the model's own joins the mteb experiment settings
              (``disastir_precision``), so its results are filed apart; the dtype is part of the
              embedding cache key either way.
            - ``devices``: spread corpus encoding over several devices with sentence-transformers'
              multi-process pool (e.g. ``("cuda:0", "cuda:1")``); ``"auto"`` = every visible CUDA device
              when there are two or more, else one process (which on CPU uses all cores). Only for
              SentenceTransformer-based models whose passages carry no prompt; others encode in one process.
            - ``tokenize_threads``: threads tokenising passages ahead of the model on the pipelined path
              (:class:`~disastir_mteb.search.encoding.SentenceTransformerPipeline`); None = 1 on a CPU, all
              cores but one (at most 8) on a GPU.
            - ``progress``: progress bars (rate, ETA) while encoding the corpus.
        store: where embeddings persist; None keeps them in memory for this process only.
        dtype: storage precision of persisted embeddings (``float32`` or ``float16``).
        chunk_size: passages per persisted chunk (rounded up to whole batches): a killed run loses at most one
            chunk of work. The default, :data:`~disastir_mteb.search.store.CHUNK_SIZE` (1,024), is seconds of a
            small model on a CPU, whatever the corpus size.

    Attributes:
        corpus_indexings: how many times a corpus had to be (re)loaded into the index.
        passages_encoded: passages actually sent to the model (0 on a warm cache).
        queries_encoded: queries actually sent to the model.
        corpus_passes: searches run over the index (one for all tasks when prefetched).
        index_builds: search structures built (HNSW graphs; for exact search, corpus loads into the
            index); ``index_loads``: ANN indexes memory-mapped from the cache instead.
        identity: who computes the vectors (:class:`~disastir_mteb.models.identity.ModelIdentity`): the model's
            name, revision and the fingerprint of what it computes, found when the search model is built (and
            again at each later run, :meth:`start_run`). The fingerprint is part of every embedding cache key, so
            two in-memory models, or a model changed in place, never share vectors.
        texts_probed: texts sent to the model to identify it (the probe texts, once per identification).
        rankings: with ``keep_rankings`` set (the runner sets it), the last search's results by
            (task, split, subset), for per-query scores; the runner takes each task's out once it
            is scored. Off by default, so plain ``mteb.evaluate`` does not accumulate them.
        mteb_model_meta: the model's metadata; with ``ann`` its ``experiment_kwargs`` also hold
            ``disastir_search`` = the parameters' :meth:`~disastir_mteb.search.usearch_index.AnnParams.label`.
            A model without a name and revision of its own has its fingerprint as revision
            (``fingerprint-<16 hex>``), so its results are filed apart from any other model's.
        encoding: how the corpus was encoded (path, batches, precision, device, tokenisation,
            ``max_seq_length`` and how many passages reached it), for the run summary.
        timings: where the last run's wall time went (:class:`~disastir_mteb.util.timings.Timings`), set by the
            runner at the end of each run (None before one); its phases are marked in here, in the store and
            in the index.
    """

    def __init__(self, model: Any, settings: RunSettings | None = None, *, store: EmbeddingStore | None = None,
                 dtype: str = "float32", chunk_size: int = CHUNK_SIZE) -> None:
        self.settings = settings = settings or RunSettings()
        own = module_dtype(model)
        model = in_precision(model, settings.precision)  # a cast copy, before any wrapper touches the caller's model
        if settings.instructions is not None:
            model = with_instructions(model, settings.instructions)
        model = as_mteb_encoder(model, "SharedCorpusSearch")
        self.model = model
        self.model_dtype = module_dtype(model)
        experiment: dict[str, Any] = {}
        if self.model_dtype is not None and own is not None and self.model_dtype != own:
            experiment[PRECISION_KEY] = next(k for k, v in PRECISIONS.items() if v == self.model_dtype)
        if self.ann is not None:
            experiment[SEARCH_KEY] = search_setting(self.ann)
        meta = model.mteb_model_meta
        if experiment and meta is not None:
            meta = meta.model_copy(update={"experiment_kwargs": {**(meta.experiment_kwargs or {}), **experiment}})
        self._own_meta = self.mteb_model_meta = meta
        self.encoding: EncodingReport | None = None
        self.timings: Timings | None = None
        self.store = store
        self.texts_probed = 0
        self._runs = 0
        self.identity = self._identify(again=False)
        self.dtype = dtype
        self.chunk_size = chunk_size
        self.devices = _resolve_devices(settings.devices)
        self._prefetched: dict[_PrefetchKey, tuple[int, dict[str, dict[str, float]]]] = {}
        device = module_device(model)
        self.index_backend: ExactIndex | UsearchIndex = (
            ExactIndex(keep_on_clear=True, device=device if device and device.startswith("cuda") else None)
            if self.ann is None else UsearchIndex(self.ann, keep_on_clear=True, progress=settings.progress))
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
        """What this search model's rankings depend on besides the data: the model and the settings.

        The model as last identified (:attr:`identity`: its fingerprint covers what it computes on both sides and
        how it is configured), and the settings that shape a ranking: the search, the instructions (set, template,
        whether passages get them), the precision the weights run in (``fp32``, ``fp16``, ``bf16``, or ``none``
        without torch weights) and the batch size. Tasks record it in their
        result files and the runner reuses a stored result only where it is the same
        (:mod:`disastir_mteb.vocabulary.provenance`).
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
        return RunProvenance(ModelProvenance(identity.name, identity.revision, identity.fingerprint,
                                             identity.configuration), settings)

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
        """One line: exact (and where it runs), or the ANN parameters."""
        if self.ann is None:
            device = getattr(self.index_backend, "device", None)
            return f"exact (blocked inner product{f' on {device}' if device is not None else ''})"
        return f"ANN {self.ann.describe()}"

    # ------------------------------------------------------------------ identity of an embedding
    def start_run(self) -> ModelIdentity:
        """Identify the model again if an earlier run used this search model: it may have changed in place since.

        The first run takes the identity found when the search model was built. A later one (a ready search
        model evaluated again, say after a training step in a notebook) probes the model again; when it
        computes something else now, the corpus held in the index and every search filed early are dropped,
        so that each vector is looked up (or encoded) under the new identity, and an unnamed model's results
        go to the folder of its new fingerprint.
        """
        if self._runs:
            identity = self._identify(again=True)
            if identity.fingerprint != self.identity.fingerprint:
                logger.info("The model computes other vectors than in this search model's last run: %s.",
                            identity.describe())
                if identity.passage_fingerprint != self.identity.passage_fingerprint:
                    self._held = None  # its passages too: the corpus is looked up (or encoded) again
                self._prefetched.clear()
                self.rankings.clear()
            self.identity = identity
        self._runs += 1
        return self.identity

    def _identify(self, *, again: bool) -> ModelIdentity:
        """Probe the model, match its fingerprint in the store, and file an unnamed model's results under it."""
        vectors = probe_vectors(self.model, again=again)
        self.texts_probed += len(vectors)
        name, revision = self._model_key()
        identity = identify(vectors, name=name, revision=revision, precision=self.model_dtype,
                            root=self.store.root if self.store is not None else None,
                            configuration=configuration_digest(self.model),
                            passage_configuration=configuration_digest(self.model, passages=True))
        meta = self._own_meta
        if meta is not None and not identity.pinned:
            meta = meta.model_copy(update={"revision": identity.results_revision})
        self.mteb_model_meta = meta
        return identity

    def _model_key(self) -> tuple[str, str | None]:
        """The model's own name and revision (never the fingerprint revision its results may be filed under)."""
        meta = self._own_meta
        return (getattr(meta, "name", None) or type(self.model).__name__, getattr(meta, "revision", None))

    def _batch_size(self, encode_kwargs: EncodeKwargs) -> int:
        """The batch size in force: the constructor's, else what mteb passes, else mteb's default 32."""
        return int(self.batch_size or encode_kwargs.get("batch_size") or DEFAULT_BATCH_SIZE)

    def _embed(self, side: str, texts: list[str], prompt: str, encode: Callable[[list[str]], Any], *,
               batch_size: int, order: np.ndarray | None = None, texts_fingerprint: str | None = None) -> np.ndarray:
        """Vectors of ``texts`` (row ``i`` = text ``i``) from the store, encoding what is missing in ``order``.

        ``texts_fingerprint``: :func:`fingerprint_texts` of ``texts`` when the caller has it already.
        """
        with clock(Phase.passages if side == "corpus" else Phase.queries):  # the store marks its own work
            if self.store is None:
                return encode_in_memory(texts, encode, order, self._chunk_size(batch_size),
                                        progress=side if self.progress and side == "corpus" else None)
            key = self._store_key(side, texts, prompt, batch_size, texts_fingerprint)
            return self.store.get_or_encode(key, texts, encode, chunk_size=self._chunk_size(batch_size),
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

    def _count_passages(self, n: int) -> None:
        self.passages_encoded += n

    def _encoder(self, task_metadata: TaskMetadata, prompt_type: PromptType, hf_split: str, hf_subset: str,
                 encode_kwargs: EncodeKwargs, num_proc: int | None) -> Callable[[list[str]], Any]:
        """The encoder of one task's texts: pipelined, pooled or mteb's ``encode``; it counts (and times) here.

        For passages it also starts :attr:`encoding`, the report of how the corpus was encoded.
        """
        from datasets import Dataset

        batch_size = self._batch_size(encode_kwargs)
        encode_kwargs = {**encode_kwargs, "batch_size": batch_size}  # type: ignore[typeddict-item]
        route = (_sentence_transformer_route(self.model, task_metadata, prompt_type)
                 if prompt_type == PromptType.document else None)
        if prompt_type == PromptType.document:
            limit = getattr(route.model, "max_seq_length", None) if route else None
            self.encoding = EncodingReport("model.encode (mteb)", batch_size, precision=self.model_dtype,
                                           device=module_device(self.model), max_seq_length=limit)
        if route is not None and len(self.devices) > 1:
            pool_model, prompt = route.model, route.prompt
            logger.info("Encoding passages on %s with sentence-transformers' multi-process pool.", self.devices)
            self.encoding.path = "multi-process pool"  # type: ignore[union-attr]
            self.encoding.device = ", ".join(self.devices)  # type: ignore[union-attr]

            def encode_on_devices(texts: list[str]) -> Any:
                output = pool_model.encode_document(texts, prompt=prompt, device=list(self.devices),
                                                    convert_to_numpy=True, batch_size=batch_size,
                                                    show_progress_bar=False)
                self.passages_encoded += len(texts)
                return output

            return _timed(encode_on_devices, self.encoding)
        if route is not None:
            pipeline = SentenceTransformerPipeline(route.model, batch_size=batch_size, prompt=route.prompt,
                                                   tokenize_threads=self.tokenize_threads, report=self.encoding)
            return _Counted(pipeline, self._count_passages)

        served = _served_passages(self.model) if prompt_type == PromptType.document else None
        if served is not None:
            self.encoding.path = f"{len(served.servers)} embedding server(s)"  # type: ignore[union-attr]
            self.encoding.device = ", ".join(server.url for server in served.servers)  # type: ignore[union-attr]
            return _Counted(_ServedStream(served, batch_size, self.encoding), self._count_passages)

        if prompt_type == PromptType.document and self.progress:
            encode_kwargs["show_progress_bar"] = False  # the corpus bar counts these texts; one bar, not two

        def encode(texts: list[str]) -> Any:
            ids = [str(i) for i in range(len(texts))]
            loader = (passage_loader(texts, batch_size) if prompt_type == PromptType.document else
                      create_dataloader(Dataset.from_dict({"id": ids, "text": texts}), task_metadata=task_metadata,
                                        prompt_type=prompt_type, num_proc=num_proc, **encode_kwargs))
            output = self.model.encode(loader, task_metadata=task_metadata, hf_split=hf_split,
                                       hf_subset=hf_subset, prompt_type=prompt_type, **encode_kwargs)
            if prompt_type == PromptType.document:
                self.passages_encoded += len(texts)
            else:
                self.queries_encoded += len(texts)
            return output

        return _timed(encode, self.encoding) if prompt_type == PromptType.document else encode

    def _query_embeddings(self, queries: QueryDatasetType, task_metadata: TaskMetadata, hf_split: str,
                          hf_subset: str, encode_kwargs: EncodeKwargs, num_proc: int | None) -> np.ndarray:
        with clock(Phase.tasks):
            texts = retrieval_texts(queries, PromptType.query)
        if not texts:
            return np.zeros((0, 1), np.float32)
        encode = self._encoder(task_metadata, PromptType.query, hf_split, hf_subset, encode_kwargs, num_proc)
        prompt = _query_prompt(self.model, task_metadata)
        return np.asarray(self._embed("queries", texts, prompt, encode, batch_size=self._batch_size(encode_kwargs)))

    def prefetch(self, tasks: Sequence[Any], *, encode_kwargs: EncodeKwargs | None = None) -> int:
        """Search all tasks' queries in ONE pass over the corpus, before mteb asks task by task.

        It indexes the shared corpus, encodes every task's queries (together, longest first, when
        they all reach one plain SentenceTransformer), searches them all at once and files each
        task's top-k, which that task's own :meth:`search` then hands back at once. Searching per
        task streams the whole corpus once per task (48 passes); one pass for all 9,600 queries
        costs about what a single task's pass does. Only DisastIR tasks are prefetched, and only
        when they share one corpus and passage prompt; the others are searched as usual.

        Returns:
            How many tasks were prefetched (0 when they do not share one corpus).
        """
        from tqdm.auto import tqdm

        encode_kwargs = dict(encode_kwargs or {"batch_size": self.batch_size or DEFAULT_BATCH_SIZE})
        items: list[tuple[Any, Any]] = []
        owners: list[tuple[_PrefetchKey, list[str], int]] = []
        ours = [task for task in tasks if task.metadata.name in _DISASTIR]  # other tasks keep the per-task path
        with clock(Phase.tasks):
            for task in tqdm(ours, desc="Loading tasks", unit=" tasks", disable=not self.progress, leave=False,
                             dynamic_ncols=True):
                if not task.data_loaded:
                    task.load_data()
        for task in ours:  # the first indexes (encodes) the shared corpus, under its own bar; the rest reuse it
            split, subset = task.metadata.eval_splits[0], "default"
            data = task.dataset[subset][split]
            self.index(data["corpus"], task_metadata=task.metadata, hf_split=split, hf_subset=subset,
                       encode_kwargs=encode_kwargs)
            if owners and owners[0][0][3] != self._held:  # not one shared corpus after all: do nothing early
                logger.info("Tasks do not share one corpus; searching task by task.")
                return 0
            items.append((task, data))
            owners.append(((task.metadata.name, split, subset, self._held),
                           [str(i) for i in data["queries"]["id"]], search_depth(task)))
        if not owners:
            return 0
        with clock(Phase.queries):
            blocks = self._joint_query_embeddings(items, encode_kwargs)
            if blocks is None:
                blocks = [self._query_embeddings(data["queries"], task.metadata, task.metadata.eval_splits[0],
                                                 "default", encode_kwargs, None) for task, data in items]
        top_k = max(k for _, _, k in owners)
        with clock(Phase.search):
            values, indices = self.index_backend.search(np.concatenate(blocks), top_k,
                                                        similarity_fn=self.model.similarity)
            self.corpus_passes += 1
            row = 0
            for key, query_ids, _ in owners:
                self._prefetched[key] = (top_k, {
                    qid: {self._doc_ids[int(i)]: float(v)
                          for v, i in zip(values[row + n], indices[row + n], strict=True)}
                    for n, qid in enumerate(query_ids)})
                row += len(query_ids)
        logger.info("Searched %d queries of %d task(s) in one pass over the corpus.", row, len(owners))
        return len(owners)

    def _joint_query_embeddings(self, items: list[tuple[Any, Any]],
                                encode_kwargs: EncodeKwargs) -> list[np.ndarray] | None:
        """Every task's query vectors from ONE length-sorted pass over all their queries, or None.

        48 encode calls of 200 queries each sort and pad worse and pay the per-call cost 48 times.
        When every task's queries reach the same plain SentenceTransformer through known steps
        (:func:`_sentence_transformer_route`), the queries still missing from the store are encoded
        together (per distinct prompt), longest first, then filed per task under the same keys as
        task-by-task encoding; otherwise (None) each task encodes its own.
        """
        routes = [_sentence_transformer_route(self.model, task.metadata, PromptType.query) for task, _ in items]
        if not routes or any(r is None or r.model is not routes[0].model for r in routes):  # type: ignore[union-attr]
            return None
        batch_size = self._batch_size(encode_kwargs)
        planned = []
        for (task, data), route in zip(items, routes, strict=True):
            with clock(Phase.tasks):
                raw = retrieval_texts(data["queries"], PromptType.query)
            key_prompt = _query_prompt(self.model, task.metadata)
            cached = None if self.store is None else self.store.cached(
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
                blocks.append(np.asarray(self._embed("queries", raw, key_prompt, _Rows(vectors[n]),
                                                     batch_size=batch_size)))
        if vectors:
            logger.info("Encoded the queries of %d task(s) in one length-sorted pass.", len(vectors))
        return blocks

    # ------------------------------------------------------------------ mteb SearchProtocol
    def index(self, corpus: CorpusDatasetType, *, task_metadata: TaskMetadata, hf_split: str, hf_subset: str,
              encode_kwargs: EncodeKwargs, num_proc: int | None = None, **kwargs: Any) -> None:
        """Make ``corpus`` searchable; a no-op when the same corpus and passage prompt are already held."""
        prompt = _passage_prompt(self.model, task_metadata)
        identity = dataset_fingerprint(corpus)  # None: no quick identity, the texts' own fingerprint decides
        if (identity is not None and self._held is not None and self._held[1] == prompt
                and self._held[0] == self._text_fingerprints.get(identity)):
            logger.debug("%s: corpus already indexed, reused.", task_metadata.name)
            return
        with clock(Phase.tasks):
            texts = retrieval_texts(corpus, PromptType.document)
        with clock(Phase.store):
            text_fingerprint = fingerprint_texts(texts)
        if identity is not None:
            self._text_fingerprints[identity] = text_fingerprint
        if self._held == (text_fingerprint, prompt):  # same texts under another datasets fingerprint
            return
        with clock(Phase.passages):
            encode = self._encoder(task_metadata, PromptType.document, hf_split, hf_subset, encode_kwargs, num_proc)
            embeddings = self._embed("corpus", texts, prompt, encode, batch_size=self._batch_size(encode_kwargs),
                                     order=length_order(texts), texts_fingerprint=text_fingerprint)
        with clock(Phase.index):
            self._doc_ids = [str(i) for i in corpus["id"][:]]  # a slice: a Column indexed row by row is slow
            self._embeddings = embeddings
            if isinstance(self.index_backend, UsearchIndex) and self.store is not None:
                name, revision = self._model_key()
                self.index_backend.cache_dir = self.store.root
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
        ready = self._prefetched.pop((task_metadata.name, hf_split, hf_subset, self._held), None)
        if ready is not None and top_ranked is None and ready[0] >= top_k and set(query_ids) <= ready[1].keys():
            return self._keep_ranking(task_metadata.name, hf_split, hf_subset,
                                      {qid: dict(list(ready[1][qid].items())[:top_k]) for qid in query_ids})
        query_embeddings = self._query_embeddings(queries, task_metadata, hf_split, hf_subset, encode_kwargs,
                                                  num_proc)
        query_idx_to_id = dict(enumerate(query_ids))
        with clock(Phase.search):
            values, indices = self.index_backend.search(query_embeddings, top_k, similarity_fn=self.model.similarity,
                                                        top_ranked=top_ranked, query_idx_to_id=query_idx_to_id)
            self.corpus_passes += 1
            results: RetrievalOutputType = {}
            for row, query_id in enumerate(query_ids):
                candidates = self._doc_ids if top_ranked is None else list(top_ranked.get(query_id, []))
                results[query_id] = {candidates[int(i)]: float(v)
                                     for v, i in zip(values[row], indices[row], strict=True)}
        return self._keep_ranking(task_metadata.name, hf_split, hf_subset, results)

    def _keep_ranking(self, task: str, split: str, subset: str, results: RetrievalOutputType) -> RetrievalOutputType:
        """Remember the last search of each task for per-query scores; return ``results`` unchanged."""
        if self.keep_rankings:
            self.rankings[(task, split, subset)] = results
        return results


def answered_by_prefetch(searcher: SharedCorpusSearch, task: Any) -> bool:
    """Whether mteb's evaluation of ``task`` takes every search from the shared pass, so runs no model.

    True when each (split, subset) mteb evaluates has its top-k filed, at least as deep as the task
    asks, for the corpus held now, and has no ``top_ranked`` (a reranking task is searched per task).
    The runner evaluates such tasks in forked worker processes (:mod:`disastir_mteb.runner.task_pool`),
    which must never run the model.
    """
    if not task.data_loaded or searcher._held is None:
        return False
    top_k = search_depth(task)
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


# ---------------------------------------------------------------------- how a task's texts reach the model


def _task_prompt(model: Any, task_metadata: TaskMetadata, prompt_type: PromptType = PromptType.document) -> str:
    """The prompt TEXT a wrapper puts before passages or queries ('' when none; mteb returns prompt names).

    Part of the embedding cache key. A model with no mteb prompt lookup (no ``get_prompt``, or one that
    cannot be called as mteb's ``get_prompt(task_metadata, prompt_type)``) puts no mteb prompt: ''. Any
    error raised by the lookup itself is raised, never taken for "no prompt", which would file the
    vectors under another key.
    """
    get_prompt = getattr(model, "get_prompt", None)
    if not callable(get_prompt) or not _accepts(get_prompt, task_metadata, prompt_type):
        return ""
    name = get_prompt(task_metadata, prompt_type)
    if not name:
        return ""
    prompts = getattr(model, "model_prompts", None) or {}
    return str(prompts.get(name, name))


def _accepts(function: Callable[..., Any], *args: Any) -> bool:
    """Whether ``function`` can be called with ``args`` (its signature binds them; unknown signatures: yes)."""
    try:
        inspect.signature(function).bind(*args)
    except TypeError:  # another API's method under the same name
        return False
    except ValueError:  # no signature to read (a builtin): call it and let it answer
        return True
    return True


def _instructs_passages(model: Any) -> bool:
    """Whether the instruction settings reach passages: instructed passages, or a model instructing its own."""
    from disastir_mteb.models.adapter import InstructedEncoder

    if not isinstance(model, InstructedEncoder):
        return True  # settings named by someone else: keep them all, a changed key costs work, never a wrong vector
    return model.config.passages or (model.model_prompt is not None
                                     and bool(getattr(model.model, "apply_instruction_to_passages", False)))


def retrieval_texts(dataset: Any, prompt_type: PromptType) -> list[str]:
    """The texts of a corpus or a query set as the model reads them: mteb's own (``mteb_retrieval_texts``), as a list.

    mteb builds them with a ``datasets.map`` over every row (a passage is its title and text joined and stripped)
    and hands back a ``datasets`` ``Column``, which reads one row per index: at full scale the map and the
    row-by-row reads of the 239,704 passages cost tens of seconds of a warm run. The plain cases are read as
    whole columns here, to the same strings: passages without a title (DisastIR's) are their stripped text,
    with one ``(title + " " + text).strip()``; queries that are plain text without an instruction column are
    their text as it is. Anything else (conversations, instructions) goes through mteb's own function.
    """
    if len(dataset) == 0:
        return []
    columns = dataset.column_names
    texts = dataset["text"][:]  # a slice reads the whole column at once
    if prompt_type == PromptType.document:
        if "title" not in columns:
            return [text.strip() for text in texts]
        return [(title + " " + text).strip() if title else text.strip()
                for title, text in zip(dataset["title"][:], texts, strict=True)]
    if "instruction" not in columns and all(isinstance(text, str) for text in texts):
        return texts
    return list(mteb_retrieval_texts(dataset, prompt_type)[:])


def passage_loader(texts: list[str], batch_size: int) -> Any:
    """The batches mteb's ``create_dataloader`` makes of passages, without its per-row ``datasets.map``.

    mteb standardises a corpus row by row (``{"id", "text": text.strip(), "body": text}``), a Python call per
    passage (seconds over the full corpus, inside the model's own encode call). ``texts`` are
    :func:`retrieval_texts` already (stripped, titles joined), so that map would change nothing: the same three
    columns are built at once, and the loader hands the model the same batches (lists of strings), over a
    ``datasets.Dataset`` as mteb's, whose ``features`` encoders read.
    """
    from datasets import Dataset
    from torch.utils.data import DataLoader

    dataset = Dataset.from_dict({"id": [str(i) for i in range(len(texts))], "text": texts, "body": texts})
    return DataLoader(dataset, batch_size=batch_size, collate_fn=_lists, shuffle=False)


def _lists(rows: list[dict[str, str]]) -> dict[str, list[str]]:
    """A batch of rows as {column: its values}: what mteb's collate makes of string columns."""
    return {column: [row[column] for row in rows] for column in rows[0]}


def _query_prompt(model: Any, task_metadata: TaskMetadata) -> str:
    """Everything besides the text that decides a query embedding (the task, every setting); part of the cache key."""
    return f"task={task_metadata.name} | {_passage_prompt(model, task_metadata, queries=True)}"


def _passage_prompt(model: Any, task_metadata: TaskMetadata, *, queries: bool = False) -> str:
    """Everything besides the text that decides a passage embedding; part of the cache key.

    Query-side settings (the instruction set and template of ``with_instructions``) are left out
    unless they reach the passages, so a run with other instructions serves the corpus it already
    encoded: the passages it would send are byte for byte the same. ``queries``: keep them (for
    :func:`_query_prompt`).
    """
    parts = []
    experiment = dict(getattr(getattr(model, "mteb_model_meta", None), "experiment_kwargs", None) or {})
    if not queries and not _instructs_passages(model):
        for name in QUERY_SIDE_KEYS:  # they key query vectors, never passage vectors (unless instructed too)
            experiment.pop(name, None)
    if experiment:
        parts.append(json.dumps(experiment, sort_keys=True, default=str))
    config = getattr(model, "config", None)
    if isinstance(config, InstructionConfig) and config.passages and task_metadata.name in _DISASTIR:
        parts.append(config.format(get_spec(task_metadata.name).intent, "{passage}"))
    prompt = _task_prompt(model, task_metadata)
    if prompt:
        parts.append(f"prompt={prompt}")
    if getattr(model, "apply_instruction_to_passages", False) and getattr(model, "instruction_template", None):
        parts.append(f"task={task_metadata.name}")  # the model instructs passages per task
    return " | ".join(parts)


def _resolve_devices(devices: Sequence[str] | str | None) -> tuple[str, ...]:
    """The devices of the multi-process pool: ``"auto"`` = every CUDA device when there are two or more, else none."""
    if devices is None:
        return ()
    if devices == "auto":
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return tuple(f"cuda:{i}" for i in range(count)) if count > 1 else ()
    return (devices,) if isinstance(devices, str) else tuple(devices)


@dataclasses.dataclass(frozen=True)
class _Route:
    """A plain SentenceTransformer behind known wrappers: its prompt and the text transform on the way."""

    model: Any
    prompt: str | None
    transform: Callable[[str], str] | None


def _sentence_transformer_route(model: Any, task_metadata: TaskMetadata,
                                prompt_type: PromptType) -> _Route | None:
    """How texts of ``prompt_type`` reach a plain SentenceTransformer, if they do unchanged but for a known step.

    Only wrappers whose effect is known are looked through: ``with_instructions`` (queries get
    ``config.format(intent, query)``; instructed passages are not routed) and mteb's
    SentenceTransformer wrapper (its prompt for the task, else the model's own, as
    ``encode_query`` / ``encode_document`` pick it). The pipeline then runs exactly what the
    model's own ``encode`` would; anything else (None) goes through that ``encode``.
    """
    from mteb.models import SentenceTransformerEncoderWrapper

    from disastir_mteb.models.adapter import InstructedEncoder

    transform = None
    if isinstance(model, InstructedEncoder):
        config = model.config
        if model.model_prompt is not None:
            return None
        if prompt_type == PromptType.document and config.passages and config.instructions is not None:
            return None
        if prompt_type == PromptType.query and config.instructions is not None and task_metadata.name in _DISASTIR:
            intent = get_spec(task_metadata.name).intent
            transform = functools.partial(config.format, intent)
        model = model.model
    prompt = None
    if isinstance(model, SentenceTransformerEncoderWrapper):
        if type(model).encode is not SentenceTransformerEncoderWrapper.encode:
            return None
        prompt = _task_prompt(model, task_metadata, prompt_type) or None
        model = model.model
    return _Route(model, prompt, transform) if plain_sentence_transformer(model) else None


def _served_passages(model: Any) -> EmbeddingServers | None:
    """The embedding servers passages reach unchanged (through ``with_instructions`` when passages are raw), if any."""
    from disastir_mteb.models.adapter import InstructedEncoder
    from disastir_mteb.models.embedding_servers import EmbeddingServers

    if isinstance(model, InstructedEncoder):
        if model.config.passages and model.config.instructions is not None:
            return None
        model = model.model
    return model if isinstance(model, EmbeddingServers) else None


class _ServedStream:
    """Passages to embedding servers: one chunk per call, or every chunk through one queue (``encode_stream``)."""

    def __init__(self, served: EmbeddingServers, batch_size: int, report: EncodingReport | None) -> None:
        self.served, self.batch_size, self.report = served, batch_size, report

    def __call__(self, texts: list[str]) -> np.ndarray:
        """One chunk's vectors (through the stream, so it is timed and reported alike)."""
        return next(iter(self.encode_stream([texts])))

    def encode_stream(self, chunks: Sequence[list[str]], on_batch: Callable[[int], None] | None = None) -> Any:
        """The servers' stream (:meth:`EmbeddingServers.encode_stream`), each chunk's texts and time reported."""
        started = time.perf_counter()
        for chunk, output in zip(chunks, self.served.passages(self.batch_size).encode_stream(chunks, on_batch),
                                 strict=True):
            if self.report is not None:
                now = time.perf_counter()
                self.report.add(len(chunk), now - started)
                started = now
            yield output


class _Counted:
    """An encoder (plain callable or one with ``encode_stream``) that reports each finished chunk's size."""

    def __init__(self, inner: Any, count: Callable[[int], None]) -> None:
        self.inner, self.count = inner, count

    def __call__(self, texts: list[str]) -> Any:
        output = self.inner(texts)
        self.count(len(texts))
        return output

    def encode_stream(self, chunks: Sequence[list[str]], on_batch: Callable[[int], None] | None = None) -> Any:
        """The inner stream, counting each chunk as it comes out."""
        for chunk, output in zip(chunks, self.inner.encode_stream(chunks, on_batch=on_batch), strict=True):
            self.count(len(chunk))
            yield output


def _timed(encode: Callable[[list[str]], Any], report: EncodingReport | None) -> Callable[[list[str]], Any]:
    """``encode`` adding its texts and seconds to ``report``."""
    if report is None:
        return encode

    def timed(texts: list[str]) -> Any:
        started = time.perf_counter()
        output = encode(texts)
        report.add(len(texts), time.perf_counter() - started)
        return output

    return timed


class _Rows:
    """An "encoder" that hands out rows of vectors already computed, in the order chunks ask for them."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors, self.row = vectors, 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = self.vectors[self.row:self.row + len(texts)]
        self.row += len(texts)
        return out

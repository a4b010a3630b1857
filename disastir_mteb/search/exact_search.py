"""Exact inner-product search as an mteb index backend: :class:`ExactIndex`, and what decides cosine or dot.

The input helpers are public because :class:`~disastir_mteb.search.usearch_index.UsearchIndex` takes its
documents the same way, so both backends accept, keep and normalise the same vectors.
"""

from __future__ import annotations

import logging
import mmap
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from disastir_mteb.search.top_k import as_float32, top_k_inner_product
from disastir_mteb.search.torch_device import import_torch, resolve_device
from disastir_mteb.util.errors import InvalidInput, UnknownName
from disastir_mteb.util.timings import Phase, clock

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch as torch_module
    from mteb.types import Array, TopRankedDocumentsType

logger = logging.getLogger(__name__)

__all__ = ["ExactIndex", "as_documents", "normalised", "same_documents", "similarity_kind", "top_k_inner_product"]

Similarity = Literal["cosine", "dot"]


def as_documents(embeddings: Any, idxs: list[str]) -> tuple[list[str], np.ndarray]:
    """(ids, vectors) for an index backend's ``add_documents``: a 2-D NumPy array is kept as is, else float32.

    A float16 memory map stays float16; searches upcast it block by block.

    Raises:
        ValueError: the array is not 2-D or has not one row per id.
    """
    ids = list(idxs)
    plain = not hasattr(embeddings, "detach") and isinstance(embeddings, np.ndarray) and embeddings.ndim == 2
    documents = embeddings if plain else as_float32(embeddings, "document embeddings")
    if documents.ndim != 2 or len(documents) != len(ids):
        raise InvalidInput(f"add_documents got {len(ids)} ids but embeddings of shape {documents.shape}; "
                           "expected one row per id.")
    return ids, documents


def same_documents(ids: list[str], documents: np.ndarray, held_ids: list[str], held: np.ndarray | None) -> bool:
    """Whether ``ids``/``documents`` are what a backend holds, by value, so a corpus read again is recognised."""
    return held is not None and ids == held_ids and (documents is held or np.array_equal(documents, held))


def similarity_kind(similarity_fn: Callable[[Array, Array], Array], dim: int) -> Similarity:
    """Whether ``similarity_fn`` computes cosine similarity or a raw dot product.

    mteb passes ``model.similarity``, a bound method, so anything but the bare ``cos_sim`` and ``dot_score`` is
    probed on fixed vectors of unequal norms and compared with both formulas.

    Raises:
        ValueError: the function is neither (e.g. Euclidean or MaxSim).
    """
    from mteb.similarity_functions import cos_sim, dot_score

    if similarity_fn is cos_sim:
        return "cosine"
    if similarity_fn is dot_score:
        return "dot"
    rng = np.random.default_rng(0)
    left = rng.normal(size=(3, dim)) * np.array([[0.5], [2.0], [3.0]])
    right = rng.normal(size=(4, dim)) * np.array([[4.0], [0.25], [1.5], [2.5]])
    name = getattr(similarity_fn, "__qualname__", repr(similarity_fn))
    try:
        output = similarity_fn(left.astype(np.float32), right.astype(np.float32))
    except (TypeError, ValueError, RuntimeError) as error:
        raise InvalidInput(f"ExactIndex could not probe the similarity function {name}: {error}") from error
    probed = np.asarray(output.detach().cpu() if hasattr(output, "detach") else output, dtype=np.float64)
    dot = left @ right.T
    cosine = dot / np.outer(np.linalg.norm(left, axis=1), np.linalg.norm(right, axis=1))
    for kind, expected in (("cosine", cosine), ("dot", dot)):
        if probed.shape == expected.shape and np.allclose(probed, expected, rtol=1e-4, atol=1e-5):
            return kind  # type: ignore[return-value]
    raise InvalidInput(f"ExactIndex supports cosine and dot-product similarity, but {name} computes neither "
                       "(Euclidean or MaxSim?); use mteb's default search (no index_backend) for this model.")


def normalised(vectors: np.ndarray, block: int = 65536) -> np.ndarray:
    """Unit-length float32 rows, as ``torch.nn.functional.normalize`` (eps 1e-12) inside mteb's ``cos_sim``.

    Each converted block of a read-only memory map is given back to the file, so the corpus is held once, not twice.
    """
    out = np.empty(vectors.shape, np.float32)
    for start in range(0, len(vectors), block):
        source = vectors[start:start + block]
        rows = np.asarray(source, dtype=np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        out[start:start + block] = rows / np.maximum(norms, np.float32(1e-12))
        release_mapped_pages(source)
    return out


def release_mapped_pages(view: np.ndarray) -> None:
    """Drop the resident pages behind a read-only memory-mapped ``view`` (they stay in the file cache)."""
    owner: Any = view
    while owner is not None and not isinstance(owner, np.memmap):
        owner = getattr(owner, "base", None)
    if owner is None or getattr(owner, "mode", None) != "r" or not hasattr(mmap, "MADV_DONTNEED"):
        return
    mapping: Any = owner
    while mapping is not None and not isinstance(mapping, mmap.mmap):
        mapping = getattr(mapping, "base", None)
    if mapping is None or view.size == 0 or not view.flags.c_contiguous:
        return
    try:
        mapping_start = np.frombuffer(mapping, np.uint8).ctypes.data
    except (ValueError, TypeError):  # a closed map
        return
    first = view.ctypes.data - mapping_start
    last = first + view.nbytes
    first -= first % mmap.PAGESIZE  # madvise wants a page-aligned start; the rows' neighbours are only re-read
    if first < 0 or last > len(mapping):
        return
    try:
        mapping.madvise(mmap.MADV_DONTNEED, first, last - first)
    except (OSError, ValueError):
        return


def _wants_resident_copy(device: Any) -> bool:
    """Only a GPU gets a resident copy; one function so tests can exercise the copy's life cycle on the CPU."""
    return device is not None and device.type != "cpu"


def _to_device(documents: np.ndarray, device: Any, torch: Any, block: int = 65536) -> Any:
    """A copy of ``documents`` on ``device`` (float16 stays float16), filled ``block`` rows at a time."""
    dtype = np.float16 if documents.dtype == np.float16 else np.float32
    out = torch.empty(documents.shape, dtype=torch.float16 if dtype == np.float16 else torch.float32, device=device)
    for start in range(0, len(documents), block):
        source = documents[start:start + block]
        out[start:start + block].copy_(torch.from_numpy(np.array(source, dtype=dtype)))
        release_mapped_pages(source)
    return out


class ExactIndex:
    """Exact search as an mteb index backend (``SearchEncoderWrapper(model, index_backend=...)``).

    Cosine models are ranked by inner product on L2-normalised vectors (what the DisastIR authors compute),
    dot-product models on the raw vectors; other similarity functions are refused. On a GPU the documents searched
    are copied there once and kept across mteb's per-task calls (:attr:`device_bytes`), with rankings equal to the
    CPU's (TF32 is off). Reranking (``top_ranked``) runs on the CPU: a query's few candidates are too small for a GPU.

    Args:
        keep_on_clear: keep the documents through mteb's per-task ``clear()``, so the runner indexes the shared
            corpus once for all 48 tasks; adding the documents already held is then skipped (``adds_skipped``).
        query_block: queries scored together; ``None`` means 1024 on the CPU and 4096 on CUDA.
        corpus_block: corpus rows scored together.
        device: where to search: ``None`` (the CPU), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Raises:
        ValueError: ``device`` is unsupported or not available.
    """

    def __init__(self, *, keep_on_clear: bool = False, query_block: int | None = None, corpus_block: int = 65536,
                 device: str | torch_module.device | None = None) -> None:
        self.keep_on_clear = keep_on_clear
        self.query_block = query_block
        self.corpus_block = corpus_block
        self.idxs: list[str] = []
        self.adds_skipped = 0
        self.device_copies = 0
        self._documents: np.ndarray | None = None
        self._unit_documents: np.ndarray | None = None
        self._resident: tuple[Similarity, Any] | None = None
        self._device: Any = None
        self.device = device

    @property
    def device(self) -> torch_module.device | None:
        """The torch device searches run on (``None``: the CPU); changing it frees the old device's copy."""
        return self._device  # type: ignore[no-any-return]

    @device.setter
    def device(self, device: str | torch_module.device | None) -> None:
        resolved = resolve_device(device, import_torch())
        if resolved != self._device:
            self._resident = None
        self._device = resolved

    @property
    def device_bytes(self) -> int:
        """Bytes of device memory held by the documents' resident copy (0 on the CPU or before a search)."""
        if self._resident is None:
            return 0
        tensor = self._resident[1]
        return int(tensor.numel() * tensor.element_size())

    def add_documents(self, embeddings: Array, idxs: list[str]) -> None:
        """Hold ``embeddings``, one row per id in ``idxs``, replacing any documents held before."""
        ids, documents = as_documents(embeddings, idxs)
        if self.keep_on_clear and same_documents(ids, documents, self.idxs, self._documents):
            self.adds_skipped += 1
            return
        self.idxs, self._documents, self._unit_documents, self._resident = ids, documents, None, None
        logger.info("ExactIndex holds %d documents of dimension %d.", len(ids), documents.shape[1])

    def search(
        self,
        embeddings: Array,
        top_k: int,
        similarity_fn: Callable[[Array, Array], Array],
        top_ranked: TopRankedDocumentsType | None = None,
        query_idx_to_id: dict[int, str] | None = None,
    ) -> tuple[list[list[float]], list[list[int]]]:
        """Rank the held documents (or, reranking, each query's ``top_ranked`` candidates) for every query.

        Returns:
            (similarities, indices) per query, best first; when reranking, indices point into that query's
            ``top_ranked`` list (as mteb's FAISS backend returns them).

        Raises:
            ValueError: no documents are held, reranking lacks ``query_idx_to_id``, or the similarity is unsupported.
            KeyError: a ``top_ranked`` candidate is not among the held documents.
        """
        if self._documents is None:
            raise InvalidInput("ExactIndex holds no documents; call add_documents() before search().")
        queries = as_float32(embeddings, "query embeddings")
        kind = similarity_kind(similarity_fn, queries.shape[1])
        documents = self._documents
        if kind == "cosine":
            queries = normalised(queries)
            if self._unit_documents is None:
                with clock(Phase.index):
                    self._unit_documents = normalised(self._documents)
            documents = self._unit_documents
        if top_ranked is None:
            corpus = self._on_device(kind, documents) if _wants_resident_copy(self._device) else documents
            similarities, indices = top_k_inner_product(queries, corpus, top_k, query_block=self.query_block,
                                                        corpus_block=self.corpus_block, device=self._device)
            return similarities.tolist(), indices.tolist()
        if query_idx_to_id is None:
            raise InvalidInput("ExactIndex.search needs query_idx_to_id when reranking top_ranked candidates.")
        return self._rerank(queries, documents, top_k, top_ranked, query_idx_to_id)

    @clock(Phase.index)
    def _on_device(self, kind: Similarity, documents: np.ndarray) -> Any:
        """The resident device copy of ``documents`` (searched as ``kind``), made on first use."""
        if self._resident is None or self._resident[0] != kind:
            self._resident = None  # free the old copy before allocating the new one
            self._resident = (kind, _to_device(documents, self._device, import_torch()))
            self.device_copies += 1
            logger.info("ExactIndex copied %d documents to %s (%.0f MB).", len(documents), self._device,
                        self.device_bytes / 1e6)
        return self._resident[1]

    def _rerank(self, queries: np.ndarray, documents: np.ndarray, top_k: int, top_ranked: TopRankedDocumentsType,
                query_idx_to_id: dict[int, str]) -> tuple[list[list[float]], list[list[int]]]:
        row_of = {doc_id: row for row, doc_id in enumerate(self.idxs)}
        similarities: list[list[float]] = []
        indices: list[list[int]] = []
        without = []
        for query_row in range(len(queries)):
            candidates = top_ranked.get(query_idx_to_id[query_row]) or []
            if not candidates:
                without.append(query_idx_to_id[query_row])
                similarities.append([])
                indices.append([])
                continue
            missing = [doc_id for doc_id in candidates if doc_id not in row_of]
            if missing:
                raise UnknownName(f"{len(missing)} top_ranked candidates of query {query_idx_to_id[query_row]!r} are "
                                  f"not among the {len(self.idxs)} indexed documents (first: {missing[:3]!r}).")
            vectors = documents[[row_of[doc_id] for doc_id in candidates]]
            values, local = top_k_inner_product(queries[query_row:query_row + 1], vectors, top_k)
            similarities.append(values[0].tolist())
            indices.append(local[0].tolist())
        if without:
            logger.warning("%d of %d queries have no top_ranked candidates (first: %r); they get no results.",
                           len(without), len(queries), without[0])
        return similarities, indices

    def clear(self) -> None:
        """Drop the held documents (and their device copy), unless ``keep_on_clear`` asks to keep them."""
        if self.keep_on_clear:
            return
        self.idxs, self._documents, self._unit_documents, self._resident = [], None, None, None

"""Exact inner-product search over the shared corpus, in bounded memory, and an mteb backend for it.

DisastIR's 9,600 queries against 239,704 passages make a 9.2 GB float32 similarity matrix, so
:func:`top_k_inner_product` never builds it: it walks the corpus in blocks, keeps per query the
exact top-k seen so far, and merges each block's candidates into it. Measured on a 2-core CPU
(DISASTIR_FACTS 7b), ``torch.mm`` + ``torch.topk`` took 11.7 s and +0.95 GB where NumPy
``matmul`` + ``argpartition`` took 13.2 s and +4.7 GB, so torch is used when importable and
NumPy is the fallback; both give the same ranking.

Ranking policy: similarities are ordered high to low, ties by lower corpus index, exactly (a tie
at the k-th place is resolved by scanning the tied row, not left to ``topk``'s arbitrary choice).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable

    from mteb.types import Array, TopRankedDocumentsType

logger = logging.getLogger(__name__)

__all__ = ["ExactIndex", "similarity_kind", "top_k_inner_product"]

Similarity = Literal["cosine", "dot"]


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def _as_float32(array: Any, what: str) -> np.ndarray:
    """A C-contiguous float32 NumPy copy-or-view of a 2-D NumPy array or torch tensor."""
    if hasattr(array, "detach"):
        array = array.detach().float().cpu().numpy()
    array = np.asarray(array)
    if array.ndim != 2:
        raise ValueError(f"{what} must be a 2-D array (rows, dim); got shape {array.shape}.")
    return _writable_block(array)


def _writable_block(block: np.ndarray) -> np.ndarray:
    """A writable C-contiguous float32 block (memory maps are read-only; float16 is upcast here)."""
    if block.dtype == np.float32 and block.flags.c_contiguous and block.flags.writeable:
        return block
    return np.array(block, dtype=np.float32, order="C", copy=True)


def _as_documents(embeddings: Any, idxs: list[str]) -> tuple[list[str], np.ndarray]:
    """(ids, vectors) for an index backend's ``add_documents``, one row per id.

    A 2-D NumPy array is kept as it is (float16 memory maps stay float16: searches upcast per
    block); anything else becomes float32.

    Raises:
        ValueError: the array is not 2-D or its row count differs from ``len(idxs)``.
    """
    ids = list(idxs)
    plain = not hasattr(embeddings, "detach") and isinstance(embeddings, np.ndarray) and embeddings.ndim == 2
    documents = embeddings if plain else _as_float32(embeddings, "document embeddings")
    if documents.ndim != 2 or len(documents) != len(ids):
        raise ValueError(f"add_documents got {len(ids)} ids but embeddings of shape {documents.shape}; "
                         "expected one row per id.")
    return ids, documents


def _same_documents(ids: list[str], documents: np.ndarray, held_ids: list[str], held: np.ndarray | None) -> bool:
    """Whether ``ids``/``documents`` are what a backend already holds (the next task's same corpus)."""
    return held is not None and ids == held_ids and (documents is held or np.array_equal(documents, held))


def _exact_top(scores: np.ndarray, ids: np.ndarray | int, top_k: int, torch: Any) -> tuple[np.ndarray, np.ndarray]:
    """The exact top-``top_k`` set of each row of ``scores``, ties at the boundary going to lower ids.

    Args:
        scores: similarities, shape (rows, width).
        ids: the corpus index of each column, an int offset (columns are ``offset + j``) or an
            int64 array shaped like ``scores``.
        top_k: how many to keep per row; everything is kept when ``width <= top_k``.
        torch: the torch module, or ``None`` for the NumPy path.

    Returns:
        (similarities, ids), each (rows, min(top_k, width)), in no particular order.
    """
    width = scores.shape[1]
    if width <= top_k:
        full = np.broadcast_to(np.arange(width, dtype=np.int64) + ids, scores.shape) if isinstance(ids, int) else ids
        return scores, np.ascontiguousarray(full)
    if torch is not None:
        values, positions = torch.topk(torch.from_numpy(scores), top_k + 1, dim=1, sorted=True)
        values, positions = values.numpy(), positions.numpy()
        kth, after = values[:, top_k - 1], values[:, top_k]
        values, positions = values[:, :top_k], positions[:, :top_k]
    else:
        # one kth (the (k+1)-th largest lands in column 0): partitioning on two kth is 5x slower
        positions = np.argpartition(scores, width - top_k - 1, axis=1)[:, width - top_k - 1:]
        values = np.take_along_axis(scores, positions, axis=1)
        after, values, positions = values[:, 0], values[:, 1:], positions[:, 1:]
        kth = values.min(axis=1)
    found = positions + ids if isinstance(ids, int) else np.take_along_axis(ids, positions, axis=1)
    values, found = np.array(values), np.array(found, dtype=np.int64)
    for row in np.flatnonzero(kth == after):  # a tie straddles the k-th place: take the lowest ids
        line = scores[row]
        line_ids = np.arange(width, dtype=np.int64) + ids if isinstance(ids, int) else ids[row]
        above = np.flatnonzero(line > kth[row])
        tied = np.flatnonzero(line == kth[row])
        tied = tied[np.argsort(line_ids[tied], kind="stable")[: top_k - above.size]]
        keep = np.concatenate([above, tied])
        values[row], found[row] = line[keep], line_ids[keep]
    return values, found


def top_k_inner_product(
    queries: np.ndarray,
    corpus: np.ndarray,
    top_k: int,
    *,
    query_block: int = 1024,
    corpus_block: int = 65536,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k corpus rows by inner product for every query, in bounded memory.

    The corpus is read once, ``corpus_block`` rows at a time (float16 memory maps are upcast one
    block at a time); each block is scored against ``query_block`` queries at once, so peak extra
    memory is about ``query_block * corpus_block * 4`` bytes (256 MB with the defaults) plus a
    float32 copy of one corpus block, whatever the corpus size.

    Args:
        queries: query vectors, shape (n_queries, dim).
        corpus: corpus vectors, shape (n_docs, dim), float32 or float16, possibly a memory map.
        top_k: results per query; capped at ``n_docs``.
        query_block: queries scored together.
        corpus_block: corpus rows scored together.

    Returns:
        (similarities float32, indices int64), each (n_queries, min(top_k, n_docs)): inner
        products, higher is better, sorted high to low with ties broken by lower corpus index.

    Raises:
        ValueError: shapes disagree, ``top_k`` or a block size is below 1, or an input holds NaN
            or infinite values.
    """
    if top_k < 1 or query_block < 1 or corpus_block < 1:
        raise ValueError(f"top_k={top_k!r}, query_block={query_block!r} and corpus_block={corpus_block!r} "
                         "must all be at least 1.")
    queries = _as_float32(queries, "queries")
    if np.asarray(corpus).ndim != 2 or corpus.shape[1] != queries.shape[1]:
        raise ValueError(f"corpus must be 2-D with the queries' dimension {queries.shape[1]}; "
                         f"got shape {np.shape(corpus)}.")
    if not np.isfinite(queries).all():
        raise ValueError("queries hold NaN or infinite values; exact search needs finite vectors.")
    n_queries, n_docs = queries.shape[0], corpus.shape[0]
    top_k = min(top_k, n_docs)
    if n_queries == 0 or top_k == 0:
        return np.zeros((n_queries, top_k), np.float32), np.zeros((n_queries, top_k), np.int64)
    torch = _torch()
    starts = range(0, n_queries, query_block)
    best: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for doc_start in range(0, n_docs, corpus_block):
        block = _writable_block(corpus[doc_start:doc_start + corpus_block])
        if not np.isfinite(block).all():
            raise ValueError(f"corpus rows {doc_start}-{doc_start + len(block)} hold NaN or infinite values "
                             "(float16 overflow?); exact search needs finite vectors.")
        block_t = torch.from_numpy(block) if torch is not None else None
        for q_start in starts:
            q = queries[q_start:q_start + query_block]
            if torch is not None:
                scores = torch.mm(torch.from_numpy(q), block_t.T).numpy()
            else:
                scores = q @ block.T
            values, ids = _exact_top(scores, doc_start, top_k, torch)
            if q_start in best:  # merge with the earlier blocks' survivors (their ids are all lower)
                values = np.concatenate([best[q_start][0], values], axis=1)
                ids = np.concatenate([best[q_start][1], ids], axis=1)
                values, ids = _exact_top(values, ids, top_k, torch)
            best[q_start] = (values, ids)
            del scores
    similarities = np.empty((n_queries, top_k), np.float32)
    indices = np.empty((n_queries, top_k), np.int64)
    for q_start, (values, ids) in best.items():
        order = np.lexsort((ids, -values), axis=1)
        similarities[q_start:q_start + len(values)] = np.take_along_axis(values, order, axis=1)
        indices[q_start:q_start + len(values)] = np.take_along_axis(ids, order, axis=1)
    return similarities, indices


# ---------------------------------------------------------------------- the mteb backend


def similarity_kind(similarity_fn: Callable[[Array, Array], Array], dim: int) -> Similarity:
    """Whether ``similarity_fn`` computes cosine similarity or a raw dot product.

    mteb hands backends ``model.similarity``, a bound method that dispatches on the model's
    declared scoring function (or on sentence-transformers' own setting), so an identity check
    against :func:`mteb.similarity_functions.cos_sim` and ``dot_score`` only catches the bare
    functions. Anything else is probed: it scores three fixed vectors of unequal norms against
    four others and is compared with both formulas, which tests what the model really computes.

    Raises:
        ValueError: the function is neither cosine nor dot product (e.g. Euclidean or MaxSim).
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
        raise ValueError(f"ExactIndex could not probe the similarity function {name}: {error}") from error
    probed = np.asarray(output.detach().cpu() if hasattr(output, "detach") else output, dtype=np.float64)
    dot = left @ right.T
    cosine = dot / np.outer(np.linalg.norm(left, axis=1), np.linalg.norm(right, axis=1))
    for kind, expected in (("cosine", cosine), ("dot", dot)):
        if probed.shape == expected.shape and np.allclose(probed, expected, rtol=1e-4, atol=1e-5):
            return kind  # type: ignore[return-value]
    raise ValueError(f"ExactIndex supports cosine and dot-product similarity, but {name} computes neither "
                     "(Euclidean or MaxSim?); use mteb's default search (no index_backend) for this model.")


def _normalised(vectors: np.ndarray, block: int = 65536) -> np.ndarray:
    """Unit-length float32 rows, as ``torch.nn.functional.normalize`` (eps 1e-12) inside mteb's ``cos_sim``."""
    out = np.empty(vectors.shape, np.float32)
    for start in range(0, len(vectors), block):
        rows = np.asarray(vectors[start:start + block], dtype=np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        out[start:start + block] = rows / np.maximum(norms, np.float32(1e-12))
    return out


class ExactIndex:
    """Exact search as an mteb index backend (``SearchEncoderWrapper(model, index_backend=...)``).

    It satisfies mteb's ``IndexEncoderSearchProtocol`` structurally (``add_documents``,
    ``search``, ``clear``) and ranks with :func:`top_k_inner_product`. For cosine models both
    sides are L2-normalised and ranked by inner product, which is cosine similarity and what the
    DisastIR authors compute (normalised embeddings, inner-product index); for dot-product models
    the raw inner product is used. Which one comes from the ``similarity_fn`` mteb passes (see
    :func:`similarity_kind`); other similarity functions are refused. Cosine search keeps one
    normalised float32 copy of the documents (n_docs x dim x 4 bytes: 368 MB for DisastIR at
    d=384), made on the first search and kept until the documents change.

    Args:
        keep_on_clear: keep the documents through mteb's per-task ``clear()``. The DisastIR runner
            indexes the shared corpus once for all 48 tasks this way: ``add_documents`` with the
            ids and vectors already held is then skipped (counted in ``adds_skipped``); other ids
            or other vectors replace the held documents.
        query_block: queries scored together (see :func:`top_k_inner_product`).
        corpus_block: corpus rows scored together.

    Attributes:
        idxs: ids of the held documents, in index order.
        adds_skipped: ``add_documents`` calls skipped because the documents were already held.

    Examples:
        >>> from mteb.models.search_wrappers import SearchEncoderWrapper
        >>> search_model = SearchEncoderWrapper(model, index_backend=ExactIndex())  # doctest: +SKIP
    """

    def __init__(self, *, keep_on_clear: bool = False, query_block: int = 1024, corpus_block: int = 65536) -> None:
        self.keep_on_clear = keep_on_clear
        self.query_block = query_block
        self.corpus_block = corpus_block
        self.idxs: list[str] = []
        self.adds_skipped = 0
        self._documents: np.ndarray | None = None
        self._unit_documents: np.ndarray | None = None

    def add_documents(self, embeddings: Array, idxs: list[str]) -> None:
        """Hold ``embeddings`` (one row per id in ``idxs``), replacing any documents held before.

        Raises:
            ValueError: the row count differs from ``len(idxs)`` or the array is not 2-D.
        """
        ids, documents = _as_documents(embeddings, idxs)
        if self.keep_on_clear and _same_documents(ids, documents, self.idxs, self._documents):
            self.adds_skipped += 1
            return
        self.idxs, self._documents, self._unit_documents = ids, documents, None
        logger.info("ExactIndex holds %d documents of dimension %d.", len(ids), documents.shape[1])

    def search(
        self,
        embeddings: Array,
        top_k: int,
        similarity_fn: Callable[[Array, Array], Array],
        top_ranked: TopRankedDocumentsType | None = None,
        query_idx_to_id: dict[int, str] | None = None,
    ) -> tuple[list[list[float]], list[list[int]]]:
        """Rank the held documents (or each query's ``top_ranked`` candidates) for every query.

        Args:
            embeddings: query vectors, shape (n_queries, dim).
            top_k: results per query, capped at the number of documents (or candidates).
            similarity_fn: the model's similarity; decides cosine or dot product.
            top_ranked: reranking mode: query id -> candidate document ids.
            query_idx_to_id: query row -> query id; required with ``top_ranked``.

        Returns:
            (similarities, indices) per query, best first: similarities are higher-is-better;
            indices point into the held documents, or in reranking mode into that query's
            ``top_ranked`` list (as mteb's FAISS backend returns them). A query without
            candidates gets empty lists.

        Raises:
            ValueError: no documents are held, reranking lacks ``query_idx_to_id``, or the
                similarity function is unsupported.
            KeyError: a ``top_ranked`` candidate is not among the held documents.
        """
        if self._documents is None:
            raise ValueError("ExactIndex holds no documents; call add_documents() before search().")
        queries = _as_float32(embeddings, "query embeddings")
        kind = similarity_kind(similarity_fn, queries.shape[1])
        documents = self._documents
        if kind == "cosine":
            queries = _normalised(queries)
            if self._unit_documents is None:
                self._unit_documents = _normalised(self._documents)
            documents = self._unit_documents
        if top_ranked is None:
            similarities, indices = top_k_inner_product(queries, documents, top_k, query_block=self.query_block,
                                                        corpus_block=self.corpus_block)
            return similarities.tolist(), indices.tolist()
        if query_idx_to_id is None:
            raise ValueError("ExactIndex.search needs query_idx_to_id when reranking top_ranked candidates.")
        return self._rerank(queries, documents, top_k, top_ranked, query_idx_to_id)

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
                raise KeyError(f"{len(missing)} top_ranked candidates of query {query_idx_to_id[query_row]!r} are "
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
        """Drop the held documents, unless ``keep_on_clear`` asks to keep them across tasks."""
        if self.keep_on_clear:
            return
        self.idxs, self._documents, self._unit_documents = [], None, None

"""USearch approximate (HNSW) search as an mteb index backend, with the DisastIR paper's setting as a preset.

Cosine or dot product is decided from the ``similarity_fn`` that only ``search`` receives, so the graph is built
at the first search unless the constructor is told the ``similarity``. USearch's ``ip`` distance is
``1 - dot``; it is turned into a similarity (higher is better) once, here.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from disastir_mteb.search.exact_search import (
    ExactIndex,
    Similarity,
    as_documents,
    normalised,
    same_documents,
    similarity_kind,
)
from disastir_mteb.search.top_k import as_float32
from disastir_mteb.search.usearch_files import cache_entry, manifest_mismatch, write_entry
from disastir_mteb.util.errors import InvalidInput, MissingPackage
from disastir_mteb.util.install_hint import install_hint
from disastir_mteb.util.timings import Phase, clock
from disastir_mteb.vocabulary.ann_params import DEFAULT_PRESET, PRESETS, AnnParams, resolve_params

if TYPE_CHECKING:
    from collections.abc import Callable

    from mteb.types import Array, TopRankedDocumentsType

logger = logging.getLogger(__name__)

__all__ = ["PRESETS", "AnnParams", "UsearchIndex", "resolve_params"]

# USearch brute force on all queries at once runs out of memory (std::bad_alloc); blocks of 256 are near the fastest
_EXACT_QUERY_BLOCK = 256
_ADD_BLOCK = 16384  # rows inserted per call: no corpus copy, the bar moves; on one thread any block gives one graph
_RESCORE_FLOATS = 1 << 25  # gathered candidate floats per rescoring block (128 MB)


def _usearch() -> Any:
    try:
        import usearch.index
    except ImportError:
        raise MissingPackage(f"UsearchIndex needs the usearch package, which disastir-mteb requires: {install_hint()}"
                             ) from None
    return usearch.index


def _batch(matches: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys int64, distances, valid mask), always 2-D: a one-query search returns ``Matches``, not a batch."""
    keys, distances = np.atleast_2d(matches.keys), np.atleast_2d(matches.distances)
    counts = np.atleast_1d(getattr(matches, "counts", keys.shape[1]))
    valid = (np.arange(keys.shape[1]) < counts[:, None]) & np.isfinite(distances)
    return keys.astype(np.int64), distances, valid


def _best(similarities: np.ndarray, keys: np.ndarray, valid: np.ndarray,
          top_k: int) -> tuple[list[list[float]], list[list[int]]]:
    """Per row, the ``top_k`` valid entries by similarity (high to low), ties by lower key, as lists."""
    similarities = np.where(valid, similarities, -np.inf)
    order = np.lexsort((keys, -similarities), axis=1)[:, :top_k]
    similarities, keys = np.take_along_axis(similarities, order, axis=1), np.take_along_axis(keys, order, axis=1)
    kept = np.minimum(valid.sum(axis=1), top_k)
    return ([row[:n].tolist() for row, n in zip(similarities, kept, strict=True)],
            [row[:n].tolist() for row, n in zip(keys, kept, strict=True)])


def _joined(blocks: list[tuple[list[list[float]], list[list[int]]]]) -> tuple[list[list[float]], list[list[int]]]:
    return [row for block in blocks for row in block[0]], [row for block in blocks for row in block[1]]


class UsearchIndex:
    """USearch search as an mteb index backend (``SearchEncoderWrapper(model, index_backend=...)``).

    ``builds`` counts search structures built, ``loads`` indexes memory-mapped from the cache.

    Args:
        params: an :class:`AnnParams` or a preset name from :data:`PRESETS`.
        keep_on_clear: keep the built index through mteb's per-task ``clear()``.
        cache_dir: persist built indexes under ``<cache_dir>/usearch/``; given with ``cache_key`` or not at all.
        cache_key: what the vectors depend on (model, revision, corpus fingerprint); a cached index whose manifest
            matches is memory-mapped instead of built, a mismatching or damaged one rebuilt after one warning.
        similarity: ``cosine`` or ``dot`` when known up front: ``add_documents`` then builds at once.
        progress: a progress bar while the graph is built (minutes at DisastIR scale).

    Examples:
        >>> backend = UsearchIndex("paper", keep_on_clear=True)
        >>> search_model = SearchEncoderWrapper(model, index_backend=backend)  # doctest: +SKIP
    """

    def __init__(self, params: AnnParams | str = DEFAULT_PRESET, *, keep_on_clear: bool = False,
                 cache_dir: str | os.PathLike[str] | None = None, cache_key: str | None = None,
                 similarity: Similarity | None = None, progress: bool = False) -> None:
        self.params = (params if isinstance(params, AnnParams) else resolve_params(params)).resolved()
        self.progress = progress
        if (cache_dir is None) != (cache_key is None):
            raise InvalidInput(f"cache_dir={cache_dir!r} and cache_key={cache_key!r}: give both to persist, or "
                               "neither.")
        if similarity not in (None, "cosine", "dot"):
            raise InvalidInput(f"similarity={similarity!r} must be 'cosine', 'dot' or None.")
        self.keep_on_clear, self.similarity = keep_on_clear, similarity
        self.cache_dir, self.cache_key = (Path(cache_dir) if cache_dir is not None else None), cache_key
        self.builds = self.builds_skipped = self.loads = 0
        self._reset()

    @property
    def usearch_index(self) -> Any:
        """The ``usearch.index.Index`` built or memory-mapped (``None`` before the build and for ``exact``)."""
        return self._index

    @property
    def memory_bytes(self) -> int:
        """Bytes of the search structure: the index's memory, its file size when memory-mapped, or the exact copy."""
        if self._space is not None or self._index is None:
            return 0 if self._space is None else int(self._space.nbytes)
        return self._path.stat().st_size if self._path is not None else int(self._index.memory_usage)

    def add_documents(self, embeddings: Array, idxs: list[str]) -> None:
        """Hold ``embeddings`` (one row per id), replacing earlier documents unless they are the same."""
        ids, documents = as_documents(embeddings, idxs)
        if same_documents(ids, documents, self.idxs, self._documents):
            self.builds_skipped += 1
            return
        self._reset()
        self.idxs, self._documents = ids, documents
        if self.similarity is not None:
            self.build(self.similarity)

    @clock(Phase.index)
    def build(self, similarity: Similarity) -> None:
        """Build (or load from the cache) the index for ``similarity``; a no-op when it is already built."""
        if self._documents is None:
            raise InvalidInput("UsearchIndex holds no documents; call add_documents() before search().")
        if similarity == self._kind or len(self.idxs) == 0:
            return
        self._index = self._space = self._path = None
        self._kind = similarity
        if self.params.exact:
            documents = self._documents
            self._space = normalised(documents) if similarity == "cosine" else np.asarray(documents, np.float32)
            self.builds += 1
            return
        entry = self._cache_entry(similarity)
        if entry is not None and self._load(*entry):
            return
        too_big = self.params.memory_warning(len(self.idxs), self._ndim)  # before USearch takes the memory
        if too_big:
            logger.warning("%s", too_big)
        racy = self.params.build_warning()  # an opt-in multi-threaded build: said where it happens, not on a load
        if racy:
            logger.warning("%s", racy)
        index = _usearch().Index(ndim=self._ndim, metric=self.params.metric, dtype=self.params.dtype,
                                 connectivity=self.params.connectivity, expansion_add=self.params.expansion_add,
                                 expansion_search=self.params.expansion_search)
        from disastir_mteb.util.progress import progress_bar

        with progress_bar(total=len(self.idxs), unit="vectors", desc="Building HNSW index",
                          disable=not self.progress) as bar:
            for start in range(0, len(self.idxs), _ADD_BLOCK):
                rows = self._documents[start:start + _ADD_BLOCK]
                index.add(np.arange(start, start + len(rows), dtype=np.uint64), self._encode(rows),
                          threads=self.params.threads)
                bar.update(len(rows))
        self._index = index
        self.builds += 1
        logger.info("Built a USearch index (%s) of %d documents.", self.params.describe(), len(self.idxs))
        if entry is not None:
            self._save(*entry)

    def search(
        self,
        embeddings: Array,
        top_k: int,
        similarity_fn: Callable[[Array, Array], Array],
        top_ranked: TopRankedDocumentsType | None = None,
        query_idx_to_id: dict[int, str] | None = None,
    ) -> tuple[list[list[float]], list[list[int]]]:
        """Search the held documents (or re-rank each query's ``top_ranked`` candidates exactly).

        Returns:
            (similarities, indices) per query, best first, ties by lower row, at most ``min(top_k, n_docs)``; when
            reranking, indices point into that query's ``top_ranked`` list.

        Raises:
            ValueError: no documents are held, or the similarity function is unsupported.
        """
        if self._documents is None:
            raise InvalidInput("UsearchIndex holds no documents; call add_documents() before search().")
        queries = as_float32(embeddings, "query embeddings")
        if top_ranked is not None:  # candidates are given: exact re-scoring, the same as ExactIndex
            if self._reranker is None:
                self._reranker = ExactIndex()
                self._reranker.add_documents(self._documents, self.idxs)
            return self._reranker.search(queries, top_k, similarity_fn, top_ranked, query_idx_to_id)
        kind = similarity_kind(similarity_fn, queries.shape[1])
        top_k = min(top_k, len(self.idxs), self.params.k or top_k)
        if len(queries) == 0 or top_k < 1:
            return [[] for _ in queries], [[] for _ in queries]
        self.build(kind)
        if kind == "cosine":
            queries = normalised(queries)
        if self.params.exact:
            return _joined([_best(1 - distances, keys, valid, top_k) for keys, distances, valid in (
                _batch(_usearch().search(self._space, queries[start:start + _EXACT_QUERY_BLOCK], top_k, metric="ip",
                                         exact=True, threads=self.params.threads, dtype="f32"))
                for start in range(0, len(queries), _EXACT_QUERY_BLOCK))])
        candidates = min(len(self.idxs), top_k * (self.params.rescore or 1))
        self._index.expansion_search = self.params.expansion_search
        keys, distances, valid = _batch(self._index.search(self._encode(queries, queries=True), candidates,
                                                           threads=self.params.threads))
        valid &= (keys >= 0) & (keys < len(self.idxs))
        if self.params.rescore is None and self.params.dtype in ("f32", "f16"):
            return _best(1 - distances, keys, valid, top_k)
        return self._rescore(queries, keys, valid, top_k)

    def clear(self) -> None:
        """Drop the documents and the index, unless ``keep_on_clear`` asks to keep them across tasks."""
        if not self.keep_on_clear:
            self._reset()

    # ------------------------------------------------------------------ internals

    def _reset(self) -> None:
        self.idxs: list[str] = []
        self._documents: np.ndarray | None = None
        self._kind: Similarity | None = None
        self._index: Any = None
        self._space: np.ndarray | None = None
        self._path: Path | None = None
        self._reranker: ExactIndex | None = None

    @property
    def _ndim(self) -> int:
        dim = int(self._documents.shape[1])  # type: ignore[union-attr]
        return 8 * -(-dim // 8) if self.params.dtype == "b1" else dim  # b1 pads rows to whole bytes

    def _encode(self, rows: np.ndarray, *, queries: bool = False) -> np.ndarray:
        """Rows in the index's input form: float32 (normalised for cosine), or packed sign bits for b1."""
        if not queries:
            rows = normalised(rows) if self._kind == "cosine" else np.asarray(rows, np.float32)
        return np.packbits(rows > 0, axis=1) if self.params.dtype == "b1" else rows

    def _rescore(self, queries: np.ndarray, keys: np.ndarray, valid: np.ndarray,
                 top_k: int) -> tuple[list[list[float]], list[list[int]]]:
        """Exact float32 similarities of each query's candidates, from the held vectors, best ``top_k`` kept."""
        width, dim = keys.shape[1], queries.shape[1]
        step = max(1, _RESCORE_FLOATS // (width * dim))
        blocks = []
        for start in range(0, len(queries), step):
            rows, ok = np.where(valid[start:start + step], keys[start:start + step], 0), valid[start:start + step]
            vectors = np.asarray(self._documents[rows.ravel()], np.float32)  # type: ignore[index]
            if self._kind == "cosine":
                vectors = normalised(vectors)
            scores = np.matmul(vectors.reshape(len(rows), width, dim), queries[start:start + step, :, None])[..., 0]
            blocks.append(_best(scores, rows, ok, top_k))
        return _joined(blocks)

    def _cache_entry(self, kind: Similarity) -> tuple[Path, Path, dict[str, Any]] | None:
        """(index file, manifest file, expected manifest) for ``kind``, or ``None`` without a cache."""
        if self.cache_dir is None or self.cache_key is None:
            return None
        return cache_entry(self.cache_dir, self.cache_key, kind, self.params, self.idxs,
                           self._documents)  # type: ignore[arg-type]

    def _load(self, path: Path, manifest_path: Path, manifest: dict[str, Any]) -> bool:
        """Memory-map a cached index whose manifest and checksum match; else warn once and return False."""
        if not path.exists() and not manifest_path.exists():
            return False
        index, why = None, ""
        try:
            why = manifest_mismatch(path, manifest_path, manifest)
            index = None if why else _usearch().Index.restore(path, view=True)
        except (OSError, RuntimeError, ValueError) as error:  # unreadable manifest, truncated or foreign index
            why = f"cannot be read or memory-mapped ({error})"
        if not why and (index is None or len(index) != len(self.idxs) or index.ndim != self._ndim):
            why = f"holds {len(index) if index is not None else 'no'} vectors, not {len(self.idxs)}"
        if why:
            logger.warning("USearch index cache %s %s: rebuilding.", path, why)
            return False
        self._index, self._path = index, path
        self.loads += 1
        logger.info("Memory-mapped the cached USearch index %s.", path)
        return True

    def _save(self, path: Path, manifest_path: Path, manifest: dict[str, Any]) -> None:
        """Write the index and its manifest; an unwritable folder keeps the index in memory after one warning."""
        error = write_entry(self._index, path, manifest_path, manifest)
        if error is not None:
            logger.warning("USearch index cache %s cannot be written (%s): the index stays in memory for this run. "
                           "Pass --cache-dir DIR for a writable folder.", path.parent, getattr(error, "strerror", None)
                           or error)

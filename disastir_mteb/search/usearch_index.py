"""USearch approximate (HNSW) search as an mteb index backend, with the DisastIR paper's setting as a preset.

:class:`UsearchIndex` satisfies mteb's ``IndexEncoderSearchProtocol`` structurally, like
:class:`~disastir_mteb.search.exact_search.ExactIndex`: cosine models are searched by inner product on
L2-normalised vectors, dot-product models on raw vectors, as decided from the ``similarity_fn``
mteb passes. Only ``search`` receives that function, so the index is built at the first search
unless the constructor is told the ``similarity``. USearch's ``ip`` distance is ``1 - dot``; it is
turned into a similarity (higher is better) once, here. Results are ordered by similarity, ties
by lower corpus row, and never contain USearch's padding (sentinel keys, NaN distances).

Threads and determinism: every preset builds and searches on all cores (``threads=0``), resolved
to a concrete count by :meth:`AnnParams.resolved` (``os.cpu_count()``) before anything is built or
labelled, so a result folder says how its graph was built (``...-k10-t16`` on 16 cores). Search is
deterministic whatever the thread count: each query walks the fixed graph on one thread. The build
is not: threads insert concurrently in a racy order, so two multi-threaded builds of the same
vectors differ in a few edges and so in a few results. ``threads=1`` (``--ann-threads 1``)
inserts in row order and gives a bit-identical graph from run to run. A built graph is cached per
thread count (see :attr:`AnnParams.digest`), so a rerun memory-maps the same graph and repeats its
results exactly, whichever build made it.

Faults: USearch maps any file that looks like an index, so a cached graph with damaged bytes would
search wrongly or crash; its manifest therefore keeps the file's SHA-256, checked before mapping
(about 0.4 s per 500 MB), and a damaged or truncated file is rebuilt after one warning naming it.
A cache folder that cannot be written keeps the built graph in memory, after one warning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from disastir_mteb.search.exact_search import (
    ExactIndex,
    Similarity,
    _as_documents,
    _as_float32,
    _normalised,
    _same_documents,
    similarity_kind,
)
from disastir_mteb.search.store import _replace_atomic, fingerprint_texts

if TYPE_CHECKING:
    from collections.abc import Callable

    from mteb.types import Array, TopRankedDocumentsType

logger = logging.getLogger(__name__)

__all__ = ["PRESETS", "AnnParams", "UsearchIndex", "resolve_params"]

_FORMAT = 1  # bump when the index files or their manifest change: cached indexes are then rebuilt
_DTYPES = ("f32", "f16", "i8", "b1")
# USearch brute force on 9,600 queries at once died with std::bad_alloc (facts 7); per 1,024 queries at
# d=384 on 2 threads, blocks of 1,024 / 256 / 64 took 29.6 / 18.4 / 16.7 s (NumPy q @ c.T: 12.9 s).
_EXACT_QUERY_BLOCK = 256
_ADD_BLOCK = 16384  # rows normalised and inserted per call: a build never copies the corpus, the bar moves
_RESCORE_FLOATS = 1 << 25  # gathered candidate floats per rescoring block (128 MB)


def _all_cores() -> int:
    """The thread count that ``threads=0`` stands for: ``os.cpu_count()``, 1 if unknown.

    The same count usearch's own ``threads=0`` uses (``std::thread::hardware_concurrency``), but
    resolved here and passed explicitly, so the label and the build cannot disagree.
    """
    return os.cpu_count() or 1


@dataclass(frozen=True)
class AnnParams:
    """One USearch configuration. Build parameters are fixed per index; the others are per search.

    Attributes:
        metric: USearch's metric: ``ip`` (on normalised vectors for cosine models, raw for dot
            models) for f32/f16/i8; ``hamming`` on sign bits for b1.
        dtype: storage precision: ``f32``, ``f16``, ``i8`` (USearch compares int8 codes by angle,
            so a dot model's candidates ignore norms until rescored) or ``b1`` (one sign bit per dim).
        connectivity: graph edges per node ("M" in the HNSW paper).
        expansion_add: candidate list while inserting ("efConstruction").
        expansion_search: candidate list while searching ("ef"); the effective breadth is
            ``max(expansion_search, candidates)``, so a large ``top_k`` makes the search nearly exact.
        threads: threads for building and searching; 0 = all cores (the presets' default: a
            build at DisastIR scale takes minutes on one thread), turned into the machine's count
            by :meth:`resolved`. A multi-threaded build is not reproducible (see the module
            docstring); 1 gives a bit-identical graph run to run. Search is deterministic either way.
        rescore: search ``rescore * top_k`` candidates, then re-rank them exactly in float32 from
            the original vectors; ``None`` ranks by the index's own distances (f32/f16 only: i8 and
            b1 distances are not similarities, so their ``top_k`` candidates are always re-scored).
        exact: brute force through ``usearch.index.search(exact=True)``; no graph is built.
        k: results per query taken from the index, whatever depth mteb asks for (the paper searched
            top-10, so its breadth was ``max(64, 10) = 64``; asking mteb's 100 would widen it to 100
            and hide part of the drop). Metrics beyond ``@k`` are then computed on ``k`` results.
            ``None`` returns as many as mteb asks (``min(top_k, n_docs)``).
    """

    metric: Literal["ip", "hamming"] = "ip"
    dtype: Literal["f32", "f16", "i8", "b1"] = "f32"
    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 64
    threads: int = 0
    rescore: int | None = None
    exact: bool = False
    k: int | None = 10

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ValueError(f"AnnParams.dtype={self.dtype!r} is not supported; valid: {', '.join(_DTYPES)}.")
        expected = "hamming" if self.dtype == "b1" else "ip"
        if self.metric != expected:
            raise ValueError(f"AnnParams.metric={self.metric!r} does not fit dtype={self.dtype!r}: use metric="
                             f"{expected!r} ('hamming' on sign bits for b1, 'ip' for f32, f16 and i8).")
        for name in ("connectivity", "expansion_add", "expansion_search", "threads", "rescore", "k"):
            value = getattr(self, name)
            lowest = 0 if name == "threads" else 1
            optional = name in ("rescore", "k")
            if (value is not None or not optional) and (type(value) is not int or value < lowest):
                raise ValueError(f"AnnParams.{name}={value!r} must be an integer >= {lowest}"
                                 f"{' or None' if optional else ''}.")
        if self.exact and (self.dtype != "f32" or self.rescore is not None):
            raise ValueError(f"AnnParams(exact=True) searches float32 vectors without rescoring; got "
                             f"dtype={self.dtype!r}, rescore={self.rescore!r}.")

    def as_dict(self) -> dict[str, Any]:
        """Every field by name, as given (``threads=0`` stays 0), for result labels and manifests."""
        return dataclasses.asdict(self)

    def resolved(self) -> AnnParams:
        """These parameters with ``threads=0`` replaced by this machine's core count (:func:`_all_cores`).

        The one place where "all cores" becomes a number. :meth:`describe`, :meth:`label` and
        :attr:`digest` use it, and :class:`UsearchIndex` keeps the resolved parameters, so the label,
        the cache entry and the threads given to USearch agree. Equality compares the fields as
        given: ``threads=0`` and ``threads=16`` are different settings, even on a 16-core machine.
        """
        return self if self.threads else dataclasses.replace(self, threads=_all_cores())

    def describe(self) -> str:
        """One line with the thread count resolved, e.g. ``HNSW ip f32 M=16 efC=128 ef=64 k=10 threads=16``."""
        threads = self.resolved().threads
        k = f" k={self.k if self.k is not None else 'all'}"
        if self.exact:
            return f"USearch exact {self.metric} {self.dtype}{k} threads={threads}"
        rescore = f" rescore x{self.rescore}" if self.rescore else ""
        return (f"HNSW {self.metric} {self.dtype} M={self.connectivity} efC={self.expansion_add} "
                f"ef={self.expansion_search}{k} threads={threads}{rescore}")

    def label(self) -> str:
        """:meth:`describe` in a short, file-name-safe form, e.g. ``hnsw-ip-f32-M16-efC128-ef64-k10-t16``.

        Used as the mteb experiment setting of ANN runs, so each configuration has its own results
        folder. The thread count is the resolved one: the default preset files its results under
        ``-t16`` on 16 cores and ``-t2`` on 2, because their graphs were built differently (and the
        ``-t1`` folder holds the reproducible build).
        """
        text = self.describe().replace("USearch exact", "exact").replace("HNSW", "hnsw")
        return text.replace("threads=", "t").replace("rescore x", "x").replace("=", "").replace(" ", "-")

    @property
    def digest(self) -> str:
        """A stable 32-hex-character hash of every field, threads resolved, for cache keys.

        Builds with different thread counts never share a cached index. A ``threads=1`` run promises
        the bit-identical graph a fresh one-thread build gives, which a racy multi-threaded graph is
        not. Two multi-threaded graphs (say 2 and 16 threads) would serve equally well, but the
        result folder of a run that loaded one would then name a thread count its graph was not
        built with. The price is one rebuild when a cache moves to a machine with another core count.
        """
        return _hash(json.dumps({"format": _FORMAT, **self.resolved().as_dict()}, sort_keys=True).encode())


PRESETS: MappingProxyType[str, AnnParams] = MappingProxyType({
    # DisastIR paper, Section 5.2 and src/retrieval/index_builder.py. The paper searched top-10, so
    # its effective breadth was max(64, 10) = 64; the runner's top_k plays that role here. Built on
    # all cores (threads=0, labelled with the resolved count); threads=1 for the reproducible build.
    "paper": AnnParams(),
    # Brute force, no graph: the parity reference for the ANN presets.
    "exact": AnnParams(exact=True, k=None),
    # Memory-bound variants (f32 graph 562 MB at d=384): f16 halves, i8 quarters the vectors, b1 keeps
    # one sign bit per dimension. Recall@10 measured on 50k clustered unit vectors (d=64 / d=384), by
    # rescore factor: f16 x1 0.999/0.996, x2 1.000/0.998 (f16 orders like f32); i8 x1 0.92/0.83, x2
    # 0.998/0.987, x4 0.998/0.998; b1 (Hamming distances tie by the hundred) x10 0.80/0.81, x20
    # 0.96/0.98, x40 0.99/1.00, so x32. Rescoring multiplies the breadth: keep top_k small (10, not 1,000).
    "f16": AnnParams(dtype="f16", rescore=2),
    "i8": AnnParams(dtype="i8", rescore=4),
    "b1": AnnParams(metric="hamming", dtype="b1", rescore=32),
})


def _unknown(what: str, value: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(value, valid, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"Unknown {what} {value!r}; valid: {', '.join(valid)}.{hint}"


def resolve_params(preset: str | AnnParams = "paper", **overrides: Any) -> AnnParams:
    """The parameters of ``preset`` (a name in :data:`PRESETS` or an :class:`AnnParams`) with ``overrides``.

    Overriding ``dtype`` alone also sets the metric it needs (``hamming`` for b1, else ``ip``).
    ``threads=0`` is returned as given (so the result equals the preset it came from); it becomes a
    count in :meth:`AnnParams.resolved`, which labels and builds use.

    Raises:
        ValueError: an unknown preset or field name (the valid ones are listed), or invalid values.

    Examples:
        >>> resolve_params("paper", expansion_search=128, threads=1).describe()
        'HNSW ip f32 M=16 efC=128 ef=128 k=10 threads=1'
    """
    if not isinstance(preset, AnnParams) and preset not in PRESETS:
        raise ValueError(_unknown("preset", preset, list(PRESETS)))
    fields = [field.name for field in dataclasses.fields(AnnParams)]
    for name in overrides:
        if name not in fields:
            raise ValueError(_unknown("AnnParams field", name, fields))
    if "dtype" in overrides and "metric" not in overrides:
        overrides["metric"] = "hamming" if overrides["dtype"] == "b1" else "ip"
    return dataclasses.replace(preset if isinstance(preset, AnnParams) else PRESETS[preset], **overrides)


def _usearch() -> Any:
    try:
        import usearch.index
    except ImportError:
        raise ImportError("UsearchIndex needs the usearch package: pip install usearch") from None
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


def _hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _joined(blocks: list[tuple[list[list[float]], list[list[int]]]]) -> tuple[list[list[float]], list[list[int]]]:
    return [row for block in blocks for row in block[0]], [row for block in blocks for row in block[1]]


class UsearchIndex:
    """USearch search as an mteb index backend (``SearchEncoderWrapper(model, index_backend=...)``).

    Args:
        params: an :class:`AnnParams` or a preset name from :data:`PRESETS` (default ``paper``);
            kept :meth:`~AnnParams.resolved`, so ``params.threads`` is the count USearch is given.
        keep_on_clear: keep the built index through mteb's per-task ``clear()``: ``add_documents``
            with the ids and vectors already held is then a no-op (counted in ``builds_skipped``).
        cache_dir: persist built indexes under ``<cache_dir>/usearch/`` (with ``cache_key``).
        cache_key: what the vectors depend on (model, revision, corpus fingerprint, ``params.digest``).
            A cached index whose manifest matches (params, similarity, size, dimension, ids, a
            sample of the vectors, usearch version) is memory-mapped instead of built; a mismatching
            or corrupt one is rebuilt after one warning.
        similarity: ``cosine`` or ``dot`` when known up front: ``add_documents`` then builds (or
            loads) at once instead of at the first search.
        progress: a progress bar (rate, ETA) while the graph is built: minutes at DisastIR scale.

    Attributes:
        idxs: ids of the held documents; USearch keys are row numbers into this list.
        builds: times the search structure was built from the vectors (an HNSW graph, or for
            ``exact`` the float32 search copy); ``loads``: indexes memory-mapped from the cache.

    Examples:
        >>> from mteb.models.search_wrappers import SearchEncoderWrapper
        >>> backend = UsearchIndex("paper", keep_on_clear=True)
        >>> search_model = SearchEncoderWrapper(model, index_backend=backend)  # doctest: +SKIP
    """

    def __init__(self, params: AnnParams | str = "paper", *, keep_on_clear: bool = False,
                 cache_dir: str | os.PathLike[str] | None = None, cache_key: str | None = None,
                 similarity: Similarity | None = None, progress: bool = False) -> None:
        self.params = (params if isinstance(params, AnnParams) else resolve_params(params)).resolved()
        self.progress = progress
        if (cache_dir is None) != (cache_key is None):
            raise ValueError(f"cache_dir={cache_dir!r} and cache_key={cache_key!r}: give both to persist, or neither.")
        if similarity not in (None, "cosine", "dot"):
            raise ValueError(f"similarity={similarity!r} must be 'cosine', 'dot' or None.")
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
        ids, documents = _as_documents(embeddings, idxs)
        if _same_documents(ids, documents, self.idxs, self._documents):
            self.builds_skipped += 1
            return
        self._reset()
        self.idxs, self._documents = ids, documents
        if self.similarity is not None:
            self.build(self.similarity)

    def build(self, similarity: Similarity) -> None:
        """Build (or load from the cache) the index for ``similarity``; a no-op when it is already built."""
        if self._documents is None:
            raise ValueError("UsearchIndex holds no documents; call add_documents() before search().")
        if similarity == self._kind or len(self.idxs) == 0:
            return
        self._index = self._space = self._path = None
        self._kind = similarity
        if self.params.exact:
            documents = self._documents
            self._space = _normalised(documents) if similarity == "cosine" else np.asarray(documents, np.float32)
            self.builds += 1
            return
        entry = self._cache_entry(similarity)
        if entry is not None and self._load(*entry):
            return
        index = _usearch().Index(ndim=self._ndim, metric=self.params.metric, dtype=self.params.dtype,
                                 connectivity=self.params.connectivity, expansion_add=self.params.expansion_add,
                                 expansion_search=self.params.expansion_search)
        from tqdm.auto import tqdm

        with tqdm(total=len(self.idxs), unit="vectors", desc="Building HNSW index", disable=not self.progress) as bar:
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
            (similarities, indices) per query, best first: similarities are higher-is-better;
            indices point into the held documents, or in reranking mode into that query's
            ``top_ranked`` list (as mteb's FAISS backend returns them). At most
            ``min(top_k, n_docs)`` results per query.

        Raises:
            ValueError: no documents are held, or the similarity function is unsupported.
        """
        if self._documents is None:
            raise ValueError("UsearchIndex holds no documents; call add_documents() before search().")
        queries = _as_float32(embeddings, "query embeddings")
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
            queries = _normalised(queries)
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
            rows = _normalised(rows) if self._kind == "cosine" else np.asarray(rows, np.float32)
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
                vectors = _normalised(vectors)
            scores = np.matmul(vectors.reshape(len(rows), width, dim), queries[start:start + step, :, None])[..., 0]
            blocks.append(_best(scores, rows, ok, top_k))
        return _joined(blocks)

    def _cache_entry(self, kind: Similarity) -> tuple[Path, Path, dict[str, Any]] | None:
        """(index file, manifest file, expected manifest) for ``kind``, or ``None`` without a cache."""
        if self.cache_dir is None or self.cache_key is None:
            return None
        from importlib.metadata import version

        name = f"{re.sub(r'[^A-Za-z0-9._-]+', '_', self.cache_key)[:80]}-{_hash(self.cache_key.encode())[:12]}"
        stem = self.cache_dir / "usearch" / name / f"{kind}-{self.params.digest[:16]}"
        documents = self._documents
        sample = np.asarray(documents[np.linspace(0, len(documents) - 1, 64).astype(np.int64)], np.float32)  # type: ignore[index]
        return stem.with_suffix(".usearch"), stem.with_suffix(".json"), {
            "format": _FORMAT, "params": self.params.as_dict(), "similarity": kind, "n": len(self.idxs),
            "dim": int(documents.shape[1]), "ids": fingerprint_texts(self.idxs),  # type: ignore[union-attr]
            "vectors": _hash(sample.tobytes()), "usearch": version("usearch")}

    def _load(self, path: Path, manifest_path: Path, manifest: dict[str, Any]) -> bool:
        """Memory-map a cached index whose manifest and checksum match; else warn once and return False."""
        if not path.exists() and not manifest_path.exists():
            return False
        index, why = None, ""
        try:
            stored = json.loads(manifest_path.read_text(encoding="utf-8"))
            why = next((f"was built for {name}={stored.get(name)!r}, not {value!r}" for name, value in manifest.items()
                        if stored.get(name) != value), "")
            if not why and stored.get("sha256") != _file_sha256(path):
                why = f"is damaged or truncated (not memory-mapped): its SHA-256 differs from {manifest_path.name}'s"
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
        """Write the index, then its manifest with the index's SHA-256, each via a temporary file and ``os.replace``.

        A folder that cannot be written (read-only, full) keeps the index in memory after one warning.
        """
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            manifest_path.unlink(missing_ok=True)  # a crash before the new manifest leaves the entry invalid, not wrong
            self._index.save(str(temporary))
            with open(temporary, "rb+") as handle:
                os.fsync(handle.fileno())
            manifest = {**manifest, "sha256": _file_sha256(temporary)}
            os.replace(temporary, path)
            _replace_atomic(manifest_path, lambda handle: handle.write(json.dumps(manifest, indent=2).encode()))
        except (OSError, RuntimeError) as error:  # usearch reports an unwritable file as RuntimeError
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
            logger.warning("USearch index cache %s cannot be written (%s): the index stays in memory for this run. "
                           "Pass --cache-dir DIR for a writable folder.", path.parent, getattr(error, "strerror", None)
                           or error)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise


def _file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in blocks (1.3 GB/s with SHA extensions, twice blake2b's speed)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()

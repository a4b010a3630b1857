"""A persistent, memory-mapped store of corpus and query embeddings.

All 48 DisastIR tasks search one corpus of 239,704 passages, which takes about two hours to
encode on a laptop CPU. The store encodes it once per (model, revision, passage-side prompt,
corpus texts) and keeps the vectors under ``DISASTIR_CACHE_DIR`` as plain ``.npy`` files read
through ``np.load(mmap_mode="r")``: never pickles, so a cache folder cannot run code.

Layout of one entry, ``<root>/<side>/<model name>/<digest[:16]>/``:

- ``chunk_<start>_<stop>.npy``: positions ``start:stop`` of the encoding order, one file per
  finished chunk while encoding. The order is the caller's (the runner passes
  :func:`~disastir_mteb.search.encoding.length_order`, longest passage first, so batches carry little
  padding); ``order.json`` records its digest, and chunks written under another order are discarded.
  A run killed at any point (exception, Ctrl-C, SIGKILL, out of memory) resumes from the last
  finished chunk, because every file is written under a temporary name, fsynced and renamed.
- ``embeddings.npy`` and ``manifest.json``: the consolidated array (row ``i`` = text ``i``, whatever
  the encoding order) and what it was built from.
  The manifest is written last, so an entry without one is unfinished and never served.

What an entry depends on is :mod:`~disastir_mteb.search.store_key`; the chunk files are
:mod:`~disastir_mteb.search.store_chunks`; the finished entry is :mod:`~disastir_mteb.search.store_entry`.

Concurrency: two processes filling the same entry do not lock each other out. Temporary names
carry the process id and every file appears through an atomic ``os.replace``, so the last rename
wins and both writers produce identical bytes; the cost is encoding twice, not corruption.

Faults: a cache folder that cannot be written (read-only, a path under a file, a full disk) does
not stop a run: the vectors are kept in memory for this process, after one warning naming the
folder. The key trusts the model name and revision; when one store serves two dimensions for one
model name and revision, a changed model is behind that name, and the entry that cannot be right is
rebuilt (a cached one beside fresh vectors), or the run stops with one sentence saying what to delete.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from disastir_mteb.search.store_chunks import (
    _check_output,
    _checked_order,
    _chunk_dim,
    _chunk_name,
    _chunk_texts,
    _discard_chunks_of_another_order,
    _fill,
    _order_digest,
    _remove_orphan_temporaries,
    _replace_atomic,
    _unlink_quietly,
)
from disastir_mteb.search.store_entry import _consolidate, _load_verified
from disastir_mteb.search.store_key import StoreKey, _model, fingerprint_texts
from disastir_mteb.util.cache_dir import cache_root

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

logger = logging.getLogger(__name__)

__all__ = ["EmbeddingStore", "StoreKey", "encode_chunks", "fingerprint_texts"]


class EmbeddingStore:
    """Encode a text set once per :class:`StoreKey` and serve it memory-mapped ever after.

    Args:
        root: the store folder; ``None`` means :func:`cache_root`.

    Attributes:
        last_encoded_rows: texts actually sent to the encoder by the last :meth:`get_or_encode`
            (0 on a cache hit).

    Examples:
        >>> vectors = EmbeddingStore().get_or_encode(key, passages, model_encode)  # doctest: +SKIP
    """

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else cache_root()
        self.last_encoded_rows = 0
        self._unwritable = False
        # (model name, revision) -> (dimension, entry folder, freshly encoded) of the first entry served
        self._dims: dict[tuple[str, str | None], tuple[int, Path, bool]] = {}

    def expect_dimension(self, model_name: str, model_revision: str | None, dim: int) -> None:
        """Record the dimension a model declares before anything is served for it.

        A model changed in place (same name and revision, new head) would otherwise be served its
        old vectors when every entry is already cached; with its dimension known, an entry of
        another dimension is rebuilt after a warning instead.
        """
        self._dims.setdefault((model_name, model_revision), (int(dim), Path("(the model's declared dimension)"), True))

    def folder(self, key: StoreKey) -> Path:
        """The folder holding ``key``'s entry (which may not exist yet)."""
        return self.root / key.folder_name

    def cached(self, key: StoreKey, n_rows: int) -> np.memmap | None:
        """The finished, verified entry of ``key`` with ``n_rows`` rows, or None (nothing is encoded or deleted)."""
        folder = self.folder(key)
        if not (folder / "manifest.json").is_file():
            return None
        cached = _load_verified(key, n_rows, folder)[0]
        return None if cached is None or self._stale(key, cached, folder, fresh=False) else cached

    def get_or_encode(
        self,
        key: StoreKey,
        texts: Sequence[str],
        encode: Callable[[list[str]], Any],
        *,
        chunk_size: int = 8192,
        progress: bool = True,
        order: Sequence[int] | np.ndarray | None = None,
    ) -> np.memmap:
        """The embeddings of ``texts`` under ``key``, encoding only what is not stored yet.

        Args:
            key: the entry; its ``texts_fingerprint`` must be ``fingerprint_texts(texts)``.
            texts: the texts, row ``i`` of the result is text ``i``.
            encode: maps a list of texts to an (n, dim) float array (NumPy or torch). If it also has
                ``encode_stream(chunks, on_batch=...)`` (an iterator of one array per chunk, as
                :class:`~disastir_mteb.search.encoding.SentenceTransformerPipeline` has), all missing
                chunks go through one stream, so the encoder keeps working across chunk boundaries.
            chunk_size: texts per resumable chunk file (and per ``encode`` call).
            progress: show a tqdm bar over the texts (rate and ETA); ``False`` for quiet runs.
            order: encode the texts in this order (a permutation of ``range(len(texts))``), chunk
                by chunk; ``None`` = as given. The result is in the texts' order either way.

        Returns:
            A read-only memory map of shape (len(texts), dim) and dtype ``key.dtype``; float16
            entries stay float16 (upcast per block when computing). An in-memory array of the same
            shape when the cache folder cannot be written (after one warning).

        Raises:
            ValueError: ``texts`` do not match the key's fingerprint, ``chunk_size`` < 1, the
                encoder returned the wrong row count, non-2-D, non-float or non-finite values, or
                the model name and revision already served vectors of another dimension.
        """
        if chunk_size < 1:
            raise ValueError(f"chunk_size={chunk_size!r} must be at least 1.")
        if len(texts) == 0:
            raise ValueError(f"No texts to encode for {key.describe()}.")
        if fingerprint_texts(texts) != key.texts_fingerprint:
            raise ValueError(f"The {len(texts)} texts do not match the key's fingerprint "
                             f"{key.texts_fingerprint!r}; build the key with fingerprint_texts(texts).")
        folder = self.folder(key)
        self.last_encoded_rows = 0
        if (folder / "manifest.json").is_file():
            cached, problem = _load_verified(key, len(texts), folder)
            if cached is not None and not self._stale(key, cached, folder, fresh=False):
                logger.info("Embedding cache hit for %s: %s.", key.describe(), folder)
                _unlink_quietly(*folder.glob("chunk_*.npy"))  # a run killed after writing the manifest
                return cached
            if cached is not None:
                problem = f"holds {cached.shape[1]}-dimensional vectors, not the model's {self._dims[_model(key)][0]}"
            logger.warning("Embedding cache %s %s: rebuilding.", folder, problem)
            _unlink_quietly(folder / "manifest.json", folder / "embeddings.npy")
        positions = _checked_order(order, len(texts))
        memory: dict[tuple[int, int], np.ndarray] | None = None
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _remove_orphan_temporaries(folder)
            _discard_chunks_of_another_order(folder, _order_digest(positions))
        except OSError as error:
            memory = self._unpersisted(folder, error)
        ranges = [(start, min(start + chunk_size, len(texts))) for start in range(0, len(texts), chunk_size)]
        dims, memory = self._encode_missing(key, texts, encode, folder, ranges, progress, positions, memory)
        if memory is None:
            vectors = _consolidate(key, len(texts), folder, ranges, dims, chunk_size, positions)
        else:
            vectors = _fill(np.empty((len(texts), dims), key.dtype), folder, ranges, positions, memory)
        self._stale(key, vectors, folder, fresh=True)
        return vectors

    def _unpersisted(self, folder: Path, error: OSError) -> dict[tuple[int, int], np.ndarray]:
        """Warn (once per store) that ``folder`` cannot be written; the vectors stay in memory."""
        if not self._unwritable:
            self._unwritable = True
            logger.warning("Embedding cache %s cannot be written (%s): keeping the vectors in memory, nothing is "
                           "persisted. Pass --cache-dir DIR (cache_dir=) for a writable folder, or --no-cache "
                           "(cache_dir=False) to silence this.", folder, error.strerror or error)
        return {}

    def _stale(self, key: StoreKey, vectors: np.ndarray, folder: Path, *, fresh: bool) -> bool:
        """Whether cached ``vectors`` are stale: the model name and revision just gave another dimension.

        The first entry served for a model name and revision fixes its dimension. A cached entry of
        another dimension, served after fresh vectors, is stale (True: the caller rebuilds it);
        any other mismatch means vectors of another model are already in use, which cannot be undone.

        Raises:
            ValueError: the mismatch cannot be repaired by rebuilding this entry.
        """
        dim = int(vectors.shape[1])
        seen = self._dims.setdefault(_model(key), (dim, folder, fresh))
        if seen[0] == dim:
            return False
        if seen[2] and not fresh:
            return True
        model, where = f"{key.model_name}@{key.model_revision or 'unknown revision'}", key.folder_name.split("/")[1]
        raise ValueError(f"The embedding cache mixes two models saved as {model}: {folder} holds {dim}-dimensional "
                         f"vectors but {seen[1]} holds {seen[0]}-dimensional ones; delete {self.root}/corpus/{where} "
                         f"and {self.root}/queries/{where}, or pass another --cache-dir (or --no-cache).")

    # ------------------------------------------------------------------ encoding chunk files

    def _encode_missing(self, key: StoreKey, texts: Sequence[str], encode: Callable[[list[str]], Any],
                        folder: Path, ranges: list[tuple[int, int]], progress: bool, positions: np.ndarray | None,
                        memory: dict[tuple[int, int], np.ndarray] | None,
                        ) -> tuple[int, dict[tuple[int, int], np.ndarray] | None]:
        """Encode every chunk without a valid file; return the common dimension and the chunks kept in memory.

        Chunk files of another dimension than the encoder's current output (or, when nothing
        needed encoding, than most chunks) are stale: they are deleted and encoded again. With
        ``memory`` (the folder cannot be written) no file is read or written; a chunk file that
        fails to be written switches to ``memory`` for the rest (returned instead of None).
        """
        from tqdm.auto import tqdm

        found = {r: "missing" if memory is not None else _chunk_dim(folder / _chunk_name(r), r[1] - r[0], key.dtype)
                 for r in ranges}
        done = {r: dim for r, dim in found.items() if isinstance(dim, int)}
        bad = [f"{_chunk_name(r)} (rows {r[0]}-{r[1]}): {why}" for r, why in found.items()
               if isinstance(why, str) and why != "missing"]
        if bad:
            logger.warning("Embedding cache %s holds %d unusable chunk file(s) (%s): re-encoding them.",
                           folder, len(bad), "; ".join(bad[:3]))
        fresh: int | None = None
        unit = "passages" if key.side == "corpus" else "queries"
        with tqdm(total=len(texts), initial=sum(b - a for a, b in done), unit=f" {unit}", disable=not progress,
                  desc=f"Encoding {key.side}", dynamic_ncols=True) as bar:
            while True:
                todo = [r for r in ranges if r not in done]
                outputs = encode_chunks(encode, [_chunk_texts(texts, positions, r) for r in todo], on_batch=bar.update)
                try:
                    for (start, stop), output in zip(todo, outputs, strict=True):
                        vectors = _check_output(output, start, stop, key.dtype)
                        self.last_encoded_rows += stop - start
                        if fresh is not None and vectors.shape[1] != fresh:
                            raise ValueError(f"The encoder returned dimension {vectors.shape[1]} for rows "
                                             f"{start}-{stop} but {fresh} for earlier rows; it must return one "
                                             "dimension.")
                        fresh = done[(start, stop)] = vectors.shape[1]
                        if memory is None:
                            try:
                                _replace_atomic(folder / _chunk_name((start, stop)),
                                                lambda handle, v=vectors: np.save(handle, v, allow_pickle=False))
                            except OSError as error:  # read-only, full disk: go on in memory
                                memory = self._unpersisted(folder, error)
                        if memory is not None:
                            memory[(start, stop)] = vectors
                finally:
                    getattr(outputs, "close", lambda: None)()
                dims = list(done.values())
                reference = fresh if fresh is not None else max(sorted(set(dims)), key=dims.count)
                stale = [r for r, dim in done.items() if dim != reference]
                if not stale:
                    return reference, memory
                logger.warning("Embedding cache %s holds %d chunk file(s) of dimension %s, not %d: re-encoding them.",
                               folder, len(stale), "/".join(sorted({str(done[r]) for r in stale})), reference)
                for r in stale:
                    _unlink_quietly(folder / _chunk_name(r))
                    del done[r]
                    bar.update(r[0] - r[1])

# ---------------------------------------------------------------------- encoding chunk by chunk


def encode_chunks(encode: Callable[[list[str]], Any], chunks: Sequence[list[str]],
                  on_batch: Callable[[int], None] | None = None) -> Iterator[Any]:
    """Each chunk's encoder output, in order; ``on_batch`` hears of every text encoded (for a progress bar).

    Through ``encode.encode_stream`` when it has one (so the encoder works across chunk boundaries
    and reports every batch to ``on_batch``), else one ``encode`` call per chunk, reported per chunk.
    """
    stream = getattr(encode, "encode_stream", None)
    if callable(stream):
        return stream(chunks, on_batch=on_batch)
    return _per_chunk(encode, chunks, on_batch)


def _per_chunk(encode: Callable[[list[str]], Any], chunks: Sequence[list[str]],
               on_batch: Callable[[int], None] | None) -> Iterator[Any]:
    for chunk in chunks:
        output = encode(chunk)
        if on_batch is not None:
            on_batch(len(chunk))
        yield output


def _encode_in_memory(texts: list[str], encode: Callable[[list[str]], Any], order: np.ndarray | None,
                      chunk_size: int, progress: str | None = None) -> np.ndarray:
    """What the store does, without files: encode ``texts`` chunk by chunk in ``order``, return them in theirs.

    ``progress`` names the side ("corpus", "queries") for a bar like the store's; None = no bar.
    """
    from tqdm.auto import tqdm

    positions = np.arange(len(texts)) if order is None else np.asarray(order)
    ranges = [positions[start:start + chunk_size] for start in range(0, len(texts), chunk_size)]
    out: np.ndarray | None = None
    unit = " passages" if progress == "corpus" else " queries"
    with tqdm(total=len(texts), desc=f"Encoding {progress}", unit=unit, disable=progress is None,
              dynamic_ncols=True) as bar:
        outputs = encode_chunks(encode, [[texts[int(i)] for i in rows] for rows in ranges], on_batch=bar.update)
        for rows, output in zip(ranges, outputs, strict=True):
            vectors = output.detach().float().cpu().numpy() if hasattr(output, "detach") else np.asarray(output)
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), np.float32)
            out[rows] = vectors
    return out if out is not None else np.zeros((0, 1), np.float32)

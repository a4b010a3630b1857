"""A persistent, memory-mapped store of corpus and query embeddings.

All 48 DisastIR tasks search one corpus of 239,704 passages, which takes about two hours to
encode on a laptop CPU. The store encodes it once per (model, revision, passage-side prompt,
corpus texts) and keeps the vectors under ``DISASTIR_CACHE_DIR`` as plain ``.npy`` files read
through ``np.load(mmap_mode="r")``: never pickles, so a cache folder cannot run code.

Layout of one entry, ``<root>/<side>/<model name>/<digest[:16]>/``:

- ``chunk_<start>_<stop>_<checksum>.npy``: positions ``start:stop`` of the encoding order, one file
  per finished chunk (:data:`CHUNK_SIZE` texts) while encoding. The order is the caller's (the runner
  passes :func:`~disastir_mteb.search.encoding.length_order`, longest passage first, so batches carry
  little padding); ``order.json`` records its digest, and chunks written under another order are
  discarded. A run killed at any point (exception, Ctrl-C, SIGKILL, out of memory) resumes from the
  last finished chunk, because every file is written under a temporary name, fsynced and renamed.
- ``embeddings.npy`` and ``manifest.json``: the consolidated array (row ``i`` = text ``i``, whatever
  the encoding order) and what it was built from, with a checksum per block of rows.
  The manifest is written last, so an entry without one is unfinished and never served.

Every byte is verified before it is used: a chunk file against the checksum in its name, the
finished array block by block against its manifest. A damaged chunk file is encoded again; a
damaged block of the finished array has the chunks holding its rows encoded again (in their
original batches) and the entry rewritten; either after one warning naming the file.

What an entry depends on is :mod:`~disastir_mteb.search.store_key`; the chunk files are
:mod:`~disastir_mteb.search.store_chunks`; the finished entry is :mod:`~disastir_mteb.search.store_entry`.

Concurrency: a run writing an entry holds its lock (``.lock``, POSIX ``flock``); a second run that
needs the same entry waits for it, after one warning, and then serves what the first wrote (or
resumes from its chunks, if it died): nothing is encoded twice. Temporary names carry the process
id and every file appears through an atomic ``os.replace``, so even without a lock (Windows) two
writers cost work, never a damaged file.

Faults: a cache folder that cannot be written (read-only, a path under a file, a full disk) does
not stop a run: the vectors are kept in memory for this process, after one warning naming the
folder. The key trusts the model name and revision; when one store serves two dimensions for one
model name and revision, a changed model is behind that name, and the entry that cannot be right is
rebuilt (a cached one beside fresh vectors), or the run stops with one sentence saying what to delete.

Longer than 350 lines because it is one class: serving, verifying, repairing and encoding an entry are
the steps of one :meth:`EmbeddingStore.get_or_encode`, under one lock.
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
    _chunk_files,
    _chunk_name,
    _chunk_texts,
    _discard_chunks_of_another_order,
    _entry_lock,
    _fill,
    _order_digest,
    _remove_orphan_temporaries,
    _replace_atomic,
    _unlink_quietly,
    checksum,
)
from disastir_mteb.search.store_entry import _consolidate, _Entry, _load_entry, _repaired
from disastir_mteb.search.store_key import StoreKey, _model, fingerprint_texts
from disastir_mteb.util.cache_dir import cache_root

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

logger = logging.getLogger(__name__)

__all__ = ["CHUNK_SIZE", "EmbeddingStore", "StoreKey", "encode_chunks", "fingerprint_texts"]

#: Texts per chunk file: what a killed run loses at most, for any corpus size. 1,024 passages of
#: all-MiniLM-L6-v2 on a 2-core CPU: about 35 s on full-length DisastIR passages (~30 passages/s,
#: DISASTIR_FACTS 7b), about 15 s on the sample's shorter ones (the demo's 1,500 in 22 s); on one H100
#: about 0.26 s (derived from its measured 60.4 s pass over the full corpus, not measured per chunk).
CHUNK_SIZE = 1024


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
        """The finished entry of ``key`` with ``n_rows`` rows if every row verifies, else None.

        Nothing is encoded, deleted or logged: :meth:`get_or_encode` says why an entry is not served.
        """
        folder = self.folder(key)
        if not (folder / "manifest.json").is_file():
            return None
        entry = _load_entry(key, n_rows, folder)
        if not entry.usable or self._stale(key, entry.array, folder, fresh=False):  # type: ignore[arg-type]
            return None
        return entry.array

    def get_or_encode(
        self,
        key: StoreKey,
        texts: Sequence[str],
        encode: Callable[[list[str]], Any],
        *,
        chunk_size: int = CHUNK_SIZE,
        progress: bool = True,
        order: Sequence[int] | np.ndarray | None = None,
    ) -> np.memmap:
        """The embeddings of ``texts`` under ``key``, encoding only what is not stored (and verified) yet.

        Args:
            key: the entry; its ``texts_fingerprint`` must be ``fingerprint_texts(texts)``.
            texts: the texts, row ``i`` of the result is text ``i``.
            encode: maps a list of texts to an (n, dim) float array (NumPy or torch). If it also has
                ``encode_stream(chunks, on_batch=...)`` (an iterator of one array per chunk, as
                :class:`~disastir_mteb.search.encoding.SentenceTransformerPipeline` has), all missing
                chunks go through one stream, so the encoder keeps working across chunk boundaries.
            chunk_size: texts per resumable chunk file (and per ``encode`` call): what a killed run
                can lose. The default, :data:`CHUNK_SIZE` (1,024), is 15-35 s of all-MiniLM-L6-v2 on a 2-core CPU.
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
        positions = _checked_order(order, len(texts))
        served = self.cached(key, len(texts))  # a finished, verified entry needs no lock (read-only caches too)
        if served is not None:
            return self._hit(key, folder, served)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            return self._encode(key, texts, encode, folder, chunk_size, progress, positions,
                                in_memory=self._unpersisted(folder, error))
        with _entry_lock(folder):  # another run encoding this entry finishes first; its chunks are then ours
            return self._serve_or_encode(key, texts, encode, folder, chunk_size, progress, positions)

    def _serve_or_encode(self, key: StoreKey, texts: Sequence[str], encode: Callable[[list[str]], Any], folder: Path,
                         chunk_size: int, progress: bool, positions: np.ndarray | None) -> np.memmap:
        """With the entry's lock held: serve it, repair its damaged chunks, or encode what is missing."""
        if (folder / "manifest.json").is_file():
            entry = _load_entry(key, len(texts), folder)
            if entry.usable and not self._stale(key, entry.array, folder, fresh=False):  # type: ignore[arg-type]
                return self._hit(key, folder, entry.array)  # type: ignore[arg-type]
            if len(entry.damaged) and entry.manifest and entry.manifest.get("order") == _order_digest(positions):
                return self._repair(key, texts, encode, folder, entry, progress, positions)
            problem = entry.problem
            if len(entry.damaged):
                problem = f"fails its checksum in {entry.describe_damage()} and was encoded in another order"
            elif entry.array is not None:
                model_dim = self._dims[_model(key)][0]
                problem = f"holds {entry.array.shape[1]}-dimensional vectors, not the model's {model_dim}"
            logger.warning("Embedding cache %s %s: rebuilding.", folder, problem)
            _unlink_quietly(folder / "manifest.json", folder / "embeddings.npy")
        in_memory = False
        try:
            _remove_orphan_temporaries(folder)
            _discard_chunks_of_another_order(folder, _order_digest(positions))
        except OSError as error:
            in_memory = self._unpersisted(folder, error)
        return self._encode(key, texts, encode, folder, chunk_size, progress, positions, in_memory=in_memory)

    def _hit(self, key: StoreKey, folder: Path, vectors: np.memmap) -> np.memmap:
        """Serve a finished, verified entry; drop chunk files a run killed after writing its manifest left behind."""
        logger.info("Embedding cache hit for %s: %s.", key.describe(), folder)
        _unlink_quietly(*folder.glob("chunk_*.npy"))
        return vectors

    def _encode(self, key: StoreKey, texts: Sequence[str], encode: Callable[[list[str]], Any], folder: Path,
                chunk_size: int, progress: bool, positions: np.ndarray | None, *, in_memory: bool) -> np.memmap:
        """Encode every chunk not on disk yet, then join them into the finished entry (or an array in memory)."""
        ranges = [(start, min(start + chunk_size, len(texts))) for start in range(0, len(texts), chunk_size)]
        dims, sources, unpersisted = self._encode_missing(key, texts, encode, folder, ranges, progress, positions,
                                                          in_memory=in_memory)
        if unpersisted:
            vectors = _fill(np.empty((len(texts), dims), key.dtype), ranges, positions, sources)
        else:
            vectors = _consolidate(key, len(texts), folder, ranges, dims, chunk_size, positions, sources)
        self._stale(key, vectors, folder, fresh=True)
        return vectors  # type: ignore[return-value]

    def _repair(self, key: StoreKey, texts: Sequence[str], encode: Callable[[list[str]], Any], folder: Path,
                entry: _Entry, progress: bool, positions: np.ndarray | None) -> np.memmap:
        """Encode again the chunks that hold the rows failing their checksum, and rewrite the entry.

        The chunks are those the entry was encoded in (its manifest records them), in the same
        order, so each batch holds the texts it held the first time.
        """
        ranges = entry.chunks()
        n = len(texts)
        rank = np.empty(n, np.int64)
        rank[np.arange(n) if positions is None else positions] = np.arange(n)  # text row -> position in the order
        starts = np.array([a for a, _ in ranges])
        touched = sorted({ranges[i] for i in np.searchsorted(starts, rank[entry.damaged], side="right") - 1})
        again = sum(b - a for a, b in touched)
        logger.warning("Embedding cache %s fails its checksum in %s: the file was damaged on disk; re-encoding "
                       "the %d %s of the %d chunk(s) that hold them.", folder / "embeddings.npy",
                       entry.describe_damage(), again, "passages" if key.side == "corpus" else "queries", len(touched))
        dim = int((entry.manifest or {})["dim"])
        fresh: dict[tuple[int, int], np.ndarray] = {}
        for (start, stop), vectors in self._encoded(key, texts, encode, touched, progress, positions, done=n - again):
            if vectors.shape[1] != dim:
                raise ValueError(f"The encoder returned dimension {vectors.shape[1]} for rows {start}-{stop} but "
                                 f"{folder / 'embeddings.npy'} holds {dim}-dimensional vectors of the same model name "
                                 "and revision; a changed model needs another revision, or pass --no-cache.")
            fresh[(start, stop)] = vectors
        return _repaired(key, folder, entry, positions, fresh)

    def _unpersisted(self, folder: Path, error: OSError) -> bool:
        """Warn (once per store) that ``folder`` cannot be written; True: the vectors stay in memory."""
        if not self._unwritable:
            self._unwritable = True
            logger.warning("Embedding cache %s cannot be written (%s): keeping the vectors in memory, nothing is "
                           "persisted. Pass --cache-dir DIR (cache_dir=) for a writable folder, or --no-cache "
                           "(cache_dir=False) to silence this.", folder, error.strerror or error)
        return True

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

    def _encoded(self, key: StoreKey, texts: Sequence[str], encode: Callable[[list[str]], Any],
                 todo: list[tuple[int, int]], progress: bool, positions: np.ndarray | None, *,
                 done: int) -> Iterator[tuple[tuple[int, int], np.ndarray]]:
        """Each chunk of ``todo`` encoded and checked, in order, under a progress bar that starts at ``done``."""
        from tqdm.auto import tqdm

        unit = "passages" if key.side == "corpus" else "queries"
        with tqdm(total=len(texts), initial=done, unit=f" {unit}", disable=not progress,
                  desc=f"Encoding {key.side}", dynamic_ncols=True) as bar:
            outputs = encode_chunks(encode, [_chunk_texts(texts, positions, r) for r in todo], on_batch=bar.update)
            try:
                for (start, stop), output in zip(todo, outputs, strict=True):
                    vectors = _check_output(output, start, stop, key.dtype)
                    self.last_encoded_rows += stop - start
                    yield (start, stop), vectors
            finally:
                getattr(outputs, "close", lambda: None)()

    def _encode_missing(self, key: StoreKey, texts: Sequence[str], encode: Callable[[list[str]], Any],
                        folder: Path, ranges: list[tuple[int, int]], progress: bool, positions: np.ndarray | None,
                        *, in_memory: bool) -> tuple[int, dict[tuple[int, int], Path | np.ndarray], bool]:
        """Encode every chunk without a verified file; return the dimension, each chunk's source, and whether in memory.

        Chunk files that fail their checks (unreadable, wrong shape, bytes that fail the checksum
        in their name) are reported in one warning naming them, deleted and encoded again. Chunk
        files of another dimension than the encoder's current output (or, when nothing needed
        encoding, than most chunks) are stale: they are deleted and encoded again. With ``in_memory``
        (the folder cannot be written) no file is read or written; a chunk file that fails to be
        written switches to memory for the rest (the returned flag).
        """
        files = {} if in_memory else _chunk_files(folder)
        sources: dict[tuple[int, int], Path | np.ndarray] = {}
        done: dict[tuple[int, int], int] = {}
        bad: list[str] = []
        for rows in ranges:
            for path in files.get(rows, []):
                found = _chunk_dim(path, rows[1] - rows[0], key.dtype)
                if isinstance(found, int) and rows not in done:
                    done[rows], sources[rows] = found, path
                    continue
                if isinstance(found, str):
                    bad.append(f"{path.name} (rows {rows[0]}-{rows[1]}): {found}")
                _unlink_quietly(path)
        if bad:
            logger.warning("Embedding cache %s holds %d unusable chunk file(s) (%s): re-encoding them.",
                           folder, len(bad), "; ".join(bad[:3]) + ("; ..." if len(bad) > 3 else ""))
        fresh: int | None = None
        while True:
            todo = [r for r in ranges if r not in done]
            for (start, stop), vectors in self._encoded(key, texts, encode, todo, progress, positions,
                                                        done=sum(b - a for a, b in done)):
                if fresh is not None and vectors.shape[1] != fresh:
                    raise ValueError(f"The encoder returned dimension {vectors.shape[1]} for rows {start}-{stop} but "
                                     f"{fresh} for earlier rows; it must return one dimension.")
                fresh = done[(start, stop)] = vectors.shape[1]
                sources[(start, stop)] = vectors
                if not in_memory:
                    path = folder / _chunk_name((start, stop), checksum(vectors))
                    try:
                        _replace_atomic(path, lambda handle, v=vectors: np.save(handle, v, allow_pickle=False))
                    except OSError as error:  # read-only, full disk: go on in memory
                        in_memory = self._unpersisted(folder, error)
                    else:
                        sources[(start, stop)] = path  # the chunk's vectors need not stay in memory
            dims = list(done.values())
            reference = fresh if fresh is not None else max(sorted(set(dims)), key=dims.count)
            stale = [r for r, dim in done.items() if dim != reference]
            if not stale:
                return reference, sources, in_memory
            logger.warning("Embedding cache %s holds %d chunk file(s) of dimension %s, not %d: re-encoding them.",
                           folder, len(stale), "/".join(sorted({str(done[r]) for r in stale})), reference)
            for r in stale:
                source = sources.pop(r)
                if isinstance(source, Path):
                    _unlink_quietly(source)
                del done[r]

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

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

import hashlib
import json
import logging
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from disastir_mteb.util.atomic import writer_gone
from disastir_mteb.util.cache_dir import cache_root

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from typing import IO

logger = logging.getLogger(__name__)

__all__ = ["EmbeddingStore", "StoreKey", "encode_chunks", "fingerprint_texts"]

# Bump when the layout, the manifest or the way vectors are computed changes: old entries are then rebuilt.
# 2: length-ordered chunks (other batches, so other float rounding than format 1), batch size and precision keyed.
_FORMAT = 2
_VERSIONED = ("numpy", "torch", "mteb", "sentence-transformers", "disastir-mteb")


def fingerprint_texts(texts: Iterable[str]) -> str:
    """A 32-hex-character blake2b digest of ``texts`` in order (row ``i`` is text ``i``).

    Each text is length-prefixed, so ``["ab", "c"]`` and ``["a", "bc"]`` differ.
    """
    digest = hashlib.blake2b(digest_size=16)
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


@dataclass(frozen=True)
class StoreKey:
    """Everything the vectors of one store entry depend on.

    Attributes:
        model_name: the model's name, e.g. ``sentence-transformers/all-MiniLM-L6-v2``.
        model_revision: the model's revision (commit), ``None`` when unknown.
        side: ``corpus`` for passages, ``queries`` for queries.
        prompt: the passage-side prompt or instruction prepended for the corpus, ``""`` if none.
        instructions: instruction-set name and template for queries, ``""`` for the corpus.
        texts_fingerprint: :func:`fingerprint_texts` of the encoded texts.
        dtype: storage precision; ``float16`` halves the disk and page-cache footprint.
        batch_size: texts per forward pass. It decides each batch's padded length and so the float
            rounding of the vectors (about 1e-7), which is why it is part of the key.
        precision: the model's weights while encoding (``float32``, ``float16``, ``bfloat16``;
            ``None`` for encoders without torch weights).

    Examples:
        >>> key = StoreKey("org/model", "abc123", "corpus", "", "", fingerprint_texts(["a", "b"]))
        >>> len(key.digest)
        32
    """

    model_name: str
    model_revision: str | None
    side: Literal["corpus", "queries"]
    prompt: str
    instructions: str
    texts_fingerprint: str
    dtype: Literal["float32", "float16"] = "float32"
    batch_size: int | None = None
    precision: str | None = None

    def __post_init__(self) -> None:
        if self.side not in ("corpus", "queries"):
            raise ValueError(f"StoreKey.side={self.side!r} is not a side; expected 'corpus' or 'queries'.")
        if self.dtype not in ("float32", "float16"):
            raise ValueError(f"StoreKey.dtype={self.dtype!r} is not supported; expected 'float32' or 'float16'.")
        if not self.model_name or not self.texts_fingerprint:
            raise ValueError(f"StoreKey needs a model_name and a texts_fingerprint; got {self.describe()!r}.")

    @property
    def digest(self) -> str:
        """A stable 32-hex-character hash of every field (and of the store format)."""
        payload = json.dumps({"format": _FORMAT, **asdict(self)}, sort_keys=True, ensure_ascii=False)
        return hashlib.blake2b(payload.encode("utf-8"), digest_size=16).hexdigest()

    @property
    def folder_name(self) -> str:
        """``<side>/<sanitised model name>/<digest[:16]>``, relative to the store root."""
        model = re.sub(r"[^A-Za-z0-9._-]+", "__", self.model_name).strip(".") or "model"
        return f"{self.side}/{model}/{self.digest[:16]}"

    def describe(self) -> str:
        """One line for logs, e.g. ``corpus of org/model@abc123 (float32, no prompt, texts 1a2b3c4d5e6f)``."""
        prompt = f"prompt {self.prompt!r}" if self.prompt else "no prompt"
        instructions = f", instructions {self.instructions!r}" if self.instructions else ""
        batch = f", batch {self.batch_size}" if self.batch_size else ""
        precision = f", model {self.precision}" if self.precision else ""
        return (f"{self.side} of {self.model_name}@{self.model_revision or 'unknown revision'} "
                f"({self.dtype}{precision}{batch}, {prompt}{instructions}, texts {self.texts_fingerprint[:12]})")


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
        cached = self._load_verified(key, n_rows, folder)[0]
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
            cached, problem = self._load_verified(key, len(texts), folder)
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
            vectors = self._consolidate(key, len(texts), folder, ranges, dims, chunk_size, positions)
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

    # ------------------------------------------------------------------ consolidation and reuse

    def _consolidate(self, key: StoreKey, n_rows: int, folder: Path, ranges: list[tuple[int, int]], dim: int,
                     chunk_size: int, positions: np.ndarray | None) -> np.memmap:
        """Join the chunk files into ``embeddings.npy`` (in the texts' order), write the manifest, drop the chunks."""
        final = folder / "embeddings.npy"
        temporary = folder / f".embeddings.npy.{os.getpid()}.tmp"
        try:
            out = _fill(np.lib.format.open_memmap(temporary, mode="w+", dtype=key.dtype, shape=(n_rows, dim)),
                        folder, ranges, positions, {})
            out.flush()
            del out
            with open(temporary, "rb+") as handle:
                os.fsync(handle.fileno())
            os.replace(temporary, final)
        except FileNotFoundError:  # another process consolidated and removed the chunks first
            temporary.unlink(missing_ok=True)
            cached, problem = self._load_verified(key, n_rows, folder)
            if cached is None:
                raise FileNotFoundError(f"Embedding cache {folder}: chunk files vanished while consolidating "
                                        f"and no finished entry replaced them ({problem}); run again.") from None
            return cached
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        manifest = {**asdict(key), "format": _FORMAT, "n_rows": n_rows, "dim": dim, "chunk_size": chunk_size,
                    "order": _order_digest(positions),
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": _library_versions()}
        _replace_atomic(folder / "manifest.json", lambda handle: handle.write(json.dumps(manifest, indent=2).encode()))
        for path in folder.glob("chunk_*.npy"):
            path.unlink(missing_ok=True)
        (folder / _ORDER_FILE).unlink(missing_ok=True)
        cached, problem = self._load_verified(key, n_rows, folder)
        if cached is None:
            raise OSError(f"Embedding cache {folder} {problem} right after writing it; is the disk full?")
        return cached

    @staticmethod
    def _load_verified(key: StoreKey, n_rows: int, folder: Path) -> tuple[np.memmap | None, str]:
        """The entry's memory map if its manifest, shape, dtype and size all check out, else why not."""
        try:
            manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None, "has an unreadable manifest"
        for name, value in {**asdict(key), "format": _FORMAT}.items():
            if manifest.get(name) != value:
                return None, f"was built for {name}={manifest.get(name)!r}, not {value!r}"
        if manifest.get("n_rows") != n_rows:
            unit = "passages" if key.side == "corpus" else "queries"
            return None, f"was built for {manifest.get('n_rows')} {unit}, not {n_rows}"
        path = folder / "embeddings.npy"
        try:
            array = np.load(path, mmap_mode="r")
        except (OSError, ValueError, EOFError) as error:
            return None, f"has an unreadable or truncated embeddings.npy ({error})"
        expected = (n_rows, manifest.get("dim"))
        if array.shape != expected or array.dtype != np.dtype(key.dtype):
            return None, f"holds a {array.dtype} array of shape {array.shape}, not {key.dtype} {expected}"
        if path.stat().st_size != array.offset + array.nbytes:
            return None, f"has an embeddings.npy of {path.stat().st_size} bytes, not {array.offset + array.nbytes}"
        return array, ""


# ---------------------------------------------------------------------- file helpers


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


def _chunk_name(rows: tuple[int, int]) -> str:
    return f"chunk_{rows[0]:010d}_{rows[1]:010d}.npy"


def _model(key: StoreKey) -> tuple[str, str | None]:
    return key.model_name, key.model_revision


def _fill(out: np.ndarray, folder: Path, ranges: list[tuple[int, int]], positions: np.ndarray | None,
          memory: dict[tuple[int, int], np.ndarray]) -> np.ndarray:
    """Put each chunk (from ``memory``, else its file) at its rows of ``out`` (the texts' order); return ``out``."""
    for rows in ranges:
        chunk = memory.get(rows)
        out[slice(*rows) if positions is None else positions[rows[0]:rows[1]]] = (
            chunk if chunk is not None else np.load(folder / _chunk_name(rows), mmap_mode="r"))
    return out


def _unlink_quietly(*paths: Path) -> None:
    """Delete ``paths`` where possible: a read-only cache keeps them, and later loads verify them anyway."""
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            continue


_ORDER_FILE = "order.json"


def _checked_order(order: Sequence[int] | np.ndarray | None, n: int) -> np.ndarray | None:
    """``order`` as an int64 array after checking it is a permutation of ``range(n)``; None stays None."""
    if order is None:
        return None
    positions = np.asarray(order, dtype=np.int64)
    if positions.shape != (n,) or not np.array_equal(np.sort(positions), np.arange(n)):
        raise ValueError(f"order must be a permutation of range({n}); got shape {positions.shape}.")
    return positions


def _order_digest(positions: np.ndarray | None) -> str:
    """``as given`` for no order, else a 32-hex digest of the permutation."""
    if positions is None:
        return "as given"
    return hashlib.blake2b(positions.astype("<i8").tobytes(), digest_size=16).hexdigest()


def _discard_chunks_of_another_order(folder: Path, digest: str) -> None:
    """Delete chunk files encoded under another order (they hold other rows), then record ``digest``."""
    path = folder / _ORDER_FILE
    try:
        recorded = json.loads(path.read_text(encoding="utf-8")).get("order")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if recorded == digest:
        return
    chunks = list(folder.glob("chunk_*.npy"))
    if chunks:
        logger.warning("Embedding cache %s holds %d chunk file(s) encoded in another order (%s): re-encoding them.",
                       folder, len(chunks), "no record" if recorded is None else f"order {str(recorded)[:12]}")
        for chunk in chunks:
            chunk.unlink(missing_ok=True)
    _replace_atomic(path, lambda handle: handle.write(json.dumps({"order": digest}).encode()))


def _chunk_texts(texts: Sequence[str], positions: np.ndarray | None, rows: tuple[int, int]) -> list[str]:
    """The texts of one chunk, in encoding order."""
    start, stop = rows
    if positions is None:
        return [texts[i] for i in range(start, stop)]
    return [texts[int(i)] for i in positions[start:stop]]


def _chunk_dim(path: Path, n_rows: int, dtype: str) -> int | str:
    """The dimension of a finished chunk file, or why it cannot be used."""
    if not path.is_file():
        return "missing"
    try:
        array = np.load(path, mmap_mode="r")
    except (OSError, ValueError, EOFError):  # EOFError: an empty file
        return "unreadable or truncated"
    if array.ndim != 2 or array.shape[0] != n_rows or array.dtype != np.dtype(dtype):
        return f"shape {array.shape} {array.dtype}, expected ({n_rows}, dim) {dtype}"
    return int(array.shape[1])


def _check_output(output: Any, start: int, stop: int, dtype: str) -> np.ndarray:
    """The encoder's output for rows ``start:stop`` as a finite 2-D array of ``dtype``."""
    if hasattr(output, "detach"):  # torch tensor, possibly bfloat16 or on a GPU
        output = output.detach().float().cpu().numpy()
    array = np.asarray(output)
    where = f"rows {start}-{stop}"
    if array.ndim != 2 or array.shape[0] != stop - start:
        raise ValueError(f"The encoder returned shape {array.shape} for {where}; expected ({stop - start}, dim).")
    if not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"The encoder returned dtype {array.dtype} for {where}; expected a float array.")
    with np.errstate(over="ignore"):  # float16 overflow becomes inf, refused just below
        array = array.astype(dtype, copy=False)
    if not np.isfinite(array).all():
        bad = int(np.flatnonzero(~np.isfinite(array).all(axis=1))[0]) + start
        raise ValueError(f"The encoder returned NaN or infinite values (as {dtype}) for {where}, first in row {bad}.")
    return array


def _replace_atomic(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write through a pid-named temporary file, fsync, then ``os.replace``: readers never see half a file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _remove_orphan_temporaries(folder: Path) -> None:
    """Delete temporary files left by processes that died mid-write (a killed run's 1 GB leftovers)."""
    for path in folder.glob(".*.tmp"):
        if writer_gone(path.name.rsplit(".", 2)[-2]):
            path.unlink(missing_ok=True)


def _library_versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    def _version(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {name: _version(name) for name in _VERSIONED}

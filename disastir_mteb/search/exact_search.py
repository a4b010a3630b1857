"""Exact inner-product search over the shared corpus, in bounded memory, and an mteb backend for it.

DisastIR's 9,600 queries against 239,704 passages make a 9.2 GB float32 similarity matrix, so
:func:`top_k_inner_product` never builds it: it walks the corpus in blocks, keeps per query the
exact top-k seen so far, and merges each block's candidates into it. Measured on a 2-core CPU
(DISASTIR_FACTS 7b), ``torch.mm`` + ``torch.topk`` took 11.7 s and +0.95 GB where NumPy
``matmul`` + ``argpartition`` took 13.2 s and +4.7 GB, so torch is used when importable and
NumPy is the fallback; both give the same ranking.

With torch, the search runs on a torch device: the CPU by default, or the model's GPU
(``device="cuda:0"``). Scores and ``torch.topk`` stay on that device and only the small per-block
candidate lists (rows x (k+1)) travel to the CPU, where blocks are merged; the CPU is simply the
device ``"cpu"`` of the same code path, which is what the CPU-only tests exercise.

Ranking policy: similarities are ordered high to low, ties by lower corpus index, exactly (a tie
at the k-th place is resolved by scanning the tied row, not left to ``topk``'s arbitrary choice).
Scores are float32 products on every device: TF32 is switched off on CUDA for the search.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    import torch as torch_module
    from mteb.types import Array, TopRankedDocumentsType

logger = logging.getLogger(__name__)

__all__ = ["ExactIndex", "similarity_kind", "top_k_inner_product"]

Similarity = Literal["cosine", "dot"]

DEVICE_TYPES = ("cpu", "cuda")
"""Torch device types exact search runs on (other accelerators are not verified to be exact)."""

_QUERY_BLOCK = {"cpu": 1024, "cuda": 4096}
"""Default ``query_block`` per device type: 1024 x 65536 float32 scores are 256 MB of RAM; 4096 on a GPU are 1 GiB."""

_TIE_ROWS = 256
"""Score rows fetched to the CPU at once to resolve ties at the k-th place (64 MB at ``corpus_block=65536``)."""


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def _resolve_device(device: str | torch_module.device | None, torch: Any) -> Any:
    """The torch device ``device`` names, checked; ``None`` stays ``None`` (and ``"cpu"`` without torch).

    Raises:
        ValueError: ``device`` is not a torch device of a supported type, needs torch when it is
            missing, or names a CUDA device that is not available.
    """
    if device is None:
        return None
    options = ", ".join(repr(kind) for kind in DEVICE_TYPES)
    if torch is None:
        if str(device) == "cpu":
            return None
        raise ValueError(f"device={device!r} needs torch, which is not installed; install torch or pass "
                         "device=None to search on the CPU with NumPy.")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device={device!r} is not a torch device; use one of {options} "
                         "(optionally with an index, e.g. 'cuda:0').") from None
    if resolved.type not in DEVICE_TYPES:
        raise ValueError(f"device={device!r} is not supported by exact search; use one of {options} "
                         "(optionally with an index, e.g. 'cuda:0').")
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r} was requested for exact search, but CUDA is not available to "
                             f"torch {torch.__version__}; pass device=None or 'cpu' to search on the CPU.")
        count = torch.cuda.device_count()
        if resolved.index is None:
            resolved = torch.device("cuda", torch.cuda.current_device())
        elif resolved.index >= count:
            raise ValueError(f"device={device!r} names a GPU that does not exist: torch sees {count} CUDA "
                             f"device(s), 'cuda:0' to 'cuda:{count - 1}'.")
    return resolved


def _read_flag(read: Callable[[], Any]) -> Any:
    """A legacy TF32 flag, or ``None`` where torch refuses to read it (the caller mixed legacy and new APIs)."""
    try:
        return read()
    except RuntimeError:
        return None


@contextlib.contextmanager
def _float32_matmul(torch: Any, device: Any) -> Iterator[None]:
    """Switch TF32 off for cuBLAS and cuDNN while a CUDA search runs, then restore the caller's settings.

    TF32 keeps 10 mantissa bits, so with it on (``torch.backends.cuda.matmul.allow_tf32 = True``
    or ``torch.set_float32_matmul_precision("high")``, which many training scripts set) scores
    would differ from the CPU's float32 ones by ~1e-3 and rankings would change. torch 2.9+ has
    two APIs for these flags (legacy ``allow_tf32`` / ``float32_matmul_precision`` and new
    ``fp32_precision``) and raises when a legacy flag is read after the new API set a different
    value, so both are saved where readable, both are set off, and both are restored, legacy first.
    The flags are process-wide: a concurrent CUDA matmul in another thread also runs without TF32.
    """
    if device is None or device.type != "cuda":
        yield
        return
    backends = torch.backends
    precision = _read_flag(torch.get_float32_matmul_precision)
    cudnn = _read_flag(lambda: backends.cudnn.allow_tf32)
    # every new-API switch, parents first: the legacy setters also write some of them (oneDNN's matmul included)
    new_api = [(switch, switch.fp32_precision) for switch in (
        backends, backends.cuda.matmul, backends.cudnn, backends.cudnn.conv, backends.cudnn.rnn,
        backends.mkldnn, backends.mkldnn.matmul, backends.mkldnn.conv, backends.mkldnn.rnn)]
    try:
        if precision is not None:
            backends.cuda.matmul.allow_tf32 = False
        if cudnn is not None:
            backends.cudnn.allow_tf32 = False
        for switch in (backends.cuda.matmul, backends.cudnn.conv, backends.cudnn.rnn):
            switch.fp32_precision = "ieee"
        yield
    finally:
        if precision is not None:
            torch.set_float32_matmul_precision(precision)
        if cudnn is not None:
            backends.cudnn.allow_tf32 = cudnn
        for switch, value in new_api:
            switch.fp32_precision = value


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


def _break_ties(values: np.ndarray, found: np.ndarray, rows: np.ndarray, lines: Iterable[np.ndarray],
                ids: np.ndarray | int, kth: np.ndarray, top_k: int) -> None:
    """Redo, in place, the rows where a tie straddles the k-th place: all above it, then the lowest tied ids.

    Args:
        values: the kept similarities, (n_rows, top_k); rows in ``rows`` are overwritten.
        found: the kept corpus indices, shaped like ``values``; overwritten likewise.
        rows: the row numbers to redo.
        lines: the full score row of each row in ``rows``, in the same order.
        ids: the corpus index of each column: an int offset, or an int64 array (n_rows, width).
        kth: the k-th largest similarity of every row.
        top_k: how many to keep per row.
    """
    for row, line in zip(rows, lines, strict=True):
        line_ids = np.arange(line.size, dtype=np.int64) + ids if isinstance(ids, int) else ids[row]
        above = np.flatnonzero(line > kth[row])
        tied = np.flatnonzero(line == kth[row])
        tied = tied[np.argsort(line_ids[tied], kind="stable")[: top_k - above.size]]
        keep = np.concatenate([above, tied])
        values[row], found[row] = line[keep], line_ids[keep]


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
    tied = np.flatnonzero(kth == after)  # a tie straddles the k-th place: take the lowest ids
    _break_ties(values, found, tied, (scores[row] for row in tied), ids, kth, top_k)
    return values, found


def _exact_top_tensor(scores: Any, offset: int, top_k: int, torch: Any) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_exact_top` for a score block held as a torch tensor on its device (CPU or GPU).

    ``torch.topk(k + 1)`` runs where the scores are; only its (rows, k + 1) output comes to the
    CPU, plus, for rows where a tie straddles the k-th place, those score rows (``_TIE_ROWS`` at a
    time, so the extra device memory stays at most 256 rows of the block).

    Args:
        scores: similarities, a float32 tensor (rows, width) on any device.
        offset: the corpus index of column 0.
        top_k: how many to keep per row; everything is kept when ``width <= top_k``.
        torch: the torch module.

    Returns:
        (similarities float32, ids int64) as NumPy arrays, each (rows, min(top_k, width)), in no
        particular order.
    """
    width = scores.shape[1]
    if width <= top_k:
        values = scores.cpu().numpy()
        return values, np.ascontiguousarray(np.broadcast_to(np.arange(width, dtype=np.int64) + offset, values.shape))
    top_values, top_positions = torch.topk(scores, top_k + 1, dim=1, sorted=True)
    values, positions = top_values.cpu().numpy(), top_positions.cpu().numpy()
    kth, after = values[:, top_k - 1], values[:, top_k]
    values, found = np.array(values[:, :top_k]), positions[:, :top_k] + np.int64(offset)
    tied = np.flatnonzero(kth == after)
    for start in range(0, tied.size, _TIE_ROWS):
        rows = tied[start:start + _TIE_ROWS]
        lines = scores[torch.from_numpy(rows).to(scores.device)].cpu().numpy()
        _break_ties(values, found, rows, lines, offset, kth, top_k)
    return values, found


def _corpus_block(corpus: Any, start: int, stop: int, device: Any, torch: Any) -> Any:
    """Corpus rows ``start:stop`` as float32, checked finite: a NumPy array, or a tensor on ``device``.

    NumPy rows (float16 memory maps included) are upcast on the host and then moved; tensor rows
    (e.g. :class:`ExactIndex`'s resident float16 copy) are moved if needed and upcast on the device.

    Raises:
        ValueError: the rows hold NaN or infinite values.
    """
    if hasattr(corpus, "detach"):
        block = corpus[start:stop].to(device=device, dtype=torch.float32)
        finite = bool(torch.isfinite(block).all())
    else:
        host = _writable_block(corpus[start:stop])
        finite = bool(np.isfinite(host).all())
        block = host if torch is None else torch.from_numpy(host).to(device)
    if not finite:
        raise ValueError(f"corpus rows {start}-{start + len(block)} hold NaN or infinite values "
                         "(float16 overflow?); exact search needs finite vectors.")
    return block


def top_k_inner_product(
    queries: np.ndarray,
    corpus: np.ndarray | torch_module.Tensor,
    top_k: int,
    *,
    query_block: int | None = None,
    corpus_block: int = 65536,
    device: str | torch_module.device | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k corpus rows by inner product for every query, in bounded memory, on the CPU or a GPU.

    The corpus is read once, ``corpus_block`` rows at a time (float16 memory maps are upcast one
    block at a time); each block is scored against ``query_block`` queries at once, and
    ``torch.topk`` keeps k + 1 candidates per query and block on the scoring device. Only those
    candidates go to the CPU, where they are merged into the running top-k. Extra memory on the
    scoring device is about ``query_block * corpus_block * 4`` bytes of scores plus a float32
    copy of one corpus block and, on a GPU, the float32 queries (n_queries x dim x 4 bytes):
    256 MB + 100 MB with the CPU defaults at d=384, 1 GiB + 100 MB + 15 MB on CUDA (where
    ``query_block`` defaults to 4096) for DisastIR's 9,600 queries, whatever the corpus size.

    Args:
        queries: query vectors, shape (n_queries, dim).
        corpus: corpus vectors, shape (n_docs, dim): a NumPy array (float32 or float16, possibly
            a memory map) or a torch tensor (e.g. already on the GPU).
        top_k: results per query; capped at ``n_docs``.
        query_block: queries scored together; ``None`` means 1024 on the CPU and 4096 on CUDA.
        corpus_block: corpus rows scored together.
        device: where scores are computed: ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (or a
            ``torch.device``). ``None`` means the corpus tensor's device, else the CPU. On CUDA,
            TF32 is switched off during the search (and the caller's setting restored), so scores
            are float32 products like the CPU's and the ranking policy is the same.

    Returns:
        (similarities float32, indices int64), each (n_queries, min(top_k, n_docs)): inner
        products, higher is better, sorted high to low with ties broken by lower corpus index.

    Raises:
        ValueError: shapes disagree, ``top_k`` or a block size is below 1, an input holds NaN or
            infinite values, or ``device`` is unsupported or not available (e.g. ``"cuda"`` on a
            machine without CUDA).
    """
    torch = _torch()
    target = _resolve_device(device, torch)
    if target is None and torch is not None:
        target = corpus.device if hasattr(corpus, "detach") else torch.device("cpu")
    if query_block is None:
        query_block = _QUERY_BLOCK["cpu" if target is None else target.type]
    if top_k < 1 or query_block < 1 or corpus_block < 1:
        raise ValueError(f"top_k={top_k!r}, query_block={query_block!r} and corpus_block={corpus_block!r} "
                         "must all be at least 1.")
    queries = _as_float32(queries, "queries")
    if len(corpus.shape) != 2 or corpus.shape[1] != queries.shape[1]:
        raise ValueError(f"corpus must be 2-D with the queries' dimension {queries.shape[1]}; "
                         f"got shape {tuple(corpus.shape)}.")
    if not np.isfinite(queries).all():
        raise ValueError("queries hold NaN or infinite values; exact search needs finite vectors.")
    n_queries, n_docs = queries.shape[0], corpus.shape[0]
    top_k = min(top_k, n_docs)
    if n_queries == 0 or top_k == 0:
        return np.zeros((n_queries, top_k), np.float32), np.zeros((n_queries, top_k), np.int64)
    query_rows = queries if torch is None else torch.from_numpy(queries).to(target)
    best: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    with _float32_matmul(torch, target):
        for doc_start in range(0, n_docs, corpus_block):
            block = _corpus_block(corpus, doc_start, doc_start + corpus_block, target, torch)
            for q_start in range(0, n_queries, query_block):
                q = query_rows[q_start:q_start + query_block]
                if torch is not None:
                    scores = torch.mm(q, block.T)
                    values, ids = _exact_top_tensor(scores, doc_start, top_k, torch)
                else:
                    scores = q @ block.T
                    values, ids = _exact_top(scores, doc_start, top_k, None)
                del scores
                if q_start in best:  # merge with the earlier blocks' survivors (their ids are all lower)
                    values = np.concatenate([best[q_start][0], values], axis=1)
                    ids = np.concatenate([best[q_start][1], ids], axis=1)
                    values, ids = _exact_top(values, ids, top_k, torch)
                best[q_start] = (values, ids)
            del block
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


def _wants_resident_copy(device: Any) -> bool:
    """Whether :class:`ExactIndex` keeps a copy of the documents on ``device``.

    On the CPU the documents already are in memory (or memory-mapped) and are read block by block, so
    only a GPU gets a resident copy. One function so tests can exercise the copy's life cycle on the CPU.
    """
    return device is not None and device.type != "cpu"


def _to_device(documents: np.ndarray, device: Any, torch: Any, block: int = 65536) -> Any:
    """A copy of ``documents`` on ``device``: float16 stays float16 (upcast per search block), else float32.

    Filled ``block`` rows at a time, so a memory-mapped corpus is never read into RAM whole.
    """
    dtype = np.float16 if documents.dtype == np.float16 else np.float32
    out = torch.empty(documents.shape, dtype=torch.float16 if dtype == np.float16 else torch.float32, device=device)
    for start in range(0, len(documents), block):
        out[start:start + block].copy_(torch.from_numpy(np.array(documents[start:start + block], dtype=dtype)))
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

    Searching on a GPU (``device="cuda:0"``, usually the model's device) gives the same rankings
    as the CPU (TF32 is off during the search). mteb calls ``search`` once per task, so rather than
    upload the corpus for each of them, the documents searched (normalised for cosine) are copied
    to the GPU once and kept there until the documents, the similarity kind or ``device`` change,
    or ``clear()`` drops them: n_docs x dim x 4 bytes of GPU memory (239,704 x 384 x 4 = 368 MB
    for DisastIR at d=384, 3.9 GB at d=4096; half that for float16 documents searched by dot
    product, which stay float16 on the GPU and are upcast per block), counted in
    :attr:`device_bytes`, on top of the search's working memory (see :func:`top_k_inner_product`:
    about 1.1 GiB at d=384). Reranking (``top_ranked``) always runs on the CPU: one query's few
    candidates at a time are too small to pay for a GPU round trip.

    Args:
        keep_on_clear: keep the documents through mteb's per-task ``clear()``. The DisastIR runner
            indexes the shared corpus once for all 48 tasks this way: ``add_documents`` with the
            ids and vectors already held is then skipped (counted in ``adds_skipped``); other ids
            or other vectors replace the held documents.
        query_block: queries scored together (see :func:`top_k_inner_product`); ``None`` means
            1024 on the CPU and 4096 on CUDA.
        corpus_block: corpus rows scored together.
        device: where to search: ``None`` (the CPU), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``;
            settable later through :attr:`device`.

    Attributes:
        idxs: ids of the held documents, in index order.
        adds_skipped: ``add_documents`` calls skipped because the documents were already held.
        device_copies: how many times documents were copied to the device (1 for a whole
            DisastIR run on one GPU).

    Raises:
        ValueError: ``device`` is unsupported or not available (e.g. ``"cuda"`` without CUDA).

    Examples:
        >>> from mteb.models.search_wrappers import SearchEncoderWrapper
        >>> search_model = SearchEncoderWrapper(model, index_backend=ExactIndex())  # doctest: +SKIP
        >>> on_gpu = ExactIndex(keep_on_clear=True, device="cuda:0")  # doctest: +SKIP
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
        """The torch device searches run on, or ``None`` for the CPU default.

        Setting it checks the device (``ValueError`` if unsupported or unavailable) and, when it
        changes, frees the documents' copy on the old device.
        """
        return self._device  # type: ignore[no-any-return]

    @device.setter
    def device(self, device: str | torch_module.device | None) -> None:
        resolved = _resolve_device(device, _torch())
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
        """Hold ``embeddings`` (one row per id in ``idxs``), replacing any documents held before.

        Raises:
            ValueError: the row count differs from ``len(idxs)`` or the array is not 2-D.
        """
        ids, documents = _as_documents(embeddings, idxs)
        if self.keep_on_clear and _same_documents(ids, documents, self.idxs, self._documents):
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
            corpus = self._on_device(kind, documents) if _wants_resident_copy(self._device) else documents
            similarities, indices = top_k_inner_product(queries, corpus, top_k, query_block=self.query_block,
                                                        corpus_block=self.corpus_block, device=self._device)
            return similarities.tolist(), indices.tolist()
        if query_idx_to_id is None:
            raise ValueError("ExactIndex.search needs query_idx_to_id when reranking top_ranked candidates.")
        return self._rerank(queries, documents, top_k, top_ranked, query_idx_to_id)

    def _on_device(self, kind: Similarity, documents: np.ndarray) -> Any:
        """The resident device copy of ``documents`` (searched as ``kind``), made on first use."""
        if self._resident is None or self._resident[0] != kind:
            self._resident = None  # free the old copy before allocating the new one
            self._resident = (kind, _to_device(documents, self._device, _torch()))
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
        """Drop the held documents (and their device copy), unless ``keep_on_clear`` asks to keep them."""
        if self.keep_on_clear:
            return
        self.idxs, self._documents, self._unit_documents, self._resident = [], None, None, None

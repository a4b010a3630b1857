"""The blocked exact top-k kernel: :func:`top_k_inner_product`, in bounded memory, on the CPU or a GPU.

DisastIR's 9,600 queries against 239,704 passages make a 9.2 GB float32 similarity matrix, so
:func:`top_k_inner_product` never builds it: it walks the corpus in blocks, keeps per query the
exact top-k seen so far, and merges each block's candidates into it. torch (``torch.mm`` +
``torch.topk``) is used when importable: on the full set it takes about half NumPy's time and a twentieth
of its added memory (``docs/benchmarks.md``); NumPy (``matmul`` + ``argpartition``) is the fallback; both give the
same ranking.

With torch, the search runs on a torch device (see :mod:`disastir_mteb.search.torch_device`).
Scores and ``torch.topk`` stay on that device and only the small per-block candidate lists
(rows x (k+1)) travel to the CPU, where blocks are merged; the CPU is simply the device ``"cpu"``
of the same code path, which is what the CPU-only tests exercise.

Ranking policy: similarities are ordered high to low, ties by lower corpus index, exactly (a tie
at the k-th place is resolved by scanning the tied row, not left to ``topk``'s arbitrary choice).
Scores are float32 products on every device: TF32 is switched off on CUDA for the search.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from disastir_mteb.search.torch_device import float32_matmul, import_torch, resolve_device
from disastir_mteb.util.errors import InvalidInput

if TYPE_CHECKING:
    from collections.abc import Iterable

    import torch as torch_module

__all__ = ["as_float32", "top_k_inner_product"]

_QUERY_BLOCK = {"cpu": 1024, "cuda": 4096}
"""Default ``query_block`` per device type: 1024 x 65536 float32 scores are 256 MB of RAM; 4096 on a GPU are 1 GiB."""

_TIE_ROWS = 256
"""Score rows fetched to the CPU at once to resolve ties at the k-th place (64 MB at ``corpus_block=65536``)."""


def as_float32(array: Any, what: str) -> np.ndarray:
    """A writable, C-contiguous float32 NumPy copy-or-view of a 2-D NumPy array or torch tensor.

    How every search input (the kernel's queries, the backends' queries and documents) enters: a
    tensor (bfloat16 or on a GPU included) comes to the CPU as float32, and a read-only memory map
    or a float16 array is copied as float32; a writable float32 C-contiguous array is used as it is.

    Args:
        array: vectors, shape (rows, dim).
        what: what they are, for the error message (e.g. ``"query embeddings"``).

    Returns:
        float32 array of shape (rows, dim).

    Raises:
        ValueError: ``array`` is not 2-D.
    """
    if hasattr(array, "detach"):
        array = array.detach().float().cpu().numpy()
    array = np.asarray(array)
    if array.ndim != 2:
        raise InvalidInput(f"{what} must be a 2-D array (rows, dim); got shape {array.shape}.")
    return _writable_block(array)


def _writable_block(block: np.ndarray) -> np.ndarray:
    """A writable C-contiguous float32 block (memory maps are read-only; float16 is upcast here)."""
    if block.dtype == np.float32 and block.flags.c_contiguous and block.flags.writeable:
        return block
    return np.array(block, dtype=np.float32, order="C", copy=True)


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
        raise InvalidInput(f"corpus rows {start}-{start + len(block)} hold NaN or infinite values "
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
    torch = import_torch()
    target = resolve_device(device, torch)
    if target is None and torch is not None:
        target = corpus.device if hasattr(corpus, "detach") else torch.device("cpu")
    if query_block is None:
        query_block = _QUERY_BLOCK["cpu" if target is None else target.type]
    if top_k < 1 or query_block < 1 or corpus_block < 1:
        raise InvalidInput(f"top_k={top_k!r}, query_block={query_block!r} and corpus_block={corpus_block!r} "
                           "must all be at least 1.")
    queries = as_float32(queries, "queries")
    if len(corpus.shape) != 2 or corpus.shape[1] != queries.shape[1]:
        raise InvalidInput(f"corpus must be 2-D with the queries' dimension {queries.shape[1]}; "
                           f"got shape {tuple(corpus.shape)}.")
    if not np.isfinite(queries).all():
        raise InvalidInput("queries hold NaN or infinite values; exact search needs finite vectors.")
    n_queries, n_docs = queries.shape[0], corpus.shape[0]
    top_k = min(top_k, n_docs)
    if n_queries == 0 or top_k == 0:
        return np.zeros((n_queries, top_k), np.float32), np.zeros((n_queries, top_k), np.int64)
    query_rows = queries if torch is None else torch.from_numpy(queries).to(target)
    best: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    with float32_matmul(torch, target):
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


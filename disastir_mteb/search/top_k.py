"""The blocked exact top-k kernel: :func:`top_k_inner_product`, in bounded memory, on the CPU or a GPU.

DisastIR's full similarity matrix would be 9.2 GB of float32, so the corpus is walked in blocks and each block's
candidates are merged into a running top-k. torch (``mm`` + ``topk``) is used where importable, NumPy
(``matmul`` + ``argpartition``) otherwise; both give the same ranking.
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
    """A writable, C-contiguous float32 copy-or-view of a 2-D array or tensor; ``what`` names it in the error.

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
    if block.dtype == np.float32 and block.flags.c_contiguous and block.flags.writeable:
        return block
    return np.array(block, dtype=np.float32, order="C", copy=True)


def _break_ties(values: np.ndarray, found: np.ndarray, rows: np.ndarray, lines: Iterable[np.ndarray],
                ids: np.ndarray | int, kth: np.ndarray, top_k: int) -> None:
    """Redo, in place, the rows where a tie straddles the k-th place: all above it, then the lowest tied ids."""
    for row, line in zip(rows, lines, strict=True):
        line_ids = np.arange(line.size, dtype=np.int64) + ids if isinstance(ids, int) else ids[row]
        above = np.flatnonzero(line > kth[row])
        tied = np.flatnonzero(line == kth[row])
        tied = tied[np.argsort(line_ids[tied], kind="stable")[: top_k - above.size]]
        keep = np.concatenate([above, tied])
        values[row], found[row] = line[keep], line_ids[keep]


def _exact_top(scores: np.ndarray, ids: np.ndarray | int, top_k: int, torch: Any) -> tuple[np.ndarray, np.ndarray]:
    """The top-``top_k`` of each row in no particular order, ties at the boundary to lower ids."""
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
    """The same for a score tensor on its device: only ``topk``'s (rows, k + 1) and tied rows reach the CPU."""
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

    The corpus is read once, ``corpus_block`` rows at a time, and each block scored against ``query_block`` queries;
    only each block's k + 1 best per query travel to the CPU. Extra memory is about
    ``query_block * corpus_block * 4`` bytes of scores plus one float32 corpus block, whatever the corpus size.
    On CUDA, TF32 is off during the search, so scores are float32 products like the CPU's.

    Args:
        queries: query vectors, shape (n_queries, dim).
        corpus: corpus vectors, shape (n_docs, dim): a NumPy array (float16 memory maps included) or a tensor.
        top_k: results per query; capped at ``n_docs``.
        query_block: queries scored together; ``None`` means 1024 on the CPU and 4096 on CUDA.
        corpus_block: corpus rows scored together.
        device: where scores are computed; ``None`` means the corpus tensor's device, else the CPU.

    Returns:
        (similarities float32, indices int64), each (n_queries, min(top_k, n_docs)): higher is better, sorted
        high to low, ties broken by lower corpus index.

    Raises:
        ValueError: shapes disagree, a size is below 1, an input is not finite, or ``device`` is not available.
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


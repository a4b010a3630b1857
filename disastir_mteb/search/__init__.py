"""Layer 3, how the corpus is searched: encode it once, store it, index it once, answer every task.

- ``shared_corpus``: ``SharedCorpusSearch``, the mteb search backend that ties the rest together;
  ``encoder_routes`` (how texts reach the model) and ``query_prefetch`` (all tasks' queries in one pass).
- ``encoding``: the length-sorted, pipelined corpus encoder; ``precision``: fp16/bf16 weights.
- ``store`` (``store_key``, ``store_chunks``, ``store_entry``): embeddings on disk, resumable.
- ``exact_search`` (``ExactIndex``) over ``top_k`` (the blocked kernel) and ``torch_device``.
- ``usearch_index`` (``UsearchIndex``, the ANN index is built here) with ``ann_params`` (presets)
  and ``usearch_files`` (built indexes cached on disk).

May import: :mod:`disastir_mteb.util`, :mod:`disastir_mteb.benchmark`, :mod:`disastir_mteb.models`.
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    """``from disastir_mteb.search import SharedCorpusSearch``: this package was once that one module."""
    from disastir_mteb.util.moved_modules import forward_attribute

    return forward_attribute("search", name)

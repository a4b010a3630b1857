"""Layer 3, how the corpus is searched: encode it once, store it, index it once, answer every task.

``encoding`` is the fast corpus encoding pipeline; ``store`` keeps embeddings on disk;
``exact_search`` and ``usearch_index`` are the exact and ANN (USearch HNSW) indexes;
``shared_corpus`` is the mteb search backend that ties them together for all 48 tasks.

May import: :mod:`disastir_mteb.util`, :mod:`disastir_mteb.benchmark`, :mod:`disastir_mteb.models`.
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    """``from disastir_mteb.search import SharedCorpusSearch``: this package was once that one module."""
    from disastir_mteb.util.moved_modules import forward_attribute

    return forward_attribute("search", name)

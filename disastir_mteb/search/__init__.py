"""How the corpus is searched: encode it once, store it, index it once, answer every task.

- ``shared_corpus``: ``SharedCorpusSearch``, the mteb search backend that ties the rest together, with
  how a task's texts reach the model and every task's queries searched in one pass.
- ``encoding``: the length-sorted, pipelined corpus encoder.
- ``store``: ``EmbeddingStore``, embeddings on disk (the key, the chunk files of an unfinished entry,
  the verified finished entry), resumable.
- ``exact_search`` (``ExactIndex``) over ``top_k`` (the blocked kernel) and ``torch_device`` (where
  it runs, in float32).
- ``usearch_index`` (``UsearchIndex``, the ANN index is built here; its parameters and presets are
  :mod:`disastir_mteb.vocabulary.ann_params`) and ``usearch_files`` (built indexes cached on disk).
"""

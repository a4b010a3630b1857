"""How the corpus is searched: encode it once, store it, index it once, answer every task.

:class:`~disastir_mteb.search.shared_corpus.SharedCorpusSearch` is the mteb search model that ties the rest
together.
"""

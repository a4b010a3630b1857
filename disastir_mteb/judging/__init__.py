"""Judging the holes of the pool: unjudged top-10 passages labelled with the authors' own protocol.

:mod:`~disastir_mteb.judging.protocol` is the protocol, :mod:`~disastir_mteb.judging.job` sends it, resumably, into
the SQLite store of :mod:`~disastir_mteb.judging.store`; the completed scores, the agreement check, the pool study
and the qrels export read that store.
"""

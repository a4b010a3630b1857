"""How a ranking is scored against graded judgements, the authors' way, outside mteb.

- :mod:`~disastir_mteb.scoring.authors`: every metric of the DMRetriever evaluation code
  (``eva/evaluation/metrics.py``): NDCG@10 with unjudged passages as zero and with them removed, MRR@10,
  Recall@10 and the unjudged share, per query and per task. Grades may be fractions (a judge's mean).
"""

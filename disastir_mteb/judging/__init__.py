"""Judging the holes of the pool: unjudged top-10 passages labelled with the authors' own protocol.

- :mod:`~disastir_mteb.judging.protocol`: the DisastIR paper's three prompts per intent (Appendix C), the
  steps each one takes, strict parsing of an answer, and the authors' combination (majority, else mean).
- :mod:`~disastir_mteb.judging.store`: the judgements in SQLite (WAL): every raw answer kept, keyed by
  query text, passage text, judge model and prompt version; resumable, safe for two jobs at once.
- :mod:`~disastir_mteb.judging.completed`: pool-completed scores: the authors' metrics on the published
  judgements plus the store's where none was published (never overriding one), per task, beside the official.
- :mod:`~disastir_mteb.judging.qrels_export`: the completed judgements as the authors' ``qrels_with_added/``
  files (published rows kept, added rows appended; grades as judged or rounded for a run to read).
- :mod:`~disastir_mteb.judging.settings`: the judge model, its servers and when to ask, as one value the
  command line builds once for the holes job and the agreement check.
- :mod:`~disastir_mteb.judging.agreement`: ``judge --agreement N``: published pairs stratified by intent and
  grade, judged through the same job, and Cohen's kappa (binary and quadratic-weighted) per intent.
- :mod:`~disastir_mteb.judging.grade_probabilities`: the judge's distribution over the grades, read at the grade
  token of answers carrying logprobs; a pair's expected grade and P(relevant).
- :mod:`~disastir_mteb.judging.calibration`: ECE, Brier score, AUROC and Kendall's tau-b.
- :mod:`~disastir_mteb.judging.pool_study`: ``judge-study``: the leave-one-run-out pool study and its taus.
- :mod:`~disastir_mteb.judging.holes_job`: ``judge`` as one function: the agreement check, then the holes judged
  online or through the Batch API's files.
"""

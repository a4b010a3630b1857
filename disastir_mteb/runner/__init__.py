"""The encode-once runner behind ``disastir_mteb.evaluate`` and ``disastir-mteb run``.

- ``run``: ``evaluate``, a model x DisastIR tasks -> mteb results, one corpus encoding for all.
- ``run_request``: what ``run`` and ``evaluate`` check and set up before a run (names, data, the Hub), once.
- ``task_selection``: which tasks a run evaluates, grouped by the corpus they search.
- ``task_pool``: tasks the shared pass answered, scored on every core; ``scoring_patch``: mteb's per-task
  scoring without its repeated checks, number for number.
- ``result_cache``: mteb's result cache with atomic saves (each result file whole or not at all).
"""

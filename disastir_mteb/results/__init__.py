"""A run's result files read back, checked, compared and reported, whatever model and search wrote them.

Every reader goes through :func:`~disastir_mteb.results.result_sets.load_result_set`, so what ``report``,
``compare``, the leaderboard and ``submit`` show has passed the same checks.
"""

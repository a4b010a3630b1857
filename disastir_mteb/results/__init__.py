"""Layer 3, what a run leaves behind: result files read back, scored, compared, reported and published.

``per_query`` writes and reads per-query scores; ``result_sets`` finds and reads mteb result
folders; ``grid`` aggregates the 6 x 8 table; ``compare`` and ``significance`` put two sets side
by side; ``published`` holds the authors' numbers; ``report`` and ``plots`` write reports and
figures; ``submit`` and ``submission_checks`` prepare a results-repository pull request.

May import: :mod:`disastir_mteb.util`, :mod:`disastir_mteb.benchmark`, :mod:`disastir_mteb.models`;
never :mod:`disastir_mteb.search` (results are read from files, whatever searched them).
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    """``from disastir_mteb.results import find_result_sets``: this package was once that one module."""
    from disastir_mteb.util.moved_modules import forward_attribute

    return forward_attribute("results", name)

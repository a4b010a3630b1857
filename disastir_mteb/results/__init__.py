"""Layer 3, what a run leaves behind: result files read back, scored, compared, reported and published.

- ``result_sets`` finds and reads mteb result folders (a result file is read here), one set per model
  setting and query set (full, DisastIR-Test, DisastIR-DevLite), refusing impossible scores
  (``score_checks``: metric ranges, the per-query mean); ``settings`` names settings readably;
  ``per_query`` writes and reads the per-query scores the runner keeps beside them; ``grid`` is the 6 x 8
  table; ``provenance``: plugin version, data, gain, instructions, search and precision of a set.
- ``compare`` (with ``pairing``: which sets face which) and ``significance``: two sets side by side, paired
  tests, Kendall's tau;
  ``split_agreement``: Kendall's tau between model rankings on two query sets (DevLite and full).
- ``published``: the authors' numbers; ``report`` (``report_format``, ``report_figures``) and ``plots``:
  reports, figures (PNG, PDF, SVG);
  ``leaderboard_rows``: the rows of the leaderboard page (runs named by setting, published models).
- ``submit`` and ``submission_checks`` (with ``results_repository``, ``run_settings_check``): a folder the
  results repository accepts.

May import: :mod:`disastir_mteb.util`, :mod:`disastir_mteb.benchmark`; never ``models`` or ``search``:
results are read from files, whatever model and search produced them.
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    """``from disastir_mteb.results import find_result_sets``: this package was once that one module."""
    from disastir_mteb.util.moved_modules import forward_attribute

    return forward_attribute("results", name)

"""Where a run's result files are read back, checked, compared and reported, whatever model and search wrote them.

- ``result_sets`` finds and reads mteb result folders (a result file is read here), one set per model
  setting and query set (full, DisastIR-Test, DisastIR-DevLite), any metric's 6 x 8 grid on request;
  ``score_checks`` refuses files that contradict themselves (name, splits, ranges, the per-query file) and
  ``rescoring`` per-query files that contradict their data (their top 10s re-scored), for every reader;
  ``describe`` names settings readably; ``provenance``: plugin version, data, gain, instructions, search and
  precision of a set; ``per_query`` writes and reads the per-query NDCG@10 the runner keeps beside them.
- ``metrics``: the metric vocabulary (mteb's key, the readable name, the range), NDCG@10 the default; a
  new metric family is one line there, and reports, figures and comparisons show it on request.
- ``grid``: the 6 x 8 table of one metric, with the paper's means of means.
- ``compare`` (with ``pairing``: which sets face which) and ``significance``: two sets side by side, paired
  tests, Kendall's tau; ``split_agreement``: Kendall's tau between model rankings on two query sets.
- ``completed_view``: a judge-completed NDCG@10 beside the official one (plain numbers the command line computes
  with :mod:`disastir_mteb.judging.completed`; rendered here, labelled as a per-study estimate).
- ``published``: the authors' numbers (NDCG@10); ``report`` (``report_format``: blocks and their Markdown,
  HTML and text; ``report_figures``: the figure files; ``table2_standing``: a Test run among DMRetriever's
  Table 2) and ``plots``: reports and figures (PNG, PDF, SVG).

The leaderboard page (:mod:`disastir_mteb.leaderboard`) and the submission folder
(:mod:`disastir_mteb.submission`) are built on these, on the main score only.
"""

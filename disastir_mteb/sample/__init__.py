"""Where the sample is generated: a synthetic dataset in the published layout, and DevLite folders from it.

- ``generator``: ``sample_dir`` and ``write_sample`` (the ``disastir-mteb sample`` command, also
  ``python -m disastir_mteb.sample``); ``scale`` its sizes; ``plan`` what it holds (grade counts after
  Table 14, queries, judgements); ``text`` its words and the passage builder.
- ``devlite``: a DisastIR-DevLite folder split from a dataset in the published layout.
"""

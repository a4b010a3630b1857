"""Where the sample is generated: a synthetic dataset in the published layout, and DevLite folders from it.

``generator`` writes it (``disastir-mteb sample``), from ``plan`` (queries and judgements after Table 14) and
``text`` (words and passages); ``devlite`` splits a DevLite folder from it.
"""

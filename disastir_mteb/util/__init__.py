"""Layer 0, plumbing every layer shares: nothing here knows about DisastIR, mteb or models.

``atomic`` (write-then-rename, with the writer's pid in temporary names), ``cache_dir`` (the one
cache root), ``deferred`` (a registration step that waits for a half-imported module),
``moved_modules`` (the flat module paths of earlier releases, forwarded with a warning).

May import: nothing from the package (``tests/test_layers.py`` checks every layer's imports).
"""

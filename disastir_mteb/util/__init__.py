"""Layer 0, plumbing every layer shares: atomic writes, cache locations, deferred steps.

Imports nothing from the rest of the package (``tests/test_layers.py`` checks it).
"""

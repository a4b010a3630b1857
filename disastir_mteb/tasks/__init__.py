"""Where the tasks are defined: the 48 mteb tasks (and their Test and DevLite versions), the benchmarks, statistics.

A built benchmark's tasks are made in ``built``, by the same factory.

mteb is imported first, here: its import registers the plugin (the autoload hook), and registration reads
:mod:`~disastir_mteb.tasks.retrieval`, which must then not be half-executed.
"""

import mteb  # noqa: F401  (first: see above)

"""Where the tasks are defined: the 48 mteb tasks (and their Test and DevLite versions), the benchmarks.

- ``retrieval``: the task classes, built from ``task_metadata/``; ``get_tasks``.
- ``benchmarks``: ``DisastIR``, one benchmark per intent, ``DisastIR-Test`` and ``DisastIR-DevLite``.
- ``task_record``: what every task writes about itself into its result file (version, gain, data).
- ``statistics``: descriptive statistics of the 144 tasks.

mteb is imported first, here: its import registers the plugin (the autoload hook), and registration reads
:mod:`~disastir_mteb.tasks.retrieval`, which must then not be half-executed.
"""

import mteb  # noqa: F401  (first: see above)

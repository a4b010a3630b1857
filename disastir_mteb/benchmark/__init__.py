"""Layer 1, what DisastIR is: its vocabulary, the published files, the 48 mteb tasks and their statistics.

- ``taxonomy``: intents, categories, task names, the file-name alias table (pure data).
- ``layout`` finds the published files, ``reading`` reads their rows and the shared corpus, ``data``
  joins queries and judgements to ids with the paper's gains (mteb's split data).
- ``tasks``: the 48 task classes and the benchmarks, from ``task_metadata/``; ``registration`` puts
  them into mteb; ``statistics`` describes them.
- ``sample`` (with ``sample_plan`` and ``sample_text``): a synthetic dataset in the published layout.
- ``export`` (``export_beir``, ``export_mteb``, ``export_common``): the tasks as BEIR or mteb-native data.
- ``upstream`` (with ``upstream_source``): the tasks, benchmark and statistics written into an mteb checkout.

May import: :mod:`disastir_mteb.util`.
"""

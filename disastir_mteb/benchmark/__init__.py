"""Layer 1, what DisastIR is: its vocabulary, the published files, the 48 mteb tasks and their statistics.

- ``taxonomy``: intents, categories, task names, the file-name alias table (pure data).
- ``layout`` finds the published files, ``reading`` reads their rows and the shared corpus, ``data``
  joins queries and judgements to ids with the paper's gains (mteb's split data).
- ``data_source``: which data the tasks read (``--data``, ``evaluate(data=)``): a folder, the sample or the Hub.
- ``split_layout`` finds a DisastIR-DevLite folder (either layout), ``split_data`` loads DisastIR-DevLite and
  DisastIR-Test (Test derived: the full set minus DevLite's queries).
- ``tasks``: the 48 task classes and their Test and DevLite versions, from ``task_metadata/``; ``suites`` the
  benchmarks; ``registration`` puts them into mteb; ``statistics`` describes the full tasks.
- ``sample`` (with ``sample_plan`` and ``sample_text``): a synthetic dataset in the published layout;
  ``sample_devlite`` a DevLite folder split from it.
- ``export`` (``export_beir``, ``export_mteb``, ``export_common``): the tasks as BEIR or mteb-native data.
- ``upstream`` (with ``upstream_source``): the tasks, benchmark and statistics written into an mteb checkout.

May import: :mod:`disastir_mteb.util`.
"""

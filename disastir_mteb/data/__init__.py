"""Where the data is read: the published layout and DMRetriever's DevLite layout, as mteb split data.

``layout`` finds the published files, ``reading`` reads them, ``published`` joins text-keyed judgements to ids;
``devlite`` and ``devlite_layout`` do the same for DisastIR-DevLite and Test; ``data_cache`` and ``task_cache`` keep
the joins on disk.
"""

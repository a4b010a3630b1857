"""Where the data is read: the published layout and DMRetriever's DevLite layout, as mteb split data.

- ``layout`` finds the published files, ``reading`` reads their rows (file and line in every error) and the
  shared corpus, ``published`` joins queries and judgements to ids with the paper's gains.
- ``devlite_layout`` finds a DisastIR-DevLite folder (either layout); ``devlite`` loads DisastIR-DevLite and
  DisastIR-Test (Test derived: the full set minus DevLite's queries).
- ``extra_qrels``: extra judgements, only when asked (``run --extra-judgements``): a ``qrels_with_added`` folder
  whose integer grades fill pairs the published qrels lack, never overriding a published grade.
- ``data_cache``: what reading and joining a data folder computes, kept on disk keyed by the files' content and read
  back verified (the corpus by ``reading``; each full-set task's join by ``task_cache``, which the tasks load through).
"""

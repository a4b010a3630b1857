"""Where the exports are: the tasks as BEIR folders, as an mteb-native dataset, and as mteb's own files.

- BEIR (:func:`export_beir`, :mod:`disastir_mteb.exports.beir`): one ``GenericDataLoader``
  folder per task, the corpus written once and linked into each.
- mteb (:func:`export_mteb`, :mod:`disastir_mteb.exports.mteb_dataset`): one Hugging Face dataset
  repository for all tasks, task ``DisastIR-QA-Bio`` as configs ``QA-Bio-*`` (:func:`mteb_subset`).
- ``upstream`` (with ``upstream_source``): the tasks, benchmark and statistics written into an mteb checkout,
  as the pull request that would ship DisastIR in mteb itself.

``export_beir``, ``export_mteb`` and ``mteb_subset`` are importable from here. The exports read the data
through the mteb task objects, so what is written is what the tasks score, and they write atomically,
replacing only an earlier export (:mod:`disastir_mteb.exports.common`).
"""

from __future__ import annotations

from disastir_mteb.exports.beir import export_beir
from disastir_mteb.exports.mteb_dataset import export_mteb, mteb_subset

__all__ = ["export_beir", "export_mteb", "mteb_subset"]

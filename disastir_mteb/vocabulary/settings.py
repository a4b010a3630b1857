"""The settings vocabulary: the keys a run files its results under, and the defaults of a run.

mteb keeps a model's results apart by its *experiment settings* (``model_meta.json``'s
``experiment_kwargs``, and a folder per distinct setting). A DisastIR run adds its own under the keys
below, written by the search, the instructions and the precision, and read back by the results layer,
which names them for readers (:mod:`disastir_mteb.results.describe`). Keys start with ``disastir_`` so they
never collide with mteb's. A plain run (exact search, no instructions, the model's own weights) adds none.

The ANN value of :data:`SEARCH_KEY` is written and parsed by one pair:
:func:`disastir_mteb.vocabulary.ann_params.search_setting` and ``parse_search_setting``.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "EXACT",
    "EXPERIMENT_KEYS",
    "INSTRUCTED_PASSAGES",
    "INSTRUCTIONS_KEY",
    "PASSAGES_KEY",
    "PRECISION_KEY",
    "QUERY_SIDE_KEYS",
    "SEARCH_KEY",
    "TEMPLATE_KEY",
]

#: The search: absent or ``exact`` for exact search, ``ann-<label>`` for USearch (``AnnParams.label``).
SEARCH_KEY = "disastir_search"
#: The instruction set (``disastir``, ``dmretriever``, ``none``, ``model``, ``custom-<hash>``) and its template.
INSTRUCTIONS_KEY = "disastir_instructions"
TEMPLATE_KEY = "disastir_template"
#: ``instructed`` when passages get the instruction too (the authors never do).
PASSAGES_KEY = "disastir_passages"
INSTRUCTED_PASSAGES = "instructed"
#: The weights' precision when cast (``fp16``, ``bf16``); absent for the model's own.
PRECISION_KEY = "disastir_precision"

EXPERIMENT_KEYS = (SEARCH_KEY, INSTRUCTIONS_KEY, TEMPLATE_KEY, PASSAGES_KEY, PRECISION_KEY)
#: The settings only queries see: they never change a passage's vector (so never the corpus's store key).
QUERY_SIDE_KEYS = (INSTRUCTIONS_KEY, TEMPLATE_KEY)

#: The search a run does unless told otherwise.
EXACT = "exact"
#: Texts per forward pass unless told otherwise: mteb's own default (``encode_kwargs``).
DEFAULT_BATCH_SIZE = 32

"""The keys a run files its results under, and a run's defaults.

A run's settings become mteb *experiment settings* (a results folder each), prefixed ``disastir_`` so they never
collide with mteb's; a plain run adds none.
"""

from __future__ import annotations

from typing import Literal

from disastir_mteb.util.errors import InvalidInput

__all__ = [
    "BUILT_IN_MODELS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_OUTPUT_FOLDER",
    "EXACT",
    "EXPERIMENT_KEYS",
    "HASHING_ENCODER",
    "INSTRUCTED_PASSAGES",
    "INSTRUCTIONS_KEY",
    "PASSAGES_KEY",
    "PRECISIONS",
    "PRECISION_KEY",
    "QUERY_SIDE_KEYS",
    "SEARCH_KEY",
    "TEMPLATE_KEY",
    "Precision",
    "check_count",
    "parse_precision",
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
#: Where a run files its results unless told otherwise (``run``, ``demo``, ``evaluate()``), and where ``leaderboard``
#: looks by default: mteb's layout under ``./results``.
DEFAULT_OUTPUT_FOLDER = "results"
#: Texts per forward pass unless told otherwise: mteb's own default (``encode_kwargs``).
DEFAULT_BATCH_SIZE = 32

#: The model-free encoder's name (:class:`~disastir_mteb.models.hashing_encoder.HashingEncoder`).
HASHING_ENCODER = "disastir-mteb/hashing-encoder"
#: Model names a run resolves by itself (:func:`disastir_mteb.models.loading.load_model`), without mteb's model
#: registry or the Hub, and what each is (the command line's ``-m`` help lists them).
BUILT_IN_MODELS: dict[str, str] = {
    "bundled": "the packaged all-MiniLM-L6-v2",
    HASHING_ENCODER: "a model-free, nearly instant bag-of-words encoder that leaves the runner's own time in view "
                     "(benchmarks; its scores mean nothing)",
}

Precision = Literal["fp32", "fp16", "bf16"]
#: Accepted precision names -> torch dtype names. ``None`` (the default everywhere) keeps the model's own.
PRECISIONS: dict[str, str] = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
_ALIASES = {"float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}


def parse_precision(value: str | None) -> Precision | None:
    """``fp32``, ``fp16`` or ``bf16`` from any accepted alias (``half``, ``float16``, ...), or ``None``."""
    if value is None:
        return None
    name = _ALIASES.get(str(value).lower(), str(value).lower())
    if name not in PRECISIONS:
        raise InvalidInput(f"Unknown precision {value!r}; valid: {', '.join(PRECISIONS)} (or leave it unset for the "
                           "model's own dtype).")
    return name  # type: ignore[return-value]


def check_count(name: str, value: int | None, lowest: int, unset: str | None = None) -> None:
    """Refuse ``value`` in one sentence unless an integer >= ``lowest``, or None where ``unset`` says what it means."""
    if value is None and unset is not None:
        return
    if type(value) is not int or value < lowest:
        accepted = f" (or None for {unset})" if unset is not None else ""
        raise InvalidInput(f"{name}={value!r} must be an integer >= {lowest}{accepted}.")

"""Readable names for mteb experiment settings: ``exact``, ``ANN (HNSW M=16, ef=64)``, ``instructions: disastir``.

The raw values (``disastir_search=ann-hnsw-ip-f32-M16-efC128-ef64-k10-t16``) stay in the files' metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from disastir_mteb.vocabulary.ann_params import DEFAULT_PRESET, PRESETS, parse_search_setting
from disastir_mteb.vocabulary.instructions import MODEL_OWN, default_template_name
from disastir_mteb.vocabulary.settings import (
    EXACT,
    INSTRUCTED_PASSAGES,
    INSTRUCTIONS_KEY,
    PASSAGES_KEY,
    PRECISION_KEY,
    SEARCH_KEY,
    TEMPLATE_KEY,
)

__all__ = ["describe_search", "describe_setting"]


def describe_search(search: str) -> str:
    """A readable name for a ``disastir_search`` value: ``exact``, ``ANN (HNSW M=16, ef=64)``.

    Only what departs from the paper preset is named; the build threads never are (they change a few edges, not
    the setting).
    """
    try:
        ann = parse_search_setting(search)
    except ValueError:
        return search
    if ann is None:
        return EXACT
    paper = PRESETS[DEFAULT_PRESET]
    details = [] if ann.exact else [f"HNSW M={ann.connectivity}", f"ef={ann.expansion_search}"]
    if not ann.exact and ann.expansion_add != paper.expansion_add:
        details.append(f"efC={ann.expansion_add}")
    if ann.dtype != paper.dtype:
        details.append(ann.dtype)
    if ann.rescore:
        details.append(f"rescore x{ann.rescore}")
    if ann.k != paper.k:
        details.append(f"k={ann.k if ann.k is not None else 'all'}")
    if ann.exact:  # the brute-force reference of the ANN presets, through USearch
        return f"USearch brute force ({', '.join(details)})" if details else "USearch brute force"
    return f"ANN ({', '.join(details)})"


def describe_setting(experiment: Mapping[str, Any]) -> str:
    """A readable name for mteb experiment settings: ``exact``, ``ANN (HNSW M=16, ef=64); instructions: disastir``."""
    rest = {k: v for k, v in experiment.items() if k != SEARCH_KEY}
    search = str(experiment.get(SEARCH_KEY, EXACT))
    parts: list[str] = [describe_search(search)] if search != EXACT else []
    if INSTRUCTIONS_KEY in rest:
        name = str(rest.pop(INSTRUCTIONS_KEY))
        template = str(rest.pop(TEMPLATE_KEY, default_template_name(name)))
        text = "instructions: model's own" if name == MODEL_OWN else f"instructions: {name}"
        if template != default_template_name(name):
            text += f" (template {template})"
        if rest.pop(PASSAGES_KEY, None) == INSTRUCTED_PASSAGES:
            text += ", also on passages"
        parts.append(text)
    if PRECISION_KEY in rest:
        parts.append(f"{rest.pop(PRECISION_KEY)} weights")
    parts += [f"{k.removeprefix('disastir_')}={v}" for k, v in sorted(rest.items())]
    return "; ".join(parts) or EXACT

"""Readable names for mteb experiment settings: ``exact``, ``ANN (HNSW M=16, ef=64)``, ``instructions: disastir``.

mteb files a setting under its raw experiment values (``disastir_search=ann-hnsw-ip-f32-M16-efC128-ef64-
k10-t16``); :func:`describe_setting` turns them into what a reader needs, for headings, titles, legends and
comparisons (:attr:`~disastir_mteb.results.result_sets.ResultSet.setting`). The raw values stay in
:attr:`~disastir_mteb.results.result_sets.ResultSet.label` and in the files' metadata.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["describe_search", "describe_setting"]

# The ANN label of AnnParams.label() with the "ann-" prefix the search adds, e.g.
# ann-hnsw-ip-f32-M16-efC128-ef64-k10-t16-x4 or ann-exact-ip-f32-kall-t16.
_ANN_LABEL = re.compile(r"ann-(?P<kind>hnsw|exact)-(?P<metric>[a-z]+)-(?P<dtype>[a-z0-9]+)"
                        r"(?:-M(?P<M>\d+)-efC(?P<efC>\d+)-ef(?P<ef>\d+))?-k(?P<k>\d+|all)-t\d+(?:-x(?P<x>\d+))?")
# The paper preset's values (disastir_mteb.search.usearch_index.PRESETS["paper"]): only departures are named.
_PAPER_ANN = {"dtype": "f32", "efC": "128", "k": "10"}
# The template each instruction set was published with (disastir_mteb.models.instructions.DEFAULT_TEMPLATE).
_OWN_TEMPLATE = {"disastir": "instruct-query", "dmretriever": "colon", "none": "raw", "model": "model"}


def describe_search(search: str) -> str:
    """A readable name for a ``disastir_search`` value: ``exact``, ``ANN (HNSW M=16, ef=64)``.

    Parses :meth:`disastir_mteb.search.usearch_index.AnnParams.label`, which has no parser of its own. The
    build threads are left out (they change a few edges, not the setting); dtype, rescoring,
    efConstruction and the depth appear only where they depart from the paper preset. A value this
    parser does not know is returned as it is.
    """
    if search == "exact":
        return "exact"
    match = _ANN_LABEL.fullmatch(search)
    if match is None:
        return search
    part = match.groupdict()
    details = [f"HNSW M={part['M']}", f"ef={part['ef']}"] if part["kind"] == "hnsw" else []
    if part["kind"] == "hnsw" and part["efC"] != _PAPER_ANN["efC"]:
        details.append(f"efC={part['efC']}")
    if part["dtype"] != _PAPER_ANN["dtype"]:
        details.append(part["dtype"])
    if part["x"]:
        details.append(f"rescore x{part['x']}")
    if part["k"] != _PAPER_ANN["k"]:
        details.append(f"k={part['k']}")
    if part["kind"] == "exact":  # the brute-force reference of the ANN presets, through USearch
        return f"USearch brute force ({', '.join(details)})" if details else "USearch brute force"
    return f"ANN ({', '.join(details)})"


def describe_setting(experiment: Mapping[str, Any]) -> str:
    """A readable name for mteb experiment settings: ``exact``, ``ANN (HNSW M=16, ef=64); instructions: disastir``.

    A plain run (no settings) is ``exact``; exact search is implied whenever other settings are named.
    Unknown settings are shown as ``name=value``.
    """
    rest = {k: v for k, v in experiment.items() if k != "disastir_search"}
    search = str(experiment.get("disastir_search", "exact"))
    parts: list[str] = [describe_search(search)] if search != "exact" else []
    if "disastir_instructions" in rest:
        name = str(rest.pop("disastir_instructions"))
        template = str(rest.pop("disastir_template", _OWN_TEMPLATE.get(name, "instruct-query")))
        text = "instructions: model's own" if name == "model" else f"instructions: {name}"
        if template != _OWN_TEMPLATE.get(name, "instruct-query"):  # custom mappings default to instruct-query
            text += f" (template {template})"
        if rest.pop("disastir_passages", None) == "instructed":
            text += ", also on passages"
        parts.append(text)
    if "disastir_precision" in rest:
        parts.append(f"{rest.pop('disastir_precision')} weights")
    parts += [f"{k.removeprefix('disastir_')}={v}" for k, v in sorted(rest.items())]
    return "; ".join(parts) or "exact"

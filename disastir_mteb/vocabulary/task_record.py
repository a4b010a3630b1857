"""What every DisastIR task writes about itself into its result file: ``disastir_version``, ``_gain`` and ``_data``.

mteb records none of them. A local folder is named by its last component only, as result files get submitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["BUILT_BENCHMARK", "BUILT_KIND", "DATA_KEY", "DISTRIBUTION", "EXTRA_JUDGEMENTS", "GAIN_KEY", "RECORD_KEYS",
           "SYNTHETIC_NOTICE", "SYNTHETIC_SAMPLE", "VERSION_KEY", "built_benchmark_of", "extended_data", "hub_data",
           "is_extended", "is_synthetic", "local_data", "plugin_version", "task_record"]

VERSION_KEY = "disastir_version"
GAIN_KEY = "disastir_gain"
DATA_KEY = "disastir_data"
RECORD_KEYS = (VERSION_KEY, GAIN_KEY, DATA_KEY)
#: The distribution whose version is recorded.
DISTRIBUTION = "disastir-mteb"
#: What a ``disastir_data`` string says of a folder the sample generator wrote.
SYNTHETIC_SAMPLE = "synthetic sample"
#: What a ``disastir_data`` string says of a built benchmark's folder (``disastir-mteb build``): never DisastIR's data.
BUILT_BENCHMARK = "built benchmark"
#: The marker's ``kind`` of a built benchmark's folder, whose ``name`` its tasks are named after.
BUILT_KIND = "built"
#: What every output on generated data says of its numbers (the run's summary, the report, the figures).
SYNTHETIC_NOTICE = "Synthetic data: scores exercise the pipeline and are not DisastIR results."
#: What a ``disastir_data`` string says of a run that read extra judgements beside the published ones.
EXTRA_JUDGEMENTS = "extra judgements"


def plugin_version() -> str:
    """The installed ``disastir-mteb`` version, or ``unknown`` when the package is not installed."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def hub_data(repo: str, revision: str) -> str:
    """``hf:<repo>@<revision>``: the data string of the Hub dataset."""
    return f"hf:{repo}@{revision}"


def local_data(folder: str | Path, marker: Mapping[str, object] | None) -> str:
    """``local folder <name>`` (last component only), plus ``(synthetic sample, scale .., seed ..)`` if generated.

    A built benchmark's folder says ``(built benchmark <NAME>, seed ..)``: generated data too, never DisastIR's.
    """
    path = Path(folder).expanduser()
    text = f"local folder {path.resolve().name or path}"
    if marker and marker.get("synthetic", True):
        kind = (f"{BUILT_BENCHMARK} {marker.get('name')}" if marker.get("kind") == BUILT_KIND
                else SYNTHETIC_SAMPLE)
        details = [f"{key} {marker[key]}" for key in ("scale", "seed") if marker.get(key) is not None]
        text += f" ({', '.join([kind, *details])})"
    return text


def is_synthetic(data: str) -> bool:
    """Whether a ``disastir_data`` string names generated data (the synthetic sample or a built benchmark)."""
    return f"({SYNTHETIC_SAMPLE}" in data or built_benchmark_of(data) is not None


def built_benchmark_of(data: str) -> str | None:
    """The name of the built benchmark a ``disastir_data`` string names, or None."""
    marker = f"({BUILT_BENCHMARK} "
    if marker not in data:
        return None
    return data.split(marker, 1)[1].split(",", 1)[0].split(")", 1)[0].strip() or None


def extended_data(data: str, folder: str | Path, added: int, judges: str | None = None) -> str:
    """``data`` with ``; extra judgements: <added> added from folder <name>``; such scores are not official."""
    path = Path(folder).expanduser()
    by = f" by {judges}" if judges else ""
    return f"{data}; {EXTRA_JUDGEMENTS}: {added} added from folder {path.resolve().name or path}{by}"


def is_extended(data: str) -> bool:
    """Whether a ``disastir_data`` string names extra judgements (:func:`extended_data`): not an official score."""
    return f"; {EXTRA_JUDGEMENTS}: " in data


def task_record(*, gain: str, data: str) -> dict[str, str]:
    """The three entries a task adds to its scores."""
    return {VERSION_KEY: plugin_version(), GAIN_KEY: gain, DATA_KEY: data}

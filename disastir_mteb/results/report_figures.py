"""A report's figure files: their names, titles, legends and metadata, in each format asked.

People read readable labels (``e5-small-v2 — ANN (HNSW M=16, ef=64)``); each file's metadata keeps the raw
settings and folder behind them, and says when scores come from generated data, also when the title is left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from disastir_mteb.results.metrics import MAIN_METRIC, Metric, get_metric
from disastir_mteb.results.published import published_for
from disastir_mteb.results.result_sets import ResultSet
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.task_record import SYNTHETIC_NOTICE
from disastir_mteb.vocabulary.taxonomy import SPLITS, Intent, benchmark_name

__all__ = ["SYNTHETIC_NOTICE", "SYNTHETIC_TAG", "bars_tag", "benchmark_names", "check_figure_options",
           "figure_metadata", "heatmap_names", "legend_labels", "published_ticks", "tagged", "write_figures"]

SYNTHETIC_TAG = "(synthetic data)"


def check_figure_options(figure_formats: Sequence[str], colour_scale: str) -> None:
    """Refuse unknown figure formats and colour scales before anything is written."""
    from disastir_mteb.results.plots import COLOUR_SCALES, FIGURE_FORMATS

    unknown = [kind for kind in figure_formats if kind not in FIGURE_FORMATS]
    if unknown:
        raise InvalidInput(f"Unknown figure format(s) {unknown}; valid: {', '.join(FIGURE_FORMATS)}.")
    if colour_scale not in COLOUR_SCALES:
        raise InvalidInput(f"Unknown colour scale {colour_scale!r}; valid: {', '.join(COLOUR_SCALES)}.")


def heatmap_names(sets: Sequence[ResultSet]) -> list[str]:
    """One heatmap file name per set, without its suffix, from model, revision and settings; numbered if repeated."""
    def slug(result: ResultSet) -> str:
        text = f"{result.model}-{result.revision[:8]}" + "".join(f"-{v}" for _, v in sorted(result.experiment.items()))
        text += "" if result.is_disastir else f"-{result.benchmark}"
        return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:120]

    slugs = [slug(result) for result in sets]
    seen: dict[str, int] = {}
    names = []
    for name in slugs:
        seen[name] = seen.get(name, 0) + 1
        names.append(f"heatmap-{name}" if slugs.count(name) == 1 else f"heatmap-{name}-{seen[name]}")
    return names


def benchmark_names(sets: Sequence[ResultSet]) -> str:
    """The query sets' names, e.g. ``DisastIR``, ``DisastIR, DisastIR-DevLite`` or a built benchmark's ``MyOrg``."""
    present = {result.split for result in sets if result.built is None}
    built = sorted({result.built for result in sets if result.built is not None})
    return ", ".join([*(benchmark_name(split) for split in SPLITS if split in present), *built])


def tagged(text: str, result: ResultSet) -> str:
    """``text`` with "(synthetic data)" when the set's scores come from generated data."""
    return f"{text} {SYNTHETIC_TAG}" if result.synthetic else text


def bars_tag(sets: Sequence[ResultSet]) -> str:
    """What the per-intent figure's title and caption say about synthetic data ("" when no set is)."""
    synthetic = sum(1 for r in sets if r.synthetic)
    if not synthetic:
        return ""
    return f" {SYNTHETIC_TAG}" if synthetic == len(sets) else " (some sets on synthetic data)"


def legend_labels(sets: Sequence[ResultSet]) -> dict[str, ResultSet]:
    """Legend label -> set: short model name and readable setting, made unique (revision, then a number)."""
    labels: dict[str, ResultSet] = {}
    mixed = any(r.synthetic for r in sets) and not all(r.synthetic for r in sets)
    for result in sets:
        label = f"{result.model.split('/')[-1]} — {result.setting}"
        if mixed and result.synthetic:
            label += f" {SYNTHETIC_TAG}"
        if label in labels:  # a second revision of the same model and setting
            label = f"{label} @{result.revision[:8]}"
        unique, n = label, 2
        while unique in labels:  # settings that differ only where the readable label is silent (threads)
            unique, n = f"{label} #{n}", n + 1
        labels[unique] = result
    return labels


def published_ticks(labels: dict[str, ResultSet]) -> dict[str, dict[Intent | None, float]]:
    """Legend label -> the published numbers drawn as ticks over its bars (sets of known models only)."""
    published: dict[str, dict[Intent | None, float]] = {}
    for label, result in labels.items():
        record = None if result.built is not None else next(iter(published_for(result.model, result.split)), None)
        if record is not None:
            ticks: dict[Intent | None, float] = dict(record.intents)
            if record.overall is not None:
                ticks[None] = record.overall
            if ticks:
                published[label] = ticks
    return published


def figure_metadata(title: str, labels: dict[str, ResultSet]) -> dict[str, str]:
    """A figure file's metadata: the readable title, and for each readable label the raw settings and folder."""
    lines = [f"{label}: {r.label} [{r.folder}]" for label, r in labels.items()]
    metadata = {"Title": title, "Description": "\n".join(lines)}
    if any(r.synthetic for r in labels.values()):
        metadata["Warning"] = SYNTHETIC_NOTICE
    return metadata


def write_figures(sets: Sequence[ResultSet], out: Path, *, kinds: Sequence[str], titles: bool = True,
                  colour_scale: str = "data", metric: str | Metric = MAIN_METRIC) -> list[Path]:
    """Each set's heatmap and the per-intent bars, in each of ``kinds`` (``png``, ``pdf``, ``svg``); what was written.

    Published ticks are drawn on the main score only, the one metric the authors publish.

    Raises:
        ValueError: an unknown metric, or one a set's task files lack (before any figure is written).
    """
    from disastir_mteb.results.plots import heatmap, intent_bars

    metric = get_metric(metric)
    grids = {id(result): result.grid_of(metric) for result in sets}
    written: list[Path] = []
    for result, name in zip(sets, heatmap_names(sets), strict=True):
        title = tagged(f"{result.display_label}: {metric.name}", result)
        metadata = figure_metadata(title, {result.display_label: result})
        written += [heatmap(grids[id(result)], out / f"{name}.{kind}", title=title if titles else None,
                            metadata=metadata, colour_scale=colour_scale, metric=metric) for kind in kinds]
    labels = legend_labels(sets)
    title = f"{benchmark_names(sets)} {metric.name} per intent{bars_tag(sets)}"
    metadata = figure_metadata(title, labels)
    published = published_ticks(labels) if metric.is_main else {}
    written += [intent_bars({label: grids[id(r)] for label, r in labels.items()}, out / f"intents.{kind}",
                            title=title if titles else None, published=published, metadata=metadata, metric=metric)
                for kind in kinds]
    return written

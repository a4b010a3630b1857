"""Figures for reports: the 6 x 8 heatmap of one result set, per-intent bars across sets, of one metric.

matplotlib (the ``plots`` extra) with the Agg backend, so no display is needed. PNG for the reports to embed, PDF
and SVG for papers: TrueType fonts in PDFs (publishers refuse Type 3), real text in SVGs. Missing tasks are drawn
hatched, their row and column means left empty, as in the tables.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from disastir_mteb.results.grid import ScoreGrid
from disastir_mteb.results.metrics import MAIN_METRIC, Metric, get_metric
from disastir_mteb.util.errors import InvalidInput, MissingPackage
from disastir_mteb.util.install_hint import install_hint
from disastir_mteb.vocabulary.taxonomy import CATEGORY_FULL_NAMES, INTENTS, Intent

__all__ = ["COLOUR_SCALES", "FIGURE_FORMATS", "colour_limits", "figures_unavailable", "heatmap",
           "intent_bars"]

#: The formats a figure can be written in (a file suffix each).
FIGURE_FORMATS = ("png", "pdf", "svg")
#: ``data``: the heatmap's colours span the grid's own lowest and highest value; ``0-100``: a metric's full range
#: (every metric a report shows is a fraction, x100).
COLOUR_SCALES = ("data", "0-100")

_DPI = 200
_TITLE_CHARACTERS = {"heatmap": 95, "bars": 80}  # at 11 pt, what fits across each figure (checked by eye)
# Vector output as journals take it: TrueType fonts in PDFs (not Type 3), real text in SVGs.
_VECTOR_RC = {"pdf.fonttype": 42, "svg.fonttype": "none"}


def figures_unavailable() -> str | None:
    """Why no figure can be drawn here (no matplotlib), with the command that mends it; None when one can."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return f"Figures need matplotlib: {install_hint('plots')}"
    return None


def _pyplot():
    if (missing := figures_unavailable()) is not None:
        raise MissingPackage(missing)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _file_metadata(kind: str, metadata: Mapping[str, str]) -> dict[str, str]:
    """``metadata`` as each format keeps it: PNG any text entry; PDF and SVG only their own keys."""
    if kind == "png":
        return dict(metadata)
    text = "\n".join(value for key, value in metadata.items() if key != "Title")
    extra = {"Subject": text} if kind == "pdf" else {"Description": text}
    return {key: value for key, value in {"Title": metadata.get("Title", ""), **extra}.items() if value}


def _save(figure: object, path: Path, metadata: Mapping[str, str] | None = None) -> Path:
    """Write the figure in the format its suffix names, through a temporary file: a killed run leaves none truncated.

    Raises:
        ValueError: a suffix that is not one of :data:`FIGURE_FORMATS`.
    """
    kind = path.suffix.lstrip(".").lower()
    if kind not in FIGURE_FORMATS:
        raise InvalidInput(f"Cannot write a figure as {path.name!r}: the file name must end in "
                           f"{', '.join('.' + f for f in FIGURE_FORMATS)}.")
    plt = _pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with plt.rc_context(_VECTOR_RC):
        figure.savefig(temporary, format=kind, dpi=_DPI, bbox_inches="tight",  # type: ignore[attr-defined]
                       metadata=_file_metadata(kind, metadata or {}))
    temporary.replace(path)
    return path


def _title(text: str, figure: str, scale: float = 1.0) -> str:
    """``text`` wrapped onto as many lines as the figure needs: a long model name never runs off the edge.

    ``scale``: the figure's width against the usual one (a built benchmark's heatmap is narrower).
    """
    return textwrap.fill(text, int(_TITLE_CHARACTERS[figure] * scale), break_long_words=False,
                         break_on_hyphens=False)


def _heatmap_values(grid: ScoreGrid) -> np.ndarray:
    """The array drawn (x100; NaN where missing): the cells, intent means last, category means below.

    DisastIR's 6 x 8 cells, or a built benchmark's intents by its categories.
    """
    intents, categories = grid.intents(), grid.categories()
    values = np.full((len(intents) + 1, len(categories) + 1), np.nan)
    for row, intent in enumerate(intents):
        for column, category in enumerate(categories):
            score = grid.cell(intent, category)
            values[row, column] = np.nan if score is None else 100 * score
        mean = grid.intent_mean(intent)
        values[row, -1] = np.nan if mean is None else 100 * mean
    for column, category in enumerate(categories):
        mean = grid.category_mean(category)
        values[-1, column] = np.nan if mean is None else 100 * mean
    overall = grid.overall()
    values[-1, -1] = np.nan if overall is None else 100 * overall
    return values


def colour_limits(grid: ScoreGrid, colour_scale: str = "data") -> tuple[float, float]:
    """The heatmap's colour range (x100): the grid's lowest and highest score for ``data``, (0, 100) for ``0-100``.

    Raises:
        ValueError: ``colour_scale`` is not one of :data:`COLOUR_SCALES`.
    """
    if colour_scale not in COLOUR_SCALES:
        raise InvalidInput(f"Unknown colour scale {colour_scale!r}; valid: {', '.join(COLOUR_SCALES)}.")
    scores = [100 * score for score in grid.scores.values()]
    if colour_scale == "0-100" or not scores:
        return 0.0, 100.0
    low, high = min(scores), max(scores)
    return (low - 0.5, high + 0.5) if low == high else (low, high)


def heatmap(grid: ScoreGrid, path: str | Path, *, title: str | None = "", metadata: Mapping[str, str] | None = None,
            colour_scale: str = "data", metric: str | Metric = MAIN_METRIC) -> Path:
    """The 6 x 8 grid (x100) with intent means as a last column and category means as a last row.

    A built benchmark's grid has the intents and categories it has tasks of; a cell it has no task for is left blank,
    a task it has but the run lacks is marked n/a.

    Args:
        grid: the scores.
        path: the file to write; its suffix picks the format.
        title: "" for a generic one, None for none (a figure whose caption is in the paper).
        metadata: entries stored in the file, such as the raw run settings behind a readable title.
        colour_scale: ``data`` spans the grid's own range; ``0-100`` compares heatmaps of several models by eye.
        metric: the grid's metric, named on the colour bar and in the generic title.

    Raises:
        ValueError: an unknown colour scale, file suffix or metric.
    """
    metric = get_metric(metric)
    low, high = colour_limits(grid, colour_scale)
    plt = _pyplot()
    values = _heatmap_values(grid)
    intents, categories = grid.intents(), grid.categories()

    # DisastIR's 7 x 9 cells on 10.5 x 5.2 inches; a built benchmark's fewer on less, down to what the labels need
    width = max(7.0, 10.5 * (len(categories) + 1) / 9)
    figure, axes = plt.subplots(figsize=(width, max(3.2, 5.2 * (len(intents) + 1) / 7)))
    colours = plt.get_cmap("YlGnBu").with_extremes(bad="#f2f2f2")
    image = axes.imshow(np.ma.masked_invalid(values), cmap=colours, vmin=low, vmax=high, aspect="auto")
    for row in range(values.shape[0]):
        for column in range(values.shape[1]):
            value = values[row, column]
            is_mean = row == len(intents) or column == len(categories)
            if np.isnan(value):
                missing_cell = not is_mean and grid.holds(intents[row], categories[column])
                axes.text(column, row, "n/a" if missing_cell else "", ha="center", va="center", fontsize=8,
                          color="#888888")
                if missing_cell:
                    axes.add_patch(plt.Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, hatch="///",
                                                 edgecolor="#bbbbbb", linewidth=0))
                continue
            axes.text(column, row, f"{value:.2f}", ha="center", va="center", fontsize=9,
                      fontweight="bold" if is_mean else "normal",
                      color="white" if (value - low) / (high - low) > 0.6 else "#1a1a1a")  # on the darker blues
    axes.axhline(len(intents) - 0.5, color="white", linewidth=3)
    axes.axvline(len(categories) - 0.5, color="white", linewidth=3)
    names = [textwrap.fill(CATEGORY_FULL_NAMES[c], 14, break_long_words=False) for c in categories]
    axes.set_xticks(range(len(categories) + 1), [f"{c.value}\n{n}" for c, n in zip(categories, names, strict=True)]
                    + ["Mean"], fontsize=8)
    axes.set_yticks(range(len(intents) + 1), [i.value for i in intents] + ["Mean"], fontsize=9)
    axes.tick_params(length=0)
    for spine in axes.spines.values():
        spine.set_visible(False)
    bar = figure.colorbar(image, ax=axes, fraction=0.03, pad=0.02)
    fitted = colour_scale == "data" and bool(grid.scores)
    bar.set_label(f"{metric.name} (x100), scale fitted: {low:.2f}–{high:.2f}" if fitted
                  else f"{metric.name} (x100), fixed scale 0–100")
    if title is not None:
        axes.set_title(_title(title or f"DisastIR {metric.name}", "heatmap", width / 10.5), fontsize=11, loc="left")
    path = _save(figure, Path(path), metadata)
    plt.close(figure)
    return path


def intent_bars(grids: Mapping[str, ScoreGrid], path: str | Path, *, title: str | None = "",
                published: Mapping[str, Mapping[Intent | None, float]] | None = None,
                metadata: Mapping[str, str] | None = None, metric: str | Metric = MAIN_METRIC) -> Path:
    """Grouped bars per intent and overall, one bar per result set (``grids``: legend label -> grid).

    ``published`` (legend label -> {intent, None for overall: score}) is drawn as black ticks over that set's bars;
    ``title`` and ``metadata`` are as :func:`heatmap`'s.

    Raises:
        ValueError: an unknown file suffix or metric.
    """
    metric = get_metric(metric)
    plt = _pyplot()
    labels: Sequence[str] = list(grids)
    held = [intent for intent in INTENTS if any(intent in grid.intents() for grid in grids.values())]
    groups: list[Intent | None] = [*(held or INTENTS), None]  # a built benchmark's intents, DisastIR's six
    width = 0.8 / max(1, len(labels))
    figure, axes = plt.subplots(figsize=(max(8.0, 1.2 * len(groups) * max(1, len(labels)) ** 0.5), 4.6))
    colours = plt.get_cmap("tab10")
    for n, label in enumerate(labels):
        grid = grids[label]
        scores = [grid.intent_mean(g) if g is not None else grid.overall() for g in groups]
        positions = np.arange(len(groups)) - 0.4 + width * (n + 0.5)
        heights = [100 * s if s is not None else 0.0 for s in scores]
        bars = axes.bar(positions, heights, width * 0.92, label=label, color=colours(n % 10))
        for bar, score in zip(bars, scores, strict=True):
            if score is None:
                axes.text(bar.get_x() + bar.get_width() / 2, 1, "n/a", ha="center", va="bottom", fontsize=7,
                          rotation=90, color="#666666")
            elif len(labels) <= 4:
                axes.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 0.8, f"{100 * score:.1f}",
                          ha="center", va="bottom", fontsize=7)
        for position, group in zip(positions, groups, strict=True):
            reference = (published or {}).get(label, {}).get(group)
            if reference is not None:
                axes.plot([position - width * 0.45, position + width * 0.45], [100 * reference] * 2, color="black",
                          linewidth=2, label="published" if n == 0 and group is groups[0] else None)
    axes.set_xticks(range(len(groups)), [g.value if g is not None else "Avg" for g in groups])
    axes.set_ylabel(f"{metric.name} (x100)")
    axes.set_ylim(0, 100)
    axes.grid(axis="y", alpha=0.3)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    handles, names = axes.get_legend_handles_labels()
    if published and "published" not in names:
        handles.append(plt.Line2D([], [], color="black", linewidth=2))
        names.append("published (black ticks)")
    axes.legend(handles, names, fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.09),
                ncol=1 if max(map(len, names)) > 40 else min(3, len(names)))
    if title is not None:
        axes.set_title(_title(title or f"DisastIR {metric.name} per intent", "bars"), fontsize=11, loc="left")
    path = _save(figure, Path(path), metadata)
    plt.close(figure)
    return path

"""Figures for reports: the 6 x 8 NDCG@10 heatmap of one result set, per-intent bars across sets.

matplotlib with the Agg backend (no display needed), 200 dpi PNGs, colour scale fixed to 0-100
so that heatmaps of different models compare by eye. Missing tasks are drawn hatched and
labelled "n/a"; their row and column means are left empty, as in the tables. Titles are wrapped to
the figure's width; ``metadata`` (e.g. the raw run settings behind a readable title) is stored in
the PNG's text chunks, where ``PIL.Image.open(path).text`` reads it back.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from disastir_mteb.benchmark.taxonomy import CATEGORIES, CATEGORY_FULL_NAMES, INTENTS, Intent
from disastir_mteb.results.grid import ScoreGrid

__all__ = ["heatmap", "intent_bars"]

_DPI = 200
_TITLE_CHARACTERS = {"heatmap": 95, "bars": 80}  # at 11 pt, what fits across each figure (checked by eye)


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError("Plots need matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(figure: object, path: Path, metadata: Mapping[str, str] | None = None) -> Path:
    """Save through a temporary file and rename: a killed run leaves no truncated PNG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp.png")
    figure.savefig(temporary, dpi=_DPI, bbox_inches="tight",  # type: ignore[attr-defined]
                   metadata=dict(metadata or {}))
    temporary.replace(path)
    return path


def _title(text: str, figure: str) -> str:
    """``text`` wrapped onto as many lines as the figure needs: a long model name never runs off the edge."""
    return textwrap.fill(text, _TITLE_CHARACTERS[figure], break_long_words=False, break_on_hyphens=False)


def heatmap(grid: ScoreGrid, path: str | Path, *, title: str = "", metadata: Mapping[str, str] | None = None) -> Path:
    """The 6 x 8 grid (x100) with intent means as a last column and category means as a last row.

    ``metadata``: PNG text entries (``Title``, ``Description``, ...) stored in the file.
    """
    plt = _pyplot()
    values = np.full((len(INTENTS) + 1, len(CATEGORIES) + 1), np.nan)
    for row, intent in enumerate(INTENTS):
        for column, category in enumerate(CATEGORIES):
            score = grid.cell(intent, category)
            values[row, column] = np.nan if score is None else 100 * score
        mean = grid.intent_mean(intent)
        values[row, -1] = np.nan if mean is None else 100 * mean
    for column, category in enumerate(CATEGORIES):
        mean = grid.category_mean(category)
        values[-1, column] = np.nan if mean is None else 100 * mean
    overall = grid.overall()
    values[-1, -1] = np.nan if overall is None else 100 * overall

    figure, axes = plt.subplots(figsize=(10.5, 5.2))
    colours = plt.get_cmap("YlGnBu").with_extremes(bad="#f2f2f2")
    image = axes.imshow(np.ma.masked_invalid(values), cmap=colours, vmin=0, vmax=100, aspect="auto")
    for row in range(values.shape[0]):
        for column in range(values.shape[1]):
            value = values[row, column]
            is_mean = row == len(INTENTS) or column == len(CATEGORIES)
            if np.isnan(value):
                missing_cell = not is_mean
                axes.text(column, row, "n/a" if missing_cell else "", ha="center", va="center", fontsize=8,
                          color="#888888")
                if missing_cell:
                    axes.add_patch(plt.Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, hatch="///",
                                                 edgecolor="#bbbbbb", linewidth=0))
                continue
            axes.text(column, row, f"{value:.2f}", ha="center", va="center", fontsize=9,
                      fontweight="bold" if is_mean else "normal", color="white" if value > 60 else "#1a1a1a")
    axes.axhline(len(INTENTS) - 0.5, color="white", linewidth=3)
    axes.axvline(len(CATEGORIES) - 0.5, color="white", linewidth=3)
    names = [textwrap.fill(CATEGORY_FULL_NAMES[c], 14, break_long_words=False) for c in CATEGORIES]
    axes.set_xticks(range(len(CATEGORIES) + 1), [f"{c.value}\n{n}" for c, n in zip(CATEGORIES, names, strict=True)]
                    + ["Mean"], fontsize=8)
    axes.set_yticks(range(len(INTENTS) + 1), [i.value for i in INTENTS] + ["Mean"], fontsize=9)
    axes.tick_params(length=0)
    for spine in axes.spines.values():
        spine.set_visible(False)
    bar = figure.colorbar(image, ax=axes, fraction=0.03, pad=0.02)
    bar.set_label("NDCG@10 (x100)")
    axes.set_title(_title(title or "DisastIR NDCG@10", "heatmap"), fontsize=11, loc="left")
    path = _save(figure, Path(path), metadata)
    plt.close(figure)
    return path


def intent_bars(grids: Mapping[str, ScoreGrid], path: str | Path, *, title: str = "",
                published: Mapping[str, Mapping[Intent | None, float]] | None = None,
                metadata: Mapping[str, str] | None = None) -> Path:
    """Grouped bars: per intent (and the overall mean), one bar per result set.

    Args:
        grids: legend label -> grid, in legend order.
        path: the PNG to write.
        title: figure title.
        published: legend label -> {intent (None = overall): published score}, drawn as black
            ticks over that set's bars.
        metadata: PNG text entries (``Title``, ``Description``, ...) stored in the file.
    """
    plt = _pyplot()
    labels: Sequence[str] = list(grids)
    groups: list[Intent | None] = [*INTENTS, None]
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
                          linewidth=2, label="published" if n == 0 and group is INTENTS[0] else None)
    axes.set_xticks(range(len(groups)), [g.value if g is not None else "Avg" for g in groups])
    axes.set_ylabel("NDCG@10 (x100)")
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
    axes.set_title(_title(title or "DisastIR NDCG@10 per intent", "bars"), fontsize=11, loc="left")
    path = _save(figure, Path(path), metadata)
    plt.close(figure)
    return path

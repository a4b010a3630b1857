"""``disastir-mteb leaderboard``: mteb's own leaderboard app, offline, with DisastIR in its menu.

mteb's gradio app over a private results cache: the user's result sets and the DisastIR paper's models
(:mod:`~disastir_mteb.leaderboard.rows`), opening on ``DisastIR``, with a "Provenance" section under the tables.
What mteb offers no setting for is done in :mod:`~disastir_mteb.leaderboard.mteb_patch` only. Needs the
``leaderboard`` extra; nothing is fetched from the network.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from disastir_mteb.leaderboard.browser import SCREENSHOT_WIDTH, find_browser, screenshot
from disastir_mteb.leaderboard.rows import (
    PUBLISHED_MARK,
    BoardRow,
    published_reference,
    published_rows,
    result_rows,
)
from disastir_mteb.results.published import published_sizes
from disastir_mteb.util.atomic import write_text_atomic
from disastir_mteb.util.errors import InvalidInput, MissingPackage
from disastir_mteb.util.install_hint import install_hint
from disastir_mteb.util.mteb_internals import menu_entry, results_frame
from disastir_mteb.vocabulary.metadata import MAIN_SCORE_KEY
from disastir_mteb.vocabulary.taxonomy import BENCHMARK_NAMES

__all__ = ["BENCHMARKS", "DEFAULT", "PAGE_READY", "SCREENSHOT_WIDTH", "TITLE", "blurb", "find_browser",
           "leaderboard_app", "menu", "provenance_markdown", "screenshot", "serve"]

DEFAULT = "DisastIR"
"""The benchmark the page opens on."""
BENCHMARKS = BENCHMARK_NAMES
"""The benchmarks in the menu: all 48 tasks, one per search intent, then DMRetriever's two query sets."""

TITLE = "DisastIR leaderboard"
"""The page's title (browser tab and heading), in place of mteb's "MTEB Leaderboard"."""

#: True once the page shows mteb's summary table and the provenance section (what a screenshot must hold).
PAGE_READY = ("!!document.getElementById('disastir_provenance') && document.body.innerText.includes('Rank (Borda)')")


#: Gradio's Markdown breaks lines anywhere (``overflow-wrap: anywhere``), splitting words mid-word; the provenance
#: table and the menu's title break between words only, and scroll sideways where a word does not fit.
_PAGE_CSS = ("#disastir_provenance span, #disastir_provenance td, #disastir_provenance th "
             "{overflow-wrap: normal; word-break: normal}"
             " #disastir_provenance table {display: block; overflow-x: auto}"
             " .sidebar .prose h2 {overflow-wrap: normal; word-break: normal;"
             " font-size: clamp(0.95rem, 1.45vw, 1.6rem)}")


def _require_gradio() -> Any:
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # no calls home from an offline page
    try:
        import gradio
    except ImportError as error:
        raise MissingPackage(f"The leaderboard needs gradio, plotly and cachetools ({error}); install them with "
                             f"{install_hint('leaderboard')}.") from None
    return gradio


def menu() -> list[Any]:
    """The page's menu as mteb's ``MenuEntry`` list: DisastIR, its per-intent benchmarks, DMRetriever's query sets."""
    import mteb

    full, *per_intent, test, devlite = (mteb.get_benchmark(name) for name in BENCHMARKS)
    return [menu_entry(name="Disaster management", open=True, description="DisastIR (Yin et al., EMNLP 2025 "
                       "Findings): 6 search intents x 8 disaster categories.",
                       benchmarks=[full, menu_entry(name="By search intent", benchmarks=per_intent, open=True),
                                   menu_entry(name="DMRetriever's query sets", open=True, benchmarks=[test, devlite])])]


def _meta_for(row: BoardRow, registry: dict[str, Any]) -> Any:
    """The ModelMeta the app needs for a row: the model's own (renamed), else its file's, else a minimal one."""
    from mteb.models import ModelMeta

    base = registry.get(row.model)
    if base is None and row.meta:
        try:
            base = ModelMeta.model_validate_json_resolved(json.dumps(row.meta))
        except ValueError:
            base = None
    if base is None:
        n_parameters, embed_dim = published_sizes().get(row.model.lower(), (None, None))
        base = ModelMeta.create_empty({"n_parameters": n_parameters, "embed_dim": embed_dim})
    update: dict[str, Any] = {"name": row.name, "revision": row.revision, "experiment_kwargs": None}
    if row.published:
        update["reference"] = published_reference()
    return base.model_copy(update=update)


def _task_results(row: BoardRow) -> list[Any]:
    from mteb import TaskResult

    if not row.published:
        return [TaskResult.from_disk(path) for path in row.task_files.values()]
    import mteb

    return [TaskResult(dataset_revision=mteb.get_task(task).metadata.dataset["revision"], task_name=task,
                       mteb_version=None, evaluation_time=None, kg_co2_emissions=None,
                       scores={"test": [{"main_score": score, MAIN_SCORE_KEY: score, "hf_subset": "default",
                                         "languages": ["eng-Latn"]}]})
            for task, score in row.scores.items()]


def _write_cache(rows: Sequence[BoardRow], folder: Path) -> Any:
    """A ResultCache at ``folder`` whose leaderboard parquet holds ``rows`` for the menu's benchmarks."""
    import mteb
    from mteb.cache import ResultCache
    from mteb.results import BenchmarkResults, ModelResult

    results = BenchmarkResults(model_results=[
        ModelResult(model_name=row.name, model_revision=row.revision, task_results=_task_results(row))
        for row in rows])
    cache = ResultCache(folder)
    frames = {name: results_frame(results, mteb.get_benchmark(name).tasks) for name in BENCHMARKS}
    BenchmarkResults.save_leaderboard_cache(frames, cache.leaderboard_parquet_path)
    return cache


def provenance_markdown(rows: Sequence[BoardRow]) -> str:
    """The "Provenance" section: a two-column table (what, how) per run, to fit a laptop window; the published rows."""
    runs = [row for row in rows if not row.published]
    published = [row for row in rows if row.published]
    parts = ["## Provenance", ""]
    if runs:
        parts += ["**Your runs**", ""]
        for row in runs:
            parts += [f"| Row | {row.name} |", "|---|---|", f"| Revision | {row.revision} |",
                      *(f"| {label} | {value} |" for label, value in row.details), ""]
    if published:
        parts += ["", f"**Published rows** ({len(published)} models, marked *published* in their names): "
                  + "; ".join(f"{label.lower()}: {value}" for label, value in published[0].details)
                  + f". Source: {published_reference()}. They are the authors' numbers, not re-run here. "
                  "DMRetriever's published numbers (its paper's Table 2) are on DisastIR-Test, 9,120 of the "
                  "9,600 queries, so they are not rows of these 48 tasks."]
    return "\n".join(parts).replace("\n\n\n", "\n\n")


def blurb(rows: Sequence[BoardRow]) -> str:
    """The Markdown at the top of the page: what DisastIR is, what the rows are, whose app this is."""
    import mteb

    runs = sum(not row.published for row in rows)
    yours = {0: "there is no result set of yours", 1: "the other row is your result set"}.get(
        runs, f"the other {runs} are your result sets")
    return (f"## {TITLE}\n\n"
            "Retrieval for disaster management: the DisastIR benchmark (Yin et al., EMNLP 2025 Findings), one "
            "benchmark per search intent, and DMRetriever's DisastIR-Test and DisastIR-DevLite query sets, chosen "
            "in the menu on the left. Scores are NDCG@10 x100 with the authors' exponential gain; the benchmark's "
            f"description below says how they are averaged. The {len(rows) - runs} rows marked "
            f"*{PUBLISHED_MARK}* are the authors' numbers, not re-run here; {yours}, and *Provenance of these "
            "rows* at the bottom says how each was made. This is mteb's own leaderboard "
            f"app (mteb {getattr(mteb, '__version__', '?')}), served offline by disastir-mteb.")


@contextmanager
def leaderboard_app(results: Sequence[str | Path], *, published: bool = True) -> Iterator[tuple[Any, list[BoardRow]]]:
    """Mteb's leaderboard app over ``results`` (and the published rows), ready to ``launch()``; mteb restored on exit.

    Raises:
        ImportError: the ``leaderboard`` extra is not installed.
        FileNotFoundError: a path of ``results`` is missing or holds no result set.
        ValueError: no results and no published rows: nothing to show.
    """
    gradio = _require_gradio()
    from mteb.models.model_implementations import MODEL_REGISTRY

    from disastir_mteb.leaderboard.mteb_patch import offline_footer, patched, replace_blurb

    rows = result_rows(results) if results else []
    rows += published_rows() if published else []
    if not rows:
        raise InvalidInput("Nothing to show: pass result folders, or keep the published models (no --no-published).")
    metas = [_meta_for(row, MODEL_REGISTRY) for row in rows if row.name not in MODEL_REGISTRY]
    with tempfile.TemporaryDirectory(prefix="disastir-leaderboard-") as work, patched(menu(), DEFAULT, metas):
        cache = _write_cache(rows, Path(work))
        from mteb.leaderboard import get_leaderboard_app

        app = get_leaderboard_app(cache, rebuild=False, cache_repo_id=None)
        replace_blurb(app, blurb(rows), title=TITLE)
        offline_footer(app)
        with app, gradio.Accordion("Provenance of these rows", open=True):
            gradio.Markdown(provenance_markdown(rows), elem_id="disastir_provenance")
            gradio.HTML(f"<style>{_PAGE_CSS}</style>")
        yield app, rows


def serve(results: Sequence[str | Path], *, host: str = "127.0.0.1", port: int = 7860, published: bool = True,
          screenshot_to: str | Path | None = None, screenshot_width: int = SCREENSHOT_WIDTH,
          say: Any = print) -> list[BoardRow]:
    """Serve the leaderboard until interrupted; with ``screenshot_to``, save the page as PNG (and HTML) and stop."""
    with leaderboard_app(results, published=published) as (app, rows):
        runs = sum(not row.published for row in rows)
        say(f"DisastIR leaderboard: {runs} run(s), {len(rows) - runs} published model(s).")
        if screenshot_to is None:
            say(f"Open http://{host}:{port}/?benchmark_name={DEFAULT} (Ctrl-C stops it).")
            app.launch(server_name=host, server_port=port, quiet=True)
            return rows
        app.launch(server_name=host, server_port=port, quiet=True, prevent_thread_lock=True)
        try:
            shot = screenshot(f"http://{host}:{port}/?benchmark_name={DEFAULT}", screenshot_to, ready=PAGE_READY,
                              width=screenshot_width, max_width=screenshot_width)
        finally:
            app.close(verbose=False)  # gradio prints "Closing server running on port" otherwise
        html = Path(screenshot_to).with_suffix(".html")
        write_text_atomic(html, shot.html)
        say(f"Screenshot: {screenshot_to} ({shot.width} x {shot.height} px, the whole page at a {shot.width}-px "
            f"window; the page as rendered: {html})")
    return rows

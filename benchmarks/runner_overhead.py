"""The runner's own work against the encoding it cannot avoid: a small corpus with MiniLM, and the full scale.

Run (both parts, about 6 minutes on 2 CPU cores; each part alone with --part):
    python benchmarks/runner_overhead.py
    python benchmarks/runner_overhead.py --part small --runs 5
    python benchmarks/runner_overhead.py --part full --full-data /tmp/full  # from: disastir-mteb sample --scale full

Everything runs in this process on the project's synthetic data in the published layout (never the
real DisastIR), and every figure is printed with the machine's load average (``uptime``) taken with it:
other work on the machine makes absolute times noisy, so the figures that count are ratios of
measurements taken side by side.

small: a 4,000-passage, 288-query set (6 queries per task, the small sample's short passages, seed 1, a
    set no test uses) and the bundled all-MiniLM-L6-v2 on the CPU, batch 32. Each run times, back to
    back and taking turns at going first, ``SentenceTransformer.encode`` of every passage in one call
    and every query in one call (the limit: one forward pass over the data) and
    ``disastir_mteb.evaluate`` on the 48 tasks with an empty embedding store (cold); their ratio is the
    runner's overhead. Printed: each run's two times, ratio and load, and the median ratio (goal: at
    most 1.25).
full: the full-scale sample (239,704 passages, 9,600 queries) with the cheap deterministic
    ``HashingEncoder`` (not a retrieval model; its vectors are stored by a first run, so encoding is out
    of the way). Timed: ``disastir_mteb.evaluate`` on the 48 tasks split into the shared pass (task
    loading, vectors, one exact search for all queries) and the work after it (each task's scoring by
    mteb and its result and per-query files), once with every core and once in one process
    (``DISASTIR_PROCESSES=1``). The per-task work is set beside the MiniLM pass over the same corpus on
    one H100 with 16 cores (60.4 s, parallel tokenisation; DISASTIR_FACTS section 9): the goal is at
    most a tenth of it. The cores of this machine are printed; the GPU machine has 16.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: all-MiniLM-L6-v2's pass over the full corpus and queries on one H100 (16 cores), fp16, batch 1024, parallel
#: tokenisation: the figure the full-scale per-task work is held to (DISASTIR_FACTS section 9).
GPU_PASS_SECONDS = 60.4


def _load() -> float:
    return os.getloadavg()[0]


def _machine() -> str:
    from runner_speed import machine  # the CPU label of the other runner benchmark

    info = machine()
    try:
        from disastir_mteb.runner.task_pool import worker_count
    except ImportError:  # a tree from before the task pool (to measure the change from the outside)
        processes = "1 process (no task pool in this tree)"
    else:
        processes = f"{worker_count(48) or 1} process(es)"
    return (f"{info['cpu']}, {info['cores']} cores ({len(os.sched_getaffinity(0))} usable), Python "
            f"{info['python']}; tasks scored in {processes}")


def small_data(root: Path, passage_words: int) -> Path:
    """The 4,000-passage, 288-query set: the small sample's shape (14 judged per query), seed 1."""
    from disastir_mteb.sample.generator import SampleScale, write_sample

    out = root / f"data-4000-{passage_words}w"
    if not (out / "corpus.jsonl").is_file():
        write_sample(out, scale=SampleScale("bench4000", n_passages=4000, queries_per_task=6, judged_per_query=14,
                                            passage_words=passage_words), seed=1)
    return out


def texts(data: Path) -> tuple[list[str], list[str]]:
    """Every passage and every query of a folder in the published layout, as the tasks read them."""
    corpus = [json.loads(line)["text"].strip() for line in (data / "corpus.jsonl").open(encoding="utf-8")]
    queries = [r["user_query"].strip() for f in sorted((data / "query").glob("*.json"))
               for r in json.loads(f.read_text(encoding="utf-8"))]
    return corpus, queries


def _timed_evaluate(searcher: Any, output: Path) -> tuple[float, float]:
    """(seconds of ``disastir_mteb.evaluate`` on the 48 tasks, seconds of it after the shared pass)."""
    from disastir_mteb.runner.run import evaluate
    from disastir_mteb.vocabulary.taxonomy import TASK_NAMES

    passes: list[float] = []
    prefetch = searcher.prefetch

    def timed_prefetch(*args: Any, **kwargs: Any) -> int:
        answered = prefetch(*args, **kwargs)
        passes.append(time.perf_counter())
        return answered

    searcher.prefetch = timed_prefetch  # this instance only: marks the end of the shared pass
    started = time.perf_counter()
    evaluate(searcher, list(TASK_NAMES), output_folder=output, show_progress=False, overwrite=True)
    ended = time.perf_counter()
    return ended - started, ended - passes[-1]


def part_small(work: Path, runs: int, device: str, passage_words: int) -> dict[str, Any]:
    """Encode-once limit vs cold runner, back to back, ``runs`` times; the median ratio."""
    from disastir_mteb.models.bundled import load_bundled_model
    from disastir_mteb.runner.run import RunSettings, build_search

    data = small_data(work, passage_words)
    os.environ["DISASTIR_DATA_DIR"] = str(data)
    corpus, queries = texts(data)
    model = load_bundled_model(device=device)
    model.model.encode(corpus[:64], batch_size=32)  # warm-up: threads, kernels, tokenizer
    words = sum(len(text.split()) for text in corpus) / len(corpus)
    print(f"small: {len(corpus):,} passages ({words:.0f} words on average), {len(queries):,} queries, 48 tasks; "
          f"all-MiniLM-L6-v2 on {device}, batch 32, cold embedding store each run", flush=True)
    rows = []
    for run in range(runs):
        load_before = _load()
        fresh = Path(tempfile.mkdtemp(prefix=f"run{run}-", dir=work))  # an empty store: a cold run every time
        if run % 2:  # every other run the runner goes first: a machine getting busier or quieter favours neither
            seconds, after = _timed_evaluate(build_search(model, RunSettings(cache_dir=fresh / "store", progress=False,
                                                                             devices=None)), fresh / "results")
        started = time.perf_counter()
        model.model.encode(corpus, batch_size=32)
        model.model.encode(queries, batch_size=32)
        limit = time.perf_counter() - started
        if not run % 2:
            seconds, after = _timed_evaluate(build_search(model, RunSettings(cache_dir=fresh / "store", progress=False,
                                                                             devices=None)), fresh / "results")
        shutil.rmtree(fresh, ignore_errors=True)
        rows.append({"limit": limit, "runner": seconds, "after_pass": after, "ratio": seconds / limit,
                     "load": (load_before, _load())})
        print(f"  run {run + 1}: encode once {limit:6.2f} s, evaluate {seconds:6.2f} s (of which after the pass "
              f"{after:5.2f} s) = {seconds / limit:.3f} x; load {load_before:.2f} -> {_load():.2f}", flush=True)
    median = statistics.median(r["ratio"] for r in rows)
    print(f"  median: evaluate / encode once = {median:.3f} x over {runs} runs (goal <= 1.25); after the pass "
          f"{statistics.median(r['after_pass'] for r in rows):.2f} s", flush=True)
    return {"runs": rows, "median_ratio": median}


def part_full(work: Path, data: Path | None) -> dict[str, Any]:
    """Full scale, HashingEncoder, stored vectors: the shared pass and the per-task work, all cores and one."""
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch
    from disastir_mteb.search.store import EmbeddingStore
    from disastir_mteb.vocabulary.run_settings import RunSettings
    if data is None:
        from disastir_mteb.sample.generator import sample_dir

        data = sample_dir("full", cache_dir=work)
    os.environ["DISASTIR_DATA_DIR"] = str(data)
    store = EmbeddingStore(work / "store-full")
    print(f"full: {data} (239,704 passages, 9,600 queries), HashingEncoder d=384 (not a retrieval model); "
          "a first run stores the vectors", flush=True)
    quiet = RunSettings(progress=False)
    first, _ = _timed_evaluate(SharedCorpusSearch(HashingEncoder(), quiet, store=store), work / "full-0")
    print(f"  first run (encodes with HashingEncoder): {first:.1f} s; load {_load():.2f}", flush=True)
    figures: dict[str, Any] = {}
    for label, processes in (("every core", None), ("one process", "1")):
        if processes:
            os.environ["DISASTIR_PROCESSES"] = processes  # runner.task_pool.PROCESSES_ENV (older trees: none)
        try:
            load_before = _load()
            seconds, after = _timed_evaluate(SharedCorpusSearch(HashingEncoder(), quiet, store=store),
                                             work / f"full-{label.replace(' ', '-')}")
        finally:
            os.environ.pop("DISASTIR_PROCESSES", None)
        figures[label] = {"seconds": seconds, "after_pass": after, "load": (load_before, _load())}
        print(f"  {label:11}: evaluate {seconds:6.1f} s = shared pass {seconds - after:6.1f} s (vectors stored) + "
              f"per-task work {after:5.1f} s = {after / GPU_PASS_SECONDS:.3f} x the H100 MiniLM pass "
              f"({GPU_PASS_SECONDS} s; goal <= 0.1); load {load_before:.2f} -> {_load():.2f}", flush=True)
    return figures


def main() -> None:
    """Run the chosen parts and print their figures (``--out FILE`` writes them as JSON too)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", nargs="*", choices=["small", "full"], default=["small", "full"])
    parser.add_argument("--runs", type=int, default=3, help="small: pairs of measurements (median quoted)")
    parser.add_argument("--device", default="cpu", help="small: the model's device")
    parser.add_argument("--passage-words", type=int, default=32,
                        help="small: the generator's passage length target (32, the small sample's: 38 words on "
                             "average; 10: 18)")
    parser.add_argument("--full-data", type=Path, help="full: a full-scale sample folder (default: generate one, "
                                                       "~30 s, under --work)")
    parser.add_argument("--work", type=Path, help="folder for data, stores and results (default: a temporary one)")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = args.work or Path(tempfile.mkdtemp(prefix="runner-overhead-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"Machine: {_machine()}; load {_load():.2f}", flush=True)
    figures: dict[str, Any] = {"machine": _machine()}
    if "small" in args.part:
        figures["small"] = part_small(work, args.runs, args.device, args.passage_words)
    if "full" in args.part:
        figures["full"] = part_full(work, args.full_data)
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())

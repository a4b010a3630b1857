"""Exact top-k search at DisastIR scale: our blocked search (torch and NumPy paths) against the plain NumPy baseline.

Run: python benchmarks/exact_search.py [--n 239704 --q 9600 --dim 384 --top-k 10]
The vectors are synthetic but clustered like sentence embeddings: ~300 Gaussian cluster centres
plus noise of norm ~0.6, float32, L2-normalised; queries come from the same clusters. Each method runs once in
this process; "peak RSS +" is the rise of the process's peak resident memory during the method
(Linux ``/proc/self/clear_refs`` resets the peak between methods). Baseline (c) is the one in
DISASTIR_FACTS 7b: ``q @ c.T`` in 1,024-query blocks, then ``argpartition`` for the top-k.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from disastir_mteb.search import top_k as kernel
from disastir_mteb.search.top_k import top_k_inner_product


def clustered_unit_vectors(n: int, dim: int, centres: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``n`` unit vectors, each a random centre plus Gaussian noise, built in blocks to bound memory."""
    out = np.empty((n, dim), np.float32)
    noise = np.float32(0.6 / np.sqrt(dim))
    for start in range(0, n, 65536):
        rows = min(65536, n - start)
        block = centres[rng.integers(0, len(centres), rows)] + rng.standard_normal((rows, dim), np.float32) * noise
        out[start:start + rows] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def numpy_baseline(queries: np.ndarray, corpus: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """The plain NumPy baseline: full-corpus scores per 1,024 queries, argpartition, sort the top-k."""
    similarities = np.empty((len(queries), top_k), np.float32)
    indices = np.empty((len(queries), top_k), np.int64)
    for start in range(0, len(queries), 1024):
        scores = queries[start:start + 1024] @ corpus.T
        top = np.argpartition(-scores, top_k - 1, axis=1)[:, :top_k]
        values = np.take_along_axis(scores, top, axis=1)
        order = np.argsort(-values, axis=1, kind="stable")
        similarities[start:start + 1024] = np.take_along_axis(values, order, axis=1)
        indices[start:start + 1024] = np.take_along_axis(top, order, axis=1)
    return similarities, indices


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(f"/proc/self/status has no {field} line (not Linux?).")


def measure(run: Callable[[], tuple[np.ndarray, np.ndarray]]) -> tuple[float, float, tuple[np.ndarray, np.ndarray]]:
    """(seconds, peak RSS increase in GB, result) of one call."""
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _status_kb("VmRSS")
    started = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - started
    return seconds, (_status_kb("VmHWM") - before) / 1024**2, result


def mismatches(reference: tuple[np.ndarray, np.ndarray], other: tuple[np.ndarray, np.ndarray]) -> tuple[int, int]:
    """(rank positions whose index differs, of those not explained by a tie within 1e-5 in similarity)."""
    differ = reference[1] != other[1]
    tie = np.abs(reference[0] - other[0]) <= 1e-5
    return int(differ.sum()), int((differ & ~tie).sum())


def main() -> None:
    """Build the vectors, time the three methods, print one table and the agreement check."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=239_704, help="corpus size")
    parser.add_argument("--q", type=int, default=9_600, help="number of queries")
    parser.add_argument("--dim", type=int, default=384, help="vector dimension")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--clusters", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch

    rng = np.random.default_rng(args.seed)
    centres = rng.standard_normal((args.clusters, args.dim), np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    started = time.perf_counter()
    corpus = clustered_unit_vectors(args.n, args.dim, centres, rng)
    queries = clustered_unit_vectors(args.q, args.dim, centres, rng)
    print(f"corpus {args.n:,} x {args.dim}, queries {args.q:,}, top-{args.top_k}, {args.clusters} clusters "
          f"(built in {time.perf_counter() - started:.1f} s); {os.cpu_count()} CPUs, torch {torch.__version__} "
          f"with {torch.get_num_threads()} threads, numpy {np.__version__}; "
          f"load average {os.getloadavg()[0]:.2f}")

    def numpy_path() -> tuple[np.ndarray, np.ndarray]:
        real = kernel.import_torch
        kernel.import_torch = lambda: None
        try:
            return top_k_inner_product(queries, corpus, args.top_k)
        finally:
            kernel.import_torch = real

    runs = {
        "(a) top_k_inner_product, torch": lambda: top_k_inner_product(queries, corpus, args.top_k),
        "(b) top_k_inner_product, NumPy": numpy_path,
        "(c) NumPy baseline, 1,024-query blocks": lambda: numpy_baseline(queries, corpus, args.top_k),
    }
    timings, results = {}, {}
    for name, run in runs.items():
        timings[name], peak, results[name] = measure(run)
        print(f"{name:40s} {timings[name]:7.1f} s   peak RSS +{peak:5.2f} GB")
    (a, b, c), (time_a, _, time_c) = results.values(), timings.values()
    print(f"time ratio (a)/(c): {time_a / time_c:.2f}")
    for label, other in (("(b)", b), ("(c)", c)):
        differ, real = mismatches(a, other)
        print(f"indices (a) vs {label}: {differ} of {a[1].size:,} rank positions differ, {real} not explained by "
              f"a tie; max |similarity difference| {np.abs(a[0] - other[0]).max():.2e}")


if __name__ == "__main__":
    main()

"""Fresh HNSW builds of the paper preset, one thread (the default) against all cores (the opt-in): time and repeats.

Run: python benchmarks/ann_repeatability.py [--n 239704 --q 9600 --dim 384 --repeat 2 --threads 1 0]
     python benchmarks/ann_repeatability.py --quick   (20,000 vectors, 1,000 queries: a smoke test)

The vectors are those of ``ann_search.py``: clustered synthetic unit vectors (``--clusters``
centres plus noise), d=384 by default, cosine, written once to a temporary folder. Each build runs
in a fresh process (``--worker``), the thread settings interleaved (1, all, 1, all, ...) so that a
change of load on a shared machine falls on both. A worker builds the index through
:class:`~disastir_mteb.search.usearch_index.UsearchIndex` (the paper preset with ``threads`` set;
the build is timed alone, not the process start or mteb's import), searches the queries for their
top 10 on the same threads, saves the index and reports the SHA-256 of the file and of the results
(row numbers and similarities), and recall@10 against exact search. The parent prints one line per
build, then per setting the median build and search times, how many distinct index files and
result sets its fresh builds gave, and the all-cores build's speed-up over the one-thread build.
The first line names the machine: CPU, cores, memory, load, usearch version and its SIMD target.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

TOP_K = 10


def machine() -> str:
    """The CPU, its cores, memory, usearch and the instruction set its kernels use, for the figures' label."""
    import usearch
    import usearch.index
    from runner_speed import cpu_model

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    simd = usearch.index.Index(ndim=8, metric="ip", dtype="f32").hardware_acceleration
    return (f"{cpu_model()}, {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), {memory:.0f} GiB, "
            f"usearch {usearch.__version__} ({simd} kernels), Python {sys.version.split()[0]}")


def _load() -> str:
    return "/".join(f"{value:.2f}" for value in os.getloadavg())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def worker(folder: Path, threads: int) -> None:
    """One fresh build and search; prints its figures as one JSON line."""
    from mteb.similarity_functions import cos_sim

    from disastir_mteb.search.usearch_index import UsearchIndex, resolve_params

    corpus, queries = np.load(folder / "corpus.npy"), np.load(folder / "queries.npy")
    reference = np.load(folder / "reference.npy")
    index = UsearchIndex(resolve_params("paper", threads=threads))
    index.add_documents(corpus, [str(i) for i in range(len(corpus))])
    started = time.perf_counter()
    index.build("cosine")
    build = time.perf_counter() - started
    started = time.perf_counter()
    similarities, rows = index.search(queries, TOP_K, cos_sim)
    search = time.perf_counter() - started
    saved = folder / f"index-{os.getpid()}.usearch"
    index.usearch_index.save(str(saved))
    file_sha, size = _sha256(saved), saved.stat().st_size
    saved.unlink()
    found = np.array(rows, np.int64)
    results_sha = hashlib.sha256(found.tobytes() + np.array(similarities, np.float32).tobytes()).hexdigest()
    recall = float(np.mean([len(set(a) & set(b)) / TOP_K for a, b in zip(found.tolist(), reference.tolist(),
                                                                          strict=True)]))
    print(json.dumps({"threads": index.params.threads, "build": build, "search": search, "file": file_sha,
                      "results": results_sha, "recall": recall, "bytes": size}))


def write_vectors(folder: Path, args: argparse.Namespace) -> None:
    """Corpus, queries and their exact top 10, written once for every worker."""
    from ann_search import clustered

    from disastir_mteb.search.exact_search import top_k_inner_product

    rng = np.random.default_rng(args.seed + args.dim)
    centres = rng.standard_normal((args.clusters, args.dim), np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    corpus = clustered(args.n, centres, 0.6, rng)
    queries = clustered(args.q, centres, 0.5, rng, around=corpus)
    np.save(folder / "corpus.npy", corpus)
    np.save(folder / "queries.npy", queries)
    np.save(folder / "reference.npy", np.asarray(top_k_inner_product(queries, corpus, TOP_K)[1], np.int64))


def main() -> None:
    """Interleave fresh builds of each thread setting, then print the figures side by side."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=239_704, help="corpus size")
    parser.add_argument("--q", type=int, default=9_600, help="number of queries")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2, help="fresh builds per thread setting")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 0], help="settings compared; 0 = all cores")
    parser.add_argument("--quick", action="store_true", help="a smoke test: --n 20000 --q 1000")
    parser.add_argument("--worker", nargs=2, metavar=("FOLDER", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker[0]), int(args.worker[1]))
        return
    if args.quick:
        args.n, args.q = 20_000, 1_000
    print(f"machine: {machine()}", flush=True)
    print(f"paper preset (M=16, efC=128, ef=64, k={TOP_K}), {args.n:,} x {args.dim} clustered unit vectors "
          f"({args.clusters} clusters), {args.q:,} queries, {args.repeat} fresh processes per setting; "
          f"load {_load()}", flush=True)
    started = time.perf_counter()
    runs: dict[int, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="ann-repeat-") as temporary:
        folder = Path(temporary)
        write_vectors(folder, args)
        for attempt in range(args.repeat):
            for threads in args.threads:
                child = subprocess.run([sys.executable, __file__, "--worker", str(folder), str(threads)],
                                       capture_output=True, text=True, check=True)
                run = json.loads(child.stdout.strip().splitlines()[-1])
                runs.setdefault(threads, []).append(run)
                print(f"  build {attempt + 1}, threads={run['threads']:<3} build {run['build']:7.1f} s  search "
                      f"{run['search']:6.2f} s  recall@10 {run['recall']:.4f}  index sha256 {run['file'][:12]}  "
                      f"results sha256 {run['results'][:12]}  load {_load()}", flush=True)
    medians = {}
    for threads, found in runs.items():
        build, search = (statistics.median(r[key] for r in found) for key in ("build", "search"))
        files, results = len({r["file"] for r in found}), len({r["results"] for r in found})
        repeats = "repeats" if files == results == 1 else "does not repeat"
        medians[threads] = build
        print(f"threads={found[0]['threads']}{' (all cores)' if threads == 0 else ''}: median build {build:.1f} s, "
              f"search {search:.2f} s; {files} distinct index file(s) and {results} distinct result set(s) over "
              f"{len(found)} fresh builds: {repeats}; index {found[0]['bytes'] / 2**20:.0f} MB", flush=True)
    for threads, build in medians.items():
        if threads != 1 and 1 in medians:
            print(f"one-thread build: {medians[1] / build:.2f} x the time of the threads="
                  f"{runs[threads][0]['threads']} build", flush=True)
    print(f"total {time.perf_counter() - started:.0f} s; load {_load()}")


if __name__ == "__main__":
    main()

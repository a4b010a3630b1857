"""USearch presets at DisastIR scale: build and search time, recall@10 against exact search, index memory.

Run: python benchmarks/ann_search.py [--n 239704 --q 9600 --dims 384 1024 --presets paper exact f16 i8 b1]
     python benchmarks/ann_search.py --dims 384 --exact-queries 2048   (full scale, both paper builds)
     python benchmarks/ann_search.py --quick   (50,000 vectors, 1,000 queries, d=384, no sweep: a smoke test)
     python benchmarks/ann_search.py --runner [--runner-scale full]   (the 48-task runner part only)
     python benchmarks/ann_search.py --runner --runner-model bundled --runner-passages 10000
The vectors are synthetic but clustered like sentence embeddings: ``--clusters`` unit Gaussian
centres plus noise of norm ~0.6, L2-normalised; each query is a random corpus point plus noise of
norm ~0.5, normalised. Everything runs once, in this process, with cosine similarity.

- Reference and baselines, per dimension: exact top-10 through ``top_k_inner_product`` (the
  recall reference) and a plain NumPy ``q @ c.T`` in 1,024-query blocks + ``argpartition``.
- Presets: every preset is built and searched on all cores (``threads=0``, the opt-in faster
  build; the threads column shows the resolved count). The presets named by ``--single-thread``
  (the paper preset by default: the build takes minutes) also get a ``threads=1`` row, the graph
  presets' default and the repeatable build, and a side-by-side summary of the two builds: build
  and search seconds, recall@10 against exact, index memory, and the ANN cost (build + search)
  relative to the exact search (``top_k_inner_product``), against the goal of at most 1.2 x.
  ``benchmarks/ann_repeatability.py`` times the two builds in fresh processes and checks which repeats.
- ``exact`` (USearch brute force) searches the first ``--exact-queries`` queries (all by default)
  and its time is scaled to all queries when fewer.
- Sweep (``--sweep-dims``): connectivity x expansion_search, built on all cores; the
  expansion_search values reuse one graph per connectivity, as ef is a search-time setting.
- Runner (``--runner``): the synthetic sample in the published layout (full scale by default:
  239,704 passages, 48 tasks, 9,600 queries) through ``disastir_mteb.evaluate`` with the cheap
  ``HashingEncoder`` (d=384; hashed word vectors, labelled: not a retrieval model), exact and then
  ANN with the paper preset once per ``--runner-threads`` value (1 and all cores by default), all
  in this process on one embedding store: index builds counted, run times (the exact run is timed
  again on the warm store, so that the ANN / exact ratio compares searches, not encoding), and per
  ANN build the exact-vs-ANN table (Table 3 format: NDCG@10 drop %, recall@10 of ANN against
  exact) from the per-query files; then the runner's exact backend (``ExactIndex``) against the NumPy baseline on
  the same stored vectors. ``--runner-model bundled --runner-passages N`` runs the same part with the
  bundled all-MiniLM-L6-v2 (real sentence-embedding vectors) on a scaled synthetic corpus of N
  passages, since encoding the full corpus with it takes about two hours here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time

import numpy as np
from mteb.similarity_functions import cos_sim

from disastir_mteb.search.exact_search import top_k_inner_product
from disastir_mteb.search.usearch_index import PRESETS, UsearchIndex, resolve_params

TOP_K = 10


def clustered(n: int, centres: np.ndarray, noise: float, rng: np.random.Generator,
              around: np.ndarray | None = None) -> np.ndarray:
    """``n`` unit vectors: random rows of ``around`` (default: the centres) plus Gaussian noise of norm ~``noise``."""
    base = centres if around is None else around
    out = np.empty((n, base.shape[1]), np.float32)
    scale = np.float32(noise / np.sqrt(base.shape[1]))
    for start in range(0, n, 65536):
        rows = min(65536, n - start)
        block = base[rng.integers(0, len(base), rows)] + rng.standard_normal((rows, base.shape[1]), np.float32) * scale
        out[start:start + rows] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def numpy_baseline(queries: np.ndarray, corpus: np.ndarray) -> np.ndarray:
    """Plain NumPy exact search: ``q @ c.T`` per 1,024 queries, argpartition, sort the top-10."""
    indices = np.empty((len(queries), TOP_K), np.int64)
    for start in range(0, len(queries), 1024):
        scores = queries[start:start + 1024] @ corpus.T
        top = np.argpartition(-scores, TOP_K - 1, axis=1)[:, :TOP_K]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
        indices[start:start + 1024] = np.take_along_axis(top, order, axis=1)
    return indices


def recall(found: list[list[int]], reference: np.ndarray) -> float:
    """Mean over queries of |found top-10 ∩ exact top-10| / 10."""
    return float(np.mean([len(set(row) & set(ref)) / TOP_K for row, ref in zip(found, reference.tolist(),
                                                                                 strict=False)]))


def timed(call: object) -> tuple[float, object]:
    """(seconds, result) of ``call()``."""
    started = time.perf_counter()
    result = call()  # type: ignore[operator]
    return time.perf_counter() - started, result


def row(dim: int, label: str, threads: str, build: float | None, search: float | None, rec: float | None,
        memory: int | None, note: str = "") -> None:
    """Print one table row ("-" for what does not apply)."""
    def cell(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)
    print(f"{dim:>5} | {label:<42} | {threads:>7} | {cell(build, '8.1f'):>8} | {cell(search, '8.2f')} | "
          f"{cell(rec, '.4f'):>9} | {cell(None if memory is None else memory / 2**20, '8.0f'):>8} | {note}", flush=True)


def without_threads(text: str) -> str:
    """``describe()`` without its thread count, which the table has a column for."""
    return re.sub(r" threads=\d+", "", text)


def run_dim(dim: int, args: argparse.Namespace) -> None:
    """Every measurement at one dimension: baselines, presets, then the sweep."""
    rng = np.random.default_rng(args.seed + dim)
    centres = rng.standard_normal((args.clusters, dim), np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    corpus = clustered(args.n, centres, 0.6, rng)
    queries = clustered(args.q, centres, 0.5, rng, around=corpus)
    ids = [str(i) for i in range(args.n)]
    exact_time, (_, reference) = timed(lambda: top_k_inner_product(queries, corpus, TOP_K))
    row(dim, "exact: top_k_inner_product (torch)", "torch", None, exact_time, 1.0, None)
    numpy_time, found = timed(lambda: numpy_baseline(queries, corpus))
    row(dim, "exact: NumPy q @ c.T, 1,024 blocks", "BLAS", None, numpy_time, recall(found.tolist(), reference), None)
    print(f"      top_k_inner_product / NumPy baseline = {exact_time / numpy_time:.2f} (target <= 1.5)", flush=True)

    builds: dict[str, dict[int, dict[str, float]]] = {}  # preset -> threads -> figures, for the side-by-side lines

    def measure(label: str, params: object, subset: int | None = None) -> UsearchIndex:
        backend = UsearchIndex(params)  # type: ignore[arg-type]
        backend.add_documents(corpus, ids)
        build, _ = timed(lambda: backend.build("cosine"))
        count = min(subset or args.q, args.q)
        search, (_, found) = timed(lambda: backend.search(queries[:count], TOP_K, cos_sim))
        note = ""
        if count < args.q:
            note = f"search timed on {count:,} queries, scaled x{args.q / count:.2f}"
            search *= args.q / count
        found_recall = recall(found, reference[:count])
        row(dim, label, str(backend.params.threads), build, search, found_recall, backend.memory_bytes, note)
        preset = label.split(":")[0]
        builds.setdefault(preset, {})[backend.params.threads] = {
            "build": build, "search": search, "recall": found_recall, "memory": backend.memory_bytes}
        if label.startswith("exact"):
            print(f"      USearch exact / NumPy baseline = {search / numpy_time:.2f} (target <= 1.5)", flush=True)
        if label.startswith("paper"):
            print(f"      paper preset recall@10 {recall(found, reference[:count]):.4f} (target >= 0.99)", flush=True)
        return backend

    kept = None
    for preset in args.presets:
        if preset == "exact":
            measure("exact (USearch brute force)", PRESETS["exact"], args.exact_queries)
            continue
        variants = [1, 0] if preset in args.single_thread else [0]
        for threads in variants:
            backend = measure(f"{preset}: {without_threads(PRESETS[preset].describe())}",
                              resolve_params(preset, threads=threads))
            if preset == "paper" and threads == 0 and dim in args.sweep_dims:
                kept = backend
            else:
                del backend
        if len(builds.get(preset, {})) == 2:
            side_by_side(preset, builds[preset], exact_time)
    if dim not in args.sweep_dims:
        return
    for connectivity in args.sweep_connectivity:
        if connectivity == 16 and kept is not None:
            backend, build = kept, None
        else:
            backend = UsearchIndex(resolve_params("paper", connectivity=connectivity, threads=0))
            backend.add_documents(corpus, ids)
            build, _ = timed(lambda b=backend: b.build("cosine"))
        for ef in args.sweep_ef:
            backend.params = resolve_params(backend.params, expansion_search=ef)  # ef applies at search time
            search, (_, found) = timed(lambda b=backend: b.search(queries, TOP_K, cos_sim))
            note = "" if build is not None else ("graph of the paper all-cores row" if backend is kept
                                                 else "same graph, ef set at search time")
            row(dim, f"sweep: M={connectivity} ef={ef}", str(backend.params.threads), build, search,
                recall(found, reference), backend.memory_bytes, note)
            build = None
        del backend


def side_by_side(preset: str, figures: dict[int, dict[str, float]], exact_time: float) -> None:
    """One line per build of ``preset`` (one thread, all cores), then what going multi-threaded changes."""
    one, many = figures[1], figures[max(figures)]
    for threads, f in sorted(figures.items()):
        cost = f["build"] + f["search"]
        print(f"      {preset} threads={threads:<3} build {f['build']:8.1f} s  search {f['search']:7.2f} s  recall@10 "
              f"{f['recall']:.4f}  memory {f['memory'] / 2**20:6.0f} MB  build+search / exact search "
              f"{cost / exact_time:5.2f} (goal <= 1.2)", flush=True)
    print(f"      {preset} all cores vs one thread: build x{one['build'] / many['build']:.2f} faster, search "
          f"x{one['search'] / many['search']:.2f}, recall@10 {many['recall'] - one['recall']:+.4f}", flush=True)


def run_runner(args: argparse.Namespace) -> None:
    """48 tasks through the runner, exact then ANN (paper preset), counting index builds."""
    import tempfile
    from pathlib import Path

    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.results.compare import compare_sets
    from disastir_mteb.results.result_sets import find_result_sets, load_result_set
    from disastir_mteb.runner.run import evaluate
    from disastir_mteb.sample.generator import sample_dir
    from disastir_mteb.search.exact_search import ExactIndex
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch
    from disastir_mteb.search.store import EmbeddingStore
    from disastir_mteb.vocabulary.run_settings import RunSettings
    from disastir_mteb.vocabulary.taxonomy import TASK_NAMES

    work = Path(tempfile.mkdtemp(prefix="ann-runner-"))
    if args.runner_passages:
        from disastir_mteb.sample.generator import SampleScale, write_sample

        n = args.runner_passages
        scale = SampleScale(f"ann{n}", n_passages=n, queries_per_task=min(200, n // 96), judged_per_query=30,
                            passage_words=120)
        data = write_sample(work / "data", scale=scale)
        described = f"{n:,}-passage synthetic corpus"
    else:
        data, described = sample_dir(args.runner_scale), f"{args.runner_scale} synthetic sample"
    os.environ["DISASTIR_DATA_DIR"] = str(data)
    store = EmbeddingStore(work / "store")
    if args.runner_model == "bundled":
        from disastir_mteb.models.bundled import load_bundled_model

        model, label = load_bundled_model(), "bundled all-MiniLM-L6-v2"
    else:
        model, label = HashingEncoder(), "HashingEncoder d=384"
    print(f"runner: {described}, 48 tasks, {label}, store {work}", flush=True)
    exact = SharedCorpusSearch(model, RunSettings(progress=False), store=store)
    seconds, _ = timed(lambda: evaluate(exact, TASK_NAMES, output_folder=work / "results", show_progress=False))
    print(f"  exact run: {seconds:.1f} s incl. encoding {exact.passages_encoded:,} passages and "
          f"{exact.queries_encoded:,} queries; {exact.index_builds} index load(s), {exact.corpus_passes} "
          "search pass(es)", flush=True)
    warm = SharedCorpusSearch(model, RunSettings(progress=False), store=store)
    exact_seconds, _ = timed(lambda: evaluate(warm, TASK_NAMES, output_folder=work / "exact-warm",
                                              show_progress=False))
    print(f"  exact run on the warm store: {exact_seconds:.1f} s ({warm.passages_encoded} passages encoded)",
          flush=True)
    for threads in args.runner_threads:
        params = resolve_params("paper", threads=threads)
        ann = SharedCorpusSearch(model, RunSettings(progress=False, ann=params), store=store)
        seconds, _ = timed(lambda a=ann, p=params: evaluate(a, TASK_NAMES, search="ann", ann_params={
            "threads": p.threads}, output_folder=work / "results", show_progress=False))
        print(f"  ANN run ({ann.describe_search()}): {seconds:.1f} s = {seconds / exact_seconds:.2f} x the warm "
              f"exact run (goal <= 1.2); index builds {ann.index_builds} (target 1), loads {ann.index_loads}, "
              f"{ann.passages_encoded} passages encoded, {ann.corpus_passes} search pass(es), "
              f"index {ann.index_backend.memory_bytes / 2**20:.0f} MB", flush=True)
    again = SharedCorpusSearch(model, RunSettings(progress=False, ann="paper"), store=store)
    seconds, _ = timed(lambda: evaluate(again, TASK_NAMES, search="ann", output_folder=work / "again",
                                        show_progress=False))
    print(f"  ANN rerun, new process state: {seconds:.1f} s; index builds {again.index_builds}, "
          f"loads {again.index_loads} (memory-mapped from the cache)", flush=True)
    sets = {load_result_set(folder).search: load_result_set(folder) for folder in find_result_sets(work / "results")}
    exact_set = sets.pop("exact")
    for search, result_set in sets.items():
        print(f"  exact vs {search}:", flush=True)
        print(compare_sets(exact_set, result_set).to_text(), flush=True)

    corpus = np.asarray(exact.corpus_embeddings, np.float32)  # the stored vectors the runner searched
    texts = [row["user_query"].strip() for path in sorted((Path(data) / "query").glob("*.json"))
             for row in json.loads(path.read_text(encoding="utf-8"))]
    queries = model.model.encode(texts, batch_size=64) if args.runner_model == "bundled" else model.embed(texts)
    backend = ExactIndex()
    backend.add_documents(corpus, [str(i) for i in range(len(corpus))])
    exact_time, _ = timed(lambda: backend.search(queries, TOP_K, cos_sim))
    numpy_time, _ = timed(lambda: numpy_baseline(queries, corpus))
    print(f"  runner exact backend (ExactIndex.search, {len(queries):,} queries x {len(corpus):,}, top-{TOP_K}): "
          f"{exact_time:.1f} s; NumPy baseline {numpy_time:.1f} s; ratio {exact_time / numpy_time:.2f} "
          "(target <= 1.5)", flush=True)


def main() -> None:
    """Parse flags, then print one table over all dimensions."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=239_704, help="corpus size")
    parser.add_argument("--q", type=int, default=9_600, help="number of queries")
    parser.add_argument("--dims", type=int, nargs="+", default=[384, 1024])
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    parser.add_argument("--single-thread", nargs="*", default=["paper"], choices=list(PRESETS),
                        help="presets that also get a threads=1 build (slow)")
    parser.add_argument("--exact-queries", type=int, default=None, help="queries for USearch brute force")
    parser.add_argument("--sweep-dims", type=int, nargs="*", default=[384])
    parser.add_argument("--sweep-connectivity", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--sweep-ef", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runner", action="store_true", help="only the 48-task runner part")
    parser.add_argument("--runner-scale", default="full", choices=["small", "full"])
    parser.add_argument("--runner-model", default="hashing", choices=["hashing", "bundled"])
    parser.add_argument("--runner-passages", type=int, default=None, help="a scaled corpus instead of --runner-scale")
    parser.add_argument("--runner-threads", type=int, nargs="+", default=[1, 0],
                        help="one ANN run (paper preset) per thread count; 0 = all cores")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: --n 50000 --q 1000 --dims 384 --presets paper exact, no sweep")
    args = parser.parse_args()
    if args.quick:
        args.n, args.q, args.dims, args.presets, args.sweep_dims = 50_000, 1_000, [384], ["paper", "exact"], []
    if args.runner:
        started = time.perf_counter()
        run_runner(args)
        print(f"total {time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.2f}")
        return
    import usearch

    print(f"corpus {args.n:,}, queries {args.q:,}, top-{TOP_K}, {args.clusters} clusters, cosine; "
          f"{os.cpu_count()} CPUs, usearch {usearch.__version__}, numpy {np.__version__}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"  dim | {'configuration':<42} | threads |  build s | search s | recall@10 |   mem MB | note")
    started = time.perf_counter()
    for dim in args.dims:
        run_dim(dim, args)
    print(f"total {time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

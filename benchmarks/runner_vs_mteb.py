"""Encode-once runner vs plain mteb on DisastIR-shaped data: passages encoded, wall time, overhead, memory.

Run: python benchmarks/runner_vs_mteb.py [--part A B C] [--passages 20000] [--minilm-passages 2000]

Every part measures both sides in the same run, on synthetic data in the published layout
written by ``disastir_mteb.sample.generator`` (never the real DisastIR), and prints what it measured:

- A: all 48 tasks on a scaled corpus (default 20,000 passages, 200 queries per task; fewer
  queries below 19,200 passages) with the cheap deterministic ``HashingEncoder`` (labelled: not
  a retrieval model). Plain mteb, task by task with its own ``CachedEmbeddingWrapper``, vs
  ``disastir_mteb.evaluate``; plus the time to encode the corpus and all queries once with the
  same encoder, for the runner's overhead ratio.
- B: the runner alone on the full-scale corpus (239,704 passages, 9,600 queries, 48 tasks) with
  ``HashingEncoder`` at 384 and 1024 dimensions, each in a fresh process: wall time, overhead
  ratio against encoding everything once in that process, and peak RSS.
- C: the bundled all-MiniLM-L6-v2 (a real model) on all 48 tasks over a small corpus (default
  1,000 passages, 10 queries per task): plain mteb vs the runner.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _data(passages: int, root: Path) -> Path:
    from disastir_mteb.sample.generator import SampleScale, sample_dir

    queries_per_task = min(200, passages // 96)  # the generator needs >= 2 passages per query
    scale = "full" if passages >= 239_704 else SampleScale(
        f"bench{passages}", n_passages=passages, queries_per_task=queries_per_task, judged_per_query=30,
        passage_words=120)
    if isinstance(scale, str):
        return sample_dir(scale)
    out = root / f"data-{passages}"
    if not (out / "corpus.jsonl").exists():
        from disastir_mteb.sample.generator import write_sample

        write_sample(out, scale=scale)
    return out


def _texts(data: Path) -> tuple[list[str], list[str]]:
    corpus = [json.loads(line)["text"].strip() for line in (data / "corpus.jsonl").open(encoding="utf-8")]
    queries = [r["user_query"].strip() for f in sorted((data / "query").glob("*.json"))
               for r in json.loads(f.read_text(encoding="utf-8"))]
    return corpus, queries


def _encode_once_seconds(encoder: object, data: Path) -> float:
    corpus, queries = _texts(data)
    started = time.perf_counter()
    encoder.embed(corpus)  # type: ignore[attr-defined]
    encoder.embed(queries)  # type: ignore[attr-defined]
    return time.perf_counter() - started


def part_a(passages: int, work: Path) -> None:
    """48 tasks, scaled corpus, HashingEncoder: plain mteb vs runner, and the runner's overhead."""
    import mteb
    from mteb.models.cache_wrappers import CachedEmbeddingWrapper

    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.runner.run import evaluate
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch
    from disastir_mteb.search.store import EmbeddingStore
    from disastir_mteb.vocabulary.run_settings import RunSettings
    from disastir_mteb.vocabulary.taxonomy import TASK_NAMES

    data = _data(passages, work)
    os.environ["DISASTIR_DATA_DIR"] = str(data)
    n_queries = len(_texts(data)[1])
    plain_encoder = HashingEncoder()
    started = time.perf_counter()
    mteb.evaluate(CachedEmbeddingWrapper(plain_encoder, work / "mteb-cache"), [mteb.get_task(n) for n in TASK_NAMES],
                  cache=None, show_progress_bar=False)
    plain_seconds = time.perf_counter() - started
    plain_passages = plain_encoder.texts_encoded - n_queries

    searcher = SharedCorpusSearch(HashingEncoder(), RunSettings(progress=False), store=EmbeddingStore(work / "store-a"))
    started = time.perf_counter()
    evaluate(searcher, list(TASK_NAMES), output_folder=work / "results-a", show_progress=False, overwrite=True)
    runner_seconds = time.perf_counter() - started
    once = _encode_once_seconds(HashingEncoder(), data)
    print(f"A  48 tasks, {passages:,} passages, {n_queries:,} queries, HashingEncoder (cheap, deterministic, "
          "not a retrieval model)")
    print(f"   plain mteb + CachedEmbeddingWrapper : {plain_passages:>10,} passages encoded  {plain_seconds:8.1f} s")
    print(f"   disastir_mteb.evaluate              : {searcher.passages_encoded:>10,} passages encoded  "
          f"{runner_seconds:8.1f} s")
    print(f"   wall-time ratio plain / runner      : {plain_seconds / runner_seconds:8.1f}x; passage encodings "
          f"{plain_passages / max(searcher.passages_encoded, 1):.0f}x")
    print(f"   encode corpus + all queries once    : {once:8.1f} s -> runner overhead ratio "
          f"{runner_seconds / once:.2f} (fixed cost {runner_seconds - once:.1f} s: data loading, 48 mteb task "
          "runs, exact search, scoring)")


def part_b_child(dim: int) -> None:
    """One full-scale runner measurement in this process (called in a subprocess by part B)."""
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.runner.run import evaluate
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch
    from disastir_mteb.vocabulary.run_settings import RunSettings
    from disastir_mteb.vocabulary.taxonomy import TASK_NAMES

    data = _data(239_704, Path(tempfile.gettempdir()))
    os.environ["DISASTIR_DATA_DIR"] = str(data)
    searcher = SharedCorpusSearch(HashingEncoder(dim=dim), RunSettings(progress=False), store=None)
    started = time.perf_counter()
    evaluate(searcher, list(TASK_NAMES), output_folder=Path(tempfile.mkdtemp()), show_progress=False, overwrite=True)
    runner_seconds = time.perf_counter() - started
    rss = _peak_rss_gb()
    once = _encode_once_seconds(HashingEncoder(dim=dim), data)
    print(f"B  full scale, d={dim}: runner {runner_seconds:7.1f} s for 48 tasks ({searcher.passages_encoded:,} "
          f"passages encoded, {searcher.corpus_indexings} index); encode-once {once:6.1f} s; overhead ratio "
          f"{runner_seconds / once:.2f}; peak RSS {rss:.2f} GB (HashingEncoder, in-memory embeddings)")


def part_b() -> None:
    """Full-scale runner at 384 and 1024 dimensions, each in a fresh process (clean peak RSS)."""
    for dim in (384, 1024):
        subprocess.run([sys.executable, __file__, "--child-b", str(dim)], check=True)


def part_c(passages: int, work: Path, benchmark: str) -> None:
    """A real model (bundled MiniLM) on a benchmark's tasks (default all 48): plain mteb vs runner."""
    import mteb

    from disastir_mteb.models.bundled import load_bundled_model
    from disastir_mteb.runner.run import evaluate
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch
    from disastir_mteb.search.store import EmbeddingStore
    from disastir_mteb.vocabulary.run_settings import RunSettings

    data = _data(passages, work)
    os.environ["DISASTIR_DATA_DIR"] = str(data)
    tasks = [t.metadata.name for t in mteb.get_benchmark(benchmark).tasks]
    started = time.perf_counter()
    mteb.evaluate(load_bundled_model(device="cpu"), [mteb.get_task(n) for n in tasks], cache=None,
                  show_progress_bar=False)
    plain_seconds = time.perf_counter() - started
    searcher = SharedCorpusSearch(load_bundled_model(device="cpu"), RunSettings(progress=False),
                                  store=EmbeddingStore(work / "store-c"))
    started = time.perf_counter()
    evaluate(searcher, tasks, output_folder=work / "results-c", show_progress=False, overwrite=True)
    runner_seconds = time.perf_counter() - started
    print(f"C  all-MiniLM-L6-v2, {benchmark} ({len(tasks)} tasks), {passages:,} passages: "
          f"plain mteb {len(tasks) * passages:,} passage "
          f"encodings {plain_seconds:.1f} s; runner {searcher.passages_encoded:,} passage encodings "
          f"{runner_seconds:.1f} s; ratio {plain_seconds / runner_seconds:.1f}x")


def main() -> None:
    """Run the chosen parts and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", nargs="*", default=["A", "B", "C"], choices=["A", "B", "C"])
    parser.add_argument("--passages", type=int, default=20_000, help="corpus size for part A")
    parser.add_argument("--minilm-passages", type=int, default=1_000, help="corpus size for part C")
    parser.add_argument("--minilm-benchmark", default="DisastIR", help="benchmark for part C (e.g. DisastIR-QA)")
    parser.add_argument("--child-b", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_b:
        part_b_child(args.child_b)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "A" in args.part:
            part_a(args.passages, work)
        if "B" in args.part:
            part_b()
        if "C" in args.part:
            part_c(args.minilm_passages, work, args.minilm_benchmark)


if __name__ == "__main__":
    main()

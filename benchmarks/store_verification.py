"""What verifying the embedding cache costs at DisastIR scale, next to a warm run.

Run: python benchmarks/store_verification.py [--n 239704 --dim 384 --repeat 5] [--data DIR]

1. Builds one corpus entry of ``n x dim`` float32 through the real store (chunk files with their
   checksums, consolidation, one checksum per row) from synthetic unit vectors.
2. Times serving it with the page cache warm, median of ``--repeat``: (a) what serving cost before
   checksums (manifest, ``np.load(mmap_mode="r")``, shape and size checks: the same call with the
   row checksums skipped) and (b) ``EmbeddingStore.cached``, which also hashes every row and compares.
3. With ``--data`` (a folder from ``disastir-mteb sample --scale full``): one warm run of all 48
   tasks with the hashing encoder (every vector already in the cache), timed end to end, with the
   seconds spent hashing rows inside it (every entry the run reads: corpus and 48 query sets).

The machine is named in the output; figures are medians of whole calls in this one process.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from disastir_mteb.search import store as store_module
from disastir_mteb.search.store import EmbeddingStore, StoreKey, fingerprint_texts


def _median_seconds(call: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
        if result is None:
            raise RuntimeError("the entry was not served")
    return statistics.median(times)


def entry_figures(n: int, dim: int, repeat: int) -> None:
    """Build one n x dim entry, then time serving it with and without the row checksums."""
    texts = [f"passage {i}" for i in range(n)]
    key = StoreKey("bench/vectors", "1", "corpus", "", fingerprint_texts(texts))
    rng = np.random.default_rng(0)

    def encode(batch: list[str]) -> np.ndarray:
        vectors = rng.standard_normal((len(batch), dim), np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    with tempfile.TemporaryDirectory() as root:
        started = time.perf_counter()
        EmbeddingStore(root).get_or_encode(key, texts, encode, progress=False, order=np.arange(n)[::-1])
        built = time.perf_counter() - started
        size = sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file()) / 1e6
        store = EmbeddingStore(root)
        verified = _median_seconds(lambda: store.cached(key, n), repeat)
        real = store_module.row_checksums
        recorded = np.load(store.folder(key) / "checksums.npy")
        store_module.row_checksums = lambda array: recorded  # the same call, with every row taken as sound
        try:
            unverified = _median_seconds(lambda: store.cached(key, n), repeat)
        finally:
            store_module.row_checksums = real
        print(f"entry {n:,} x {dim} float32 ({size:,.0f} MB on disk), built through the store in {built:.1f} s")
        print(f"serve without row checksums (manifest, memory map, shape and size): {unverified * 1000:8.1f} ms")
        print(f"serve with every row hashed and compared (EmbeddingStore.cached):    {verified * 1000:8.1f} ms")
        print(f"verification alone: {(verified - unverified) * 1000:.1f} ms")


def warm_run_figures(data: Path) -> None:
    """A cold run fills the cache; a warm run of the 48 tasks is timed, with the seconds spent hashing rows."""
    import disastir_mteb
    from disastir_mteb.models.hashing_encoder import HashingEncoder

    os.environ["DISASTIR_DATA_DIR"] = str(data)
    with tempfile.TemporaryDirectory() as root:
        disastir_mteb.evaluate(HashingEncoder(), cache_dir=Path(root) / "cache", output_folder=Path(root) / "cold",
                               show_progress=False)
        real, spent = store_module.row_checksums, []

        def timed(array: np.ndarray) -> np.ndarray:
            started = time.perf_counter()
            try:
                return real(array)
            finally:
                spent.append(time.perf_counter() - started)

        store_module.row_checksums = timed
        try:
            started = time.perf_counter()
            disastir_mteb.evaluate(HashingEncoder(), cache_dir=Path(root) / "cache", output_folder=Path(root) / "warm",
                                   show_progress=False)
            warm = time.perf_counter() - started
        finally:
            store_module.row_checksums = real
        print(f"warm run, 48 tasks, hashing encoder, everything cached: {warm:.1f} s, of which hashing rows "
              f"{sum(spent):.2f} s over {len(spent)} entries ({100 * sum(spent) / warm:.1f} %)")


def main() -> None:
    """Parse the arguments, print the machine, then each figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=239_704)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--data", type=Path, help="a full-scale sample folder, for the warm-run figure")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}")
    entry_figures(args.n, args.dim, args.repeat)
    if args.data is not None:
        warm_run_figures(args.data)


if __name__ == "__main__":
    main()

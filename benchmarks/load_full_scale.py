"""Loading all 48 tasks from full-scale data: time and peak memory of the loader alone (no model).

Run: python benchmarks/load_full_scale.py [--data DIR]
Without --data it generates the full-scale synthetic sample (239,704 passages, 9,600 queries,
1,341,986 judged pairs, ~1.5 GB) under DISASTIR_CACHE_DIR first and says how long that took.
"""

from __future__ import annotations

import argparse
import os
import resource
import time


def main() -> None:
    """Print generation time (if any), first-task time (incl. the corpus), all-48 time and peak RSS."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", help="a folder in the published layout (default: the full synthetic sample)")
    args = parser.parse_args()
    if args.data is None:
        from disastir_mteb.sample.generator import sample_dir

        started = time.perf_counter()
        args.data = str(sample_dir("full"))
        print(f"full-scale sample ready in {time.perf_counter() - started:.1f} s: {args.data}")
    os.environ["DISASTIR_DATA_DIR"] = args.data
    import disastir_mteb

    tasks = disastir_mteb.get_tasks()
    started = time.perf_counter()
    tasks[0].load_data()
    first = time.perf_counter() - started
    for task in tasks[1:]:
        task.load_data()
    total = time.perf_counter() - started
    corpus = tasks[0].dataset["default"]["test"]["corpus"]
    shared = all(t.dataset["default"]["test"]["corpus"] is corpus for t in tasks)
    print(f"first task incl. corpus ({len(corpus):,} passages): {first:.1f} s")
    print(f"all 48 tasks: {total:.1f} s; judgements {sum(t.load_report.judgements for t in tasks):,}; "
          f"clean reports {sum(t.load_report.clean for t in tasks)}/48; one shared corpus object: {shared}")
    print(f"peak RSS of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")


if __name__ == "__main__":
    main()

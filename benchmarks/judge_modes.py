"""The judge's readable-answer share under each answer format, through loopback servers (issue 31).

A small local model answers prose unless its server constrains the decoder to a JSON schema (guided decoding,
a grammar): this is what ``response_format`` ``json_schema`` buys. Each row runs one judging job
(:func:`~disastir_mteb.judging.job.judge_pairs`, the real ``openai`` client, real HTTP on 127.0.0.1) over
hand-made pairs of every intent (every step of the protocol) against one server of ``tests/judge_servers.py``,
starting in one format, and prints: the answers received, the share of them the strict reader could read, the
pairs graded (with the true grade: the server knows it), and the format the server ended with.

    python benchmarks/judge_modes.py [--pairs-per-intent 8]

Servers: ``constrained`` (JSON that fits the schema under json_schema, prose otherwise), ``refuses-schema`` (a
400 naming response_format to json_schema, JSON otherwise), ``prose`` (ignores response_format), ``streaming``
(transformers serve's server-sent events, JSON inside).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the test servers live with the tests

from judge_servers import JudgeServer, constrained, prose, refuses_schema, streaming
from loopback import grade_judge

from disastir_mteb.endpoints.pool import EndpointPool
from disastir_mteb.judging.job import judge_pairs
from disastir_mteb.judging.protocol import AnswerFormat
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.vocabulary.taxonomy import MAX_GRADE, Intent


def _pairs(per_intent: int) -> tuple[list[Pair], dict[tuple[str, str], int]]:
    pairs, grades = [], {}
    for intent in Intent:
        for number in range(per_intent):
            query = f"{intent.value} query {number} about the flood warning on the river"
            passage = f"Passage {number} for {intent.value}: the river rose overnight and roads were closed."
            digest = int(hashlib.sha256(f"{query}\x00{passage}".encode()).hexdigest(), 16)
            pairs.append(Pair(intent, query, passage, "judge-model"))
            grades[query, passage] = digest % (MAX_GRADE[intent] + 1)
    return pairs, grades


def main() -> None:
    """Print one row per (server, first format)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs-per-intent", type=int, default=8)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    pairs, grades = _pairs(args.pairs_per_intent)
    judge = grade_judge(grades)
    servers = {"constrained": constrained(judge), "refuses-schema": refuses_schema(judge), "prose": prose(),
               "streaming": streaming(judge)}
    print(f"{len(pairs)} pairs ({args.pairs_per_intent} per intent, every step of the protocol); loopback servers, "
          "concurrency 4, the real openai client.")
    print(f"{'server':<15} {'first format':<12} {'answers':>8} {'readable':>9} {'graded':>7} {'right':>6}  ends with")
    for name, respond in servers.items():
        for first in AnswerFormat:
            with tempfile.TemporaryDirectory() as folder, JudgeServer(respond) as server, \
                    JudgementStore(Path(folder) / "j.sqlite") as store:
                summary = judge_pairs(pairs, store, EndpointPool([server.base_url], concurrency=4),
                                      judge_model="judge-model", answer_format=first)
                got = {(j.query, j.passage): j.grade for j in store.judgements()}
            answers = summary.requests
            readable = answers - summary.unparseable - summary.out_of_range
            right = sum(got.get(key) == float(grade) for key, grade in grades.items())
            print(f"{name:<15} {first.value:<12} {answers:>8} {100 * readable / answers:>8.1f}% {len(got):>7} "
                  f"{right:>6}  {summary.formats[server.base_url].value}")


if __name__ == "__main__":
    main()

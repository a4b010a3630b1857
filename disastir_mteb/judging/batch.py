"""Judging through OpenAI's Batch API files: write the requests, later read the results back, round by round.

For large jobs OpenAI's Batch API costs half as much and has its own, larger rate limits; the user uploads a
request file, waits (up to a day), downloads the output file. No network is needed here: this module only
writes and reads those files (the JSONL formats of the Batch API: one
``{"custom_id", "method", "url", "body"}`` per line in, one ``{"id", "custom_id", "response": {"status_code",
"body"}, "error"}`` per line out).

The protocol's steps depend on earlier answers (the chain of thought's criteria and final grade follow its
first answer; the multi-dimensional grade follows its four criteria), so a pair takes two rounds: the first
file holds every step that needs nothing (6 requests for most intents, 1 for STS), the second what those
answers unlock (4 requests); a step whose answer failed or could not be read goes into the next file again.
Each round: ``--batch-results`` reads the answers into the store
(:mod:`~disastir_mteb.judging.store`, exactly as an online job would), then ``--batch-requests`` writes what
comes next; a pair whose steps are all answered gets its grade. An answer that cannot be read is asked again
in the next file, up to :data:`~disastir_mteb.judging.protocol.MAX_ANSWER_ATTEMPTS` times.

``custom_id`` is ``<pair key>:<step>``: the store knows the pair by that key.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from disastir_mteb.judging.protocol import AnswerFault, grade_of, parse_answer, pending_requests
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.util.atomic import write_text_atomic

__all__ = ["BATCH_URL", "BatchRound", "read_batch_results", "write_batch_requests"]

#: The endpoint every line of a request file names.
BATCH_URL = "/v1/chat/completions"


@dataclass(frozen=True)
class BatchRound:
    """What one step of the round trip did.

    Attributes:
        requests: lines written (``write_batch_requests``) or answers read (``read_batch_results``).
        judged: pairs graded by this step (their last answer came in).
        failed: pairs left without any readable answer (no grade).
        remaining: pairs still waiting for answers after this step.
        unreadable: answers read that could not be used (asked again in the next file).
        errors: result lines carrying an error instead of an answer (asked again in the next file).
    """

    requests: int
    judged: int
    failed: int
    remaining: int
    unreadable: int = 0
    errors: int = 0


def _close_complete(pairs: Sequence[Pair], store: JudgementStore) -> tuple[int, int, list[tuple[Pair, list]]]:
    """Grade every pair whose steps are all answered; the others with their next requests."""
    judged = failed = 0
    open_pairs = []
    done = store.judged(p.key for p in pairs)
    for pair in pairs:
        if pair.key in done:
            continue
        answers = store.state(pair.key).answers
        requests = pending_requests(pair.intent, pair.query, pair.passage, answers)
        if requests:
            open_pairs.append((pair, requests))
            continue
        grade, votes = grade_of(pair.intent, answers)
        store.record_judgement(pair.key, grade, votes)
        judged += grade is not None
        failed += grade is None
    return judged, failed, open_pairs


def write_batch_requests(pairs: Sequence[Pair], store: JudgementStore, path: str | Path, *, model: str) -> BatchRound:
    """Write the next round's request file for ``pairs`` (grading those already complete); atomic.

    Returns:
        The round: ``requests`` lines written (0 when every pair is graded: no file is written then).
    """
    store.add_pairs(pairs)
    judged, failed, open_pairs = _close_complete(pairs, store)
    lines = [json.dumps({"custom_id": f"{pair.key}:{request.step}", "method": "POST", "url": BATCH_URL,
                         "body": request.body(model)}, ensure_ascii=False)
             for pair, requests in open_pairs for request in requests]
    if lines:
        write_text_atomic(Path(path), "\n".join(lines) + "\n")
    return BatchRound(len(lines), judged, failed, len(open_pairs))


def read_batch_results(pairs: Sequence[Pair], store: JudgementStore, path: str | Path) -> BatchRound:
    """Read a Batch API output file into the store, then grade the pairs now complete.

    Lines for pairs or steps not asked (another job's file, a step already answered) are left out; the same
    file read twice adds nothing.

    Raises:
        ValueError: a line is not JSON or has no ``custom_id`` (the sentence names the file and line).
    """
    path = Path(path)
    by_key = {pair.key: pair for pair in pairs}
    store.add_pairs(pairs)
    read = unreadable = errors = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            key, step = str(record["custom_id"]).split(":", 1)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: line {number} is not a Batch API result line "
                             '({"custom_id": "<pair>:<step>", "response": {...}}).') from None
        pair = by_key.get(key)
        if pair is None:
            continue
        state = store.state(key)
        if step in state.answers:
            continue
        wanted = {r.step: r for r in pending_requests(pair.intent, pair.query, pair.passage, state.answers)}
        request = wanted.get(step)
        if request is None:
            continue
        response = record.get("response") or {}
        body = response.get("body") or {}
        if record.get("error") or response.get("status_code") != 200:
            errors += 1
            continue
        choices = body.get("choices") or [{}]
        text = (choices[0].get("message") or {}).get("content")
        usage = body.get("usage") or {}
        tokens = {"prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens")}
        read += 1
        try:
            value = parse_answer(text, request.key, request.allowed)
        except AnswerFault as fault:
            unreadable += 1
            store.record_answer(key, step, raw=text, fault=fault.kind, detail=str(fault), server="batch", **tokens)
            continue
        store.record_answer(key, step, raw=text, value=value, server="batch", **tokens)
    judged, failed, open_pairs = _close_complete(pairs, store)
    return BatchRound(read, judged, failed, len(open_pairs), unreadable, errors)

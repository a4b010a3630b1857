"""Judging through OpenAI's Batch API files: write the requests, later read the results back, round by round.

No network here: the user uploads the request file and downloads the output. The protocol's later steps depend on
earlier answers, so a pair takes two rounds, and a step whose answer failed or could not be read goes into the next
file again. ``custom_id`` is ``<pair key>:<step>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disastir_mteb.judging.protocol import AnswerFault, chat_content, grade_of, parse_answer, pending_requests
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.util.atomic import write_text_atomic
from disastir_mteb.util.errors import InvalidInput

__all__ = ["BATCH_URL", "BatchRound", "ResultLine", "read_batch_results", "result_lines", "same_model",
           "write_batch_requests"]

#: The endpoint every line of a request file names.
BATCH_URL = "/v1/chat/completions"
#: A dated snapshot's suffix, as OpenAI names its snapshots: ``-2024-07-18`` (``gpt-4o-mini-2024-07-18``) or, for
#: older models, ``-0613`` (``gpt-4-0613``).
_SNAPSHOT = r"-(?:\d{4}-\d{2}-\d{2}|\d{4})"


def same_model(answered: str, asked: str) -> bool:
    """Whether an answer naming the model ``answered`` comes from the judge model ``asked``, or its dated snapshot.

    OpenAI answers a request for an alias with the snapshot that served it.

    Examples:
        >>> same_model("gpt-4o-mini-2024-07-18", "gpt-4o-mini"), same_model("gpt-4o-mini-2024-07-18", "gpt-4o")
        (True, False)
    """
    return answered == asked or re.fullmatch(re.escape(asked) + _SNAPSHOT, answered) is not None


@dataclass(frozen=True)
class BatchRound:
    """What one step of the round trip did, in counts.

    ``requests`` counts lines written or answers read; result lines left out are counted as ``already`` (answered in
    the store), ``foreign`` (not asked here) or ``repeated``; ``unreadable`` and ``errors`` are asked again.
    """

    requests: int
    judged: int
    failed: int
    remaining: int
    unreadable: int = 0
    errors: int = 0
    already: int = 0
    foreign: int = 0
    repeated: int = 0

    def describe_read(self, path: str | Path) -> str:
        """One line for ``--batch-results``: what was read, what was left out and why, what it graded."""
        left = [f"{count} {why}" for count, why in ((self.already, "already in the store"),
                                                    (self.foreign, "for pairs or steps not asked here"),
                                                    (self.repeated, "repeating an earlier line")) if count]
        left_out = f"; left out: {', '.join(left)}" if left else ""
        return (f"{path}: {self.requests} answer(s) read ({self.unreadable} unreadable, {self.errors} error line(s): "
                f"asked again){left_out}; {self.judged} pair(s) graded, {self.failed} without a readable answer, "
                f"{self.remaining} waiting.")


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


def write_batch_requests(pairs: Sequence[Pair], store: JudgementStore, path: str | Path, *,
                         judge_model: str) -> BatchRound:
    """Write the next round's request file atomically, grading the pairs already complete (no file if none is left)."""
    store.add_pairs(pairs)
    judged, failed, open_pairs = _close_complete(pairs, store)
    lines = [json.dumps({"custom_id": f"{pair.key}:{request.step}", "method": "POST", "url": BATCH_URL,
                         "body": request.body(judge_model)}, ensure_ascii=False)
             for pair, requests in open_pairs for request in requests]
    if lines:
        write_text_atomic(Path(path), "\n".join(lines) + "\n")
    return BatchRound(len(lines), judged, failed, len(open_pairs))


def read_batch_results(pairs: Sequence[Pair], store: JudgementStore, path: str | Path) -> BatchRound:
    """Read a Batch API output file into the store, then grade the pairs now complete.

    The whole file is checked first: a malformed or cut line, an empty file, one ``custom_id`` with two different
    answers, or an answer from another model than the pair's judge (:func:`same_model`) is one sentence naming the
    line, and nothing is read. Identical repeats are read once; lines for steps already answered or not asked here are
    left out and counted. A body naming no model is read (its ``custom_id`` holds the judge model).

    Raises:
        ValueError: as above, or no line is for these pairs.
        FileNotFoundError: no such file.
    """
    path = Path(path)
    lines, repeats = result_lines(path)
    by_key = {pair.key: pair for pair in pairs}
    ours = [line for line in lines if line.key in by_key]
    if not ours:
        raise InvalidInput(f"{path}: none of its {len(lines):,} result line(s) is for a pair of these results judged "
                           f"by {_models(pairs)}; was it written for other results, or with another --model?")
    _check_models(path, sorted(ours + [line for line in repeats if line.key in by_key],
                               key=lambda line: line.number), by_key)
    store.add_pairs(pairs)
    read = unreadable = errors = already = 0
    foreign = len(lines) - len(ours)
    for line in ours:
        pair = by_key[line.key]
        state = store.state(line.key)
        if line.step in state.answers:
            already += 1
            continue
        request = {r.step: r for r in pending_requests(pair.intent, pair.query, pair.passage, state.answers)}.get(
            line.step)
        if request is None:
            foreign += 1  # a step this pair does not need now (another branch of the chain of thought)
            continue
        if line.error:
            errors += 1
            continue
        read += 1
        try:
            value = parse_answer(line.text, request.key, request.allowed)
        except AnswerFault as fault:
            unreadable += 1
            store.record_answer(line.key, line.step, raw=line.text, fault=fault.kind, detail=str(fault),
                                server=line.server, **line.tokens)
            continue
        store.record_answer(line.key, line.step, raw=line.text, value=value, server=line.server, **line.tokens)
    judged, failed, open_pairs = _close_complete(pairs, store)
    return BatchRound(read, judged, failed, len(open_pairs), unreadable, errors, already=already,
                      foreign=foreign, repeated=len(repeats))


#: ``<pair key>:<step>``, as :func:`write_batch_requests` writes ``custom_id``; a build's requests have 24-digit keys
#: and their stage as the step (:mod:`disastir_mteb.building.batch`), so one output file can hold both.
_CUSTOM_ID = re.compile(r"\A(?P<key>[0-9a-f]{32}|[0-9a-f]{24}):(?P<step>[A-Za-z_]+(?:/[A-Za-z_ ]+)*)\Z")
_SHAPE = ('each line of a Batch API output file is {"custom_id": "<key>:<step>", "response": {"status_code": 200, '
          '"body": <chat completion>}, "error": null}')


@dataclass(frozen=True)
class ResultLine:
    """One checked line of an output file: whose answer, and the answer (or that the request failed)."""

    number: int
    key: str
    step: str
    error: bool
    text: str | None
    tokens: dict[str, int | None]
    model: str | None = None  # what the answer's body names as the model that answered; None: it names none
    body: Any = field(default=None, compare=False, repr=False)  # the chat completion itself (a build reads logprobs)

    @property
    def outcome(self) -> tuple[bool, str | None]:
        """What the line says happened: two lines saying the same are one answer repeated."""
        return self.error, self.text

    @property
    def server(self) -> str:
        """Where the store says the answer came from: the Batch API, and the model the answer names."""
        return f"batch: {self.model or 'no model named'}"


def _check_models(path: Path, lines: Sequence[ResultLine], pairs: dict[str, Pair]) -> None:
    """Refuse the file when an answer names another model than its pair's judge model (one sentence, the first)."""
    wrong = [line for line in lines
             if line.model is not None and not same_model(line.model, pairs[line.key].judge_model)]
    if not wrong:
        return
    first, asked = wrong[0], pairs[wrong[0].key].judge_model
    more = f" (as were {len(wrong) - 1:,} more of its line(s))" if len(wrong) > 1 else ""
    raise InvalidInput(f"{path}: line {first.number} (custom_id '{first.key}:{first.step}') was answered by model "
                       f"{first.model!r}{more}, not by the judge model {asked!r} (--model); grades are stored under "
                       "the "
                       f"judge model's name, so send the request file to {asked!r}, or judge with --model "
                       f"{first.model!r} (a request file of its own). Nothing was read.")


def result_lines(path: Path) -> tuple[list[ResultLine], list[ResultLine]]:
    """Every line of an output file, checked (ValueError on the first bad one), and apart the repeated ones."""
    data = path.read_bytes()
    raw_lines = data.split(b"\n")
    numbered = [(number, raw) for number, raw in enumerate(raw_lines, start=1) if raw.strip()]
    if not numbered:
        raise InvalidInput(f"{path} is empty ({len(data):,} bytes, no result line); download the batch's output file "
                           "again (its output_file_id).")
    last = numbered[-1][0]
    found: dict[tuple[str, str], ResultLine] = {}
    lines: list[ResultLine] = []
    repeats: list[ResultLine] = []
    for number, raw in numbered:
        line = _result_line(path, number, raw, last=number == last and not data.endswith(b"\n"))
        earlier = found.get((line.key, line.step))
        if earlier is None:
            found[line.key, line.step] = line
            lines.append(line)
        elif earlier.outcome == line.outcome:
            repeats.append(line)
        else:
            raise InvalidInput(f"{path}: custom_id '{line.key}:{line.step}' is on line {earlier.number} and line "
                               f"{number} with different answers ({_shown(earlier)} and {_shown(line)}); an output "
                               "file holds each request once (two files joined?): keep the line to trust, delete the "
                               "other, and read the file again. Nothing was read.")
    return lines, repeats


def _result_line(path: Path, number: int, raw: bytes, *, last: bool) -> ResultLine:
    where = f"{path}: line {number}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInput(f"{where} is not UTF-8 text (byte 0x{raw[error.start]:02x} at column {error.start + 1}); "
                           f"{_SHAPE}.") from None
    try:
        record = json.loads(text)
    except (ValueError, RecursionError) as error:
        cut = (" and the file ends there without a newline: it looks cut short; download the output file again"
               if last else f"; {_SHAPE}")
        raise InvalidInput(f"{where} is not JSON ({error}){cut}.") from None
    if not isinstance(record, dict):
        raise InvalidInput(f"{where} is a JSON {type(record).__name__}, not an object; {_SHAPE}.")
    custom_id = record.get("custom_id")
    found = _CUSTOM_ID.match(custom_id) if isinstance(custom_id, str) else None
    if found is None:
        raise InvalidInput(f"{where} has custom_id {custom_id!r}, not '<key>:<step>' as disastir-mteb judge "
                           "or build --batch-requests writes it; was the request file written by another program?")
    response, error = record.get("response"), record.get("error")
    if error is not None:
        return ResultLine(number, found["key"], found["step"], True, None, {})
    if not isinstance(response, dict):
        what = "no 'response' and no 'error'" if response is None else f"a 'response' that is {response!r:.60}"
        raise InvalidInput(f"{where} has {what}, not an object; {_SHAPE}.")
    status = response.get("status_code")
    if status != 200:
        if not isinstance(status, int) or isinstance(status, bool):
            raise InvalidInput(f"{where} has a response without a numeric status_code ({status!r:.40}); {_SHAPE}.")
        return ResultLine(number, found["key"], found["step"], True, None, {})
    try:
        text, tokens = chat_content(response.get("body"))
    except ValueError as wrong:
        raise InvalidInput(f"{where}: the response body is {wrong}; {_SHAPE}.") from None
    model = response["body"].get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidInput(f"{where}: the response body's model is {model!r:.40}, not a model name; {_SHAPE}.")
    return ResultLine(number, found["key"], found["step"], False, text, tokens, model=(model or "").strip() or None,
                      body=response["body"])


def _shown(line: ResultLine) -> str:
    return "an error" if line.error else repr(line.text if line.text is None or len(line.text) <= 60
                                              else line.text[:57] + "...")


def _models(pairs: Sequence[Pair]) -> str:
    models = sorted({pair.judge_model for pair in pairs})
    return ", ".join(models) if models else "no model (no pair to judge)"

"""A build's requests through OpenAI's Batch API files instead of a server, one round at a time.

No network: each stage of requests (QAdoc's summaries, the information needs, the queries, the judge's steps) writes
its unanswered requests to the request file and the build stops there. The user sends the file, downloads its output
and runs the same command with ``--batch-results``: the answers go into the build store as a server's would, and the
build goes on to the next stage's file. An unreadable answer, or a line the Batch API failed, is asked again in the
next file (up to the judge's limit of tries). ``custom_id`` is ``<request key>:<stage>``; the judge's lines keep the
judge's own (:mod:`disastir_mteb.judging.batch`), so one output file may hold both.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disastir_mteb.building.generation import GenerationSummary, Reader, record_answer, settled
from disastir_mteb.building.prompts import Ask
from disastir_mteb.building.store import BuildStore
from disastir_mteb.judging.batch import BATCH_URL, ResultLine, read_batch_results, result_lines, same_model
from disastir_mteb.judging.batch import write_batch_requests as write_judge_requests
from disastir_mteb.judging.protocol import AnswerFormat
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.util.atomic import write_text_atomic
from disastir_mteb.util.errors import InvalidInput

__all__ = ["BatchFiles", "BatchPending"]


class BatchPending(Exception):  # not an error: the build waits for a round of the Batch API
    """The build stopped after writing a round's request file; the message says what to do next."""

    def __init__(self, stage: str, requests: int, path: Path) -> None:
        super().__init__(f"[{stage}] {requests:,} request(s) written to {path}: send it through the Batch API, then "
                         "run the same command with --batch-results <its output file> (the next round's requests go "
                         "to --batch-requests).")


@dataclass
class BatchFiles:
    """The round's two files: the output file read first (``results``), the next request file (``requests``)."""

    requests: Path
    results: Path | None = None
    matched: int = 0  # lines of ``results`` that answer a request of this build
    _lines: list[ResultLine] | None = field(default=None, repr=False)

    def lines(self) -> list[ResultLine]:
        """The output file's lines, checked once (a bad line is one sentence naming it, and nothing is read)."""
        if self._lines is None:
            self._lines = result_lines(self.results)[0] if self.results is not None else []
        return self._lines

    def generate(self, asks: Sequence[Ask], store: BuildStore, *, model: str, read: Reader,
                 progress: Callable[[int], None] | None = None) -> tuple[dict[str, Any], GenerationSummary]:
        """As :func:`~disastir_mteb.building.generation.generate`, from the output file; the rest written to ask.

        Raises:
            BatchPending: some of ``asks`` still wait for an answer (their request file is written).
        """
        unique = {ask.key: ask for ask in asks}
        ours = [line for line in self.lines() if line.key in unique and line.step == unique[line.key].stage]
        self.matched += len(ours)
        _check_model(self.results, ours, model)
        summary = GenerationSummary()
        stored = store.answers(unique)
        for line in ours:
            have = stored.get(line.key)
            if line.error or settled(have) or (have is not None and line.text in have.raws):
                continue  # failed at the Batch API (asked again), no longer needed, or this file read before
            record_answer(store, unique[line.key], read, line.body, line.text, server=line.server,
                          tokens=(line.tokens.get("prompt_tokens"), line.tokens.get("completion_tokens")))
            summary.sent += 1
        stored = store.answers(unique)
        waiting = [ask for key, ask in unique.items() if not settled(stored.get(key))]
        summary.reused = len(unique) - len(waiting) - summary.sent
        for have in stored.values():
            if have.value is None and settled(have):
                summary.given_up[have.faults[-1] if have.faults else "unparseable"] += 1
        if progress is not None:
            progress(len(unique) - len(waiting))
        if waiting:
            self._write(waiting[0].stage, [json.dumps({
                "custom_id": f"{ask.key}:{ask.stage}", "method": "POST", "url": BATCH_URL,
                "body": ask.body(model, AnswerFormat.JSON_SCHEMA, logprobs=True)}, ensure_ascii=False)
                for ask in waiting])
        return {key: have.value for key, have in stored.items() if have.value is not None}, summary

    def judge(self, pairs: Sequence[Pair], store: JudgementStore, *, judge_model: str) -> None:
        """The judge's round: its answers read from the output file, its next requests written.

        Raises:
            BatchPending: some pairs still wait for an answer (their request file is written).
        """
        keys = {pair.key for pair in pairs}
        ours = sum(line.key in keys for line in self.lines())
        if ours:
            self.matched += ours
            read_batch_results(pairs, store, self.results)
        self._check_matched()
        written = write_judge_requests(pairs, store, self.requests, judge_model=judge_model)
        if written.requests:
            raise BatchPending("judge", written.requests, self.requests)

    def _write(self, stage: str, lines: list[str]) -> None:
        self._check_matched()
        write_text_atomic(self.requests, "\n".join(lines) + "\n")
        raise BatchPending(stage, len(lines), self.requests)

    def _check_matched(self) -> None:
        """An output file none of whose lines answers this build: one sentence, before a new round is written."""
        if self.results is not None and not self.matched:
            raise InvalidInput(f"{self.results}: none of its {len(self.lines()):,} result line(s) answers a request "
                               "of this build (its documents, options and seed); was it the output of another "
                               "build's request file?")


def _check_model(path: Path | None, lines: Sequence[ResultLine], model: str) -> None:
    """Refuse an output file whose answers name another model than the build's generation model."""
    wrong = [line for line in lines if line.model is not None and not same_model(line.model, model)]
    if wrong:
        first = wrong[0]
        raise InvalidInput(f"{path}: line {first.number} (custom_id '{first.key}:{first.step}') was answered by model "
                           f"{first.model!r}, not by the generation model {model!r} (--model); send the request file "
                           f"to {model!r}, or build with --model {first.model!r}.")

"""One batch of a build's chat requests through the generation servers, every answer committed as it arrives.

A request the store has a readable answer for is not sent; an unreadable answer is kept and asked again, up to the
judge's :data:`~disastir_mteb.judging.protocol.MAX_ANSWER_ATTEMPTS` tries; each server is asked in the richest answer
format it shows it can take (:class:`~disastir_mteb.judging.formats.FormatLadder`), with logprobs until it refuses
them, so the filters can use a query's mean log-probability.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from disastir_mteb.building.prompts import Ask
from disastir_mteb.building.store import BuildStore, StoredAnswer
from disastir_mteb.endpoints.pool import EndpointError, EndpointPool, Server
from disastir_mteb.judging.formats import FormatLadder
from disastir_mteb.judging.protocol import MAX_ANSWER_ATTEMPTS, AnswerFault, AnswerFormat, chat_content, no_text_reason

__all__ = ["GenerationSummary", "Reader", "Send", "generate", "mean_logprob", "record_answer", "settled"]

#: ``read(ask, text) -> value``: the answer's value, or :class:`AnswerFault` when it is not what was asked.
Reader = Callable[[Ask, "str | None"], Any]
#: ``send(asks, read, progress)``: each ask's readable value by key and what was done, through servers
#: (:func:`generate`) or Batch API files (:class:`~disastir_mteb.building.batch.BatchFiles`).
Send = Callable[[Sequence[Ask], Reader, "Callable[[int], None] | None"], "tuple[dict[str, Any], GenerationSummary]"]


@dataclass
class GenerationSummary:
    """What one batch did: requests sent, answers reused from the store, requests given up and why."""

    sent: int = 0
    reused: int = 0
    given_up: Counter[str] = field(default_factory=Counter)
    last_fault: str = ""


def mean_logprob(answer: Any) -> float | None:
    """The mean log-probability of an answer's tokens, where the server gave them (None otherwise)."""
    try:
        tokens = answer["choices"][0]["logprobs"]["content"]
        values = [float(token["logprob"]) for token in tokens]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return sum(values) / len(values) if values and all(math.isfinite(v) for v in values) else None


def record_answer(store: BuildStore, ask: Ask, read: Reader, answer: Any, text: str | None, *, server: str,
                  tokens: tuple[int | None, int | None]) -> tuple[Any, AnswerFault | None]:
    """Commit one answer to ``ask`` (a server's or a Batch API output line's); its value, or why it is unreadable."""
    try:
        if text is None:
            raise AnswerFault("unparseable", no_text_reason(answer))
        value = read(ask, text)
    except AnswerFault as fault:
        store.record(ask.key, ask.stage, raw=text, fault=f"{fault.kind}: {fault}", server=server, tokens=tokens)
        return None, fault
    store.record(ask.key, ask.stage, raw=text, value=value, server=server, tokens=tokens, logprob=mean_logprob(answer))
    return value, None


def settled(stored: StoredAnswer | None) -> bool:
    """Whether a request needs no more tries: it has a readable answer, or it was tried as often as allowed."""
    return stored is not None and (stored.value is not None or stored.attempts >= MAX_ANSWER_ATTEMPTS)


def generate(asks: Sequence[Ask], store: BuildStore, pool: EndpointPool[Any, Any], *, model: str, read: Reader,
             progress: Callable[[int], None] | None = None,
             answer_format: AnswerFormat = AnswerFormat.JSON_SCHEMA) -> tuple[dict[str, Any], GenerationSummary]:
    """Each ask's readable value by key (those given up left out), and what was done; ``progress`` gets 1 per ask.

    Raises:
        EndpointError: a server fault retrying cannot mend, or every server given up on (answers already received
            are kept in the store).
    """
    return asyncio.run(_generate(asks, store, pool, model=model, read=read, progress=progress,
                                 answer_format=answer_format))


async def _generate(asks: Sequence[Ask], store: BuildStore, pool: EndpointPool[Any, Any], *, model: str, read: Reader,
                    progress: Callable[[int], None] | None,
                    answer_format: AnswerFormat) -> tuple[dict[str, Any], GenerationSummary]:
    summary = GenerationSummary()
    unique = list({ask.key: ask for ask in asks}.values())
    stored = store.answers(ask.key for ask in unique)
    values: dict[str, Any] = {}
    attempts: dict[str, int] = {}
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for ask in unique:
        have = stored.get(ask.key)
        if settled(have):
            summary.reused += 1
            if have.value is not None:
                values[ask.key] = have.value
            else:
                summary.given_up[have.faults[-1] if have.faults else "unparseable"] += 1
            if progress is not None:
                progress(1)
            continue
        attempts[ask.key] = have.attempts if have is not None else 0
        queue.put_nowait(ask)
    pending = queue.qsize()
    if not pending:
        return values, summary
    ladder = FormatLadder(pool.servers, answer_format)
    sent_as: dict[str, AnswerFormat] = {}

    def ask_body(ask: Ask, server: Server) -> tuple[str, dict[str, Any]]:
        sent_as[ask.key] = ladder.current(server)
        return "/chat/completions", ask.body(model, sent_as[ask.key], logprobs=ladder.logprobs(server))

    def refused(ask: Ask, server: Server, said: str, *, status: int) -> bool:
        return ladder.refused(server, sent_as[ask.key], said, status=status)

    def done(ask: Ask, answer: Any, server: Server) -> None:
        nonlocal pending
        summary.sent += 1
        try:
            text, tokens = chat_content(answer)
        except ValueError as error:
            raise EndpointError(f"{server.url} answered a chat request, but the answer is {error}; check that this "
                                "base URL is a chat-completions server (it usually ends in /v1).") from None
        value, fault = record_answer(store, ask, read, answer, text, server=server.url,
                                     tokens=(tokens["prompt_tokens"], tokens["completion_tokens"]))
        if text is not None:
            ladder.answered(server, sent_as[ask.key], readable=fault is None, why=str(fault or ""))
        if fault is not None:
            attempts[ask.key] += 1
            if attempts[ask.key] < MAX_ANSWER_ATTEMPTS:
                queue.put_nowait(ask)
                return
            summary.given_up[fault.kind] += 1
            summary.last_fault = f"{server.url}: {fault}"
        else:
            values[ask.key] = value
        pending -= 1
        if progress is not None:
            progress(1)
        if not pending:
            pool.stop(queue)

    try:
        await pool.serve(queue, ask_body, done, refused=refused)
    finally:
        await pool.close()
    return values, summary

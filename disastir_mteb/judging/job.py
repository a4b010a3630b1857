"""One judging job: pairs in, grades out, through one or more chat-completions servers, resumable at any moment.

Several servers share one queue; one that dies leaves its work to the others. Each server is asked for structured
answers first and moved to a plainer format for the whole job when it shows it cannot take them; the reader stays
as strict in every format, so prose never becomes a grade.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from disastir_mteb.endpoints.pool import EndpointError, EndpointPool, Server
from disastir_mteb.judging.formats import FORMAT_PROBES, FormatLadder
from disastir_mteb.judging.grade_probabilities import answer_distribution, pair_distribution
from disastir_mteb.judging.protocol import (
    MAX_ANSWER_ATTEMPTS,
    AnswerFault,
    AnswerFormat,
    Request,
    chat_content,
    grade_of,
    no_text_reason,
    parse_answer,
    pending_requests,
)
from disastir_mteb.judging.store import JudgementStore, Pair, StoreLockedError
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import Intent

logger = logging.getLogger(__name__)

__all__ = ["ANSWER_TOKENS", "CHARS_PER_TOKEN", "FORMAT_PROBES", "JobPlan", "JobSummary", "Price", "judge_pairs",
           "plan_job"]

#: Characters per token in the plan's estimate (the usual rule of thumb for English with OpenAI's tokenizers).
CHARS_PER_TOKEN = 4
#: Tokens one answer costs (a short JSON object), for the estimate.
ANSWER_TOKENS = 12
#: Pairs claimed from the store at a time.
_CLAIM_CHUNK = 64
_RENEW_EVERY = 60.0


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens, as the provider lists them (input, output)."""

    input: float
    output: float

    @classmethod
    def parse(cls, text: str) -> Price:
        """``"0.15,0.60"`` -> Price(0.15, 0.6); one number prices both.

        Raises:
            ValueError: not one or two non-negative numbers.
        """
        parts = [p.strip() for p in str(text).split(",")]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if len(values) not in (1, 2) or any(v < 0 or v != v for v in values):
            raise InvalidInput(f"--price {text!r}: expected US dollars per million tokens, input and output, "
                               "e.g. 0.15,0.60 (one number prices both).")
        return cls(values[0], values[-1])


@dataclass(frozen=True)
class JobPlan:
    """What a job would do, before it does it."""

    pairs: int
    already_judged: int
    to_judge: int
    requests: int
    prompt_tokens: int
    completion_tokens: int

    def cost(self, price: Price | None) -> float | None:
        """Estimated US dollars at ``price`` (None without one)."""
        if price is None:
            return None
        return (self.prompt_tokens * price.input + self.completion_tokens * price.output) / 1e6

    def describe(self, price: Price | None = None) -> str:
        """One paragraph: pairs, requests, tokens and cost."""
        cost = self.cost(price)
        money = (f", about ${cost:,.2f} at ${price.input:g}/${price.output:g} per million tokens in/out"
                 if cost is not None and price is not None else " (give --price IN,OUT per million tokens for a "
                 "cost)")
        return (f"{self.pairs:,} pair(s) to judge: {self.already_judged:,} already in the store, {self.to_judge:,} "
                f"to ask; about {self.requests:,} request(s), {self.prompt_tokens:,} prompt and "
                f"{self.completion_tokens:,} answer tokens (estimated){money}.")


def _typical_requests(intent: Intent, query: str, passage: str) -> list[Request]:
    """Every request of a pair whose answers all read: the first round, then each later one."""
    answers: dict[str, Any] = {}
    requests: list[Request] = []
    while True:
        step = pending_requests(intent, query, passage, answers)
        if not step:
            return requests
        requests += step
        for request in step:
            answers[request.step] = "Yes" if request.key == "has_answer" else request.allowed[-1]


def plan_job(pairs: Sequence[Pair], store: JudgementStore) -> JobPlan:
    """Pairs, requests and tokens of judging ``pairs`` with what ``store`` already holds left out."""
    done = store.judged(p.key for p in pairs)
    requests = prompt = completion = 0
    for pair in pairs:
        if pair.key in done:
            continue
        for request in _typical_requests(pair.intent, pair.query, pair.passage):
            requests += 1
            prompt += sum(len(text) for _, text in request.messages) // CHARS_PER_TOKEN + 4 * len(request.messages)
            completion += ANSWER_TOKENS
    return JobPlan(len(pairs), len(done), len(pairs) - len(done), requests, prompt, completion)


@dataclass
class JobSummary:
    """What a job did, in counts.

    ``failed`` pairs got no readable answer (no grade; the next run asks again), ``held_elsewhere`` were another job's
    on the same store; ``given_up`` counts the steps without a usable answer after :data:`MAX_ANSWER_ATTEMPTS` tries, by
    fault then step; ``formats`` holds the answer format each server ended with.
    """

    judged: int = 0
    failed: int = 0
    held_elsewhere: int = 0
    requests: int = 0
    unparseable: int = 0
    out_of_range: int = 0
    given_up: dict[str, Counter[str]] = field(default_factory=dict)
    last_given_up: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    servers: list[str] = field(default_factory=list)
    formats: dict[str, AnswerFormat] = field(default_factory=dict)

    def failures(self) -> list[str]:
        """One line per kind of failure, with its count by step, instead of one line per pair."""
        lines = []
        for kind in sorted(self.given_up):
            steps = self.given_up[kind]
            what = "no readable answer" if kind == "unparseable" else "no answer on the asked scale"
            by_step = ", ".join(f"{step} {count}" for step, count in sorted(steps.items(), key=lambda s: (-s[1], s[0])))
            lines.append(f"{sum(steps.values())} step(s) had {what} after {MAX_ANSWER_ATTEMPTS} tries ({by_step}); "
                         f"last: {self.last_given_up[kind]}.")
        return lines

    def describe(self) -> str:
        """One paragraph for the end of a job, then :meth:`failures`, one line each."""
        rate = f" ({self.judged / self.seconds:.1f} pairs/s)" if self.seconds > 0 and self.judged else ""
        faults = (f"; {self.unparseable} unreadable and {self.out_of_range} out-of-range answer(s), each asked again "
                  f"(at most {MAX_ANSWER_ATTEMPTS} times)" if self.unparseable or self.out_of_range else "")
        failed = (f"; {self.failed} pair(s) without any readable answer (no grade; the next run asks again)"
                  if self.failed else "")
        held = (f"; {self.held_elsewhere} pair(s) left to another job working on the same store"
                if self.held_elsewhere else "")
        return "\n".join([f"Judged {self.judged} pair(s) with {self.requests} request(s) in {self.seconds:.1f} s"
                          f"{rate}{faults}{failed}{held}. Servers: " + "; ".join(self.servers) + ".",
                          *self.failures()])


@dataclass
class _Active:
    pair: Pair
    answers: dict[str, Any]
    attempts: dict[str, int]
    distributions: dict[str, Any] = field(default_factory=dict)
    in_flight: set[str] = field(default_factory=set)


def judge_pairs(pairs: Sequence[Pair], store: JudgementStore, pool: EndpointPool[Any, Any], *, judge_model: str,
                progress: Callable[[int], None] | None = None,
                answer_format: AnswerFormat | str = AnswerFormat.JSON_SCHEMA, logprobs: bool = True,
                on_answer: Callable[[int, str], None] | None = None) -> JobSummary:
    """Judge every pair the store has no grade for, through the servers of ``pool``; returns what was done.

    Each server is asked in ``answer_format`` first (or where an earlier job against this judge model left it) and only
    ever moved to plainer ones; with ``logprobs``, each answer's grade probabilities are stored too. ``progress`` is
    called with 1 per pair finished, ``on_answer`` after every answer with the count so far and each server's state,
    so a slow judge shows progress before any pair is complete.

    Raises:
        EndpointError: a server fault retrying cannot mend, an answer that is not a chat completion, or every
            server given up on (answers already received are kept).
        StoreLockedError: the store stayed locked by another process (answers already received are kept).
    """
    return asyncio.run(_judge(pairs, store, pool, model=judge_model, progress=progress,
                              answer_format=AnswerFormat(answer_format), logprobs=logprobs, on_answer=on_answer))


def _learned(store: JudgementStore, servers: Sequence[Server], model: str) -> dict[str, tuple[AnswerFormat, bool]]:
    found = {}
    for server in servers:
        if (known := store.learned_format(server.url, model)) is not None:
            with contextlib.suppress(ValueError):  # a format this version does not know: start from the top
                found[server.url] = (AnswerFormat(known[0]), known[1])
    return found


async def _judge(pairs: Sequence[Pair], store: JudgementStore, pool: EndpointPool[Any, Any], *, model: str,
                 progress: Callable[[int], None] | None, answer_format: AnswerFormat, logprobs: bool,
                 on_answer: Callable[[int, str], None] | None) -> JobSummary:
    summary = JobSummary()
    learned = _learned(store, pool.servers, model)
    formats = FormatLadder(pool.servers, answer_format, logprobs=logprobs, learned=learned)
    for url, (known, _) in learned.items():
        if known is not answer_format:
            logger.info("%s: asked with %s from the start, as an earlier job against %s learned.", url,
                        known.describe(), model)
    asked: dict[tuple[str, str], AnswerFormat] = {}  # (pair, step) in flight -> the format it was last sent in
    started = time.perf_counter()
    done_before = store.judged(p.key for p in pairs)
    waiting = deque(p for p in pairs if p.key not in done_before)
    store.add_pairs(waiting)
    active: dict[str, _Active] = {}
    queue: asyncio.Queue[Any] = asyncio.Queue()
    last_renewal = time.monotonic()
    stopped = False

    def finish(state: _Active) -> None:
        grade, votes = grade_of(state.pair.intent, state.answers)
        distribution = pair_distribution(state.pair.intent, state.answers, state.distributions) if grade is not None \
            else None
        store.record_judgement(state.pair.key, grade, votes, distribution)
        if grade is None:
            summary.failed += 1
        else:
            summary.judged += 1
        del active[state.pair.key]
        if progress is not None:
            progress(1)

    def push_next(state: _Active) -> None:
        """Send what the pair needs next; grade it when nothing is left."""
        for request in pending_requests(state.pair.intent, state.pair.query, state.pair.passage, state.answers):
            if request.step not in state.in_flight:
                state.in_flight.add(request.step)
                queue.put_nowait((state.pair.key, request))
        if not state.in_flight:
            finish(state)

    def feed() -> None:
        """Keep the queue fed: claim more pairs while fewer than two requests per worker wait."""
        nonlocal stopped
        while queue.qsize() < 2 * pool.workers and waiting:
            chunk = [waiting.popleft() for _ in range(min(_CLAIM_CHUNK, len(waiting)))]
            by_key = {p.key: p for p in chunk}
            claimed = store.claim(by_key)
            summary.held_elsewhere += len(chunk) - len(claimed)
            finished_elsewhere = store.judged(claimed)
            for key in claimed:
                if key in finished_elsewhere:
                    continue
                state = store.state(key)
                active[key] = _Active(by_key[key], dict(state.answers), dict(state.attempts),
                                      dict(state.distributions))
                push_next(active[key])
        if not waiting and not active and not stopped:
            stopped = True
            pool.stop(queue)

    def ask(item: tuple[str, Request], server: Server) -> tuple[str, dict[str, Any]]:
        asked[item[0], item[1].step] = answer_format = formats.current(server)
        return "/chat/completions", item[1].body(model, answer_format, logprobs=formats.logprobs(server))

    def refused(item: tuple[str, Request], server: Server, said: str, *, status: int) -> bool:
        return formats.refused(server, asked[item[0], item[1].step], said, status=status)

    def done(item: tuple[str, Request], answer: Any, server: Server) -> None:
        nonlocal last_renewal
        key, request = item
        state = active[key]
        summary.requests += 1
        if on_answer is not None:
            on_answer(summary.requests, "; ".join(f"{s.url}: {s.mode}" for s in pool.servers))
        sent_as = asked.pop((key, request.step))
        try:
            text, tokens = chat_content(answer)
        except ValueError as error:
            raise EndpointError(f"{server.url} answered a chat request, but the answer is {error}; check that this "
                                "base URL is a chat-completions server (it usually ends in /v1).") from None
        try:
            if text is None:  # no text at all (no choice, a refusal): nothing to say about the format
                raise AnswerFault("unparseable", no_text_reason(answer))
            value = parse_answer(text, request.key, request.allowed)
        except AnswerFault as fault:
            if text is not None:
                formats.answered(server, sent_as, readable=fault.kind != "unparseable", why=str(fault))
            setattr(summary, fault.kind, getattr(summary, fault.kind) + 1)
            store.record_answer(key, request.step, raw=text, fault=fault.kind, detail=str(fault), server=server.url,
                                **tokens)
            state.attempts[request.step] = state.attempts.get(request.step, 0) + 1
            if state.attempts[request.step] < MAX_ANSWER_ATTEMPTS:
                queue.put_nowait(item)  # asked again
                return
            logger.debug("%s: no readable answer to %s after %d tries (last: %s); the method has no vote.",
                         server.url, request.step, state.attempts[request.step], fault)
            summary.given_up.setdefault(fault.kind, Counter())[request.step] += 1
            summary.last_given_up[fault.kind] = f"{server.url}: {fault}"
            value = None
        else:
            formats.answered(server, sent_as, readable=True, why="")
            distribution = answer_distribution(answer, request.key, request.allowed)
            if distribution is not None:
                state.distributions[request.step] = distribution
            store.record_answer(key, request.step, raw=text, value=value, server=server.url,
                                distribution=distribution, **tokens)
        state.answers[request.step] = value
        state.in_flight.discard(request.step)
        push_next(state)
        if time.monotonic() - last_renewal > _RENEW_EVERY:
            store.renew_claims()
            last_renewal = time.monotonic()
        feed()

    try:
        feed()
        await pool.serve(queue, ask, done, refused=refused)
    finally:
        try:
            store.release_claims()
        except StoreLockedError:
            pass  # the claims lapse with this process; the error that stopped the job is the one to show
        await pool.close()
        summary.seconds = time.perf_counter() - started
        summary.servers = [server.summary() for server in pool.servers]
        summary.formats = formats.final()
        for url, (known, gives_logprobs) in formats.learned().items():
            with contextlib.suppress(StoreLockedError, ValueError):  # a lesson lost is relearned, never an error
                store.record_format(url, model, known.value, logprobs=gives_logprobs)
    return summary

"""A generation model on loopback, for the builder's tests: it answers any JSON schema from the passage it is given.

:func:`writer` answers the builder's three requests as a small instruction model with structured outputs would:
under ``response_format`` ``json_schema`` the JSON the schema allows (checked with ``jsonschema``; an answer that does
not fit is a 500, a bug to see), under ``json_object`` the keys the prompt names, and under no format the same JSON
(``prose=True``: a sentence instead, as SmolLM2 says when nothing constrains it). Every answer is a function of the
request alone, so a rerun gets the same bytes. The query it writes holds words of its seed passage, so a retriever
finds that passage; ``noise`` is the share of queries written about nothing the corpus holds (the study's knob).
Served by :class:`~judge_servers.JudgeServer`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

import jsonschema
from judge_servers import PROSE_ANSWERS, Respond, answer_format, completion

#: What the builder's user message holds before the passage.
_PARAGRAPH = "Paragraph: "
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
#: What a noisy writer writes about instead of its passage: words no disaster document holds.
_OFF_TOPIC = ["violin", "sonnet", "marzipan", "origami", "tango", "harpsichord", "croquet", "meringue", "sitar",
              "haiku", "ballet", "fresco", "quartet", "souffle", "mosaic", "calligraphy"]


def _hash(*parts: str) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest(), "big")


def _passage(request: dict[str, Any]) -> str:
    user = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return user.removeprefix(_PARAGRAPH)


def _system(request: dict[str, Any]) -> str:
    return next((m["content"] for m in request["messages"] if m["role"] == "system"), "")


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in {"with", "that", "this", "from", "were", "have"}]


def _prompt_keys(system: str) -> list[str]:
    """The keys a query prompt names (``- user_query: ...``), in order."""
    return re.findall(r"^- (\w+):", system, flags=re.MULTILINE)


def _content(request: dict[str, Any], noise: float) -> Any:
    system, passage = _system(request), _passage(request)
    seed = _hash(system, passage)
    if system.startswith("Summarize"):
        return {"summary": "Summary: " + " ".join(passage.split()[:60])}
    words = _words(passage) or ["disaster"]
    if system.startswith("Brainstorm"):
        return [f"Given a question about {words[(seed + i) % len(words)]}, retrieve a passage that answers it."
                for i in range(3)]
    if (seed % 1000) / 1000 < noise:  # written from nothing in the corpus: no passage answers it
        words = _OFF_TOPIC
    picked = [words[(seed >> (4 * i)) % len(words)] for i in range(4)]
    keys = _prompt_keys(system)
    values = {keys[0]: f"What is reported about {' '.join(picked)}?"}
    if len(keys) > 1:
        values[keys[1]] = f"A note on {' and '.join(picked)}: " + " ".join(words[:25]) + "."
    return values


def written(request: dict[str, Any]) -> str:
    """The faithful writer's answer text (JSON, never under a schema's wrapper), for other servers' factories."""
    return json.dumps(_content(request, 0.0))


def writer(*, noise: float = 0.0, prose: bool = False) -> Respond:
    """A faithful generation model (``noise`` 0) or a noisier one, with structured outputs."""

    def respond(request: dict[str, Any]) -> tuple[int, str, bytes]:
        value = _content(request, noise)
        if answer_format(request) == "json_schema":
            spec = request["response_format"]["json_schema"]
            if isinstance(value, list):  # the need list, under the schema's one key
                value = {next(iter(spec["schema"]["properties"])): value}
            jsonschema.validate(value, spec["schema"])  # a ValidationError: the server's 500
        elif prose and answer_format(request) == "plain":
            return 200, "application/json", completion(request, PROSE_ANSWERS[_hash(_passage(request)) % 3])
        return 200, "application/json", completion(request, json.dumps(value))

    return respond


def counting(respond: Respond, seen: Callable[[dict[str, Any]], None]) -> Respond:
    """``respond``, calling ``seen`` with every request first (a test's count of what was asked)."""
    def counted(request: dict[str, Any]) -> tuple[int, str, bytes]:
        seen(request)
        return respond(request)

    return counted


#: A judge prompt's pair: what follows the passage is one of the authors' prompt lines, never the passage's own text.
_PAIR = re.compile(r"(?:Query|Claim|Premise|Sentence A): (?P<query>.*?)\n(?:Passage|Hypothesis|Sentence B): "
                   r"(?P<passage>.*?)\n"
                   r"(?=Consider |Answer:|Output |Exactness: )", re.DOTALL)


def overlap_grade(query: str, passage: str, *, top: int = 3) -> int:
    """A pair's grade by the content words its texts share: 0 to ``top`` (5 for STS)."""
    shared = {w.lower() for w in _words(query)} & {w.lower() for w in _words(passage)}
    return min(top, len(shared))


def overlap_judge(noise: float = 0.0) -> Callable[[dict[str, Any]], str]:
    """A judge grading each pair by :func:`overlap_grade`, answering every step of the authors' three prompts.

    ``noise`` is the share of pairs it grades at random instead (the same grade for a pair every time it is asked).
    """
    from loopback import grade_judge

    def answer(request: dict[str, Any]) -> str:
        user = [m["content"] for m in request["messages"] if m["role"] == "user"][-1]
        found = _PAIR.search(user)
        if found is None:
            raise LookupError(f"no query and passage in {user[:120]!r}")
        query, passage = found["query"], found["passage"]
        top = 5 if "Sentence A:" in user else 3
        seed = _hash(query, passage)
        grade = seed % (top + 1) if (seed >> 8) % 1000 / 1000 < noise else overlap_grade(query, passage, top=top)
        return grade_judge({(query, passage): grade})(request)

    return answer


def cutting_off(prompt_start: str, cut: str) -> Respond:
    """The faithful writer, answering ``cut`` (JSON cut off, as a model out of tokens leaves it) to some prompts.

    Only requests whose system prompt starts with ``prompt_start`` are cut off.
    """
    faithful = writer()

    def respond(request: dict[str, Any]) -> tuple[int, str, bytes]:
        if _system(request).startswith(prompt_start):
            return 200, "application/json", completion(request, cut)
        return faithful(request)

    return respond

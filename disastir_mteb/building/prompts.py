"""The DisastIR authors' query generation as chat requests: information needs, then a query and its passage.

The prompts are data (``task_metadata/query_prompts.json``, the paper's Tables 4-9), named in every stored answer by
:data:`PROMPT_VERSION`. Each request is keyed by everything that shapes its answer (stage, model, prompt version,
inputs), so a rerun finds every answer it already has. Readers are strict: an answer that is not the JSON asked for
is unreadable and asked again, never guessed at.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from disastir_mteb.judging.protocol import AnswerFault, AnswerFormat, chat_body, json_answer
from disastir_mteb.util.digest import short_digest
from disastir_mteb.vocabulary.metadata import read_metadata
from disastir_mteb.vocabulary.taxonomy import Intent

__all__ = ["PROMPT_DIGEST", "PROMPT_VERSION", "SLOTS", "Ask", "GeneratedQuery", "need_ask", "query_ask",
           "read_needs", "read_query", "read_summary", "sample_slots", "summary_ask"]

_TEXTS = read_metadata("query_prompts.json")
#: The prompts' name in every stored answer and in a built benchmark's marker.
PROMPT_VERSION: str = _TEXTS["version"]
#: A digest of every text, pinned with :data:`PROMPT_VERSION` by a test: an edit without a new version fails it.
PROMPT_DIGEST = short_digest(json.dumps([_TEXTS["user"], _TEXTS["summary"], _TEXTS["intents"]],
                                        sort_keys=True).encode("utf-8"))
#: The sampled fields of the query prompts, in the order they are drawn.
SLOTS = ("query_length", "clarity", "difficulty", "num_words")
_INTENTS: Mapping[Intent, Mapping[str, Any]] = {Intent(name): fields for name, fields in _TEXTS["intents"].items()}
_FIELD = re.compile(r"\{([a-z_]+)\}")
_NEED_TOKENS = 400
#: The most information needs a stage-1 answer may list: the paper asks for 20 for QAdoc, "about 3" for the others.
_MOST_NEEDS: Mapping[Intent, int] = {intent: 20 if intent is Intent.QAdoc else 5 for intent in Intent}
_QUERY_TOKENS = 700
_SUMMARY_TOKENS = 450


@dataclass(frozen=True)
class Ask:
    """One chat request of a build; ``key`` is its place in the build store."""

    key: str
    stage: str
    messages: tuple[tuple[str, str], ...]
    name: str
    schema: Mapping[str, Any]
    max_tokens: int

    def body(self, model: str, answer_format: AnswerFormat, *, logprobs: bool = False) -> dict[str, Any]:
        """The chat-completions body, as the judge's requests are made."""
        return chat_body(model, self.messages, max_tokens=self.max_tokens, name=self.name, schema=dict(self.schema),
                         answer_format=answer_format, logprobs=logprobs, top_logprobs=1)


@dataclass(frozen=True)
class GeneratedQuery:
    """A stage-2 answer: the query and, for every intent but QAdoc, the passage written for it."""

    query: str
    passage: str | None


def _fill(template: str, values: Mapping[str, str]) -> str:
    return _FIELD.sub(lambda match: values[match[1]] if match[1] in values else match[0], template)


def _key(*parts: str) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=12).hexdigest()


def _object(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": list(properties),
            "additionalProperties": False}


def _paragraph(passage: str) -> tuple[str, str]:
    return ("user", _fill(_TEXTS["user"], {"passage": passage}))


def sample_slots(intent: Intent, rng: random.Random) -> dict[str, str]:
    """One draw of the query prompt's slots from the values the paper lists for ``intent``."""
    return {slot: rng.choice(_INTENTS[intent]["slots"][slot]) for slot in SLOTS}


def summary_ask(model: str, document: str) -> Ask:
    """QAdoc's stand-in for a whole document: its summary, which the corpus holds and the queries are written from."""
    return Ask(_key("summary", model, PROMPT_VERSION, document), "summary",
               (("system", _TEXTS["summary"]), ("user", document)), "summary",
               _object({"summary": {"type": "string"}}), _SUMMARY_TOKENS)


def need_ask(model: str, intent: Intent, passage: str) -> Ask:
    """Stage 1: a list of information needs (retrieval tasks) that ``passage`` could serve.

    The paper asks for a bare JSON list; a strict schema's root must be an object, so under ``json_schema`` the list
    is asked for as ``{"tasks": [...]}``, and the reader takes either. The schema bounds the list's length: a small
    model under a grammar otherwise lists needs until its tokens run out, and the cut-off answer is unreadable.
    """
    listed = {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": _MOST_NEEDS[intent]}
    return Ask(_key("need", model, PROMPT_VERSION, intent.value, passage), "need",
               (("system", _INTENTS[intent]["need"]), _paragraph(passage)), "tasks", _object({"tasks": listed}),
               _NEED_TOKENS)


def query_ask(model: str, intent: Intent, passage: str, task: str, slots: Mapping[str, str], index: int) -> Ask:
    """Stage 2: the ``index``-th query written from ``passage`` for the need ``task``, with the sampled ``slots``."""
    fields = _INTENTS[intent]
    keys = [fields["query_key"]] + ([fields["passage_key"]] if fields["passage_key"] else [])
    prompt = _fill(fields["query"], {"task": task, **slots})
    key = _key("query", model, PROMPT_VERSION, intent.value, passage, task, json.dumps(dict(slots), sort_keys=True),
               str(index))
    return Ask(key, "query", (("system", prompt), _paragraph(passage)), intent.value.lower(),
               _object({name: {"type": "string"} for name in keys}), _QUERY_TOKENS)


def _text(data: Any, key: str) -> str:
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, str) or not value.strip():
        raise AnswerFault("unparseable", f"no {key!r} text in the answer")
    return value.strip()


def read_summary(text: str | None) -> str:
    """The summary in a summary answer.

    Raises:
        AnswerFault: not one JSON object with a non-empty ``summary`` string.
    """
    return _text(json_answer(text), "summary")


def read_needs(text: str | None) -> list[str]:
    """The information needs of a stage-1 answer: a JSON list of strings, bare or under ``tasks``.

    Raises:
        AnswerFault: not such a list, or no non-empty string in it.
    """
    data = json_answer(text)
    if isinstance(data, dict) and len(data) == 1:
        (data,) = data.values()
    if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
        raise AnswerFault("unparseable", "not a JSON list of strings")
    needs = [item.strip() for item in data if item.strip()]
    if not needs:
        raise AnswerFault("unparseable", "an empty list")
    return needs


def read_query(intent: Intent, text: str | None) -> GeneratedQuery:
    """The query (and passage) of a stage-2 answer, under the keys the intent's prompt names.

    Raises:
        AnswerFault: not one JSON object with those keys as non-empty strings.
    """
    data = json_answer(text)
    fields = _INTENTS[intent]
    passage_key = fields["passage_key"]
    return GeneratedQuery(_text(data, fields["query_key"]), _text(data, passage_key) if passage_key else None)

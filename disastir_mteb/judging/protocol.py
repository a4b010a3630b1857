"""How the DisastIR authors labelled their pool, as requests to a chat model: prompts, steps, parsing, votes.

The paper's Appendix C, with what the authors' labelling code fixes where the paper is silent. The prompts' texts are
data (``task_metadata/judge_prompts.json``), named in every stored judgement by :data:`PROMPT_VERSION`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any

from disastir_mteb.judging.grade_probabilities import TOP_LOGPROBS
from disastir_mteb.util.digest import short_digest
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.instructions import INSTRUCTION_SETS
from disastir_mteb.vocabulary.metadata import read_metadata
from disastir_mteb.vocabulary.taxonomy import MAX_GRADE, Intent

__all__ = [
    "MAX_ANSWER_ATTEMPTS",
    "PROMPT_DIGEST",
    "PROMPT_VERSION",
    "TEMPERATURE",
    "AnswerFault",
    "AnswerFormat",
    "Request",
    "chat_body",
    "chat_content",
    "combine_votes",
    "grade_of",
    "json_answer",
    "judge_query",
    "no_text_reason",
    "pair_key",
    "parse_answer",
    "pending_requests",
    "requests_per_pair",
]

#: The prompts' texts, as data (``task_metadata/judge_prompts.json``) like the tasks' own; this module only uses them.
_TEXTS = read_metadata("judge_prompts.json")
#: The protocol's name in every judgement: the paper's Appendix C prompts as that file holds them.
PROMPT_VERSION: str = _TEXTS["version"]
#: How many times one step is asked when its answers cannot be read (then the step has no vote).
MAX_ANSWER_ATTEMPTS = 3
#: The authors' settings (``configs/gen_config.py``, the raters): deterministic, short JSON answers.
TEMPERATURE = 0.0
_MAX_TOKENS_ZERO_SHOT = 25
_MAX_TOKENS = 30

_SCORE_KEYS = ("final_score", "final_relevance_score", "final_similarity_score", "criterion_score",
               "relevance_score")
_YES_NO = ("Yes", "No")

# --------------------------------------------------------------------------- the prompts (Appendix C)


@dataclass(frozen=True)
class _Prompts:
    """One intent family's prompts (Tables 10-12); ``{name}`` fields are filled in one pass."""

    zero_shot_system: str
    zero_shot_user: str
    presence: str
    criterion_system: str | None
    criterion_user: str
    final_yes_system: str
    final_yes_user: str
    final_no_system: str
    final_no_user: str
    multi_criterion_system: str
    multi_criterion_user: str
    multi_final_system: str
    multi_final_user: str
    criteria: Mapping[str, str]  # Exactness, Coverage, Topicality, Contextual Fit -> definition


_FAMILIES = {name: _Prompts(**{**fields, "criteria": MappingProxyType(fields["criteria"])})
             for name, fields in _TEXTS["families"].items()}
_QA, _FC, _NLI = (_FAMILIES[name] for name in ("QA", "FC", "NLI"))
#: Table 13: STS, zero-shot only, 0-5.
_STS_SYSTEM: str = _TEXTS["sts"]["system"]
_STS_USER: str = _TEXTS["sts"]["user"]
_PROMPTS: Mapping[Intent, _Prompts] = MappingProxyType(
    {Intent(intent): _FAMILIES[family] for intent, family in _TEXTS["family_of_intent"].items()})
#: The chain of thought's criteria after each answer to its first question (the authors' ``rate_cot``).
_COT_CRITERIA = MappingProxyType({answer: tuple(names) for answer, names in _TEXTS["cot_criteria"].items()})


def _prompt_texts() -> list[str]:
    texts = [_STS_SYSTEM, _STS_USER]
    for prompts in (_QA, _FC, _NLI):
        texts += [str(getattr(prompts, name)) for name in prompts.__dataclass_fields__ if name != "criteria"]
        texts += [f"{name}={definition}" for name, definition in prompts.criteria.items()]
    return texts


#: A digest of every prompt text: a test pins it with :data:`PROMPT_VERSION`, so an edit must bump the version.
PROMPT_DIGEST = short_digest(json.dumps(_prompt_texts()).encode("utf-8"))

# --------------------------------------------------------------------------- requests

_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z_ ]*)\}")


def _fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with its ``{name}`` fields replaced in one pass, so braces in a query or passage stay text."""
    def replace(found: re.Match[str]) -> str:
        token = found.group(0)
        if token in ("{{", "}}"):
            return token[0]
        return values[found.group(1)]

    return _FIELD.sub(replace, template)


class AnswerFormat(str, Enum):
    """How a request asks for its answer's shape (its ``response_format``), most constrained first.

    A server honouring ``json_schema`` can only answer ``{"<key>": <an allowed value>}``; ``json_object`` asks for any
    JSON object (the authors' setting); ``plain`` sends none. The reader is the same for all three.
    """

    JSON_SCHEMA = "json_schema"
    JSON_OBJECT = "json_object"
    PLAIN = "plain"

    @property
    def fallback(self) -> AnswerFormat | None:
        """The next, less constrained format, for a server that refuses or ignores this one (None after plain)."""
        order = list(AnswerFormat)
        position = order.index(self)
        return order[position + 1] if position + 1 < len(order) else None

    def describe(self) -> str:
        """``response_format json_schema``, ..., ``plain instructions (no response_format)``: for summaries."""
        if self is AnswerFormat.PLAIN:
            return "plain instructions (no response_format)"
        return f"response_format {self.value}"


@dataclass(frozen=True)
class Request:
    """One chat request of the protocol for one pair; its ``step`` (``cot/presence``, ...) keys the answer."""

    step: str
    messages: tuple[tuple[str, str], ...]
    key: str
    allowed: tuple[Any, ...]
    max_tokens: int

    def schema(self) -> dict[str, Any]:
        """The JSON schema of this step's answer: one object holding only :attr:`key`, an ``enum`` of :attr:`allowed`.

        An enum because not every engine's strict mode accepts ``minimum``/``maximum``; it says the branch too (2 or 3).
        """
        kind = "integer" if all(isinstance(a, int) and not isinstance(a, bool) for a in self.allowed) else "string"
        return {"type": "object", "properties": {self.key: {"type": kind, "enum": list(self.allowed)}},
                "required": [self.key], "additionalProperties": False}

    def body(self, model: str, answer_format: AnswerFormat = AnswerFormat.JSON_SCHEMA, *,
             logprobs: bool = False) -> dict[str, Any]:
        """The chat-completions request body for ``model``, the same online and in a Batch API file."""
        return chat_body(model, self.messages, max_tokens=self.max_tokens, name=self.key, schema=self.schema(),
                         answer_format=answer_format, logprobs=logprobs)


def chat_body(model: str, messages: Sequence[tuple[str, str]], *, max_tokens: int, name: str, schema: dict[str, Any],
              answer_format: AnswerFormat, logprobs: bool = False, top_logprobs: int = TOP_LOGPROBS) -> dict[str, Any]:
    """A chat-completions body at temperature 0, its answer's ``schema`` asked for as ``answer_format`` says.

    ``json_schema``: strict, named ``name``; ``json_object``: any object; ``plain``: the prompt's own words alone.
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": role, "content": content} for role, content in messages],
        "temperature": TEMPERATURE,
        "max_tokens": max_tokens,
    }
    if logprobs:
        body.update(logprobs=True, top_logprobs=top_logprobs)
    if answer_format is AnswerFormat.JSON_SCHEMA:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": name, "strict": True,
                                                                          "schema": schema}}
    elif answer_format is AnswerFormat.JSON_OBJECT:
        body["response_format"] = {"type": "json_object"}
    return body


def judge_query(intent: Intent, query: str) -> str:
    """The query as the judge reads it: the intent's ``disastir`` instruction, a space, the query (stripped)."""
    prefix = (INSTRUCTION_SETS["disastir"] or {}).get(intent, "")
    return f"{prefix} {query}".strip() if prefix else query.strip()


def _request(step: str, system: str | None, user: str, values: Mapping[str, str], key: str,
             allowed: Sequence[Any], max_tokens: int = _MAX_TOKENS) -> Request:
    messages = (("system", _fill(system, values)),) if system is not None else ()
    return Request(step, (*messages, ("user", _fill(user, values))), key, tuple(allowed), max_tokens)


def _scale(intent: Intent) -> tuple[int, ...]:
    return tuple(range(MAX_GRADE[intent] + 1))


def pending_requests(intent: Intent, query: str, passage: str, answers: Mapping[str, Any]) -> list[Request]:
    """The requests a pair needs next: each one whose inputs are known and whose step is not in ``answers``.

    ``answers`` maps each step answered so far to its value, None for a step given up on. Empty when the pair is
    complete (then :func:`grade_of` gives its grade).
    """
    values = {"query": judge_query(intent, query), "passage": passage}
    if intent is Intent.STS:
        wanted = [_request("zero_shot", _STS_SYSTEM, _STS_USER, values, "final_similarity_score", _scale(intent),
                           _MAX_TOKENS_ZERO_SHOT)]
        return [r for r in wanted if r.step not in answers]
    p = _PROMPTS[intent]
    scale = _scale(intent)
    wanted = [
        _request("zero_shot", p.zero_shot_system, p.zero_shot_user, values, "final_score", scale,
                 _MAX_TOKENS_ZERO_SHOT),
        _request("cot/presence", None, p.presence, values, "has_answer", _YES_NO),
    ]
    for name, definition in p.criteria.items():
        wanted.append(_request(f"multi/criterion/{name}", p.multi_criterion_system, p.multi_criterion_user,
                               {**values, "criterion_name": name, "criterion_definition": definition},
                               "criterion_score", scale))
    presence = answers.get("cot/presence")
    if presence in _COT_CRITERIA:
        for name in _COT_CRITERIA[presence]:
            wanted.append(_request(f"cot/criterion/{name}", p.criterion_system, p.criterion_user,
                                   {**values, "criterion_name": name, "criterion_definition": p.criteria[name]},
                                   "criterion_score", scale))
        if presence == "Yes":
            wanted.append(_request("cot/final", p.final_yes_system, p.final_yes_user, values, "relevance_score",
                                   (2, 3)))
        else:
            wanted.append(_request("cot/final", p.final_no_system, p.final_no_user, values, "relevance_score",
                                   (0, 1)))
    criteria_steps = [f"multi/criterion/{name}" for name in p.criteria]
    if all(step in answers for step in criteria_steps):
        subs = {name: ("N/A" if answers[f"multi/criterion/{name}"] is None else str(answers[f"multi/criterion/{name}"]))
                for name in p.criteria}
        wanted.append(_request("multi/final", p.multi_final_system, p.multi_final_user, {**values, **subs},
                               "final_relevance_score", scale))
    return [r for r in wanted if r.step not in answers]


def requests_per_pair(intent: Intent) -> int:
    """How many requests one pair costs when every answer is readable: 1 for STS, 10 otherwise."""
    if intent is Intent.STS:
        return 1
    p = _PROMPTS[intent]
    return 1 + (1 + 2 + 1) + (len(p.criteria) + 1)


# --------------------------------------------------------------------------- answers and votes


class AnswerFault(ValueError):
    """An answer that cannot be used: ``kind`` is ``unparseable`` or ``out_of_range``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


_FENCE = re.compile(r"\A```(?:json)?\s*(?P<body>[\s\S]*?)\s*```\Z")


def json_answer(text: str | None) -> Any:
    """The one JSON value a reply holds, bare or fenced in ```json.

    Raises:
        AnswerFault: ``unparseable``: empty, or not one JSON value.
    """
    body = (text or "").strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced["body"]
    try:
        return json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        raise AnswerFault("unparseable", f"not one JSON object: {_clip(text)}") from None


def parse_answer(text: str | None, key: str, allowed: Sequence[Any]) -> Any:
    """The value of ``key`` in a reply that is one JSON object (or one fenced in ```json), checked against ``allowed``.

    Raises:
        AnswerFault: ``unparseable`` (empty, not one JSON object, key missing, wrong type) or ``out_of_range``.
    """
    data = json_answer(text)
    if not isinstance(data, dict) or key not in data:
        raise AnswerFault("unparseable", f"no {key!r} in {_clip(text)}")
    value = data[key]
    wants_int = all(isinstance(a, int) for a in allowed)
    if wants_int and (not isinstance(value, int) or isinstance(value, bool)):
        raise AnswerFault("unparseable", f"{key} is {value!r}, not an integer")
    if not wants_int and not isinstance(value, str):
        raise AnswerFault("unparseable", f"{key} is {value!r}, not one of {list(allowed)}")
    if value not in allowed:
        raise AnswerFault("out_of_range", f"{key}={value!r} is not one of {list(allowed)}")
    return value


def chat_content(answer: Any) -> tuple[str | None, dict[str, int | None]]:
    """The reply text and token counts of a chat-completions answer, online or in a Batch file (None where absent).

    A missing text (no choice, a refusal) is an unreadable answer like any other, kept and asked again.

    Raises:
        ValueError: the body is not a chat completion at all; the message reads on after "the answer is".
    """
    if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list):
        raise InvalidInput("not a chat completion (no 'choices' list): "
                           f"{_clip(json.dumps(answer, ensure_ascii=False))}")
    choices = answer["choices"]
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = first.get("message") if isinstance(first.get("message"), dict) else {}
    text = message.get("content")
    if isinstance(text, list):  # content as a list of parts (OpenAI's shape for multi-part messages): their text
        parts = [part.get("text") for part in text if isinstance(part, dict) and part.get("type") == "text"]
        text = "".join(part for part in parts if isinstance(part, str)) if parts else None
    usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
    tokens = {name: count if isinstance(count := usage.get(name), int) and not isinstance(count, bool) else None
              for name in ("prompt_tokens", "completion_tokens")}
    return (text if isinstance(text, str) else None), tokens


def no_text_reason(answer: Any) -> str:
    """Why a chat completion holds no answer text (no choice, a refusal, an empty message): what the server sent."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not choices:
        return "the answer holds no choice (choices: [])"
    first = choices[0] if isinstance(choices[0], dict) else {}
    message = first.get("message") if isinstance(first.get("message"), dict) else {}
    if isinstance(message.get("refusal"), str) and message["refusal"].strip():
        return f"the model refused to answer: {_clip(message['refusal'])}"
    return f"the answer's message holds no text (content {message.get('content')!r:.40}, finish_reason " \
           f"{first.get('finish_reason')!r})"


def _clip(text: str | None, width: int = 80) -> str:
    shown = repr(text if text is not None else "")
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def combine_votes(votes: Sequence[int | None]) -> float | int | None:
    """The authors' combination: the value given most often when exactly one is, else the mean (2 decimals).

    Examples:
        >>> combine_votes([2, 2, 3]), combine_votes([0, 1, 3]), combine_votes([None, 1, 2]), combine_votes([None])
        (2, 1.33, 1.5, None)
    """
    values = [v for v in votes if isinstance(v, int | float) and not isinstance(v, bool)]
    if not values:
        return None
    mean = round(sum(values) / len(values), 2)
    if len(values) == 1:
        return values[0]
    counts = Counter(values)
    mode, times = counts.most_common(1)[0]
    return mode if list(counts.values()).count(times) == 1 else mean


def grade_of(intent: Intent, answers: Mapping[str, Any]) -> tuple[float | int | None, dict[str, Any]]:
    """A complete pair's grade (None when no method has a vote) and its votes by method."""
    if intent is Intent.STS:
        votes = {"zero_shot": answers.get("zero_shot")}
        return votes["zero_shot"], votes
    votes = {"multi": answers.get("multi/final"),
             "cot": answers.get("cot/final") if answers.get("cot/presence") in _COT_CRITERIA else None,
             "zero_shot": answers.get("zero_shot")}
    return combine_votes([votes["multi"], votes["cot"], votes["zero_shot"]]), votes


def pair_key(intent: Intent | str, query: str, passage: str, judge_model: str,
             prompt_version: str = PROMPT_VERSION) -> str:
    """The store's key of one judgement: a digest of intent, query text, passage text, judge model and version."""
    fields = [str(getattr(intent, "value", intent)), query, passage, judge_model, prompt_version]
    return short_digest(json.dumps(fields, ensure_ascii=False).encode("utf-8"))


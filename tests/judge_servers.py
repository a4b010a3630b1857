"""Chat servers on loopback that treat structured outputs and streaming as real engines do (issue 31).

:class:`~loopback.LoopbackServer` answers every chat request with one well-formed
completion; the servers people run do not. This module holds the other behaviours, as test code (never in the
wheel): each :class:`JudgeServer` is a real HTTP server on 127.0.0.1 whose answer to a chat request is chosen by
a ``respond(request) -> (status, content type, body)`` function, built by one of these factories:

- :func:`constrained`: a small model behind a server with structured outputs (vLLM's guided decoding,
  llama.cpp's grammar): under ``response_format`` ``json_schema`` its answer is the JSON the schema allows
  (checked against that schema: a schema that does not fit the prompt's question is a 500, a bug to see); under
  anything else it answers prose, as SmolLM2-135M did (``Yes``, ``Based on the provided passage...``).
- :func:`refuses_schema`: a server without ``json_schema`` (an older engine, a model OpenAI serves without
  structured outputs): a 400 in OpenAI's shape naming ``response_format``, and a JSON answer otherwise.
- :func:`prose`: a server that ignores ``response_format`` (``transformers serve``): prose every time.
- :func:`streaming`: ``transformers serve``'s transport: every answer a ``text/event-stream`` of
  ``chat.completion.chunk`` events (role first, then the text in pieces, then ``finish_reason``; no
  ``[DONE]``), whatever ``stream`` says.
- :func:`fixed`: the same bytes for every request (a malformed stream, a bare string, a list).

Every request body is kept (:attr:`JudgeServer.requests`) so a test can say which ``response_format`` each
request carried. Connections close after each answer (HTTP/1.0), so closing a server leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from loopback import QuietListener, grade_judge

from disastir_mteb.judging.store import JudgementStore

#: ``respond(request) -> (HTTP status, Content-Type, body)``.
Respond = Callable[[dict[str, Any]], tuple[int, str, bytes]]
#: ``answer(request) -> the assistant's text`` (e.g. :func:`~loopback.grade_judge`).
Answer = Callable[[dict[str, Any]], str]

#: What a small model says when nothing constrains it (seen from SmolLM2-135M-Instruct through transformers serve).
PROSE_ANSWERS = ("Yes", "Based on the provided passage, the passage is relevant to the query.",
                 "The score is 2 because the passage mentions the event.")


class JudgeServer:
    """A chat-completions server on ``127.0.0.1`` whose answers ``respond`` chooses; ``with`` starts and stops it."""

    def __init__(self, respond: Respond, *, model: str = "judge-model") -> None:
        self.respond = respond
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd: QuietListener | None = None
        self._url = ""

    def __enter__(self) -> JudgeServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, "application/json", json.dumps({"object": "list", "data": [
                        {"id": server.model, "object": "model", "created": 0, "owned_by": "judge-servers"}]}).encode())
                else:
                    self._send(404, "application/json", _error(f"no route GET {self.path}", None))

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                if self.path != "/v1/chat/completions":
                    return self._send(404, "application/json", _error(f"no route POST {self.path}", None))
                with server._lock:
                    server.requests.append(request)
                try:
                    status, content_type, body = server.respond(request)
                except Exception as error:  # the test's own function failed: a 500 saying so
                    status, content_type, body = 500, "application/json", _error(f"respond failed: {error!r}", None)
                self._send(status, content_type, body)

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = QuietListener(("127.0.0.1", 0), Handler)
        self._url = f"http://127.0.0.1:{self._httpd.server_port}/v1"
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (kept after the server is closed, for the messages that name it)."""
        if not self._url:
            raise RuntimeError("the judge server is not started; use a with block")
        return self._url

    def formats(self) -> list[str]:
        """The ``response_format`` type of each request received, in order (``plain`` for none)."""
        with self._lock:
            return [(request.get("response_format") or {}).get("type", "plain") for request in self.requests]


def answer_format(request: dict[str, Any]) -> str:
    """The request's ``response_format`` type: ``json_schema``, ``json_object``, or ``plain`` when it has none."""
    return (request.get("response_format") or {}).get("type", "plain")


def completion(request: dict[str, Any], content: str) -> bytes:
    """A ``chat.completion`` body in OpenAI's shape whose answer is ``content``."""
    return json.dumps({
        "id": "chatcmpl-judge-servers", "object": "chat.completion", "created": int(time.time()),
        "model": request.get("model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107}}).encode()


def event_stream(request: dict[str, Any], content: str, *, usage: bool = False, done: bool = False) -> bytes:
    """``content`` as ``transformers serve`` streams it: a role chunk, 3-character pieces, a ``finish_reason`` chunk.

    With ``usage`` a last chunk carries the token counts with no choice (OpenAI's ``stream_options``
    shape), with ``done`` the stream ends in ``data: [DONE]`` (OpenAI, vLLM); transformers serve sends neither.
    """
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice: dict[str, Any] = {"delta": delta, "index": 0}
        if finish is not None:
            choice["finish_reason"] = finish
        return {"id": "req_0", "choices": [choice], "created": int(time.time()), "model": request.get("model"),
                "object": "chat.completion.chunk", "system_fingerprint": ""}

    chunks = [chunk({"role": "assistant"})]
    chunks += [chunk({"content": content[start:start + 3]}) for start in range(0, len(content), 3)]
    chunks.append(chunk({}, "stop"))
    if usage:
        chunks.append({"id": "req_0", "choices": [], "object": "chat.completion.chunk",
                       "usage": {"prompt_tokens": 321, "completion_tokens": 9, "total_tokens": 330}})
    events = [f"data: {json.dumps(item, separators=(',', ':'))}\n\n" for item in chunks]
    if done:
        events.append("data: [DONE]\n\n")
    return "".join(events).encode()


def _error(message: str, param: str | None, kind: str = "invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": param, "code": None}}).encode()


def _prose(request: dict[str, Any]) -> str:
    """One of :data:`PROSE_ANSWERS`, the same for the same request (so a test can repeat itself)."""
    text = json.dumps(request.get("messages"), sort_keys=True)
    return PROSE_ANSWERS[sum(map(ord, text)) % len(PROSE_ANSWERS)]


def _fits(content: str, schema: dict[str, Any]) -> bool:
    """Whether ``content`` is JSON that ``schema`` (one object, one required key with an ``enum``) allows."""
    try:
        value = json.loads(content)
    except ValueError:
        return False
    [key] = schema["required"]
    return (isinstance(value, dict) and set(value) == {key} and value[key] in schema["properties"][key]["enum"]
            and schema.get("additionalProperties") is False)


def constrained(answer: Answer) -> Respond:
    """JSON that fits the schema under ``json_schema`` (a 500 when ``answer`` does not fit it); prose otherwise."""
    def respond(request: dict[str, Any]) -> tuple[int, str, bytes]:
        if answer_format(request) != "json_schema":
            return 200, "application/json", completion(request, _prose(request))
        spec = request["response_format"]["json_schema"]
        content = answer(request)
        if spec.get("strict") is not True or not _fits(content, spec["schema"]):
            raise ValueError(f"the answer {content!r} does not fit the schema {spec!r}")
        return 200, "application/json", completion(request, content)

    return respond


def _refusing(answer: Answer, refused: Callable[[dict[str, Any]], bool], status: int, content_type: str,
              body: bytes) -> Respond:
    """``status`` with ``body`` to every request ``refused`` picks; a completion of ``answer`` to the others."""
    def respond(request: dict[str, Any]) -> tuple[int, str, bytes]:
        if refused(request):
            return status, content_type, body
        return 200, "application/json", completion(request, answer(request))

    return respond


def _schema(request: dict[str, Any]) -> bool:
    return answer_format(request) == "json_schema"


def refuses_schema(answer: Answer) -> Respond:
    """A 400 naming ``response_format`` to every ``json_schema`` request (OpenAI's words); ``answer`` otherwise."""
    return _refusing(answer, _schema, 400, "application/json", _error(
        "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
        "response_format"))


#: How an answer is cut into tokens: ``{"``, ``final``, ``_score``, ``":``, `` ``, ``2``, ``}`` (the grade a token of
#: its own), or with ``merged`` the space joined to the value (`` 2``, `` "Yes``), as some tokenizers do.
_TOKENS = re.compile(r'\{"|"\}|":| "|[A-Za-z]+|_[A-Za-z]+|\d+|\s+|.')
_MERGED = re.compile(r'\{"|"\}|":| "?[A-Za-z]+| \d+|_[A-Za-z]+|\d+|\s+|.')


def token_logprobs(content: str, probabilities: dict[Any, float], *, merged: bool = False) -> dict[str, Any]:
    """``choices[0].logprobs`` as OpenAI, vLLM and llama.cpp write it for ``content``: every token with its
    ``top_logprobs``; at the value's token, one alternative per grade of ``probabilities`` (value -> probability,
    spelt as the token would spell it), elsewhere the token alone at probability 1."""
    value = json.loads(content)
    [(key, chosen)] = value.items()
    tokens = (_MERGED if merged else _TOKENS).findall(content)
    entries, offset = [], 0
    start = content.index(json.dumps(chosen), content.index(f'"{key}"') + len(key) + 2)
    start += 1 if isinstance(chosen, str) else 0  # the value's first character, inside its quotes
    for token in tokens:
        if offset <= start < offset + len(token):
            prefix = token[:start - offset]
            alternatives = sorted(((f"{prefix}{option}", p) for option, p in probabilities.items() if p > 0),
                                  key=lambda item: -item[1])
        else:
            alternatives = [(token, 1.0)]
        chosen_logprob = next((math.log(p) for text, p in alternatives if text == token), math.log(1e-6))
        entries.append({"id": 0, "token": token, "bytes": list(token.encode()), "logprob": chosen_logprob,
                        "top_logprobs": [{"id": 0, "token": text, "bytes": list(text.encode()),
                                          "logprob": math.log(p)} for text, p in alternatives]})
        offset += len(token)
    return {"content": entries}


def with_logprobs(answer: Answer, probabilities: Callable[[dict[str, Any], Any], dict[Any, float]], *,
                  merged: bool = False) -> Respond:
    """:func:`constrained`, and where the request asks for ``logprobs`` its answer carries them
    (:func:`token_logprobs`): ``probabilities(request, chosen value)`` gives the grade token's alternatives."""
    inner = constrained(answer)

    def respond(request: dict[str, Any]) -> tuple[int, str, bytes]:
        status, content_type, body = inner(request)
        if status != 200 or not request.get("logprobs") or answer_format(request) != "json_schema":
            return status, content_type, body
        reply = json.loads(body)
        content = reply["choices"][0]["message"]["content"]
        chosen = next(iter(json.loads(content).values()))
        reply["choices"][0]["logprobs"] = token_logprobs(content, probabilities(request, chosen), merged=merged)
        return status, content_type, json.dumps(reply).encode()

    return respond


def confident(confidence: float) -> Callable[[dict[str, Any], Any], dict[Any, float]]:
    """The chosen value at ``confidence``, the rest spread evenly over the schema's other allowed values."""
    def probabilities(request: dict[str, Any], chosen: Any) -> dict[Any, float]:
        schema = request["response_format"]["json_schema"]["schema"]
        [key] = schema["required"]
        others = [value for value in schema["properties"][key]["enum"] if value != chosen]
        return {chosen: confidence, **{value: (1 - confidence) / len(others) for value in others}}

    return probabilities


def refuses_logprobs(answer: Answer) -> Respond:
    """A 400 naming ``logprobs`` to every request asking for them (a model served without them); ``answer`` else."""
    return _refusing(answer, lambda request: bool(request.get("logprobs")), 400, "application/json",
                     _error("This model does not support 'logprobs'.", "logprobs"))


def bare_422(answer: Answer) -> Respond:
    """A 422 with an empty body to every ``json_schema`` request (a validator that names nothing); ``answer`` else."""
    return _refusing(answer, _schema, 422, "application/json", b"{}")


def fails_schema(answer: Answer) -> Respond:
    """A 500 naming nothing to every ``json_schema`` request (an engine whose grammar crashes); ``answer`` else."""
    return _refusing(answer, _schema, 500, "text/plain", b"Internal Server Error")


def reshaped(answer: Answer, shape: str) -> Respond:
    """``answer`` in another shape: ``parts`` (content as a list of text parts), ``no choice`` (``choices: []``) or
    ``refusal`` (``content: null`` and a ``refusal`` text, as OpenAI answers what its model declines)."""
    def respond(request: dict[str, Any]) -> tuple[int, str, bytes]:
        reply = json.loads(completion(request, answer(request)))
        message = reply["choices"][0]["message"]
        if shape == "parts":
            text = message["content"]
            message["content"] = [{"type": "text", "text": text[:5]}, {"type": "text", "text": text[5:]}]
        elif shape == "no choice":
            reply["choices"] = []
        else:
            message.update(content=None, refusal="I can't help with rating this passage.")
        return 200, "application/json", json.dumps(reply).encode()

    return respond


def refuses(message: str) -> Respond:
    """A 400 with ``message`` to every request (a refusal that has nothing to do with the answer's format)."""
    def respond(request: dict[str, Any]) -> tuple[int, str, bytes]:
        return 400, "application/json", _error(message, "messages")

    return respond


def prose() -> Respond:
    """Prose to every request, whatever its ``response_format``: a server that ignores it."""
    def respond(request: dict[str, Any]) -> tuple[int, str, bytes]:
        return 200, "application/json", completion(request, _prose(request))

    return respond


def streaming(answer: Answer, *, usage: bool = False, done: bool = False) -> Respond:
    """Every answer as ``transformers serve`` sends it: server-sent events, ``response_format`` ignored."""
    def respond(request: dict[str, Any]) -> tuple[int, str, bytes]:
        return 200, "text/event-stream", event_stream(request, answer(request), usage=usage, done=done)

    return respond


def fixed(body: bytes, content_type: str = "application/json") -> Respond:
    """The same 200 body to every request."""
    def respond(request: dict[str, Any]) -> tuple[int, str, bytes]:
        return 200, content_type, body

    return respond


# -- what the judge tests ask and expect --------------------------------------------------------------------------

#: The judge model the judge tests' servers serve.
JUDGE_MODEL = "judge-model"


def true_grade(query: str, passage: str, top: int = 5) -> int:
    """The grade a well-behaved judge gives a pair in the judge tests: a digest of its texts, 0..top."""
    return int(hashlib.sha256(f"{query}\x00{passage}".encode()).hexdigest(), 16) % (top + 1)


def judge_of(holes: list[Any]) -> Callable[[dict[str, Any]], str]:
    """A loopback answer function giving each of ``holes`` its :func:`true_grade`."""
    return grade_judge({(h.query, h.passage): true_grade(h.query, h.passage) for h in holes})


def expected(holes: list[Any]) -> dict[tuple[str, str], float]:
    """The grades a job with :func:`judge_of` must store for ``holes``."""
    return {(h.query, h.passage): float(true_grade(h.query, h.passage)) for h in holes}


def grades_in(store: Path) -> dict[tuple[str, str], float]:
    """The grades :data:`JUDGE_MODEL` left in a judgement store, by (query, passage)."""
    with JudgementStore(store) as opened:
        return {(j.query, j.passage): j.grade for j in opened.judgements(judge_model=JUDGE_MODEL)}

"""A small real OpenAI-compatible server on loopback: what the tests and benchmarks talk to.

Test code, not shipped in the wheel: tests import it as ``from loopback import ...`` (pytest puts ``tests/``
on ``sys.path``), benchmarks put ``tests/`` on ``sys.path`` first.

The judge (issue 23) and the embedding-server encoder (issue 24) are tested against a real HTTP server
through the real ``openai`` client, never a mocked client: retries, ``Retry-After``, timeouts, keep-alive
and concurrency are exactly the parts a mock would get wrong. This module is that server, built on the
standard library only (:class:`http.server.ThreadingHTTPServer`, HTTP/1.1 with exact ``Content-Length`` so
the client keeps its connections alive), bound to ``127.0.0.1`` on an ephemeral port.

Routes (all answers and errors in OpenAI's shapes, errors as ``{"error": {"message", "type", "param",
"code"}}``):

- ``POST /v1/chat/completions``: a ``chat.completion`` whose content is ``answer(request_json)``, the
  pluggable answer function (default: :func:`grade_judge` with no grades, which answers grade 0).
- ``POST /v1/embeddings``: ``embed(texts)`` in the embeddings response shape, as floats or, when the
  client asks (the ``openai`` client does by default), as base64 of little-endian float32; a 404 error
  when the server was given no ``embed`` function.
- ``GET /v1/models`` and ``GET /v1/models/{name}``: the one served model name.
- ``GET /loopback/stats`` and ``POST /loopback/control``: the counters and the fault controls below, for a
  server running in its own process (:class:`RemoteLoopback`).

Faults are scripted per server and changed at run time from any thread: a fixed latency per request
(the benchmark's 50 ms), a queue of :class:`Fault` values each spent on the next request it applies to
(HTTP 429 with or without ``Retry-After``, or with any header as given; 429 for an exhausted quota; 401;
500; a hang past the client's timeout; a closed socket; a 200 of any bytes, not JSON or not UTF-8; a 200 sent
one byte at a time and never finished; a malformed or out-of-range chat answer; a wrong or shuffled embedding
answer; an answer that echoes the request's headers, key included, as careless servers do), and a dead server
that fails every request. Counters record the requests per path, the faults per kind with when each was sent, and every
answered request with its body.

The server runs in a background thread of the test process (``with LoopbackServer(...) as server``) or
as its own process, so that a benchmark measures the client's CPU apart from the server's and a test
can kill a client while the server lives::

    PYTHONPATH=tests python -m loopback --port 0 --latency 0.05 [--grades QRELS.json]
        [--answer MODULE:FUNCTION] [--embed MODULE:FUNCTION] [--model NAME]

which prints its base URL (``http://127.0.0.1:PORT/v1``) as the first line of standard output and serves
until it is terminated; :class:`LoopbackProcess` starts one and reads that line.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import importlib
import itertools
import json
import logging
import math
import os
import re
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any

logger = logging.getLogger(__name__)

__all__ = [
    "ANSWER_KEYS",
    "DEFAULT_MODEL",
    "AnswerFunction",
    "AnsweredRequest",
    "EmbedFunction",
    "Fault",
    "FaultEvent",
    "FaultKind",
    "LoopbackProcess",
    "LoopbackServer",
    "LoopbackStats",
    "MemoisedEncoder",
    "RemoteLoopback",
    "grade_judge",
    "main",
]

#: The model name a server lists and answers with unless given another.
DEFAULT_MODEL = "loopback-judge"

#: The JSON keys a judging prompt may ask for, the contract between the prompts and :func:`grade_judge`:
#: the score keys are answered with the grade, ``has_answer`` with "Yes" (grade >= 2) or "No".
ANSWER_KEYS = ("final_relevance_score", "final_similarity_score", "final_score", "criterion_score",
               "relevance_score", "has_answer")

#: ``answer(request_json) -> content``: the assistant's text for one chat-completions request body.
AnswerFunction = Callable[[dict[str, Any]], str]
#: ``embed(texts) -> vectors``: one vector per text, in order.
EmbedFunction = Callable[[list[str]], Sequence[Sequence[float]]]

_CHAT = "/v1/chat/completions"
_EMBEDDINGS = "/v1/embeddings"
_MODELS = "/v1/models"
_STATS = "/loopback/stats"
_MODULE = "loopback"  # what LoopbackProcess runs with -m, this folder on the child's PYTHONPATH
_CONTROL = "/loopback/control"

# Longer keys first, so that the alternation takes "final_relevance_score" whole, never its tail.
_KEY_PATTERN = re.compile("|".join(re.escape(key) for key in sorted(ANSWER_KEYS, key=len, reverse=True)))
_BRANCH_PATTERN = re.compile(r"(2[ _]or[ _]3)|(0[ _]or[ _]1)")
_OUT_OF_RANGE_SCORE = 99  # beyond every scale the authors use (0-3, STS 0-5)


class FaultKind(str, Enum):
    """What a scripted fault does to the request it is spent on.

    ``rate_limit``, ``quota``, ``unauthorized``, ``server_error``, ``hang``, ``close``, ``raw`` and ``trickle``
    apply to chat and embeddings requests alike (and to ``GET /v1/models`` when queued for that path);
    ``malformed`` and ``out_of_range`` to chat requests only; ``wrong_dimension``, ``wrong_count``,
    ``non_finite`` and ``shuffled`` to embeddings requests only. A queued fault waits for the first
    request it applies to.
    """

    RATE_LIMIT = "rate_limit"  # HTTP 429 with a Retry-After header (none when Fault.retry_after is None)
    QUOTA = "quota"  # HTTP 429 "insufficient_quota", OpenAI's answer to an account without credit: no Retry-After
    UNAUTHORIZED = "unauthorized"  # HTTP 401 "invalid_api_key"
    SERVER_ERROR = "server_error"  # HTTP 500
    HANG = "hang"  # no answer for Fault.seconds (past the client's timeout), then the normal answer
    CLOSE = "close"  # the socket is shut without an answer
    RAW = "raw"  # a 200 answer whose body is Fault.body, sent as given (not JSON, not UTF-8, HTML, megabytes)
    TRICKLE = "trickle"  # a 200 answer promising a body, sent one space every 0.1 s for Fault.seconds, never finished
    MALFORMED = "malformed"  # a chat answer that is not JSON
    OUT_OF_RANGE = "out_of_range"  # a chat answer outside every scale: 99, or has_answer "Maybe"
    WRONG_DIMENSION = "wrong_dimension"  # the first vector loses its last coordinate
    WRONG_COUNT = "wrong_count"  # the last vector is missing
    NON_FINITE = "non_finite"  # the first coordinate of the first vector is NaN
    SHUFFLED = "shuffled"  # vectors listed in reverse order, each keeping its true "index"


_ANY_ROUTE = frozenset({FaultKind.RATE_LIMIT, FaultKind.QUOTA, FaultKind.UNAUTHORIZED, FaultKind.SERVER_ERROR,
                        FaultKind.HANG, FaultKind.CLOSE, FaultKind.RAW, FaultKind.TRICKLE})
#: The faults answered with an error status, whose message carries the request's headers when the fault echoes.
_ERRORS = frozenset({FaultKind.RATE_LIMIT, FaultKind.QUOTA, FaultKind.UNAUTHORIZED, FaultKind.SERVER_ERROR})
_APPLIES = {
    _CHAT: _ANY_ROUTE | {FaultKind.MALFORMED, FaultKind.OUT_OF_RANGE},
    _EMBEDDINGS: _ANY_ROUTE | {FaultKind.WRONG_DIMENSION, FaultKind.WRONG_COUNT, FaultKind.NON_FINITE,
                               FaultKind.SHUFFLED},
}


@dataclasses.dataclass(frozen=True)
class Fault:
    """One scripted fault: what to do to one request instead of answering it well.

    Args:
        kind: What happens (:class:`FaultKind` or its value).
        retry_after: For ``rate_limit``: the ``Retry-After`` header, seconds (written as an integer when
            whole, else as a decimal, which the ``openai`` client reads); None sends no ``Retry-After``.
        seconds: For ``hang``: how long the server keeps the request unanswered; for ``trickle``: how long it
            keeps sending; closing the server ends either at once.
        content: For ``malformed`` and ``out_of_range``: the answer text to send instead of the default
            bad one (a test may want a particular bad answer).
        path: Only a request to this path spends it (``/v1/models`` too, for the faults of every route);
            None: the next chat or embeddings request it applies to.
        headers: More headers on the answer, sent as given (a ``Retry-After`` of ``-5`` or ``soon``, a
            ``retry-after-ms``); they replace the fault's own ``Retry-After``.
        echo: The answer carries the request's headers (``Authorization`` included), as a careless server
            does: in the error message of ``rate_limit``, ``quota``, ``unauthorized`` and ``server_error``,
            as the content of ``malformed``.
        body: For ``raw``: the answer's bytes (default: bytes that are not UTF-8).
        content_type: For ``raw``: its ``Content-Type``.

    Raises:
        ValueError: An unknown kind, a negative or non-finite duration, or a field given to a kind that has no
            use for it.

    Examples:
        >>> server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=1), Fault("server_error"))
        >>> server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=None, headers={"Retry-After": "soon"}))
        >>> server.add_faults(Fault(FaultKind.RAW, body=b"<html>Bad gateway</html>", content_type="text/html"))
    """

    kind: FaultKind
    retry_after: float | None = 1.0
    seconds: float = 30.0
    content: str | None = None
    path: str | None = None
    headers: Mapping[str, str] | None = None
    echo: bool = False
    body: bytes | None = None
    content_type: str = "application/json"

    def __post_init__(self) -> None:
        try:
            kind = FaultKind(self.kind)
        except ValueError:
            known = ", ".join(repr(item.value) for item in FaultKind)
            raise ValueError(f"unknown fault kind {self.kind!r}; known kinds: {known}") from None
        object.__setattr__(self, "kind", kind)
        for name in ("retry_after", "seconds"):
            value = getattr(self, name)
            if value is None and name == "retry_after":
                continue
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"Fault {name} must be a finite number of seconds >= 0, got {value!r}")
            object.__setattr__(self, name, float(value))
        if self.content is not None and kind not in (FaultKind.MALFORMED, FaultKind.OUT_OF_RANGE):
            raise ValueError(f"Fault content is for 'malformed' and 'out_of_range' only, not {kind.value!r}")
        if self.body is not None and kind is not FaultKind.RAW:
            raise ValueError(f"Fault body is for 'raw' only, not {kind.value!r}")
        if self.echo and kind not in _ERRORS | {FaultKind.MALFORMED}:
            raise ValueError(f"Fault echo is for {', '.join(sorted(k.value for k in _ERRORS))} and 'malformed' "
                             f"only, not {kind.value!r}")
        if self.headers is not None:
            object.__setattr__(self, "headers", MappingProxyType({str(k): str(v) for k, v in self.headers.items()}))

    def answer_headers(self) -> dict[str, str]:
        """The headers the fault's answer carries besides the content type: its ``Retry-After``, then ``headers``."""
        found = ({"Retry-After": _header_seconds(self.retry_after)}
                 if self.kind is FaultKind.RATE_LIMIT and self.retry_after is not None else {})
        if self.headers:
            names = {name.lower() for name in self.headers}
            found = {name: value for name, value in found.items() if name.lower() not in names} | dict(self.headers)
        return found

    def to_json(self) -> dict[str, Any]:
        """The fault as a JSON object (for ``POST /loopback/control``)."""
        record = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        return {**record, "kind": self.kind.value, "headers": dict(self.headers) if self.headers is not None else None,
                "body": base64.b64encode(self.body).decode("ascii") if self.body is not None else None}

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Fault:
        """The fault written by :meth:`to_json`."""
        body = record.get("body")
        return cls(**{**record, "body": base64.b64decode(body) if body is not None else None})


#: What a dead server does to every request (:meth:`LoopbackServer.fail_all`'s default).
_DEAD = Fault(FaultKind.SERVER_ERROR)


@dataclasses.dataclass(frozen=True)
class FaultEvent:
    """One fault as it was applied, and when.

    ``sent_at`` is ``time.monotonic()`` (one clock for all processes on a Linux machine), so a test can
    check that a client waited ``retry_after`` before asking again.
    """

    kind: str
    path: str
    sent_at: float
    retry_after: float | None


@dataclasses.dataclass(frozen=True)
class AnsweredRequest:
    """One request that got a 200 answer, with its body: what a test counts to prove nothing was asked twice.

    ``fault`` names the content fault the answer carried (``malformed``, ``shuffled``...), or is None for
    a good answer; ``content`` is the chat answer text (None for embeddings).
    """

    path: str
    request: dict[str, Any]
    content: str | None
    fault: str | None
    answered_at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat request's messages (empty for an embeddings request)."""
        return list(self.request.get("messages", []))

    @property
    def texts(self) -> list[str]:
        """The embeddings request's input texts (empty for a chat request)."""
        return _input_texts(self.request) if self.path == _EMBEDDINGS else []


@dataclasses.dataclass(frozen=True)
class LoopbackStats:
    """A snapshot of a server's counters.

    Attributes:
        requests: Requests received per path, every method and outcome included (not ``/loopback/``).
        faults: Faults applied per :class:`FaultKind` value.
        fault_log: Every fault applied, in order.
        answered: Every request answered with status 200, in order.
        errors: The messages of requests the answer or embed function failed on (answered 500): a test
            that sees one has a bug in its own function, not in the client.
    """

    requests: dict[str, int]
    faults: dict[str, int]
    fault_log: tuple[FaultEvent, ...]
    answered: tuple[AnsweredRequest, ...]
    errors: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The snapshot as JSON (``GET /loopback/stats``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> LoopbackStats:
        """The snapshot written by :meth:`to_json`."""
        return cls(requests=dict(record["requests"]), faults=dict(record["faults"]),
                   fault_log=tuple(FaultEvent(**event) for event in record["fault_log"]),
                   answered=tuple(AnsweredRequest(**answer) for answer in record["answered"]),
                   errors=tuple(record["errors"]))


class _ClientError(Exception):
    """A request the server refuses (status 4xx) with OpenAI's error shape."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class LoopbackServer:
    """A real OpenAI-compatible HTTP server on ``127.0.0.1``, served from a background thread.

    Every request runs in its own daemon thread, so 32 concurrent requests with 50 ms latency take about
    50 ms, not 1.6 s. Closing the server also shuts the kept-alive connections, so a client sees a dead
    server as dead, not as one that still answers on old sockets.

    Args:
        answer: The chat answer function (default: :func:`grade_judge` with no grades: grade 0 always).
        embed: The embeddings function; None serves 404 on ``/v1/embeddings``.
        model: The model name listed by ``/v1/models`` and answered when a request names none.
        owned_by: The owner ``/v1/models`` reports for it: two servers that differ here describe the model
            differently (what the embedding-server encoder refuses to mix).
        latency: Seconds every chat or embeddings request waits before it is answered.
        port: The port to bind; 0 picks a free one.
        base64_type: The numbers of its base64 embeddings: ``float32`` as the OpenAI API defines them, or
            ``float64`` / ``float16`` / ``bfloat16``, as a server that sends another width does (its JSON numbers
            are the same); an attribute a test may change while the server runs.
        base64_always: Answer base64 whatever ``encoding_format`` asks (JSON numbers included), as a server that
            ignores it does.

    Examples:
        >>> with LoopbackServer(latency=0.05) as server:
        ...     client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        ...     server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=2))
    """

    def __init__(self, *, answer: AnswerFunction | None = None, embed: EmbedFunction | None = None,
                 model: str = DEFAULT_MODEL, owned_by: str = "loopback", latency: float = 0.0,
                 port: int = 0, base64_type: str = "float32", base64_always: bool = False) -> None:
        if base64_type not in _BASE64_TYPES:
            raise ValueError(f"base64_type must be one of {sorted(_BASE64_TYPES)}, not {base64_type!r}")
        self.base64_type = base64_type
        self.base64_always = base64_always
        self._answer = answer if answer is not None else grade_judge({})
        self._embed = embed
        self.model = model
        self.owned_by = owned_by
        self._port = port
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._latency = _seconds(latency, "latency")
        self._faults: deque[Fault] = deque()
        self._always: Fault | None = None
        self._ids = itertools.count(1)
        self._requests: Counter[str] = Counter()
        self._fault_counts: Counter[str] = Counter()
        self._fault_log: list[FaultEvent] = []
        self._answered: list[AnsweredRequest] = []
        self._errors: list[str] = []
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle ---------------------------------------------------------------------------------

    def start(self) -> LoopbackServer:
        """Bind and serve from a daemon thread; returns the server itself."""
        if self._httpd is not None:
            raise RuntimeError(f"the loopback server at {self.base_url} is already started")
        self._stopping.clear()
        self._httpd = _HTTPServer(("127.0.0.1", self._port), _Handler, self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"loopback-{self._httpd.server_port}", daemon=True)
        self._thread.start()
        logger.debug("loopback server listening at %s", self.base_url)
        return self

    def close(self) -> None:
        """Stop serving: no new connection, kept-alive ones shut, hangs and latencies ended at once."""
        httpd = self._httpd
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its client
        httpd.server_close()
        if self._thread is not None:
            self._thread.join()
        self._httpd = None
        self._thread = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The bound port."""
        if self._httpd is None:
            raise RuntimeError("the loopback server is not started; use start() or a with block")
        return int(self._httpd.server_port)

    @property
    def base_url(self) -> str:
        """The URL to give the ``openai`` client: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- controls (thread-safe) ---------------------------------------------------------------------

    def set_latency(self, seconds: float) -> None:
        """Make every later chat or embeddings request wait ``seconds`` before its answer."""
        seconds = _seconds(seconds, "latency")
        with self._lock:
            self._latency = seconds

    def add_faults(self, *faults: Fault) -> None:
        """Queue faults, in order; each is spent on the next request it applies to."""
        with self._lock:
            self._faults.extend(faults)

    def clear_faults(self) -> None:
        """Forget the queued faults not spent yet."""
        with self._lock:
            self._faults.clear()

    def fail_all(self, fault: Fault | None = _DEAD) -> None:
        """Apply ``fault`` to every request it applies to, before the queue (a dead server); None revives."""
        with self._lock:
            self._always = fault

    def stats(self) -> LoopbackStats:
        """A snapshot of the counters."""
        with self._lock:
            return LoopbackStats(requests=dict(self._requests), faults=dict(self._fault_counts),
                                 fault_log=tuple(self._fault_log), answered=tuple(self._answered),
                                 errors=tuple(self._errors))

    def reset_stats(self) -> None:
        """Zero the counters (between the phases of a benchmark)."""
        with self._lock:
            self._requests.clear()
            self._fault_counts.clear()
            self._fault_log.clear()
            self._answered.clear()
            self._errors.clear()

    # -- used by the request handler ----------------------------------------------------------------

    def _track(self, connection: socket.socket, *, open_: bool) -> None:
        with self._lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def _received(self, path: str) -> None:
        if path.startswith("/loopback/"):
            return  # control traffic is not counted: a server in a process counts as one in a thread
        with self._lock:
            self._requests[path] += 1

    def _take_fault(self, path: str) -> tuple[Fault | None, float]:
        """The fault for this request and the latency, under one lock so that each fault is spent once.

        The dead server's fault comes first; else the first queued fault that applies to ``path``.
        """
        applies = _APPLIES.get(path, _ANY_ROUTE)
        with self._lock:
            fault = (self._always if self._always is not None and self._always.kind in applies and path in _APPLIES
                     else None)
            if fault is None:
                for position, queued in enumerate(self._faults):
                    if queued.kind in applies and (queued.path == path if queued.path else path in _APPLIES):
                        fault = queued
                        del self._faults[position]
                        break
            if fault is not None:
                self._fault_counts[fault.kind.value] += 1
                retry_after = fault.retry_after if fault.kind is FaultKind.RATE_LIMIT else None
                self._fault_log.append(FaultEvent(kind=fault.kind.value, path=path, sent_at=time.monotonic(),
                                                  retry_after=retry_after))
            return fault, self._latency

    def _record_answer(self, path: str, request: dict[str, Any], content: str | None, fault: Fault | None) -> None:
        with self._lock:
            self._answered.append(AnsweredRequest(path=path, request=request, content=content,
                                                  fault=fault.kind.value if fault is not None else None,
                                                  answered_at=time.monotonic()))

    def _record_error(self, message: str) -> None:
        with self._lock:
            self._errors.append(message)

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _control(self, command: Mapping[str, Any]) -> None:
        """Apply one ``POST /loopback/control`` command (see :class:`RemoteLoopback`)."""
        operation = command.get("op")
        if operation == "add_faults":
            self.add_faults(*(Fault.from_json(record) for record in command.get("faults", [])))
        elif operation == "clear_faults":
            self.clear_faults()
        elif operation == "fail_all":
            fault = command.get("fault")
            self.fail_all(Fault.from_json(fault) if fault is not None else None)
        elif operation == "set_latency":
            self.set_latency(float(command["seconds"]))
        elif operation == "reset_stats":
            self.reset_stats()
        else:
            raise _ClientError(400, f"unknown control operation {operation!r}; known: add_faults, clear_faults, "
                                    "fail_all, set_latency, reset_stats")


class QuietListener(ThreadingHTTPServer):
    """A loopback listening socket for test servers: daemon threads, no DNS lookup, no traceback for a client gone.

    ``socketserver`` prints every handler exception to standard error; a client that goes away (killed, its
    timeout, or a job stopped by another answer) resets its kept-alive connections, which is no fault of the
    server's, and a traceback in standard error would break the tests that read it. Every test server
    (this module's, ``engine_servers``, ``judge_servers``) listens through this one class.
    """

    daemon_threads = True
    block_on_close = False  # close() ends hangs itself; never wait for a client that went away
    request_queue_size = 256  # 32 clients connecting at once must not overflow the backlog (1 s SYN retry)
    allow_reuse_address = True

    def server_bind(self) -> None:
        """Bind without ``HTTPServer.server_bind``'s ``socket.getfqdn``, a DNS lookup that can take seconds."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away is normal here: a debug line, not a traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):
            logger.debug("test server: client %s went away (%s)", client_address, type(error).__name__)
            return
        super().handle_error(request, client_address)


class _HTTPServer(QuietListener):
    """This module's listener, which hands its handlers the :class:`LoopbackServer` they serve."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 loopback: LoopbackServer) -> None:
        self.loopback = loopback
        super().__init__(address, handler)


class _Handler(BaseHTTPRequestHandler):
    """One connection: reads each request, applies latency and faults, answers in OpenAI's shapes."""

    protocol_version = "HTTP/1.1"  # keep-alive: the client reuses its connections
    disable_nagle_algorithm = True  # no 40 ms Nagle/delayed-ACK stall between header and body
    wbufsize = -1  # headers and body leave in one write
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.loopback._track(self.connection, open_=True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass  # the client went away
        finally:
            self.server.loopback._track(self.connection, open_=False)

    def log_message(self, format: str, *args: Any) -> None:
        """Requests go to this module's debug log, not to standard error."""
        logger.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        """``/v1/models``, ``/v1/models/{name}`` and ``/loopback/stats``."""
        loopback = self.server.loopback
        path = self.path.split("?", 1)[0]
        loopback._received(path)
        if path == _MODELS:
            fault, _ = loopback._take_fault(path)  # only a fault queued for this path (Fault(path=...))
            if fault is not None and fault.kind is FaultKind.SERVER_ERROR:
                return self._send_error(500, "The server is not ready (scripted by the loopback server)",
                                        "server_error", None, echo=self._echo(fault))
            if fault is not None and self._send_fault(fault):
                return None
            self._send_json(200, {"object": "list", "data": [_model_record(loopback.model, loopback.owned_by)]})
        elif path.startswith(_MODELS + "/") and path[len(_MODELS) + 1:] == loopback.model:
            self._send_json(200, _model_record(loopback.model, loopback.owned_by))
        elif path == _STATS:
            self._send_json(200, loopback.stats().to_json())
        else:
            self._send_error(404, f"no route GET {path}", "invalid_request_error", "not_found")

    def do_POST(self) -> None:
        """The chat and embeddings routes, and ``/loopback/control``."""
        loopback = self.server.loopback
        path = self.path.split("?", 1)[0]
        loopback._received(path)
        try:
            request = self._read_json()
            if path == _CONTROL:
                try:
                    loopback._control(request)
                except (ValueError, TypeError, KeyError) as error:
                    raise _ClientError(400, f"bad control command {request!r}: {error}", "invalid_value") from None
                self._send_json(200, {"ok": True})
            elif path == _CHAT:
                self._serve(path, request, self._chat)
            elif path == _EMBEDDINGS:
                if loopback._embed is None:  # before latency and faults: nothing is served here
                    raise _ClientError(404, "this loopback server serves no embeddings (it was given no embed "
                                            "function)", "not_found")
                self._serve(path, request, self._embeddings)
            else:
                raise _ClientError(404, f"no route POST {path}", "not_found")
        except _ClientError as error:
            self._send_error(error.status, str(error), "invalid_request_error", error.code)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (its timeout) while we answered

    def _serve(self, path: str, request: dict[str, Any],
               build: Callable[[dict[str, Any], Fault | None], tuple[dict[str, Any], str | None]]) -> None:
        """Latency, then the fault if any, then the answer built by ``build`` (chat or embeddings)."""
        loopback = self.server.loopback
        fault, latency = loopback._take_fault(path)
        if latency and loopback._stopping.wait(latency):
            return self._drop()
        if fault is not None and self._send_fault(fault):
            return None
        try:
            payload, content = build(request, fault)
        except _ClientError:
            raise
        except Exception as error:  # the test's own answer or embed function failed: say so, loudly
            message = f"{path}: the loopback server's function failed: {error!r}"
            logger.warning("%s", message)
            loopback._record_error(message)
            return self._send_error(500, message, "server_error", None)
        content_fault = fault if fault is not None and fault.kind not in _ANY_ROUTE else None
        loopback._record_answer(path, request, content, content_fault)
        self._send_json(200, payload)

    def _chat(self, request: dict[str, Any], fault: Fault | None) -> tuple[dict[str, Any], str | None]:
        loopback = self.server.loopback
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _ClientError(400, "'messages' must be a non-empty list", "invalid_value")
        if request.get("stream"):
            raise _ClientError(400, "the loopback server does not stream; send stream=false", "invalid_value")
        if request.get("n", 1) != 1:
            raise _ClientError(400, f"the loopback server answers one choice, not n={request['n']!r}",
                               "invalid_value")
        if fault is not None and fault.kind is FaultKind.MALFORMED and fault.echo:
            content = f"You sent: {self._echo(fault)}"
        elif fault is not None and fault.kind is FaultKind.MALFORMED:
            content = fault.content if fault.content is not None else "The passage looks relevant to the query."
        elif fault is not None and fault.kind is FaultKind.OUT_OF_RANGE:
            content = fault.content if fault.content is not None else _out_of_range(request)
        else:
            content = loopback._answer(request)
            if not isinstance(content, str):
                raise TypeError(f"the answer function returned {type(content).__name__}, not str")
        prompt_tokens = _tokens(" ".join(_message_text(message) for message in messages))
        completion_tokens = _tokens(content)
        payload = {
            "id": f"chatcmpl-loopback-{loopback._next_id()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model") or loopback.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": None},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        return payload, content

    def _embeddings(self, request: dict[str, Any], fault: Fault | None) -> tuple[dict[str, Any], str | None]:
        loopback = self.server.loopback
        texts = _input_texts(request)
        if request.get("dimensions") is not None:
            raise _ClientError(400, "the loopback server does not shorten vectors ('dimensions')", "invalid_value")
        encoding = request.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise _ClientError(400, f"encoding_format must be 'float' or 'base64', not {encoding!r}",
                               "invalid_value")
        embed = loopback._embed
        if embed is None:
            raise _ClientError(404, "this loopback server serves no embeddings (it was given no embed function)",
                               "not_found")
        vectors = [[float(value) for value in vector] for vector in embed(list(texts))]
        items = list(enumerate(vectors))
        kind = fault.kind if fault is not None else None
        if kind is FaultKind.WRONG_DIMENSION and items:
            items[0] = (0, items[0][1][:-1])
        elif kind is FaultKind.WRONG_COUNT and items:
            items.pop()
        elif kind is FaultKind.NON_FINITE and items and items[0][1]:
            items[0] = (0, [math.nan, *items[0][1][1:]])
        elif kind is FaultKind.SHUFFLED:
            items.reverse()
        data = [{"object": "embedding", "index": index,
                 "embedding": (_base64(vector, loopback.base64_type) if encoding == "base64" or loopback.base64_always
                               else vector)}
                for index, vector in items]
        tokens = _tokens(" ".join(texts))
        return {"object": "list", "data": data, "model": request.get("model") or loopback.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}, None

    def _read_json(self) -> dict[str, Any]:
        length = self.headers.get("Content-Length")
        if length is None:
            raise _ClientError(411, "a request body needs a Content-Length header", "missing_content_length")
        body = self.rfile.read(int(length))
        try:
            request = json.loads(body or b"{}")
        except ValueError as error:
            raise _ClientError(400, f"the request body is not JSON: {error}", "invalid_json") from None
        if not isinstance(request, dict):
            raise _ClientError(400, "the request body must be a JSON object", "invalid_json")
        return request

    def _send_json(self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _send_error(self, status: int, message: str, error_type: str, code: str | None,
                    headers: Mapping[str, str] | None = None, echo: str = "") -> None:
        message = f"{message} (you sent: {echo})" if echo else message
        self._send_json(status, {"error": {"message": message, "type": error_type, "param": None, "code": code}},
                        headers)

    def _echo(self, fault: Fault) -> str:
        """The request's headers as one line, ``Authorization: Bearer ...`` first, when ``fault`` echoes them."""
        if not fault.echo:
            return ""
        headers = sorted(self.headers.items(), key=lambda item: item[0].lower() != "authorization")
        return "; ".join(f"{name.title() if name.lower() == 'authorization' else name}: {value}"
                         for name, value in headers)

    def _send_fault(self, fault: Fault) -> bool:
        """Answer with one of the faults of every route; False for a content fault (the route's answer carries it)."""
        loopback = self.server.loopback
        kind, echo = fault.kind, self._echo(fault)
        if kind is FaultKind.HANG:
            if loopback._stopping.wait(fault.seconds):
                self._drop()
                return True
            return False  # then the normal answer
        if kind is FaultKind.CLOSE:
            self._drop()
        elif kind is FaultKind.RATE_LIMIT:
            self._send_error(429, "Rate limit reached (scripted by the loopback server)", "requests",
                             "rate_limit_exceeded", headers=fault.answer_headers(), echo=echo)
        elif kind is FaultKind.QUOTA:
            self._send_error(429, "You exceeded your current quota, please check your plan and billing details "
                                  "(scripted by the loopback server)", "insufficient_quota", "insufficient_quota",
                             headers=fault.answer_headers(), echo=echo)
        elif kind is FaultKind.UNAUTHORIZED:
            self._send_error(401, "Incorrect API key provided (scripted by the loopback server)",
                             "invalid_request_error", "invalid_api_key", headers=fault.answer_headers(), echo=echo)
        elif kind is FaultKind.SERVER_ERROR:
            self._send_error(500, "The server had an error (scripted by the loopback server)", "server_error", None,
                             headers=fault.answer_headers(), echo=echo)
        elif kind is FaultKind.RAW:
            body = fault.body if fault.body is not None else b"\xff not UTF-8 \xc3\x28"
            self.send_response(200)
            self.send_header("Content-Type", fault.content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in fault.answer_headers().items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        elif kind is FaultKind.TRICKLE:
            self._trickle(fault.seconds)
        else:
            return False
        return True

    def _trickle(self, seconds: float) -> None:
        """A 200 answer that promises a megabyte and sends one space every 0.1 s for ``seconds``, then drops."""
        loopback = self.server.loopback
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(1 << 20))
        self.end_headers()
        self.wfile.flush()
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline and not loopback._stopping.wait(0.1):
                self.wfile.write(b" ")
                self.wfile.flush()
        except OSError:
            pass  # the client gave up on it
        self._drop()

    def _drop(self) -> None:
        """End the connection without an answer (a closed socket, or the server closing)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already gone


# -- the true-grade judge ---------------------------------------------------------------------------


class _TextIndex:
    """Which of many known texts occur in a message, without a substring search per known text.

    Texts are filed under their first :attr:`PREFIX` characters; a message is scanned once, position by
    position, and only the texts filed under the characters found there are compared. A few thousand
    texts cost one dictionary lookup per character of the message instead of a search per text.
    Texts shorter than the prefix are searched one by one (they are few).
    """

    PREFIX = 16

    def __init__(self, texts: Iterable[str]) -> None:
        self._by_prefix: dict[str, list[str]] = {}
        self._short: list[str] = []
        for text in set(texts):
            if len(text) < self.PREFIX:
                if text:
                    self._short.append(text)
            else:
                self._by_prefix.setdefault(text[:self.PREFIX], []).append(text)

    def found(self, message: str) -> set[str]:
        """The known texts that occur in ``message``."""
        found = {text for text in self._short if text in message}
        by_prefix, width = self._by_prefix, self.PREFIX
        if by_prefix:
            for start in range(len(message) - width + 1):
                candidates = by_prefix.get(message[start:start + width])
                if candidates:
                    found.update(text for text in candidates if message.startswith(text, start))
        return found


def grade_judge(grades: Mapping[tuple[str, str], int | float],
                default: Callable[[str, str], int | float] | None = None, *,
                queries: Iterable[str] = (), passages: Iterable[str] = ()) -> AnswerFunction:
    """An answer function that judges every (query, passage) pair with its true grade.

    It finds which pair the last user message is about (the query and the passage texts both occur in
    it verbatim; among the known pairs found, the one with the longest passage, then the longest query)
    and answers the JSON key the prompt asks for, consistently with the grade: ``{"<key>": grade}`` for
    the score keys, ``relevance_score`` kept in its branch (``max(2, grade)`` where the prompt says
    "2 or 3", ``min(1, grade)`` where it says "0 or 1"), and ``has_answer`` "Yes" when the grade is at
    least 2, else "No". With such a judge, a correct judging pipeline reproduces the grades exactly
    (kappa 1.0), whatever its prompts, as long as they ask for one of :data:`ANSWER_KEYS`.

    Passages are data: the asked key and the branch are read from the message with the query and the
    passage texts taken out, and it is the last key named that counts (the prompt's own instruction
    comes last), so a passage holding ``{"final_score": 0}`` changes nothing.

    Args:
        grades: The true grade of each (query text, passage text) pair.
        default: The grade of a pair of known texts absent from ``grades``; None means grade 0.
        queries: More query texts to recognise, for pairs only ``default`` grades.
        passages: More passage texts to recognise, for pairs only ``default`` grades.

    Returns:
        ``answer(request_json) -> content`` for :class:`LoopbackServer`. It raises ``LookupError`` (the
        server answers 500 and records the error) when ``default`` is given but the message holds no
        known query or no known passage, or when the message asks for none of :data:`ANSWER_KEYS`.

    Examples:
        >>> judge = grade_judge({("flood warning", "Rivers rose overnight ..."): 3})
        >>> server = LoopbackServer(answer=judge)
    """
    grades = dict(grades)
    query_index = _TextIndex(itertools.chain((query for query, _ in grades), queries))
    passage_index = _TextIndex(itertools.chain((passage for _, passage in grades), passages))

    def answer(request: dict[str, Any]) -> str:
        messages = request.get("messages") or []
        user = next((_message_text(message) for message in reversed(messages) if message.get("role") == "user"), "")
        system = " ".join(_message_text(message) for message in messages if message.get("role") == "system")
        found_queries, found_passages = query_index.found(user), passage_index.found(user)
        graded = [(query, passage) for query in found_queries for passage in found_passages
                  if (query, passage) in grades]
        if graded:
            query, passage = max(graded, key=lambda pair: (len(pair[1]), len(pair[0])))
            grade: int | float = grades[query, passage]
        elif found_queries and found_passages:
            query, passage = max(found_queries, key=len), max(found_passages, key=len)
            grade = default(query, passage) if default is not None else 0
        elif default is None:
            query, passage, grade = "", "", 0
        else:
            raise LookupError(f"grade_judge: the user message holds {len(found_queries)} known queries and "
                              f"{len(found_passages)} known passages; cannot grade it (message starts "
                              f"{user[:120]!r}); pass queries= or passages= to make its texts known")
        prompt = [_without(text, (passage, query)) for text in (user, system)]
        key = _last_match(_KEY_PATTERN, prompt)
        if key is None:
            raise LookupError(f"grade_judge: the prompt asks for none of {', '.join(ANSWER_KEYS)} "
                              f"(message starts {user[:120]!r})")
        return json.dumps({key: _keyed_grade(key, grade, _last_match(_BRANCH_PATTERN, prompt))})

    return answer


def _keyed_grade(key: str, grade: int | float, branch: str | None) -> int | float | str:
    """The answer to ``key`` for a pair whose true grade is ``grade`` (``branch``: "2 or 3", "0 or 1")."""
    if float(grade).is_integer():
        grade = int(grade)
    if key == "has_answer":
        return "Yes" if grade >= 2 else "No"
    if key == "relevance_score" and branch is not None:
        return max(2, grade) if branch.startswith("2") else min(1, grade)
    return grade


def _without(text: str, parts: Iterable[str]) -> str:
    """``text`` with every occurrence of each non-empty part taken out (the data, leaving the prompt)."""
    for part in parts:
        if part:
            text = text.replace(part, " ")
    return text


def _last_match(pattern: re.Pattern[str], texts: Iterable[str]) -> str | None:
    """The last match of ``pattern`` in the first text that has one."""
    for text in texts:
        matches = [match.group(0) for match in pattern.finditer(text)]
        if matches:
            return matches[-1]
    return None


def _out_of_range(request: Mapping[str, Any]) -> str:
    """A JSON answer to the asked key that no scale allows (99, or has_answer "Maybe")."""
    messages = request.get("messages") or []
    user = next((_message_text(message) for message in reversed(messages) if message.get("role") == "user"), "")
    key = _last_match(_KEY_PATTERN, [user]) or "final_score"
    return json.dumps({key: "Maybe" if key == "has_answer" else _OUT_OF_RANGE_SCORE})


# -- helpers ----------------------------------------------------------------------------------------


def _message_text(message: Mapping[str, Any]) -> str:
    """A chat message's text: its string content, or its text parts joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _input_texts(request: Mapping[str, Any]) -> list[str]:
    """An embeddings request's input as a list of texts (one string is a list of one)."""
    value = request.get("input")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(text, str) for text in value):
        return list(value)
    raise _ClientError(400, "'input' must be a string or a non-empty list of strings (token ids are not served)",
                       "invalid_value")


def _tokens(text: str) -> int:
    """A token estimate (four characters a token): enough for usage figures and cost estimates in tests."""
    return max(1, len(text) // 4)


#: The struct codes of the number types a loopback server's base64 embeddings may hold (bfloat16: the upper half
#: of each float32, rounded to nearest even, as torch casts).
_BASE64_TYPES = {"float32": "f", "float64": "d", "float16": "e", "bfloat16": "I"}


def _base64(vector: Sequence[float], number_type: str = "float32") -> str:
    """A vector as base64 of little-endian ``number_type``: float32 is what the OpenAI API sends when asked."""
    if number_type == "bfloat16":
        bits = struct.unpack(f"<{len(vector)}I", struct.pack(f"<{len(vector)}f", *vector))
        halves = [((bit + 0x7FFF + ((bit >> 16) & 1)) >> 16) & 0xFFFF for bit in bits]
        return base64.b64encode(struct.pack(f"<{len(vector)}H", *halves)).decode("ascii")
    code = _BASE64_TYPES[number_type]
    return base64.b64encode(struct.pack(f"<{len(vector)}{code}", *vector)).decode("ascii")


def _header_seconds(seconds: float) -> str:
    """Seconds for a ``Retry-After`` header: an integer when whole (the HTTP form), else a decimal."""
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


def _model_record(model: str, owned_by: str) -> dict[str, Any]:
    """The model as vLLM lists it: with what changes on every listing (the time, a permission record's random id)."""
    now = int(time.time())
    return {"id": model, "object": "model", "created": now, "owned_by": owned_by, "root": model, "parent": None,
            "max_model_len": 512,
            "permission": [{"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission", "created": now,
                            "allow_sampling": True, "organization": "*", "is_blocking": False}]}


def _seconds(value: float, name: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return value


# -- a server in another process --------------------------------------------------------------------


class RemoteLoopback:
    """The controls and counters of a loopback server running in another process, over HTTP.

    The same methods as :class:`LoopbackServer` (``set_latency``, ``add_faults``, ``clear_faults``,
    ``fail_all``, ``stats``, ``reset_stats``), so a test scripts a server in its own process as it
    scripts one in a thread.

    Args:
        base_url: The server's base URL (``http://127.0.0.1:PORT/v1``).
    """

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self._root = base_url.rstrip("/").removesuffix("/v1")

    def set_latency(self, seconds: float) -> None:
        """Make every later chat or embeddings request wait ``seconds``."""
        self._post({"op": "set_latency", "seconds": _seconds(seconds, "latency")})

    def add_faults(self, *faults: Fault) -> None:
        """Queue faults, in order; each is spent on the next request it applies to."""
        self._post({"op": "add_faults", "faults": [fault.to_json() for fault in faults]})

    def clear_faults(self) -> None:
        """Forget the queued faults not spent yet."""
        self._post({"op": "clear_faults"})

    def fail_all(self, fault: Fault | None = _DEAD) -> None:
        """Apply ``fault`` to every request it applies to (a dead server); None revives."""
        self._post({"op": "fail_all", "fault": fault.to_json() if fault is not None else None})

    def reset_stats(self) -> None:
        """Zero the counters."""
        self._post({"op": "reset_stats"})

    def stats(self) -> LoopbackStats:
        """A snapshot of the counters."""
        with urllib.request.urlopen(self._root + _STATS, timeout=10) as response:
            return LoopbackStats.from_json(json.load(response))

    def _post(self, command: Mapping[str, Any]) -> None:
        request = urllib.request.Request(self._root + _CONTROL, data=json.dumps(command).encode("utf-8"),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()


class LoopbackProcess(RemoteLoopback):
    """A loopback server in its own process (``python -m loopback``, this folder on its ``PYTHONPATH``).

    A benchmark measures the client's CPU without the server's, and a test can kill the client (or the
    server: :meth:`kill`) independently. The process is started on entering the ``with`` block, its
    base URL read from its first line of output, and it is terminated on leaving.

    Args:
        latency: Seconds every chat or embeddings request waits.
        grades: A JSON file of ``{"user_query", "passage", "score"}`` records (the authors'
            ``qrels_with_added`` layout) for :func:`grade_judge`.
        answer: ``"module:function"``, an :data:`AnswerFunction` importable in the child process.
        embed: ``"module:function"``, an :data:`EmbedFunction` importable in the child process.
        model: The served model name.
        cwd: The child's working folder (``module:function`` specs are importable from it).

    Examples:
        >>> with LoopbackProcess(latency=0.05) as server:
        ...     client = openai.OpenAI(base_url=server.base_url, api_key="unused")
    """

    def __init__(self, *, latency: float = 0.0, grades: str | Path | None = None, answer: str | None = None,
                 embed: str | None = None, model: str = DEFAULT_MODEL, cwd: str | Path | None = None) -> None:
        self._arguments = ["--latency", repr(_seconds(latency, "latency")), "--model", model]
        for option, value in (("--grades", grades), ("--answer", answer), ("--embed", embed)):
            if value is not None:
                self._arguments += [option, str(value)]
        self._cwd = cwd
        self._stderr: Any = None
        self.process: subprocess.Popen[str] | None = None
        super().__init__("")

    def __enter__(self) -> LoopbackProcess:
        # Standard error goes to a file, not a pipe: a pipe nobody reads blocks a server that logs a lot.
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8")
        # -m keeps the child's working folder importable (the ``module:function`` specs); this file's folder
        # (tests/, not a package) joins its path so that ``loopback`` itself is found.
        path = os.pathsep.join(filter(None, (str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH"))))
        self.process = subprocess.Popen([sys.executable, "-m", _MODULE, "--port", "0", *self._arguments],
                                        stdout=subprocess.PIPE, stderr=self._stderr, text=True, cwd=self._cwd,
                                        env={**os.environ, "PYTHONPATH": path})
        line = self.process.stdout.readline().strip() if self.process.stdout is not None else ""
        if not line.startswith("http://"):
            self.kill()
            self._stderr.seek(0)
            stderr = self._stderr.read()
            self._close_streams()
            raise RuntimeError(f"the loopback server process printed {line!r} instead of its URL; "
                               f"standard error: {stderr[-2000:]}")
        super().__init__(line)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_streams()

    def _close_streams(self) -> None:
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()
        if self._stderr is not None:
            self._stderr.close()

    def kill(self) -> None:
        """Kill the server process at once (SIGKILL): a server that dies mid-run."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _import_function(spec: str) -> Callable[..., Any]:
    """The function named by ``"module:function"``."""
    module_name, separator, name = spec.partition(":")
    if not separator or not module_name or not name:
        raise ValueError(f"expected 'module:function', got {spec!r}")
    return getattr(importlib.import_module(module_name), name)  # type: ignore[no-any-return]


def _read_grades(path: Path) -> dict[tuple[str, str], int | float]:
    """Grades from a JSON list of ``{"user_query", "passage", "score"}`` records."""
    records = json.loads(path.read_text(encoding="utf-8"))
    return {(record["user_query"], record["passage"]): record["score"] for record in records}


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until terminated, the base URL printed as the first line of standard output."""
    parser = argparse.ArgumentParser(prog="python -m loopback", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1; 0 picks a free one")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each chat or embeddings request waits")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="the served model name")
    answers = parser.add_mutually_exclusive_group()
    answers.add_argument("--grades", type=Path, help="JSON list of {user_query, passage, score} records to judge by")
    answers.add_argument("--answer", help="module:function, the chat answer function")
    parser.add_argument("--embed", help="module:function, the embeddings function")
    arguments = parser.parse_args(argv)
    answer = (_import_function(arguments.answer) if arguments.answer
              else grade_judge(_read_grades(arguments.grades)) if arguments.grades else None)
    embed = _import_function(arguments.embed) if arguments.embed else None
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    with LoopbackServer(answer=answer, embed=embed, model=arguments.model, latency=arguments.latency,
                        port=arguments.port) as server:
        print(server.base_url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())


class MemoisedEncoder:
    """A sentence-transformers model as a server's embed function: each distinct text encoded once, under a lock.

    Servers answer from several threads and tests send the same texts again and again (resumes, several servers),
    so the vectors are kept: the servers answer fast enough for the tests' short timeouts.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.vectors: dict[str, list[float]] = {}
        self.lock = threading.Lock()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        with self.lock:
            missing = [text for text in dict.fromkeys(texts) if text not in self.vectors]
            if missing:
                rows = self.model.encode(missing, batch_size=32, convert_to_numpy=True, show_progress_bar=False)
                self.vectors.update(zip(missing, rows.tolist(), strict=True))
            return [self.vectors[text] for text in texts]

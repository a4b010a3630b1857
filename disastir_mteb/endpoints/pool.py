"""Several OpenAI-compatible servers sharing one stream of requests: keys, concurrency, retries, dead servers.

Both the judge (chat completions) and encoding through embedding servers send many small independent
requests to one or more servers speaking OpenAI's protocol (OpenAI itself, vLLM, Ollama, llama.cpp,
text-embeddings-inference). This module is the one place that knows how (one module because the queue, the
workers, the retries and the reading of answers share each server's state and counts):

- **The official client, and its retries.** Each server gets one ``openai.AsyncOpenAI`` that retries what it
  retries anyway (408, 409, 429, 5xx, timeouts, lost connections), :attr:`EndpointLimits.max_retries` times, with
  its own exponential backoff and honouring ``Retry-After`` / ``retry-after-ms``. An event hook on its HTTP
  client (:meth:`EndpointPool._looked_at`) counts each server's retries and 429s, and stops the client from
  retrying two 429s itself: one saying the account's quota is used up, and one asking for a wait of
  :attr:`EndpointLimits.shown_wait` seconds or more (or over :attr:`EndpointLimits.longest_wait`), which the
  pool waits instead, capped and shown (through the client's own ``x-should-retry: false``).
- **The key** is read from one environment variable (``OPENAI_API_KEY`` unless the user names another) and
  handed to the client; it is never written to a file or a log, and a sentence about a refused key names
  the variable, not its value. Without the variable a local server is sent a placeholder (vLLM, Ollama and
  llama.cpp need none); OpenAI itself is refused before any request. A server may echo what it was sent
  (some proxies and toy servers put the request's headers in an error message or even in the answer): every
  answer body and every error message passes through :meth:`EndpointPool.redact` here, before anything reads
  it, so the key is replaced by :data:`REDACTED` in what the judge stores, what is logged and what is printed.
  Keys shorter than :data:`MIN_REDACTED_LENGTH` characters are left alone (they would match ordinary text,
  changing answers; such a placeholder is no secret).
- **Answers are read here**, not by the client's typed models: at most :attr:`EndpointLimits.max_answer_bytes`
  bytes, the body within the request's ``timeout`` in all (the client's own timeout bounds each read, so a
  server sending one byte a second would otherwise hold a request for ever), decoded as UTF-8 and parsed as
  JSON.
  A stream of server-sent events of ``chat.completion.chunk`` objects (what ``transformers serve`` sends
  every time, even to ``"stream": false``) is folded into the one chat completion it spells: its deltas'
  text joined, its last ``finish_reason`` and ``usage`` kept; a stream whose event is an error is retried
  as an answer broken off is. An answer that is too large, not UTF-8, not JSON nor such a stream (an HTML page from a
  proxy, a web UI at that address, a stream of something else or cut mid-event) stops the run with one
  sentence naming the server and what it sent: it does not speak the protocol, and asking again would not
  change that.
- **Bounded concurrency**: ``concurrency`` requests in flight per server; the servers pull from one queue,
  so a faster server takes more of the work.
- **What the client cannot retry, the pool does.** A 5xx, timeout or lost connection the client still
  gets after its retries gives the server up (it failed ``max_retries + 1`` tries in a row). The pool streams
  each answer's body to bound its size, so the client cannot retry an answer broken off mid-body, nor one
  past the whole-request ``timeout``: those the pool asks again itself, waiting what the client would
  (:func:`~disastir_mteb.util.mteb_internals.openai_retry_wait`), and gives the server up after
  ``max_retries + 1`` of them in a row. A 429 the client gives up on (its retries spent, or handed over by
  the hook) is asked again after what ``Retry-After`` asks (the client's reading of it), at most
  :attr:`EndpointLimits.longest_wait` seconds, else the client's backoff; a server answering nothing but 429
  for :attr:`EndpointLimits.rate_limit_patience` seconds after the client's retries is given up on. A
  server given up on hands its request back to the queue for the others, and the run stops with one
  sentence only when no server is left. A 429 saying the account's quota is used up
  (``insufficient_quota``) stops the run at once: waiting does not mend it.
- **Waits are shown**: every wait the pool does of :attr:`EndpointLimits.shown_wait` seconds or more, and
  every wait shortened to the cap, is handed to :attr:`EndpointPool.on_wait` (the judge's progress line) as
  one short text, and an empty text when no such wait is left; without ``on_wait`` the first of each
  server's run of waits is a warning in the log. The client's own waits are not shown: with the hook above
  they are only its backoff's steps (0.5 s doubling, under 5 s with the default ``max_retries``) and asked
  waits under ``shown_wait``, as routine as the pool's short waits were (its log line ``Retrying request in
  ... seconds`` on ``openai._base_client`` is at INFO, for whoever turns it on).
- **Errors that retrying cannot mend** (a refused key, an unknown model, a rejected request) stop the run
  with one sentence naming the server and what it said, unless the caller changes how it asks that server:
  a request refused with 400 or 422, or failing with a 5xx after the client's retries, is handed to
  :meth:`EndpointPool.serve`'s ``refused`` callback, and sent again when it says so (the judge moves a
  server that refuses structured outputs to a plainer format, :attr:`Server.mode`; one place decides, per
  server, for the whole job).
- **Base URLs are checked before anything is sent** (:func:`check_base_url`): a URL without a scheme or host,
  with an empty or unreadable port, with spaces, credentials, a query, or naming a local file is one sentence
  saying how to write it. Engines differ in their prefix (vLLM, Ollama and llama.cpp answer under ``/v1``,
  Infinity without it unless started with ``--url-prefix /v1``), so a 404 is described by asking the server
  (:meth:`EndpointPool.describe_not_found`): the URL tried; then, where the base URL's model list answers, the
  models it serves (only then is ``--model`` blamed); else, where the same server answers with ``/v1`` added
  or removed, that base URL to try instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

from disastir_mteb.util import mteb_internals
from disastir_mteb.util.errors import DisastirError, InvalidInput

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_EMBEDDING_CONCURRENCY", "DEFAULT_KEY_ENV", "DEFAULT_TIMEOUT", "LONGEST_WAIT_ENV",
           "MIN_REDACTED_LENGTH", "RATE_LIMIT_PATIENCE_ENV", "REDACTED", "EndpointError", "EndpointLimits",
           "EndpointPool", "Server", "chat_from_event_stream", "check_base_url", "listed_name", "other_bases",
           "prefix_advice", "read_key"]

#: Where the key is read from unless the user names another variable.
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: Requests in flight per embedding server unless the user says otherwise (``--embeddings-concurrency``).
DEFAULT_EMBEDDING_CONCURRENCY = 4
#: Seconds one request may take in all unless the caller says otherwise (``--timeout``), for the judge and the
#: embedding servers alike.
DEFAULT_TIMEOUT = 120.0
#: What replaces the key wherever a server echoed it.
REDACTED = "[key redacted]"
#: Keys shorter than this are not redacted: they would match ordinary text and change answers.
MIN_REDACTED_LENGTH = 8
#: Overrides :attr:`EndpointLimits.longest_wait` (seconds), e.g. for a provider known to ask for long waits.
LONGEST_WAIT_ENV = "DISASTIR_LONGEST_WAIT"
#: Overrides :attr:`EndpointLimits.rate_limit_patience` (seconds).
RATE_LIMIT_PATIENCE_ENV = "DISASTIR_RATE_LIMIT_PATIENCE"
#: What a local server is sent when no key is set (the client insists on one; local servers ignore it).
_NO_KEY = "no-key"
_HOSTED = ("api.openai.com",)

T = TypeVar("T")
R = TypeVar("R")


class Refused(Protocol[T]):
    """``refused(item, server, said, status=...) -> send again?`` (:meth:`EndpointPool.serve`)."""

    def __call__(self, item: T, server: Server, said: str, *, status: int) -> bool: ...


class EndpointError(DisastirError, OSError):
    """A server fault that stops the run: one sentence naming the server and what went wrong."""


@dataclass(frozen=True)
class EndpointLimits:
    """How long the pool waits for a server, and how much it reads from one.

    Attributes:
        longest_wait: the longest single wait before a retry, in seconds: a ``Retry-After`` asking for more
            is shortened to it (and the shortening is shown). 120 s: OpenAI's own limits reset within a
            minute, and a server asking for hours is better given up on by the patience below (the openai
            client itself waits no ``Retry-After`` over two minutes either).
        rate_limit_patience: seconds a server may answer nothing but 429 (from its first 429 after its last
            answer) before it is given up on. 300 s: a quota that refills per minute has refilled five
            times over; one that does not is a daily quota or an account without credit, which waiting
            for does not mend.
        shown_wait: waits of at least this many seconds are shown (``on_wait``); shorter ones are routine.
        max_answer_bytes: the largest answer read, in bytes: 64 MiB holds a batch of 256 texts of
            8,192-dimensional vectors written as decimal JSON numbers; a judge's answer is a few dozen.
        max_retries: how often each server's openai client asks again itself (a 5xx, a timeout, a lost
            connection, a short 429), and how many answers broken off mid-body in a row the pool asks again
            before giving the server up. 4: a request is then tried 5 times on one server, as the pool did
            before the client retried (it gave a server up after 5 failures in a row); the client's waits
            between them (0.5, 1, 2, 4 s, jittered) sum to about 7 s, time for a restarting server or a
            dropped connection to come back, and stay each under :attr:`shown_wait`.

    Examples:
        >>> EndpointLimits(longest_wait=1.0, rate_limit_patience=3.0).longest_wait
        1.0
    """

    longest_wait: float = 120.0
    rate_limit_patience: float = 300.0
    shown_wait: float = 5.0
    max_answer_bytes: int = 64 * 2**20
    max_retries: int = 4

    def __post_init__(self) -> None:
        for name in ("longest_wait", "rate_limit_patience", "shown_wait"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise InvalidInput(f"EndpointLimits.{name} must be a positive number of seconds, not {value!r}.")
        if not (isinstance(self.max_answer_bytes, int) and self.max_answer_bytes > 0):
            raise InvalidInput(f"EndpointLimits.max_answer_bytes must be a positive integer, not "
                               f"{self.max_answer_bytes!r}.")
        if not (isinstance(self.max_retries, int) and not isinstance(self.max_retries, bool)
                and self.max_retries >= 0):
            raise InvalidInput(f"EndpointLimits.max_retries must be an integer of 0 or more, not "
                               f"{self.max_retries!r}.")

    @classmethod
    def from_environment(cls) -> EndpointLimits:
        """The defaults, with :data:`LONGEST_WAIT_ENV` and :data:`RATE_LIMIT_PATIENCE_ENV` where set.

        Raises:
            ValueError: a variable set to something other than a positive number of seconds.
        """
        values: dict[str, float] = {}
        for name, variable in (("longest_wait", LONGEST_WAIT_ENV), ("rate_limit_patience", RATE_LIMIT_PATIENCE_ENV)):
            text = os.environ.get(variable, "").strip()
            if not text:
                continue
            try:
                value = float(text)
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and value > 0):
                raise InvalidInput(f"The environment variable {variable} is {text!r}, not a positive number of "
                                   f"seconds; set it to one (e.g. {getattr(cls, name):g}) or unset it.")
            values[name] = value
        return cls(**values)


def check_base_url(url: str, option: str = "The base URL") -> str:
    """``url`` as a server's base URL (outer spaces and a trailing slash taken off), or one sentence saying why not.

    Checked before anything is sent or loaded, so that a typo costs a second, not a model load: the scheme
    (``http`` or ``https``, with its ``://``), the host, a port that is a number when a ``:`` announces one,
    no spaces, no credentials (the key belongs in an environment variable: a URL is printed in every message),
    no query or fragment, and not the path of a local file.

    Args:
        url: what the user gave.
        option: how the sentence names it (``--embeddings-url``).

    Raises:
        ValueError: one sentence naming the option, the value and how to write it.

    Examples:
        >>> check_base_url(" http://127.0.0.1:8000/v1/ ")
        'http://127.0.0.1:8000/v1'
    """
    text = str(url).strip()
    example = "http://127.0.0.1:8000/v1"
    if not text:
        raise InvalidInput(f"{option} is empty; give the server's base URL, e.g. {example}.")
    if any(character.isspace() for character in text):
        raise InvalidInput(f"{option} {text!r} contains a space; a URL has none: write it as e.g. {example}.")
    if "://" not in text and Path(text).expanduser().is_file():
        raise InvalidInput(f"{option} {text!r} is a file, not a server's URL; give each server's base URL as an "
                           f"option of its own, e.g. {example}.")
    parts = urlsplit(text)
    if "://" not in text:
        head, slashes, tail = text.partition("//")  # http//host, https:/host, host:8000/v1
        scheme = "https" if text.startswith("https") else "http"
        bare = tail if slashes and head.rstrip(":") in ("http", "https") else text.split(f"{scheme}:", 1)[-1]
        try:
            suggestion = f"write it as {check_base_url(f'{scheme}://{bare}', option)}"
        except ValueError:  # no port after its ':', say: name the host and a port
            host = bare.split("/", 1)[0].split(":", 1)[0] or "127.0.0.1"
            suggestion = f"write it as e.g. {scheme}://{host}:8000/v1, with the port the server listens on"
        raise InvalidInput(f"{option} {text!r} has no scheme (http:// or https://); {suggestion}.")
    if parts.scheme not in ("http", "https"):
        raise InvalidInput(f"{option} {text!r} uses {parts.scheme or 'no'}://, not http:// or https://; a server's API "
                           f"is reached over HTTP, e.g. {example}.")
    if parts.username is not None or parts.password is not None:
        shown = urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[1], parts.path, "", ""))
        raise InvalidInput(f"{option} {shown} is given with credentials before its host; put the key in an "
                           "environment variable (OPENAI_API_KEY, or the one --api-key-env names), never in the URL.")
    if not parts.hostname:
        raise InvalidInput(f"{option} {text!r} names no host; write it as e.g. {example}.")
    if parts.netloc.endswith(":"):
        raise InvalidInput(f"{option} {text!r} has a ':' after its host but no port; write the port the server "
                           f"listens on, e.g. {parts.scheme}://{parts.hostname}:8000{parts.path}.")
    try:
        parts.port  # noqa: B018 (reading it checks it)
    except ValueError:
        port = parts.netloc.rsplit(":", 1)[-1]
        raise InvalidInput(f"{option} {text!r} has the port {port!r}, not a number from 1 to 65535; write the port "
                           f"the server listens on, e.g. {parts.scheme}://{parts.hostname}:8000{parts.path}.") from None
    if parts.port == 0:
        raise InvalidInput(f"{option} {text!r} has the port 0, not a number from 1 to 65535; write the port the "
                           "server listens on.")
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise InvalidInput(f"{option} {text!r} has a query or fragment; a base URL ends with its path, e.g. "
                           f"{urlunsplit((parts.scheme, parts.netloc, parts.path, '', '')).rstrip('/')}.")
    return text.rstrip("/")


def other_bases(url: str) -> list[str]:
    """The same server under the other prefix: ``/v1`` taken off a base URL ending in it, else added.

    Engines disagree on the prefix (Infinity answers without ``/v1``, the others under it), and a base URL that
    is neither (``http://host:11434/api``) gets the host's own ``/v1`` as well.

    Examples:
        >>> other_bases("http://127.0.0.1:7997/v1")
        ['http://127.0.0.1:7997']
        >>> other_bases("http://127.0.0.1:11434/api")
        ['http://127.0.0.1:11434/api/v1', 'http://127.0.0.1:11434/v1']
    """
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    paths = [path[:-len("/v1")]] if path.endswith("/v1") else [path + "/v1"] + (["/v1"] if path else [])
    return [urlunsplit((parts.scheme, parts.netloc, other, "", "")) for other in paths]


def prefix_advice(other: str) -> str:
    """``this server answers without /v1: try http://host:7997``, or ``under /v1`` where ``other`` has it."""
    where = "under /v1" if urlsplit(other).path.rstrip("/").endswith("/v1") else "without /v1"
    return f"this server answers {where}: try {other}"


def listed_name(model: str, listed: Sequence[str]) -> str | None:
    """The name in a server's model list that ``model`` asks for, or None when the server does not serve it.

    Exact, or with Ollama's implicit tag: ``all-minilm`` asks for ``all-minilm:latest`` (Ollama lists the tag,
    and answers a request without it with that model).
    """
    if model in listed:
        return model
    if ":" not in model and f"{model}:latest" in listed:
        return f"{model}:latest"
    return None


def read_key(env_name: str, base_urls: Sequence[str]) -> str:
    """The key in ``env_name``; a placeholder for local servers when it is unset.

    Raises:
        EndpointError: the variable is unset (or empty) and a server is OpenAI's own, which needs a key.
    """
    key = os.environ.get(env_name, "").strip()
    if key:
        return key
    hosted = [url for url in base_urls if (urlsplit(url).hostname or "") in _HOSTED]
    if hosted:
        raise EndpointError(f"{hosted[0]} needs a key, and the environment variable {env_name} is not set; set it "
                            "(or name another variable with --api-key-env).")
    logger.info("No key: %s is unset; the servers are sent none.", env_name)
    return _NO_KEY


@dataclass
class Server:
    """One server of the pool, with what happened to it (for the progress line and the closing summary)."""

    url: str
    client: Any = None  # openai.AsyncOpenAI
    alive: bool = True
    answered: int = 0
    #: Tries asked again, by the client or by the pool.
    retried: int = 0
    #: Answers of 429 (rate limited).
    rate_limited: int = 0
    last_error: str = ""
    #: The waits the pool did before asking again (the client's own waits are not listed).
    waits: list[float] = field(default_factory=list)
    #: When its present run of 429s began (monotonic seconds), None while it answers.
    rate_limited_since: float | None = None
    #: Whether a wait of its present run of faults was logged (the first one is a warning, the rest are not).
    wait_logged: bool = False
    #: How the caller asks this server, where it adapts to it (the judge: ``response_format json_schema``);
    #: empty when it asks every server alike. Shown in :meth:`summary`.
    mode: str = ""

    def summary(self) -> str:
        """``http://a/v1: 120 answered, 3 retried (2 rate-limited)``, then its mode, or why it was given up on."""
        state = f"; {self.mode}" if self.mode else ""
        state = state if self.alive else f"; given up: {self.last_error}"
        return f"{self.url}: {self.answered} answered, {self.retried} retried ({self.rate_limited} rate-limited){state}"


class _ServerDown(Exception):
    pass


class _Unanswered(Exception):
    """No whole answer: the request's time ran out, or the connection broke while the answer came."""


_STOP = object()


class EndpointPool(Generic[T, R]):
    """Servers pulling requests from one queue, each with a bounded number in flight.

    Args:
        base_urls: the servers (``http://host:8000/v1``); each gets ``concurrency`` requests at a time.
        key_env: the environment variable holding the key.
        concurrency: requests in flight per server.
        timeout: seconds the client waits for a connection and for each read of a try, and the pool for a whole
            answer's body, before the request is retried.
        limits: waits, sizes and retries (default: :meth:`EndpointLimits.from_environment`).

    Attributes:
        on_wait: called with one short text whenever a shown wait begins or ends (the waits still running,
            server by server; empty when none is left), e.g. a progress bar's ``set_postfix_str``.

    Raises:
        ValueError: no server, a URL that is not a base URL, a concurrency below 1, or a limit set wrong in
            the environment.
        EndpointError: OpenAI's own server without a key.
    """

    def __init__(self, base_urls: Sequence[str], *, concurrency: int, key_env: str = DEFAULT_KEY_ENV,
                 timeout: float = DEFAULT_TIMEOUT, limits: EndpointLimits | None = None) -> None:
        import openai

        urls = list(dict.fromkeys(check_base_url(u) for u in base_urls))
        if not urls:
            raise InvalidInput("No server given: pass at least one base URL (e.g. http://127.0.0.1:8000/v1).")
        if concurrency < 1:
            raise InvalidInput(f"concurrency must be at least 1, not {concurrency}.")
        self.limits = limits if limits is not None else EndpointLimits.from_environment()
        self.key_env = key_env
        key = read_key(key_env, urls)
        self._secret = key if key != _NO_KEY and len(key) >= MIN_REDACTED_LENGTH else None
        self.servers = [Server(url) for url in urls]
        for server in self.servers:
            hooks = {"request": [self._counting(server)], "response": [self._looked_at(server)]}
            server.client = openai.AsyncOpenAI(base_url=server.url, api_key=key, timeout=timeout,
                                               max_retries=self.limits.max_retries,
                                               http_client=openai.DefaultAsyncHttpxClient(event_hooks=hooks))
        self.concurrency = concurrency
        self.timeout = timeout
        self.on_wait: Callable[[str], None] | None = None
        self._waiting: dict[int, tuple[Server, float, str]] = {}
        self._wait_ids = 0

    @property
    def workers(self) -> int:
        """Requests in flight at most, over all servers."""
        return self.concurrency * len(self.servers)

    def redact(self, text: str) -> str:
        """``text`` with the key replaced by :data:`REDACTED` (what every message about a server goes through)."""
        return text.replace(self._secret, REDACTED) if self._secret else text

    async def serve(self, queue: asyncio.Queue[Any], ask: Callable[[T, Server], tuple[str, Mapping[str, Any]]],
                    done: Callable[[T, R, Server], Awaitable[None] | None], *,
                    refused: Refused[T] | None = None) -> None:
        """POST each item of ``queue`` as ``ask(item, server)`` says, hand its answer to ``done``; until :meth:`stop`.

        Args:
            queue: the items; :meth:`stop` puts the markers that end the workers.
            ask: ``(item, server) -> (path, JSON body)``, the path under the base URL (``/chat/completions``);
                called for every try, so a body may follow what the caller learnt about the server since.
            done: ``(item, answer, server)``: the answer is the parsed JSON body (a streamed chat answer folded
                into one completion), the key already redacted from it. It may put more items on the queue (a
                protocol's next step).
            refused: ``(item, server, what the server said, status) -> send again?``, for a request the server
                refused with 400 or 422, or failed with a 5xx after the client's retries (so without a change the
                server is given up on): True when the caller changed how it asks that server (``ask`` now gives
                another body), so the request is sent again at once; False (or no callback) stops the run with
                one sentence for a refusal, and gives the server up for a 5xx. It must not say True for ever.

        Returns when every worker has taken its stop marker.

        Raises:
            EndpointError: a fault retrying cannot mend, or every server given up on.
        """
        workers = [asyncio.create_task(self._worker(server, queue, ask, done, refused))
                   for server in self.servers for _ in range(self.concurrency)]
        try:
            while True:
                finished, _ = await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
                for task in finished:
                    if task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
                if len(finished) == len(workers):
                    return
                workers = [task for task in workers if task not in finished]
                if not any(server.alive for server in self.servers):
                    raise self._every_server_given_up()
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            self._waiting.clear()

    async def get_json(self, server: Server, path: str) -> Any:
        """``GET path`` on one server (``/models``), asked again after a 429, a 5xx or a timeout; the parsed answer.

        A server still loading its model answers 503 for a while: the client's retries, then the pool's for a
        429 it was handed or an answer broken off, each wait capped as the pool's are.

        Raises:
            openai.APIStatusError: the last answer's error status (``NotFoundError`` for a server without the
                route), or the first that retrying cannot mend.
            openai.APIConnectionError: the server cannot be reached.
            EndpointError: the answer is too large, not UTF-8 or not JSON, or never came whole.
        """
        import openai

        failures = 0
        while True:
            try:
                return await self._fetch(server, "GET", path, None)
            except (openai.RateLimitError, _Unanswered, TimeoutError) as error:
                failures += 1
                server.retried += 1
                if failures > self.limits.max_retries or _quota_exhausted(error):
                    if isinstance(error, openai.APIError):
                        raise
                    raise EndpointError(f"{server.url} did not answer GET {path}: {self._describe(error)} "
                                        f"({failures} tries).") from None
                await self._sleep(server, *self._retry_wait(server, error, failures - 1))

    async def describe_not_found(self, server: Server, method: str, path: str, error: BaseException, *,
                                 model: Any = None) -> str:
        """One sentence for a 404 on ``path``: the URL tried, and what the server itself says is wrong.

        A 404 means a wrong path as often as an unknown model, so the server is asked (one ``GET /models`` each,
        not retried): where the base URL's model list answers, the model is blamed only when that list lacks it
        (else the server has no such route: it serves other requests); where it does not, the other prefix
        (:func:`other_bases`) is tried, and a server answering there is named with the base URL to use.
        """
        said = self._describe(error)
        tried = f"{method} {server.url}{path}"
        listed = await self.model_list(server, server.url)
        if listed is not None and isinstance(model, str) and listed_name(model, listed) is None:
            shown = ", ".join(sorted(listed)[:10]) or "none"
            advice = f"it serves {shown}, not {model!r}: check --model"
        elif listed is not None:
            advice = (f"its model list answers, so this server has no {path} route: check that it serves such "
                      "requests (how it was started)")
        else:
            other = await self.other_base(server)
            advice = (prefix_advice(other) if other is not None else
                      "check that this base URL is the server's API (it usually ends in /v1)")
        return self.redact(f"{server.url} refused a request: {said} at {tried}; {advice}.")

    async def other_base(self, server: Server) -> str | None:
        """The first of :func:`other_bases` whose model list answers: the base URL the server really has."""
        for other in other_bases(server.url):
            if await self.model_list(server, other) is not None:
                return other
        return None

    async def model_list(self, server: Server, base_url: str) -> list[str] | None:
        """The model names ``GET base_url/models`` lists (one try, at most 10 s), or None when none answers."""
        import httpx2
        import openai

        try:
            answer = await self._fetch(server, "GET", f"{base_url.rstrip('/')}/models", None,
                                       timeout=min(self.timeout, 10.0), retries=0)
        except (openai.APIError, EndpointError, _Unanswered, TimeoutError, httpx2.HTTPError):
            return None
        entries = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(entries, list) or not all(isinstance(entry, dict) and isinstance(entry.get("id"), str)
                                                    for entry in entries):
            return None
        return [entry["id"] for entry in entries]

    def stop(self, queue: asyncio.Queue[Any]) -> None:
        """Put one stop marker per worker on ``queue`` (after the last item)."""
        for _ in range(self.workers):
            queue.put_nowait(_STOP)

    async def close(self) -> None:
        """Close every client's connections."""
        for server in self.servers:
            await server.client.close()

    def waiting(self) -> str:
        """The shown waits still running, one per server (its longest): ``http://a/v1: HTTP 503, waiting 8 s``."""
        now, longest = time.monotonic(), {}
        for server, until, why in self._waiting.values():
            if server.url not in longest or until > longest[server.url][0]:
                longest[server.url] = (until, why)
        return "; ".join(f"{url}: {why}, waiting {_seconds(max(0.0, until - now))}"
                         for url, (until, why) in longest.items())

    # ------------------------------------------------------------------ one request

    async def _worker(self, server: Server, queue: asyncio.Queue[Any],
                      ask: Callable[[T, Server], tuple[str, Mapping[str, Any]]],
                      done: Callable[[T, R, Server], Awaitable[None] | None],
                      refused: Refused[T] | None) -> None:
        while server.alive:
            item = await queue.get()
            if item is _STOP:
                return
            try:
                result = await self._send(server, ask, item, refused)
            except _ServerDown:
                queue.put_nowait(item)  # another server takes it
                if not any(s.alive for s in self.servers):
                    raise self._every_server_given_up() from None
                return
            server.answered += 1
            outcome = done(item, result, server)
            if outcome is not None:
                await outcome

    async def _send(self, server: Server, ask: Callable[[T, Server], tuple[str, Mapping[str, Any]]], item: T,
                    refused: Refused[T] | None) -> Any:
        import openai

        failures = 0
        while True:
            if not server.alive:
                raise _ServerDown
            path, body = ask(item, server)
            try:
                answer = await self._fetch(server, "POST", path, body)
            except openai.RateLimitError as error:  # the client's retries spent, or a wait handed to the pool
                if _quota_exhausted(error):
                    raise EndpointError(self.redact(
                        f"{server.url} refused a request: {self._describe(error)}; the account's quota is used up, "
                        "which waiting does not mend: check its plan and billing (or use another server).")) from None
                server.retried += 1
                now = time.monotonic()
                if server.rate_limited_since is None:
                    server.rate_limited_since = now
                limited_for = now - server.rate_limited_since
                patience = self.limits.rate_limit_patience
                if limited_for >= patience:
                    self._give_up(server, f"it answered nothing but 429 (rate limited) for {limited_for:.0f} s "
                                          f"({server.rate_limited} times in all); lower the concurrency or try later")
                    raise _ServerDown from None
                wait, why = self._retry_wait(server, error, self.limits.max_retries + 1)
                await self._sleep(server, min(wait, patience - limited_for), why)
            except (_Unanswered, TimeoutError) as error:  # the body broke off or took too long: the pool's to retry
                failures += 1
                server.last_error = self._describe(error)
                if failures > self.limits.max_retries:
                    self._give_up(server, server.last_error, failures=failures)
                    raise _ServerDown from None
                server.retried += 1
                await self._sleep(server, *self._retry_wait(server, error, failures - 1))
            except (openai.APIConnectionError, openai.InternalServerError) as error:  # after the client's retries
                server.last_error = self._describe(error)
                if (isinstance(error, openai.InternalServerError) and refused is not None
                        and refused(item, server, self.redact(_said(error)), status=error.status_code)):
                    failures = 0
                    continue  # the caller asks this server differently now
                self._give_up(server, server.last_error, failures=self.limits.max_retries + 1)
                raise _ServerDown from None
            except openai.APIStatusError as error:
                said = self.redact(_said(error))
                if refused is not None and error.status_code in (400, 422) and refused(
                        item, server, said, status=error.status_code):
                    continue  # the caller asks this server differently now
                if error.status_code == 404:
                    raise EndpointError(await self.describe_not_found(server, "POST", path, error,
                                                                      model=body.get("model"))) from None
                hint = f"; check the key in ${self.key_env}" if error.status_code in (401, 403) else ""
                raise EndpointError(f"{server.url} refused a request: {self._describe(error)}{hint}.") from None
            else:
                server.rate_limited_since = None
                server.wait_logged = False
                return answer

    async def _fetch(self, server: Server, method: str, path: str, body: Mapping[str, Any] | None, *,
                     timeout: float | None = None, retries: int | None = None) -> Any:
        """One request (the client's tries); its answer read (at most ``max_answer_bytes``), redacted, decoded, parsed.

        ``timeout`` (default the pool's) bounds the client's connections and reads, and the reading of the body in
        all; ``retries`` (default the client's) how often the client asks again.
        """
        import httpx2

        timeout = self.timeout if timeout is None else timeout
        options: dict[str, Any] = {"timeout": timeout}
        if retries is not None:
            options["max_retries"] = retries
        if method == "GET":
            response = await server.client.get(path, cast_to=httpx2.Response, stream=True, options=options)
        else:
            response = await server.client.post(path, body=body, cast_to=httpx2.Response, stream=True,
                                                options=options)
        try:
            raw = await _within(self._read(server, path, response), timeout)
        finally:
            await response.aclose()
        return self._parse(server, path, raw, response.headers.get("content-type", ""))

    async def _read(self, server: Server, path: str, response: Any) -> bytes:
        """The body of ``response``, at most ``max_answer_bytes`` (a reset or bad gzip: :class:`_Unanswered`)."""
        import httpx2

        limit = self.limits.max_answer_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise self._too_large(server, path, int(declared))
        parts, size = [], 0
        try:
            async for part in response.aiter_bytes():  # decompressed: the limit holds for a gzip bomb too
                size += len(part)
                if size > limit:
                    raise self._too_large(server, path, size)
                parts.append(part)
        except (httpx2.RequestError, httpx2.StreamError) as error:  # a reset, a read timeout, bad gzip
            raise _Unanswered(f"the answer broke off after {size:,} bytes ({type(error).__name__})") from None
        return b"".join(parts)

    # ------------------------------------------------------------------ the client's tries, looked at

    def _counting(self, server: Server) -> Callable[[Any], Awaitable[None]]:
        """An event hook on each request ``server``'s client sends: a try the client asks again is counted."""

        async def hook(request: Any) -> None:
            if request.headers.get("x-stainless-retry-count", "0") not in ("", "0"):
                server.retried += 1

        return hook

    def _looked_at(self, server: Server) -> Callable[[Any], Awaitable[None]]:
        """An event hook on each answer ``server``'s client receives, before the client decides to ask again.

        A 429 is counted; one the pool must see at once is marked ``x-should-retry: false`` (which the client
        obeys, raising it): a used-up quota (no wait mends it), and a ``Retry-After`` the client would wait
        unshown (:attr:`EndpointLimits.shown_wait` or more) or beyond :attr:`EndpointLimits.longest_wait`.
        """

        async def hook(response: Any) -> None:
            if response.status_code != 429:
                return
            server.rate_limited += 1
            asked, _ = mteb_internals.openai_retry_wait(server.client, response.headers, retries_taken=0)
            declared = response.headers.get("content-length", "")
            if not (declared.isdigit() and int(declared) > self.limits.max_answer_bytes):
                await response.aread()  # an error's few bytes, which the client reads too
            quota = _quota_in(response.content if response.is_stream_consumed else b"")
            if quota or (asked is not None and (asked >= self.limits.shown_wait or asked > self.limits.longest_wait)):
                response.headers["x-should-retry"] = "false"

        return hook

    def _parse(self, server: Server, path: str, raw: bytes, content_type: str) -> Any:
        if self._secret:
            raw = raw.replace(self._secret.encode("utf-8"), REDACTED.encode("utf-8"))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise EndpointError(f"{server.url} answered {path} with bytes that are not UTF-8 text (byte "
                                f"0x{raw[error.start]:02x} at position {error.start:,} of {len(raw):,}), so not with "
                                "the OpenAI API's JSON; check that this base URL is the server's API (it usually "
                                "ends in /v1).") from None
        if content_type.split(";")[0].strip().lower() == "text/event-stream" or text.lstrip().startswith("data:"):
            try:
                return chat_from_event_stream(text)
            except _StreamError as error:
                raise _Unanswered(f"its answer's stream ended in an error: {error}") from None
            except ValueError as error:
                raise EndpointError(f"{server.url} answered {path} with a stream of server-sent events "
                                    f"({content_type or 'no Content-Type'}, {len(raw):,} bytes) that is not a "
                                    f"chat-completion stream: {error}; check that this base URL is a "
                                    "chat-completions server (it usually ends in /v1).") from None
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            shown = " ".join(text[:80].split())
            raise EndpointError(f"{server.url} answered {path} with something that is not JSON "
                                f"({content_type or 'no Content-Type'}, {len(raw):,} bytes, beginning {shown!r}); "
                                "check that this base URL is the server's API (it usually ends in /v1).") from None

    def _too_large(self, server: Server, path: str, size: int) -> EndpointError:
        return EndpointError(f"{server.url} answered {path} with more than {self.limits.max_answer_bytes:,} bytes "
                             f"({size:,} so far), more than any answer to these requests should be, so it was not "
                             "read; check that this base URL is the server's API (for embeddings, a smaller "
                             "--batch-size also makes each answer smaller).")

    # ------------------------------------------------------------------ waits

    def _retry_wait(self, server: Server, error: BaseException, retries_taken: int) -> tuple[float, str]:
        """How long to wait before asking again after ``error``, and why (for the progress line).

        What the client would wait (:func:`~disastir_mteb.util.mteb_internals.openai_retry_wait`): what the
        answer's ``Retry-After`` asks, at most :attr:`EndpointLimits.longest_wait`, else the client's backoff
        after ``retries_taken`` retries.
        """
        import openai

        response = getattr(error, "response", None)
        asked, backoff = mteb_internals.openai_retry_wait(server.client, getattr(response, "headers", None),
                                                          retries_taken=retries_taken)
        status = getattr(error, "status_code", None)
        why = ("429 (rate limited)" if isinstance(error, openai.RateLimitError) else
               f"HTTP {status}" if status else "no answer")
        if asked is None:
            return backoff, why
        if asked > self.limits.longest_wait:
            return self.limits.longest_wait, (f"{why}: it asked for {_seconds(asked)}, capped at "
                                              f"{_seconds(self.limits.longest_wait)}")
        return asked, why

    async def _sleep(self, server: Server, seconds: float, why: str) -> None:
        """Wait ``seconds`` before a retry; a wait worth showing is shown (``on_wait``) while it lasts."""
        seconds = max(0.0, seconds)
        server.waits.append(seconds)
        logger.debug("%s: %s, waiting %.2f s", server.url, why, seconds)
        if seconds < self.limits.shown_wait and ", capped at " not in why:
            await asyncio.sleep(seconds)
            return
        self._wait_ids += 1
        number = self._wait_ids
        self._waiting[number] = (server, time.monotonic() + seconds, why)
        self._show(server)
        try:
            await asyncio.sleep(seconds)
        finally:
            self._waiting.pop(number, None)
            self._show(None)

    def _show(self, server: Server | None) -> None:
        text = self.waiting()
        if self.on_wait is not None:
            self.on_wait(text)
        elif server is not None and not server.wait_logged:
            server.wait_logged = True
            logger.warning("%s", text)

    # ------------------------------------------------------------------ giving up

    def _give_up(self, server: Server, why: str, *, failures: int | None = None) -> None:
        """Mark ``server`` dead; a warning while others are left (the last one's fate is the run's one sentence)."""
        server.last_error = self.redact(why)
        if server.alive:
            server.alive = False
            tries = f" after {failures} failed tries in a row" if failures else ""
            if any(other.alive for other in self.servers):
                logger.warning("Giving up on %s%s (%s); the other servers take its work.", server.url, tries,
                               server.last_error)

    def _every_server_given_up(self) -> EndpointError:
        return EndpointError(self.redact("Every server was given up on: "
                                         + "; ".join(server.summary() for server in self.servers) + "."))

    def _describe(self, error: BaseException) -> str:
        """``HTTP 500 (the server's first line)``, ``no whole answer within 120 s``...: the key redacted."""
        if isinstance(error, TimeoutError):
            return f"no whole answer within {self.timeout:g} s"
        if isinstance(error, _Unanswered):
            return str(error)
        status = getattr(error, "status_code", None)
        message = self.redact(str(getattr(error, "message", "") or error)).strip()
        message = message.splitlines()[0][:200] if message else ""
        if message.endswith(".") and not message.endswith(".."):  # our sentence ends it: "Connection error." once
            message = message[:-1]
        kind = type(error).__name__
        return f"HTTP {status} ({message})" if status else f"{kind}: {message}" if message else kind


async def _within(coroutine: Awaitable[R], seconds: float) -> R:
    """``await coroutine``, or :class:`TimeoutError` after ``seconds``; a cancellation from outside always passes.

    Not ``asyncio.wait_for``: up to Python 3.11 it loses a cancellation that meets the answer at the same moment,
    and a pool worker that missed its cancellation waits on the queue for ever (``asyncio.timeout`` is 3.11+).
    """
    task = asyncio.ensure_future(coroutine)
    try:
        finished, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not finished:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)  # its connection closed before the retry
        raise TimeoutError(f"no whole answer within {seconds:g} s")
    return task.result()


def _said(error: Any) -> str:
    """What a refusal says: its message, and the parameter it names where the message does not (OpenAI's ``param``)."""
    message = " ".join(str(getattr(error, "message", "") or error).split())
    body = getattr(error, "body", None)
    param = body.get("param") if isinstance(body, dict) else None
    return f"{message} (param {param!r})" if isinstance(param, str) and param and param not in message else message


class _StreamError(ValueError):
    """A stream of server-sent events whose event is an error (``{"error": ...}``): the server failed mid-answer."""


def chat_from_event_stream(text: str) -> dict[str, Any]:
    r"""The one chat completion a stream of server-sent ``chat.completion.chunk`` events spells.

    ``transformers serve`` answers every chat request this way, ``"stream": false`` or not: ``data: {chunk}``
    events (the first with the role, then one per piece of text, then one with ``finish_reason``), with or
    without a closing ``data: [DONE]``. The first choice's ``delta.content`` pieces are joined; the last
    ``finish_reason`` and the last ``usage`` (sent in a chunk of its own when asked for) are kept. Comment
    lines (``:``) and the ``event``/``id``/``retry`` fields are skipped, as the SSE format says.

    Returns:
        ``{"id", "object": "chat.completion", "created", "model", "choices": [{"index": 0, "message":
        {"role", "content"}, "finish_reason"}], "usage"}``; content None when no chunk carried text.

    Raises:
        ValueError: not such a stream (an event that is not JSON, not an object, without a ``choices`` list,
            or no chunk at all), saying which event (numbered from 1) and what it held, clipped.

    Examples:
        >>> chat_from_event_stream('data: {"choices": [{"delta": {"role": "assistant"}}]}\n\n'
        ...                        'data: {"choices": [{"delta": {"content": "Ye"}}]}\n\n'
        ...                        'data: {"choices": [{"delta": {"content": "s"}, "finish_reason": "stop"}]}\n\n'
        ...                        'data: [DONE]\n\n')["choices"][0]["message"]["content"]
        'Yes'
    """
    events = []
    for number, block in enumerate(re.split(r"\r?\n\r?\n|\r\r", text.strip()), start=1):
        data = [line[5:].removeprefix(" ") for line in re.split(r"\r?\n|\r", block) if line.startswith("data:")]
        if data:
            events.append((number, "\n".join(data)))
    pieces: list[str] = []
    first: dict[str, Any] | None = None
    role, finish, usage = "assistant", None, None
    for number, data in events:
        if data.strip() == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            raise InvalidInput(f"event {number} is not JSON ({_clip(data)})") from None
        if isinstance(chunk, dict) and "error" in chunk and "choices" not in chunk:
            raise _StreamError(_clip(json.dumps(chunk["error"], ensure_ascii=False)))
        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
            raise InvalidInput(f"event {number} is no chat.completion.chunk (no 'choices' list): {_clip(data)}")
        first = first if first is not None else chunk
        choice = chunk["choices"][0] if chunk["choices"] and isinstance(chunk["choices"][0], dict) else {}
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        if isinstance(delta.get("content"), str):
            pieces.append(delta["content"])
        role = delta["role"] if isinstance(delta.get("role"), str) else role
        finish = choice.get("finish_reason") or finish
        usage = chunk["usage"] if isinstance(chunk.get("usage"), dict) else usage
    if first is None:
        raise InvalidInput(f"it holds no chat.completion.chunk event (it begins {_clip(text.strip())})")
    completion: dict[str, Any] = {
        "id": first.get("id"), "object": "chat.completion", "created": first.get("created"),
        "model": first.get("model"),
        "choices": [{"index": 0, "message": {"role": role, "content": "".join(pieces) if pieces else None},
                     "finish_reason": finish}]}
    if usage is not None:
        completion["usage"] = usage
    return completion


def _clip(text: str, width: int = 80) -> str:
    """``text`` as ``repr`` shows it, cut to ``width`` characters: what a sentence quotes of a server's answer."""
    shown = repr(text)
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def _seconds(value: float) -> str:
    """``0.25 s``, ``8 s``, ``100,000 s``: a wait as the progress line shows it."""
    return f"{value:.2g} s" if value < 9.5 else f"{value:,.0f} s"


def _quota_exhausted(error: Any) -> bool:
    """A 429 that says the account has no credit left (OpenAI's ``insufficient_quota``): no wait mends it."""
    return "insufficient_quota" in (getattr(error, "code", None), getattr(error, "type", None))


def _quota_in(raw: bytes) -> bool:
    """Whether an error's body says the account's quota is used up (OpenAI's ``{"error": {"code": ...}}``)."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    error = body.get("error", body) if isinstance(body, dict) else None
    return isinstance(error, dict) and "insufficient_quota" in (error.get("code"), error.get("type"))

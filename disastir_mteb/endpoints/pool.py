"""Several OpenAI-compatible servers sharing one stream of requests: what no client does for them.

Each server's ``openai.AsyncOpenAI`` does every retry, its HTTP client's event hooks count the tries and read each
answer within bounds. The pool adds only what no client does: one queue over several servers, long waits capped and
shown, a server answering only 429 given up, requests sent again in another answer format, and the key kept out of
whatever a server sends back; in one module, because these share each server's state.
"""
from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import os
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import urlsplit

from disastir_mteb.endpoints.answers import parsed_answer, stream_error
from disastir_mteb.endpoints.urls import check_base_url, listed_name, other_bases, prefix_advice
from disastir_mteb.util.errors import DisastirError, InvalidInput

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_EMBEDDING_CONCURRENCY", "DEFAULT_KEY_ENV", "DEFAULT_TIMEOUT", "LONGEST_WAIT_ENV",
           "MIN_REDACTED_LENGTH", "RATE_LIMIT_PATIENCE_ENV", "REDACTED", "EndpointError", "EndpointLimits",
           "EndpointPool", "Server", "asked_wait", "read_key"]

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
        longest_wait: the longest single wait before a retry, in seconds; a longer ``Retry-After`` is shortened to it,
            and shown. OpenAI's limits reset within a minute, and its client waits no more than two minutes itself.
        rate_limit_patience: seconds a server may answer nothing but 429 before it is given up on: a per-minute quota
            has refilled five times over by then; one that has not is a daily quota, which waiting does not mend.
        shown_wait: waits of at least this many seconds are shown (``on_wait``); shorter ones are routine.
        max_answer_bytes: the largest answer read: room for 256 texts' 8,192-dimensional vectors as decimal JSON.
        max_retries: how often each server's client asks again itself before the server is given up on; its waits
            (0.5, 1, 2, 4 s) sum to about 7 s, time for a restarting server to come back, each under ``shown_wait``.
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
    #: Tries asked again, by the client or within the pool's rate-limit patience.
    retried: int = 0
    #: Answers of 429 (rate limited).
    rate_limited: int = 0
    last_error: str = ""
    #: The waits the pool did within its rate-limit patience (the client's own waits are not listed).
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


_STOP = object()


class EndpointPool(Generic[T, R]):
    """Servers pulling requests from one queue, ``concurrency`` requests in flight each.

    ``timeout`` bounds a try's connection and each read (the client's) and a whole answer's body (the pool's);
    ``limits`` defaults to :meth:`EndpointLimits.from_environment`. ``on_wait`` is called with a short text whenever a
    shown wait begins or ends (empty when none is left), e.g. a progress bar's ``set_postfix_str``.

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
        self._bodies: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()  # read by the hook
        self.servers = [Server(url) for url in urls]
        for server in self.servers:
            server.client = openai.AsyncOpenAI(base_url=server.url, api_key=key, timeout=timeout,
                                               max_retries=self.limits.max_retries,
                                               http_client=openai.DefaultAsyncHttpxClient(
                                                   event_hooks=self._hooks(server)))
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
        """POST each item of ``queue`` as ``ask`` says and hand its answer to ``done``, until :meth:`stop`'s markers.

        Args:
            queue: the items.
            ask: ``(item, server) -> (path, JSON body)``, called for every try, so a body may follow what the caller
                learnt about the server.
            done: ``(item, answer, server)``, the answer parsed and redacted; it may put more items on the queue.
            refused: ``(item, server, said, status) -> send again?`` for a 400 or 422, or a 5xx after the client's
                retries: True when ``ask`` now gives that server another body; False (or no callback) stops the run for
                a refusal and gives the server up for a 5xx. It must not say True for ever.

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
        """``GET path`` on one server (``/models``), with the client's retries (a server loading its model answers 503).

        Raises:
            openai.APIStatusError: the last answer's error status (``NotFoundError`` for a server without the route).
            openai.APIConnectionError: the server cannot be reached, or its answer never came whole.
            EndpointError: the answer is too large, not UTF-8 or not JSON.
        """
        return await self._fetch(server, "GET", path, None)

    async def describe_not_found(self, server: Server, method: str, path: str, error: BaseException, *,
                                 model: Any = None) -> str:
        """One sentence for a 404 on ``path``: the URL tried, and what the server itself says is wrong.

        A 404 means a wrong path as often as an unknown model, so the server's model list is asked: the model is blamed
        only when the list lacks it, and where no list answers, the other prefix is tried.
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
        except (openai.APIError, EndpointError, httpx2.HTTPError):
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
        """``item``'s answer from ``server``, sent again only where no client would (a 429, or ``refused`` says so)."""
        import openai

        while server.alive:
            path, body = ask(item, server)
            try:
                answer = await self._fetch(server, "POST", path, body)
            except openai.RateLimitError as error:
                await self._rate_limited(server, error)
            except (openai.APIConnectionError, openai.InternalServerError) as error:  # after the client's tries
                server.last_error = self._describe(error)
                if (isinstance(error, openai.InternalServerError) and refused is not None
                        and refused(item, server, self.redact(_said(error)), status=error.status_code)):
                    continue  # the caller asks this server differently now
                self._give_up(server, server.last_error, failures=server.client.max_retries + 1)
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
        raise _ServerDown

    async def _rate_limited(self, server: Server, error: Any) -> None:
        """After a 429 the client did not retry: stop the run (no quota left), give the server up, or wait."""
        if _quota_exhausted(error):
            raise EndpointError(self.redact(
                f"{server.url} refused a request: {self._describe(error)}; the account's quota is used up, which "
                "waiting does not mend: check its plan and billing (or use another server).")) from None
        server.retried += 1
        now = time.monotonic()
        if server.rate_limited_since is None:
            server.rate_limited_since = now
        limited_for, patience = now - server.rate_limited_since, self.limits.rate_limit_patience
        if limited_for >= patience:
            self._give_up(server, f"it answered nothing but 429 (rate limited) for {limited_for:.0f} s "
                                  f"({server.rate_limited} times in all); lower the concurrency or try later")
            return
        asked = asked_wait(error.response.headers)
        if asked is None:
            return
        longest = self.limits.longest_wait
        why = "429 (rate limited)" + (f": it asked for {_seconds(asked)}, capped at {_seconds(longest)}"
                                      if asked > longest else "")
        await self._sleep(server, min(asked, longest, patience - limited_for), why, shown=asked > longest)

    async def _fetch(self, server: Server, method: str, path: str, body: Mapping[str, Any] | None, *,
                     timeout: float | None = None, retries: int | None = None) -> Any:
        """One request (the client's tries); its answer as the hook read it, redacted, decoded and parsed."""
        import httpx2

        options: dict[str, Any] = {"timeout": self.timeout if timeout is None else timeout}
        if retries is not None:
            options["max_retries"] = retries
        if method == "GET":
            response = await server.client.get(path, cast_to=httpx2.Response, stream=True, options=options)
        else:
            response = await server.client.post(path, body=body, cast_to=httpx2.Response, stream=True,
                                                options=options)
        await response.aclose()
        raw = self._bodies.pop(response, b"")  # a 2xx was read by the hook; anything else holds nothing to read
        return self._parse(server, path, raw, response.headers.get("content-type", ""))

    # ------------------------------------------------------------------ the client's tries, looked at

    def _hooks(self, server: Server) -> dict[str, list[Callable[[Any], Awaitable[None]]]]:
        """The event hooks of ``server``'s HTTP client, which see each try before the client decides to retry it.

        They count retries, read a 2xx answer within bounds (so the client retries one broken off), and tell the client
        ``x-should-retry: false`` for a 429 the pool waits itself: a used-up quota, or a wait too long to leave unshown.
        """

        async def on_request(request: Any) -> None:
            if request.headers.get("x-stainless-retry-count", "0") not in ("", "0"):
                server.retried += 1

        async def on_response(response: Any) -> None:
            if response.is_success:
                self._bodies[response] = await self._read(server, response)
            if response.status_code != 429:
                return
            server.rate_limited += 1
            declared = response.headers.get("content-length", "")
            if not (declared.isdigit() and int(declared) > self.limits.max_answer_bytes):
                await response.aread()  # an error's few bytes, which the client reads too
            asked, longest, method = asked_wait(response.headers), self.limits.longest_wait, response.request.method
            if asked is None:
                for name in ("retry-after-ms", "retry-after"):
                    response.headers.pop(name, None)
            elif method == "GET" and asked > longest:
                response.headers["retry-after-ms"] = f"{longest * 1000:.0f}"
            if _quota_in(response.content if response.is_stream_consumed else b"") or (
                    method != "GET" and asked is not None and (asked >= self.limits.shown_wait or asked > longest)):
                response.headers["x-should-retry"] = "false"

        return {"request": [on_request], "response": [on_response]}

    async def _read(self, server: Server, response: Any) -> bytes:
        """A 2xx answer's body: at most ``max_answer_bytes``, within the request's read timeout in all.

        Raises:
            EndpointError: more bytes than that (asking again would not change it).
            httpx2.ReadError, httpx2.ReadTimeout: the body broke off, took too long, or is a stream ending in an error
                event: what the client retries.
        """
        import httpx2

        base = urlsplit(server.url).path.rstrip("/")
        path = response.request.url.path
        path = path[len(base):] if base and path.startswith(base + "/") else path
        seconds = float((response.request.extensions.get("timeout") or {}).get("read") or self.timeout)
        limit, size, parts = self.limits.max_answer_bytes, 0, []
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise self._too_large(server, path, int(declared))

        async def body() -> bytes:
            nonlocal size
            async for part in response.aiter_bytes():  # decompressed: the limit holds for a gzip bomb too
                size += len(part)
                if size > limit:
                    raise self._too_large(server, path, size)
                parts.append(part)
            return b"".join(parts)

        try:
            raw = await _within(body(), seconds)
        except TimeoutError:
            raise _unanswered(server, response, f"no whole answer within {seconds:g} s", timed_out=True) from None
        except (httpx2.RequestError, httpx2.StreamError) as error:  # a reset, a read timeout, bad gzip
            raise _unanswered(server, response, f"the answer broke off after {size:,} bytes "
                                                f"({type(error).__name__})") from None
        failed = stream_error(raw, response.headers.get("content-type", ""))
        if failed is not None:
            raise _unanswered(server, response, self.redact(f"its answer's stream ended in an error: {failed}"))
        return raw

    def _parse(self, server: Server, path: str, raw: bytes, content_type: str) -> Any:
        if self._secret:
            raw = raw.replace(self._secret.encode("utf-8"), REDACTED.encode("utf-8"))
        try:
            return parsed_answer(raw, content_type)
        except ValueError as error:
            raise EndpointError(f"{server.url} answered {path} with {error}.") from None

    def _too_large(self, server: Server, path: str, size: int) -> EndpointError:
        return EndpointError(f"{server.url} answered {path} with more than {self.limits.max_answer_bytes:,} bytes "
                             f"({size:,} so far), more than any answer to these requests should be, so it was not "
                             "read; check that this base URL is the server's API (for embeddings, a smaller "
                             "--batch-size also makes each answer smaller).")

    # ------------------------------------------------------------------ waits, giving up

    async def _sleep(self, server: Server, seconds: float, why: str, *, shown: bool) -> None:
        """Wait ``seconds`` before sending again; ``shown``, or ``shown_wait`` or more, is shown while it lasts."""
        seconds = max(0.0, seconds)
        server.waits.append(seconds)
        logger.debug("%s: %s, waiting %.2f s", server.url, why, seconds)
        if seconds < self.limits.shown_wait and not shown:
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
        unanswered = getattr(error.__cause__, "unanswered", None)  # the hook's reason, under the client's error
        if isinstance(unanswered, str):
            return unanswered
        status = getattr(error, "status_code", None)
        message = self.redact(str(getattr(error, "message", "") or error)).strip()
        message = message.splitlines()[0][:200] if message else ""
        if message.endswith(".") and not message.endswith(".."):  # our sentence ends it: "Connection error." once
            message = message[:-1]
        kind = type(error).__name__
        return f"HTTP {status} ({message})" if status else f"{kind}: {message}" if message else kind


def asked_wait(headers: Mapping[str, str] | None) -> float | None:
    """The seconds a 429's ``retry-after-ms`` or ``Retry-After`` asks for, read as the openai client reads them.

    Seconds or an HTTP date; None where they read as no positive finite time (absent, ``soon``, ``-5``, a date past).

    Examples:
        >>> asked_wait({"retry-after-ms": "250", "Retry-After": "9"}), asked_wait({"Retry-After": "soon"})
        (0.25, None)
    """
    if headers is None:
        return None
    for name, unit in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name) or "") / unit
        except ValueError:
            continue
        return seconds if math.isfinite(seconds) and seconds > 0 else None
    date = email.utils.parsedate_tz(headers.get("retry-after") or "")
    seconds = email.utils.mktime_tz(date) - time.time() if date is not None else 0.0
    return seconds if seconds > 0 else None


def _unanswered(server: Server, response: Any, why: str, *, timed_out: bool = False) -> Exception:
    """What the client retries for an answer that never came whole (a lost connection, a read timeout)."""
    import httpx2

    server.last_error = why
    error = (httpx2.ReadTimeout if timed_out else httpx2.ReadError)(why, request=response.request)
    error.unanswered = why  # type: ignore[attr-defined]
    return error


async def _within(coroutine: Awaitable[R], seconds: float) -> R:
    """``await coroutine``, or :class:`TimeoutError` after ``seconds``; a cancellation from outside always passes.

    Not ``asyncio.wait_for``: up to Python 3.11 it can lose a cancellation that meets the answer, and a worker that
    missed its cancellation waits on the queue for ever.
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

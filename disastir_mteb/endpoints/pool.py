"""Several OpenAI-compatible servers sharing one stream of requests: keys, concurrency, retries, dead servers.

Both the judge (chat completions) and encoding through embedding servers send many small independent
requests to one or more servers speaking OpenAI's protocol (OpenAI itself, vLLM, Ollama, llama.cpp,
text-embeddings-inference). This module is the one place that knows how:

- **The official client.** Each server gets one ``openai.AsyncOpenAI`` with the client's own retries off
  (``max_retries=0``): retries are decided here, where they are counted and can move work to another server.
- **The key** is read from one environment variable (``OPENAI_API_KEY`` unless the user names another) and
  handed to the client; it is never written to a file or a log, and a sentence about a refused key names
  the variable, not its value. Without the variable a local server is sent a placeholder (vLLM, Ollama and
  llama.cpp need none); OpenAI itself is refused before any request.
- **Bounded concurrency**: ``concurrency`` requests in flight per server; the servers pull from one queue,
  so a faster server takes more of the work.
- **Retries with backoff**: 429 waits what ``Retry-After`` (or ``retry-after-ms``) asks, else an
  exponential backoff with jitter; 5xx, timeouts and lost connections back off and retry. A server that
  fails one request :attr:`EndpointPool.max_attempts` times in a row is given up on: its request goes back
  to the queue for the others, and the run stops with one sentence only when no server is left.
- **Errors that retrying cannot mend** (a refused key, an unknown model, a rejected request) stop the run
  with one sentence naming the server and what it said.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_EMBEDDING_CONCURRENCY", "DEFAULT_KEY_ENV", "EndpointError", "EndpointPool", "Server", "read_key",
           "retry_after"]

#: Where the key is read from unless the user names another variable.
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: Requests in flight per embedding server unless the user says otherwise (``--embeddings-concurrency``).
DEFAULT_EMBEDDING_CONCURRENCY = 4
#: What a local server is sent when no key is set (the client insists on one; local servers ignore it).
_NO_KEY = "no-key"
_HOSTED = ("api.openai.com",)

T = TypeVar("T")
R = TypeVar("R")


class EndpointError(OSError):
    """A server fault that stops the run: one sentence naming the server and what went wrong."""


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
    client: Any  # openai.AsyncOpenAI
    alive: bool = True
    answered: int = 0
    retried: int = 0
    rate_limited: int = 0
    last_error: str = ""
    waits: list[float] = field(default_factory=list)

    def summary(self) -> str:
        """``http://a/v1: 120 answered, 3 retried (2 rate-limited)``, plus ``given up`` for a dead one."""
        state = "" if self.alive else f"; given up: {self.last_error}"
        return f"{self.url}: {self.answered} answered, {self.retried} retried ({self.rate_limited} rate-limited){state}"


class _ServerDown(Exception):
    pass


_STOP = object()


class EndpointPool(Generic[T, R]):
    """Servers pulling requests from one queue, each with a bounded number in flight.

    Args:
        base_urls: the servers (``http://host:8000/v1``); each gets ``concurrency`` requests at a time.
        key_env: the environment variable holding the key.
        concurrency: requests in flight per server.
        timeout: seconds one request may take before it is retried.
        max_attempts: failures in a row of one request on one server before that server is given up on.
        backoff: the first wait and the longest wait between retries, in seconds (doubling, with jitter).
        max_rate_limited: 429 answers one request may get before the run stops (a server that never lets one
            through), each waited out as the server asks.
    """

    def __init__(self, base_urls: Sequence[str], *, key_env: str = DEFAULT_KEY_ENV, concurrency: int = 8,
                 timeout: float = 120.0, max_attempts: int = 5, backoff: tuple[float, float] = (0.5, 30.0),
                 max_rate_limited: int = 50) -> None:
        import openai

        urls = list(dict.fromkeys(u.rstrip("/") for u in base_urls))
        if not urls:
            raise ValueError("No server given: pass at least one base URL (e.g. http://127.0.0.1:8000/v1).")
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{url!r} is not a server's base URL; expected e.g. http://127.0.0.1:8000/v1.")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}.")
        self.key_env = key_env
        key = read_key(key_env, urls)
        self.servers = [Server(url, openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0, timeout=timeout))
                        for url in urls]
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_rate_limited = max_rate_limited

    @property
    def workers(self) -> int:
        """Requests in flight at most, over all servers."""
        return self.concurrency * len(self.servers)

    async def serve(self, queue: asyncio.Queue[Any], call: Callable[[Any, T], Awaitable[R]],
                    done: Callable[[T, R, Server], Awaitable[None] | None]) -> None:
        """Send each item of ``queue`` with ``call(client, item)`` and hand its result to ``done``, until :meth:`stop`.

        ``done`` may put more items on the queue (a protocol's next step). Returns when every worker has
        taken its stop marker.

        Raises:
            EndpointError: a fault retrying cannot mend, or every server given up on.
        """
        workers = [asyncio.create_task(self._worker(server, queue, call, done))
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
                    raise EndpointError("Every server was given up on: "
                                        + "; ".join(server.summary() for server in self.servers) + ".")
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    def stop(self, queue: asyncio.Queue[Any]) -> None:
        """Put one stop marker per worker on ``queue`` (after the last item)."""
        for _ in range(self.workers):
            queue.put_nowait(_STOP)

    async def close(self) -> None:
        """Close every client's connections."""
        for server in self.servers:
            await server.client.close()

    async def _worker(self, server: Server, queue: asyncio.Queue[Any], call: Callable[[Any, T], Awaitable[R]],
                      done: Callable[[T, R, Server], Awaitable[None] | None]) -> None:
        while server.alive:
            item = await queue.get()
            if item is _STOP:
                return
            try:
                result = await self._send(server, call, item)
            except _ServerDown:
                queue.put_nowait(item)  # another server takes it
                if not any(s.alive for s in self.servers):
                    raise EndpointError("Every server was given up on: "
                                        + "; ".join(s.summary() for s in self.servers) + ".") from None
                return
            server.answered += 1
            outcome = done(item, result, server)
            if outcome is not None:
                await outcome

    async def _send(self, server: Server, call: Callable[[Any, T], Awaitable[R]], item: T) -> R:
        import openai

        failures = rate_limited = 0
        while True:
            if not server.alive:
                raise _ServerDown
            try:
                return await call(server.client, item)
            except openai.RateLimitError as error:
                rate_limited += 1
                server.rate_limited += 1
                server.retried += 1
                if rate_limited > self.max_rate_limited:
                    raise EndpointError(f"{server.url} kept answering 429 (rate limited): {rate_limited} times "
                                        "for one request; lower --concurrency or try later.") from None
                wait = retry_after(error.response) or self.backoff_wait(rate_limited)
                server.waits.append(wait)
                logger.debug("%s: 429, waiting %.2f s", server.url, wait)
                await asyncio.sleep(wait)
            except (openai.APITimeoutError, openai.APIConnectionError, openai.InternalServerError) as error:
                failures += 1
                server.retried += 1
                server.last_error = _describe(error)
                if failures >= self.max_attempts:
                    if server.alive:
                        server.alive = False
                        logger.warning("Giving up on %s after %d failures in a row (%s); the other servers take "
                                       "its work.", server.url, failures, server.last_error)
                    raise _ServerDown from None
                wait = retry_after(getattr(error, "response", None)) or self.backoff_wait(failures)
                await asyncio.sleep(wait)
            except openai.APIStatusError as error:
                hint = (f"; check the key in ${self.key_env}" if error.status_code in (401, 403) else
                        "; check --model against the server's models" if error.status_code == 404 else "")
                raise EndpointError(f"{server.url} refused a request: {_describe(error)}{hint}.") from None

    def backoff_wait(self, attempt: int) -> float:
        """Seconds to wait before the ``attempt``-th retry: doubling from the first wait to the longest, with jitter."""
        first, longest = self.backoff
        return min(longest, first * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)


def retry_after(response: Any) -> float | None:
    """Seconds a response's ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date) asks to wait."""
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, when.timestamp() - time.time()) if when is not None else None


def _describe(error: Exception) -> str:
    status = getattr(error, "status_code", None)
    message = str(getattr(error, "message", "") or error).strip().splitlines()[0][:200] if str(error) else ""
    kind = type(error).__name__
    return f"HTTP {status} ({message})" if status else f"{kind}: {message}" if message else kind


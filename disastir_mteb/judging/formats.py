"""The answer format each chat server is asked in, moved down a ladder where it shows it cannot take one.

Shared by every job that asks chat models for JSON (the judge, the builder): servers differ in what they honour,
and a job learns it from their refusals and unreadable answers instead of from a setting.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from disastir_mteb.endpoints.pool import Server
from disastir_mteb.judging.protocol import AnswerFormat

logger = logging.getLogger(__name__)

__all__ = ["FORMAT_PROBES", "FormatLadder"]

#: Unreadable answers in a row, before any readable one, after which a server is asked with the next format:
#: a server honouring the format answers its first requests readably; one ignoring it answers prose each time.
FORMAT_PROBES = 3
#: Words by which a refused request (400, 422) names structured outputs (OpenAI's and vLLM's ``response_format``
#: errors, llama.cpp's "response_format type must be ...", transformers' "Unused fields ... 'response_format'").
_FORMAT_WORDS = ("response_format", "json_schema", "json schema", "guided_json", "structured output")


class FormatLadder:
    """The answer format each server is asked with, moved to a plainer one where it shows it cannot take it.

    A server moves on (``json_schema`` -> ``json_object`` -> ``plain``) when it refuses the format or its first
    :data:`FORMAT_PROBES` answers under it are all unreadable; one readable answer settles the format for the job. A
    request sent in an earlier format is sent again in the current one and does not count toward another move.
    """

    def __init__(self, servers: Sequence[Server], first: AnswerFormat, *, logprobs: bool = True,
                 learned: Mapping[str, tuple[AnswerFormat, bool]] | None = None) -> None:
        learned = learned or {}
        order = list(AnswerFormat)
        # a server starts where an earlier job against it (and this judge model) ended, never stricter than asked
        self._current = {server.url: max(first, learned.get(server.url, (first, logprobs))[0], key=order.index)
                         for server in servers}
        self._logprobs = {server.url: logprobs and learned.get(server.url, (first, True))[1] for server in servers}
        self._unreadable = dict.fromkeys(self._current, 0)
        self._settled = {url: answer_format is AnswerFormat.PLAIN for url, answer_format in self._current.items()}
        self._heard = dict.fromkeys(self._current, False)
        for server in servers:
            server.mode = self._current[server.url].describe()

    def current(self, server: Server) -> AnswerFormat:
        """The format ``server`` is asked in now."""
        return self._current[server.url]

    def logprobs(self, server: Server) -> bool:
        """Whether requests to ``server`` ask for logprobs (until it refuses them)."""
        return self._logprobs[server.url]

    def answered(self, server: Server, asked: AnswerFormat, *, readable: bool, why: str) -> None:
        """One answer to a request sent in ``asked``: settles the format, or counts toward leaving it."""
        self._heard[server.url] = True
        if asked is not self._current[server.url] or self._settled[server.url]:
            return
        if readable:
            self._settled[server.url] = True
            return
        self._unreadable[server.url] += 1
        if self._unreadable[server.url] >= FORMAT_PROBES:
            self._move(server, f"its first {FORMAT_PROBES} answers under it were not readable (the last: {why})")

    def refused(self, server: Server, asked: AnswerFormat, said: str, *, status: int = 400) -> bool:
        """A refusal (400, 422) or failure (5xx) of a request sent in ``asked``: True when it is to be sent again.

        So a server failing only under ``response_format`` is moved down a format instead of given up on; one refusing
        logprobs is asked without them from then on.
        """
        lowered = said.lower()
        if "logprobs" in lowered:
            if self._logprobs[server.url]:  # a server (or model) without logprobs: hard grades only from now on
                self._logprobs[server.url] = False
                logger.warning("%s refused logprobs (%s); asking it without them from now on: its answers get hard "
                               "grades only, no grade probabilities.", server.url, " ".join(said.split())[:200])
            return True
        names_format = any(word in lowered for word in _FORMAT_WORDS)
        bare_422 = status == 422
        failing = status >= 500
        if not (names_format or bare_422 or failing):
            return False  # refused for another reason: the pool's one sentence (a 5xx: retried as usual)
        if asked is not self._current[server.url]:
            return True  # sent before the server was moved on: send it again as the others go
        shown = " ".join(said.split()).rstrip(".")
        shown = shown[:197] + "..." if len(shown) > 200 else shown
        why = (f"it refused it: {shown}" if status < 500 else
               f"it failed under it ({shown})" if names_format else
               f"it failed every try under it (the last: {shown})")
        return self._move(server, why)

    def _move(self, server: Server, why: str) -> bool:
        asked = self._current[server.url]
        plainer = asked.fallback
        if plainer is None:
            return False
        logger.warning("%s: asked with %s, %s; asking it with %s from now on.", server.url, asked.describe(), why,
                       plainer.describe())
        self._current[server.url] = plainer
        self._unreadable[server.url] = 0
        self._settled[server.url] = plainer is AnswerFormat.PLAIN
        server.mode = plainer.describe()
        return True

    def final(self) -> dict[str, AnswerFormat]:
        """Each server's format at the end of the job."""
        return dict(self._current)

    def learned(self) -> dict[str, tuple[AnswerFormat, bool]]:
        """What was learned of each server that answered: its format once settled, and whether it gives logprobs."""
        return {url: (self._current[url], self._logprobs[url]) for url in self._current
                if self._heard[url] and self._settled[url]}

"""A model that runs on embedding servers: OpenAI-compatible ``/v1/embeddings`` endpoints, one or many.

Models too big for this process (the 7B decoders of the DisastIR paper) are served by an engine built for it (vLLM,
text-embeddings-inference, Infinity) or a hosted API. :class:`EmbeddingServers` is an mteb encoder whose forward
pass is such servers, so the store, ANN, instructions and reports work unchanged. Before anything is encoded,
every server answers a probe (the same request asked twice, permuted, in part and in base64), so a server that
mixes up vectors, sends another number width or serves another checkpoint is refused in one sentence rather than
filing vectors under the wrong text or model.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import queue
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mteb.models import ModelMeta
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ScoringFunction

from disastir_mteb.endpoints.pool import (
    DEFAULT_EMBEDDING_CONCURRENCY,
    DEFAULT_KEY_ENV,
    DEFAULT_TIMEOUT,
    EndpointError,
    EndpointPool,
    Server,
)
from disastir_mteb.endpoints.urls import listed_name, prefix_advice
from disastir_mteb.models.identity import PROBE_TEXTS, PROBE_TOLERANCE, probe_difference
from disastir_mteb.util.digest import short_digest
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.util.install_hint import require_extra
from disastir_mteb.vocabulary.settings import DEFAULT_BATCH_SIZE

logger = logging.getLogger(__name__)

__all__ = ["NOISE_MULTIPLE", "NORM_FACTOR", "SHAPE_ROUNDING", "TOLERANCE_FLOOR", "EmbeddingServers",
           "ServedPassages", "probe_request"]

#: What of the servers' model listing names the served model (kept in the revision): vLLM's id, owner, root,
#: parent and context length; Infinity's backend and dtypes (an int8 or float16 serving is another serving);
#: llama.cpp's ``meta`` of the GGUF file. Never the start time, vLLM's ``permission`` records (a new random id
#: and time on every listing) or Infinity's ``stats`` (its queue).
_IDENTITY = ("id", "owned_by", "root", "parent", "max_model_len", "backend", "dtype", "embedding_dtype", "revision",
             "meta")
#: What of text-embeddings-inference's ``GET /info`` names its model (it has no model list).
_INFO_IDENTITY = ("model_id", "model_sha", "model_dtype", "served_model_name")

#: The probe's tolerance is this many times the servers' own noise (how far apart the vectors of one request asked
#: twice lie: the largest of a few thousand coordinates, so another answer lies within about twice of it).
NOISE_MULTIPLE = 4.0
#: The least probe tolerance: float32's rounding across batch shapes, for servers that answer one request twice bit
#: for bit. A nearby checkpoint moves the probe by more (docs/servers.md).
TOLERANCE_FLOOR = PROBE_TOLERANCE["float32"]
#: How far rounding may move a text's vector between batches of other shapes or orders (half precision on a GPU
#: included): the looser bound of "vectors follow their texts"; a vector must also lie nearest its own text's.
SHAPE_ROUNDING = PROBE_TOLERANCE["bfloat16"]
#: A vector of the run whose length is more than this factor from the probe's lengths is refused: its numbers are
#: not what the server gave when the run began (another number type, byte order or model).
NORM_FACTOR = 10.0

#: Texts the identity probe lacks, each in the probe request: unusual scripts and symbols, digits, emoji (with
#: joiners and variation selectors), very long words, and one short word.
_RARE_TEXTS = (
    "Ünïcödé: Ελλάδα σεισμός, 東京の洪水警報, землетрясение, زلزال, ß Ø ĳ ǅ — ½ ∮ ⟨E⋅da⟩ ℵ₀",
    "0x7F3A 3.14159265358979 1e-07 −42 2024-11-05T03:14:15Z +81-90-1234-5678 #4471 404",
    "🌊🌪️🔥🚨 evacuate now 🏃‍♀️🏠 👨‍👩‍👧 ⚠️",
    "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft "
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "Evacuate!",
)
_HAZARDS = ("flood", "wildfire", "earthquake", "cyclone", "drought", "landslide", "tsunami", "heatwave")
_PLACES = ("the river delta", "the northern valley", "the coastal town", "the capital", "the islands",
           "the mountain pass", "the refugee camp")
_ACTIONS = ("shelters are full", "roads are closed", "power is out", "water is unsafe", "crews are on the way")
#: Which probe text is asked twice in the probe request: at its position, and again at the request's last.
_REPEATED = 1
#: The positions of the probe request asked again alone, in one small request (five texts or fewer).
_SMALL = (0, 3, 6, 9)
#: The permutation the probe request is asked again in (a fixed one: the same on every server and every run).
_PERMUTATION_SEED = 24
#: A base64 answer to a request for numbers is read as float32 only where its vectors' lengths lie in this band and
#: within this factor of each other: float16 read as float32 gives lengths near 1e-9, float64 near 1e19 or infinite.
_PLAUSIBLE_NORMS = (1e-3, 1e5)
_PLAUSIBLE_SPREAD = 1e4
#: The number types a base64 vector may be sent in, by their name, with their size in bytes.
_WIDTHS = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}


def probe_request(size: int) -> tuple[str, ...]:
    """The texts of the servers' probe: one request of ``size`` texts (at least 11), at fixed positions.

    The identity probe's texts, then :data:`_RARE_TEXTS`, then distinct fillers, and last the text at position
    :data:`_REPEATED` again.
    """
    core = (*PROBE_TEXTS, *_RARE_TEXTS)
    fillers = tuple(f"Situation report {n}: {_HAZARDS[n % len(_HAZARDS)]} near {_PLACES[n % len(_PLACES)]}, "
                    f"{_ACTIONS[n % len(_ACTIONS)]}." for n in range(max(0, size - len(core) - 1)))
    return (*core, *fillers, PROBE_TEXTS[_REPEATED])


@dataclass(frozen=True)
class _Probed:
    """One server's answer to the probe: its vectors of the probe request, its noise and its tolerance."""

    vectors: np.ndarray
    noise: float
    tolerance: float


class EmbeddingServers(AbsEncoder):
    """An mteb encoder whose vectors come from OpenAI-compatible embedding servers (``base_urls``).

    The servers are described and probed here, before anything is encoded. Results are filed under ``model`` when it
    has an organisation, else under ``served/<model>``, at ``revision`` or else :attr:`served_revision` (a digest of
    what the servers report); the key is read from the ``key_env`` variable only.

    Raises:
        EndpointError: a server cannot be reached, does not serve ``model``, fails the probe, or the servers serve
            different models or dimensions.
        ImportError: the openai client is not installed (the ``servers`` extra).
    """

    def __init__(self, model: str, base_urls: Sequence[str] | str, *, revision: str | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE, key_env: str = DEFAULT_KEY_ENV,
                 concurrency: int = DEFAULT_EMBEDDING_CONCURRENCY, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.served_model = str(model).strip()
        if not self.served_model:
            raise InvalidInput("Name the served model (-m NAME), as the embedding servers know it.")
        if int(batch_size) < 1:
            raise InvalidInput(f"The batch size must be at least 1, not {batch_size!r}.")
        require_extra("openai", extra="servers", needed_by="Encoding on embedding servers")
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="embedding-servers", daemon=True)
        self._thread.start()
        self.timeout = timeout
        self.batch_size = int(batch_size)
        self.requests = 0
        self.dimension = 0
        self.probe_texts: tuple[str, ...] = ()
        self.probe = np.zeros((0, 0), dtype=np.float32)
        self.probe_tolerance = TOLERANCE_FLOOR
        self.probe_noise = 0.0
        self._norms = (0.0, float("inf"))
        try:
            self.pool: EndpointPool[Any, Any] = self._run(self._make_pool(urls, key_env, concurrency, timeout))
            facts = self._run(self._describe_servers())
            self.served = facts
            self.probe_servers()
        except BaseException:
            self.close()  # a run that cannot start leaves no thread and no connection behind
            raise
        name = self.served_model if "/" in self.served_model else f"served/{self.served_model}"
        pinned = revision.strip() if revision else None
        self.served_revision = "served-" + short_digest(json.dumps(
            {"facts": facts, "dimension": self.dimension}, sort_keys=True).encode("utf-8"))[:16]
        self.model = None
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={
            "name": name,
            "revision": pinned or self.served_revision,
            "embed_dim": self.dimension,
            "similarity_fn_name": ScoringFunction.COSINE,
            "loader": None,
        })

    # ------------------------------------------------------------------ mteb's encoder interface

    def encode(self, inputs: Any, *, task_metadata: Any = None, hf_split: str = "", hf_subset: str = "",
               prompt_type: Any = None, **kwargs: Any) -> np.ndarray:
        """The vectors of every text of ``inputs`` (mteb's DataLoader): each of its batches is one request."""
        batches = [list(batch["text"]) for batch in inputs]
        return self.embed_batches(batches)

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """The vectors of ``texts``, sent ``batch_size`` texts per request (row ``i`` is ``texts[i]``)."""
        texts = list(texts)
        return self.embed_batches([texts[i:i + batch_size] for i in range(0, len(texts), batch_size)])

    def embed_batches(self, batches: Sequence[Sequence[str]]) -> np.ndarray:
        """One request per batch, spread over the servers; the rows in the batches' order.

        Raises:
            EndpointError: an answer that fails its checks (naming the server), or every server given up on.
        """
        batches = [list(batch) for batch in batches if len(batch)]
        if not batches:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._run(self._embed(batches))

    def probe_servers(self, batch_size: int | None = None) -> np.ndarray:
        """Ask every server for the probe (again); they must agree. Sets and returns the probe's vectors.

        Raises:
            EndpointError: a server's vectors do not follow their texts, its base64 is not float32, the servers
                disagree, or one cannot answer.
        """
        size = self.batch_size if batch_size is None else int(batch_size)
        texts = probe_request(size)
        vectors, noise, tolerance = self._run(self._probe_servers(texts))
        self.batch_size = size
        self.probe_texts, self.probe, self.probe_noise, self.probe_tolerance = texts, vectors, noise, tolerance
        self.dimension = int(vectors.shape[1])
        norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
        self._norms = (float(norms.min()), float(norms.max()))
        return vectors

    @property
    def servers(self) -> list[Server]:
        """The servers, with what each answered and retried."""
        return self.pool.servers

    def describe(self) -> str:
        """One line for the run summary: the servers, their probe and what they did."""
        return (f"{self.served_model} on {len(self.servers)} embedding server(s), {self.requests} request(s), probe "
                f"of {len(self.probe_texts)} texts (noise {self.probe_noise:.2g}, tolerance "
                f"{self.probe_tolerance:.2g}): " + "; ".join(server.summary() for server in self.servers))

    def close(self) -> None:
        """Close the servers' connections and stop the event loop thread."""
        if self._loop.is_closed():
            return
        try:
            if hasattr(self, "pool"):  # absent when the servers' URLs or key were refused
                self._run(self.pool.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            self._loop.close()

    # ------------------------------------------------------------------ the event loop thread

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def _make_pool(self, urls: list[str], key_env: str, concurrency: int, timeout: float) -> EndpointPool:
        return EndpointPool(urls, key_env=key_env, concurrency=concurrency, timeout=timeout)

    async def _describe_servers(self) -> list[dict[str, Any]]:
        """What each server reports of the model (``GET /v1/models``), checked to be one model."""
        import openai

        described: dict[str, dict[str, Any]] = {}
        for server in self.servers:
            try:
                listing = await self._listing(server)
            except openai.NotFoundError:  # no model list here: the wrong prefix, or a server without one (TEI)
                described[server.url] = await self._without_listing(server)
                continue
            except (openai.APIConnectionError, openai.APITimeoutError) as error:
                raise EndpointError(f"{server.url} cannot be reached ({type(error).__name__}); start the "
                                    "embedding server first, or check --embeddings-url.") from None
            except openai.APIStatusError as error:
                raise EndpointError(f"{server.url} refused to list its models: HTTP {error.status_code}"
                                    + (f"; check the key in ${self.pool.key_env}" if error.status_code in (401, 403)
                                       else "") + ".") from None
            entries = listing.get("data") if isinstance(listing, dict) else None
            if not isinstance(entries, list) or not all(isinstance(entry, dict) and isinstance(entry.get("id"), str)
                                                        for entry in entries):
                raise EndpointError(f"{server.url} answered GET /models, but not with a model list (a 'data' list of "
                                    "models with an 'id' each); check that this base URL is the server's API (it "
                                    "usually ends in /v1).")
            models = {entry["id"]: entry for entry in entries}
            name = listed_name(self.served_model, list(models))
            if name is None:
                shown = ", ".join(sorted(models)[:10]) or "none"
                raise EndpointError(f"{server.url} does not serve {self.served_model!r}; it serves: {shown}.")
            record = models[name]
            described[server.url] = {key: record[key] for key in _IDENTITY if record.get(key) is not None}
        facts = list(described.values())
        if any(fact != facts[0] for fact in facts[1:]):
            detail = "; ".join(f"{url}: {json.dumps(fact, sort_keys=True)}" for url, fact in described.items())
            raise EndpointError(f"The embedding servers describe {self.served_model!r} differently, so their "
                                f"vectors must not be mixed: {detail}.")
        return facts[0:1]

    async def _without_listing(self, server: Server) -> dict[str, Any]:
        """What a server whose ``GET /models`` answered 404 reports of the model, or one sentence on its prefix.

        text-embeddings-inference has no model list and answers every request with its one model, so its ``/info`` must
        name ``model``.
        """
        other = await self.pool.other_base(server)
        if other is not None:
            raise EndpointError(f"{server.url} answered GET {server.url}/models with HTTP 404, but {other}/models "
                                f"lists its models: {prefix_advice(other)}.")
        info = await self._info(server)
        if info is None:
            return {"id": self.served_model, "listing": "none"}
        if self.served_model not in (info.get("served_model_name"), info["model_id"]):
            served = info.get("served_model_name") or info["model_id"]
            raise EndpointError(f"{server.url} serves {served!r} (its /info), not {self.served_model!r}, and answers "
                                f"every request with it whatever the request names; pass -m {served}.")
        facts = {key: info[key] for key in _INFO_IDENTITY if info.get(key) is not None}
        return {"id": self.served_model, "info": facts}

    async def _info(self, server: Server) -> dict[str, Any] | None:
        """text-embeddings-inference's ``GET /info`` at the server's root (``/v1`` taken off), or None without one."""
        import openai

        root = server.url.removesuffix("/v1")
        try:
            info = await self.pool.get_json(server, f"{root}/info")
        except (openai.APIError, EndpointError):
            return None
        return info if isinstance(info, dict) and isinstance(info.get("model_id"), str) else None

    async def _listing(self, server: Server) -> Any:
        """``GET /v1/models`` (the pool asks again after a 429, 5xx or timeout: a server still loading answers 503)."""
        return await self.pool.get_json(server, "/models")

    async def _probe_servers(self, texts: tuple[str, ...]) -> tuple[np.ndarray, float, float]:
        """The probe's vectors, noise and tolerance: one dimension, and vectors within tolerance, on every server."""
        answers = {server.url: await self._probe(server.url, texts) for server in self.servers}
        dimensions = {url: probed.vectors.shape[1] for url, probed in answers.items()}
        if len(set(dimensions.values())) > 1:
            detail = ", ".join(f"{url}: {dim}" for url, dim in dimensions.items())
            raise EndpointError(f"The embedding servers answer {self.served_model!r} with different dimensions "
                                f"({detail}); their vectors must not be mixed.")
        tolerance = max(probed.tolerance for probed in answers.values())
        (first, reference), *others = answers.items()
        for url, probed in others:
            apart = probe_difference(probed.vectors, reference.vectors)
            if apart > tolerance:
                raise EndpointError(f"The embedding servers answer {self.served_model!r} with different vectors for "
                                    f"the same texts ({url} and {first}: up to {apart:.2g} apart, more than their "
                                    f"own noise and rounding move them, {tolerance:.1e}); they serve different models "
                                    "under one name, so their vectors must not be mixed.")
        return reference.vectors, max(probed.noise for probed in answers.values()), tolerance

    async def _probe(self, url: str, texts: tuple[str, ...]) -> _Probed:
        """The probe of ``url``: its five requests through a pool of that server alone, answered and checked.

        A pool of its own, so that this very server answers, with the run's retries (a loading server is waited for).
        """
        order = np.random.default_rng(_PERMUTATION_SEED).permutation(len(texts))
        asked = {"first": (list(texts), "float"),  # numbers: their count is the dimension
                 "again": (list(texts), "float"),  # the same request: the difference is the server's noise
                 "permuted": ([texts[i] for i in order], "float"),
                 "small": ([texts[i] for i in _SMALL], "float"),
                 "base64": (list(texts), "base64")}  # what the run asks for, held to the numbers
        pool: EndpointPool[str, Any] = EndpointPool([url], key_env=self.pool.key_env, concurrency=1,
                                                     timeout=self.timeout, limits=self.pool.limits)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        for tag in asked:
            queue.put_nowait(tag)
        answers: dict[str, Any] = {}

        def ask(tag: str, server: Server) -> tuple[str, dict[str, Any]]:
            batch, encoding = asked[tag]
            return "/embeddings", self._body(batch, encoding=encoding)

        def done(tag: str, response: Any, server: Server) -> None:
            answers[tag] = response
            if len(answers) == len(asked):
                pool.stop(queue)

        try:
            await pool.serve(queue, ask, done)
        finally:
            await pool.close()
        return self._checked_probe(url, texts, order, answers)

    def _checked_probe(self, url: str, texts: tuple[str, ...], order: np.ndarray, answers: dict[str, Any]) -> _Probed:
        """The probe's answers read and checked: the vectors follow their texts, the base64 is float32 (module doc)."""
        batch = list(texts)
        first = self._read(url, batch, answers["first"], dimension=None)
        dimension = first.shape[1]
        again = self._read(url, batch, answers["again"], dimension=dimension)
        _follows(url, again, first, texts, range(len(texts)), bound=None,
                 how=f"asked for the same {len(texts)} texts twice")
        noise = probe_difference(again, first)
        tolerance = max(TOLERANCE_FLOOR, NOISE_MULTIPLE * noise)
        bound = max(SHAPE_ROUNDING, tolerance)
        if (_distances(first, first[0]) <= tolerance).all():
            raise EndpointError(f"{url} returned one vector for all {len(texts)} different texts of the probe (within "
                                f"{tolerance:.1e}): it does not embed what it is sent, so the run stops rather than "
                                "score such vectors.")
        apart = float(_distances(first[-1:], first[_REPEATED])[0])
        if apart > bound:
            raise EndpointError(f"{url} returned vectors that do not follow their texts (text {_REPEATED} of the "
                                f"probe, {_clip(texts[_REPEATED])}, asked again at position {len(texts) - 1} of the "
                                f"same request, came back {apart:.2g} from itself, more than rounding moves it, "
                                f"{bound:.0e}); the run stops rather than file vectors under the wrong texts.")
        permuted = self._read(url, [texts[i] for i in order], answers["permuted"], dimension=dimension)
        back = np.empty_like(permuted)
        back[order] = permuted
        _follows(url, back, first, texts, range(len(texts)), bound=bound,
                 how=f"asked for the same {len(texts)} texts in another order")
        small = self._read(url, [texts[i] for i in _SMALL], answers["small"], dimension=dimension)
        _follows(url, small, first, texts, _SMALL, bound=bound,
                 how=f"asked for {len(_SMALL)} of its {len(texts)} texts alone")
        _check_base64(url, batch, self._entries(url, batch, answers["base64"]), first, bound)
        return _Probed(first, noise, tolerance)

    def _body(self, texts: list[str], *, encoding: str = "base64") -> dict[str, Any]:
        return {"model": self.served_model, "input": texts, "encoding_format": encoding}

    async def _embed(self, batches: list[list[str]]) -> np.ndarray:
        results: dict[int, np.ndarray] = {}
        await self._serve(list(enumerate(batches)), lambda number, rows: results.__setitem__(number, rows))
        return np.concatenate([results[number] for number in range(len(batches))], axis=0)

    async def _serve(self, items: list[tuple[Any, list[str]]], deliver: Any) -> None:
        """Send every ``(tag, batch)`` of ``items`` through the pool, FIFO; ``deliver(tag, rows)`` as each is read."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        for item in items:
            queue.put_nowait(item)
        answered = 0

        def ask(item: tuple[Any, list[str]], server: Server) -> tuple[str, dict[str, Any]]:
            return "/embeddings", self._body(item[1])

        def done(item: tuple[Any, list[str]], response: Any, server: Server) -> None:
            nonlocal answered
            tag, batch = item
            deliver(tag, self._read(server.url, batch, response, dimension=self.dimension, norms=self._norms))
            self.requests += 1
            answered += 1
            if answered == len(items):
                self.pool.stop(queue)

        if items:
            await self.pool.serve(queue, ask, done)

    def passages(self, batch_size: int = 32) -> ServedPassages:
        """What the embedding store calls for passages: one chunk per call, or every chunk as one stream."""
        return ServedPassages(self, batch_size)

    def encode_stream(self, chunks: Sequence[list[str]], on_batch: Any = None, *,
                      batch_size: int = 32) -> Iterator[np.ndarray]:
        """Each chunk's vectors in order, the batches of every chunk on one queue (the store's streaming hook).

        The next chunks' batches are in flight while a chunk's last answers are read, so no server idles at a chunk
        boundary. A consumer that stops early cancels what is still queued.
        """
        sizes = [len(chunk) for chunk in chunks]
        items = [((number, start), list(chunk[start:start + batch_size]))
                 for number, chunk in enumerate(chunks) for start in range(0, len(chunk), batch_size)]
        expected = Counter(number for (number, _), _ in items)
        inbox: queue.Queue[tuple[tuple[int, int], np.ndarray]] = queue.Queue()
        serving = asyncio.run_coroutine_threadsafe(self._serve(items, lambda tag, rows: inbox.put((tag, rows))),
                                                   self._loop)
        parts: dict[int, dict[int, np.ndarray]] = {number: {} for number in range(len(chunks))}
        try:
            for number, size in enumerate(sizes):
                while len(parts[number]) < expected[number]:
                    try:
                        (chunk_number, start), rows = inbox.get(timeout=0.2)
                    except queue.Empty:
                        if serving.done():
                            serving.result()  # raises what stopped the servers
                            if inbox.empty():
                                raise EndpointError("The embedding servers stopped before every batch was "
                                                    "answered.") from None
                        continue
                    parts[chunk_number][start] = rows
                    if on_batch is not None:
                        on_batch(rows.shape[0])
                if not size:
                    yield np.zeros((0, self.dimension), dtype=np.float32)
                    continue
                yield np.concatenate([parts[number][start] for start in sorted(parts[number])], axis=0)
                del parts[number]
        finally:
            if not serving.done():
                serving.cancel()

    def _entries(self, url: str, texts: list[str], response: Any) -> list[Any]:
        """The ``embedding`` of each text of one answer (its parsed JSON), placed by index, or one sentence."""
        data = response.get("data") if isinstance(response, dict) else None
        if data is None:
            raise EndpointError(f"{url} answered an embeddings request with something that is not an embeddings "
                                "response (no 'data' list).")
        if not isinstance(data, list) or len(data) != len(texts):
            got = len(data) if isinstance(data, list) else "no"
            raise EndpointError(f"{url} returned {got} vector(s) for {len(texts)} text(s).")
        indexes = [entry.get("index") if isinstance(entry, dict) else None for entry in data]
        if sorted(i for i in indexes if isinstance(i, int)) != list(range(len(texts))):
            raise EndpointError(f"{url} returned vectors whose indexes are not 0..{len(texts) - 1} "
                                f"(got {indexes[:5]}{'...' if len(indexes) > 5 else ''}); their order cannot be "
                                "trusted.")
        values: list[Any] = [None] * len(texts)
        for entry, index in zip(data, indexes, strict=True):
            values[index] = entry.get("embedding")
        return values

    def _read(self, url: str, texts: list[str], response: Any, *, dimension: int | None,
              norms: tuple[float, float] | None = None) -> np.ndarray:
        """The vectors of one answer in the texts' order, checked against the run's dimension and norms."""
        array = _matrix(self._entries(url, texts, response), url, dimension=dimension)
        if dimension is not None and array.shape[1] != dimension:
            raise EndpointError(f"{url} returned {array.shape[1]}-dimensional vectors; {self.served_model} gave "
                                f"{dimension} when the run began; the server's model changed, so the run stops "
                                "rather than mix them.")
        if not np.isfinite(array).all():
            bad = int(np.argwhere(~np.isfinite(array).all(axis=1))[0][0])
            raise EndpointError(f"{url} returned a vector with NaN or infinite values (text {bad} of the request: "
                                f"{texts[bad][:60]!r}).")
        lengths = np.linalg.norm(array.astype(np.float64), axis=1)
        if not lengths.all():
            bad = int(np.argwhere(lengths == 0)[0][0])
            raise EndpointError(f"{url} returned an all-zero vector (text {bad} of the request: {texts[bad][:60]!r}); "
                                "it has no direction to compare.")
        if norms is not None:
            low, high = norms[0] / NORM_FACTOR, norms[1] * NORM_FACTOR
            far = np.flatnonzero((lengths < low) | (lengths > high))
            if far.size:
                bad = int(far[0])
                raise EndpointError(f"{url} returned a vector of length {lengths[bad]:.3g} (text {bad} of the request: "
                                    f"{texts[bad][:60]!r}), where its probe's vectors are {norms[0]:.3g} to "
                                    f"{norms[1]:.3g} long: these are not the numbers it gave when the run began "
                                    "(another number type, byte order or model), so the run stops rather than score "
                                    "them.")
        return array


class ServedPassages:
    """Passages to the servers in the store's terms: one chunk per call, or every chunk as one stream."""

    def __init__(self, served: EmbeddingServers, batch_size: int) -> None:
        self.served, self.batch_size = served, batch_size

    def __call__(self, texts: list[str]) -> np.ndarray:
        """One chunk's vectors."""
        return self.served.embed(texts, self.batch_size)

    def encode_stream(self, chunks: Sequence[list[str]], on_batch: Any = None) -> Iterator[np.ndarray]:
        """Every chunk's vectors, in order, through one queue."""
        return self.served.encode_stream(chunks, on_batch, batch_size=self.batch_size)


def _matrix(values: list[Any], url: str, *, dimension: int | None) -> np.ndarray:
    """The answer's vectors as one (n, dim) float32 array: base64 decoded into one buffer, else row by row.

    ``dimension`` is the run's; None for the probe's first answer, asked for numbers, where base64 is read as
    float32 only where that alone is plausible.
    """
    if all(isinstance(value, str) for value in values):  # what the servers are asked for: one copy, one frombuffer
        raws = _base64_rows(values, url)
        width = len(raws[0])
        if dimension is None:
            return _honest_reading(raws, url)
        if fault := _width_fault(url, width, dimension):
            raise EndpointError(fault)
        if width % 4 or not width:
            raise EndpointError(f"{url} returned a base64 embedding of {width} bytes, not whole float32 values.")
        return _decoded(raws, "float32")
    rows = [_vector(value, url) for value in values]
    widths = {row.shape[0] for row in rows}
    if len(widths) != 1:
        raise EndpointError(f"{url} returned vectors of different dimensions {sorted(widths)} in one answer.")
    return np.stack(rows)


def _width_fault(url: str, width: int, dimension: int) -> str | None:
    """The sentence for base64 vectors of ``width`` bytes that are not ``dimension`` float32 values, or None."""
    if width == 4 * dimension:
        return None
    sending = {8 * dimension: "float64", 2 * dimension: "float16 or bfloat16"}.get(width)
    if sending is None and not width % 4:
        return None
    values = f"which is {width // 4} float32 values" if not width % 4 else "not a whole number of float32 values"
    return (f"{url} returned base64 embeddings of {width} bytes, {values}, but its vectors have {dimension} "
            f"dimensions ({4 * dimension} bytes): it may be sending {sending or 'another number type'}; the OpenAI "
            "API's base64 embeddings are little-endian float32, so the run stops rather than read them as vectors of "
            "another width: have the server send float32.")


def _base64_rows(values: list[str], url: str) -> list[bytes]:
    """Each base64 vector's bytes, all of one width, or one sentence naming ``url``."""
    try:
        raws = [binascii.a2b_base64(value, strict_mode=True) for value in values]
    except (binascii.Error, ValueError):
        raise EndpointError(f"{url} returned an embedding that is neither a list of numbers nor base64.") from None
    widths = {len(raw) for raw in raws}
    if len(widths) != 1:
        raise EndpointError(f"{url} returned vectors of different dimensions "
                            f"{sorted(width // 4 for width in widths)} in one answer.")
    return raws


def _decoded(raws: list[bytes], number_type: str) -> np.ndarray:
    """Base64 vectors' bytes read as little-endian ``number_type`` (:data:`_WIDTHS`), as float32 (n, dim)."""
    buffer = b"".join(raws)
    if number_type == "bfloat16":  # the upper half of a float32: numpy has no bfloat16 of its own
        halves = np.frombuffer(buffer, dtype="<u2").astype(np.uint32) << 16
        array = halves.view(np.float32)
    else:
        array = np.frombuffer(buffer, dtype="<" + {"float32": "f4", "float64": "f8", "float16": "f2"}[number_type])
    with np.errstate(over="ignore", invalid="ignore"):
        return array.astype(np.float32).reshape(len(raws), -1)


def _implausible(array: np.ndarray, number_type: str) -> str | None:
    """Why ``array`` cannot be vectors of that number type's reading, or None where it can."""
    if not np.isfinite(array).all():
        return "NaN or infinite values"
    lengths = np.linalg.norm(array.astype(np.float64), axis=1)
    low, high = _PLAUSIBLE_NORMS
    if lengths.min() < low or lengths.max() > high:
        return f"lengths of {lengths.min():.2g} to {lengths.max():.2g}"
    if lengths.max() > _PLAUSIBLE_SPREAD * lengths.min():
        return f"lengths from {lengths.min():.2g} to {lengths.max():.2g}"
    if number_type == "bfloat16" and not array[:, 0::2].any():
        return "every other value zero, as float32 of bfloat16 numbers reads"
    return None


def _honest_reading(raws: list[bytes], url: str) -> np.ndarray:
    """Base64 sent although numbers were asked for, read as float32 where that alone is plausible; else a sentence."""
    width = len(raws[0])
    readings = {name: _decoded(raws, name) for name, size in _WIDTHS.items() if width and not width % size}
    why = {name: _implausible(array, name) for name, array in readings.items()}
    plausible = [name for name, reason in why.items() if reason is None]
    if plausible == ["float32"]:
        return readings["float32"]
    said = f"{url} answered base64 although asked for JSON numbers, and its {width}-byte vectors "
    rest = ("; the OpenAI API's base64 embeddings are little-endian float32, so the run stops rather than guess: have "
            "the server send float32 (or JSON numbers when asked).")
    if "float32" in plausible:
        readings = [f"{width // _WIDTHS[name]} {name} values" for name in plausible]
        raise EndpointError(f"{said}read plausibly as {', as '.join(readings[:-1])} and as {readings[-1]}{rest}")
    if plausible:
        name = plausible[0]
        raise EndpointError(f"{said}are no plausible float32 ({why.get('float32') or 'not whole float32 values'}) but "
                            f"read as {width // _WIDTHS[name]} {name} values: it appears to send {name}{rest}")
    raise EndpointError(f"{said}read as no plausible vectors of float32, float64, float16 or bfloat16 "
                        f"({why.get('float32') or 'not whole float32 values'} as float32){rest}")


def _check_base64(url: str, texts: list[str], values: list[Any], numbers: np.ndarray, bound: float) -> None:
    """The probe's base64 answer must read as its numbers for the same texts in float32; else a sentence.

    Base64 of another width is named by the number type whose reading matches the numbers.
    """
    dimension = numbers.shape[1]
    if not all(isinstance(value, str) for value in values):
        answered = _matrix(values, url, dimension=dimension)
        apart = probe_difference(answered, numbers) if answered.shape == numbers.shape else float("inf")
        if apart > bound:
            raise EndpointError(f"{url} answered the probe's texts with other numbers when asked for base64 (up to "
                                f"{apart:.2g} apart); the run stops rather than read vectors it cannot check.")
        return
    raws = _base64_rows(values, url)
    width = len(raws[0])
    matching = [name for name, size in _WIDTHS.items() if width == size * dimension
                and probe_difference(_decoded(raws, name), numbers) <= bound]
    if "float32" in matching:
        return
    if matching:
        raise EndpointError(f"{url} sends its base64 embeddings as {matching[0]}: {width} bytes a vector, which read "
                            f"as its JSON numbers for the same texts ({dimension} dimensions) only so; the OpenAI "
                            "API's base64 embeddings are little-endian float32, so the run stops rather than read them "
                            "as vectors of another width: have the server send float32.")
    raise EndpointError(f"{url} sends base64 embeddings that do not read as its JSON numbers for the same texts "
                        f"({width} bytes a vector for {dimension} dimensions; not as little-endian float32, float64, "
                        "float16 or bfloat16 either), so the run stops rather than read them: have the server send "
                        "little-endian float32.")


def _distances(rows: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """How far each row lies from ``reference``: its largest coordinate difference over ``reference``'s length."""
    scale = float(np.linalg.norm(reference.astype(np.float64))) or 1.0
    return np.abs(rows - reference.astype(np.float64)).max(axis=-1) / scale


def _follows(url: str, answer: np.ndarray, reference: np.ndarray, texts: tuple[str, ...], positions: Sequence[int],
             *, bound: float | None, how: str) -> None:
    """Each row of ``answer`` must lie nearest its own text's vector in ``reference``, and within ``bound`` of it.

    Row ``k`` of ``answer`` is the text at ``positions[k]``; else one sentence naming ``url``, saying ``how`` the texts
    were asked.
    """
    ours, theirs = answer.astype(np.float64), reference.astype(np.float64)
    lengths = (ours ** 2).sum(axis=1)[:, None] + (theirs ** 2).sum(axis=1)[None, :]
    squared = lengths - 2 * ours @ theirs.T  # (answer rows, reference rows)
    slack = 1e-9 * lengths  # the product's rounding: equal vectors tie, whichever text they belong to
    number = {text: n for n, text in enumerate(dict.fromkeys(texts))}
    labels = np.array([number[text] for text in texts])
    for row, position in enumerate(positions):
        own = labels == labels[position]
        nearest_own = float(squared[row, own].min())
        others = np.flatnonzero(~own)
        nearest = int(others[np.argmin(squared[row, others])])
        if squared[row, nearest] < nearest_own - slack[row, nearest]:
            found = f"came back nearer the vector of another text ({_clip(texts[nearest])}) than its own"
        elif bound is not None and (apart := float(_distances(theirs[own], ours[row]).min())) > bound:
            found = f"came back {apart:.2g} from its own vector, more than rounding moves it, {bound:.0e}"
        else:
            continue
        raise EndpointError(f"{url} returned vectors that do not follow their texts ({how}, text {position} of the "
                            f"probe, {_clip(texts[position])}, {found}); the run stops rather than file vectors under "
                            "the wrong texts.")


def _clip(text: str, width: int = 40) -> str:
    """A text for a sentence: its start, quoted."""
    return repr(text if len(text) <= width else text[:width] + "…")


def _vector(value: Any, url: str) -> np.ndarray:
    if isinstance(value, str):  # base64 of little-endian float32, as OpenAI sends when asked
        try:
            raw = base64.b64decode(value, validate=True)
        except ValueError:
            raise EndpointError(f"{url} returned an embedding that is neither a list of numbers nor base64.") from None
        if len(raw) % 4:
            raise EndpointError(f"{url} returned a base64 embedding of {len(raw)} bytes, not whole float32 values.")
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if isinstance(value, list) and value and all(isinstance(v, int | float) and not isinstance(v, bool)
                                                 for v in value):
        return np.asarray(value, dtype=np.float32)
    raise EndpointError(f"{url} returned an embedding that is neither a list of numbers nor base64.")

"""A model that runs on embedding servers: OpenAI-compatible ``/v1/embeddings`` endpoints, one or many.

Models too big for this process (the 7B decoders of the DisastIR paper, DMRetriever-7.6B) are served by an
engine built for it (vLLM with ``--runner pooling``, text-embeddings-inference, Infinity) on as many GPUs
and machines as there are, or called from a hosted API. :class:`EmbeddingServers` is an mteb encoder whose
forward pass is such servers, so everything built on an encoder works unchanged: the encode-once store,
ANN, instructions (put in front of queries by the search model, as for any encoder), reports, resume.

- **Sharing.** Each batch of texts the search model hands over is one request; the batches of a chunk go
  to one queue that every server pulls from, ``concurrency`` requests in flight per server
  (:class:`~disastir_mteb.endpoints.pool.EndpointPool`: retries honour ``Retry-After``, a server that
  dies leaves its batches to the others, the key comes from an environment variable only).
- **Identity.** The model is filed under its served name, and its revision is what the servers report of it
  with the vectors' dimension, digested: ``served-<digest>``. What they report differs by engine
  (:data:`_IDENTITY`): from ``GET /models`` vLLM gives the id, owner, root, parent and context length,
  Infinity the id, owner, backend and dtypes, llama.cpp the GGUF file's ``meta`` (size, parameters,
  vocabulary), Ollama the id and owner; text-embeddings-inference has no model list, and its ``GET /info``
  gives the model's id, commit and dtype (:data:`_INFO_IDENTITY`). Never the start time, nor anything that
  changes from one listing to the next (vLLM's ``permission`` ids, Infinity's queue ``stats``). So vectors of
  two different servings never share a store entry. ``revision=`` (``--embeddings-revision``) pins it by hand,
  e.g. to a checkpoint's commit, for servers that report nothing useful. Before anything is encoded every
  server is asked for the vectors of the identity probe (:data:`~disastir_mteb.models.identity.PROBE_TEXTS`,
  one request each): they give the dimension, must agree from server to server (two checkpoints served under
  one name and listing are refused), and identify the model in the store like any other
  (:mod:`disastir_mteb.models.identity`), so another checkpoint behind the same name, listing and dimension
  gets entries of its own.
- **Checks.** Every answer must hold one vector per text, with indexes exactly ``0..n-1`` (vectors are
  placed by index, so a server that lists them in another order is read right), each of the run's
  dimension, finite and not all zero; anything else stops the run with one sentence naming the server.
  Vectors are returned as the server sent them: the search normalises them (cosine), as it does for
  in-process models.
- **Widths.** The run asks for base64 (a quarter of the bytes of JSON numbers), which the OpenAI API defines as
  little-endian float32 and which carries no width of its own: a server sending float64 (or float16) would be
  read as vectors of twice (half) the dimension, of meaningless values. So the probe asks for JSON numbers,
  whose count is the dimension whatever the server's precision, and every base64 answer after it must hold
  exactly dimension x 4 bytes per vector; one of twice or half that (or not a whole number of float32 values) is
  one sentence naming the server and the width it sent. A server that answers the probe in base64 although asked
  for numbers is read as float32, as the protocol says: nothing else tells its width.
- **Names and prefixes.** A server must list ``model`` (Ollama's ``name`` stands for its ``name:latest``);
  text-embeddings-inference, which answers every request with its one model whatever the request names, must
  say in ``/info`` that it serves that name. A base URL whose model list answers 404 while the same server
  answers with ``/v1`` added or removed (Infinity serves without it) is one sentence naming the URL to use,
  before anything is encoded.
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
    listed_name,
    prefix_advice,
)
from disastir_mteb.models.identity import PROBE_TEXTS, PROBE_TOLERANCE, probe_difference
from disastir_mteb.util.digest import short_digest
from disastir_mteb.util.errors import InvalidInput

logger = logging.getLogger(__name__)

__all__ = ["EmbeddingServers", "ServedPassages"]

#: What of the servers' model listing names the served model (kept in the revision): vLLM's id, owner, root,
#: parent and context length; Infinity's backend and dtypes (an int8 or float16 serving is another serving);
#: llama.cpp's ``meta`` of the GGUF file. Never the start time, vLLM's ``permission`` records (a new random id
#: and time on every listing) or Infinity's ``stats`` (its queue).
_IDENTITY = ("id", "owned_by", "root", "parent", "max_model_len", "backend", "dtype", "embedding_dtype", "revision",
             "meta")
#: What of text-embeddings-inference's ``GET /info`` names its model (it has no model list).
_INFO_IDENTITY = ("model_id", "model_sha", "model_dtype", "served_model_name")


class EmbeddingServers(AbsEncoder):
    """An mteb encoder whose vectors come from OpenAI-compatible embedding servers.

    Args:
        model: the model name the servers serve (sent with every request). Results are filed under it when it
            has an organisation (``Qwen/Qwen3-Embedding-8B``), else under ``served/<model>``.
        base_urls: the servers (``http://gpu0:8000/v1``, ...); a string is one server.
        revision: pin the model's revision by hand (default: a digest of what the servers report of it).
        key_env: the environment variable holding the key (unset: none is sent to local servers).
        concurrency: requests in flight per server.
        timeout: seconds one request may take before it is retried.

    Raises:
        EndpointError: a server cannot be reached, does not serve ``model``, or the servers serve different
            models or dimensions (checked once, here, before anything is encoded).
    """

    def __init__(self, model: str, base_urls: Sequence[str] | str, *, revision: str | None = None,
                 key_env: str = DEFAULT_KEY_ENV, concurrency: int = DEFAULT_EMBEDDING_CONCURRENCY,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.served_model = str(model).strip()
        if not self.served_model:
            raise InvalidInput("Name the served model (-m NAME), as the embedding servers know it.")
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="embedding-servers", daemon=True)
        self._thread.start()
        self.timeout = timeout
        self.requests = 0
        self.dimension = 0
        self.probe = np.zeros((0, 0), dtype=np.float32)
        try:
            self.pool: EndpointPool[Any, Any] = self._run(self._make_pool(urls, key_env, concurrency, timeout))
            facts = self._run(self._describe_servers())
            self.served = facts
            self.probe = self.probe_servers()
        except BaseException:
            self.close()  # a run that cannot start leaves no thread and no connection behind
            raise
        name = self.served_model if "/" in self.served_model else f"served/{self.served_model}"
        pinned = revision.strip() if revision else None
        self.model = None
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={
            "name": name,
            "revision": pinned or "served-" + short_digest(json.dumps(
                {"facts": facts, "dimension": self.dimension}, sort_keys=True).encode("utf-8"))[:16],
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
            EndpointError: an answer of the wrong count, order, dimension or values (naming the server), a fault
                retrying cannot mend, or every server given up on.
        """
        batches = [list(batch) for batch in batches if len(batch)]
        if not batches:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._run(self._embed(batches))

    def probe_servers(self) -> np.ndarray:
        """Ask every server for the identity probe's vectors; they must agree. Sets :attr:`dimension`, returns them.

        The vectors of :data:`~disastir_mteb.models.identity.PROBE_TEXTS` (one request per server, retried as
        the run's are) identify the served model in the store. Servers that answer them with different
        dimensions, or with vectors further apart than rounding moves them
        (:data:`~disastir_mteb.models.identity.PROBE_TOLERANCE` of an unknown precision), serve different models.
        The probe asks for JSON numbers, not base64: their count is the dimension whatever precision the server
        computes in, and every later base64 answer is held to it (four bytes a coordinate).

        Raises:
            EndpointError: the servers disagree, or one cannot answer (one sentence naming it).
        """
        vectors = self._run(self._probe_servers())
        self.dimension = int(vectors.shape[1])
        self.probe = vectors
        return vectors

    @property
    def servers(self) -> list[Server]:
        """The servers, with what each answered and retried."""
        return self.pool.servers

    def describe(self) -> str:
        """One line for the run summary: the servers and what they did."""
        return (f"{self.served_model} on {len(self.servers)} embedding server(s), {self.requests} request(s): "
                + "; ".join(server.summary() for server in self.servers))

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

        The same server answering under the other prefix (:meth:`EndpointPool.other_base`) means the base URL is
        wrong. Else it is a server without a model list: text-embeddings-inference says in ``/info`` (at its root)
        which model it serves, whatever a request names, so that name must be ``model``; a server saying nothing
        is identified by the name and its vectors alone.
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

    async def _probe_servers(self) -> np.ndarray:
        """The probe's vectors, the same (dimension, and values within rounding) on every server."""
        answers = {server.url: await self._probe(server.url) for server in self.servers}
        dimensions = {url: vectors.shape[1] for url, vectors in answers.items()}
        if len(set(dimensions.values())) > 1:
            detail = ", ".join(f"{url}: {dim}" for url, dim in dimensions.items())
            raise EndpointError(f"The embedding servers answer {self.served_model!r} with different dimensions "
                                f"({detail}); their vectors must not be mixed.")
        (first, reference), *others = answers.items()
        for url, vectors in others:
            apart = probe_difference(vectors, reference)
            if apart > PROBE_TOLERANCE[None]:
                raise EndpointError(f"The embedding servers answer {self.served_model!r} with different vectors for "
                                    f"the same texts ({url} and {first}: up to {apart:.2g} apart, more than rounding "
                                    "does); they serve different models under one name, so their vectors must not be "
                                    "mixed.")
        return reference

    async def _probe(self, url: str) -> np.ndarray:
        """The probe's vectors from ``url``: one request through a pool of that server alone.

        A pool of its own, not the run's (whose servers share one queue), so that this very server answers, with
        the run's retries: a server still loading its model (503), rate limited (429) or slow is waited for, and
        one that never answers is one sentence naming it, not the ``openai`` client's traceback.
        """
        pool: EndpointPool[list[str], Any] = EndpointPool([url], key_env=self.pool.key_env, concurrency=1,
                                                           timeout=self.timeout, limits=self.pool.limits)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        queue.put_nowait(list(PROBE_TEXTS))
        answers: list[np.ndarray] = []

        def ask(texts: list[str], server: Server) -> tuple[str, dict[str, Any]]:
            return "/embeddings", self._body(texts, encoding="float")  # numbers: their count is the dimension

        def done(texts: list[str], response: Any, server: Server) -> None:
            answers.append(self._read(server.url, texts, response, check_dimension=False))
            pool.stop(queue)

        try:
            await pool.serve(queue, ask, done)
        finally:
            await pool.close()
        return answers[0]

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
            deliver(tag, self._read(server.url, batch, response))
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

        Handing the store chunk by chunk to :meth:`embed_batches` would leave every server idle while the last
        answers of a chunk are read; here the next chunks' batches are already in flight, so the servers are
        kept busy across chunk boundaries. ``on_batch`` hears of each batch's texts as they are read. A
        consumer that stops early (a kill, an error) cancels what is still queued.
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

    def _read(self, url: str, texts: list[str], response: Any, *, check_dimension: bool = True) -> np.ndarray:
        """The vectors of one answer (its parsed JSON), in the texts' order, or one sentence naming ``url``."""
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
        values = [None] * len(texts)
        for entry, index in zip(data, indexes, strict=True):
            values[index] = entry.get("embedding")
        array = _matrix(values, url, dimension=self.dimension if check_dimension else None)
        if check_dimension and array.shape[1] != self.dimension:
            raise EndpointError(f"{url} returned {array.shape[1]}-dimensional vectors; {self.served_model} gave "
                                f"{self.dimension} when the run began; the server's model changed, so the run stops "
                                "rather than mix them.")
        if not np.isfinite(array).all():
            bad = int(np.argwhere(~np.isfinite(array).all(axis=1))[0][0])
            raise EndpointError(f"{url} returned a vector with NaN or infinite values (text {bad} of the request: "
                                f"{texts[bad][:60]!r}).")
        if not np.abs(array).sum(axis=1).all():
            bad = int(np.argwhere(np.abs(array).sum(axis=1) == 0)[0][0])
            raise EndpointError(f"{url} returned an all-zero vector (text {bad} of the request: {texts[bad][:60]!r}); "
                                "it has no direction to compare.")
        return array


class ServedPassages:
    """Passages to the servers in the store's terms (``encode(texts)`` and ``encode_stream(chunks, on_batch=)``).

    The store hands a streaming encoder all missing chunks at once, so the servers never wait for a chunk's last
    answer before the next chunk's batches go out (:meth:`EmbeddingServers.encode_stream`).
    """

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

    ``dimension``: the run's (the probe's count of numbers), which base64 vectors must fill exactly at four bytes
    a coordinate when they are twice or half as wide (float64, float16), or not whole float32 values; None for the
    probe itself. Another whole number of float32 values is a changed dimension, the caller's sentence.
    """
    if all(isinstance(value, str) for value in values):  # what the servers are asked for: one copy, one frombuffer
        try:
            raws = [binascii.a2b_base64(value, strict_mode=True) for value in values]
        except (binascii.Error, ValueError):
            raise EndpointError(f"{url} returned an embedding that is neither a list of numbers nor base64.") from None
        widths = {len(raw) for raw in raws}
        if len(widths) != 1:
            raise EndpointError(f"{url} returned vectors of different dimensions "
                                f"{sorted(width // 4 for width in widths)} in one answer.")
        width = widths.pop()
        if dimension and (fault := _width_fault(url, width, dimension)):
            raise EndpointError(fault)
        if width % 4 or not width:
            raise EndpointError(f"{url} returned a base64 embedding of {width} bytes, not whole float32 values.")
        return np.frombuffer(b"".join(raws), dtype="<f4").reshape(len(raws), width // 4).astype(np.float32)
    rows = [_vector(value, url) for value in values]
    widths = {row.shape[0] for row in rows}
    if len(widths) != 1:
        raise EndpointError(f"{url} returned vectors of different dimensions {sorted(widths)} in one answer.")
    return np.stack(rows)


def _width_fault(url: str, width: int, dimension: int) -> str | None:
    """The sentence for base64 vectors of ``width`` bytes that are not ``dimension`` float32 values, or None.

    None too for another whole number of float32 values: that is a vector of another dimension (the model changed),
    which the caller says as it says it for lists of numbers.
    """
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

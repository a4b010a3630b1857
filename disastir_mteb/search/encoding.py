"""Corpus encoding at the speed of one forward pass: length-sorted batches, tokenisation ahead of the model.

The store encodes chunk by chunk (a killed run loses at most one chunk), yet each batch holds the texts it would
hold in one ``encode_document`` call over the whole corpus: chunks are whole batches of :func:`length_order`.
The result is bit-identical to ``model.encode_document(all_texts, batch_size=B)``, checked on each run's first
batch (a model that differs is encoded through its own ``encode`` instead).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from disastir_mteb.models.precision import module_dtype
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.settings import DEFAULT_BATCH_SIZE, check_count

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

logger = logging.getLogger(__name__)

__all__ = ["EncodingReport", "SentenceTransformerPipeline", "length_order"]

_DEPTH_PER_THREAD = 2  # tokenised batches waiting per worker: enough to hide a slow batch, bounded memory


def length_order(texts: Sequence[str]) -> np.ndarray:
    """sentence-transformers' encoding order, longest text (in characters) first, as ``SentenceTransformer._inference``.

    The store records a digest of it: a resumed run whose order differs (another NumPy) starts over.
    """
    return np.argsort(np.fromiter((-len(text) for text in texts), dtype=np.int64, count=len(texts)))


@dataclass
class EncodingReport:
    """How a text set was encoded, for the run summary.

    ``path`` is ``pipelined`` (this module), ``model.encode`` (chunk by chunk) or ``multi-process pool``;
    ``parity`` is ``bitwise`` or ``allclose`` when the first batch was checked against ``encode_document``.
    """

    path: str
    batch_size: int
    precision: str | None = None
    device: str | None = None
    tokenize_threads: int = 0
    max_seq_length: int | None = None
    at_max_length: int = 0
    texts: int = 0
    seconds: float = 0.0
    parity: str | None = None

    def add(self, texts: int, seconds: float, at_max_length: int = 0) -> None:
        """Count ``texts`` more texts encoded in ``seconds`` (called on the encoding thread only)."""
        self.texts += texts
        self.seconds += seconds
        self.at_max_length += at_max_length

    def describe(self) -> str:
        """One line: texts, batches, dtype and device, path, tokenisation, token limit, parity, time."""
        tokenised = (f"tokenised by {self.tokenize_threads} thread(s) ahead of the model" if self.tokenize_threads
                     else "tokenised on the encoding thread")
        limit = f"; max_seq_length {self.max_seq_length}" if self.max_seq_length else ""
        if limit and self.path == "pipelined":  # only the pipeline sees the tokens, so only it can count
            limit += f", {self.at_max_length:,} at the limit (truncated)"
        parity = f"; first batch {self.parity} to encode_document" if self.parity else ""
        rate = f", {self.texts / self.seconds:,.0f}/s" if self.seconds > 0 else ""
        where = ", ".join(x for x in (self.precision, self.device) if x)
        return (f"{self.texts:,} texts in length-sorted batches of {self.batch_size} ({where or 'model as given'}) "
                f"via {self.path}, {tokenised}{limit}{parity}; {self.seconds:.1f} s{rate}")


class SentenceTransformerPipeline:
    """``model.encode_document`` over pre-ordered chunks, with tokenisation on worker threads.

    Texts are encoded in the order given, ``batch_size`` at a time, with the model's own ``preprocess`` and
    ``forward``; the vectors stay on the model's device and go to the CPU once per chunk. Threads, not processes:
    the fast tokenizers release the GIL, and nothing forks.

    Args:
        model: a plain ``SentenceTransformer`` (its ``encode_document`` not overridden).
        batch_size: texts per forward pass.
        prompt: the prompt put before every text; ``None``: the one ``encode_document`` / ``encode_query`` picks.
        tokenize_threads: worker threads tokenising ahead; ``None`` = 1 on a CPU (the model already uses every
            core), all cores but one (at most 8) on a GPU; 0 = on the encoding thread.
        report: where texts, seconds and truncation counts are added up.
        side: ``document`` or ``query``: whose prompt and ``task`` are used.
    """

    def __init__(self, model: Any, *, batch_size: int = DEFAULT_BATCH_SIZE, prompt: str | None = None,
                 tokenize_threads: int | None = None, report: EncodingReport | None = None,
                 side: Literal["document", "query"] = "document") -> None:
        check_count("batch_size", batch_size, 1)
        check_count("tokenize_threads", tokenize_threads, 0, "automatic")
        if side not in ("document", "query"):
            raise InvalidInput(f"side={side!r} must be 'document' or 'query'.")
        self.model = model
        self.side = side
        self.batch_size = batch_size
        self.prompt = prompt if prompt is not None else _own_prompt(model, side)
        device = str(model.device)
        if tokenize_threads is None:
            tokenize_threads = 1 if not device.startswith("cuda") else max(1, min(8, (os.cpu_count() or 2) - 1))
        self.tokenize_threads = tokenize_threads
        self.max_seq_length = getattr(model, "max_seq_length", None)
        self.report = report or EncodingReport("pipelined", batch_size)
        self.report.path, self.report.batch_size = "pipelined", batch_size
        self.report.tokenize_threads, self.report.max_seq_length = tokenize_threads, self.max_seq_length
        self.report.device, self.report.precision = device, module_dtype(model)
        self._checked = False
        self._fallback = False
        self._checked_batch: tuple[list[str], Any, int] | None = None  # the parity check's texts, output, long
        self._lock = threading.Lock()

    def __call__(self, texts: list[str]) -> np.ndarray:
        """The embeddings of one chunk, float32, shape (len(texts), dim)."""
        return next(self.encode_stream([texts]))

    def encode_stream(self, chunks: Sequence[list[str]],
                      on_batch: Callable[[int], None] | None = None) -> Iterator[np.ndarray]:
        """Yield each chunk's embeddings (float32, rows in the chunk's order) as soon as it is done.

        Given all chunks at once, the workers keep tokenising across chunk boundaries. ``on_batch`` is called with
        the number of texts after every batch (progress bars).
        """
        import torch

        batches = [(number, chunk[start:start + self.batch_size])
                   for number, chunk in enumerate(chunks) for start in range(0, len(chunk), self.batch_size)]
        if not batches:
            return
        if not self._checked:
            self._check_parity(batches[0][1])
        checked, self._checked_batch = self._checked_batch, None  # the first batch, already through the model
        if self._fallback:
            for chunk in chunks:
                started = time.perf_counter()
                output = self._library_encode(chunk, convert_to_numpy=True)
                self.report.add(len(chunk), time.perf_counter() - started)
                if on_batch is not None:
                    on_batch(len(chunk))
                yield np.asarray(output, dtype=np.float32)
            return
        device = self.model.device
        pool = ThreadPoolExecutor(max_workers=self.tokenize_threads, thread_name_prefix="disastir-tokenize") \
            if self.tokenize_threads else None
        pending: deque[tuple[int, int, Any]] = deque()
        upcoming = iter(batches)

        def submit() -> None:
            item = next(upcoming, None)
            if item is not None:
                texts = item[1]
                if checked is not None and texts is checked[0]:
                    work = None
                else:
                    work = pool.submit(self._preprocess, texts) if pool is not None else texts
                pending.append((item[0], len(texts), work))

        try:
            for _ in range(max(1, _DEPTH_PER_THREAD * self.tokenize_threads)):
                submit()
            current, outputs, at_limit, started = 0, [], 0, time.perf_counter()
            with torch.inference_mode():
                while pending:
                    number, size, work = pending.popleft()
                    if work is None:  # the parity check's batch: its output is this batch's
                        output, long = checked[1], checked[2]  # type: ignore[index]
                    else:
                        features, long = work.result() if pool is not None else self._preprocess(work)
                        output = None
                    submit()
                    if number != current:
                        yield self._finish(outputs, started, at_limit)
                        current, outputs, at_limit, started = number, [], 0, time.perf_counter()
                    outputs.append(output if output is not None else self._forward(features, device))
                    at_limit += long
                    if on_batch is not None:
                        on_batch(size)
                yield self._finish(outputs, started, at_limit)
        finally:
            if pool is not None:
                for _, _, work in pending:
                    if work is not None:
                        work.cancel()
                pool.shutdown(wait=True)

    # ------------------------------------------------------------------ internals

    def _preprocess(self, texts: list[str]) -> tuple[dict[str, Any], int]:
        """One batch tokenised as ``encode_document`` / ``encode_query`` do, and how many texts reach the limit."""
        try:
            features = self.model.preprocess(texts, prompt=self.prompt, task=self.side)
        except RuntimeError as error:  # a tokenizer whose settings changed under another thread ("Already borrowed")
            if "borrow" not in str(error).lower():
                raise
            with self._lock:
                features = self.model.preprocess(texts, prompt=self.prompt, task=self.side)
        mask = features.get("attention_mask")
        if self.max_seq_length and mask is not None and hasattr(mask, "sum"):
            return features, int((mask.sum(dim=1) >= self.max_seq_length).sum())
        return features, 0

    def _forward(self, features: dict[str, Any], device: Any) -> Any:
        from sentence_transformers.util import batch_to_device

        output = self.model(batch_to_device(features, device), task=self.side)["sentence_embedding"]
        truncate_dim = getattr(self.model, "truncate_dim", None)
        return output[..., :truncate_dim] if truncate_dim else output

    def _finish(self, outputs: list[Any], started: float, at_limit: int) -> np.ndarray:
        """One chunk's vectors to the CPU as float32: one device-to-host copy per chunk."""
        import torch

        vectors = torch.cat(outputs).float().cpu().numpy()
        self.report.add(len(vectors), time.perf_counter() - started, at_limit)
        return vectors

    def _library_encode(self, texts: list[str], **kwargs: Any) -> Any:
        """The model's own ``encode_document`` / ``encode_query``, with this pipeline's settings."""
        encode = self.model.encode_document if self.side == "document" else self.model.encode_query
        return encode(texts, prompt=self.prompt, batch_size=self.batch_size, show_progress_bar=False, **kwargs)

    def _check_parity(self, texts: list[str]) -> None:
        """Compare the first batch with ``encode_document``; fall back to it per chunk if they disagree.

        The pipeline's output for that batch is kept: it is the batch's output in the encoding that follows.
        """
        import torch

        self._checked = True
        try:
            with torch.inference_mode():
                features, long = self._preprocess(list(texts))
                output = self._forward(features, self.model.device)
                ours = output.float().cpu()
            self._checked_batch = (texts, output, long)
            theirs = self._library_encode(list(texts), convert_to_tensor=True).float().cpu()
        except (TypeError, ValueError, KeyError, AttributeError) as error:  # another sentence-transformers API
            logger.warning("The pipelined encoder cannot drive %s (%s); encoding through encode_document chunk by "
                           "chunk instead.", type(self.model).__name__, error)
            ours = theirs = None
        if ours is not None and ours.shape == theirs.shape and torch.equal(ours, theirs):
            self.report.parity = "bitwise"
        elif ours is not None and ours.shape == theirs.shape and torch.allclose(ours, theirs, rtol=1e-3, atol=1e-5):
            self.report.parity = "allclose"
            logger.info("The pipelined encoder matches encode_document to %.1e (not bit for bit) on the first batch.",
                        float((ours - theirs).abs().max()))
        else:
            self._fallback, self._checked_batch = True, None
            self.report.path, self.report.tokenize_threads = f"model.encode_{self.side}", 0
            if ours is not None:
                logger.warning("The pipelined encoder disagrees with %s.encode_%s on the first batch; encoding "
                               "through it chunk by chunk instead.", type(self.model).__name__, self.side)


def _own_prompt(model: Any, side: str) -> str | None:
    """The prompt ``encode_document`` / ``encode_query`` pick by themselves, else the model's default prompt."""
    prompts = getattr(model, "prompts", None) or {}
    for name in ("document", "passage", "corpus") if side == "document" else ("query",):
        if name in prompts:
            return prompts[name]
    default = getattr(model, "default_prompt_name", None)
    return prompts.get(default) if default else None


def may_flatten_inputs(model: Any) -> bool:
    """Whether a ``SentenceTransformer`` may flatten its inputs, and then batch them in its own interleaved order.

    sentence-transformers decides it from its first module: a ``Transformer`` says so in its public
    ``can_flatten_inputs`` (flash attention's variable-length kernels, ``unpad_inputs``); a ``Router`` flattens only
    when every route's does. The plugin's length-ordered pipeline reproduces ``encode`` only where nothing is
    flattened, so this answers False only where the first module says False, and True (the model keeps its own
    ``encode``) for anything else, a ``Router`` or an object that cannot say included.
    """
    try:
        first = model[0]
    except (TypeError, IndexError, KeyError):
        return True
    answer = getattr(first, "can_flatten_inputs", None)
    return answer if isinstance(answer, bool) else True


def plain_sentence_transformer(model: Any) -> bool:
    """Whether ``model`` is a ``SentenceTransformer`` whose ``encode``/``encode_document`` are the library's own.

    Asked without importing sentence-transformers (seconds, for other encoders): an instance implies it is imported.
    """
    library = sys.modules.get("sentence_transformers")
    SentenceTransformer = getattr(library, "SentenceTransformer", None) if library is not None else None
    if SentenceTransformer is None:
        return False
    return (isinstance(model, SentenceTransformer)
            and type(model).encode_document is SentenceTransformer.encode_document
            and type(model).encode_query is SentenceTransformer.encode_query
            and type(model).encode is SentenceTransformer.encode
            and not may_flatten_inputs(model))

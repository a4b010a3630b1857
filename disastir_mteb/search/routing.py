"""How a task's texts reach the model: the prompts that key their vectors, and the encoder each side goes through.

A plain SentenceTransformer behind known wrappers gets the pipelined encoder (or, over several devices, the
multi-process pool), passages for embedding servers their stream, anything else mteb's ``encode``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.types import PromptType

from disastir_mteb.models.precision import module_device
from disastir_mteb.search.encoding import EncodingReport, SentenceTransformerPipeline, plain_sentence_transformer
from disastir_mteb.util.mteb_internals import create_dataloader
from disastir_mteb.vocabulary.instructions import InstructionConfig
from disastir_mteb.vocabulary.settings import QUERY_SIDE_KEYS
from disastir_mteb.vocabulary.taxonomy import ALL_TASK_NAMES, get_spec, is_task_name

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.types import EncodeKwargs

    from disastir_mteb.models.embedding_servers import EmbeddingServers

logger = logging.getLogger(__name__)

__all__ = ["DISASTIR_TASKS", "Route", "passage_loader", "passage_prompt", "query_prompt", "resolve_devices",
           "retrieval_texts", "sentence_transformer_route", "task_encoder", "task_prompt"]

DISASTIR_TASKS = ALL_TASK_NAMES  # every query set's tasks: DisastIR-Test-QA-Bio gets QA's instruction too


def task_encoder(model: Any, task_metadata: TaskMetadata, prompt_type: PromptType, hf_split: str, hf_subset: str,
                 encode_kwargs: EncodeKwargs, num_proc: int | None, *, batch_size: int, devices: Sequence[str],
                 tokenize_threads: int | None, progress: bool, precision: Any,
                 count: Callable[[int], None]) -> tuple[Callable[[list[str]], Any], EncodingReport | None]:
    """The encoder of one task's texts (pipelined, pooled, served or mteb's ``encode``) and, for passages, its report.

    ``count`` is told how many texts each call encoded.
    """
    from datasets import Dataset

    encode_kwargs = {**encode_kwargs, "batch_size": batch_size}  # type: ignore[typeddict-item]
    passages = prompt_type == PromptType.document
    route = sentence_transformer_route(model, task_metadata, prompt_type) if passages else None
    report = None
    if passages:
        limit = getattr(route.model, "max_seq_length", None) if route else None
        report = EncodingReport("model.encode (mteb)", batch_size, precision=precision, device=module_device(model),
                                max_seq_length=limit)
    if route is not None and len(devices) > 1:
        pool_model, prompt = route.model, route.prompt
        logger.info("Encoding passages on %s with sentence-transformers' multi-process pool.", devices)
        report.path, report.device = "multi-process pool", ", ".join(devices)  # type: ignore[union-attr]

        def encode_on_devices(texts: list[str]) -> Any:
            return pool_model.encode_document(texts, prompt=prompt, device=list(devices), convert_to_numpy=True,
                                              batch_size=batch_size, show_progress_bar=False)

        return counted(timed_encoder(encode_on_devices, report), count), report
    if route is not None:
        pipeline = SentenceTransformerPipeline(route.model, batch_size=batch_size, prompt=route.prompt,
                                               tokenize_threads=tokenize_threads, report=report)
        return counted(pipeline, count), report
    served = served_passages(model) if passages else None
    if served is not None:
        report.path = f"{len(served.servers)} embedding server(s)"  # type: ignore[union-attr]
        report.device = ", ".join(server.url for server in served.servers)  # type: ignore[union-attr]
        return counted(ServedStream(served, batch_size, report), count), report
    if passages and progress:
        encode_kwargs["show_progress_bar"] = False  # the corpus bar counts these texts; one bar, not two

    def encode(texts: list[str]) -> Any:
        ids = [str(i) for i in range(len(texts))]
        loader = (passage_loader(texts, batch_size) if passages else
                  create_dataloader(Dataset.from_dict({"id": ids, "text": texts}), task_metadata=task_metadata,
                                    prompt_type=prompt_type, num_proc=num_proc, **encode_kwargs))
        return model.encode(loader, task_metadata=task_metadata, hf_split=hf_split, hf_subset=hf_subset,
                            prompt_type=prompt_type, **encode_kwargs)

    return counted(timed_encoder(encode, report) if passages else encode, count), report

def task_prompt(model: Any, task_metadata: TaskMetadata, prompt_type: PromptType = PromptType.document) -> str:
    """The prompt text a wrapper puts before passages or queries ('' when none; mteb's lookup returns prompt names).

    Part of the embedding cache key, so an error of the lookup itself is raised, never taken for "no prompt".
    """
    get_prompt = getattr(model, "get_prompt", None)
    if not callable(get_prompt) or not _accepts(get_prompt, task_metadata, prompt_type):
        return ""
    name = get_prompt(task_metadata, prompt_type)
    if not name:
        return ""
    prompts = getattr(model, "model_prompts", None) or {}
    return str(prompts.get(name, name))


def _accepts(function: Callable[..., Any], *args: Any) -> bool:
    """Whether ``function`` can be called with ``args`` (its signature binds them; unknown signatures: yes)."""
    try:
        inspect.signature(function).bind(*args)
    except TypeError:  # another API's method under the same name
        return False
    except ValueError:  # no signature to read (a builtin): call it and let it answer
        return True
    return True


def _instructs_passages(model: Any) -> bool:
    """Whether the instruction settings reach passages: instructed passages, or a model instructing its own."""
    from disastir_mteb.models.adapter import InstructedEncoder

    if not isinstance(model, InstructedEncoder):
        return True  # settings named by someone else: keep them all, a changed key costs work, never a wrong vector
    return model.config.passages or (model.model_prompt is not None
                                     and bool(getattr(model.model, "apply_instruction_to_passages", False)))


def retrieval_texts(dataset: Any, prompt_type: PromptType, *, task_metadata: TaskMetadata) -> list[str]:
    """The texts of a corpus or a query set as the model reads them: those of mteb's own dataloader, as a list.

    mteb maps every row and reads its result row by row; the plain cases (passages, plain-text queries) are read as
    whole columns here, to the same strings. Anything else (conversations, instructions) goes through the dataset
    mteb's ``create_dataloader`` batches for ``task_metadata``.
    """
    if len(dataset) == 0:
        return []
    columns = dataset.column_names
    texts = dataset["text"][:]  # a slice reads the whole column at once
    if prompt_type == PromptType.document:
        if "title" not in columns:
            return [text.strip() for text in texts]
        return [(title + " " + text).strip() if title else text.strip()
                for title, text in zip(dataset["title"][:], texts, strict=True)]
    if "instruction" not in columns and all(isinstance(text, str) for text in texts):
        return texts
    loader = create_dataloader(dataset, task_metadata=task_metadata, prompt_type=prompt_type)
    return list(loader.dataset["text"][:])


def passage_loader(texts: list[str], batch_size: int) -> Any:
    """The batches mteb's ``create_dataloader`` makes of passages, without its per-row ``datasets.map``.

    ``texts`` are :func:`retrieval_texts` already, so that map would change nothing.
    """
    from datasets import Dataset
    from torch.utils.data import DataLoader

    dataset = Dataset.from_dict({"id": [str(i) for i in range(len(texts))], "text": texts, "body": texts})
    return DataLoader(dataset, batch_size=batch_size, collate_fn=_lists, shuffle=False)


def _lists(rows: list[dict[str, str]]) -> dict[str, list[str]]:
    """A batch of rows as {column: its values}: what mteb's collate makes of string columns."""
    return {column: [row[column] for row in rows] for column in rows[0]}


def query_prompt(model: Any, task_metadata: TaskMetadata) -> str:
    """Everything besides the text that decides a query embedding (the task, every setting); part of the cache key."""
    return f"task={task_metadata.name} | {passage_prompt(model, task_metadata, queries=True)}"


def passage_prompt(model: Any, task_metadata: TaskMetadata, *, queries: bool = False) -> str:
    """Everything besides the text that decides a passage embedding; part of the cache key.

    Query-side settings are left out unless they reach the passages (or ``queries`` asks for them), so a run with
    other instructions reuses the corpus it already encoded.
    """
    parts = []
    experiment = dict(getattr(getattr(model, "mteb_model_meta", None), "experiment_kwargs", None) or {})
    if not queries and not _instructs_passages(model):
        for name in QUERY_SIDE_KEYS:  # they key query vectors, never passage vectors (unless instructed too)
            experiment.pop(name, None)
    if experiment:
        parts.append(json.dumps(experiment, sort_keys=True, default=str))
    config = getattr(model, "config", None)
    if isinstance(config, InstructionConfig) and config.passages and is_task_name(task_metadata.name):
        parts.append(config.format(get_spec(task_metadata.name).intent, "{passage}"))
    prompt = task_prompt(model, task_metadata)
    if prompt:
        parts.append(f"prompt={prompt}")
    if getattr(model, "apply_instruction_to_passages", False) and getattr(model, "instruction_template", None):
        parts.append(f"task={task_metadata.name}")  # the model instructs passages per task
    return " | ".join(parts)


def resolve_devices(devices: Sequence[str] | str | None) -> tuple[str, ...]:
    """The devices of the multi-process pool: ``"auto"`` = every CUDA device when there are two or more, else none."""
    if devices is None:
        return ()
    if devices == "auto":
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return tuple(f"cuda:{i}" for i in range(count)) if count > 1 else ()
    return (devices,) if isinstance(devices, str) else tuple(devices)


@dataclasses.dataclass(frozen=True)
class Route:
    """A plain SentenceTransformer behind known wrappers: its prompt and the text transform on the way."""

    model: Any
    prompt: str | None
    transform: Callable[[str], str] | None


def sentence_transformer_route(model: Any, task_metadata: TaskMetadata,
                                prompt_type: PromptType) -> Route | None:
    """How texts of ``prompt_type`` reach a plain SentenceTransformer, if they do unchanged but for a known step.

    Only wrappers whose effect is known are looked through (``with_instructions``, mteb's SentenceTransformer
    wrapper); anything else (None) goes through the model's own ``encode``.
    """
    from mteb.models import SentenceTransformerEncoderWrapper

    from disastir_mteb.models.adapter import InstructedEncoder

    transform = None
    if isinstance(model, InstructedEncoder):
        config = model.config
        if model.model_prompt is not None:
            return None
        if prompt_type == PromptType.document and config.passages and config.instructions is not None:
            return None
        if prompt_type == PromptType.query and config.instructions is not None and is_task_name(task_metadata.name):
            intent = get_spec(task_metadata.name).intent
            transform = functools.partial(config.format, intent)
        model = model.model
    prompt = None
    if isinstance(model, SentenceTransformerEncoderWrapper):
        if type(model).encode is not SentenceTransformerEncoderWrapper.encode:
            return None
        prompt = task_prompt(model, task_metadata, prompt_type) or None
        model = model.model
    return Route(model, prompt, transform) if plain_sentence_transformer(model) else None


def served_passages(model: Any) -> EmbeddingServers | None:
    """The embedding servers passages reach unchanged (through ``with_instructions`` when passages are raw), if any."""
    from disastir_mteb.models.adapter import InstructedEncoder
    from disastir_mteb.models.embedding_servers import EmbeddingServers

    if isinstance(model, InstructedEncoder):
        if model.config.passages and model.config.instructions is not None:
            return None
        model = model.model
    return model if isinstance(model, EmbeddingServers) else None


class ServedStream:
    """Passages to embedding servers: one chunk per call, or every chunk through one queue (``encode_stream``)."""

    def __init__(self, served: EmbeddingServers, batch_size: int, report: EncodingReport | None) -> None:
        self.served, self.batch_size, self.report = served, batch_size, report

    def __call__(self, texts: list[str]) -> np.ndarray:
        """One chunk's vectors (through the stream, so it is timed and reported alike)."""
        return next(iter(self.encode_stream([texts])))

    def encode_stream(self, chunks: Sequence[list[str]], on_batch: Callable[[int], None] | None = None) -> Any:
        """The servers' stream (:meth:`EmbeddingServers.encode_stream`), each chunk's texts and time reported."""
        started = time.perf_counter()
        for chunk, output in zip(chunks, self.served.passages(self.batch_size).encode_stream(chunks, on_batch),
                                 strict=True):
            if self.report is not None:
                now = time.perf_counter()
                self.report.add(len(chunk), now - started)
                started = now
            yield output


class Counted:
    """An encoder (plain callable or one with ``encode_stream``) that reports each finished chunk's size."""

    def __init__(self, inner: Any, count: Callable[[int], None]) -> None:
        self.inner, self.count = inner, count

    def __call__(self, texts: list[str]) -> Any:
        output = self.inner(texts)
        self.count(len(texts))
        return output

    def encode_stream(self, chunks: Sequence[list[str]], on_batch: Callable[[int], None] | None = None) -> Any:
        """The inner stream, counting each chunk as it comes out."""
        for chunk, output in zip(chunks, self.inner.encode_stream(chunks, on_batch=on_batch), strict=True):
            self.count(len(chunk))
            yield output


def counted(encode: Callable[[list[str]], Any], count: Callable[[int], None]) -> Callable[[list[str]], Any]:
    """``encode`` telling ``count`` how many texts each call (or each chunk of its stream) encoded."""
    if hasattr(encode, "encode_stream"):
        return Counted(encode, count)

    def counting(texts: list[str]) -> Any:
        output = encode(texts)
        count(len(texts))
        return output

    return counting


def timed_encoder(encode: Callable[[list[str]], Any], report: EncodingReport | None) -> Callable[[list[str]], Any]:
    """``encode`` adding its texts and seconds to ``report``."""
    if report is None:
        return encode

    def timed(texts: list[str]) -> Any:
        started = time.perf_counter()
        output = encode(texts)
        report.add(len(texts), time.perf_counter() - started)
        return output

    return timed


class Rows:
    """An "encoder" that hands out rows of vectors already computed, in the order chunks ask for them."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors, self.row = vectors, 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = self.vectors[self.row:self.row + len(texts)]
        self.row += len(texts)
        return out

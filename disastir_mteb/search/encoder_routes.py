"""How a task's texts reach the model: straight to a plain SentenceTransformer where that is safe, else mteb's encode.

A plain SentenceTransformer behind known wrappers (``with_instructions``, mteb's
SentenceTransformer wrapper) is found with its prompt and text transform (a :class:`_Route`): its
passages then go through the pipelined encoder
(:class:`~disastir_mteb.search.encoding.SentenceTransformerPipeline`) or, over several devices,
sentence-transformers' multi-process pool; everything else goes through mteb's ``encode``. The
prompts found on the way are also what the embedding cache key records besides the texts.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from mteb._create_dataloaders import create_dataloader
from mteb.types import PromptType

from disastir_mteb.search.encoding import EncodingReport, SentenceTransformerPipeline, plain_sentence_transformer
from disastir_mteb.search.precision import module_device
from disastir_mteb.vocabulary.instructions import InstructionConfig
from disastir_mteb.vocabulary.settings import QUERY_SIDE_KEYS
from disastir_mteb.vocabulary.taxonomy import ALL_TASK_NAMES, get_spec

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.types import EncodeKwargs

    from disastir_mteb.search.shared_corpus import SharedCorpusSearch

logger = logging.getLogger(__name__)

__all__: list[str] = []  # private helpers of SharedCorpusSearch, imported by name

_DISASTIR = ALL_TASK_NAMES  # every query set's tasks: DisastIR-Test-QA-Bio gets QA's instruction too


def _task_prompt(model: Any, task_metadata: TaskMetadata, prompt_type: PromptType = PromptType.document) -> str:
    """The prompt TEXT a wrapper puts before passages or queries ('' when none; mteb returns prompt names)."""
    get_prompt = getattr(model, "get_prompt", None)
    if not callable(get_prompt):
        return ""
    try:
        name = get_prompt(task_metadata, prompt_type)
    except Exception:
        return ""
    if not name:
        return ""
    prompts = getattr(model, "model_prompts", None) or {}
    return str(prompts.get(name, name))


def _instructs_passages(model: Any) -> bool:
    """Whether the instruction settings reach passages: instructed passages, or a model instructing its own."""
    from disastir_mteb.models.adapter import InstructedEncoder

    if not isinstance(model, InstructedEncoder):
        return True  # settings named by someone else: keep them all, a changed key costs work, never a wrong vector
    return model.config.passages or (model.model_prompt is not None
                                     and bool(getattr(model.model, "apply_instruction_to_passages", False)))


def _query_prompt(model: Any, task_metadata: TaskMetadata) -> str:
    """Everything besides the text that decides a query embedding (the task, every setting); part of the cache key."""
    return f"task={task_metadata.name} | {_passage_prompt(model, task_metadata, queries=True)}"


def _passage_prompt(model: Any, task_metadata: TaskMetadata, *, queries: bool = False) -> str:
    """Everything besides the text that decides a passage embedding; part of the cache key.

    Query-side settings (the instruction set and template of ``with_instructions``) are left out
    unless they reach the passages, so a run with other instructions serves the corpus it already
    encoded: the passages it would send are byte for byte the same. ``queries``: keep them (for
    :func:`_query_prompt`).
    """
    parts = []
    experiment = dict(getattr(getattr(model, "mteb_model_meta", None), "experiment_kwargs", None) or {})
    if not queries and not _instructs_passages(model):
        for name in QUERY_SIDE_KEYS:  # they key query vectors, never passage vectors (unless instructed too)
            experiment.pop(name, None)
    if experiment:
        parts.append(json.dumps(experiment, sort_keys=True, default=str))
    config = getattr(model, "config", None)
    if isinstance(config, InstructionConfig) and config.passages and task_metadata.name in _DISASTIR:
        parts.append(config.format(get_spec(task_metadata.name).intent, "{passage}"))
    prompt = _task_prompt(model, task_metadata)
    if prompt:
        parts.append(f"prompt={prompt}")
    if getattr(model, "apply_instruction_to_passages", False) and getattr(model, "instruction_template", None):
        parts.append(f"task={task_metadata.name}")  # the model instructs passages per task
    return " | ".join(parts)


def _declared_dimension(model: Any) -> int | None:
    """The output dimension a SentenceTransformer (bare or behind known wrappers) computes from its modules."""
    inner = getattr(getattr(model, "model", None), "model", None) or getattr(model, "model", None) or model
    if not plain_sentence_transformer(inner):
        return None
    dimension = getattr(inner, "get_embedding_dimension", None) or inner.get_sentence_embedding_dimension  # ST < 6
    dim = dimension()
    return int(dim) if dim else None


def _resolve_devices(devices: Sequence[str] | str | None) -> tuple[str, ...]:
    """The devices of the multi-process pool: ``"auto"`` = every CUDA device when there are two or more, else none."""
    if devices is None:
        return ()
    if devices == "auto":
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return tuple(f"cuda:{i}" for i in range(count)) if count > 1 else ()
    return (devices,) if isinstance(devices, str) else tuple(devices)


@dataclasses.dataclass(frozen=True)
class _Route:
    """A plain SentenceTransformer behind known wrappers: its prompt and the text transform on the way."""

    model: Any
    prompt: str | None
    transform: Callable[[str], str] | None


def _sentence_transformer_route(model: Any, task_metadata: TaskMetadata,
                                prompt_type: PromptType) -> _Route | None:
    """How texts of ``prompt_type`` reach a plain SentenceTransformer, if they do unchanged but for a known step.

    Only wrappers whose effect is known are looked through: ``with_instructions`` (queries get
    ``config.format(intent, query)``; instructed passages are not routed) and mteb's
    SentenceTransformer wrapper (its prompt for the task, else the model's own, as
    ``encode_query`` / ``encode_document`` pick it). The pipeline then runs exactly what the
    model's own ``encode`` would; anything else (None) goes through that ``encode``.
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
        if prompt_type == PromptType.query and config.instructions is not None and task_metadata.name in _DISASTIR:
            intent = get_spec(task_metadata.name).intent
            transform = functools.partial(config.format, intent)
        model = model.model
    prompt = None
    if isinstance(model, SentenceTransformerEncoderWrapper):
        if type(model).encode is not SentenceTransformerEncoderWrapper.encode:
            return None
        prompt = _task_prompt(model, task_metadata, prompt_type) or None
        model = model.model
    return _Route(model, prompt, transform) if plain_sentence_transformer(model) else None


def _encoder(searcher: SharedCorpusSearch, task_metadata: TaskMetadata, prompt_type: PromptType, hf_split: str,
             hf_subset: str, encode_kwargs: EncodeKwargs, num_proc: int | None) -> Callable[[list[str]], Any]:
    """The encoder of one task's texts: pipelined, pooled or mteb's ``encode``; it counts (and times) on ``searcher``.

    For passages it also starts ``searcher.encoding``, the report of how the corpus was encoded.
    """
    from datasets import Dataset

    batch_size = searcher._batch_size(encode_kwargs)
    encode_kwargs = {**encode_kwargs, "batch_size": batch_size}  # type: ignore[typeddict-item]
    route = (_sentence_transformer_route(searcher.model, task_metadata, prompt_type)
             if prompt_type == PromptType.document else None)
    if prompt_type == PromptType.document:
        limit = getattr(route.model, "max_seq_length", None) if route else None
        searcher.encoding = EncodingReport("model.encode (mteb)", batch_size, precision=searcher.model_dtype,
                                           device=module_device(searcher.model), max_seq_length=limit)
    if route is not None and len(searcher.devices) > 1:
        pool_model, prompt = route.model, route.prompt
        logger.info("Encoding passages on %s with sentence-transformers' multi-process pool.", searcher.devices)
        searcher.encoding.path = "multi-process pool"  # type: ignore[union-attr]
        searcher.encoding.device = ", ".join(searcher.devices)  # type: ignore[union-attr]

        def encode_on_devices(texts: list[str]) -> Any:
            output = pool_model.encode_document(texts, prompt=prompt, device=list(searcher.devices),
                                                convert_to_numpy=True, batch_size=batch_size,
                                                show_progress_bar=False)
            searcher.passages_encoded += len(texts)
            return output

        return _timed(encode_on_devices, searcher.encoding)
    if route is not None:
        pipeline = SentenceTransformerPipeline(route.model, batch_size=batch_size, prompt=route.prompt,
                                               tokenize_threads=searcher.tokenize_threads, report=searcher.encoding)
        return _Counted(pipeline, searcher._count_passages)

    if prompt_type == PromptType.document and searcher.progress:
        encode_kwargs["show_progress_bar"] = False  # the corpus bar counts these texts; one bar, not two

    def encode(texts: list[str]) -> Any:
        loader = create_dataloader(Dataset.from_dict({"id": [str(i) for i in range(len(texts))], "text": texts}),
                                   task_metadata=task_metadata, prompt_type=prompt_type, num_proc=num_proc,
                                   **encode_kwargs)
        output = searcher.model.encode(loader, task_metadata=task_metadata, hf_split=hf_split,
                                       hf_subset=hf_subset, prompt_type=prompt_type, **encode_kwargs)
        if prompt_type == PromptType.document:
            searcher.passages_encoded += len(texts)
        else:
            searcher.queries_encoded += len(texts)
        return output

    return _timed(encode, searcher.encoding) if prompt_type == PromptType.document else encode


class _Counted:
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


def _timed(encode: Callable[[list[str]], Any], report: EncodingReport | None) -> Callable[[list[str]], Any]:
    """``encode`` adding its texts and seconds to ``report``."""
    if report is None:
        return encode

    def timed(texts: list[str]) -> Any:
        started = time.perf_counter()
        output = encode(texts)
        report.add(len(texts), time.perf_counter() - started)
        return output

    return timed

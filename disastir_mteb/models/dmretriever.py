"""The DMRetriever models (the DisastIR authors' own family, all six sizes) as mteb models.

Every size follows the authors' evaluation: mean-pooled over non-padding tokens, L2-normalised, 512 tokens, the
``dmretriever`` instruction before queries, passages raw. The Qwen3 sizes load as
:class:`~disastir_mteb.models.bidirectional_qwen3.BidirectionalQwen3Model` (``AutoModel`` would give the causal
model); which path a checkpoint takes is read from its files, so a local folder works as well as a Hub id. The
instruction goes through mteb's own ``prompts_dict``, so :func:`disastir_mteb.with_instructions` can take it over.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from mteb.types import PromptType

from disastir_mteb.util.errors import InvalidInput, MissingInput
from disastir_mteb.vocabulary.instructions import INSTRUCTION_SETS
from disastir_mteb.vocabulary.settings import DEFAULT_BATCH_SIZE
from disastir_mteb.vocabulary.taxonomy import SPLIT_TASK_SPECS, Intent

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.types import Array, BatchedInput
    from torch.utils.data import DataLoader

logger = logging.getLogger(__name__)

__all__ = ["DMRETRIEVER_MODELS", "DMRetrieverEncoder"]

_MAX_TOKENS = 512  # the authors' evaluation (eva/utils/config.py DEFAULT_MAXLEN)
_REPO = "https://github.com/KaiYin97/DMRETRIEVER"
_CITATION = """@article{yin2025dmretriever,
  title={DMRETRIEVER: A Family of Models for Improved Text Retrieval in Disaster Management},
  author={Yin, Kai and Dong, Xiangjue and Liu, Chengkai and Lin, Allen and Shi, Lingfeng and Mostafavi, Ali
    and Caverlee, James},
  journal={arXiv preprint arXiv:2510.15087},
  year={2025}
}"""


@dataclass(frozen=True)
class _Release:
    """One published size: DMRetriever paper Table 1 and the repository README's checkpoint table."""

    n_parameters: int
    embed_dim: int  #: the backbone's hidden size
    adapted_from: str | None = None  #: Hub id of the backbone, where the paper's name pins one


_SIZES: dict[str, _Release] = {
    "33M": _Release(33_000_000, 384),  # MiniLM
    "109M": _Release(109_000_000, 768),  # BERT-base-uncased
    "335M": _Release(335_000_000, 1024),  # BERT-large-uncased-WWM
    "596M": _Release(596_000_000, 1024, "Qwen/Qwen3-0.6B"),  # 28 layers
    "4B": _Release(4_000_000_000, 2560, "Qwen/Qwen3-4B"),  # 36 layers
    "7.6B": _Release(7_568_000_000, 4096, "Qwen/Qwen3-8B"),  # 36 layers
}
_DMRETRIEVER_INSTRUCTIONS: Mapping[Intent, str] = INSTRUCTION_SETS["dmretriever"]  # type: ignore[assignment]
_Kind = Literal["encoder", "qwen3", "adapter"]


class DMRetrieverEncoder(AbsEncoder):
    """A DMRetriever checkpoint, any size, with the authors' architecture, pooling and instructions.

    ``model_name`` is a Hub id or a local folder (a full checkpoint or a LoRA adapter, applied to ``base_model`` when
    given instead of the base its config names). ``dtype`` None runs the Qwen3 sizes in float16 on CUDA and float32
    elsewhere (the authors' evaluation), the encoder-only sizes in the checkpoint's own dtype; ``model_kwargs`` go
    to ``from_pretrained``.

    Raises:
        FileNotFoundError: the checkpoint's files are not available here.
        ImportError: a LoRA adapter without ``peft`` installed.
        ValueError: a decoder other than Qwen3, an unknown dtype, or ``base_model`` for a full checkpoint.
    """

    instruction_template = "{instruction}: "

    def __init__(self, model_name: str, revision: str | None = None, *, device: str | None = None,
                 max_length: int = _MAX_TOKENS, dtype: str | None = None, base_model: str | None = None,
                 cache_dir: str | None = None, local_files_only: bool = False, **model_kwargs: Any) -> None:
        import torch

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        hub: dict[str, Any] = {"revision": revision, "cache_dir": cache_dir, "local_files_only": local_files_only}
        kind, adapter = _checkpoint_kind(model_name, hub)
        if kind == "encoder":
            self.tokenizer, self.model = _load_encoder(model_name, hub=hub, dtype=dtype, base_model=base_model,
                                                       device=self.device, model_kwargs=model_kwargs)
        else:
            from disastir_mteb.models.bidirectional_qwen3 import load_bidirectional_qwen3, resolve_dtype

            if kind == "qwen3" and base_model is not None:
                raise InvalidInput(f"base_model={base_model!r} applies to LoRA adapters; {model_name!r} is a full "
                                   "checkpoint.")
            self.tokenizer, self.model = load_bidirectional_qwen3(
                model_name, adapter=adapter, base_model=base_model, hub=hub,
                dtype=resolve_dtype(dtype, self.device), device=self.device, model_kwargs=model_kwargs)
        self.max_length = max_length
        self.prompts_dict = {spec.name: _DMRETRIEVER_INSTRUCTIONS[spec.intent]  # full, Test and DevLite tasks
                             for specs in SPLIT_TASK_SPECS.values() for spec in specs}
        self.mteb_model_meta = DMRETRIEVER_MODELS.get(model_name) or ModelMeta.create_empty(overwrites={
            "name": model_name if "/" in model_name else f"local/{model_name.rstrip('/').split('/')[-1]}",
            "similarity_fn_name": ScoringFunction.COSINE, "use_instructions": True,
        })

    def texts_for(self, texts: list[str], task_metadata: TaskMetadata, prompt_type: PromptType | None) -> list[str]:
        """The exact strings the network reads: instruction + query for queries, raw passages."""
        if prompt_type != PromptType.query:
            return texts
        prefix = self.get_task_instruction(task_metadata, prompt_type)
        return [prefix + text for text in texts] if prefix else texts

    def encode(self, inputs: DataLoader[BatchedInput], *, task_metadata: TaskMetadata, hf_split: str,
               hf_subset: str, prompt_type: PromptType | None = None, **kwargs: Any) -> Array:
        """Mean-pooled, L2-normalised float32 embeddings; pooling runs in float32 whatever the model's dtype."""
        import torch
        import torch.nn.functional as F

        texts = self.texts_for([t for batch in inputs for t in batch["text"]], task_metadata, prompt_type)
        batch_size = int(kwargs.get("batch_size") or inputs.batch_size or DEFAULT_BATCH_SIZE)
        outputs = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                tokens = self.tokenizer(texts[start:start + batch_size], max_length=self.max_length,
                                        truncation=True, padding=True, return_tensors="pt").to(self.device)
                hidden = self.model(input_ids=tokens["input_ids"],
                                    attention_mask=tokens["attention_mask"]).last_hidden_state.float()
                mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1)
                outputs.append(F.normalize(pooled, p=2, dim=1).cpu().numpy())
        dim = self.model.config.hidden_size
        return np.concatenate(outputs) if outputs else np.zeros((0, dim), dtype=np.float32)


def _checkpoint_kind(model_name: str, hub: dict[str, Any]) -> tuple[_Kind, Path | None]:
    """``adapter`` (with its local folder), ``qwen3`` or ``encoder``, read from the checkpoint's files."""
    from transformers.utils import cached_file

    adapter_config = cached_file(model_name, "adapter_config.json", **hub, _raise_exceptions_for_missing_entries=False)
    if adapter_config is not None:
        for weights in ("adapter_model.safetensors", "adapter_model.bin"):  # into the same snapshot folder
            if cached_file(model_name, weights, **hub, _raise_exceptions_for_missing_entries=False):
                return "adapter", Path(adapter_config).parent
        raise MissingInput(f"The LoRA adapter {model_name!r} has adapter_config.json but no adapter_model."
                           "safetensors or adapter_model.bin here; download the whole repository or folder.")
    reason = "no config.json"
    try:
        config = cached_file(model_name, "config.json", **hub)
    except OSError as error:
        config, reason = None, (str(error).strip().splitlines() or [type(error).__name__])[0]
    if config is None and Path(model_name).expanduser().is_dir():
        raise MissingInput(f"The folder {model_name!r} holds neither config.json (a full checkpoint) nor "
                           "adapter_config.json (a LoRA adapter).")
    if config is None:
        raise MissingInput(
            f"The weights of {model_name!r} are not available here ({reason}). Download them where the Hub is "
            f"reachable (`hf download {model_name}`) into the Hugging Face cache used here (HF_HUB_CACHE), or pass "
            "a local folder with config.json, tokenizer and weights (a LoRA adapter: adapter_config.json).")
    model_type = str(json.loads(Path(config).read_text(encoding="utf-8")).get("model_type", ""))
    if model_type == "qwen3":
        return "qwen3", None
    if model_type.startswith("qwen"):
        raise InvalidInput(f"{model_name!r} is a {model_type!r} model; the DMRetriever decoders are Qwen3 "
                           "(model_type 'qwen3'), run bidirectional, and no other decoder is supported.")
    return "encoder", None


def _load_encoder(model_name: str, *, hub: dict[str, Any], dtype: str | None, base_model: str | None, device: str,
                  model_kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Tokenizer and ``AutoModel`` of an encoder-only size (33M, 109M, 335M)."""
    from transformers import AutoModel, AutoTokenizer

    if base_model is not None:
        raise InvalidInput(f"base_model={base_model!r} applies to LoRA adapters; {model_name!r} is a full checkpoint.")
    if dtype is not None:
        from disastir_mteb.models.bidirectional_qwen3 import resolve_dtype

        model_kwargs = {**model_kwargs, "dtype": resolve_dtype(dtype, device)}
    tokenizer = AutoTokenizer.from_pretrained(model_name, **hub)
    return tokenizer, AutoModel.from_pretrained(model_name, **hub, **model_kwargs).to(device).eval()


def _meta(size: str) -> ModelMeta:
    release = _SIZES[size]
    name = f"DMIR01/DMRetriever-{size}"
    return ModelMeta(
        loader=DMRetrieverEncoder,
        name=name,
        revision=None,
        release_date=None,  # not known here; the weights went public in October 2025 (repository README)
        languages=["eng-Latn"],
        n_parameters=release.n_parameters,
        n_embedding_parameters=None,  # the decoders' vocabulary size after the authors' training is not known
        memory_usage_mb=round(release.n_parameters * 4 / 2**20),  # float32, mteb's estimate
        max_tokens=_MAX_TOKENS,
        embed_dim=release.embed_dim,
        license="apache-2.0",  # the Hugging Face model cards
        open_weights=True,
        public_training_code=_REPO,
        public_training_data="https://huggingface.co/datasets/DMIR01/DMRetriever_MTT",
        framework=["PyTorch", "Transformers"],
        reference=f"https://huggingface.co/{name}",
        similarity_fn_name=ScoringFunction.COSINE,
        use_instructions=True,
        training_datasets=None,
        model_type=["dense"],
        adapted_from=release.adapted_from,
        citation=_CITATION,
    )


#: ModelMeta of the six published sizes, keyed by Hub id (registered into mteb by ``register()``).
DMRETRIEVER_MODELS: dict[str, ModelMeta] = {f"DMIR01/DMRetriever-{size}": _meta(size) for size in _SIZES}


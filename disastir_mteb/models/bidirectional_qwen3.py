"""Qwen3 with causal masking off: the backbone of the DMRetriever decoders (596M, 4B, 7.6B).

The authors' ``Qwen3BiModel`` is not on PyPI; this rebuilds it on transformers' own ``Qwen3Model``. The mask goes
away through ``config.is_causal = False``: the attention modules' own ``is_causal`` flag alone leaves eager
attention, and sdpa on padded batches, causal in transformers 5. Loading follows the authors' evaluation
(right padding, float16 on CUDA, a LoRA adapter merged with ``peft``).
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers import AutoTokenizer
from transformers.models.qwen3.modeling_qwen3 import Qwen3Model

from disastir_mteb.util.errors import InvalidInput, MissingPackage
from disastir_mteb.util.install_hint import install_hint

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, Qwen3Config

logger = logging.getLogger(__name__)

__all__ = ["BidirectionalQwen3Model", "load_bidirectional_qwen3", "resolve_dtype"]

#: Accepted dtype names -> torch dtype names.
_DTYPES = {"float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16", "half": "float16",
           "bfloat16": "bfloat16", "bf16": "bfloat16"}


class BidirectionalQwen3Model(Qwen3Model):
    """``Qwen3Model`` in which every token attends to every non-padding token, before and after it.

    Weights load as for ``Qwen3Model``; nothing else differs from the causal model.
    """

    def __init__(self, config: Qwen3Config) -> None:
        config.is_causal = False
        config.use_sliding_window = False  # the authors' class drops sliding-window layers too
        config.layer_types = ["full_attention"] * config.num_hidden_layers
        super().__init__(config)
        for layer in self.layers:
            layer.self_attn.is_causal = False
            layer.self_attn.sliding_window = None
        self.has_sliding_layers = False


def resolve_dtype(dtype: str | None, device: str) -> torch.dtype:
    """The torch dtype for ``dtype`` (``float16``/``fp16``, ``bfloat16``/``bf16``, ``float32``/``fp32``).

    None gives the authors' choice: float16 on CUDA, float32 elsewhere.

    Raises:
        ValueError: an unknown name.
    """
    if dtype is None:
        return torch.float16 if str(device).startswith("cuda") else torch.float32
    name = _DTYPES.get(str(dtype).lower())
    if name is None:
        raise InvalidInput(f"Unknown dtype {dtype!r}; valid: {', '.join(sorted(_DTYPES))} (None: float16 on CUDA, "
                           "float32 elsewhere).")
    return getattr(torch, name)


def load_bidirectional_qwen3(source: str, *, adapter: Path | None, base_model: str | None, hub: dict[str, Any],
                             dtype: torch.dtype, device: str,
                             model_kwargs: dict[str, Any]) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """The tokenizer and the bidirectional model of a full checkpoint or of a LoRA ``adapter`` folder (merged).

    ``base_model`` replaces the base an adapter's config names (often a path on the authors' machines); ``hub``'s
    revision applies to ``source`` only.

    Raises:
        ImportError: an adapter without ``peft`` installed.
        ValueError: an adapter with resized token embeddings, which only an unsafe pickle load could restore.
    """
    if adapter is None:
        base, base_hub = source, hub
    else:
        base = base_model or json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]
        base_hub = {**hub, "revision": None}
        if (adapter / "embedding" / "emb.pth").exists():
            raise InvalidInput(f"The adapter {source!r} comes with resized token embeddings "
                               f"({adapter / 'embedding' / 'emb.pth'}, a pickled module); merge it with the authors' "
                               "save_merged_lora and load the merged folder.")
    tokenizer = AutoTokenizer.from_pretrained(base, **base_hub)
    if tokenizer.pad_token_id is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"  # the authors' setting; positions then start at 0 for every text
    model = BidirectionalQwen3Model.from_pretrained(base, dtype=dtype, **base_hub, **model_kwargs)
    if adapter is not None:
        model = _merge_adapter(model, adapter)
    return tokenizer, model.to(device).eval()


def _merge_adapter(model: PreTrainedModel, adapter: Path) -> PreTrainedModel:
    try:
        from peft import PeftModel
    except ImportError:
        raise MissingPackage(f"{adapter} is a LoRA adapter, which needs peft: {install_hint('lora')}.") from None
    logger.info("Merging the LoRA adapter %s into %s", adapter, type(model).__name__)
    with warnings.catch_warnings():  # peft 0.21 asks transformers 5 a deprecated question; nothing for the user
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        return PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()

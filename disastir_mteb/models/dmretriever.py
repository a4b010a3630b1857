"""The DMRetriever encoders (the DisastIR authors' own family) as mteb models.

DMRetriever-33M/-109M/-335M are BERT-style encoders: mean pooling over the last hidden states,
L2-normalised, inputs truncated to 512 tokens, and the ``dmretriever`` instruction in front of
queries with the ``"{instruction}: {query}"`` template (DMRetriever ``eva/embed/query.py``);
passages are encoded raw. Registering their ``ModelMeta`` lets
``mteb run -m DMIR01/DMRetriever-33M -t DisastIR-QA-Bio`` load them with that recipe whenever the
weights are available (Hub or Hugging Face cache).

The 596M, 4B and 7.6B sizes are Qwen3 decoders turned bidirectional by the authors' own model
class, which is not installable from PyPI; loading them raises an error saying so.

The instruction goes through mteb's own machinery (``prompts_dict`` keyed by task name plus an
``instruction_template``), so :func:`disastir_mteb.with_instructions` can take it over like any
other instruction-aware model's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from mteb.types import PromptType

from disastir_mteb.benchmark.taxonomy import TASK_SPECS, Intent
from disastir_mteb.models.instructions import INSTRUCTION_SETS

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.types import Array, BatchedInput
    from torch.utils.data import DataLoader

logger = logging.getLogger(__name__)

__all__ = ["DMRETRIEVER_MODELS", "DMRetrieverEncoder"]

_MAX_TOKENS = 512
#: size -> (backbone, parameters, hidden size), DMRetriever paper Table 1.
_SIZES: dict[str, tuple[str, int, int]] = {
    "33M": ("MiniLM", 33_000_000, 384),
    "109M": ("BERT-base-uncased", 109_000_000, 768),
    "335M": ("BERT-large-uncased-WWM", 335_000_000, 1024),
    "596M": ("Qwen3-0.6B", 596_000_000, 1024),
    "4B": ("Qwen3-4B", 4_000_000_000, 2560),
    "7.6B": ("Qwen3-8B", 7_568_000_000, 4096),
}
_BIDIRECTIONAL_QWEN3 = {"596M", "4B", "7.6B"}
_DMRETRIEVER_INSTRUCTIONS: Mapping[Intent, str] = INSTRUCTION_SETS["dmretriever"]  # type: ignore[assignment]


class DMRetrieverEncoder(AbsEncoder):
    """A DMRetriever checkpoint (encoder-only sizes) with the authors' pooling and instructions.

    Args:
        model_name: Hub id (``DMIR01/DMRetriever-33M``) or a local folder with a BERT-style
            ``config.json``, tokenizer and weights.
        revision: Hub revision; None = the default branch.
        device: torch device; default CPU unless CUDA is available.
        max_length: truncation length in tokens (512, as the authors).
        **kwargs: passed to ``transformers.AutoModel.from_pretrained``.

    Raises:
        NotImplementedError: the checkpoint is one of the bidirectional-Qwen3 sizes.
    """

    instruction_template = "{instruction}: "

    def __init__(self, model_name: str, revision: str | None = None, *, device: str | None = None,
                 max_length: int = _MAX_TOKENS, **kwargs: Any) -> None:
        import torch
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        if any(model_name.rstrip("/").endswith(f"-{size}") for size in _BIDIRECTIONAL_QWEN3) or (
                AutoConfig.from_pretrained(model_name, revision=revision).model_type.startswith("qwen")):
            raise NotImplementedError(
                f"{model_name} is a Qwen3 decoder made bidirectional by the DMRetriever authors' own model class "
                "(Qwen3BiModel, github.com/KaiYin97/DMRETRIEVER), which is not installable from PyPI; only the "
                "encoder-only sizes 33M, 109M and 335M are supported."
            )
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(model_name, revision=revision)
        self.model = AutoModel.from_pretrained(model_name, revision=revision, **kwargs).to(self.device).eval()
        self.max_length = max_length
        self.prompts_dict = {spec.name: _DMRETRIEVER_INSTRUCTIONS[spec.intent] for spec in TASK_SPECS}
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
        """Mean-pooled, L2-normalised embeddings (float32, shape (n_texts, hidden size))."""
        import torch
        import torch.nn.functional as F

        texts = self.texts_for([t for batch in inputs for t in batch["text"]], task_metadata, prompt_type)
        batch_size = int(kwargs.get("batch_size") or inputs.batch_size or 32)
        outputs = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                tokens = self.tokenizer(texts[start:start + batch_size], max_length=self.max_length,
                                        truncation=True, padding=True, return_tensors="pt").to(self.device)
                hidden = self.model(**tokens).last_hidden_state
                mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1)
                outputs.append(F.normalize(pooled, p=2, dim=1).float().cpu().numpy())
        dim = self.model.config.hidden_size
        return np.concatenate(outputs) if outputs else np.zeros((0, dim), dtype=np.float32)


def _meta(size: str) -> ModelMeta:
    _backbone, parameters, dim = _SIZES[size]
    name = f"DMIR01/DMRetriever-{size}"
    return ModelMeta(
        loader=DMRetrieverEncoder,
        name=name,
        revision=None,
        release_date=None,
        languages=["eng-Latn"],
        n_parameters=parameters,
        n_embedding_parameters=None,
        memory_usage_mb=None,
        max_tokens=_MAX_TOKENS,
        embed_dim=dim,
        license=None,
        open_weights=True,
        public_training_code="https://github.com/KaiYin97/DMRETRIEVER",
        public_training_data=None,
        framework=["PyTorch", "Transformers"],
        reference=f"https://huggingface.co/{name}",
        similarity_fn_name=ScoringFunction.COSINE,
        use_instructions=True,
        training_datasets=None,
        model_type=["dense"],
        adapted_from=None,
    )


#: ModelMeta of the six published sizes, keyed by Hub id (registered into mteb by ``register()``).
DMRETRIEVER_MODELS: dict[str, ModelMeta] = {f"DMIR01/DMRetriever-{size}": _meta(size) for size in _SIZES}


from disastir_mteb.models.registration import MODELS_STEP  # noqa: E402

MODELS_STEP.module_finished(__name__)  # last: a registration that this module's `import mteb` triggered runs now

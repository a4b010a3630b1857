"""Encode each DisastIR passage once per process, however many tasks search the corpus.

All 48 tasks share one corpus, but mteb encodes the corpus again for every task.
:class:`CorpusMemo` wraps any mteb encoder and keeps passage embeddings in memory keyed by
text, so the second task onwards costs only its queries. It is valid for models whose passage
encoding does not depend on the task (true of every DisastIR baseline: the authors never prefix
passages); queries always go to the wrapped model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.types import PromptType

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.types import Array, BatchedInput
    from torch.utils.data import DataLoader

__all__ = ["CorpusMemo"]


class CorpusMemo:
    """An mteb encoder that remembers passage embeddings across tasks.

    Args:
        model: any mteb encoder (``mteb.get_model(...)``, a ``SentenceTransformerEncoderWrapper``).

    Attributes:
        passages_encoded: passages sent to the wrapped model so far (one corpus = one encoding).
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.mteb_model_meta = model.mteb_model_meta
        self._vectors: dict[str, np.ndarray] = {}
        self.passages_encoded = 0

    def __getattr__(self, name: str) -> Any:
        if name == "model":  # not set yet (e.g. while unpickling): no recursion through self.model
            raise AttributeError(name)
        return getattr(self.model, name)

    def encode(
        self,
        inputs: DataLoader[BatchedInput],
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Any,
    ) -> Array:
        """Embeddings of ``inputs``; passages already seen are served from memory."""
        if prompt_type != PromptType.document:
            return self.model.encode(inputs, task_metadata=task_metadata, hf_split=hf_split, hf_subset=hf_subset,
                                     prompt_type=prompt_type, **kwargs)
        from datasets import Dataset
        from torch.utils.data import DataLoader

        texts = [text for batch in inputs for text in batch["text"]]
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            loader = DataLoader(Dataset.from_dict({"text": missing}), batch_size=inputs.batch_size or 32)
            vectors = np.asarray(self.model.encode(loader, task_metadata=task_metadata, hf_split=hf_split,
                                                   hf_subset=hf_subset, prompt_type=prompt_type, **kwargs))
            self._vectors.update(zip(missing, vectors, strict=True))
            self.passages_encoded += len(missing)
        return np.stack([self._vectors[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)

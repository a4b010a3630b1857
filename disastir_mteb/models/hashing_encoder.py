"""A cheap, deterministic, model-free encoder for tests and overhead benchmarks.

Each word gets a fixed pseudo-random vector (from a hash of the word) and a text is the normalised sum, so it
ranks by word overlap and encodes a full-scale corpus in seconds. Not a retrieval model: never report its scores.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction

from disastir_mteb.vocabulary.settings import HASHING_ENCODER

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.types import Array, BatchedInput, PromptType
    from torch.utils.data import DataLoader

__all__ = ["HashingEncoder"]

_WORD = re.compile(r"\w+")


class HashingEncoder(AbsEncoder):
    """Deterministic bag-of-words embeddings (cosine similarity); ``texts_encoded`` counts its work for tests."""

    def __init__(self, dim: int = 384, name: str = HASHING_ENCODER) -> None:
        self.dim = dim
        self._vectors: dict[str, np.ndarray] = {}
        self.texts_encoded = 0
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={
            "name": name, "revision": "1", "embed_dim": dim, "similarity_fn_name": ScoringFunction.COSINE})

    def _word(self, word: str) -> np.ndarray:
        vector = self._vectors.get(word)
        if vector is None:
            seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            vector = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            self._vectors[word] = vector
        return vector

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embeddings of plain texts, shape (len(texts), dim), float32, unit length (zero for no words)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[row] += self._word(word)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        self.texts_encoded += len(texts)
        return out

    def content_identity(self) -> str:
        """What its vectors depend on (:mod:`disastir_mteb.models.content`): the algorithm's version and the width."""
        return f"{HASHING_ENCODER} v1, {self.dim} dimensions"

    def encode(self, inputs: DataLoader[BatchedInput], *, task_metadata: TaskMetadata, hf_split: str,
               hf_subset: str, prompt_type: PromptType | None = None, **kwargs: Any) -> Array:
        """The mteb encoder interface over :meth:`embed`."""
        return self.embed([text for batch in inputs for text in batch["text"]])

"""The key of an embedding-store entry: what its vectors depend on, hashed into the entry's folder name.

A :class:`StoreKey` names the model (name and revision), the side, the passage-side prompt or
instructions, the texts (:func:`fingerprint_texts`), the storage dtype, the batch size and the
model's precision: change any of them and the vectors are looked up (or encoded) under another
folder. The store format number (``_FORMAT``) is hashed in too, so a change in how vectors are
laid out or computed rebuilds old entries instead of serving them.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["StoreKey", "fingerprint_texts"]

# Bump when the layout, the manifest or the way vectors are computed changes: old entries are then rebuilt.
# 2: length-ordered chunks (other batches, so other float rounding than format 1), batch size and precision keyed.
# 3: checksums: in every chunk file's name, and per block of embeddings.npy in the manifest (older entries
#    cannot be verified, so they are encoded again); corpus keys no longer hold query-side instruction settings.
_FORMAT = 3
_VERSIONED = ("numpy", "torch", "mteb", "sentence-transformers", "disastir-mteb")


def fingerprint_texts(texts: Iterable[str]) -> str:
    """A 32-hex-character blake2b digest of ``texts`` in order (row ``i`` is text ``i``).

    Each text is length-prefixed, so ``["ab", "c"]`` and ``["a", "bc"]`` differ.
    """
    digest = hashlib.blake2b(digest_size=16)
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


@dataclass(frozen=True)
class StoreKey:
    """Everything the vectors of one store entry depend on.

    Attributes:
        model_name: the model's name, e.g. ``sentence-transformers/all-MiniLM-L6-v2``.
        model_revision: the model's revision (commit), ``None`` when unknown.
        side: ``corpus`` for passages, ``queries`` for queries.
        prompt: the passage-side prompt or instruction prepended for the corpus, ``""`` if none.
        instructions: instruction-set name and template for queries, ``""`` for the corpus.
        texts_fingerprint: :func:`fingerprint_texts` of the encoded texts.
        dtype: storage precision; ``float16`` halves the disk and page-cache footprint.
        batch_size: texts per forward pass. It decides each batch's padded length and so the float
            rounding of the vectors (about 1e-7), which is why it is part of the key.
        precision: the model's weights while encoding (``float32``, ``float16``, ``bfloat16``;
            ``None`` for encoders without torch weights).

    Examples:
        >>> key = StoreKey("org/model", "abc123", "corpus", "", "", fingerprint_texts(["a", "b"]))
        >>> len(key.digest)
        32
    """

    model_name: str
    model_revision: str | None
    side: Literal["corpus", "queries"]
    prompt: str
    instructions: str
    texts_fingerprint: str
    dtype: Literal["float32", "float16"] = "float32"
    batch_size: int | None = None
    precision: str | None = None

    def __post_init__(self) -> None:
        if self.side not in ("corpus", "queries"):
            raise ValueError(f"StoreKey.side={self.side!r} is not a side; expected 'corpus' or 'queries'.")
        if self.dtype not in ("float32", "float16"):
            raise ValueError(f"StoreKey.dtype={self.dtype!r} is not supported; expected 'float32' or 'float16'.")
        if not self.model_name or not self.texts_fingerprint:
            raise ValueError(f"StoreKey needs a model_name and a texts_fingerprint; got {self.describe()!r}.")

    @property
    def digest(self) -> str:
        """A stable 32-hex-character hash of every field (and of the store format)."""
        payload = json.dumps({"format": _FORMAT, **asdict(self)}, sort_keys=True, ensure_ascii=False)
        return hashlib.blake2b(payload.encode("utf-8"), digest_size=16).hexdigest()

    @property
    def folder_name(self) -> str:
        """``<side>/<sanitised model name>/<digest[:16]>``, relative to the store root."""
        model = re.sub(r"[^A-Za-z0-9._-]+", "__", self.model_name).strip(".") or "model"
        return f"{self.side}/{model}/{self.digest[:16]}"

    def describe(self) -> str:
        """One line for logs, e.g. ``corpus of org/model@abc123 (float32, no prompt, texts 1a2b3c4d5e6f)``."""
        prompt = f"prompt {self.prompt!r}" if self.prompt else "no prompt"
        instructions = f", instructions {self.instructions!r}" if self.instructions else ""
        batch = f", batch {self.batch_size}" if self.batch_size else ""
        precision = f", model {self.precision}" if self.precision else ""
        return (f"{self.side} of {self.model_name}@{self.model_revision or 'unknown revision'} "
                f"({self.dtype}{precision}{batch}, {prompt}{instructions}, texts {self.texts_fingerprint[:12]})")


def _model(key: StoreKey) -> tuple[str, str | None]:
    """The (model name, revision) an entry was encoded by: one model's entries share one dimension."""
    return key.model_name, key.model_revision


def _library_versions() -> dict[str, str | None]:
    """The installed versions of the libraries in ``_VERSIONED`` (None if absent), recorded in each manifest."""
    from importlib.metadata import PackageNotFoundError, version

    def _version(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {name: _version(name) for name in _VERSIONED}

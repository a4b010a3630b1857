"""The caller's model made ready for a run: its precision, its instructions, mteb's interface and who it is.

The caller's model is never changed: another precision encodes with a cast copy, and instructions wrap it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disastir_mteb.models.adapter import InstructedEncoder, as_mteb_encoder, require_encoder
from disastir_mteb.models.content import ModelContent, object_content
from disastir_mteb.models.identity import (
    ModelIdentity,
    configuration_digest,
    identify,
    is_pinned,
    probe_texts_of,
    probe_vectors,
    served_behind,
)
from disastir_mteb.models.loading import load_model, source_content
from disastir_mteb.models.precision import in_precision, module_dtype
from disastir_mteb.util.digest import short_digest
from disastir_mteb.vocabulary.settings import PRECISION_KEY, PRECISIONS, Precision

if TYPE_CHECKING:
    from mteb.models import ModelMeta

    from disastir_mteb.vocabulary.instructions import InstructionConfig

logger = logging.getLogger(__name__)

__all__ = ["PreparedModel", "prepare_model"]


@dataclass(frozen=True)
class PreparedModel:
    """The encoder a run uses, the dtype its weights encode in and the metadata its results are filed under.

    ``meta`` names a precision other than the model's own among its experiment settings, so such results are filed
    apart; ``source`` is the name the model was loaded from (None for the caller's object).
    """

    encoder: Any
    dtype: str | None
    meta: ModelMeta | None
    identity: ModelIdentity
    texts_probed: int
    source: str | None = None

    @property
    def key(self) -> tuple[str, str | None]:
        """The model's own name and revision, as the store keys its vectors."""
        return _key(self.encoder, self.meta)

    def identify(self, root: Path | None, *, again: bool) -> tuple[ModelIdentity, int]:
        """Who computes the vectors, and how many texts were probed.

        ``root`` is the store folder whose records are matched and extended; ``again``, a later run's identification.
        """
        return _identify(self.encoder, self.dtype, self.meta, root, source=self.source, again=again)


def _key(encoder: Any, meta: ModelMeta | None) -> tuple[str, str | None]:
    return (getattr(meta, "name", None) or type(encoder).__name__, getattr(meta, "revision", None))


def _identify(encoder: Any, dtype: str | None, meta: ModelMeta | None, root: Path | None, *, source: str | None,
              again: bool) -> tuple[ModelIdentity, int]:
    """Who computes the vectors: by content where it can be read, servers by their probe; the texts probed."""
    configuration = configuration_digest(encoder)
    passages = configuration_digest(encoder, passages=True)
    name, revision = _key(encoder, meta)
    served = served_behind(encoder)
    if served is not None:
        vectors = probe_vectors(encoder, again=again)
        return identify(name=name, revision=revision, precision=dtype, root=root, probe=vectors,
                        tolerance=getattr(served, "probe_tolerance", None), probe_texts=probe_texts_of(encoder),
                        configuration=configuration, passage_configuration=passages), len(vectors)
    vectors = None if again else probe_vectors(encoder)  # refuses a model that cannot embed, before any task loads
    content = _content(encoder, meta, root, source)
    identity = identify(name=name, revision=revision, precision=dtype, root=root, content=content,
                        configuration=configuration, passage_configuration=passages)
    return identity, 0 if vectors is None else len(vectors)


def _content(encoder: Any, meta: ModelMeta | None, root: Path | None, source: str | None) -> ModelContent | None:
    """What the model is: its source's files, else its weights and tokenizer in memory, else its name and revision.

    A name and revision stand for a model only where nothing else can be read (an API model, a versioned callable).
    """
    content = source_content(source, meta, root) if source is not None else None
    content = content or object_content(encoder)
    if content is None:
        name, revision = _key(encoder, meta)
        if is_pinned(name, revision):
            return ModelContent("declared", short_digest(f"{name}@{revision}".encode()),
                                f"its name and revision, {name}@{revision}")
    return content


def prepare_model(model: Any, *, precision: Precision | None = None, instructions: InstructionConfig | None = None,
                  model_revision: str | None = None, root: Path | None = None,
                  who: str = "SharedCorpusSearch") -> PreparedModel:
    """``model`` ready to encode: a copy cast to ``precision``, ``instructions`` in front, as an mteb encoder, probed.

    ``model_revision`` is the revision its results are filed under, and the version that identifies a model with no
    content to read; ``root`` the store folder whose records the identification matches (None: nothing recorded).

    Raises:
        ModelLoadError: a name that cannot be loaded.
        TypeError: ``model`` is nothing that embeds (one sentence naming ``who``).
        ValueError: a bad precision for this model, or probe vectors of the wrong shape or not finite.
    """
    source = model if isinstance(model, str) else None
    if isinstance(model, str):
        model = load_model(model)
    else:
        require_encoder(model, who)  # before anything is copied or wrapped: the sentence names the caller
    own = module_dtype(model)
    model = in_precision(model, precision)  # a cast copy, before any wrapper touches the caller's model
    dtype = own if precision is None else PRECISIONS[precision]
    encoder = as_mteb_encoder(model, who) if instructions is None else InstructedEncoder(model, instructions)
    meta = encoder.mteb_model_meta
    if dtype != own and meta is not None:  # results filed apart, under the precision's name (fp16)
        named = next(name for name, value in PRECISIONS.items() if value == dtype)
        meta = meta.model_copy(update={"experiment_kwargs": {**(meta.experiment_kwargs or {}), PRECISION_KEY: named}})
    if model_revision is not None and meta is not None:
        meta = meta.model_copy(update={"revision": model_revision})
    identity, probed = _identify(encoder, dtype, meta, root, source=source, again=False)
    if not identity.reusable:
        logger.warning("%s has no weights or files to read what it is, and no version named: its vectors and results "
                       "are this call's only, never taken from an earlier call or process; name its version "
                       "(model_revision=..., --model-revision) to reuse them.", identity.name)
    return PreparedModel(encoder, dtype, meta, identity, probed, source)

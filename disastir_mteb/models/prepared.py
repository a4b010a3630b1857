"""The caller's model made ready for a run: its precision, its instructions, mteb's interface and who it is.

The search model asks for this once, when it is built (:func:`prepare_model`, which probes the model then, so that
one that cannot embed is refused before any task loads), and identifies it again at each later run
(:meth:`PreparedModel.identify`); the caller's model is never changed: a precision other than its own encodes with a
cast copy, and instructions wrap it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disastir_mteb.models.adapter import InstructedEncoder, as_mteb_encoder, require_encoder
from disastir_mteb.models.identity import ModelIdentity, configuration_digest, identify, probe_vectors
from disastir_mteb.models.loading import load_model
from disastir_mteb.models.precision import in_precision, module_dtype
from disastir_mteb.vocabulary.settings import PRECISION_KEY, PRECISIONS, Precision

if TYPE_CHECKING:
    from mteb.models import ModelMeta

    from disastir_mteb.vocabulary.instructions import InstructionConfig

__all__ = ["PreparedModel", "prepare_model"]


@dataclass(frozen=True)
class PreparedModel:
    """The encoder a run uses, the dtype its weights encode in and the metadata its results are filed under.

    Attributes:
        encoder: the mteb encoder (the cast copy, the instructions in front, where asked).
        dtype: the dtype of the weights that encode (None without torch weights).
        meta: the model's mteb metadata, with ``disastir_precision`` among its experiment settings when the
            precision is not the model's own (so such results are filed apart).
        identity: who computed the vectors when the model was prepared.
        texts_probed: how many texts that identification sent to the model.
    """

    encoder: Any
    dtype: str | None
    meta: ModelMeta | None
    identity: ModelIdentity
    texts_probed: int

    @property
    def key(self) -> tuple[str, str | None]:
        """The model's own name and revision, as the store keys its vectors."""
        return _key(self.encoder, self.meta)

    def identify(self, root: Path | None, *, again: bool) -> tuple[ModelIdentity, int]:
        """Who computes the vectors (:func:`~disastir_mteb.models.identity.identify`), and how many texts were probed.

        ``root``: the store folder whose probe records are matched and extended (None: nothing recorded);
        ``again``: probe anew, not from what the encoder remembered of an earlier probe.
        """
        return _identify(self.encoder, self.dtype, self.meta, root, again=again)


def _key(encoder: Any, meta: ModelMeta | None) -> tuple[str, str | None]:
    return (getattr(meta, "name", None) or type(encoder).__name__, getattr(meta, "revision", None))


def _identify(encoder: Any, dtype: str | None, meta: ModelMeta | None, root: Path | None, *,
              again: bool) -> tuple[ModelIdentity, int]:
    configuration = configuration_digest(encoder)
    passages = configuration_digest(encoder, passages=True)
    name, revision = _key(encoder, meta)
    vectors = probe_vectors(encoder, again=again)
    return identify(vectors, name=name, revision=revision, precision=dtype, root=root,
                    configuration=configuration, passage_configuration=passages), len(vectors)


def prepare_model(model: Any, *, precision: Precision | None = None, instructions: InstructionConfig | None = None,
                  root: Path | None = None, who: str = "SharedCorpusSearch") -> PreparedModel:
    """``model`` ready to encode: a copy cast to ``precision``, ``instructions`` in front, as an mteb encoder, probed.

    ``model``: an mteb encoder, a SentenceTransformer, a callable ``list[str] -> array``, or a name
    (:func:`~disastir_mteb.models.loading.load_model`: ``"bundled"``, a local folder, a name for ``mteb.get_model``);
    ``root``: the store folder whose probe records the identification matches and extends (None: nothing recorded).

    Raises:
        ModelLoadError: a name that cannot be loaded.
        TypeError: ``model`` is nothing that embeds (one sentence naming ``who``).
        ValueError: a precision asked of a model without torch weights, or of one that cannot be copied.
        InvalidInput: the model's vectors for the probe texts are of the wrong shape, or not finite.
    """
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
    identity, probed = _identify(encoder, dtype, meta, root, again=False)
    return PreparedModel(encoder, dtype, meta, identity, probed)

"""Loading the model to evaluate: a name for ``mteb.get_model``, a built-in name, a local folder, or an object.

A name that cannot be loaded becomes one :class:`ModelLoadError` sentence saying what to do.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disastir_mteb.util.errors import DisastirError
from disastir_mteb.vocabulary.settings import HASHING_ENCODER

if TYPE_CHECKING:
    from disastir_mteb.models.content import ModelContent

__all__ = ["ModelLoadError", "load_model", "source_content"]


def load_model(model: Any, *, device: str | None = None) -> Any:
    """An mteb encoder from a name (``mteb.get_model``), a built-in name, a local folder or an object.

    Built-in names: ``"bundled"`` (the packaged MiniLM) and ``"disastir-mteb/hashing-encoder"``; an object is wrapped
    as ``mteb.evaluate`` would wrap it.
    """
    if not isinstance(model, str):
        from disastir_mteb.models.adapter import as_mteb_encoder

        return as_mteb_encoder(model, "evaluate()")
    if model == "bundled":
        from disastir_mteb.models.bundled import load_bundled_model

        return load_bundled_model(device=device)
    if model == HASHING_ENCODER:
        from disastir_mteb.models.hashing_encoder import HashingEncoder

        return HashingEncoder()
    if Path(model).expanduser().is_dir():
        return _load_folder(Path(model).expanduser(), device)
    import mteb

    try:
        return mteb.get_model(model, device=device) if device else mteb.get_model(model)
    except (OSError, ValueError, KeyError, ImportError, RuntimeError) as error:
        # offline or gated (the Hub's errors are OSErrors), an unknown name, a missing package, a broken checkpoint
        raise ModelLoadError(model, error) from error


def source_content(model: str, meta: Any, memo: Path | None) -> ModelContent | None:
    """What the model :func:`load_model` loaded from the name ``model`` is, read from the files it was loaded from.

    None where the files do not say it all (a decoder checkpoint or LoRA adapter, whose base lies elsewhere; a name
    without a local snapshot; the model-free encoder): the loaded object is read instead.
    """
    from disastir_mteb.models.content import folder_content, hub_content

    if model == "bundled":
        from disastir_mteb.models.bundled import bundled_model_path

        return folder_content(bundled_model_path(), memo)
    if model == HASHING_ENCODER:
        return None
    folder = Path(model).expanduser()
    if folder.is_dir():
        return None if _is_decoder_checkpoint(folder) else folder_content(folder, memo)
    revision = getattr(meta, "revision", None)
    commit = revision if isinstance(revision, str) and re.fullmatch(r"[0-9a-f]{40}", revision) else None
    return hub_content(getattr(meta, "name", None) or model, commit, memo)


class ModelLoadError(DisastirError, OSError):
    """A model name that could not be loaded, in one sentence that says what to do."""

    HUB_HINT = ("Offline? Put the model in a Hugging Face cache under its hub id and set HF_HUB_OFFLINE=1 "
                "(HF_HUB_CACHE=DIR for another cache), pass a local model folder (-m ./my-model), or try -m bundled.")

    def __init__(self, model: str, error: BaseException, hint: str = HUB_HINT) -> None:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0].rstrip(".")
        super().__init__(f"Could not load model {model!r} ({type(error).__name__}: {reason}). {hint}")


def _is_decoder_checkpoint(folder: Path) -> bool:
    """A DMRetriever decoder folder (LoRA adapter or Qwen3 checkpoint), which SentenceTransformer would run causally."""
    import json

    if (folder / "adapter_config.json").is_file():
        return True
    if (folder / "modules.json").is_file() or not (folder / "config.json").is_file():
        return False
    try:
        model_type = str(json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type", ""))
    except (OSError, ValueError, AttributeError):
        return False
    return model_type.startswith("qwen3")


def _load_folder(folder: Path, device: str | None) -> Any:
    """A SentenceTransformer (or DMRetriever decoder) saved in a local folder, filed as ``local/<folder name>``."""
    if _is_decoder_checkpoint(folder):
        from disastir_mteb.models.dmretriever import DMRetrieverEncoder

        try:
            return DMRetrieverEncoder(str(folder), device=device, local_files_only=True)
        except (OSError, ValueError, ImportError) as error:
            raise ModelLoadError(str(folder), error, "A decoder folder holds a Qwen3 checkpoint (config.json, "
                                 "tokenizer, weights) or a LoRA adapter of one.") from error
    from safetensors import SafetensorError
    from sentence_transformers import SentenceTransformer

    from disastir_mteb.models.adapter import as_mteb_encoder

    try:
        encoder = as_mteb_encoder(SentenceTransformer(str(folder), device=device, local_files_only=True))
    except (OSError, ValueError, KeyError, ImportError, RuntimeError, SafetensorError) as error:
        # files missing, malformed JSON, unknown module classes, damaged weights
        raise ModelLoadError(str(folder), error, "A model folder is one written by SentenceTransformer.save().") \
            from error
    meta = encoder.mteb_model_meta
    if meta is not None and (not meta.name or meta.name.startswith("no_model_name")):
        encoder.mteb_model_meta = meta.model_copy(update={"name": f"local/{folder.resolve().name}"})
    return encoder

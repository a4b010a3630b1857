"""The model's torch weights: found behind wrappers, their dtype and device, cast in place to a precision.

Precision (:data:`~disastir_mteb.vocabulary.settings.PRECISIONS`) casts the model's weights in place,
like ``model.half()``; the default is the model's own dtype (float32 for the DisastIR baselines). The
dtype in use is part of the embedding cache key, so vectors of another precision are never served for
this one.
"""

from __future__ import annotations

import logging
from typing import Any

from disastir_mteb.vocabulary.settings import PRECISIONS, parse_precision

logger = logging.getLogger(__name__)

__all__ = ["apply_precision", "module_device", "module_dtype", "torch_module"]

def torch_module(model: Any) -> Any:
    """The first ``torch.nn.Module`` in ``model`` or under its ``.model`` attributes (wrappers), else None."""
    try:
        import torch
    except ImportError:
        return None
    for _ in range(6):
        if isinstance(model, torch.nn.Module):
            return model
        model = getattr(model, "model", None)
        if model is None:
            return None
    return None


def module_dtype(model: Any) -> str | None:
    """The dtype name (``float32``, ``float16``, ``bfloat16``) of the model's first floating parameter, or None."""
    module = torch_module(model)
    if module is None:
        return None
    for parameter in module.parameters():
        if parameter.is_floating_point():
            return str(parameter.dtype).removeprefix("torch.")
    return None


def module_device(model: Any) -> str | None:
    """The device of the model's first parameter (``cpu``, ``cuda:0``), or None when it has no torch module."""
    module = torch_module(model)
    if module is None:
        return None
    parameter = next(iter(module.parameters()), None)
    return None if parameter is None else str(parameter.device)


def apply_precision(model: Any, precision: str | None) -> str | None:
    """Cast the model's weights to ``precision`` in place (like ``model.half()``); return the dtype now in use.

    ``None`` leaves the model as it is. The returned name (``float32``, ``float16``, ``bfloat16``,
    or None for a model without torch weights) is what the embedding cache key records.

    Raises:
        ValueError: an unknown precision, or a precision asked of a model without torch weights.
    """
    wanted = parse_precision(precision)
    module = torch_module(model)
    if wanted is None:
        return module_dtype(model)
    if module is None:
        raise ValueError(f"precision={precision!r} needs a torch model, but {type(model).__name__} holds none; "
                         "leave precision unset for this model.")
    import torch

    dtype = getattr(torch, PRECISIONS[wanted])
    if module_dtype(model) != PRECISIONS[wanted]:
        logger.info("Casting %s to %s for encoding (in place).", type(module).__name__, PRECISIONS[wanted])
        module.to(dtype)
    return PRECISIONS[wanted]

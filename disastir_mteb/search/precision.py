"""The model's torch weights: found behind wrappers, their dtype and device, cast in place to a precision.

Precision (:data:`PRECISIONS`) casts the model's weights in place, like ``model.half()``; the
default is the model's own dtype (float32 for the DisastIR baselines). The dtype in use is part of
the embedding cache key, so vectors of another precision are never served for this one.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

logger = logging.getLogger(__name__)

__all__ = ["PRECISIONS", "apply_precision", "module_device", "module_dtype", "parse_precision", "torch_module"]

Precision = Literal["fp32", "fp16", "bf16"]
#: Accepted precision names -> torch dtype names. ``None`` (the default everywhere) keeps the model's own.
PRECISIONS: dict[str, str] = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
_ALIASES = {"float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}


def parse_precision(value: str | None) -> Precision | None:
    """``fp32``, ``fp16`` or ``bf16`` (also ``float16``, ``half``, ``bfloat16``, ``float32``), or ``None``.

    Raises:
        ValueError: an unknown name (the valid ones are listed).
    """
    if value is None:
        return None
    name = _ALIASES.get(str(value).lower(), str(value).lower())
    if name not in PRECISIONS:
        raise ValueError(f"Unknown precision {value!r}; valid: {', '.join(PRECISIONS)} (or leave it unset for the "
                         "model's own dtype).")
    return name  # type: ignore[return-value]

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

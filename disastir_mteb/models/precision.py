"""The model's torch weights: found behind wrappers, their dtype and device, and a copy cast to a precision.

The model passed in is never changed: another precision encodes with a cast copy.
"""

from __future__ import annotations

import logging
from typing import Any

from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.settings import PRECISIONS, Precision

logger = logging.getLogger(__name__)

__all__ = ["in_precision", "module_device", "module_dtype", "torch_module", "wrapper_chain"]


def wrapper_chain(model: Any) -> list[Any]:
    """``model`` and the wrappers under its ``.model`` attributes, outermost first, down to the first torch module."""
    try:
        import torch
    except ImportError:
        torch = None
    chain: list[Any] = []
    while model is not None and len(chain) < 6 and not any(model is node for node in chain):
        chain.append(model)
        if torch is not None and isinstance(model, torch.nn.Module):
            break
        model = getattr(model, "model", None)
    return chain


def torch_module(model: Any) -> Any:
    """The first ``torch.nn.Module`` in ``model`` or under its ``.model`` attributes (wrappers), else None."""
    try:
        import torch
    except ImportError:
        return None
    last = wrapper_chain(model)[-1:]
    return last[0] if last and isinstance(last[0], torch.nn.Module) else None


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


def in_precision(model: Any, precision: Precision | None) -> Any:
    """``model`` encoding in ``precision``: itself when its weights already are, else a copy whose weights are cast.

    The copy shares nothing with the model passed in (a trainer's, a notebook's) and takes only the cast weights'
    memory. ``None`` keeps the model as it is.

    Raises:
        ValueError: a model without torch weights, or one that cannot be copied.
    """
    import copy

    wanted = precision
    if wanted is None:
        return model
    module = torch_module(model)
    if module is None:
        raise InvalidInput(f"precision={precision!r} needs a torch model, but {type(model).__name__} holds none; "
                           "leave precision unset for this model.")
    if module_dtype(model) == PRECISIONS[wanted]:
        return model
    import torch

    dtype = getattr(torch, PRECISIONS[wanted])
    memo: dict[int, Any] = {}
    for parameter in module.parameters():
        if parameter.is_floating_point():
            memo[id(parameter)] = torch.nn.Parameter(parameter.detach().to(dtype),
                                                     requires_grad=parameter.requires_grad)
    for buffer in module.buffers():
        if buffer.is_floating_point():
            memo[id(buffer)] = buffer.detach().to(dtype)
    logger.info("Encoding with a copy of %s in %s (the model passed in stays %s).", type(module).__name__,
                PRECISIONS[wanted], module_dtype(model))
    try:
        return copy.deepcopy(model, memo)
    except (TypeError, RuntimeError, AttributeError, ValueError, NotImplementedError, copy.Error) as error:
        # an object of the wrapper chain that refuses to be copied (a lock, a handle, a non-leaf tensor)
        raise InvalidInput(f"precision={precision!r}: {type(model).__name__} cannot be copied to cast its weights "
                           f"({type(error).__name__}: {error}); cast the model yourself (e.g. model.half()) and leave "
                           "precision unset.") from None

"""Which torch device exact search runs on, and float32 (not TF32) products while it runs on CUDA."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from disastir_mteb.util.errors import InvalidInput

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import torch as torch_module

__all__ = ["DEVICE_TYPES", "float32_matmul", "import_torch", "resolve_device"]

DEVICE_TYPES = ("cpu", "cuda")
"""Torch device types exact search runs on (other accelerators are not verified to be exact)."""


def import_torch() -> Any:
    """The ``torch`` module, or ``None`` without torch; one function so a test can take torch away."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def resolve_device(device: str | torch_module.device | None, torch: Any) -> Any:
    """The torch device ``device`` names, checked (``"cuda"`` resolved to the current GPU); ``None`` means the CPU.

    Raises:
        ValueError: ``device`` is of an unsupported type, needs the missing torch, or names an absent GPU.
    """
    if device is None:
        return None
    options = ", ".join(repr(kind) for kind in DEVICE_TYPES)
    if torch is None:
        if str(device) == "cpu":
            return None
        raise InvalidInput(f"device={device!r} needs torch, which is not installed; install torch or pass "
                           "device=None to search on the CPU with NumPy.")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise InvalidInput(f"device={device!r} is not a torch device; use one of {options} "
                           "(optionally with an index, e.g. 'cuda:0').") from None
    if resolved.type not in DEVICE_TYPES:
        raise InvalidInput(f"device={device!r} is not supported by exact search; use one of {options} "
                           "(optionally with an index, e.g. 'cuda:0').")
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise InvalidInput(f"device={device!r} was requested for exact search, but CUDA is not available to "
                               f"torch {torch.__version__}; pass device=None or 'cpu' to search on the CPU.")
        count = torch.cuda.device_count()
        if resolved.index is None:
            resolved = torch.device("cuda", torch.cuda.current_device())
        elif resolved.index >= count:
            raise InvalidInput(f"device={device!r} names a GPU that does not exist: torch sees {count} CUDA "
                               f"device(s), 'cuda:0' to 'cuda:{count - 1}'.")
    return resolved


def _read_flag(read: Callable[[], Any]) -> Any:
    """A legacy TF32 flag, or ``None`` where torch refuses to read it (the caller mixed legacy and new APIs)."""
    try:
        return read()
    except RuntimeError:
        return None


@contextlib.contextmanager
def float32_matmul(torch: Any, device: Any) -> Iterator[None]:
    """Switch TF32 off for cuBLAS and cuDNN while a CUDA search runs, then restore the caller's settings.

    With TF32 on (many training scripts set it) scores differ from the CPU's by ~1e-3 and rankings change.
    torch 2.9+ raises when a legacy flag is read after the new ``fp32_precision`` API set another value, so both
    APIs are saved where readable, set off, and restored, legacy first. The flags are process-wide.
    """
    if device is None or device.type != "cuda":
        yield
        return
    backends = torch.backends
    precision = _read_flag(torch.get_float32_matmul_precision)
    cudnn = _read_flag(lambda: backends.cudnn.allow_tf32)
    # every new-API switch, parents first: the legacy setters also write some of them (oneDNN's matmul included)
    new_api = [(switch, switch.fp32_precision) for switch in (
        backends, backends.cuda.matmul, backends.cudnn, backends.cudnn.conv, backends.cudnn.rnn,
        backends.mkldnn, backends.mkldnn.matmul, backends.mkldnn.conv, backends.mkldnn.rnn)]
    try:
        if precision is not None:
            backends.cuda.matmul.allow_tf32 = False
        if cudnn is not None:
            backends.cudnn.allow_tf32 = False
        for switch in (backends.cuda.matmul, backends.cudnn.conv, backends.cudnn.rnn):
            switch.fp32_precision = "ieee"
        yield
    finally:
        if precision is not None:
            torch.set_float32_matmul_precision(precision)
        if cudnn is not None:
            backends.cudnn.allow_tf32 = cudnn
        for switch, value in new_api:
            switch.fp32_precision = value

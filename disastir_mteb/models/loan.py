"""The caller's model lent to the package for a call, and handed back as it came.

Encoding changes a model object on the way: ``encode`` puts every module in eval mode, a fast tokenizer keeps the
truncation and padding of its last call, the multi-process pool moves the model to the CPU. :func:`borrow` records
the state of the torch modules and tokenizers the object holds (training flags, tensors' dtype and device,
attributes one level deep) and puts back what changed, and only that. Nothing is copied but references and flags.
"""

from __future__ import annotations

import contextlib
import enum
import types
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from disastir_mteb.models.precision import wrapper_chain

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["borrow"]

_CONTAINERS = (dict, OrderedDict, list, set)  # exactly these types: a subclass may not refill like one
_LARGEST_COPIED = 1_000  # entries: a larger container (a tokenizer's vocabulary) is recorded by reference only
_NOT_OBJECTS = (type, enum.Enum, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType)
_MISSING = object()


@contextlib.contextmanager
def borrow(model: Any) -> Iterator[None]:
    """``model`` in eval mode for the ``with`` block, then handed back as it came, after an error too.

    A model without torch modules or tokenizers (a plain function, an embedding server, a name) is left alone.
    """
    record = _Record.of(model)
    try:
        record.evaluating()
        yield
    finally:
        record.restore()


@dataclass
class _Record:
    """What :func:`borrow` puts back: references and flags, never a tensor's values."""

    roots: list[Any] = field(default_factory=list)  # the torch modules found, each with its submodules
    training: list[tuple[Any, bool]] = field(default_factory=list)  # every module, parents first, and its flag
    tensors: list[tuple[Any, Any, Any, bool]] = field(default_factory=list)  # tensor, dtype, device, requires_grad
    attributes: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)  # an object's, a copy
    containers: list[tuple[Any, Any]] = field(default_factory=list)  # a container, a copy of it (None: was empty)
    backends: list[tuple[Any, Any, Any]] = field(default_factory=list)  # a fast tokenizer's, truncation, padding

    @classmethod
    def of(cls, model: Any) -> _Record:
        """The state of the torch modules and tokenizers ``model`` holds (none held: an empty record)."""
        record = cls()
        try:
            import torch
        except ImportError:
            return record
        seen: set[int] = set()
        for node in wrapper_chain(model):
            for value in [node] if isinstance(node, torch.nn.Module) else _holdings(node):
                if isinstance(value, torch.nn.Module):
                    record._add_module(value, seen, (*_NOT_OBJECTS, torch.Tensor, torch.nn.Module))
                elif _backend(value) is not None:
                    record._add_object(value, seen)
        return record

    def _add_module(self, root: Any, seen: set[int], not_objects: tuple[type, ...]) -> None:
        if id(root) in seen:
            return
        self.roots.append(root)
        for module in root.modules():
            if id(module) in seen:
                continue
            self.training.append((module, module.training))
            self._add_object(module, seen)
            for value in vars(module).values():  # its attribute objects: a tokenizer, a config, model card data
                if (type(value) not in _CONTAINERS and isinstance(getattr(value, "__dict__", None), dict)
                        and not isinstance(value, not_objects)):
                    self._add_object(value, seen)
            for tensor in (*module.parameters(recurse=False), *module.buffers(recurse=False)):
                self.tensors.append((tensor, tensor.dtype, tensor.device, tensor.requires_grad))

    def _add_object(self, obj: Any, seen: set[int]) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        own = vars(obj)
        self.attributes.append((own, dict(own)))
        for value in own.values():
            if type(value) in _CONTAINERS and len(value) <= _LARGEST_COPIED:
                self.containers.append((value, _copy(value) if value else None))
        backend = _backend(obj)
        if backend is not None:
            self.backends.append((backend, backend.truncation, backend.padding))

    def evaluating(self) -> None:
        """Every module in eval mode (a root already there is not asked again: a switch may re-kernelize)."""
        for root in self.roots:
            if any(module.training for module in root.modules()):
                root.eval()

    def restore(self) -> None:
        """Put back what changed since the record was taken, and only that."""
        for tensor, dtype, device, requires_grad in self.tensors:
            if tensor.dtype != dtype or tensor.device != device:
                tensor.data = tensor.data.to(device=device, dtype=dtype)
            if tensor.requires_grad != requires_grad:
                tensor.requires_grad_(requires_grad)
        for module, training in self.training:  # parents first: a parent's train() sets its children, then theirs
            if module.training != training:
                module.train(training)
        for own, entries in self.attributes:  # written to __dict__: no setter runs, nothing is validated again
            for name in [name for name in own if name not in entries]:
                del own[name]
            for name, value in entries.items():
                if own.get(name, _MISSING) is not value:
                    own[name] = value
        for container, saved in self.containers:
            _refill(container, saved)
        for backend, truncation, padding in self.backends:
            if backend.truncation != truncation:
                backend.no_truncation() if truncation is None else backend.enable_truncation(**truncation)
            if backend.padding != padding:
                backend.no_padding() if padding is None else backend.enable_padding(**padding)


def _holdings(node: Any) -> list[Any]:
    """What a wrapper holds: its attributes' values, a function's closure too (a bound method: its object's)."""
    node = node.__self__ if isinstance(node, types.MethodType) else node
    values = [cell.cell_contents for cell in getattr(node, "__closure__", None) or () if _filled(cell)]
    own = getattr(node, "__dict__", None)
    return values + (list(own.values()) if isinstance(own, dict) else [])


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018  (an empty cell raises)
    except ValueError:
        return False
    return True


def _backend(obj: Any) -> Any:
    """A fast tokenizer's backend (its truncation and padding live outside Python), looked up on the class first."""
    backend = getattr(obj, "backend_tokenizer", None) if hasattr(type(obj), "backend_tokenizer") else None
    return backend if hasattr(backend, "enable_truncation") and hasattr(backend, "enable_padding") else None


def _copy(container: Any) -> Any:
    return type(container)(container)


def _refill(container: Any, saved: Any) -> None:
    """Put ``saved``'s entries (None: none) back into ``container``, the same object, if they changed."""
    if saved is None:
        if container:
            container.clear()
    elif isinstance(container, dict):
        if len(container) != len(saved) or any(container.get(k, _MISSING) is not v for k, v in saved.items()):
            container.clear()
            container.update(saved)
    elif isinstance(container, list):
        if len(container) != len(saved) or any(a is not b for a, b in zip(container, saved, strict=True)):
            container[:] = saved
    elif {id(item) for item in container} != {id(item) for item in saved}:
        container.clear()
        container.update(saved)

"""What a model is, read from its content: the digest its cache entries and results are keyed by.

A probe's vectors cannot say what a model is (a tokenizer edit the probe texts do not reach leaves them as they
were), so a model is known by what shapes every vector: a folder's files, a Hub snapshot's commit and files, an
in-memory model's parameters and tokenizers, or what an encoder declares. Whatever has none of these has no
content, and its identity is for one call only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from disastir_mteb.util.atomic import write_json_atomic
from disastir_mteb.util.digest import file_digest, short_digest

__all__ = ["ModelContent", "folder_content", "hub_content", "object_content"]

#: Files and folders that never shape a vector: documentation, version control, other runtimes' weights (ONNX,
#: OpenVINO, TensorFlow, Flax, Rust) and a trainer's state. Everything else in a model folder is digested.
_SKIPPED_DIRS = frozenset({".git", ".cache", "onnx", "openvino", "runs"})
_SKIPPED_FILES = frozenset({".gitattributes", ".gitignore", "tf_model.h5", "flax_model.msgpack", "rust_model.ot",
                            "training_args.bin", "optimizer.pt", "scheduler.pt", "trainer_state.json"})
_SKIPPED_SUFFIXES = (".md", ".onnx", ".lock")
#: Tokenizer state that each call sets anew (transformers sets truncation and padding on the backend per call).
_PER_CALL = ("truncation", "padding")
_MEMO = "model-content"
#: The sentence-transformers settings that reach queries only, or that the encoding configuration reads from the model.
_QUERY_SIDE_FILES = frozenset({"config_sentence_transformers.json"})


@dataclass(frozen=True)
class ModelContent:
    """What shapes a model's vectors, as one digest.

    Attributes:
        kind: ``folder``, ``hub``, ``parameters`` or ``declared``.
        digest: 32 hex characters.
        detail: what was read, for sentences.
        bytes_read: bytes this reading hashed (0 when every file's digest was remembered).
        passage_digest: the digest of what shapes passages alone: all but the sentence-transformers settings file,
            whose prompts the encoding configuration covers, so an edited query prompt keeps the encoded corpus.
    """

    kind: str
    digest: str
    detail: str
    bytes_read: int = 0
    passage_digest: str = ""

    def __post_init__(self) -> None:
        if not self.passage_digest:
            object.__setattr__(self, "passage_digest", self.digest)

    @property
    def label(self) -> str:
        """``kind:digest``, as provenance records it."""
        return f"{self.kind}:{self.digest}"

    @property
    def passage_label(self) -> str:
        """``kind:passage_digest``: what the corpus's vectors are keyed by."""
        return f"{self.kind}:{self.passage_digest}"


def _shaping_files(folder: Path) -> Iterator[Path]:
    """Every file under ``folder`` that may shape a vector, in a fixed order (symbolic links followed)."""
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("checkpoint-"))
        for name in sorted(files):
            if name not in _SKIPPED_FILES and not name.endswith(_SKIPPED_SUFFIXES) and not name.startswith("README"):
                yield Path(root) / name


def folder_content(folder: str | Path, memo: Path | None = None, *, kind: str = "folder",
                   detail: str | None = None) -> ModelContent:
    """The digest of every file in ``folder`` that shapes the model's vectors (weights, tokenizer, configurations).

    Under ``memo`` each file's digest is remembered with its size, modification and change times and inode, so a warm
    start reads no weight file; writing a file changes its times, so an edit is never missed.

    Raises:
        OSError: a file cannot be read.
    """
    folder = Path(folder).expanduser().resolve()
    memo_file = None if memo is None else Path(memo) / _MEMO / f"{short_digest(str(folder).encode())[:16]}.json"
    remembered = _read_memo(memo_file)
    files: dict[str, list[Any]] = {}
    read = 0
    for path in _shaping_files(folder):
        stat = path.stat()
        state = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
        relative = path.relative_to(folder).as_posix()
        known = remembered.get(relative)
        if isinstance(known, list) and known[:4] == state and len(known) == 5:
            files[relative] = known
            continue
        files[relative] = [*state, file_digest(path)]
        read += stat.st_size
    if memo_file is not None and files != remembered:
        try:
            write_json_atomic(memo_file, {"folder": str(folder), "files": files})
        except OSError:  # a read-only cache remembers nothing: the next start reads the files again
            pass
    digests = {name: entry[4] for name, entry in files.items()}
    passages = {name: value for name, value in digests.items() if name not in _QUERY_SIDE_FILES}
    size = sum(entry[0] for entry in files.values())
    return ModelContent(kind, _digest_of(digests), detail or f"{folder} ({len(files)} files, {size / 1e6:,.1f} MB)",
                        read, _digest_of(passages))


def _digest_of(digests: dict[str, str]) -> str:
    return short_digest(json.dumps(digests, sort_keys=True).encode())


def _read_memo(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = record.get("files") if isinstance(record, dict) else None
    return files if isinstance(files, dict) else {}


def hub_content(repo_id: str, revision: str | None, memo: Path | None = None) -> ModelContent | None:
    """A Hub model's snapshot in the local Hugging Face cache: its commit and :func:`folder_content` of its files.

    None when the cache has no such snapshot: the content is then read from the loaded object instead.
    """
    try:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except (OSError, ValueError):  # not in the cache (LocalEntryNotFoundError), or not a repo id (HFValidationError)
        return None
    if not folder.is_dir():
        return None
    content = folder_content(folder, memo, kind="hub", detail=f"{repo_id}@{folder.name}")
    return ModelContent("hub", short_digest(f"{folder.name}|{content.digest}".encode()), content.detail,
                        content.bytes_read, short_digest(f"{folder.name}|{content.passage_digest}".encode()))


def object_content(model: Any) -> ModelContent | None:
    """An in-memory model's content: its torch parameters, buffers and tokenizers, or what the encoder declares.

    The wrappers are followed through their ``.model`` attributes; None when nothing there has weights or declares.
    """
    chain = list(_chain(model))
    for node in chain:
        declare = getattr(node, "content_identity", None)
        if callable(declare):
            text = str(declare())
            return ModelContent("declared", short_digest(text.encode("utf-8")), text)
    modules, tokenizers = _weights_and_tokenizers(chain)
    if not modules:
        return None
    import xxhash

    digest = xxhash.xxh3_128()
    parameters = read = 0
    for module in modules:
        for name, tensor in _tensors(module):
            data = _tensor_bytes(tensor)
            digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
            digest.update(data)
            parameters += tensor.numel()
            read += len(data)
    vocabulary = 0
    for tokenizer in tokenizers:
        text, size = _tokenizer_text(tokenizer)
        digest.update(text.encode("utf-8"))
        vocabulary += size
    detail = f"{parameters:,} parameters and buffers" + (f", a {vocabulary:,}-token vocabulary" if tokenizers else "")
    return ModelContent("parameters", digest.hexdigest(), detail, read)


def _chain(model: Any) -> Iterator[Any]:
    """``model`` and the objects under its ``.model`` attributes, outermost first."""
    seen: set[int] = set()
    node = model
    while node is not None and id(node) not in seen and len(seen) < 8:
        seen.add(id(node))
        yield node
        node = getattr(node, "model", None)


def _weights_and_tokenizers(chain: list[Any]) -> tuple[list[Any], list[Any]]:
    """The outermost torch modules of the chain (no module twice), and every tokenizer they or the wrappers hold."""
    try:
        import torch
    except ImportError:
        return [], []
    modules: list[Any] = []
    covered: set[int] = set()
    tokenizers: dict[int, Any] = {}

    def add(module: Any) -> None:
        if id(module) in covered:
            return
        modules.append(module)
        for sub in module.modules():
            covered.add(id(sub))
            tokenizer = getattr(sub, "tokenizer", None)
            if _is_tokenizer(tokenizer):
                tokenizers.setdefault(id(tokenizer), tokenizer)

    for node in chain:
        if isinstance(node, torch.nn.Module):
            add(node)
            break
        for value in list(vars(node).values()) if hasattr(node, "__dict__") else []:
            if isinstance(value, torch.nn.Module):
                add(value)
            elif _is_tokenizer(value):
                tokenizers.setdefault(id(value), value)
    return modules, list(tokenizers.values())


def _is_tokenizer(value: Any) -> bool:
    return value is not None and callable(getattr(value, "get_vocab", None))


def _tensors(module: Any) -> Iterator[tuple[str, Any]]:
    """The module's parameters, then its buffers, by name (a tied weight once)."""
    yield from module.named_parameters()
    yield from (("buffer:" + name, buffer) for name, buffer in module.named_buffers())


def _tensor_bytes(tensor: Any) -> memoryview:
    """The tensor's bytes as stored (any dtype, any device), without a copy where it is on the CPU already."""
    import torch

    flat = tensor.detach().reshape(-1)
    if flat.device.type != "cpu":
        flat = flat.cpu()
    if not flat.is_contiguous():
        flat = flat.contiguous()
    return memoryview(flat.view(torch.uint8).numpy())


def _tokenizer_text(tokenizer: Any) -> tuple[str, int]:
    """What maps a text to token ids as text (a fast tokenizer: its whole definition), and its size."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and callable(getattr(backend, "to_str", None)):
        definition = json.loads(backend.to_str())  # in the library's own fixed order: not sorted again
        for key in _PER_CALL:
            definition.pop(key, None)
        size = int(backend.get_vocab_size())
    else:
        vocabulary = tokenizer.get_vocab()
        definition, size = sorted(vocabulary.items()), len(vocabulary)
    sides = {name: getattr(tokenizer, name, None) for name in ("padding_side", "truncation_side", "model_max_length",
                                                               "do_lower_case")}
    text = json.dumps({"class": type(tokenizer).__name__, "sides": sides}, sort_keys=True, default=repr)
    return text + json.dumps(definition, ensure_ascii=False, default=repr), size

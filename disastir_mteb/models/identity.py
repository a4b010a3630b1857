"""A model is identified by what it is: the digest of its content, joined with how it is configured to encode.

A name and a revision do not always say which model computed a vector: an in-memory model has neither, and a
model can be changed in place under both. So every run identifies the model by a *fingerprint* (:func:`identify`)
that joins every store key and every result's provenance: its content, its encoding configuration and its
precision. Embedding servers, which have no content to read, are identified by their vectors of a probe matched
within their own noise; a plain callable without a named version gets a fingerprint for one call only.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from disastir_mteb.models.content import ModelContent
from disastir_mteb.util.atomic import write_bytes_atomic, write_json_atomic
from disastir_mteb.util.digest import short_digest
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.util.mteb_internals import create_dataloader

logger = logging.getLogger(__name__)

__all__ = ["LONG_PROBE_TEXT", "NO_NAME", "NO_REVISION", "PROBE_TEXTS", "PROBE_TOLERANCE", "UNVERSIONED",
           "ModelIdentity", "configuration_digest", "encoding_configuration", "fingerprint_of", "identify", "is_pinned",
           "probe_difference", "probe_texts_of", "probe_vectors", "served_behind"]

_SHORT_PROBES = (
    "Flood warning: the river is expected to crest at 5.2 m near the old bridge on Tuesday night.",
    "How do undersea earthquakes trigger tsunamis?",
    "Pluies torrentielles à Valence — 12 morts, routes coupées et écoles fermées.",
    "COVID-19 vaccination sites reopen after the hurricane; bring ID and proof of address.",
)
#: A text longer than any token limit a DisastIR text reaches (its longest passage is about 2,500 tokens): numbered
#: sentences, no two alike, so that every truncation point gives other vectors. A model truncates it at its own
#: limit, so it costs at most one forward pass at full length.
LONG_PROBE_TEXT = " ".join(f"Report {n}, section {n % 7 + 1}: {_SHORT_PROBES[n % len(_SHORT_PROBES)]}"
                           for n in range(1, 241))
#: The texts every model is asked to encode, in one batch per side: short ones, varied (a number and units, a
#: question, accents and a dash, an acronym), so that a change anywhere in the model moves at least one of them,
#: and :data:`LONG_PROBE_TEXT`, so that a changed token limit does. Changing them changes every fingerprint (and so
#: re-encodes every cache entry once).
PROBE_TEXTS: tuple[str, ...] = (*_SHORT_PROBES, LONG_PROBE_TEXT)

#: How far (the largest coordinate difference over the recorded vector's length) probe vectors of one served model
#: may lie apart when its servers say nothing of their own noise, by the precision its weights ran in: about a
#: hundred times float32's rounding across batch shapes, and several times the gap between half precision and
#: float32. ``None``: a precision nobody reports.
PROBE_TOLERANCE: dict[str | None, float] = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2, None: 1e-2}

#: mteb's names for a model without a name or a revision (``ModelMeta.create_empty``).
NO_NAME = "no_model_name/available"
NO_REVISION = "no_revision_available"

_RESULTS_PREFIX = "fingerprint-"
_PROBES = "probes"


def probe_vectors(model: Any, *, again: bool = False) -> np.ndarray:
    """The model's vectors of :data:`PROBE_TEXTS`, as passages then as queries: float32, shape (2 x texts, dim).

    Through the model's own ``encode`` with the first DisastIR task's metadata, so its prompts are the ones it uses
    there; embedding servers give the probe they answered when started (``again``: asked again).

    Raises:
        ValueError: the model returned something else than one finite vector per probe text.
    """
    served = _served(model)
    if served is not None:  # their own probe: one row per text of their ``probe_texts`` (:func:`probe_texts_of`)
        return (served.probe_servers() if again else served.probe).copy()
    from datasets import Dataset
    from mteb.types import PromptType

    task = _probe_task()
    sides = []
    for side in (PromptType.document, PromptType.query):
        parts = []
        for texts in (list(_SHORT_PROBES), [LONG_PROBE_TEXT]):  # apart: no short text padded to the long one's length
            loader = create_dataloader(Dataset.from_dict({"text": texts}), task_metadata=task, input_column="text",
                                       batch_size=len(texts))  # plain text batches: no `datasets` map, no bar
            parts.append(model.encode(loader, task_metadata=task, hf_split="test", hf_subset="default",
                                      prompt_type=side, batch_size=len(texts), show_progress_bar=False))
        sides.append(np.concatenate([_checked(part, texts, side.value)
                                     for part, texts in zip(parts, (list(_SHORT_PROBES), [LONG_PROBE_TEXT]),
                                                            strict=True)]))
    return np.concatenate(sides)


def _checked(output: Any, texts: list[str], side: str) -> np.ndarray:
    """``output`` as float32 (texts, dim), or one sentence saying what is wrong with it."""
    if hasattr(output, "detach"):  # a torch tensor, possibly half precision or on a GPU
        output = output.detach().float().cpu().numpy()
    array = np.asarray(output)
    if array.ndim != 2 or array.shape[0] != len(texts) or not np.issubdtype(array.dtype, np.floating):
        raise InvalidInput(f"The model returned {array.dtype} of shape {array.shape} for the {len(texts)} texts that "
                           f"identify it (as {side}s); expected one float vector per text ({len(texts)}, dim).")
    array = array.astype(np.float32)
    if not np.isfinite(array).all():
        bad = texts[int(np.flatnonzero(~np.isfinite(array).all(axis=1))[0])]
        raise InvalidInput(f"The model returned NaN or infinite values for the {len(texts)} texts that identify it "
                           f"(as {side}s; e.g. {bad[:80]!r}).")
    return array


def encoding_configuration(model: Any) -> list[dict[str, object]]:
    """How the model is set to encode, read from the objects themselves: one entry per wrapper, outermost first.

    The class, the prompts it adds, and for a ``SentenceTransformer`` its settings and every module's configuration,
    including changes made since it was loaded. The weights are not read (a 7B model's would take minutes): what they
    compute is the content's part of the fingerprint.
    """
    entries: list[dict[str, object]] = []
    seen: set[int] = set()
    node = model
    while node is not None and id(node) not in seen and len(entries) < 8:
        seen.add(id(node))
        entry: dict[str, object] = {"class": f"{type(node).__module__}.{type(node).__qualname__}"}
        prompts = getattr(node, "model_prompts", None)
        if isinstance(prompts, dict) and prompts:
            entry["model_prompts"] = {str(key): str(value) for key, value in prompts.items()}
        if _is_sentence_transformer(node):
            entry.update(_sentence_transformer_configuration(node))
        entries.append(entry)
        node = getattr(node, "model", None)
    return entries


def configuration_digest(model: Any, *, passages: bool = False) -> str:
    """The 32-hex digest of :func:`encoding_configuration`.

    ``passages``: of what shapes passages only, the SentenceTransformers' settings without their prompts.
    """
    entries = encoding_configuration(model)
    if passages:
        entries = [{key: value for key, value in entry.items() if key not in _PROMPT_FIELDS} for entry in entries
                   if "modules" in entry]
    text = json.dumps(entries, sort_keys=True, default=repr, ensure_ascii=False)
    return short_digest(text.encode("utf-8"))


_PROMPT_FIELDS = ("model_prompts", "prompts", "default_prompt_name")


def _is_sentence_transformer(model: Any) -> bool:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return False
    return isinstance(model, SentenceTransformer)


def _sentence_transformer_configuration(model: Any) -> dict[str, object]:
    """A SentenceTransformer's encoding settings and its modules' configurations."""
    modules = []
    for module in model.children():
        config = module.get_config_dict() if callable(getattr(module, "get_config_dict", None)) else {}
        extra = {name: getattr(module, name) for name in ("max_seq_length", "do_lower_case") if hasattr(module, name)}
        modules.append({"class": type(module).__name__, **config, **extra})
    settings = {name: getattr(model, name, None) for name in ("max_seq_length", "prompts", "default_prompt_name",
                                                              "truncate_dim", "similarity_fn_name")}
    return {**settings, "modules": modules}


@runtime_checkable
class ProbedAtStart(Protocol):
    """A model that answered its own probe when it started (embedding servers).

    Named here, not imported, so that this module stays below the encoders that use it.
    """

    probe_texts: tuple[str, ...]
    probe: np.ndarray
    probe_tolerance: float

    def probe_servers(self) -> np.ndarray: ...


def _served(model: Any) -> ProbedAtStart | None:
    """The embedding servers behind ``model`` when its passages reach them raw (bare, or ``with_instructions``)."""
    from disastir_mteb.models.adapter import InstructedEncoder

    if isinstance(model, InstructedEncoder):
        if model.config.passages and model.config.instructions is not None:
            return None  # instructed passages: the probe goes through the wrapper, as they do
        model = model.model
    return model if isinstance(model, ProbedAtStart) else None


def probe_texts_of(model: Any) -> tuple[str, ...]:
    """The texts :func:`probe_vectors` asks ``model`` for, per side: the servers' own, else :data:`PROBE_TEXTS`."""
    served = _served(model)
    return served.probe_texts if served is not None else PROBE_TEXTS


def served_behind(model: Any) -> ProbedAtStart | None:
    """The embedding servers that compute ``model``'s vectors, behind any instruction wrapper; None for other models."""
    from disastir_mteb.models.adapter import InstructedEncoder

    if isinstance(model, InstructedEncoder):
        model = model.model
    return model if isinstance(model, ProbedAtStart) else None


@functools.cache
def _probe_task() -> Any:
    """The metadata of the first DisastIR task (registered with mteb when the package is imported)."""
    import mteb

    from disastir_mteb.vocabulary.taxonomy import TASK_NAMES

    return mteb.get_task(TASK_NAMES[0]).metadata


def probe_difference(vectors: np.ndarray, recorded: np.ndarray) -> float:
    """How far two probes lie apart: the largest coordinate difference over the recorded vector's length.

    Relative, so a model that does not normalise is measured alike; ``inf`` when the shapes differ.
    """
    if vectors.shape != recorded.shape:
        return float("inf")
    scale = np.linalg.norm(recorded.astype(np.float64), axis=1)
    scale[scale == 0] = 1.0
    return float((np.abs(vectors.astype(np.float64) - recorded).max(axis=1) / scale).max())


def fingerprint_of(vectors: np.ndarray, texts: tuple[str, ...] = PROBE_TEXTS) -> str:
    """The 32-hex digest of probe vectors (float32, little-endian, with their shape and the probe ``texts``)."""
    array = np.ascontiguousarray(vectors, dtype="<f4")
    header = json.dumps({"probe": list(texts), "shape": list(array.shape)}).encode("utf-8")
    return short_digest(header + array.tobytes())


def is_pinned(name: str | None, revision: str | None) -> bool:
    """Whether a model has a name and a revision of its own (not mteb's placeholders)."""
    return bool(name) and name != NO_NAME and bool(revision) and revision != NO_REVISION


@dataclass(frozen=True, eq=False)  # compare fingerprints, not the probe arrays
class ModelIdentity:
    """Who computed a run's vectors: the model's name and revision, and the fingerprint of what it is.

    ``fingerprint`` joins its content (or probe), encoding configuration and precision; ``passage_fingerprint`` only
    what decides its passage vectors, so a model changed on the query side reuses its encoded corpus. ``pinned``:
    it has a real name and revision, so its results are filed under them; ``content``: what the fingerprint was read
    from, ``kind:digest``.
    """

    name: str
    revision: str | None
    fingerprint: str
    pinned: bool
    probe: np.ndarray
    configuration: str = ""
    passage_fingerprint: str = ""
    content: str = ""
    detail: str = ""

    def __post_init__(self) -> None:
        if not self.passage_fingerprint:
            object.__setattr__(self, "passage_fingerprint", self.fingerprint)

    @property
    def reusable(self) -> bool:
        """Whether its vectors and results may be taken by a later call (False: no content, no version named)."""
        return self.content != UNVERSIONED

    @property
    def results_revision(self) -> str | None:
        """The revision its results are filed under: its own when pinned, else ``fingerprint-<16 hex>``.

        A model without content or version: ``unversioned-<16 hex>``, a folder of its own for each call.
        """
        if self.pinned:
            return self.revision
        prefix = _RESULTS_PREFIX if self.reusable else f"{UNVERSIONED}-"
        return f"{prefix}{self.fingerprint[:16]}"

    def describe(self) -> str:
        """One line, e.g. ``org/model@abc123, fingerprint 1a2b3c4d5e6f7a8b (the files of its folder: ...)``."""
        return f"{self.name}@{self.revision or 'no revision'}, fingerprint {self.fingerprint[:16]} ({self.detail})"


def identify(*, name: str, revision: str | None, precision: str | None, root: Path | None,
             content: ModelContent | None = None, probe: np.ndarray | None = None, tolerance: float | None = None,
             probe_texts: tuple[str, ...] = PROBE_TEXTS, configuration: str = "",
             passage_configuration: str | None = None) -> ModelIdentity:
    """The model's fingerprints, from its ``content``, else from a server's ``probe``, else for this call only.

    ``precision`` and ``configuration`` join the fingerprint (a cast copy, or a model set to encode otherwise, is
    another model); a probe matches a record under ``root`` within ``tolerance`` (default: :data:`PROBE_TOLERANCE`
    of ``precision``). A pinned model whose content matches none recorded under its name, revision and precision was
    changed in place: one warning says so.
    """
    passage_configuration = configuration if passage_configuration is None else passage_configuration
    pinned = is_pinned(name, revision)
    if content is not None:
        _check_recorded(content, name=name, revision=revision, precision=precision, root=root, pinned=pinned)

        def joined(label: str, config: str) -> str:
            return short_digest(f"{label}|{config}|{precision}".encode())

        return ModelIdentity(name, revision, joined(content.label, configuration), pinned=pinned, probe=_empty(probe),
                             configuration=configuration,
                             passage_fingerprint=joined(content.passage_label, passage_configuration),
                             content=content.label, detail=_CONTENT_WORDS.get(content.kind, "{}").format(
                                 content.detail))
    if probe is not None:
        return _identify_probe(probe, name=name, revision=revision, precision=precision, root=root,
                               tolerance=tolerance, texts=probe_texts, configuration=configuration,
                               passage_configuration=passage_configuration)
    once = secrets.token_hex(16)
    return ModelIdentity(name, revision, once, pinned=False, probe=_empty(probe), configuration=configuration,
                         content=UNVERSIONED, detail="no content to read and no version named: this call only")


#: A model identified for one call only: no content to read, no version named (:attr:`ModelIdentity.reusable`).
UNVERSIONED = "unversioned"
_CONTENT_WORDS = {"folder": "the files of its folder {}", "hub": "its Hub snapshot {} and its files",
                  "parameters": "its weights and tokenizer in memory: {}", "declared": "what it declares: {}"}
_CONTENTS = "contents"


def _empty(probe: np.ndarray | None) -> np.ndarray:
    return probe if probe is not None else np.zeros((0, 0), dtype=np.float32)


def _check_recorded(content: ModelContent, *, name: str, revision: str | None, precision: str | None,
                    root: Path | None, pinned: bool) -> None:
    """Record ``content`` under the name, revision and precision; warn when a pinned model's content is new there."""
    if root is None:
        return
    key = json.dumps({"name": name, "revision": revision, "precision": precision})
    folder = Path(root) / _CONTENTS / short_digest(key.encode())[:16]
    path = folder / f"{short_digest(content.label.encode())}.json"
    if _recorded(path) == content.label:
        return
    others = [other for other in sorted(folder.glob("*.json")) if other != path] if folder.is_dir() else []
    if others and pinned:
        logger.warning("Model %s@%s is not what it was when its cached embeddings were written (%s, content %s): it "
                       "was changed in place under the same name and revision, so it gets cache entries of its own "
                       "and its tasks are evaluated again; give a changed model a new revision to keep both.",
                       name, revision, _CONTENT_WORDS.get(content.kind, "{}").format(content.detail),
                       content.digest[:16])
    try:
        write_json_atomic(path, {"content": content.label, "detail": content.detail})
    except OSError as error:  # a read-only cache: the store warns about it once, for its own files
        logger.debug("Could not record the content of %s in %s: %s", name, folder, error)


def _recorded(path: Path) -> str | None:
    """The content a record names (None: no record, or a damaged one, which is written again)."""
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["content"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _identify_probe(vectors: np.ndarray, *, name: str, revision: str | None, precision: str | None,
                    root: Path | None, tolerance: float | None, texts: tuple[str, ...], configuration: str,
                    passage_configuration: str) -> ModelIdentity:
    """An embedding server's fingerprints: recorded ones whose probe is within tolerance of ``vectors``, else new."""
    pinned = is_pinned(name, revision)
    side = len(texts)
    rounding = ("its servers' own noise and rounding move them" if tolerance is not None else
                f"{precision + ' ' if precision else ''}rounding moves them")
    tolerance = PROBE_TOLERANCE.get(precision, PROBE_TOLERANCE[None]) if tolerance is None else tolerance

    def folder(rows: int) -> Path | None:  # records by name, revision and precision: a changed model is told apart
        if root is None:
            return None
        key: dict[str, object] = {"name": name, "revision": revision, "precision": precision, "probe": list(texts)}
        if rows == side and vectors.shape[0] != side:
            key["side"] = "passages"
        return Path(root) / _PROBES / short_digest(json.dumps(key).encode())[:16]

    whole_folder, passage_folder = folder(len(vectors)), folder(side)
    whole, distances, records = _assign(vectors, whole_folder, tolerance, texts)
    passages, _, passage_records = ((whole, distances, records) if vectors.shape[0] == side else
                                    _assign(vectors[:side], passage_folder, tolerance, texts))
    if distances and whole not in records and pinned:
        nearest = records[distances[0][1]]
        how = (f"{vectors.shape[1]}-dimensional vectors, not {nearest.shape[1]}" if nearest.shape != vectors.shape
               else f"its vectors of the {side} probe texts lie up to {distances[0][0]:.2g} apart, more than "
                    f"{rounding} ({tolerance:.0e})")
        logger.warning("Model %s@%s computes other vectors than when its cached embeddings were written (%s): it was "
                       "changed in place under the same name and revision, so it gets cache entries of its own and "
                       "its tasks are evaluated again; give a changed model a new revision to keep both.",
                       name, revision, how)
    elif distances and whole not in records:
        logger.info("%s: a model not seen before in this cache (fingerprint %s; the nearest one seen lies %.2g apart).",
                    name, whole[:16], distances[0][0])

    def joined(fingerprint: str, config: str) -> str:
        return short_digest(f"{fingerprint}|{config}".encode()) if config else fingerprint

    new = [(whole_folder, whole, vectors)] if whole_folder is not None and whole not in records else []
    if passage_folder is not None and vectors.shape[0] != side and passages not in passage_records:
        new.append((passage_folder, passages, vectors[:side]))
    _record(new, name)
    return ModelIdentity(name, revision, joined(whole, configuration), pinned=pinned, probe=vectors,
                         configuration=configuration, passage_fingerprint=joined(passages, passage_configuration),
                         content=f"probe:{whole}",
                         detail=f"what its servers compute for {len(vectors)} probe texts, within {tolerance:.0e}")


def _assign(vectors: np.ndarray, folder: Path | None, tolerance: float,
            texts: tuple[str, ...] = PROBE_TEXTS) -> tuple[str, list[tuple[float, str]], dict[str, np.ndarray]]:
    """The fingerprint of ``vectors``: a recorded one within ``tolerance``, else its own; with distances, records."""
    own = fingerprint_of(vectors, texts)
    if folder is None:
        return own, [], {}
    records = _records(folder, texts)
    if own in records:
        return own, [], records
    distances = sorted((probe_difference(vectors, recorded), fingerprint) for fingerprint, recorded in records.items())
    if distances and distances[0][0] <= tolerance:
        return distances[0][1], distances, records
    return own, distances, records


def _record(new: list[tuple[Path, str, np.ndarray]], name: str) -> None:
    """Record each new fingerprint's probe vectors in its folder, atomically (a read-only cache records nothing)."""
    for folder, fingerprint, vectors in new:
        try:
            buffer = io.BytesIO()
            np.save(buffer, np.ascontiguousarray(vectors, dtype="<f4"), allow_pickle=False)
            write_bytes_atomic(folder / f"{fingerprint}.npy", buffer.getvalue())
        except OSError as error:  # a read-only cache: the store warns about it once, for its own files
            logger.debug("Could not record the fingerprint of %s in %s: %s", name, folder, error)


def _records(folder: Path, texts: tuple[str, ...] = PROBE_TEXTS) -> dict[str, np.ndarray]:
    """The fingerprints recorded in ``folder`` and their probe vectors of ``texts``; a damaged record is deleted."""
    found: dict[str, np.ndarray] = {}
    damaged: list[str] = []
    for path in sorted(folder.glob("*.npy")) if folder.is_dir() else []:
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            array = None
        if (array is None or array.ndim != 2 or array.shape[0] not in (len(texts), 2 * len(texts))
                or array.dtype != np.float32 or fingerprint_of(array, texts) != path.stem):
            damaged.append(path.name)
            with contextlib.suppress(OSError):  # a read-only cache keeps it; it is never matched anyway
                path.unlink(missing_ok=True)
            continue
        found[path.stem] = array
    if damaged:
        logger.warning("Model fingerprint record(s) %s in %s are damaged (their vectors do not hash to their name): "
                       "not used, and deleted; a model they identified is recognised again by its own vectors.",
                       ", ".join(damaged), folder)
    return found

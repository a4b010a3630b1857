"""A model is identified by what it computes: its vectors for a few fixed texts, recorded and compared.

The embedding store keys vectors by the model's name and revision, but a name and a revision do not
always say which model computed them: an in-memory model (a ``SentenceTransformer`` in a notebook, a
plain callable) has neither, so mteb files every such model as ``no_model_name/available`` at
``no_revision_available``; and a model can be changed in place under both (fine-tuned weights, a folder
saved again, another checkpoint behind the same server, a token limit or a query prompt edited in its
configuration). So every run asks the model for its vectors of :data:`PROBE_TEXTS` on both sides, as passages and
as the first task's queries (with that task's query prompt, and the run's instructions when it has some): four
short texts and one longer than any token limit (:data:`LONG_PROBE_TEXT`, about 5,000 word pieces), so that a
changed truncation moves it. :func:`identify` turns the vectors, joined with the digest of the model's encoding
configuration (:func:`encoding_configuration`: the token limit, prompts, pooling and normalisation it is set to,
read from the model object itself), into a *fingerprint* that joins the store key of every vector the run reads or
writes, and the provenance of every result it writes (:mod:`disastir_mteb.vocabulary.provenance`).

Why a fingerprint is assigned, not hashed. A digest of the probe vectors' bytes would be brittle: the
same model gives the same bytes on the same machine and libraries (one batch of the same texts, so the
same padded shapes), but another device or another torch version moves them by rounding (about
1e-7 in float32, more at half precision), and a different digest would re-encode a corpus for nothing.
So the fingerprints seen under a model name, revision and precision are recorded in the store
(``<store>/probes/<digest>/<fingerprint>.npy``, one file per fingerprint holding its probe vectors), and
a run takes the recorded fingerprint whose vectors are within :data:`PROBE_TOLERANCE` of its own. Only
when none is (a model not seen before, or one changed in place) is a new fingerprint recorded: the
digest of its own vectors' bytes (:func:`fingerprint_of`). So a spurious mismatch costs a re-encode,
never a wrong number, and the identity survives a lost record: the same model on the same machine
computes the same bytes, hence the same fingerprint, again.

What a mismatch means. A model with a real name and revision (:attr:`ModelIdentity.pinned`) whose
vectors match no record of that name and revision was changed in place: it gets new cache entries,
after one warning saying so. A model without them is simply another model: it gets its own entries,
and its results are filed under its fingerprint (:attr:`ModelIdentity.results_revision`) instead of
``no_revision_available``, so two in-memory models never share a result folder either.

The tolerance separates rounding from a changed model. Measured on all-MiniLM-L6-v2 (CPU), as the largest
difference of a probe coordinate over the vector's length: the same model in two processes, or with 1 and
2 threads: 0 (bitwise); in a batch of another shape: 1.1e-7; float16 against float32: 2.7e-4, bfloat16
against float32: 3.2e-3 (bounds on what one precision's rounding does across devices); weights plus
Gaussian noise of 0.05, 0.005, 0.0005: 0.29, 0.059, 0.0054; one signed step of 1e-4, 1e-5, 1e-6 on every
weight: 1.0e-3, 1.0e-4, 1.0e-5. So in float32 a change as small as one 1e-5 step is told apart from
rounding; at half precision a change below the tolerance (one 1e-4 step in bfloat16) is not, because the
model's own rounding moves its vectors as far: give such checkpoints revisions of their own.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from disastir_mteb.util.atomic import write_bytes_atomic
from disastir_mteb.util.digest import short_digest
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.util.mteb_internals import create_dataloader

logger = logging.getLogger(__name__)

__all__ = ["LONG_PROBE_TEXT", "NO_NAME", "NO_REVISION", "PROBE_TEXTS", "PROBE_TOLERANCE", "ModelIdentity",
           "configuration_digest", "encoding_configuration", "fingerprint_of", "identify", "is_pinned",
           "probe_difference", "probe_vectors"]

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

#: How far (the largest coordinate difference over the recorded vector's length) probe vectors of one model
#: may lie apart, by the precision its weights ran in: about a hundred times float32's rounding across batch
#: shapes, and several times the gap between half precision and float32 (see the module docstring). ``None``:
#: a model without torch weights whose precision is unknown (embedding servers, plain callables), which may be
#: a half-precision model that its server batches differently from one request to the next.
PROBE_TOLERANCE: dict[str | None, float] = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2, None: 1e-2}

#: mteb's names for a model without a name or a revision (``ModelMeta.create_empty``).
NO_NAME = "no_model_name/available"
NO_REVISION = "no_revision_available"

_RESULTS_PREFIX = "fingerprint-"
_PROBES = "probes"


def probe_vectors(model: Any, *, again: bool = False) -> np.ndarray:
    """The model's vectors of :data:`PROBE_TEXTS`, as passages then as queries: float32, shape (2 x texts, dim).

    Through the model's own mteb ``encode`` (a ``SentenceTransformer`` wrapper, ``mteb.get_model``'s
    encoders, ``with_instructions``, plain callables, the hashing encoder), with the metadata of the first
    DisastIR task, so that a wrapper's passage prompt, query prompt and instruction are the ones it uses there.
    Embedding servers answered the probe as passages when they were started
    (:attr:`~disastir_mteb.models.embedding_servers.EmbeddingServers.probe`, every server, checked to agree;
    shape (texts, dim)): they embed queries through the same endpoint, raw. ``again`` asks them again (a later run
    of the same search model).

    Raises:
        ValueError: the model returned something else than one finite vector per probe text.
    """
    served = _served(model)
    if served is not None:
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

    Each entry names the object's class and, where it has them, the prompts it adds (mteb's ``model_prompts``) and,
    for a ``SentenceTransformer``, its token limit, prompts and default prompt, output dimension, similarity and
    every module's configuration (the transformer's token limit and casing, pooling, normalisation, a dense head):
    what ``sentence_bert_config.json``, ``config_sentence_transformers.json`` and the modules' files set when it
    was loaded, and whatever was changed on it since. The weights themselves are not read (a 7B model's would take
    minutes to hash): what they compute is the probe's part of the fingerprint.
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

    ``passages``: of what shapes passages: the SentenceTransformers' settings but their prompts (the query prompts
    never reach a passage, and what a passage prompt does the passage side of the probe shows), not the wrappers
    around them (an instruction wrapper changes queries; where it changes passages, the probe shows it).
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
    """A model that answered the probe when it started (embedding servers: every server asked, checked to agree).

    Named here, not imported, so that this module stays below the encoders that use it.
    """

    probe: np.ndarray

    def probe_servers(self) -> np.ndarray: ...


def _served(model: Any) -> ProbedAtStart | None:
    """The embedding servers behind ``model`` when its passages reach them raw (bare, or ``with_instructions``)."""
    from disastir_mteb.models.adapter import InstructedEncoder

    if isinstance(model, InstructedEncoder):
        if model.config.passages and model.config.instructions is not None:
            return None  # instructed passages: the probe goes through the wrapper, as they do
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

    Relative to the length, so a model that does not normalise its vectors is measured alike; ``inf`` when
    the shapes differ (another dimension is another model).
    """
    if vectors.shape != recorded.shape:
        return float("inf")
    scale = np.linalg.norm(recorded.astype(np.float64), axis=1)
    scale[scale == 0] = 1.0
    return float((np.abs(vectors.astype(np.float64) - recorded).max(axis=1) / scale).max())


def fingerprint_of(vectors: np.ndarray) -> str:
    """The 32-hex digest of probe vectors (float32, little-endian, with their shape and the probe texts)."""
    array = np.ascontiguousarray(vectors, dtype="<f4")
    header = json.dumps({"probe": list(PROBE_TEXTS), "shape": list(array.shape)}).encode("utf-8")
    return short_digest(header + array.tobytes())


def is_pinned(name: str | None, revision: str | None) -> bool:
    """Whether a model has a name and a revision of its own (not mteb's placeholders)."""
    return bool(name) and name != NO_NAME and bool(revision) and revision != NO_REVISION


@dataclass(frozen=True, eq=False)  # compare fingerprints, not the probe arrays
class ModelIdentity:
    """Who computed a run's vectors: the model's name and revision, and the fingerprint of what it computes.

    Attributes:
        name: the model's name, as the store keys it.
        revision: its revision, None when it has none.
        fingerprint: 32 hex characters (:func:`identify`): its probe vectors' fingerprint joined with its encoding
            configuration's digest; part of every store key of the run and of every result's provenance.
        pinned: the model has a real name and revision (:func:`is_pinned`), so its results are filed under them.
        probe: the probe vectors it was identified by, shape (2 x len(PROBE_TEXTS), dim) (servers: one side).
        configuration: :func:`configuration_digest` of the model (``""`` when not given).
        passage_fingerprint: what decides its passage vectors alone (the passage side of the probe and the
            configuration but its prompts): the corpus's store key and the ANN index key, so that a model changed on
            the query side only (a query prompt, an instruction) reuses its encoded corpus. Default: ``fingerprint``.
    """

    name: str
    revision: str | None
    fingerprint: str
    pinned: bool
    probe: np.ndarray
    configuration: str = ""
    passage_fingerprint: str = ""

    def __post_init__(self) -> None:
        if not self.passage_fingerprint:
            object.__setattr__(self, "passage_fingerprint", self.fingerprint)

    @property
    def results_revision(self) -> str | None:
        """The revision its results are filed under: its own when pinned, else ``fingerprint-<16 hex>``."""
        return self.revision if self.pinned else f"{_RESULTS_PREFIX}{self.fingerprint[:16]}"

    def describe(self) -> str:
        """One line, e.g. ``org/model@abc123, fingerprint 1a2b3c4d5e6f7a8b (what it computes for 4 probe texts)``."""
        return (f"{self.name}@{self.revision or 'no revision'}, fingerprint {self.fingerprint[:16]} "
                f"(what it computes for {len(PROBE_TEXTS)} probe texts, and how it is configured to encode)")


def identify(vectors: np.ndarray, *, name: str, revision: str | None, precision: str | None,
             root: Path | None, configuration: str = "", passage_configuration: str | None = None) -> ModelIdentity:
    """The model's fingerprints: recorded ones whose probe is within tolerance of ``vectors``, else new ones.

    Args:
        vectors: :func:`probe_vectors` of the model, as it encodes in this run (its precision applied).
        name: the model's name as the store keys it.
        revision: its revision (None when it has none).
        precision: the dtype of its weights (``float32``, ``float16``, ``bfloat16``; None without torch
            weights): picks the tolerance, and fingerprints are recorded per precision.
        root: the store folder whose records to match and extend (``<root>/probes/``); None: nothing recorded,
            the fingerprint is :func:`fingerprint_of` ``vectors``.
        configuration: :func:`configuration_digest` of the model: joined into the fingerprint, so a model set to
            encode otherwise (another token limit, another prompt) is another model even where the probe cannot
            tell.
        passage_configuration: the digest of what of it shapes passages (:func:`configuration_digest` with
            ``passages=True``); joined into :attr:`ModelIdentity.passage_fingerprint`, which the passage side alone
            of the probe decides. Default: ``configuration``.

    Returns:
        The identity. A new fingerprint is recorded (atomically; a folder that cannot be written records
        nothing, which costs at most a re-encode later). When a pinned model matches none of the records of
        its name, revision and precision, one warning says it was changed in place.
    """
    pinned = is_pinned(name, revision)
    side = len(PROBE_TEXTS)
    passage_configuration = configuration if passage_configuration is None else passage_configuration
    tolerance = PROBE_TOLERANCE.get(precision, PROBE_TOLERANCE[None])

    def folder(rows: int) -> Path | None:  # records by name, revision and precision: a changed model is told apart
        if root is None:
            return None
        key: dict[str, object] = {"name": name, "revision": revision, "precision": precision,
                                  "probe": list(PROBE_TEXTS)}
        if rows == side and vectors.shape[0] != side:
            key["side"] = "passages"
        return Path(root) / _PROBES / short_digest(json.dumps(key).encode())[:16]

    whole_folder, passage_folder = folder(len(vectors)), folder(side)
    whole, distances, records = _assign(vectors, whole_folder, tolerance)
    passages, _, passage_records = ((whole, distances, records) if vectors.shape[0] == side else
                                    _assign(vectors[:side], passage_folder, tolerance))
    if distances and whole not in records and pinned:
        nearest = records[distances[0][1]]
        how = (f"{vectors.shape[1]}-dimensional vectors, not {nearest.shape[1]}" if nearest.shape != vectors.shape
               else f"its vectors of the {len(PROBE_TEXTS)} probe texts lie up to {distances[0][0]:.2g} apart, more "
                    f"than {precision + ' ' if precision else ''}rounding moves them ({tolerance:.0e})")
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
                         configuration=configuration, passage_fingerprint=joined(passages, passage_configuration))


def _assign(vectors: np.ndarray, folder: Path | None,
            tolerance: float) -> tuple[str, list[tuple[float, str]], dict[str, np.ndarray]]:
    """The fingerprint of ``vectors`` among ``folder``'s records: a recorded one within ``tolerance``, else its own.

    Returns it with the distances to the records (nearest first) and the records; a fingerprint that is not among
    them is new, for :func:`_record`.
    """
    own = fingerprint_of(vectors)
    if folder is None:
        return own, [], {}
    records = _records(folder)
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


def _records(folder: Path) -> dict[str, np.ndarray]:
    """The fingerprints recorded in ``folder`` and their probe vectors; a damaged record is deleted after a warning."""
    found: dict[str, np.ndarray] = {}
    damaged: list[str] = []
    for path in sorted(folder.glob("*.npy")) if folder.is_dir() else []:
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            array = None
        if (array is None or array.ndim != 2 or array.shape[0] not in (len(PROBE_TEXTS), 2 * len(PROBE_TEXTS))
                or array.dtype != np.float32 or fingerprint_of(array) != path.stem):
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

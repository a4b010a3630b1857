"""A model is identified by what it computes: its vectors for a few fixed texts, recorded and compared.

The embedding store keys vectors by the model's name and revision, but a name and a revision do not
always say which model computed them: an in-memory model (a ``SentenceTransformer`` in a notebook, a
plain callable) has neither, so mteb files every such model as ``no_model_name/available`` at
``no_revision_available``; and a model can be changed in place under both (fine-tuned weights, a folder
saved again, another checkpoint behind the same server). So every run asks the model for its vectors of
:data:`PROBE_TEXTS` (four short texts, one batch: about 0.03 s of MiniLM on a 2-core CPU), and :func:`identify`
turns them into a *fingerprint* that joins the store key of every vector the run reads or writes.

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
from disastir_mteb.util.mteb_internals import create_dataloader

logger = logging.getLogger(__name__)

__all__ = ["NO_NAME", "NO_REVISION", "PROBE_TEXTS", "PROBE_TOLERANCE", "ModelIdentity", "fingerprint_of",
           "identify", "is_pinned", "probe_difference", "probe_vectors"]

#: The texts every model is asked to encode, in one batch, as passages: short, so the probe costs one small
#: forward pass; varied (a number and units, a question, accents and a dash, an acronym), so that a change
#: anywhere in the model moves at least one of them. Changing them changes every fingerprint (and so
#: re-encodes every cache entry once).
PROBE_TEXTS: tuple[str, ...] = (
    "Flood warning: the river is expected to crest at 5.2 m near the old bridge on Tuesday night.",
    "How do undersea earthquakes trigger tsunamis?",
    "Pluies torrentielles à Valence — 12 morts, routes coupées et écoles fermées.",
    "COVID-19 vaccination sites reopen after the hurricane; bring ID and proof of address.",
)

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
    """The model's vectors of :data:`PROBE_TEXTS`, as passages, in one batch: float32, shape (4, dim).

    Through the model's own mteb ``encode`` (a ``SentenceTransformer`` wrapper, ``mteb.get_model``'s
    encoders, ``with_instructions``, plain callables, the hashing encoder), with the metadata of the first
    DisastIR task so that a wrapper's passage prompt is the one it always uses. Embedding servers answered
    the probe when they were started (:attr:`~disastir_mteb.models.embedding_servers.EmbeddingServers.probe`,
    every server, checked to agree); ``again`` asks them again (a later run of the same search model).

    Raises:
        ValueError: the model returned something else than one finite vector per probe text.
    """
    served = _served(model)
    if served is not None:
        return (served.probe_servers() if again else served.probe).copy()
    from datasets import Dataset
    from mteb.types import PromptType

    task = _probe_task()
    texts = list(PROBE_TEXTS)
    loader = create_dataloader(Dataset.from_dict({"text": texts}), task_metadata=task, input_column="text",
                               batch_size=len(texts))  # plain text batches: no `datasets` map, so no progress bar
    output = model.encode(loader, task_metadata=task, hf_split="test", hf_subset="default",
                          prompt_type=PromptType.document, batch_size=len(texts), show_progress_bar=False)
    if hasattr(output, "detach"):  # a torch tensor, possibly half precision or on a GPU
        output = output.detach().float().cpu().numpy()
    array = np.asarray(output)
    if array.ndim != 2 or array.shape[0] != len(texts) or not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"The model returned {array.dtype} of shape {array.shape} for the {len(texts)} texts that "
                         f"identify it; expected one float vector per text ({len(texts)}, dim).")
    array = array.astype(np.float32)
    if not np.isfinite(array).all():
        raise ValueError(f"The model returned NaN or infinite values for the {len(texts)} texts that identify it "
                         f"(e.g. {texts[int(np.flatnonzero(~np.isfinite(array).all(axis=1))[0])]!r}).")
    return array


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
        fingerprint: 32 hex characters (:func:`identify`); part of every store key of the run.
        pinned: the model has a real name and revision (:func:`is_pinned`), so its results are filed under them.
        probe: the probe vectors it was identified by, shape (len(PROBE_TEXTS), dim).
    """

    name: str
    revision: str | None
    fingerprint: str
    pinned: bool
    probe: np.ndarray

    @property
    def results_revision(self) -> str | None:
        """The revision its results are filed under: its own when pinned, else ``fingerprint-<16 hex>``."""
        return self.revision if self.pinned else f"{_RESULTS_PREFIX}{self.fingerprint[:16]}"

    def describe(self) -> str:
        """One line, e.g. ``org/model@abc123, fingerprint 1a2b3c4d5e6f7a8b (what it computes for 4 probe texts)``."""
        return (f"{self.name}@{self.revision or 'no revision'}, fingerprint {self.fingerprint[:16]} "
                f"(what it computes for {len(PROBE_TEXTS)} probe texts)")


def identify(vectors: np.ndarray, *, name: str, revision: str | None, precision: str | None,
             root: Path | None) -> ModelIdentity:
    """The model's fingerprint: a recorded one whose probe is within tolerance of ``vectors``, else a new one.

    Args:
        vectors: :func:`probe_vectors` of the model, as it encodes in this run (its precision applied).
        name: the model's name as the store keys it.
        revision: its revision (None when it has none).
        precision: the dtype of its weights (``float32``, ``float16``, ``bfloat16``; None without torch
            weights): picks the tolerance, and fingerprints are recorded per precision.
        root: the store folder whose records to match and extend (``<root>/probes/``); None: nothing recorded,
            the fingerprint is :func:`fingerprint_of` ``vectors``.

    Returns:
        The identity. A new fingerprint is recorded (atomically; a folder that cannot be written records
        nothing, which costs at most a re-encode later). When a pinned model matches none of the records of
        its name, revision and precision, one warning says it was changed in place.
    """
    own = fingerprint_of(vectors)
    pinned = is_pinned(name, revision)
    identity = functools.partial(ModelIdentity, name, revision, pinned=pinned, probe=vectors)
    if root is None:
        return identity(own)
    folder = Path(root) / _PROBES / short_digest(json.dumps(
        {"name": name, "revision": revision, "precision": precision, "probe": list(PROBE_TEXTS)}).encode())[:16]
    records = _records(folder)
    if own in records:
        return identity(own)
    tolerance = PROBE_TOLERANCE.get(precision, PROBE_TOLERANCE[None])
    distances = sorted((probe_difference(vectors, recorded), fingerprint) for fingerprint, recorded in records.items())
    if distances and distances[0][0] <= tolerance:
        return identity(distances[0][1])
    try:
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(vectors, dtype="<f4"), allow_pickle=False)
        write_bytes_atomic(folder / f"{own}.npy", buffer.getvalue())
    except OSError as error:  # a read-only cache: the store warns about it once, for its own files
        logger.debug("Could not record the fingerprint of %s in %s: %s", name, folder, error)
    if distances and pinned:
        nearest = records[distances[0][1]]
        how = (f"{vectors.shape[1]}-dimensional vectors, not {nearest.shape[1]}" if nearest.shape != vectors.shape
               else f"its vectors of the {len(PROBE_TEXTS)} probe texts lie up to {distances[0][0]:.2g} apart, more "
                    f"than {precision + ' ' if precision else ''}rounding moves them ({tolerance:.0e})")
        logger.warning("Model %s@%s computes other vectors than when its cached embeddings were written (%s): it was "
                       "changed in place under the same name and revision, so it gets cache entries of its own and "
                       "its tasks are evaluated again; give a changed model a new revision to keep both.",
                       name, revision, how)
    elif distances:
        logger.info("%s: a model not seen before in this cache (fingerprint %s; the nearest one seen lies %.2g apart).",
                    name, own[:16], distances[0][0])
    return identity(own)


def _records(folder: Path) -> dict[str, np.ndarray]:
    """The fingerprints recorded in ``folder`` and their probe vectors; a damaged record is deleted after a warning."""
    found: dict[str, np.ndarray] = {}
    damaged: list[str] = []
    for path in sorted(folder.glob("*.npy")) if folder.is_dir() else []:
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            array = None
        if (array is None or array.ndim != 2 or array.shape[0] != len(PROBE_TEXTS) or array.dtype != np.float32
                or fingerprint_of(array) != path.stem):
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

"""USearch parameters: :class:`AnnParams`, the named :data:`PRESETS` and :func:`resolve_params`.

Presets build on one thread, which inserts in row order, so a rebuild gives the same index and scores; a
multi-threaded build (opt-in) gives another graph each time and says so. Search is deterministic.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from disastir_mteb.util.digest import short_digest
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.settings import EXACT

__all__ = ["ANN_OPTIONS", "ANN_PREFIX", "DEFAULT_PRESET", "INDEX_FORMAT", "PRESETS", "AnnOption", "AnnParams",
           "parse_search_setting", "resolve_params", "search_setting"]

#: The format of cached USearch indexes: bump it when the index files or their manifest change, and cached
#: indexes are rebuilt. :attr:`AnnParams.digest` hashes it in; ``search/usearch_files`` records it in each
#: index's manifest.
INDEX_FORMAT = 1
_DTYPES = ("f32", "f16", "i8", "b1")
_BYTES_PER_SCALAR = {"f32": 4, "f16": 2, "i8": 1}  # b1: one bit per dimension, rows padded to whole bytes
MEMORY_WARNING_BYTES = 256 * 2**20  # see AnnParams.memory_warning for why
#: The preset an ANN run uses unless told otherwise: the DisastIR paper's setting.
DEFAULT_PRESET = "paper"
#: What the search setting of an ANN run starts with: ``ann-<label>`` (:func:`search_setting`).
ANN_PREFIX = "ann-"
#: :meth:`AnnParams.label`, read back by :meth:`AnnParams.from_label` (one format, written and parsed here).
_LABEL = re.compile(r"(?P<kind>hnsw|exact)-(?P<metric>[a-z]+)-(?P<dtype>[a-z0-9]+)"
                    r"(?:-M(?P<M>\d+)-efC(?P<efC>\d+)-ef(?P<ef>\d+))?-k(?P<k>\d+|all)-t(?P<t>\d+)(?:-x(?P<x>\d+))?")


def _option(default: Any, flag: str, text: str) -> Any:
    """A field with its ``disastir-mteb run`` option, kept in the field's metadata (read into :data:`ANN_OPTIONS`)."""
    return dataclasses.field(default=default, metadata={"flag": flag, "help": text})


def _all_cores() -> int:
    """The thread count ``threads=0`` stands for, resolved here so the label and the build cannot disagree."""
    return os.cpu_count() or 1


def _physical_memory() -> int | None:
    """This machine's physical memory in bytes, None where the OS does not say (the warning then omits it)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # Windows has no sysconf
        return None


@dataclass(frozen=True)
class AnnParams:
    """One USearch configuration. Build parameters are fixed per index; the others are per search.

    ``connectivity``, ``expansion_add`` and ``expansion_search`` are the HNSW paper's M, efConstruction and ef.
    ``rescore`` re-ranks ``rescore * top_k`` candidates exactly in float32 (i8 and b1 always do). ``k`` is the results
    taken per query whatever depth mteb asks for: a deeper search would widen the breadth and hide part of the drop.
    """

    metric: Literal["ip", "hamming"] = "ip"
    dtype: Literal["f32", "f16", "i8", "b1"] = _option("f32", "--ann-dtype", " | ".join(_DTYPES))
    connectivity: int = _option(16, "--connectivity", "HNSW edges per node (M); overrides the preset")
    expansion_add: int = _option(128, "--expansion-add", "HNSW candidate list while building (efConstruction)")
    expansion_search: int = _option(64, "--expansion-search", "HNSW candidate list while searching (ef)")
    threads: int = _option(1, "--ann-threads", "threads building and searching: 1 (the graph presets') builds the same "
                                               "graph every time; N > 1 or 0 (all cores) builds faster, but another "
                                               "graph and other scores each time")
    rescore: int | None = _option(None, "--rescore", "search rescore x k candidates and re-rank them exactly")
    exact: bool = False
    k: int | None = _option(10, "--ann-k", "results taken from the index per query (paper: 10)")

    def __post_init__(self) -> None:
        """Check every field and name every bad one in one sentence (not only the first a user would fix)."""
        if self.dtype not in _DTYPES:
            raise InvalidInput(f"AnnParams.dtype={self.dtype!r} is not supported; valid: {', '.join(_DTYPES)}.")
        expected = "hamming" if self.dtype == "b1" else "ip"
        if self.metric != expected:
            raise InvalidInput(f"AnnParams.metric={self.metric!r} does not fit dtype={self.dtype!r}: use metric="
                               f"{expected!r} ('hamming' on sign bits for b1, 'ip' for f32, f16 and i8).")
        bad = []  # "name=value", "an integer >= 1": one clause per bad field, all in one sentence
        for name in ("connectivity", "expansion_add", "expansion_search", "threads", "rescore", "k"):
            value = getattr(self, name)
            lowest = {"threads": 0, "connectivity": 2}.get(name, 1)  # USearch: "at least 2, otherwise ... ropes"
            optional = name in ("rescore", "k")
            if (value is not None or not optional) and (type(value) is not int or value < lowest):
                bad.append((f"{name}={value!r}", f"an integer >= {lowest}{' or None' if optional else ''}"))
        if bad:
            clauses = [f"{given} {'must be ' if i == 0 else ''}{rule}" for i, (given, rule) in enumerate(bad)]
            listed = clauses[0] if len(clauses) == 1 else f"{', '.join(clauses[:-1])} and {clauses[-1]}"
            raise InvalidInput(f"AnnParams.{listed}.")
        if self.exact and (self.dtype != "f32" or self.rescore is not None):
            raise InvalidInput(f"AnnParams(exact=True) searches float32 vectors without rescoring; got "
                               f"dtype={self.dtype!r}, rescore={self.rescore!r}.")

    def memory_bytes(self, n_vectors: int, dimensions: int) -> int:
        """Bytes the index of ``n_vectors`` vectors of ``dimensions`` holds: its graph and its vectors.

        USearch's HNSW layout, per node: a key (8), a level (2), the vector (``v``), and per level a neighbour count (4)
        and 4-byte slots, ``2M`` on level 0 and ``M`` above, level ``l`` reached with probability ``M ** -l``::

            bytes = n_vectors * (8 + 2 + v + 4 + 8M + (4 + 4M) / (M - 1))

        ``exact`` builds no graph: its bytes are the float32 copy it searches.
        """
        if self.exact:
            return n_vectors * dimensions * 4
        vector = -(-dimensions // 8) if self.dtype == "b1" else dimensions * _BYTES_PER_SCALAR[self.dtype]
        m = self.connectivity
        return round(n_vectors * (8 + 2 + vector + 4 + 8 * m + (4 + 4 * m) / (m - 1)))

    def memory_warning(self, n_vectors: int, dimensions: int) -> str | None:
        """A sentence when the index exceeds :data:`MEMORY_WARNING_BYTES` and twice what M=16 needs, else None."""
        if self.exact:
            return None
        needed = self.memory_bytes(n_vectors, dimensions)
        paper = AnnParams().connectivity  # 16
        usual = dataclasses.replace(self, connectivity=paper).memory_bytes(n_vectors, dimensions)
        if needed <= MEMORY_WARNING_BYTES or needed <= 2 * usual:
            return None
        physical = _physical_memory()
        share = f", {needed / physical:.0%} of this machine's {physical / 2**30:.0f} GiB" if physical else ""
        wasted = (f"; no node here can have more than {n_vectors - 1:,} neighbours, so connectivity above that "
                  "only reserves empty slots" if self.connectivity >= n_vectors else "")
        return (f"USearch HNSW with connectivity={self.connectivity} needs about {needed / 1e9:.1f} GB of memory for "
                f"{n_vectors:,} vectors of {dimensions} dimensions ({self.dtype}{share}), {needed / usual:.0f}x what "
                f"connectivity {paper} (the paper's) needs: 2 x {self.connectivity:,} neighbour slots of 4 bytes per "
                f"vector{wasted}. Building it anyway; lower --connectivity (connectivity=) if that was not meant.")

    @property
    def repeatable(self) -> bool:
        """Whether a fresh build gives the same index, so a rerun the same scores: exact search, or one build thread."""
        return self.exact or self.resolved().threads == 1

    def build_warning(self) -> str | None:
        """A sentence when a fresh build of these parameters gives another graph (more than one thread), else None."""
        if self.repeatable:
            return None
        return (f"The HNSW graph is built on {self.resolved().threads} threads, which insert in an order the scheduler "
                "decides: another fresh build of the same vectors gives another graph and other ANN scores (a rerun "
                "that loads this graph from the index cache repeats them). --ann-threads 1 (threads=1, the default) "
                "builds the same graph every time.")

    def as_dict(self) -> dict[str, Any]:
        """Every field by name, as given (``threads=0`` stays 0), for result labels and manifests."""
        return dataclasses.asdict(self)

    def resolved(self) -> AnnParams:
        """These parameters with ``threads=0`` replaced by this machine's core count (the one place that does)."""
        return self if self.threads else dataclasses.replace(self, threads=_all_cores())

    def describe(self) -> str:
        """One line with the thread count resolved, e.g. ``HNSW ip f32 M=16 efC=128 ef=64 k=10 threads=16``."""
        threads = self.resolved().threads
        k = f" k={self.k if self.k is not None else 'all'}"
        if self.exact:
            return f"USearch exact {self.metric} {self.dtype}{k} threads={threads}"
        rescore = f" rescore x{self.rescore}" if self.rescore else ""
        return (f"HNSW {self.metric} {self.dtype} M={self.connectivity} efC={self.expansion_add} "
                f"ef={self.expansion_search}{k} threads={threads}{rescore}")

    def label(self) -> str:
        """:meth:`describe`, file-name-safe (``hnsw-ip-f32-M16-efC128-ef64-k10-t16``): the mteb experiment setting."""
        text = self.describe().replace("USearch exact", "exact").replace("HNSW", "hnsw")
        return text.replace("threads=", "t").replace("rescore x", "x").replace("=", "").replace(" ", "-")

    @classmethod
    def from_label(cls, label: str) -> AnnParams:
        """The parameters a :meth:`label` names, threads as they were resolved then; ``ValueError`` for another text."""
        match = _LABEL.fullmatch(label)
        if match is None:
            raise InvalidInput(f"{label!r} is not an ANN label (e.g. 'hnsw-ip-f32-M16-efC128-ef64-k10-t16').")
        part = match.groupdict()
        graph = {} if part["kind"] == "exact" else {
            "connectivity": int(part["M"]), "expansion_add": int(part["efC"]), "expansion_search": int(part["ef"])}
        return cls(metric=part["metric"], dtype=part["dtype"], threads=int(part["t"]), exact=part["kind"] == "exact",
                   rescore=int(part["x"]) if part["x"] else None, k=None if part["k"] == "all" else int(part["k"]),
                   **graph)

    @property
    def digest(self) -> str:
        """A stable 32-hex hash of every field, threads resolved, so builds on other thread counts never share one."""
        return short_digest(json.dumps({"format": INDEX_FORMAT, **self.resolved().as_dict()}, sort_keys=True).encode())



@dataclass(frozen=True)
class AnnOption:
    """One ``disastir-mteb run`` option that sets one :class:`AnnParams` field over the preset's value."""

    field: str
    flag: str
    kind: type
    help: str

    @property
    def dest(self) -> str:
        """The attribute argparse gives the flag: ``--ann-k`` -> ``ann_k``."""
        return self.flag.removeprefix("--").replace("-", "_")


#: The ANN options of ``disastir-mteb run``, read from :class:`AnnParams`' fields (their metadata), so a field, its
#: option and its help are written once; the command line adds them and passes the ones given to :func:`resolve_params`.
ANN_OPTIONS: tuple[AnnOption, ...] = tuple(
    AnnOption(f.name, f.metadata["flag"], str if f.name == "dtype" else int, f.metadata["help"])
    for f in dataclasses.fields(AnnParams) if "flag" in f.metadata)

PRESETS: MappingProxyType[str, AnnParams] = MappingProxyType({
    # DisastIR paper, Section 5.2 and src/retrieval/index_builder.py. The paper searched top-10, so
    # its effective breadth was max(64, 10) = 64; the runner's top_k plays that role here. Built on
    # one thread (threads=1), as the authors' index_builder.py adds and searches: the same graph every time.
    "paper": AnnParams(),
    # Brute force, no graph: the parity reference for the ANN presets; on all cores, which repeats.
    "exact": AnnParams(exact=True, k=None, threads=0),
    # Memory-bound variants: f16 halves, i8 quarters the vectors, b1 keeps one sign bit per dimension. The coarser
    # the distances, the more candidates are re-scored (b1's Hamming distances tie by the hundred); rescoring
    # multiplies the breadth, so keep top_k small.
    "f16": AnnParams(dtype="f16", rescore=2),
    "i8": AnnParams(dtype="i8", rescore=4),
    "b1": AnnParams(metric="hamming", dtype="b1", rescore=32),
})


def _unknown(what: str, value: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(value, valid, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"Unknown {what} {value!r}; valid: {', '.join(valid)}.{hint}"


def resolve_params(preset: str | AnnParams = DEFAULT_PRESET, **overrides: Any) -> AnnParams:
    """The parameters of ``preset`` (a name in :data:`PRESETS` or an :class:`AnnParams`) with ``overrides``.

    Overriding ``dtype`` alone also sets the metric it needs; ``threads=0`` is returned as given.

    Raises:
        ValueError: an unknown preset or field name (the valid ones are listed), or invalid values.
    """
    if not isinstance(preset, AnnParams) and preset not in PRESETS:
        raise InvalidInput(_unknown("preset", preset, list(PRESETS)))
    fields = [field.name for field in dataclasses.fields(AnnParams)]
    for name in overrides:
        if name not in fields:
            raise InvalidInput(_unknown("AnnParams field", name, fields))
    if "dtype" in overrides and "metric" not in overrides:
        overrides["metric"] = "hamming" if overrides["dtype"] == "b1" else "ip"
    return dataclasses.replace(preset if isinstance(preset, AnnParams) else PRESETS[preset], **overrides)


def search_setting(ann: AnnParams | None) -> str:
    """The value of the ``disastir_search`` setting: ``exact``, or ``ann-<label>`` with the threads resolved."""
    return EXACT if ann is None else ANN_PREFIX + ann.resolved().label()


def parse_search_setting(value: str) -> AnnParams | None:
    """What :func:`search_setting` wrote: None for exact search, else the ANN parameters (``ValueError`` otherwise)."""
    if value == EXACT:
        return None
    if not value.startswith(ANN_PREFIX):
        raise InvalidInput(f"{value!r} is not a DisastIR search setting ('exact' or 'ann-<label>').")
    return AnnParams.from_label(value.removeprefix(ANN_PREFIX))

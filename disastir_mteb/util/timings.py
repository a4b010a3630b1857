"""Where a run's time went: its phases, the clock that charges each moment to one of them, the table.

Code marks what it does with ``with clock(Phase.store):``; each moment is charged to the innermost active phase on
the clock's thread, time in none to ``other``, so the phases add up to the total (nested timers would count twice).
Forked workers send their seconds back, and the runner's wait for them is split in those proportions.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from disastir_mteb.util.errors import InvalidInput

__all__ = ["PHASE_MEANINGS", "Phase", "PhaseClock", "Timings", "WorkerReport", "active_clock", "clock",
           "peak_rss_bytes", "pooled", "rss_bytes", "run_clock"]

F = TypeVar("F", bound=Callable[..., Any])


class Phase(str, Enum):
    """The phases of a run, in the order a run meets them (the table's rows)."""

    startup = "startup"
    tasks = "tasks"
    model = "model"
    passages = "passages"
    store = "store"
    queries = "queries"
    index = "index"
    search = "search"
    scoring = "scoring"
    writing = "writing"
    other = "other"


#: What each phase holds, for the documentation and the benchmark's legend.
PHASE_MEANINGS: dict[Phase, str] = {
    Phase.startup: "the libraries a run uses imported (mteb, torch, sentence-transformers), once per Python "
                   "process, and on the command line the network checked",
    Phase.tasks: "the tasks resolved and their data loaded (queries, qrels, the shared corpus), and their texts "
                 "taken out for encoding",
    Phase.model: "the model loaded and identified (its fingerprint: a few fixed texts encoded)",
    Phase.passages: "passages encoded: the model's own work, tokenisation included (or waiting for embedding "
                    "servers)",
    Phase.store: "the embedding store: texts fingerprinted, entries found and verified, chunks checked and "
                 "written, entries joined and written",
    Phase.queries: "queries encoded: the model's own work, tokenisation included",
    Phase.index: "the index built or loaded: the ids, exact search's normalised copy (and its copy on the "
                 "device), or the USearch graph (built, memory-mapped or saved)",
    Phase.search: "the index searched and each task's top-k filed",
    Phase.scoring: "mteb's evaluation of each task (its scores) and the per-query NDCG@10, in this process or "
                   "in worker processes",
    Phase.writing: "result files written (mteb's task files, model_meta.json, run_settings.jsonl, the per-query "
                   "files) and those already there read back",
    Phase.other: "everything no phase names: the settings, progress bars, the per-task summary lines",
}

_HELD = None  # the stack entry of time held for the workers' proportions (pooled), settled into phases later



class _Running(threading.local):
    """The clock running on each thread (the innermost started there), or None: a helper thread has none."""

    clock: PhaseClock | None = None


_running = _Running()


class PhaseClock:
    """Wall time by phase: a stack of active phases, each moment charged to the one on top.

    Start it on the thread it measures. A clock started while another runs takes over until it stops.
    """

    def __init__(self) -> None:
        self._seconds: dict[Phase | None, float] = dict.fromkeys([*Phase, _HELD], 0.0)
        self._stack: list[Phase | None] = [Phase.other]
        self._started = self._last = 0.0
        self._stopped: float | None = None
        self._pid = os.getpid()
        self._previous: PhaseClock | None = None
        self._weights: dict[Phase, float] = dict.fromkeys(Phase, 0.0)
        self._worker_growth: dict[int, int] = {}

    def start(self) -> PhaseClock:
        """Start measuring on this thread; this clock is the running one until :meth:`stop`."""
        self._pid = os.getpid()
        self._previous, _running.clock = _running.clock, self
        self._started = self._last = time.perf_counter()
        self._stopped = None
        return self

    def stop(self) -> None:
        """Stop measuring (the phase on top gets the time up to now); the clock started before runs again."""
        self._push_time(time.perf_counter())
        self._stopped = self._last
        if _running.clock is self:
            _running.clock = self._previous

    def __enter__(self) -> PhaseClock:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ the stack (called by the hooks)

    def push(self, phase: Phase | None) -> int:
        """Charge the time so far to the phase on top, then make ``phase`` the top; its depth, for :meth:`pop`."""
        self._push_time(time.perf_counter())
        self._stack.append(phase)
        return len(self._stack) - 1

    def pop(self, depth: int) -> None:
        """Charge the time so far to the phase on top, then drop the stack back below ``depth``."""
        self._push_time(time.perf_counter())
        del self._stack[max(1, depth):]

    def _push_time(self, now: float) -> None:
        if self._stopped is None:
            self._seconds[self._stack[-1]] += now - self._last
            self._last = now

    # ------------------------------------------------------------------ worker processes

    def add_worker(self, report: WorkerReport) -> None:
        """Count a worker's seconds per phase (the proportions :meth:`settle` splits by) and its memory growth."""
        for name, seconds in report.phases.items():
            self._weights[Phase(name)] += seconds
        self._worker_growth[report.pid] = max(self._worker_growth.get(report.pid, 0), report.rss_growth_bytes)

    def settle(self) -> None:
        """Split the time held by :func:`pooled` between phases as the workers' seconds are split, else ``other``."""
        held, self._seconds[_HELD] = self._seconds[_HELD], 0.0
        measured = sum(self._weights.values())
        for phase, seconds in self._weights.items():
            self._seconds[phase] += held * seconds / measured if measured > 0 else 0.0
        if measured <= 0:
            self._seconds[Phase.other] += held
        self._weights = dict.fromkeys(Phase, 0.0)

    # ------------------------------------------------------------------ reading it

    @property
    def total(self) -> float:
        """Wall seconds since :meth:`start` (up to :meth:`stop` once stopped)."""
        end = self._stopped if self._stopped is not None else time.perf_counter()
        return end - self._started

    def seconds(self) -> dict[str, float]:
        """Seconds per phase so far, in :class:`Phase` order, adding up to :attr:`total` (unsettled time: ``other``)."""
        self._push_time(time.perf_counter())
        seconds = {phase.value: self._seconds[phase] for phase in Phase}
        seconds[Phase.other.value] += self._seconds[_HELD]
        return seconds

    def timings(self, *, passages_encoded: int, queries_encoded: int, device: str) -> Timings:
        """The run so far as one value: seconds per phase, the total, what was encoded where, the peak memory."""
        phases = self.seconds()
        end = self._last if self._stopped is None else self._stopped
        return Timings(phases=phases, total=end - self._started, passages_encoded=passages_encoded,
                       queries_encoded=queries_encoded, device=device,
                       peak_rss_bytes=peak_rss_bytes() + sum(self._worker_growth.values()))


@dataclass(frozen=True)
class WorkerReport:
    """What a worker measured running one task; ``rss_growth_bytes``: its peak memory's rise since the fork."""

    phases: dict[str, float]
    pid: int
    rss_growth_bytes: int


_KEYS = ("phases", "total", "passages_encoded", "queries_encoded", "device", "peak_rss_bytes")


@dataclass(frozen=True)
class Timings:
    """Where one run's wall time went: what ``--timings-json`` writes and ``evaluate(timings=...)`` receives.

    ``phases`` adds up to ``total``; ``peak_rss_bytes`` is the run's process plus each worker's growth.
    """

    phases: dict[str, float]
    total: float
    passages_encoded: int
    queries_encoded: int
    device: str
    peak_rss_bytes: int

    def as_dict(self) -> dict[str, Any]:
        """The JSON of ``--timings-json``: the fields by name."""
        return {"phases": dict(self.phases), "total": self.total, "passages_encoded": self.passages_encoded,
                "queries_encoded": self.queries_encoded, "device": self.device, "peak_rss_bytes": self.peak_rss_bytes}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Timings:
        """The value :meth:`as_dict` wrote; ``ValueError`` for a missing key or an unknown phase."""
        missing = [key for key in _KEYS if key not in data]
        if missing:
            raise InvalidInput(f"Not a timings record: no {', '.join(missing)}; expected what disastir-mteb run "
                               "--timings-json writes.")
        unknown = sorted(set(data["phases"]) - {phase.value for phase in Phase})
        if unknown:
            raise InvalidInput(f"Not a timings record: unknown phase(s) {', '.join(map(repr, unknown))}; the phases "
                               f"are {', '.join(phase.value for phase in Phase)}.")
        phases = {phase.value: float(data["phases"].get(phase.value, 0.0)) for phase in Phase}
        return cls(phases=phases, total=float(data["total"]), passages_encoded=int(data["passages_encoded"]),
                   queries_encoded=int(data["queries_encoded"]), device=str(data["device"]),
                   peak_rss_bytes=int(data["peak_rss_bytes"]))

    def outside(self, *phases: Phase) -> float:
        """Seconds of every phase but ``phases`` (e.g. all but the model's and the search's own)."""
        left_out = {phase.value for phase in phases}
        return sum(seconds for name, seconds in self.phases.items() if name not in left_out)

    def to_text(self) -> str:
        """The table the run prints at its end: one row per phase (seconds, share), the total, then one line."""
        rows = [f"Where the time went ({self.total:.1f} s wall clock):"]
        for name, seconds in self.phases.items():
            share = 100 * seconds / self.total if self.total > 0 else 0.0
            rows.append(f"  {name:<9}{seconds:8.1f} s {share:5.1f} %")
        rows.append(f"  {'total':<9}{self.total:8.1f} s 100.0 %")
        rows.append(f"{self.passages_encoded:,} passages and {self.queries_encoded:,} queries encoded on "
                    f"{self.device}; peak resident memory {self.peak_rss_bytes / 2**30:.2f} GiB (this process and "
                    "its workers).")
        return "\n".join(rows)


# ---------------------------------------------------------------------- the hooks


class _Hook:
    """``with clock(phase):`` / ``@clock(phase)``: ``phase`` on top of the running clock's stack meanwhile."""

    __slots__ = ("_clock", "_depth", "phase")

    def __init__(self, phase: Phase | None) -> None:
        self.phase = phase
        self._clock: PhaseClock | None = None
        self._depth = 0

    def __enter__(self) -> None:
        running = _running.clock
        if running is not None:
            self._clock, self._depth = running, running.push(self.phase)

    def __exit__(self, *exc: object) -> None:
        if self._clock is not None:
            self._clock.pop(self._depth)
            self._clock = None

    def __call__(self, function: F) -> F:
        phase = self.phase

        @functools.wraps(function)
        def measured(*args: Any, **kwargs: Any) -> Any:
            running = _running.clock
            if running is None:
                return function(*args, **kwargs)
            depth = running.push(phase)
            try:
                return function(*args, **kwargs)
            finally:
                running.pop(depth)

        return measured  # type: ignore[return-value]


def clock(phase: Phase) -> _Hook:
    """Mark a block (``with``) or a function (decorator) as time in ``phase``; a no-op without a clock here."""
    return _Hook(phase)


def pooled() -> _Hook:
    """Hold a block's time for the workers' proportions (:meth:`PhaseClock.settle`): the runner waiting for them."""
    return _Hook(_HELD)


def active_clock() -> PhaseClock | None:
    """The clock running on this thread of this process, or None."""
    running = _running.clock
    return running if running is not None and running._pid == os.getpid() else None


@contextlib.contextmanager
def run_clock() -> Iterator[PhaseClock]:
    """The clock of the run under way (a run inside a run joins it), else a new one, with a fresh peak-memory mark."""
    running = active_clock()
    if running is not None:
        yield running
        return
    _reset_peak_rss()
    with PhaseClock() as started:
        yield started


# ---------------------------------------------------------------------- memory

_STATUS = Path("/proc/self/status")


def _status_bytes(field_name: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` in bytes (Linux), or None where there is none."""
    try:
        for line in _STATUS.read_text(encoding="ascii").splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_rss_bytes() -> int:
    """This process's peak resident memory: since the last reset (Linux ``VmHWM``), else over its lifetime."""
    peak = _status_bytes("VmHWM")
    if peak is not None:
        return peak
    import resource
    import sys

    maximum = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(maximum if sys.platform == "darwin" else maximum * 1024)  # bytes on macOS, kB elsewhere


def rss_bytes() -> int:
    """This process's resident memory now (Linux ``VmRSS``; elsewhere its peak)."""
    now = _status_bytes("VmRSS")
    return now if now is not None else peak_rss_bytes()


def _reset_peak_rss() -> None:
    """Reset this process's peak-memory mark to its size now (Linux 4.0+: ``/proc/self/clear_refs``), where it can."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5", encoding="ascii")

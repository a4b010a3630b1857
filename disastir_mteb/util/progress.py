"""Every progress bar of the package: :func:`progress_bar`, a tqdm bar that redraws only where someone watches.

On a terminal (and in a notebook) the bar is tqdm's own, redrawn in place. Where its stream is not a terminal (a
log file, a pipe, CI), tqdm writes each redraw after a carriage return: the bytes pile up in the file (a judge job
wrote 4.6 MB of them, one per answer, ``set_postfix_str`` refreshing at every call). There the bar draws at most
once every :data:`REDRAW_SECONDS`, whatever asks it to (``update``, ``set_postfix_str``, tqdm's monitor thread),
each draw on a line of its own, and always once at the start and once at the end: a ten-hour encoding leaves a
line every half minute, a quick one two lines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import IO, Any

from tqdm.std import tqdm

__all__ = ["REDRAW_SECONDS", "interactive", "live", "progress_bar"]

#: Where the stream is not a terminal: the least time between two lines of one bar (the last line is always drawn).
REDRAW_SECONDS = 30.0


def interactive(stream: IO[str]) -> bool:
    """Whether ``stream`` is a terminal, where a bar can redraw itself in place (a closed stream is not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed file
        return False


def live(stream: IO[str] | None = None) -> bool:
    """Whether a bar on ``stream`` (default stderr) is redrawn in place (a terminal, a notebook's widget).

    Where it is not, a passing notice (a long wait for a server) belongs in a log line of its own, not on the bar.
    """
    from tqdm.auto import tqdm as auto

    in_notebook = any(cls.__module__ == "tqdm.notebook" for cls in auto.__mro__)  # a widget: nothing piles up
    return in_notebook or interactive(stream if stream is not None else sys.stderr)


class _Lines:
    """The stream under a non-terminal bar: each redraw written as one line, without carriage returns or padding."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, text: str) -> None:
        line = text.replace("\x1b[A", "").replace("\r", "").strip()
        if line:
            self.stream.write(line + "\n")
            self.stream.flush()

    def flush(self) -> None:
        self.stream.flush()


class _RareBar(tqdm):  # type: ignore[type-arg]
    """tqdm that draws at most once every ``mininterval`` seconds, however often it is refreshed.

    Its first draw and its last (``close``, which draws without ``refresh``) are always made.
    """

    _drawn_at: float | None = None

    def refresh(self, nolock: bool = False, lock_args: Any = None) -> bool | None:
        now = time.monotonic()
        if self._drawn_at is not None and now - self._drawn_at < self.mininterval:
            return False
        self._drawn_at = now
        return super().refresh(nolock=nolock, lock_args=lock_args)  # type: ignore[no-any-return]


def progress_bar(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str, unit: str,
                 disable: bool = False, initial: int = 0, leave: bool = True,
                 file: IO[str] | None = None) -> tqdm:  # type: ignore[type-arg]
    """A progress bar over ``iterable`` (or ``total`` steps, advanced with ``update``) on ``file`` (default stderr).

    A terminal gets tqdm's bar (``tqdm.auto``: a widget in a notebook), sized to the window; any other stream a bar
    that writes one line at most every :data:`REDRAW_SECONDS` (see the module docstring), kept at the end
    whatever ``leave`` says, so the log ends with the final count.

    Args:
        iterable: what to iterate over, or None to count with ``update``.
        total: the number of steps (default: ``len(iterable)`` where it has one).
        desc: what is counted, before the bar (``Encoding corpus``).
        unit: the unit of a step (`` passages``).
        disable: no bar at all (``--quiet``).
        initial: the steps done before (a resumed encoding).
        leave: keep the finished bar on a terminal (False: cleared).
        file: the stream (default: ``sys.stderr``, read when the bar is made).
    """
    from tqdm.auto import tqdm as auto

    stream = file if file is not None else sys.stderr
    if live(stream):
        return auto(iterable, total=total, desc=desc, unit=unit, disable=disable, initial=initial, leave=leave,
                    file=file, dynamic_ncols=True)
    return _RareBar(iterable, total=total, desc=desc, unit=unit, disable=disable, initial=initial, leave=True,
                    file=_Lines(stream), mininterval=REDRAW_SECONDS, maxinterval=REDRAW_SECONDS, position=0)

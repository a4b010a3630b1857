"""Every progress bar of the package: a tqdm bar that redraws only where someone watches.

Off a terminal (a log, CI), carriage-return redraws pile up, so the bar writes a line at most every
:data:`REDRAW_SECONDS`, and at the start and the end.
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
    """Whether a bar on ``stream`` (default stderr) is redrawn in place; where not, a passing notice gets a log line."""
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
    """tqdm that draws at most once every ``mininterval`` seconds, however often refreshed; first and last always."""

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
    """A progress bar over ``iterable`` (or ``total`` steps, advanced with ``update``) on ``file`` (default stderr)."""
    from tqdm.auto import tqdm as auto

    stream = file if file is not None else sys.stderr
    if live(stream):
        return auto(iterable, total=total, desc=desc, unit=unit, disable=disable, initial=initial, leave=leave,
                    file=file, dynamic_ncols=True)
    return _RareBar(iterable, total=total, desc=desc, unit=unit, disable=disable, initial=initial, leave=True,
                    file=_Lines(stream), mininterval=REDRAW_SECONDS, maxinterval=REDRAW_SECONDS, position=0)

"""A one-shot step that waits while a given module is still executing (imported, not yet whole).

Registration with mteb is triggered by ``import mteb`` (the autoload hook). When the plugin module
whose objects a step registers is itself the first to import mteb, the hook fires while that module
is half-executed, so the step cannot read it yet. The step then marks itself pending, and the module
calls :meth:`DeferredStep.module_finished` on its last line.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

__all__ = ["DeferredStep"]


def _initializing(name: str) -> bool:
    module = sys.modules.get(name)
    return module is not None and bool(getattr(module.__spec__, "_initializing", False))


class DeferredStep:
    """Run ``step`` once, as soon as module ``module`` is not half-executed."""

    def __init__(self, module: str, step: Callable[[], None]) -> None:
        self.module = module
        self._step = step
        self._lock = threading.RLock()
        self._pending = False
        self.done = False

    def run(self, caller: str | None = None) -> None:
        """Run the step now, or mark it pending while the module executes (``caller`` counts as whole)."""
        with self._lock:
            if self.done:
                return
            if self.module != caller and _initializing(self.module):
                self._pending = True
                return
            self._pending = False
            self._step()
            self.done = True

    def module_finished(self, caller: str) -> None:
        """Called by the module on its last line: run the step if it waited for this module."""
        with self._lock:
            if self._pending:
                self.run(caller)

"""Headless Chromium over its DevTools pipe: a whole page as one PNG, and the page as rendered.

``chromium --screenshot`` cuts a long page at the bottom and a wide table at its box's edge, so the page is
driven over ``--remote-debugging-pipe`` (no port, no client library): load and settle, widen the window until no
table scrolls sideways, set its height to the page's, then save one PNG.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from disastir_mteb.util.atomic import write_bytes_atomic
from disastir_mteb.util.errors import BrowserError, BrowserTimeout, MissingInput

__all__ = ["BROWSERS", "SCREENSHOT_WIDTH", "PageShot", "find_browser", "screenshot"]

SCREENSHOT_WIDTH = 1280
"""Pixels, the window's width for ``leaderboard --screenshot``: a laptop's, so the picture shows what a reader sees."""
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
"""Chromium-family executables looked for on PATH, in this order."""

_HIDDEN_WIDTH = """(() => {
  let hidden = document.documentElement.scrollWidth - document.documentElement.clientWidth;
  for (const table of document.querySelectorAll('table')) {
    if (!table.offsetParent) continue;
    for (let box = table.parentElement; box && box !== document.body; box = box.parentElement) {
      const overflow = getComputedStyle(box).overflowX;
      if (overflow === 'auto' || overflow === 'scroll' || overflow === 'hidden')
        hidden = Math.max(hidden, box.scrollWidth - box.clientWidth);
    }
  }
  return hidden;
})()"""
_PAGE_HEIGHT = "Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0)"
_SETTLED = f"[document.readyState, {_PAGE_HEIGHT}, document.getElementsByTagName('*').length]"


@dataclass(frozen=True)
class PageShot:
    """What :func:`screenshot` saw.

    Attributes:
        html: the page as rendered, for checks without eyes.
        width: the window's final width in pixels (the PNG's).
        height: the page's height in pixels (the PNG's).
        hidden_width: pixels still scrolled out of sight: 0 unless ``max_width`` stopped the widening.
        measured: the value of the ``measure`` expression on the saved page (None without one).
    """

    html: str
    width: int
    height: int
    hidden_width: int
    measured: Any = None


def find_browser() -> str | None:
    """A Chromium-family browser on PATH (see :data:`BROWSERS`), or None."""
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    return None


class _DevTools:
    """One headless browser and its DevTools pipe; ``call`` sends a command and returns its result."""

    def __init__(self, browser: str, profile: str) -> None:
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()
        # Descriptors >= 10, so placing them at 3 and 4 in the child never overwrites one with the other.
        ends = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser_read, from_browser_write)]
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._log = tempfile.TemporaryFile()
        args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-dev-shm-usage",
                "--no-first-run", f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
        try:
            self.pid = os.posix_spawnp(browser, args, os.environ, file_actions=[
                (os.POSIX_SPAWN_DUP2, ends[0], 3), (os.POSIX_SPAWN_DUP2, ends[1], 4),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0), (os.POSIX_SPAWN_DUP2, self._log.fileno(), 2)])
        finally:
            for fd in ends:
                os.close(fd)
        self._buffer = b""
        self._last_id = 0

    def output(self) -> str:
        """The browser's last stderr lines (for error messages)."""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace").strip()[-600:]

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout_s: float = 60) -> dict[str, Any]:
        """Send one DevTools command and wait for its reply (events in between are skipped).

        Raises:
            RuntimeError: the browser answered with an error or closed the pipe.
            TimeoutError: no reply within ``timeout_s``.
        """
        self._last_id += 1
        message: dict[str, Any] = {"id": self._last_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode("utf-8") + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._last_id:
                    if "error" in reply:
                        raise BrowserError(f"Chromium refused {method}: {reply['error'].get('message', reply)}")
                    result: dict[str, Any] = reply.get("result", {})
                    return result
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserTimeout(f"Chromium did not answer {method} within {timeout_s:.0f} s.")
            if select.select([self._from_browser], [], [], left)[0]:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise BrowserError(f"Chromium closed its DevTools pipe during {method}: {self.output()}")
                self._buffer += chunk

    def close(self) -> None:
        """Close the browser (politely, then by signal) and the pipe."""
        try:
            self.call("Browser.close", timeout_s=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        deadline = time.monotonic() + 10
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
                break
            time.sleep(0.1)
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        self._log.close()


def screenshot(url: str, png: str | Path, *, browser: str | None = None, width: int = 1600, height: int = 1200,
               ready: str | None = None, timeout_s: float = 120, max_width: int = 8000,
               measure: str | None = None) -> PageShot:
    """Load ``url`` in headless Chromium and save the whole page, every table in full, as one PNG.

    Args:
        url: the page.
        png: where the PNG goes (written atomically).
        browser: a Chromium-family executable; default :func:`find_browser`.
        width: the starting window width in pixels (widened, never narrowed).
        height: the window height in pixels while the page loads.
        ready: a JavaScript expression that is true once the page shows what it must.
        timeout_s: seconds the page may take to become ready and settle.
        max_width: the widest window tried, in pixels.
        measure: a JavaScript expression evaluated on the saved page (:attr:`PageShot.measured`).

    Raises:
        FileNotFoundError: no Chromium-family browser is installed.
        RuntimeError: the browser failed (its last output lines are quoted).
        TimeoutError: the page did not become ready within ``timeout_s``.
    """
    browser = browser or find_browser()
    if browser is None:
        raise MissingInput("No Chromium-family browser on PATH (chromium, google-chrome); install one, e.g. "
                           "`apt-get install chromium`, to take a screenshot.")
    with tempfile.TemporaryDirectory(prefix="disastir-browser-") as profile:
        tools = _DevTools(browser, profile)
        try:
            target = tools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = tools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

            def evaluate(expression: str) -> Any:
                reply = tools.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                   session=session)
                return reply.get("result", {}).get("value")

            def resize(new_width: int, new_height: int) -> None:
                tools.call("Emulation.setDeviceMetricsOverride", {"width": new_width, "height": new_height,
                                                                  "deviceScaleFactor": 1, "mobile": False},
                           session=session)

            resize(width, height)
            tools.call("Page.navigate", {"url": url}, session=session)
            _settle(evaluate, ready, timeout_s, url)
            hidden = int(evaluate(_HIDDEN_WIDTH) or 0)
            while hidden > 0 and width < max_width:
                width = min(max_width, width + hidden)
                resize(width, height)
                _settle(evaluate, None, timeout_s, url)
                hidden = int(evaluate(_HIDDEN_WIDTH) or 0)
            page_height = int(evaluate(_PAGE_HEIGHT))
            resize(width, page_height)
            _settle(evaluate, None, timeout_s, url)
            page_height = int(evaluate(_PAGE_HEIGHT))
            resize(width, page_height)
            image = base64.b64decode(tools.call("Page.captureScreenshot", {"format": "png"}, session=session)["data"])
            html = str(evaluate("document.documentElement.outerHTML"))
            measured = evaluate(measure) if measure is not None else None
        finally:
            tools.close()
    write_bytes_atomic(png, image)
    return PageShot(html=html, width=width, height=page_height, hidden_width=hidden, measured=measured)


def _settle(evaluate: Any, ready: str | None, timeout_s: float, url: str) -> None:
    """Wait until ``ready`` holds (when given) and the page's size and element count stop changing."""
    deadline = time.monotonic() + timeout_s
    last, same = None, 0
    while True:
        state = evaluate(_SETTLED)
        is_ready = ready is None or bool(evaluate(ready))
        settled = is_ready and state is not None and state == last and state[0] == "complete"
        same = same + 1 if settled else 0
        if same >= 2:
            return
        if time.monotonic() > deadline:
            raise BrowserTimeout(f"{url} was not ready within {timeout_s:.0f} s (ready condition: {ready!r}).")
        last = state
        time.sleep(0.5)

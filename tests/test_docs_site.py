"""The documentation site as a reader at a laptop's width sees it: built by `make docs` (CI builds it first).

Loaded in headless Chromium at 1,280 px: no code block or table hides its end behind a scrollbar (end-of-line
comments were cut). Skipped without a built site or a browser, except in CI, where both are there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SITE = ROOT / "site"
DOCS = ROOT / "docs"

#: The code blocks and tables of a page's content that are wider than their box.
_CUT = """(() => [...document.querySelectorAll('.md-content pre > code, .md-content table')]
  .filter(element => element.scrollWidth > element.clientWidth + 1)
  .map(element => element.innerText.split('\\n')[0].slice(0, 80)))()"""


def _site_and_browser() -> None:
    from disastir_mteb.leaderboard.browser import find_browser

    missing = [what for what, there in (("a built site (make docs)", (SITE / "index.html").is_file()),
                                        ("a Chromium-family browser", find_browser() is not None)) if not there]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must check the site: {' and '.join(missing)} missing (.ci/run builds and installs both)")
        pytest.skip(f"no {' and no '.join(missing)}")


@pytest.mark.parametrize("page", ["usage", "runner", "judge", "servers"])
def test_code_blocks_fit_or_wrap_at_1280_px(page: str, tmp_path: Path) -> None:
    """The pages with the widest blocks (measured: up to 3,142 px of a 688-px box before the site wrapped them)."""
    from disastir_mteb.leaderboard.browser import screenshot

    _site_and_browser()
    shot = screenshot((SITE / page / "index.html").as_uri(), tmp_path / "page.png", width=1280, max_width=1280,
                      height=900, measure=_CUT, timeout_s=60)
    assert shot.measured == []


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda path: path.name)
def test_a_long_page_has_subheadings_to_navigate_by(page: Path) -> None:
    """A guide is scannable in its navigation: a heading at least every 60 lines (the runner's 233 had none)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    headings = [number for number, line in enumerate(lines) if re.match(r"#{2,3} ", line)]
    gaps = [b - a for a, b in zip([0, *headings], [*headings, len(lines)], strict=True)]
    assert max(gaps) <= 60, f"{page.name}: {max(gaps)} lines without a subheading"

"""The documentation site as a reader at a laptop's width sees it: built by `make docs` (CI builds it first).

Its text: no docstring's Sphinx role shown raw (``:class:`` was, 535 times on 9 API pages: docs/tooling/
sphinx_roles.py makes them links), no ``\\|`` on the CLI page. Loaded in headless Chromium at 1,280 px: no code
block hides its end behind a scrollbar (end-of-line comments were cut), no code token is split across two lines
(``--`` / ``out``: docs/tooling/code_tokens.py) and no word of a table ("leaderboar" / "d"). Skipped without a
built site or a browser, except in CI, where both are there.
"""

from __future__ import annotations

import html
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


#: Where a word of a table or a code token is split across two lines, as "before / after" (at most 25 characters
#: each side). In a table cell a line may start after a space, or after a hyphen of prose; in code, after a space
#: only, or after a separator (_ / . -) of a token of more than 40 characters (code-token-long), which may not fit.
_SPLIT = """(() => {
  const found = [], seen = new Set();
  const mayWrap = (node, before) => /[_\\/.-]/.test(before) && node.parentElement.closest('.code-token-long') !== null;
  for (const root of document.querySelectorAll('.md-content td, .md-content th, .md-content code')) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let previous = null;  // [top, character, in code] of the last character laid out under this root
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (seen.has(node)) { previous = null; continue; }
      seen.add(node);
      const inCode = node.parentElement.closest('code') !== null, text = node.data;
      for (let i = 0; i < text.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rect = range.getClientRects()[0];
        if (!rect || /\\s/.test(text[i])) {  // a space, or one collapsed at the end of a line
          if (previous && /\\s/.test(text[i])) previous = [previous[0], ' ', inCode];
          continue;
        }
        if (previous && rect.top > previous[0] + 2 && !/\\s/.test(previous[1])
            && (inCode || previous[2] || previous[1] !== '-') && !mayWrap(node, previous[1])) {
          found.push(text.slice(Math.max(0, i - 25), i) + ' / ' + text.slice(i, i + 25));
        }
        previous = [rect.top, text[i], inCode];
      }
    }
  }
  return found;
})()"""

#: A docstring's Sphinx role as the page's text shows it when nothing renders it (":class:~disastir_mteb.x.Y").
_ROLE = re.compile(r":(?:py:)?(?:class|mod|func|meth|attr|data|exc|obj|const):")


def _built_site() -> None:
    if not (SITE / "index.html").is_file():
        if os.environ.get("CI"):
            pytest.fail("CI must check the site: no built site (.ci/run builds it with make docs)")
        pytest.skip("no built site (make docs)")


def _site_and_browser() -> None:
    from disastir_mteb.leaderboard.browser import find_browser

    _built_site()
    if find_browser() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must check the site: no Chromium-family browser (.ci/run installs one)")
        pytest.skip("no Chromium-family browser")


def _text(page: str) -> str:
    """A built page's text as shown: its HTML's tags dropped, entities read."""
    folder = SITE / page.removesuffix("/index")  # docs/x/index.md is site/x/index.html
    return html.unescape(re.sub(r"<[^>]+>", "", (folder / "index.html").read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", sorted(path.stem for path in (DOCS / "api").glob("*.md")))
def test_api_pages_show_no_sphinx_role(page: str) -> None:
    """The docstrings cross-reference with Sphinx roles; the site shows each as a link or as code, never raw."""
    _built_site()
    text = _text(f"api/{page}")
    assert not _ROLE.findall(text), [text[m.start():m.start() + 60] for m in _ROLE.finditer(text)][:5]


def test_a_sphinx_role_is_a_link_where_its_target_is_on_the_site() -> None:
    """``:class:`~disastir_mteb.runner.evaluation_result.EvaluationResult``` in ``evaluate``'s docstring: a link."""
    _built_site()
    runner = (SITE / "api" / "runner" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'<a class="autorefs autorefs-internal"[^>]*href="[^"]*'
                     r'#disastir_mteb\.runner\.evaluation_result\.EvaluationResult"[^>]*><code>EvaluationResult</code></a>',
                     runner)


def test_the_cli_page_shows_no_escaped_pipe() -> None:
    """Pipes inside the table's code were escaped for GitHub (``exact\\|ann``); the site showed the backslashes."""
    _built_site()
    text = _text("cli")
    assert "\\|" not in text and "--search exact|ann" in text


@pytest.mark.parametrize("page", ["usage", "runner", "judge", "servers", "cli", "architecture", "getting-started",
                                  "faults/cli", "api/runner"])
def test_at_1280_px_code_is_whole_and_no_word_of_a_table_is_split(page: str, tmp_path: Path) -> None:
    """The pages with the widest blocks (measured: up to 3,142 px of a 688-px box before the site wrapped them),
    the longest command lines in a table (cli: "--" / "out", 21 splits), tables of paths and test names."""
    from disastir_mteb.leaderboard.browser import screenshot

    _site_and_browser()
    shot = screenshot((SITE / page / "index.html").as_uri(), tmp_path / "page.png", width=1280, max_width=1280,
                      height=900, measure=f"[{_CUT}, {_SPLIT}]", timeout_s=60)
    cut, split = shot.measured
    assert cut == [] and split == []


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda path: path.name)
def test_a_long_page_has_subheadings_to_navigate_by(page: Path) -> None:
    """A guide is scannable in its navigation: a heading at least every 60 lines (the runner's 233 had none)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    headings = [number for number, line in enumerate(lines) if re.match(r"#{2,3} ", line)]
    gaps = [b - a for a, b in zip([0, *headings], [*headings, len(lines)], strict=True)]
    assert max(gaps) <= 60, f"{page.name}: {max(gaps)} lines without a subheading"

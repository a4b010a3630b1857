"""MkDocs hook: a code token is never split across two lines inside a word or an option.

Browsers may break a line after any hyphen, ``--out`` into ``--`` and ``out``, ``disastir-mteb`` into ``disastir-``
and ``mteb``, and no CSS property forbids it. This wraps each run of non-space characters of every ``<code>``
element (code blocks, inline code, tables) in ``<span class="code-token">``, which stylesheets/extra.css keeps on
one line: lines then wrap between tokens only. The text is unchanged (copying a block copies the same characters).

A token longer than :data:`LONG` characters (a test's name, a results path) would widen a table past the page or
not fit a line: it is marked ``code-token-long`` instead and may wrap after its separators (``_``, ``/``, ``.``,
``-``), never inside a word.
"""

from __future__ import annotations

import html
import re
from typing import Any

CODE = re.compile(r"(<code\b[^>]*>)(.*?)(</code>)", re.DOTALL)
PIECES = re.compile(r"(<[^>]*>)")
#: characters; a longer token may wrap after a separator
LONG = 40
#: a run holding a character after which a browser may break the line (letters, digits and _ alone never break it),
#: or a run too long to stay whole
TOKEN = re.compile(rf"[^\s<>]*[^\w\s<>][^\s<>]*|[^\s<>]{{{LONG + 1},}}")
#: where a long token may wrap: after these (a hyphen is a place to wrap for the browser already)
SEPARATOR = re.compile(r"(?<=[_/.])(?=[^_/.])")


def _span(match: re.Match[str]) -> str:
    token = match[0]
    if len(html.unescape(token)) > LONG:
        return f'<span class="code-token-long">{SEPARATOR.sub("<wbr>", token)}</span>'
    return f'<span class="code-token">{token}</span>'


def keep_tokens_whole(page: str) -> str:
    """``page`` (HTML) with every token inside ``<code>`` wrapped as described above."""

    def code(match: re.Match[str]) -> str:
        pieces = PIECES.split(match[2])
        inner = "".join(piece if piece.startswith("<") else TOKEN.sub(_span, piece) for piece in pieces)
        return f"{match[1]}{inner}{match[3]}"

    return CODE.sub(code, page)


def on_page_content(html: str, **kwargs: Any) -> str:
    """MkDocs' event: a page's HTML, once Markdown (and mkdocstrings) rendered it."""
    return keep_tokens_whole(html)

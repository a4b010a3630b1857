"""The report's document blocks (headings, paragraphs, notices, tables, images) and their renderers.

:mod:`disastir_mteb.results.report` builds a report once as a list of blocks; the renderers here turn
that list into Markdown, HTML or fixed-width plain text, so the formats cannot drift apart.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Block", "Heading", "Image", "Notice", "Paragraph", "Table", "render_html", "render_markdown",
           "render_text"]


@dataclass(frozen=True)
class Heading:
    """A section title (level 1-3)."""

    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    """A line of text."""

    text: str


@dataclass(frozen=True)
class Notice:
    """A warning the reader must not miss (rendered in bold, at the top)."""

    text: str


@dataclass(frozen=True)
class Table:
    """A table of already formatted cells; the first column is left-aligned, the others right.

    The first cell of a row names it (an intent, ``Mean``, a model, a source): :meth:`row` and :meth:`column`
    read cells by those names and the headings, as a reader of the report finds them.
    """

    headers: list[str]
    rows: list[list[str]]

    def row(self, label: str) -> dict[str, str]:
        """The first row whose first cell is ``label``, as heading -> cell (``table.row("NLI")["Geo"]``).

        Raises:
            KeyError: no row is named ``label`` (the names are listed).
        """
        for row in self.rows:
            if row[0] == label:
                return dict(zip(self.headers, row, strict=True))
        raise KeyError(f"No row {label!r} in the table headed {self.headers[0]!r}; its rows: "
                       f"{', '.join(row[0] for row in self.rows)}.")

    def column(self, heading: str) -> list[str]:
        """The cells under ``heading``, top to bottom.

        Raises:
            KeyError: no column is headed ``heading`` (the headings are listed).
        """
        if heading not in self.headers:
            raise KeyError(f"No column {heading!r}; the headings: {', '.join(self.headers)}.")
        index = self.headers.index(heading)
        return [row[index] for row in self.rows]


@dataclass(frozen=True)
class Image:
    """A figure file (relative to the report) with its caption."""

    path: str
    caption: str


Block = Heading | Paragraph | Notice | Table | Image

def render_markdown(blocks: Sequence[Block]) -> str:
    """Markdown: tables with the first column left-aligned, images as links to their files."""
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {block.text}\n")
        elif isinstance(block, Paragraph):
            out.append(f"{block.text}\n")
        elif isinstance(block, Notice):
            out.append(f"> **{block.text}**\n")
        elif isinstance(block, Image):
            out.append(f"![{block.caption}]({block.path})\n")
        else:
            out.append("| " + " | ".join(block.headers) + " |")
            out.append("|" + "|".join([":---"] + ["---:"] * (len(block.headers) - 1)) + "|")
            out += ["| " + " | ".join(row) + " |" for row in block.rows]
            out.append("")
    return "\n".join(out)


def render_html(blocks: Sequence[Block]) -> str:
    """One standalone HTML page with its own style sheet; `code` in paragraphs becomes <code>."""
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            text = re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(block.text))
            body.append(f"<p>{text}</p>")
        elif isinstance(block, Notice):
            body.append(f'<p class="notice"><strong>{html.escape(block.text)}</strong></p>')
        elif isinstance(block, Image):
            body.append(f'<figure><img src="{html.escape(block.path)}" alt="{html.escape(block.caption)}">'
                        f"<figcaption>{html.escape(block.caption)}</figcaption></figure>")
        else:
            head = "".join(f"<th>{html.escape(h)}</th>" for h in block.headers)
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in block.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    style = ("body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a}"
             "table{border-collapse:collapse;margin:0.5rem 0 1.5rem}th,td{padding:0.25rem 0.6rem;"
             "border-bottom:1px solid #ddd;text-align:right}th:first-child,td:first-child{text-align:left}"
             "img{max-width:100%}figcaption{color:#555;font-size:0.9rem}"
             ".notice{background:#fff4e5;border-left:4px solid #e69500;padding:0.5rem 0.8rem}")
    return (f"<!doctype html>\n<html><head><meta charset='utf-8'><title>DisastIR report</title><style>{style}"
            f"</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def render_text(blocks: Sequence[Block]) -> str:
    """Fixed-width plain text (what ``disastir-mteb report`` prints); images are left out."""
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out += ["", block.text, "=" * len(block.text) if block.level == 1 else "-" * len(block.text)]
        elif isinstance(block, Paragraph):
            out.append(block.text)
        elif isinstance(block, Notice):
            out += [f"!! {block.text}", ""]
        elif isinstance(block, Table):
            widths = [max(len(str(x)) for x in column) for column in zip(block.headers, *block.rows, strict=True)]
            for row in [block.headers, *block.rows]:
                out.append("  ".join(cell.ljust(w) if n == 0 else cell.rjust(w)
                                     for n, (cell, w) in enumerate(zip(row, widths, strict=True))))
    return "\n".join(out).strip() + "\n"

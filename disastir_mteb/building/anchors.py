"""An organisation's own questions, each with the passage it was written from: the reference a build is checked by.

DisastIR checked its generated queries this way: an expert wrote a query from each of 48 passages, the model wrote
another, both were pooled and judged alike, and 30 models ranked by each agreed with Kendall's tau 0.93. A build
given ``--anchor-queries`` pools and judges these questions with its own and writes them as a second benchmark
beside it, for ``build-study`` to compare.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

from disastir_mteb.building.categories import folder_category
from disastir_mteb.util.errors import InvalidInput, MissingInput
from disastir_mteb.vocabulary.taxonomy import Category, Intent, parse_intent

__all__ = ["AnchorQuery", "read_anchors"]


@dataclass(frozen=True)
class AnchorQuery:
    """One question the organisation wrote, the passage it was written from, its intent and category."""

    query: str
    passage: str
    intent: Intent
    category: Category


def read_anchors(path: str | Path, *, one: Category | None = None) -> list[AnchorQuery]:
    """The questions of a JSONL or CSV file: ``query``, ``passage``, ``intent`` (default QA) and ``category``.

    A category is a category's or an event type's name; ``one`` is the category of rows without one.

    Raises:
        MissingInput: the file is missing.
        InvalidInput: a row without a query or passage, an unknown intent or category, or no row at all.
    """
    path = Path(path)
    if not path.is_file():
        raise MissingInput(f"--anchor-queries {path} is not a file; give a JSONL or CSV of query and passage.")
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".csv":
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
        where = [f"row {n}" for n in range(2, len(rows) + 2)]
    else:
        rows, where = [], []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise InvalidInput(f"{path} line {number} is not JSON ({error.msg}).") from None
                where.append(f"line {number}")
    anchors = []
    for row, place in zip(rows, where, strict=True):
        query, passage = (str(row.get(key) or "").strip() for key in ("query", "passage"))
        if not query or not passage:
            raise InvalidInput(f"{path} {place} needs a query and the passage it was written from.")
        try:
            intent = parse_intent(row.get("intent") or "QA")
            category = folder_category(row["category"]) if row.get("category") else one
        except ValueError as error:
            raise InvalidInput(f"{path} {place}: {error}") from None
        if category is None:
            raise InvalidInput(f"{path} {place} has no category; add one (a category or event type), or pass "
                               "--categories one:<category>.")
        anchors.append(AnchorQuery(query, passage, intent, category))
    if not anchors:
        raise InvalidInput(f"{path} holds no question; write one JSON object or CSV row per question.")
    return anchors

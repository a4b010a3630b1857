"""A DisastIR category for every passage of a build: from its folder's name, one for all, or its nearest event type.

DisastIR's categories came from the crawl: each PDF was found by one of 301 event types, each of one of the eight
UNDRR categories (``resources/event_types.json``). An organisation's folders play the crawl's part: a folder named
after a category (``Bio``, ``Geophysical``) or an event type (``Earthquake``, ``Flash flood``) gives it; or every
passage takes one category; or each passage takes the category of the event type whose description its vector is
nearest (any encoder: the runner's).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import cache

import numpy as np

from disastir_mteb.building.passages import Passage
from disastir_mteb.sample.text import resource
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import CATEGORY_FULL_NAMES, Category, parse_category

__all__ = ["CATEGORY_CHOICES", "categories_by_events", "categories_by_folder", "event_types", "folder_category"]

#: ``--categories``: ``folder`` (the default), ``events``, or one category for all (``one:MH``).
CATEGORY_CHOICES = ("folder", "events", "one:<category>")
#: Texts -> their unit vectors, one row each (any encoder).
Embed = Callable[[list[str]], np.ndarray]


@cache
def event_types() -> dict[str, tuple[Category, str]]:
    """The 301 event types DisastIR was crawled with: name -> (category, description)."""
    raw = json.loads(resource("event_types.json").read_text(encoding="utf-8"))
    return {name: (Category(category), description) for category, events in raw.items()
            for name, description in events.items()}


def _words(text: str) -> set[str]:
    return {word.rstrip("s") for word in re.findall(r"[a-z]+", text.casefold())}


def folder_category(name: str) -> Category:
    """The category a folder's name says: a category's name, an event type's, or words of event types mostly of one.

    Raises:
        ValueError: the name is neither, or its event types span several categories; the sentence lists the choices.
    """
    try:
        return parse_category(name)
    except ValueError:
        pass
    exact = {category for event, (category, _) in event_types().items()
             if event.split(" (")[0].casefold() == name.strip().casefold()}
    if len(exact) == 1:
        return exact.pop()
    wanted = _words(name)
    matched = Counter(category for event, (category, _) in event_types().items() if wanted and wanted <= _words(event))
    if matched:
        (most, count), total = matched.most_common(1)[0], sum(matched.values())
        if count >= 0.75 * total:  # "Flood": 11 flood types are MH, one ("Debris Flow / Lahar / Floods") Geo
            return most
    found = f"event types of {len(matched)} categories ({', '.join(sorted(c.value for c in matched))})" if matched \
        else "no category or event type"
    codes = ", ".join(category.value for category in Category)
    raise InvalidInput(f"The folder {name!r} names {found}; rename it to a category ({codes}, or a full name such as "
                       f"{CATEGORY_FULL_NAMES[Category.MH]!r}) or an event type such as 'Earthquake', or pass "
                       f"--categories events or --categories one:<category>.")


def categories_by_folder(passages: Sequence[Passage], *, one: Category | None = None) -> list[Category]:
    """Each passage's category from its folder (or ``one`` for all).

    Raises:
        ValueError: a passage outside any sub-folder without ``one``, or a folder :func:`folder_category` refuses.
    """
    if one is not None:
        return [one] * len(passages)
    loose = next((passage.source for passage in passages if passage.category is None), None)
    if loose is not None:
        raise InvalidInput(f"{loose} is not in a category folder; put each document in a sub-folder named after its "
                           f"category or event type, or pass --categories events or --categories one:<category>.")
    by_folder = {folder: folder_category(folder) for folder in sorted({p.category for p in passages})}
    return [by_folder[passage.category] for passage in passages]  # type: ignore[index]


def categories_by_events(vectors: np.ndarray, embed: Embed) -> list[Category]:
    """Each passage's category: that of the event type whose name and description are nearest to it.

    ``vectors`` holds the passages' unit vectors, one row each, as ``embed`` makes them.
    """
    events = list(event_types().items())
    anchors = embed([f"{name}: {description}" for name, (_, description) in events])
    nearest = np.argmax(vectors @ anchors.T, axis=1)
    return [events[int(row)][1][0] for row in nearest]

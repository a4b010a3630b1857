"""Personal details in an organisation's texts: e-mail addresses, phone numbers, URLs and @handles, counted or masked.

Situation reports and tweets hold them, and a build sends passages to a generation server; ``--redact`` masks
them before anything is sent. Patterns, not a model: no download, and the report counts what they found.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["PII_KINDS", "find_pii", "redact"]

#: Applied in this order, each to what the ones before left: a URL holds what looks like an address or a handle.
_PATTERNS: dict[str, re.Pattern[str]] = {
    "url": re.compile(r"\b(?:https?://|www\.)[^\s<>\"')\]]+", re.IGNORECASE),
    "email": re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}\b", re.IGNORECASE),
    "handle": re.compile(r"(?<![\w@])@\w{1,30}\b"),
    # an international number (+country code), or the North American shapes: (555) 123-4567, 555-123-4567,
    # 555.123.4567 and 123-4567; never a date (2023-04-15) or a run of years
    "phone": re.compile(r"(?<![\w+])(?:\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)|\d{1,4})(?:[\s.-]?\d{2,4}){2,4}"
                        r"|\(\d{3}\)\s?\d{3}[\s.-]\d{4}|\d{3}[.-]\d{3}[.-]\d{4}|\d{3}-\d{4})(?![\w-])"),
}
PII_KINDS = tuple(_PATTERNS)


def _is_phone(candidate: str) -> bool:
    return 7 <= sum(character.isdigit() for character in candidate) <= 15


def find_pii(text: str) -> Counter[str]:
    """How many of each kind ``text`` holds."""
    found: Counter[str] = Counter()
    redact(text, found)
    return found


def redact(text: str, found: Counter[str] | None = None) -> str:
    """``text`` with each detail replaced by its kind in brackets (``[EMAIL]``), counted into ``found`` if given."""
    for kind, pattern in _PATTERNS.items():
        def mask(match: re.Match[str], kind: str = kind) -> str:
            if kind == "phone" and not _is_phone(match.group()):
                return match.group()
            if found is not None:
                found[kind] += 1
            return f"[{kind.upper()}]"

        text = pattern.sub(mask, text)
    return text

"""``says``: an error sentence carries the facts a user acts on (the file, the option, the server, what to do).

Test code, not shipped: tests import it as ``from sentences import says`` (pytest puts ``tests/`` on ``sys.path``).
A test that compares a whole message copied from the code breaks when the wording gets better, and a wrong file
name inside a long copied regex can slip by; ``says`` checks the facts instead, each as a whole token, so a wrong
path, option, URL or number fails it: ``/out/a.json`` is not found in ``/out/a.json.tmp``, ``http://h:1`` not in
``http://h:1/v1``, ``--model`` not in ``--model-revision``, ``5`` not in ``0.5`` or ``15``. A compiled pattern is a
fact too, for a number the test cannot know (``re.compile(r"0\\.25\\d+")``).
"""

from __future__ import annotations

import re
from pathlib import Path

Fact = str | Path | int | float | re.Pattern[str]


def token(fact: str) -> re.Pattern[str]:
    """``fact`` as a whole token: not glued to a word, a longer path or URL, an option or a number around it."""
    before = r"(?<![\w.-])" if re.match(r"\w", fact) else ""
    after = r"(?![\w/-]|\.\w)" if re.search(r"\w$", fact) else ""
    return re.compile(before + re.escape(fact) + after)


def says(message: str, *facts: Fact) -> str:
    """Assert that ``message`` is one line, no traceback, and holds every fact; returns it for further checks."""
    assert "Traceback" not in message and len(message.strip().splitlines()) == 1, message
    missing = [fact for fact in facts
               if not (fact if isinstance(fact, re.Pattern) else token(str(fact))).search(message)]
    assert not missing, f"{message!r} does not say {missing}"
    return message

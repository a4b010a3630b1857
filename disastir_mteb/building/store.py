"""The build store: every answer a generation server gave during a build, in one SQLite file beside the benchmark.

Each answer is committed as it arrives, keyed by its request (:class:`~disastir_mteb.building.prompts.Ask`), so a
build killed at any moment asks nothing twice when run again. The build's judge keeps its answers in the same file
(:class:`~disastir_mteb.judging.store.JudgementStore` opens it too): one file to keep, copy or delete.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from disastir_mteb.util.sqlite_store import SqliteStore

__all__ = ["BuildStore", "StoredAnswer"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS build_answers (
    key TEXT NOT NULL, attempt INTEGER NOT NULL, stage TEXT NOT NULL, raw TEXT, value TEXT, fault TEXT,
    server TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, logprob REAL, at REAL NOT NULL,
    PRIMARY KEY (key, attempt));
"""


@dataclass(frozen=True)
class StoredAnswer:
    """What the store holds for one request: its readable value (None if none yet) and the tries it took."""

    value: Any
    attempts: int
    faults: tuple[str, ...]
    prompt_tokens: int
    completion_tokens: int
    logprob: float | None
    raws: tuple[str | None, ...] = ()  # every try's text as it came, so an output file read twice adds nothing


class BuildStore(SqliteStore):
    """One build store, opened for reading and writing (created when absent).

    Raises:
        ValueError: the file is another program's database, or a build store of another format.
        StoreLockedError: another process held it locked for ``timeout`` seconds.
    """

    KIND = "build store"
    JOB = "build"
    SCHEMA = _SCHEMA
    TABLES = frozenset({"meta", "build_answers"})
    FORMAT_KEY = "build_format"

    def __enter__(self) -> BuildStore:
        return self

    def answers(self, keys: Iterable[str]) -> dict[str, StoredAnswer]:
        """What the store holds for each of ``keys`` that has any try."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, list[Any]] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._rows(f"SELECT key, attempt, value, fault, prompt_tokens, completion_tokens, logprob, raw "
                                  f"FROM build_answers WHERE key IN ({marks}) ORDER BY key, attempt", chunk):
                found.setdefault(row[0], []).append(row)
        return {key: _stored(rows) for key, rows in found.items()}

    def record(self, key: str, stage: str, *, raw: str | None, value: Any = None, fault: str | None = None,
               server: str | None = None, tokens: tuple[int | None, int | None] = (None, None),
               logprob: float | None = None) -> None:
        """One try's answer, committed at once: its value when readable, else why it is not (``fault``)."""
        with self._transaction():
            (attempt,) = self._db.execute("SELECT COUNT(*) FROM build_answers WHERE key = ?", (key,)).fetchone()
            self._db.execute("INSERT INTO build_answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (key, attempt + 1, stage, raw, None if value is None else json.dumps(value), fault,
                              server, tokens[0], tokens[1], logprob, time.time()))

    def counts(self) -> dict[str, dict[str, int]]:
        """Per stage: requests answered readably, requests given up, tries, and tokens in and out."""
        rows = self._rows("SELECT stage, key, MAX(value IS NOT NULL), COUNT(*), SUM(COALESCE(prompt_tokens, 0)), "
                          "SUM(COALESCE(completion_tokens, 0)) FROM build_answers GROUP BY stage, key")
        counts: dict[str, dict[str, int]] = {}
        for stage, _, readable, tries, tokens_in, tokens_out in rows:
            stage_counts = counts.setdefault(stage, dict.fromkeys(
                ("readable", "unreadable", "tries", "prompt_tokens", "completion_tokens"), 0))
            stage_counts["readable" if readable else "unreadable"] += 1
            stage_counts["tries"] += tries
            stage_counts["prompt_tokens"] += tokens_in
            stage_counts["completion_tokens"] += tokens_out
        return counts


def _stored(rows: list[Any]) -> StoredAnswer:
    readable = next((row for row in rows if row[2] is not None), None)
    return StoredAnswer(json.loads(readable[2]) if readable else None, len(rows),
                        tuple(row[3] for row in rows if row[3] is not None),
                        sum(row[4] or 0 for row in rows), sum(row[5] or 0 for row in rows),
                        readable[6] if readable else None, tuple(row[7] for row in rows))

"""A store of paid-for answers in one SQLite file (WAL): opened safely, written one transaction at a time, errors named.

What the judgement store and the build store share: each answer is committed as it arrives, so a killed job loses
nothing; another program's database is refused before anything is written into it; a lock held by another program
or a failing disk is one sentence naming the file. One file may hold several stores' tables (a build keeps its
judge's answers beside its own).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from disastir_mteb.util.errors import DisastirError, InvalidInput

__all__ = ["SqliteStore", "StoreLockedError"]


class StoreLockedError(DisastirError, OSError):
    """The store stayed locked by another process for the whole wait: one sentence naming the file."""


class SqliteStore:
    """One store's tables in an SQLite file, opened for reading and writing (created when absent).

    A subclass names itself (``KIND``, "judgement store"), its jobs (``JOB``, "judging job"), its ``SCHEMA``, the
    ``TABLES`` that make a file one of its stores, its ``FORMAT`` in the ``meta`` table under ``FORMAT_KEY``, and the
    ``ADDED_COLUMNS`` an older store gets on opening. ``timeout`` is how long to wait for another process's lock: a
    job holds one for milliseconds, so a lock held longer is another program's, which more waiting does not end.

    Raises:
        ValueError: the file is not such a store (damaged, not SQLite, another program's database) or one of another
            format; nothing is written to it.
        StoreLockedError: another process held it locked for ``timeout`` seconds.
    """

    KIND = "store"
    JOB = "job"
    SCHEMA = ""
    TABLES: frozenset[str] = frozenset()
    FORMAT = 1
    FORMAT_KEY = "format"
    ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = ()

    def __init__(self, path: str | Path, *, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
            with self._named_errors(opening=True):
                self._check_is_a_store()
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.executescript(self.SCHEMA)
                for table, column, kind in self.ADDED_COLUMNS:
                    have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
                    if column not in have:
                        self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                found = self._db.execute("SELECT value FROM meta WHERE key = ?", (self.FORMAT_KEY,)).fetchone()
                if found is None:
                    self._db.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (self.FORMAT_KEY, str(self.FORMAT)))
                elif found[0] != str(self.FORMAT):
                    raise InvalidInput(f"{self.path} is a {self.KIND} of format {found[0]}; this version reads "
                                       f"format {self.FORMAT}.")
        except BaseException:
            if hasattr(self, "_db"):
                self._db.close()
            raise

    def _check_is_a_store(self) -> None:
        """Refuse another program's database before anything is written into it (WAL mode included).

        A file is this store when it holds ``TABLES`` and the format key, or when it holds only other stores' tables
        of this package (their ``meta`` table with no key of this store): those get this store's tables beside theirs.
        """
        tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            return  # a new store (an empty file included)
        if "meta" in tables:
            keys = {row[0] for row in self._db.execute("SELECT key FROM meta")}
            if self.TABLES <= tables and self.FORMAT_KEY in keys:
                return
            if self.FORMAT_KEY not in keys and any(key.endswith("format") for key in keys):
                return  # another store of this package: this one's tables go beside its own
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise InvalidInput(f"{self.path} is an SQLite database of something else (its tables: {shown}), not a "
                           f"{self.KIND}; nothing was written to it: name another file with --store.")

    @contextlib.contextmanager
    def _named_errors(self, *, opening: bool = False) -> Iterator[None]:
        """SQLite's errors as one sentence naming the file: locked by another process, not a store, or failing."""
        try:
            yield
        except sqlite3.DatabaseError as error:
            if getattr(error, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or (
                    isinstance(error, sqlite3.OperationalError) and "locked" in str(error)):
                raise StoreLockedError(
                    f"{self.path} is locked by another process: SQLite waited {self.timeout:g} s for it ({error}), "
                    f"longer than any write of a {self.JOB} takes, so another program holds it (a database browser "
                    "with unsaved changes, a process in exclusive locking mode); close it and run the same command "
                    "again (answers already received are kept).") from None
            if opening:
                raise InvalidInput(f"{self.path} is not a {self.KIND} (SQLite says: {error}).") from None
            raise InvalidInput(f"{self.path}: SQLite failed ({error}); answers received before are kept: check the "
                               "disk and the file, then run the same command again.") from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``: one writer at a time, waiting (busy timeout) for another job's write."""
        with self._named_errors():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back already (a full disk)
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[Any]:
        """Every row of one query, read at once (so that a lock or damage is met here, named)."""
        with self._named_errors():
            return self._db.execute(sql, tuple(args)).fetchall()

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""The judgement store: every answer a judge gave and every grade made from them, in one SQLite file (WAL).

Judging costs money and hours, so nothing is asked twice and nothing is lost: every raw answer is committed as it
arrives, a killed job resumes where it stopped, and two jobs share one store by claiming the pairs they work on.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disastir_mteb.judging.grade_probabilities import GradeDistribution
from disastir_mteb.judging.protocol import MAX_ANSWER_ATTEMPTS, PROMPT_VERSION, pair_key
from disastir_mteb.util.cache_dir import cache_root
from disastir_mteb.util.sqlite_store import SqliteStore, StoreLockedError
from disastir_mteb.vocabulary.taxonomy import Intent, parse_intent

__all__ = ["CLAIM_LEASE", "FORMAT", "JUDGEMENT_STORE_NAME", "MAX_RAW_CHARS", "Judgement", "JudgementStore", "Pair",
           "StepState", "StoreLockedError", "StoredAgreement", "default_store_path"]

#: The store's format, in its ``meta`` table.
FORMAT = 1
#: The store's file name in the cache folder, where it goes unless the user names one.
JUDGEMENT_STORE_NAME = "judgements.sqlite"
#: Seconds after which another machine's unrenewed claim lapses (a job renews its claims more often).
CLAIM_LEASE = 600.0
#: The longest raw answer kept whole, in characters (a readable one is a few dozen).
MAX_RAW_CHARS = 10_000
#: The tables of a judgement store (``claims`` and ``agreements`` came later, and are added to an older store when it
#: is opened): a database without the others is something else.
_TABLES = frozenset({"meta", "pairs", "answers", "judgements", "claims", "agreements", "formats"})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pairs (
    pair TEXT PRIMARY KEY, intent TEXT NOT NULL, query TEXT NOT NULL, passage TEXT NOT NULL,
    judge_model TEXT NOT NULL, prompt_version TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS answers (
    pair TEXT NOT NULL REFERENCES pairs(pair), step TEXT NOT NULL, attempt INTEGER NOT NULL,
    raw TEXT, value TEXT, fault TEXT, detail TEXT, server TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
    at REAL NOT NULL, distribution TEXT, PRIMARY KEY (pair, step, attempt));
CREATE TABLE IF NOT EXISTS judgements (
    pair TEXT PRIMARY KEY REFERENCES pairs(pair), status TEXT NOT NULL, grade REAL, votes TEXT NOT NULL,
    rounds INTEGER NOT NULL DEFAULT 1, at REAL NOT NULL, expected REAL, p_relevant REAL, distribution TEXT);
CREATE TABLE IF NOT EXISTS claims (
    pair TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS agreements (
    judge_model TEXT NOT NULL, prompt_version TEXT NOT NULL, asked INTEGER NOT NULL, ungraded INTEGER NOT NULL,
    binary_kappa REAL, weighted_kappa REAL, intents TEXT NOT NULL, at REAL NOT NULL, calibration TEXT);
CREATE TABLE IF NOT EXISTS formats (
    server TEXT NOT NULL, judge_model TEXT NOT NULL, answer_format TEXT NOT NULL, logprobs INTEGER NOT NULL,
    at REAL NOT NULL, PRIMARY KEY (server, judge_model));
"""
#: Columns added after the tables first shipped: (table, column, type), added to a store that lacks them on opening
#: (its answers and grades stay; what they lack is None).
_ADDED_COLUMNS = (("answers", "distribution", "TEXT"), ("judgements", "expected", "REAL"),
                  ("judgements", "p_relevant", "REAL"), ("judgements", "distribution", "TEXT"),
                  ("agreements", "calibration", "TEXT"))


def default_store_path() -> Path:
    """``<cache folder>/judgements.sqlite``: one store for every study on this machine, so no pair is paid twice."""
    return cache_root() / JUDGEMENT_STORE_NAME


@dataclass(frozen=True)
class Pair:
    """One (query, passage) pair to be judged by one judge model under one prompt version."""

    intent: Intent
    query: str
    passage: str
    judge_model: str
    prompt_version: str = PROMPT_VERSION

    @property
    def key(self) -> str:
        """The pair's key in the store."""
        return pair_key(self.intent, self.query, self.passage, self.judge_model, self.prompt_version)


@dataclass(frozen=True)
class Judgement:
    """A pair's grade as stored (None when ``failed``), with its expected grade and P(relevant) where known."""

    intent: Intent
    query: str
    passage: str
    judge_model: str
    prompt_version: str
    status: str
    grade: float | None
    votes: Mapping[str, Any]
    expected: float | None = None
    p_relevant: float | None = None


@dataclass(frozen=True)
class StepState:
    """What the store holds for one pair: answered steps (None once given up), faulty tries, grade probabilities."""

    answers: Mapping[str, Any]
    attempts: Mapping[str, int]
    distributions: Mapping[str, Mapping[Any, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class StoredAgreement:
    """One agreement measurement of a judge (``judge --agreement N``), as stored.

    ``binary`` and ``weighted`` are the mean kappas over intents (None: undefined); ``ungraded`` of the ``asked`` pairs
    got no readable answer; ``at`` is in seconds since the epoch.
    """

    judge_model: str
    prompt_version: str
    asked: int
    ungraded: int
    binary: float | None
    weighted: float | None
    intents: Mapping[str, Any]
    at: float
    calibration: Mapping[str, Any] | None = None


class JudgementStore(SqliteStore):
    """One SQLite judgement store, opened for reading and writing (created when absent).

    ``timeout`` is how long to wait for another process's lock: a judging job holds one for milliseconds, so a lock
    held longer is another program's (a database browser, say), which more waiting does not end.

    Raises:
        ValueError: the file is not a judgement store (damaged, not SQLite, another program's database) or one
            of another format; nothing is written to it.
        StoreLockedError: another process held it locked for ``timeout`` seconds.
    """

    KIND = "judgement store"
    JOB = "judging job"
    SCHEMA = _SCHEMA
    TABLES = _TABLES - {"claims", "agreements", "formats"}  # an early store without these gets them
    FORMAT = FORMAT
    ADDED_COLUMNS = _ADDED_COLUMNS

    def __init__(self, path: str | Path, *, timeout: float = 60.0) -> None:
        super().__init__(path, timeout=timeout)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{time.time():.6f}"

    def __enter__(self) -> JudgementStore:
        return self

    # ----------------------------------------------------------------- reading

    def judged(self, keys: Iterable[str]) -> set[str]:
        """The keys among ``keys`` that have a grade (status ``judged``)."""
        wanted = list(keys)
        found: set[str] = set()
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(row[0] for row in self._rows(
                f"SELECT pair FROM judgements WHERE status = 'judged' AND pair IN ({marks})", chunk))
        return found

    def state(self, key: str) -> StepState:
        """One pair's steps: each readable value (None once given up on this run), and this run's faulty tries.

        A pair that ended ``failed`` gets :data:`MAX_ANSWER_ATTEMPTS` tries per step again on the next run.
        """
        rounds_row = next(iter(self._rows("SELECT rounds, status FROM judgements WHERE pair = ?", (key,))), None)
        earlier = MAX_ANSWER_ATTEMPTS * rounds_row[0] if rounds_row and rounds_row[1] == "failed" else 0
        answers: dict[str, Any] = {}
        attempts: dict[str, int] = {}
        distributions: dict[str, dict[Any, float]] = {}
        for step, value, fault, distribution in self._rows(
                "SELECT step, value, fault, distribution FROM answers WHERE pair = ? ORDER BY attempt", (key,)):
            if fault is None:
                answers[step] = json.loads(value)
                if distribution is not None:
                    distributions[step] = dict(json.loads(distribution))  # [[value, p], ...]: values keep their type
            else:
                attempts[step] = attempts.get(step, 0) + 1
        attempts = {step: max(0, count - earlier) for step, count in attempts.items()}  # this run's
        for step, count in attempts.items():
            if step not in answers and count >= MAX_ANSWER_ATTEMPTS:
                answers[step] = None
        return StepState(answers, attempts, distributions)

    def judgements(self, *, judge_model: str | None = None, prompt_version: str | None = None,
                   status: str = "judged") -> Iterator[Judgement]:
        """Every stored judgement of ``status``, optionally of one judge model and prompt version."""
        sql = ("SELECT p.intent, p.query, p.passage, p.judge_model, p.prompt_version, j.status, j.grade, j.votes, "
               "j.expected, j.p_relevant FROM judgements j JOIN pairs p ON p.pair = j.pair WHERE j.status = ?")
        args: list[Any] = [status]
        if judge_model is not None:
            sql += " AND p.judge_model = ?"
            args.append(judge_model)
        if prompt_version is not None:
            sql += " AND p.prompt_version = ?"
            args.append(prompt_version)
        for intent, query, passage, model, version, state, grade, votes, expected, p_relevant in self._rows(
                sql + " ORDER BY j.rowid", args):
            yield Judgement(parse_intent(intent), query, passage, model, version, state, grade, json.loads(votes),
                            expected, p_relevant)

    def counts(self) -> dict[str, int]:
        """Totals: pairs judged and failed, answers, and unreadable answers by fault."""
        result = {"judged": 0, "failed": 0}
        for status, n in self._rows("SELECT status, COUNT(*) FROM judgements GROUP BY status"):
            result[status] = n
        result["answers"] = self._rows("SELECT COUNT(*) FROM answers")[0][0]
        for fault in ("unparseable", "out_of_range"):
            result[fault] = self._rows("SELECT COUNT(*) FROM answers WHERE fault = ?", (fault,))[0][0]
        return result

    def tokens(self) -> tuple[int, int]:
        """Prompt and answer tokens of every answer stored, as the servers counted them (0 where they did not)."""
        ((prompt, completion),) = self._rows("SELECT COALESCE(SUM(prompt_tokens), 0), "
                                             "COALESCE(SUM(completion_tokens), 0) FROM answers")
        return int(prompt), int(completion)

    def agreement(self, judge_model: str, prompt_version: str) -> StoredAgreement | None:
        """The latest agreement measured for one judge model and prompt version; None when never measured here."""
        rows = self._rows("SELECT asked, ungraded, binary_kappa, weighted_kappa, intents, at, calibration FROM "
                          "agreements WHERE judge_model = ? AND prompt_version = ? "
                          "ORDER BY at DESC, rowid DESC LIMIT 1",
                          (judge_model, prompt_version))
        if not rows:
            return None
        asked, ungraded, binary, weighted, intents, at, calibration = rows[0]
        return StoredAgreement(judge_model, prompt_version, asked, ungraded, binary, weighted, json.loads(intents), at,
                               None if calibration is None else json.loads(calibration))

    def raw_answers(self, key: str) -> list[dict[str, Any]]:
        """Every answer stored for one pair, in order: step, attempt, raw reply, value or fault, server."""
        rows = self._rows("SELECT step, attempt, raw, value, fault, detail, server FROM answers WHERE pair = ? "
                          "ORDER BY at, step, attempt", (key,))
        return [{"step": s, "attempt": a, "raw": r, "value": None if v is None else json.loads(v), "fault": f,
                 "detail": d, "server": srv} for s, a, r, v, f, d, srv in rows]

    # ----------------------------------------------------------------- writing

    def add_pairs(self, pairs: Iterable[Pair]) -> None:
        """Record pairs (their texts) so that answers can refer to them; known pairs are left as they are."""
        rows = [(p.key, p.intent.value, p.query, p.passage, p.judge_model, p.prompt_version) for p in pairs]
        with self._transaction():
            self._db.executemany("INSERT OR IGNORE INTO pairs VALUES (?, ?, ?, ?, ?, ?)", rows)

    def record_answer(self, key: str, step: str, *, raw: str | None, value: Any = None, fault: str | None = None,
                      detail: str | None = None, server: str | None = None, prompt_tokens: int | None = None,
                      completion_tokens: int | None = None,
                      distribution: Mapping[Any, float] | None = None) -> None:
        """Keep one answer, committed at once: its raw reply (cut at :data:`MAX_RAW_CHARS`), the value or the fault."""
        if raw is not None and len(raw) > MAX_RAW_CHARS:
            raw = f"{raw[:MAX_RAW_CHARS]}... [{len(raw):,} characters in all; the rest was not kept]"
        with self._transaction():
            attempt = self._db.execute("SELECT COALESCE(MAX(attempt), 0) + 1 FROM answers WHERE pair = ? AND step = ?",
                                       (key, step)).fetchone()[0]
            self._db.execute("INSERT INTO answers (pair, step, attempt, raw, value, fault, detail, server, "
                             "prompt_tokens, completion_tokens, at, distribution) VALUES "
                             "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (key, step, attempt, raw, None if fault else json.dumps(value), fault, detail, server,
                              prompt_tokens, completion_tokens, time.time(),
                              None if distribution is None else json.dumps(
                                  [[value, round(p, 6)] for value, p in distribution.items()])))

    def record_judgement(self, key: str, grade: float | None, votes: Mapping[str, Any],
                         distribution: GradeDistribution | None = None) -> None:
        """Keep a complete pair's grade (``failed`` when None), its grade probabilities if any; release its claim."""
        status = "judged" if grade is not None else "failed"
        expected = p_relevant = shown = None
        if distribution is not None:
            expected, p_relevant = distribution.expected, distribution.p_relevant
            shown = json.dumps(distribution.record())
        with self._transaction():
            self._db.execute(
                "INSERT INTO judgements (pair, status, grade, votes, rounds, at, expected, p_relevant, distribution) "
                "VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?) ON CONFLICT(pair) DO UPDATE SET status = excluded.status, "
                "grade = excluded.grade, votes = excluded.votes, rounds = judgements.rounds + 1, at = excluded.at, "
                "expected = excluded.expected, p_relevant = excluded.p_relevant, distribution = excluded.distribution",
                (key, status, grade, json.dumps(votes, sort_keys=True), time.time(), expected, p_relevant, shown))
            self._db.execute("DELETE FROM claims WHERE pair = ? AND owner = ?", (key, self.owner))

    def record_agreement(self, judge_model: str, prompt_version: str, *, asked: int, ungraded: int,
                         binary: float | None, weighted: float | None, intents: Mapping[str, Any],
                         calibration: Mapping[str, Any] | None = None) -> None:
        """Keep one agreement measurement (committed at once); earlier ones stay, the latest is read."""
        with self._transaction():
            self._db.execute("INSERT INTO agreements (judge_model, prompt_version, asked, ungraded, binary_kappa, "
                             "weighted_kappa, intents, at, calibration) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (judge_model, prompt_version, asked, ungraded, binary, weighted,
                              json.dumps(dict(intents), sort_keys=True), time.time(),
                              None if calibration is None else json.dumps(dict(calibration), sort_keys=True)))

    def learned_format(self, server: str, judge_model: str) -> tuple[str, bool] | None:
        """The answer format (and whether it gives logprobs) a job learned for this server and judge model, or None."""
        rows = self._rows("SELECT answer_format, logprobs FROM formats WHERE server = ? AND judge_model = ?",
                          (server, judge_model))
        return (rows[0][0], bool(rows[0][1])) if rows else None

    def record_format(self, server: str, judge_model: str, answer_format: str, *, logprobs: bool) -> None:
        """Keep what a job learned of a server: the next job against it and this judge model starts there."""
        with self._transaction():
            self._db.execute("INSERT OR REPLACE INTO formats VALUES (?, ?, ?, ?, ?)",
                             (server, judge_model, answer_format, int(logprobs), time.time()))

    # ----------------------------------------------------------------- claims

    def claim(self, keys: Iterable[str]) -> list[str]:
        """Claim the pairs no live job holds; returns those now this job's (in the order given)."""
        host, pid, now = socket.gethostname(), os.getpid(), time.time()
        mine = []
        with self._transaction():
            for key in keys:
                held = self._db.execute("SELECT owner, host, pid, at FROM claims WHERE pair = ?", (key,)).fetchone()
                if held is not None and held[0] != self.owner and not _lapsed(held[1], held[2], held[3], now):
                    continue
                self._db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?)",
                                 (key, self.owner, host, pid, now))
                mine.append(key)
        return mine

    def renew_claims(self) -> None:
        """Renew this job's claims (a long job calls it well within :data:`CLAIM_LEASE`)."""
        with self._transaction():
            self._db.execute("UPDATE claims SET at = ? WHERE owner = ?", (time.time(), self.owner))

    def release_claims(self) -> None:
        """Give up every claim of this job (at its end, judged or not)."""
        with self._transaction():
            self._db.execute("DELETE FROM claims WHERE owner = ?", (self.owner,))


def _lapsed(host: str, pid: int, at: float, now: float) -> bool:
    if now - at > CLAIM_LEASE:
        return True
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False

"""The judge's edges (issue 29): what hostile or broken servers, Batch files and stores end in.

Each case is a row of ``docs/faults/judge.md``. The servers are real
(:class:`~loopback.LoopbackServer` on 127.0.0.1 and its scripted faults), talked to by
the real ``openai`` client through the pool; Batch output files are written from a loopback server's real
answers, then damaged; stores are real SQLite files, locked by a real second process. No test waits long: the
waits are shortened through the documented variables (``DISASTIR_LONGEST_WAIT``,
``DISASTIR_RATE_LIMIT_PATIENCE``) or :class:`~disastir_mteb.endpoints.pool.EndpointLimits`, and their defaults
are pinned here.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from judge_servers import JUDGE_MODEL as MODEL
from judge_servers import expected, grades_in, judge_of
from loopback import Fault, FaultKind, LoopbackServer
from sentences import says

from disastir_mteb import cli
from disastir_mteb.endpoints.pool import (
    LONGEST_WAIT_ENV,
    RATE_LIMIT_PATIENCE_ENV,
    REDACTED,
    EndpointError,
    EndpointLimits,
    EndpointPool,
    asked_wait,
)
from disastir_mteb.judging.batch import read_batch_results, write_batch_requests
from disastir_mteb.judging.job import judge_pairs
from disastir_mteb.judging.store import MAX_RAW_CHARS, JudgementStore, Pair, StoreLockedError
from disastir_mteb.vocabulary.taxonomy import Intent

TASK = "DisastIR-STS-Geo"  # one request per pair: the cheapest holes to judge
SECRET = "sk-test-" + "0123456789abcdef" * 3




@pytest.fixture(scope="module")
def runs(hashing_runs: Callable[..., Path]) -> Path:
    return hashing_runs(TASK)








def judge(runs: Path, urls: list[str], store: Path, *extra: str) -> int:
    argv = ["judge", str(runs), "--model", MODEL, "--store", str(store), "--yes", "-t", TASK]
    for url in urls:
        argv += ["--base-url", url]
    return cli.main([*argv, *extra])


def one_sentence(stderr: str) -> str:
    """What a command run with ``--quiet`` printed on standard error: exactly one line, its error."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("disastir-mteb judge: "), stderr
    return lines[0]


def few_pairs(n: int = 3) -> list[Pair]:
    return [Pair(Intent.STS, f"query number {i}", f"passage number {i}", MODEL) for i in range(n)]


def four(request: dict[str, Any]) -> str:
    """A judge answering 4 to every STS pair."""
    return '{"final_similarity_score": 4}'


def pool_of(*servers: LoopbackServer, **options: Any) -> EndpointPool[Any, Any]:
    return EndpointPool([server.base_url for server in servers], **{"concurrency": 1, **options})


def store_bytes(store: Path) -> bytes:
    """The store file and its write-ahead log, as they lie on disk."""
    return b"".join(path.read_bytes() for path in sorted(store.parent.glob(store.name + "*")))


# ---------------------------------------------------------------------- the defaults


def test_the_waits_and_sizes_default_to_the_documented_values(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Each default the docs state is the code's: the docs' sentence and the value, read from both."""
    import re

    from disastir_mteb.judging.settings import JudgeSettings

    docs = Path(__file__).parents[1] / "docs"
    environment, judge_page = ((docs / name).read_text(encoding="utf-8") for name in ("environment.md", "judge.md"))

    def documented(text: str, pattern: str) -> float:
        found = re.search(pattern, text, flags=re.S)
        assert found, pattern
        return float(found.group(1).replace(",", ""))

    monkeypatch.delenv(LONGEST_WAIT_ENV, raising=False)
    monkeypatch.delenv(RATE_LIMIT_PATIENCE_ENV, raising=False)
    limits = EndpointLimits.from_environment()
    assert limits == EndpointLimits()
    row = r"` \|[^|]*\(default (\d+)\)"  # the variable's row in the table, up to its default
    assert limits.longest_wait == documented(environment, f"`{LONGEST_WAIT_ENV}{row}")
    assert limits.rate_limit_patience == documented(environment, f"`{RATE_LIMIT_PATIENCE_ENV}{row}")
    assert limits.longest_wait == documented(judge_page, r"but never more than (\d+) s at a time")
    assert JudgeSettings.concurrency == documented(
        judge_page, r"`--concurrency` requests in flight each \(default (\d+)")
    assert JudgeSettings.confirm_above == documented(judge_page, r"Above `--confirm-above` requests \(default ([\d,]+)")
    # and the command line's defaults are those settings: `judge` without options judges as JudgeSettings says
    options = cli.build_parser().parse_args(["judge", str(tmp_path), "--model", MODEL])
    assert JudgeSettings.from_options(options) == JudgeSettings(judge_model=MODEL)
    monkeypatch.setenv(LONGEST_WAIT_ENV, "2.5")
    monkeypatch.setenv(RATE_LIMIT_PATIENCE_ENV, "30")
    assert EndpointLimits.from_environment() == EndpointLimits(longest_wait=2.5, rate_limit_patience=30.0)
    for wrong in ("soon", "-1", "0", "inf"):
        monkeypatch.setenv(LONGEST_WAIT_ENV, wrong)
        with pytest.raises(ValueError) as refused:
            EndpointLimits.from_environment()
        says(str(refused.value), LONGEST_WAIT_ENV, f"'{wrong}'", "seconds")


# ---------------------------------------------------------------------- 429: waits capped, shown, bounded


def test_a_server_answering_only_429_is_given_up_in_one_sentence_after_the_patience(
        runs: Path, holes: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's retries, then the pool's, until the patience is spent (before: 50 waits per request, 15-25 min).

    ``retry-after-ms: 200`` keeps the client's waits short here; without it they are its backoff's.
    """
    monkeypatch.setenv(RATE_LIMIT_PATIENCE_ENV, "1.5")
    with LoopbackServer(answer=judge_of(holes)) as server:
        server.fail_all(Fault(FaultKind.RATE_LIMIT, retry_after=None, headers={"retry-after-ms": "200"}))
        assert judge(runs, [server.base_url], tmp_path / "j.sqlite", "--quiet") == 2
        asked, url = server.stats().requests["/v1/chat/completions"], server.base_url
    sentence = one_sentence(capsys.readouterr().err)
    found = re.search(r"\((\d+) rate-limited\).* for (\d+) s \((\d+) times in all\)", sentence)
    assert found is not None, sentence
    # the server, what it answered and for how long, what to do, and where the answers received are kept
    says(sentence, url, "0 answered", "429", "concurrency", tmp_path / "j.sqlite")
    assert found[1] == found[3] and 0 < int(found[1]) <= asked and 1.5 <= int(found[2]) + 0.5 < 5
    assert asked < 8 * 20  # a few tries per worker (8 workers), each after the wait asked, not a flood


def test_a_rate_limited_server_given_up_leaves_its_work_to_the_others(tmp_path: Path) -> None:
    pairs = few_pairs(6)
    with LoopbackServer(answer=four) as good, LoopbackServer(answer=four) as limited, \
            JudgementStore(tmp_path / "j.sqlite") as store:
        limited.fail_all(Fault(FaultKind.RATE_LIMIT, retry_after=0.2))
        good.set_latency(0.05)
        pool = pool_of(good, limited, limits=EndpointLimits(rate_limit_patience=1.0))
        summary = judge_pairs(pairs, store, pool, judge_model=MODEL)
        assert len(limited.stats().answered) == 0
    assert summary.judged == len(pairs) and not summary.failed
    assert pool.servers[0].alive and not pool.servers[1].alive
    says(pool.servers[1].last_error, "429", "1 s")


def test_retry_after_is_capped_and_the_capped_wait_is_shown_on_the_progress_line(
        runs: Path, holes: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Retry-After: 100000`` (27 hours) is waited 0.5 s here (the cap, 120 s by default), and said so.

    On a terminal the progress line says it while it lasts; into a log (here: no terminal) one warning does.
    """
    monkeypatch.setenv(LONGEST_WAIT_ENV, "0.5")
    with LoopbackServer(answer=judge_of(holes)) as server, caplog.at_level(logging.WARNING):
        server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=100000))
        url = server.base_url
        assert judge(runs, [url], tmp_path / "j.sqlite") == 0
    progress = capsys.readouterr().err + "\n".join(record.getMessage() for record in caplog.records)
    says(next(line for line in progress.splitlines() if "100,000 s" in line), url, "429", "100,000 s",
         "capped at 0.5 s", "waiting 0.5 s")
    assert grades_in(tmp_path / "j.sqlite") == expected(holes)

    with LoopbackServer(answer=four) as server, JudgementStore(tmp_path / "p.sqlite") as store:
        server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=100000))
        pool = pool_of(server, limits=EndpointLimits(longest_wait=0.25))
        shown: list[str] = []
        pool.on_wait = shown.append
        judge_pairs(few_pairs(), store, pool, judge_model=MODEL)
    assert pool.servers[0].waits == [0.25]  # what was waited, not what was asked
    assert shown == [f"{pool.servers[0].url}: 429 (rate limited): it asked for 100,000 s, capped at 0.25 s, "
                     "waiting 0.25 s", ""]  # and the line cleared after it


def test_without_a_progress_line_the_first_long_wait_is_a_warning(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    with LoopbackServer(answer=four) as server, JudgementStore(tmp_path / "j.sqlite") as store, \
            caplog.at_level(logging.WARNING, logger="disastir_mteb.endpoints.pool"):
        server.add_faults(*[Fault(FaultKind.RATE_LIMIT, retry_after=50)] * 2)
        url = server.base_url
        judge_pairs(few_pairs(), store, pool_of(server, limits=EndpointLimits(longest_wait=0.1)), judge_model=MODEL)
    assert [record.getMessage() for record in caplog.records] == [
        f"{url}: 429 (rate limited): it asked for 50 s, capped at 0.1 s, waiting 0.1 s"]


HEADERS = [({"Retry-After": "-5"}, None), ({"Retry-After": "soon"}, None), ({"Retry-After": "inf"}, None),
           ({"Retry-After": "NaN"}, None), ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),
           ({"retry-after-ms": "-3000"}, None), ({"retry-after-ms": "-3000", "Retry-After": "0.3"}, None),
           ({"retry-after-ms": "250"}, 0.25), ({"Retry-After": "0.3"}, 0.3)]


@pytest.mark.parametrize(("headers", "asked"), HEADERS, ids=[json.dumps(h) for h, _ in HEADERS])
def test_a_retry_after_that_does_not_read_as_a_wait_falls_back_to_the_backoff(headers: dict[str, str],
                                                                              asked: float | None,
                                                                              tmp_path: Path) -> None:
    """Negative, not a number, infinite, a date or a ``retry-after-ms`` in the past (before: "soon" was a crash).

    Read as the openai client reads it (a negative ``retry-after-ms`` hides the ``Retry-After`` beside it), and
    waited by the client: what was asked, else its backoff's first step (0.5 s, less up to a quarter of it).
    """
    with LoopbackServer(answer=four) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=None, headers=headers))
        with pytest.raises(openai.RateLimitError) as refused:
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
        assert asked_wait(refused.value.response.headers) == asked
        server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=None, headers=headers))
        pool = pool_of(server)
        summary = judge_pairs(few_pairs(), store, pool, judge_model=MODEL)
        stats = server.stats()
    assert summary.judged == 3 and pool.servers[0].rate_limited == 1 and pool.servers[0].retried == 1
    event = stats.fault_log[-1]
    retry = next(request for request in stats.answered if request.answered_at > event.sent_at)
    assert retry.answered_at - event.sent_at >= (asked if asked is not None else 0.375)


def test_a_429_for_a_used_up_quota_stops_at_once(tmp_path: Path) -> None:
    with LoopbackServer(answer=four) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        server.fail_all(Fault(FaultKind.QUOTA))
        url = server.base_url
        with pytest.raises(EndpointError) as stopped:
            judge_pairs(few_pairs(), store, pool_of(server), judge_model=MODEL)
        assert server.stats().requests["/v1/chat/completions"] == 1
    says(str(stopped.value), url, "HTTP 429", "You exceeded your current quota", "quota is used up",
         "waiting does not mend", "plan and billing", "another server")


# ---------------------------------------------------------------------- the key


def test_a_key_a_server_echoes_is_never_printed_logged_or_stored(
        runs: Path, holes: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Echoed in answers (kept in the store), in 429 and 500 messages (logged), and in a 401 (the error printed)."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    store = tmp_path / "j.sqlite"
    with caplog.at_level(logging.DEBUG), LoopbackServer(answer=judge_of(holes)) as server:
        server.add_faults(Fault(FaultKind.MALFORMED, echo=True), Fault(FaultKind.RATE_LIMIT, retry_after=0.1,
                                                                       echo=True),
                          Fault(FaultKind.SERVER_ERROR, echo=True), *[Fault(FaultKind.MALFORMED, echo=True)] * 3)
        assert judge(runs, [server.base_url], store, "--concurrency", "1") == 0
        first = capsys.readouterr()
        assert server.stats().faults == {"malformed": 4, "rate_limit": 1, "server_error": 1}
        echoed = [answer.content for answer in server.stats().answered if answer.fault == "malformed"]
        server.fail_all(Fault(FaultKind.UNAUTHORIZED, echo=True))
        url = server.base_url
        assert judge(runs, [url], tmp_path / "k.sqlite", "--quiet") == 2
    assert all(SECRET in content for content in echoed)  # the server did echo the key
    captured = capsys.readouterr()
    sentence = one_sentence(captured.err)
    says(sentence, url, "401", "Incorrect API key provided", f"Bearer {REDACTED}", "$OPENAI_API_KEY")
    with sqlite3.connect(store) as db:
        kept = [raw for (raw,) in db.execute("SELECT raw FROM answers WHERE fault IS NOT NULL")]
    assert len(kept) == 4 and all(f"Bearer {REDACTED}" in raw for raw in kept)
    for text in (first.out, first.err, captured.out, captured.err, caplog.text):
        assert SECRET not in text
    assert SECRET.encode() not in store_bytes(store) + store_bytes(tmp_path / "k.sqlite")


def test_a_key_too_short_to_be_secret_is_not_redacted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A placeholder such as "4" would otherwise be cut out of every answer, grades included."""
    monkeypatch.setenv("SHORT_KEY", "4")
    with LoopbackServer(answer=four) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        pool = pool_of(server, key_env="SHORT_KEY")
        assert pool.redact("Bearer 4: grade 4") == "Bearer 4: grade 4"
        summary = judge_pairs(few_pairs(), store, pool, judge_model=MODEL)
        assert summary.judged == 3 and {judgement.grade for judgement in store.judgements()} == {4}


# ---------------------------------------------------------------------- answers that are not the protocol's


UNDECODABLE = [  # (the fault, what the sentence says of the answer besides the server, and what to check)
    (Fault(FaultKind.RAW), ("/chat/completions", "UTF-8", "0xff", "position 0", "base URL", "/v1")),
    (Fault(FaultKind.RAW, body=b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>", content_type="text/html"),
     ("/chat/completions", "JSON", "text/html", "56 bytes",
      "'<!DOCTYPE html><html><body>502 Bad Gateway</body></html>'", "base URL")),
    (Fault(FaultKind.RAW, body=b""), ("/chat/completions", "JSON", "application/json", "0 bytes", "''")),
    (Fault(FaultKind.RAW, body=b'{"status": "ok"}'), ("'choices'", "'{\"status\": \"ok\"}'", "base URL", "/v1")),
]


@pytest.mark.parametrize(("fault", "facts"), UNDECODABLE, ids=["not UTF-8", "HTML", "empty", "other JSON"])
def test_an_answer_that_does_not_decode_is_one_sentence_naming_the_server(
        fault: Fault, facts: tuple[str, ...], runs: Path, holes: list[Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    with LoopbackServer(answer=judge_of(holes)) as server:
        server.add_faults(fault)
        url = server.base_url
        assert judge(runs, [url], tmp_path / "j.sqlite", "--quiet") == 2
    says(one_sentence(capsys.readouterr().err), url, *facts)


def test_an_answer_of_megabytes_is_kept_cut_and_one_beyond_the_limit_is_not_read(tmp_path: Path) -> None:
    big = "x" * 3_000_000
    with LoopbackServer(answer=four) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        server.add_faults(Fault(FaultKind.MALFORMED, content=big))
        summary = judge_pairs(few_pairs(), store, pool_of(server), judge_model=MODEL)
        assert summary.judged == 3 and summary.unparseable == 1  # asked again, then read
        [(raw,)] = store._db.execute("SELECT raw FROM answers WHERE fault IS NOT NULL").fetchall()
        assert raw == "x" * MAX_RAW_CHARS + "... [3,000,000 characters in all; the rest was not kept]"

        server.add_faults(Fault(FaultKind.RAW, body=b" " * 2_000_001))
        pool = pool_of(server, limits=EndpointLimits(max_answer_bytes=2_000_000))
        with pytest.raises(EndpointError) as refused:
            judge_pairs(few_pairs(5), store, pool, judge_model=MODEL)
    says(str(refused.value), pool.servers[0].url, "/chat/completions", "2,000,000 bytes", "2,000,001", "not read")


def test_a_server_sending_its_answer_for_ever_is_cut_off_at_the_timeout(tmp_path: Path) -> None:
    """A space every 0.1 s keeps the client's per-read timeout happy for ever; the request's own timeout ends it."""
    with LoopbackServer(answer=four) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        server.add_faults(Fault(FaultKind.TRICKLE, seconds=3600))
        pool = pool_of(server, timeout=1.0)
        summary = judge_pairs(few_pairs(), store, pool, judge_model=MODEL)
    assert summary.judged == 3 and pool.servers[0].retried == 1
    says(pool.servers[0].last_error, "no whole answer", "1 s")


# ---------------------------------------------------------------------- Batch API output files


@pytest.fixture
def batch(tmp_path: Path) -> Iterator[tuple[list[Pair], Path, list[dict[str, Any]]]]:
    """Three pairs, a store, and the good output file's records for their first (only) round."""
    pairs = few_pairs()
    with JudgementStore(tmp_path / "b.sqlite") as store:
        write_batch_requests(pairs, store, tmp_path / "requests.jsonl", judge_model=MODEL)
    records = []
    with LoopbackServer(answer=four) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        for number, line in enumerate((tmp_path / "requests.jsonl").read_text().splitlines()):
            request = json.loads(line)
            body = client.chat.completions.create(**request["body"]).model_dump()
            records.append({"id": f"batch_req_{number}", "custom_id": request["custom_id"],
                            "response": {"status_code": 200, "request_id": str(number), "body": body}, "error": None})
    yield pairs, tmp_path / "b.sqlite", records


def write_lines(path: Path, lines: list[Any]) -> Path:
    path.write_bytes(b"".join((line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n"
                              for line in lines))
    return path


def test_a_good_output_file_reads_and_repeated_lines_are_read_once(batch: tuple, tmp_path: Path) -> None:
    pairs, store_path, records = batch
    with JudgementStore(store_path) as store:
        read = read_batch_results(pairs, store, write_lines(tmp_path / "out.jsonl", [*records, records[1]]))
    assert (read.requests, read.judged, read.repeated, read.remaining) == (3, 3, 1, 0)
    says(read.describe_read("out.jsonl"), "out.jsonl", "3 answer(s) read", "0 unreadable", "0 error line(s)",
         "1 repeating", "3 pair(s) graded", "0 without a readable answer", "0 waiting")


def _conflict(records: list[dict[str, Any]]) -> list[Any]:
    other = json.loads(json.dumps(records[0]))
    other["response"]["body"]["choices"][0]["message"]["content"] = '{"final_similarity_score": 1}'
    return [*records, other]


def _set(index: int, **fields: Any) -> Callable[[list[dict[str, Any]]], list[Any]]:
    def change(records: list[dict[str, Any]]) -> list[Any]:
        changed = json.loads(json.dumps(records))
        changed[index].update(fields)
        return changed
    return change


def _body(value: Any) -> Callable[[list[dict[str, Any]]], list[Any]]:
    def change(records: list[dict[str, Any]]) -> list[Any]:
        changed = json.loads(json.dumps(records))
        changed[1]["response"]["body"] = value
        if value is None:
            del changed[1]["response"]["body"]
        return changed
    return change


BAD_FILES: list[tuple[str, Callable[[list[dict[str, Any]]], list[Any]], tuple[str, ...]]] = [
    # (case, the edit, what the sentence names besides the file: the line, what is wrong there, what to do)
    ("conflicting duplicate", _conflict,
     ("'K0:zero_shot'", "line 1", "line 4", "'{\"final_similarity_score\": 4}'", "'{\"final_similarity_score\": 1}'",
      "delete the other", "Nothing was read")),
    ("response not an object", _set(1, response="ok"), ("line 2", "'response'", "'ok'", "object", "Batch API")),
    ("neither response nor error", _set(1, response=None), ("line 2", "'response'", "'error'")),
    ("body missing", _body(None), ("line 2", "'choices'", "'null'")),
    ("body not a chat completion", _body({"text": "4"}), ("line 2", "'choices'", "'{\"text\": \"4\"}'")),
    ("status code not a number", _set(1, response={"status_code": "200"}), ("line 2", "status_code", "'200'")),
    ("custom_id of another shape", _set(0, custom_id="request-1"),
     ("line 1", "'request-1'", "'<key>:<step>'", "--batch-requests", "another program")),
    ("custom_id missing", _set(2, custom_id=None), ("line 3", "custom_id None", "'<key>:<step>'")),
    ("not JSON", lambda records: [records[0], b'{"custom_id": oops}', *records[1:]],
     ("line 2", "not JSON", "line 1 column 15 (char 14)")),
    ("a JSON array", lambda records: [records[0], [records[1]], records[2]], ("line 2", "JSON list", "object")),
    ("not UTF-8", lambda records: [records[0], b'{"custom_id": "\xff"}', records[2]],
     ("line 2", "UTF-8", "0xff", "column 16")),
    ("for another model", lambda records: [{**record, "custom_id": "0" * 32 + ":zero_shot"} for record in records[:1]],
     ("1 result line(s)", MODEL, "--model")),
]


@pytest.mark.parametrize(("change", "facts"), [case[1:] for case in BAD_FILES], ids=[case[0] for case in BAD_FILES])
def test_a_malformed_output_file_is_one_sentence_naming_the_line_and_nothing_is_read(
        change: Callable[[list[dict[str, Any]]], list[Any]], facts: tuple[str, ...], batch: tuple,
        tmp_path: Path) -> None:
    pairs, store_path, records = batch
    out = write_lines(tmp_path / "out.jsonl", change(records))
    with JudgementStore(store_path) as store, pytest.raises(ValueError) as refused:
        read_batch_results(pairs, store, out)
    says(str(refused.value), out, *(fact.replace("K0", pairs[0].key) for fact in facts))
    with sqlite3.connect(store_path) as db:
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 0


def _answered_by(model: Any, *indexes: int, repeat: bool = False) -> Callable[[list[dict[str, Any]]], list[Any]]:
    """The file with the bodies of lines ``indexes`` naming ``model`` as the model that answered (None: no model);
    ``repeat``: the changed lines are added after the file's own, repeating their answers word for word."""
    def change(records: list[dict[str, Any]]) -> list[Any]:
        changed = json.loads(json.dumps(records))
        for index in indexes:
            if model is None:
                del changed[index]["response"]["body"]["model"]
            else:
                changed[index]["response"]["body"]["model"] = model
        return [*records, *(changed[index] for index in indexes)] if repeat else changed
    return change


ANOTHER_MODEL = [  # (case, the edit, what the sentence names besides the file: line, request, both models, remedy)
    ("every line", _answered_by("gpt-4o", 0, 1, 2),
     ("line 1", "'K0:zero_shot'", "'gpt-4o'", "2 more", repr(MODEL), "--model", f"to {MODEL!r}", "--model 'gpt-4o'",
      "Nothing was read")),
    ("one line", _answered_by(f"{MODEL}-mini", 2), ("line 3", "'K2:zero_shot'", f"'{MODEL}-mini'", repr(MODEL),
                                                    "--model")),
    ("a snapshot of another model", _answered_by(f"{MODEL}-mini-2024-07-18", 1),
     ("line 2", "'K1:zero_shot'", f"'{MODEL}-mini-2024-07-18'", repr(MODEL), "--model")),
    ("a repeated line", _answered_by("gpt-4o", 1, repeat=True),
     ("line 4", "'K1:zero_shot'", "'gpt-4o'", repr(MODEL), "--model")),
]


@pytest.mark.parametrize(("change", "facts"), [case[1:] for case in ANOTHER_MODEL], ids=[c[0] for c in ANOTHER_MODEL])
def test_an_output_file_answered_by_another_model_is_one_sentence_naming_both_and_nothing_is_read(
        change: Callable[[list[dict[str, Any]]], list[Any]], facts: tuple[str, ...], batch: tuple,
        tmp_path: Path) -> None:
    """Grades are stored under the judge model's name: another model's answers must never be filed under it."""
    pairs, store_path, records = batch
    out = write_lines(tmp_path / "out.jsonl", change(records))
    with JudgementStore(store_path) as store, pytest.raises(ValueError) as refused:
        read_batch_results(pairs, store, out)
    keys = {f"'K{number}:": f"'{pair.key}:" for number, pair in enumerate(pairs)}
    says(str(refused.value), out, *(keys.get(fact[:4], fact[:4]) + fact[4:] for fact in facts))
    with sqlite3.connect(store_path) as db:
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 0


SAME_MODEL = [("the judge model", _answered_by(MODEL, 0, 1, 2), f"batch: {MODEL}"),
              ("its dated snapshot", _answered_by(f"{MODEL}-2024-07-18", 0, 1, 2), f"batch: {MODEL}-2024-07-18"),
              ("its older snapshot", _answered_by(f"{MODEL}-0613", 0, 1, 2), f"batch: {MODEL}-0613"),
              ("no model named", _answered_by(None, 0, 1, 2), "batch: no model named")]


@pytest.mark.parametrize(("change", "kept"), [case[1:] for case in SAME_MODEL], ids=[case[0] for case in SAME_MODEL])
def test_answers_of_the_judge_model_its_dated_snapshot_or_naming_none_are_read_and_the_name_kept(
        change: Callable[[list[dict[str, Any]]], list[Any]], kept: str, batch: tuple, tmp_path: Path) -> None:
    """OpenAI answers ``gpt-4o-mini`` as ``gpt-4o-mini-2024-07-18``; a tool that names no model wrote to the key's."""
    pairs, store_path, records = batch
    with JudgementStore(store_path) as store:
        read = read_batch_results(pairs, store, write_lines(tmp_path / "out.jsonl", change(records)))
        assert (read.requests, read.judged) == (3, 3)
        assert [answer["server"] for pair in pairs for answer in store.raw_answers(pair.key)] == [kept] * 3


def test_an_empty_or_truncated_output_file_is_one_sentence(batch: tuple, tmp_path: Path) -> None:
    pairs, store_path, records = batch
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "blank.jsonl").write_bytes(b"\n  \n")
    whole = "".join(json.dumps(record) + "\n" for record in records)
    (tmp_path / "cut.jsonl").write_text(whole[:len(whole) - 40])
    with JudgementStore(store_path) as store:
        for name, size in (("empty", 0), ("blank", 4)):
            with pytest.raises(ValueError) as empty:
                read_batch_results(pairs, store, tmp_path / f"{name}.jsonl")
            says(str(empty.value), tmp_path / f"{name}.jsonl", "empty", f"{size} bytes", "download", "output_file_id")
        with pytest.raises(ValueError) as cut:
            read_batch_results(pairs, store, tmp_path / "cut.jsonl")
    says(str(cut.value), tmp_path / "cut.jsonl", "line 3", "not JSON", "without a newline", "cut short", "download")


def test_a_malformed_output_file_on_the_command_line_is_one_sentence(runs: Path, holes: list[Any], tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "b.sqlite"
    assert judge(runs, [], store, "--batch-requests", str(tmp_path / "r.jsonl")) == 0
    first = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])
    out = write_lines(tmp_path / "out.jsonl", [{"id": "batch_req_0", "custom_id": first["custom_id"], "response": 7,
                                                "error": None}])
    capsys.readouterr()
    assert judge(runs, [], store, "--batch-results", str(out)) == 2
    says(one_sentence(capsys.readouterr().err), out, "line 1", "'response'", "7", "object",
         '{"custom_id": "<key>:<step>", "response": {"status_code": 200, "body": <chat completion>}, "error": null}')


# ---------------------------------------------------------------------- the judgement store


def _hold(store: Path, how: str) -> subprocess.Popen[str]:
    """Another process holding ``store`` locked until killed: mid-write, or in SQLite's exclusive locking mode."""
    statements = {"writing": ["BEGIN IMMEDIATE", "INSERT INTO meta VALUES ('held', 'yes')"],
                  "exclusive": ["PRAGMA locking_mode=EXCLUSIVE", "BEGIN EXCLUSIVE",
                                "INSERT INTO meta VALUES ('held', 'yes')", "COMMIT", "SELECT * FROM meta"]}[how]
    code = (f"import sqlite3, time\ndb = sqlite3.connect({str(store)!r}, isolation_level=None)\n"
            + "".join(f"db.execute({statement!r}).fetchall()\n" for statement in statements)
            + "print('held', flush=True)\ntime.sleep(120)\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.parametrize("how", ["exclusive", "writing"])
def test_a_store_locked_by_another_process_is_named_as_locked(how: str, tmp_path: Path) -> None:
    """Exclusive mode refuses even the opening (before: "not a judgement store"); a held write refuses writes."""
    path = tmp_path / "j.sqlite"
    with JudgementStore(path) as store:
        store.add_pairs(few_pairs())
    holder = _hold(path, how)
    try:
        with pytest.raises(StoreLockedError) as locked:
            with JudgementStore(path, timeout=0.5) as store:
                assert store.counts()["answers"] == 0  # reading goes on beside a writer (WAL)
                store.record_answer(few_pairs()[0].key, "zero_shot", raw="{}", value=4)
    finally:
        holder.kill()
        holder.wait()
    says(str(locked.value), path, "locked by another process", "0.5 s", "close it", "same command again")
    with JudgementStore(path) as store:  # once let go, the store is whole
        assert store.counts()["answers"] == 0


def test_an_empty_file_is_a_new_store_and_another_database_is_left_untouched(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    with JudgementStore(empty) as store:
        store.add_pairs(few_pairs())
    with sqlite3.connect(empty) as db:
        assert db.execute("SELECT COUNT(*) FROM pairs").fetchone()[0] == 3
    other = tmp_path / "app.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    before = other.read_bytes()
    with pytest.raises(ValueError) as refused:
        JudgementStore(other)
    says(str(refused.value), other, "meta, users", "not a judgement store", "nothing was written", "--store")
    assert other.read_bytes() == before and not Path(f"{other}-wal").exists()

"""The judge on servers as people run them (issue 31): structured outputs, streamed answers, honest summaries.

Each case is a row of ``docs/faults/judge.md``. The servers are real HTTP servers on 127.0.0.1
(``tests/judge_servers.py``), talked to by the real ``openai`` client through the pool: one that answers well only
under ``response_format`` ``json_schema`` (a small model behind guided decoding), one that refuses ``json_schema``
with a 400 as OpenAI does, one that ignores ``response_format`` and answers prose, one that streams every answer
as ``transformers serve`` does, and ones whose bodies are no chat completion at all. The holes are those of a
hashing-encoder run of ``DisastIR-STS-Geo`` on the generated sample (one request per pair), or hand-made pairs of
every intent (every step of the protocol).
"""

from __future__ import annotations

import json
import logging
import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from judge_servers import (
    JUDGE_MODEL as MODEL,
)
from judge_servers import (
    JudgeServer,
    bare_422,
    constrained,
    event_stream,
    expected,
    fails_schema,
    fixed,
    grades_in,
    judge_of,
    prose,
    refuses,
    refuses_schema,
    reshaped,
    streaming,
    true_grade,
)
from loopback import grade_judge

from disastir_mteb import cli
from disastir_mteb.endpoints.answers import chat_from_event_stream
from disastir_mteb.endpoints.pool import EndpointError, EndpointLimits, EndpointPool
from disastir_mteb.judging.batch import write_batch_requests
from disastir_mteb.judging.job import FORMAT_PROBES, judge_pairs
from disastir_mteb.judging.protocol import MAX_ANSWER_ATTEMPTS, AnswerFormat, pending_requests
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.vocabulary.taxonomy import MAX_GRADE, Intent

#: One retry by the client (two tries a server): faults that give a server up do so in a second.
ONE_RETRY = EndpointLimits(max_retries=1)

TASK = "DisastIR-STS-Geo"




@pytest.fixture(scope="module")
def runs(hashing_runs: Callable[..., Path]) -> Path:
    return hashing_runs(TASK)








def judge(runs: Path, url: str, store: Path, *extra: str) -> int:
    return cli.main(["judge", str(runs), "--model", MODEL, "--store", str(store), "--yes", "-t", TASK,
                     "--base-url", url, "--quiet", *extra])


def every_intent_pairs() -> tuple[list[Pair], dict[tuple[str, str], int]]:
    """Two hand-made pairs per intent, with true grades on each intent's scale."""
    pairs, grades = [], {}
    for intent in Intent:
        for number in range(2):
            query = f"{intent.value} query about flood number {number}"
            passage = f"A passage on river levels and evacuation, number {number} for {intent.value}."
            pairs.append(Pair(intent, query, passage, MODEL))
            grades[query, passage] = true_grade(query, passage, MAX_GRADE[intent])
    return pairs, grades


# ---------------------------------------------------------------------- what is sent


def test_every_step_asks_for_the_json_schema_of_its_answer(tmp_path: Path) -> None:
    """Each step's schema holds its one key, typed, its allowed values as an enum, required, nothing else."""
    first = {r.step: r for r in pending_requests(Intent.QA, "q", "p", {})}
    later = {r.step: r for r in pending_requests(Intent.QA, "q", "p", {s: 1 for s in first} | {"cot/presence": "Yes"})}
    presence = first["cot/presence"].body(MODEL)["response_format"]
    assert presence == {"type": "json_schema", "json_schema": {"name": "has_answer", "strict": True, "schema": {
        "type": "object", "properties": {"has_answer": {"type": "string", "enum": ["Yes", "No"]}},
        "required": ["has_answer"], "additionalProperties": False}}}
    assert later["cot/final"].body(MODEL)["response_format"]["json_schema"]["schema"]["properties"] == {
        "relevance_score": {"type": "integer", "enum": [2, 3]}}
    assert first["zero_shot"].body(MODEL, AnswerFormat.JSON_OBJECT)["response_format"] == {"type": "json_object"}
    plain = first["zero_shot"].body(MODEL, AnswerFormat.PLAIN)
    assert "response_format" not in plain and plain["messages"] == first["zero_shot"].body(MODEL)["messages"]

    pairs, _ = every_intent_pairs()  # the Batch API file carries the schema too (OpenAI's Batch takes it)
    with JudgementStore(tmp_path / "b.sqlite") as store:
        write_batch_requests(pairs, store, tmp_path / "requests.jsonl", judge_model=MODEL)
    lines = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert lines and all(line["body"]["response_format"]["type"] == "json_schema" for line in lines)


def test_a_small_model_constrained_by_the_schema_answers_every_step_of_every_intent(tmp_path: Path) -> None:
    """A server that answers JSON only under json_schema (its answer checked against the schema sent): every grade."""
    pairs, grades = every_intent_pairs()
    with JudgeServer(constrained(grade_judge(grades))) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        summary = judge_pairs(pairs, store, EndpointPool([server.base_url], concurrency=4), judge_model=MODEL)
        assert set(server.formats()) == {"json_schema"}
        got = {(j.query, j.passage): j.grade for j in store.judgements()}
    assert got == {key: float(grade) for key, grade in grades.items()}
    assert (summary.judged, summary.unparseable, summary.failed) == (len(pairs), 0, 0)
    assert summary.formats == {server.base_url: AnswerFormat.JSON_SCHEMA}


# ---------------------------------------------------------------------- servers and formats


def test_a_server_answering_prose_unless_constrained_grades_every_hole_through_the_cli(
        runs: Path, holes: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with JudgeServer(constrained(judge_of(holes))) as server:
        assert judge(runs, server.base_url, tmp_path / "j.sqlite") == 0
        assert set(server.formats()) == {"json_schema"} and len(server.formats()) == len(holes)
    assert grades_in(tmp_path / "j.sqlite") == expected(holes)
    assert f"{server.base_url}: {len(holes)} answered, 0 retried (0 rate-limited); response_format json_schema." \
        in capsys.readouterr().out


def test_a_server_refusing_json_schema_is_asked_with_json_object_from_then_on(
        runs: Path, holes: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    with JudgeServer(refuses_schema(judge_of(holes))) as server:
        assert judge(runs, server.base_url, tmp_path / "j.sqlite", "--concurrency", "1") == 0
        assert server.formats() == ["json_schema"] + ["json_object"] * len(holes)  # once for the job
    assert grades_in(tmp_path / "j.sqlite") == expected(holes)
    assert f"{server.base_url}: {len(holes)} answered, 0 retried (0 rate-limited); response_format json_object." \
        in capsys.readouterr().out
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [f"{server.base_url}: asked with response_format json_schema, it refused it: Error code: 400 - "
                        "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model; "
                        "asking it with response_format json_object from now on."]


def test_requests_refused_while_in_flight_are_sent_again_and_the_server_moved_once(
        runs: Path, holes: list[Any], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """8 requests in flight meet the refusal; the server is moved once, each refused request is sent again."""
    with JudgeServer(refuses_schema(judge_of(holes))) as server:
        assert judge(runs, server.base_url, tmp_path / "j.sqlite", "--concurrency", "8") == 0
        formats = server.formats()
    assert formats.count("json_object") == len(holes) and 1 <= formats.count("json_schema") <= 8
    assert grades_in(tmp_path / "j.sqlite") == expected(holes)
    assert ["asking it with" in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [True]


def test_a_refusal_that_is_not_about_the_format_is_still_one_sentence(runs: Path, holes: list[Any], tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with JudgeServer(refuses("This model's maximum context length is 2048 tokens.")) as server:
        assert judge(runs, server.base_url, tmp_path / "j.sqlite", "--concurrency", "1") == 2
        assert server.formats() == ["json_schema"]  # not moved: the format was not what it refused
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"disastir-mteb judge: {server.base_url} refused a request: HTTP 400 (") and \
        "maximum context length is 2048 tokens" in err and len(err.splitlines()) == 1
    assert grades_in(tmp_path / "j.sqlite") == {}


def test_a_server_ignoring_response_format_ends_in_plain_mode_with_no_grade_and_one_line_per_failure(
        runs: Path, holes: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="disastir_mteb.judging.job")
    with JudgeServer(prose()) as server:
        assert judge(runs, server.base_url, tmp_path / "j.sqlite", "--concurrency", "1") == 1
        formats = server.formats()
    n = len(holes)
    assert formats == (["json_schema"] * FORMAT_PROBES + ["json_object"] * FORMAT_PROBES
                       + ["plain"] * (MAX_ANSWER_ATTEMPTS * n - 2 * FORMAT_PROBES))  # each step asked 3 times
    with JudgementStore(tmp_path / "j.sqlite") as store:
        assert store.counts()["failed"] == n and not list(store.judgements())  # no made-up grade
    out = capsys.readouterr().out
    assert f"{server.base_url}: {MAX_ANSWER_ATTEMPTS * n} answered, 0 retried (0 rate-limited); plain instructions " \
           "(no response_format)." in out
    summary_lines = [line for line in out.splitlines() if "had no readable answer" in line]
    assert len(summary_lines) == 1
    assert summary_lines[0].startswith(f"{n} step(s) had no readable answer after {MAX_ANSWER_ATTEMPTS} tries "
                                       f"(zero_shot {n}); last: {server.base_url}: not one JSON object: ")
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2  # one per move, none per pair
    moves = [("response_format json_schema", "response_format json_object"),
             ("response_format json_object", "plain instructions (no response_format)")]
    for warning, (asked, then) in zip(warnings, moves, strict=True):
        assert warning.startswith(f"{server.base_url}: asked with {asked}, its first {FORMAT_PROBES} answers under "
                                  "it were not readable (the last: not one JSON object: ")
        assert warning.endswith(f"); asking it with {then} from now on.")
    per_pair = [r for r in caplog.records if "no readable answer to zero_shot after" in r.getMessage()]
    assert len(per_pair) == n and {r.levelno for r in per_pair} == {logging.DEBUG}  # the detail, at DEBUG only


def test_one_readable_answer_keeps_the_format_for_the_whole_job(tmp_path: Path) -> None:
    """A server honouring json_schema whose model now and then says prose is not moved to a plainer format."""
    answers = iter(["Yes"] * (FORMAT_PROBES - 1) + ['{"final_similarity_score": 4}'] + ["Yes"] * 10
                   + ['{"final_similarity_score": 4}'] * 100)
    pairs = [Pair(Intent.STS, f"query {i}", f"passage {i}", MODEL) for i in range(6)]
    with JudgeServer(constrained_any(lambda request: next(answers))) as server, \
            JudgementStore(tmp_path / "j.sqlite") as store:
        summary = judge_pairs(pairs, store, EndpointPool([server.base_url], concurrency=1), judge_model=MODEL)
        assert set(server.formats()) == {"json_schema"}
    assert summary.formats == {server.base_url: AnswerFormat.JSON_SCHEMA} and summary.judged + summary.failed == 6


def constrained_any(answer: Any) -> Any:
    """Like a server honouring json_schema, but whose answers ``answer`` chooses freely (prose included)."""
    from judge_servers import completion

    return lambda request: (200, "application/json", completion(request, answer(request)))


def test_a_job_may_start_in_a_plainer_format(tmp_path: Path) -> None:
    pairs = [Pair(Intent.STS, f"query {i}", f"passage {i}", MODEL) for i in range(3)]
    with JudgeServer(refuses_schema(lambda request: '{"final_similarity_score": 1}')) as server, \
            JudgementStore(tmp_path / "j.sqlite") as store:
        summary = judge_pairs(pairs, store, EndpointPool([server.base_url], concurrency=1), judge_model=MODEL,
                              answer_format="json_object")
        assert server.formats() == ["json_object"] * 3
    assert summary.judged == 3 and summary.formats == {server.base_url: AnswerFormat.JSON_OBJECT}


# ---------------------------------------------------------------------- streamed answers and other bodies


@pytest.mark.parametrize(("usage", "done"), [(False, False), (True, True)], ids=["transformers serve", "usage+DONE"])
def test_a_streaming_only_server_is_read_as_the_completion_its_events_spell(
        usage: bool, done: bool, runs: Path, holes: list[Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    with JudgeServer(streaming(judge_of(holes), usage=usage, done=done)) as server:
        assert judge(runs, server.base_url, tmp_path / "j.sqlite") == 0
    assert grades_in(tmp_path / "j.sqlite") == expected(holes)
    with sqlite3.connect(tmp_path / "j.sqlite") as db:
        tokens = set(db.execute("SELECT prompt_tokens, completion_tokens FROM answers").fetchall())
    assert tokens == ({(321, 9)} if usage else {(None, None)})  # a usage chunk's counts kept, none made up
    assert capsys.readouterr().err == ""


def test_the_stream_reader_joins_the_first_choice_and_skips_comments() -> None:
    folded = chat_from_event_stream(": a comment\r\n\r\nevent: message\r\ndata: {\"choices\": [{\"delta\": "
                                    "{\"content\": \"{\\\"a\\\"\"}}]}\r\n\r\ndata: {\"choices\": [{\"delta\": "
                                    "{\"content\": \": 1}\"}, \"finish_reason\": \"length\"}]}")
    assert folded["choices"] == [{"index": 0, "message": {"role": "assistant", "content": '{"a": 1}'},
                                  "finish_reason": "length"}]
    assert "usage" not in folded
    silent = chat_from_event_stream(event_stream({"model": "m"}, "").decode())
    assert silent["choices"][0]["message"]["content"] is None  # an answer without text: unreadable, not ""


NOT_A_COMPLETION = [
    (fixed(b'data: {"choices": [{"delta": {"content": "{\\"final_similarity_score\\": 4}"}}]}\n\ndata: {"choic',
           "text/event-stream"),
     "answered /chat/completions with a stream of server-sent events (text/event-stream, 93 bytes) that is not a "
     "chat-completion stream: event 2 is not JSON ('{\"choic'); check that this base URL is a chat-completions "
     "server (it usually ends in /v1); every answer received is kept in"),
    (fixed(b'data: {"text": "4"}\n\ndata: [DONE]\n\n', "text/event-stream"),
     "answered /chat/completions with a stream of server-sent events (text/event-stream, 35 bytes) that is not a "
     "chat-completion stream: event 1 is no chat.completion.chunk (no 'choices' list): '{\"text\": \"4\"}'; check"),
    (fixed(b"data: [DONE]\n\n", "text/event-stream"),
     "answered /chat/completions with a stream of server-sent events (text/event-stream, 14 bytes) that is not a "
     "chat-completion stream: it holds no chat.completion.chunk event (it begins 'data: [DONE]'); check"),
    (fixed(b'"{\\"final_similarity_score\\": 4}"'),
     "answered a chat request, but the answer is not a chat completion (no 'choices' list): "
     "'\"{\\\\\"final_similarity_score\\\\\": 4}\"'; check that this base URL is a chat-completions server"),
    (fixed(b'[{"final_similarity_score": 4}]'),
     "answered a chat request, but the answer is not a chat completion (no 'choices' list): "
     "'[{\"final_similarity_score\": 4}]'; check"),
]


@pytest.mark.parametrize(("respond", "says"), NOT_A_COMPLETION,
                         ids=["stream cut mid-event", "stream of other objects", "stream without a chunk",
                              "bare string", "list"])
def test_a_body_that_is_no_chat_completion_is_one_sentence_and_no_grade(
        respond: Any, says: str, runs: Path, holes: list[Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    with JudgeServer(respond) as server:
        assert judge(runs, server.base_url, tmp_path / "j.sqlite") == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"disastir-mteb judge: {server.base_url} {says}"), err
    assert grades_in(tmp_path / "j.sqlite") == {}


def test_a_server_that_cannot_be_reached_ends_the_sentence_with_one_period(tmp_path: Path) -> None:
    """openai says "Connection error." with its own period; the sentence around it ended in two."""
    with socket.socket() as free:  # a loopback port nobody listens on
        free.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{free.getsockname()[1]}/v1"
    pairs = [Pair(Intent.STS, "query", "passage", MODEL)]
    with JudgementStore(tmp_path / "j.sqlite") as store:
        pool = EndpointPool([url], concurrency=1, limits=ONE_RETRY)
        with pytest.raises(EndpointError) as stopped:
            judge_pairs(pairs, store, pool, judge_model=MODEL)
    assert str(stopped.value) == (f"Every server was given up on: {url}: 0 answered, 1 retried (0 rate-limited); "
                                  "given up: APIConnectionError: Connection error.")


def test_a_stream_ending_in_an_error_is_asked_again_then_the_server_given_up_on(tmp_path: Path) -> None:
    """transformers serve ends a failed generation with ``data: {"error": ...}``: retried as a 5xx would be."""
    respond = fixed(b'data: {"id":"req_0","choices":[{"delta":{"role":"assistant"},"index":0}]}\n\n'
                    b'data: {"error": "CUDA out of memory"}', "text/event-stream")
    pairs = [Pair(Intent.STS, "query", "passage", MODEL)]
    with JudgeServer(respond) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        pool = EndpointPool([server.base_url], concurrency=1, limits=ONE_RETRY)
        with pytest.raises(EndpointError) as stopped:
            judge_pairs(pairs, store, pool, judge_model=MODEL)
        assert len(server.requests) == 2 and not list(store.judgements())
    assert str(stopped.value) == (f"Every server was given up on: {server.base_url}: 0 answered, 1 retried "
                                  "(0 rate-limited); given up: its answer's stream ended in an error: "
                                  "'\"CUDA out of memory\"'.")


# ------------------------------------------------------------ refusals that name nothing, answers without text


def _sts(n: int) -> tuple[list[Pair], dict[tuple[str, str], int]]:
    pairs = [Pair(Intent.STS, f"sts query {i}", f"sts passage {i}", MODEL) for i in range(n)]
    return pairs, {(p.query, p.passage): i % 6 for i, p in enumerate(pairs)}


@pytest.mark.parametrize("server_of", [bare_422, fails_schema], ids=["bare 422", "500 under json_schema only"])
def test_a_server_failing_only_under_the_schema_is_moved_down_not_given_up(
        server_of: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Before: a bare 422 stopped the job (it names no format), and 500s under json_schema gave the server up."""
    pairs, grades = _sts(3)
    with JudgeServer(server_of(grade_judge(grades))) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        summary = judge_pairs(pairs, store, EndpointPool([server.base_url], concurrency=1,
                                                          limits=ONE_RETRY), judge_model=MODEL)
        formats = server.formats()
        got = {(j.query, j.passage): j.grade for j in store.judgements()}
    assert formats[-3:] == ["json_object"] * 3 and set(formats[:-3]) == {"json_schema"}
    assert got == {key: float(grade) for key, grade in grades.items()}
    assert summary.formats == {server.base_url: AnswerFormat.JSON_OBJECT}
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "asking it with" in
                 r.getMessage()]
    assert warning.startswith(f"{server.base_url}: asked with response_format json_schema, it ")


def test_content_given_as_a_list_of_parts_is_read_as_its_text(tmp_path: Path) -> None:
    pairs, grades = _sts(3)
    with JudgeServer(reshaped(grade_judge(grades), "parts")) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        summary = judge_pairs(pairs, store, EndpointPool([server.base_url], concurrency=1), judge_model=MODEL)
        got = {(j.query, j.passage): j.grade for j in store.judgements()}
    assert got == {key: float(grade) for key, grade in grades.items()} and summary.unparseable == 0


@pytest.mark.parametrize(("shape", "said"), [("no choice", "the answer holds no choice (choices: [])"),
                                             ("refusal", "the model refused to answer: \"I can't help with rating")])
def test_an_answer_without_text_says_why_and_leaves_the_format_alone(shape: str, said: str, tmp_path: Path) -> None:
    """Before: "not one JSON object: ''", and three of them moved the server down a format (twice in a job)."""
    pairs, grades = _sts(2)
    with JudgeServer(reshaped(grade_judge(grades), shape)) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        summary = judge_pairs(pairs, store, EndpointPool([server.base_url], concurrency=1), judge_model=MODEL)
        assert set(server.formats()) == {"json_schema"}  # never moved: the format is not what failed
    assert summary.judged == 0 and summary.formats == {server.base_url: AnswerFormat.JSON_SCHEMA}
    assert said in " ".join(summary.failures())

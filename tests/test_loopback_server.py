"""The loopback server: a real OpenAI-compatible HTTP server, talked to through the real ``openai`` client."""

from __future__ import annotations

import base64
import json
import logging
import math
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest
from loopback import (
    ANSWER_KEYS,
    Fault,
    FaultKind,
    LoopbackProcess,
    LoopbackServer,
    grade_judge,
)

QUERY = "Which shelters accept pets during the hurricane evacuation?"
PASSAGE = "County shelters at the high school and the fairgrounds accept pets in carriers during evacuations."


def client(server: object, timeout: float = 5.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=timeout)


def prompt(query: str, passage: str, key: str, rate: str = "") -> list[dict[str, str]]:
    """A prompt shaped like the authors' (DisastIR Appendix C): data in the middle, the key asked last."""
    placeholder = {"has_answer": '"Yes" or "No"', "relevance_score": "<2_or_3>" if rate == "2 or 3" else "<0_or_1>"}
    return [{"role": "system", "content": "You are a search quality rater."},
            {"role": "user", "content": f"Rate how relevant ({rate}). **Query:** {query}, **Passage:** {passage}, "
                                        f'Output JSON: {{"{key}": {placeholder.get(key, "<0_to_3>")}}}'}]


def ask(api: openai.OpenAI, messages: list[dict[str, str]]) -> str:
    answer = api.chat.completions.create(model="judge", messages=messages, temperature=0)
    return answer.choices[0].message.content


def test_completion_round_trip_answers_in_openai_shape_and_is_counted() -> None:
    with LoopbackServer(answer=lambda request: '{"final_score": 2}', model="served") as server:
        api = client(server)
        answer = api.chat.completions.create(model="judge", messages=[{"role": "user", "content": "a" * 40}])
        assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
        assert answer.object == "chat.completion" and answer.id.startswith("chatcmpl-")
        assert answer.model == "judge" and answer.choices[0].finish_reason == "stop"
        assert answer.choices[0].message.content == '{"final_score": 2}'
        assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (40 // 4, 18 // 4)
        assert answer.usage.total_tokens == 10 + 4
        assert [model.id for model in api.models.list().data] == ["served"]
        stats = server.stats()
    assert stats.requests == {"/v1/chat/completions": 1, "/v1/models": 1}
    assert [request.messages for request in stats.answered] == [[{"role": "user", "content": "a" * 40}]]
    assert stats.faults == {} and stats.errors == ()


def test_rate_limit_carries_retry_after_and_is_spent_once() -> None:
    with LoopbackServer() as server:
        api = client(server)
        server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=2), Fault("rate_limit", retry_after=0.5))
        before = time.monotonic()
        with pytest.raises(openai.RateLimitError) as first:
            ask(api, prompt(QUERY, PASSAGE, "final_score"))
        with pytest.raises(openai.RateLimitError) as second:
            ask(api, prompt(QUERY, PASSAGE, "final_score"))
        assert ask(api, prompt(QUERY, PASSAGE, "final_score")) == '{"final_score": 0}'
        stats = server.stats()
    assert first.value.status_code == 429 and first.value.code == "rate_limit_exceeded"
    assert first.value.response.headers["Retry-After"] == "2"
    assert second.value.response.headers["Retry-After"] == "0.5"
    assert [(event.kind, event.retry_after) for event in stats.fault_log] == [("rate_limit", 2.0), ("rate_limit", 0.5)]
    assert all(before <= event.sent_at <= time.monotonic() for event in stats.fault_log)
    assert stats.faults == {"rate_limit": 2} and len(stats.answered) == 1


def test_server_error_close_and_dead_server() -> None:
    with LoopbackServer() as server:
        api = client(server)
        server.add_faults(Fault(FaultKind.SERVER_ERROR), Fault(FaultKind.CLOSE))
        with pytest.raises(openai.InternalServerError) as error:
            ask(api, prompt(QUERY, PASSAGE, "final_score"))
        assert error.value.status_code == 500 and error.value.body["type"] == "server_error"
        with pytest.raises(openai.APIConnectionError):
            ask(api, prompt(QUERY, PASSAGE, "final_score"))
        server.fail_all()
        for _ in range(3):
            with pytest.raises(openai.InternalServerError):
                ask(api, prompt(QUERY, PASSAGE, "final_score"))
        server.fail_all(None)
        assert ask(api, prompt(QUERY, PASSAGE, "final_score")) == '{"final_score": 0}'
        stats = server.stats()
    assert stats.faults == {"server_error": 4, "close": 1}
    assert stats.requests == {"/v1/chat/completions": 6} and len(stats.answered) == 1


def test_hang_past_the_client_timeout_and_close_ends_it() -> None:
    server = LoopbackServer().start()
    try:
        server.add_faults(Fault(FaultKind.HANG, seconds=30))
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            ask(client(server, timeout=0.2), prompt(QUERY, PASSAGE, "final_score"))
        assert 0.2 <= time.monotonic() - started < 2
    finally:
        started = time.monotonic()
        server.close()
    assert time.monotonic() - started < 2, "closing the server must end a hang, not wait 30 s"
    assert server.stats().faults == {"hang": 1} and server.stats().answered == ()


def test_malformed_and_out_of_range_answers_are_answered_and_marked() -> None:
    with LoopbackServer() as server:
        api = client(server)
        server.add_faults(Fault(FaultKind.MALFORMED), Fault(FaultKind.OUT_OF_RANGE), Fault(FaultKind.OUT_OF_RANGE),
                          Fault(FaultKind.MALFORMED, content='```json\n{"final_score": 1}\n```'))
        malformed = ask(api, prompt(QUERY, PASSAGE, "final_score"))
        with pytest.raises(ValueError):
            json.loads(malformed)
        assert json.loads(ask(api, prompt(QUERY, PASSAGE, "criterion_score"))) == {"criterion_score": 99}
        assert json.loads(ask(api, prompt(QUERY, PASSAGE, "has_answer"))) == {"has_answer": "Maybe"}
        assert ask(api, prompt(QUERY, PASSAGE, "final_score")).startswith("```json")
        assert ask(api, prompt(QUERY, PASSAGE, "final_score")) == '{"final_score": 0}'
        stats = server.stats()
    assert [request.fault for request in stats.answered] == ["malformed", "out_of_range", "out_of_range", "malformed",
                                                             None]


def test_latency_is_honoured_and_requests_run_concurrently() -> None:
    latency, concurrency = 0.05, 32
    with LoopbackServer(latency=latency) as server:
        api = client(server)
        started = time.monotonic()
        ask(api, prompt(QUERY, PASSAGE, "final_score"))
        assert time.monotonic() - started >= latency
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda _: ask(api, prompt(QUERY, PASSAGE, "final_score")), range(concurrency)))  # warm
            started = time.monotonic()
            answers = list(pool.map(lambda _: ask(api, prompt(QUERY, PASSAGE, "final_score")), range(concurrency)))
            elapsed = time.monotonic() - started
        server.set_latency(0)
        started = time.monotonic()
        ask(api, prompt(QUERY, PASSAGE, "final_score"))
        assert time.monotonic() - started < latency
    assert answers == ['{"final_score": 0}'] * concurrency
    assert latency <= elapsed < concurrency * latency / 2, f"{concurrency} requests took {elapsed:.3f} s"


def test_grade_judge_answers_every_key_consistently_with_the_grade() -> None:
    other = "Evacuation routes are posted on the county website."
    judge = grade_judge({(QUERY, PASSAGE): 3, (QUERY, other): 1, ("flood?", other): 0})
    with LoopbackServer(answer=judge) as server:
        api = client(server)
        for key in ("final_score", "final_relevance_score", "criterion_score"):
            assert json.loads(ask(api, prompt(QUERY, PASSAGE, key))) == {key: 3}
            assert json.loads(ask(api, prompt(QUERY, other, key))) == {key: 1}
        assert json.loads(ask(api, prompt(QUERY, PASSAGE, "final_similarity_score"))) == {"final_similarity_score": 3}
        assert json.loads(ask(api, prompt(QUERY, PASSAGE, "has_answer"))) == {"has_answer": "Yes"}
        assert json.loads(ask(api, prompt(QUERY, other, "has_answer"))) == {"has_answer": "No"}
        # relevance_score stays inside the branch the prompt names, whatever the true grade
        assert json.loads(ask(api, prompt(QUERY, PASSAGE, "relevance_score", "2 or 3"))) == {"relevance_score": 3}
        assert json.loads(ask(api, prompt(QUERY, PASSAGE, "relevance_score", "0 or 1"))) == {"relevance_score": 1}
        assert json.loads(ask(api, prompt(QUERY, other, "relevance_score", "2 or 3"))) == {"relevance_score": 2}
        assert json.loads(ask(api, prompt(QUERY, other, "relevance_score", "0 or 1"))) == {"relevance_score": 1}
        assert json.loads(ask(api, prompt("flood?", other, "relevance_score", "0 or 1"))) == {"relevance_score": 0}
        assert server.stats().errors == ()


def test_grade_judge_ignores_decoys_in_passages_and_takes_the_longest_texts() -> None:
    decoy = 'Shelters are full. Output JSON: {"final_score": 0} and rate it (0 or 1). has_answer'
    longer = PASSAGE + " Bring vaccination records."
    judge = grade_judge({(QUERY, decoy): 3, (QUERY, PASSAGE): 0, (QUERY, longer): 2})
    request = {"messages": prompt(QUERY, decoy, "criterion_score")}
    assert json.loads(judge(request)) == {"criterion_score": 3}
    assert json.loads(judge({"messages": prompt(QUERY, decoy, "relevance_score", "2 or 3")})) == {"relevance_score": 3}
    # the branch named only before the data, the decoy naming the other one after it
    branch_first = f'Rate how relevant (2 or 3). Query: {QUERY} Passage: {decoy} Output JSON: {{"relevance_score": N}}'
    assert json.loads(judge({"messages": [{"role": "user", "content": branch_first}]})) == {"relevance_score": 3}
    # PASSAGE occurs inside `longer`: the longer text is the one the message is about
    assert json.loads(judge({"messages": prompt(QUERY, longer, "final_score")})) == {"final_score": 2}
    assert json.loads(judge({"messages": prompt(QUERY, PASSAGE, "final_score")})) == {"final_score": 0}
    assert set(ANSWER_KEYS) >= {"final_score", "has_answer", "relevance_score"}


def test_grade_judge_default_for_ungraded_pairs_and_loud_failure_for_unknown_texts() -> None:
    passages = [f"Passage number {number} about storm surge and levees." for number in range(3000)]
    grades = {(QUERY, passage): number % 4 for number, passage in enumerate(passages)}
    judge = grade_judge(grades, default=lambda query, passage: 2, queries=["Unseen query about wildfire smoke?"])
    started = time.monotonic()
    for number in range(0, 3000, 30):
        assert json.loads(judge({"messages": prompt(QUERY, passages[number], "final_score")})) == {
            "final_score": number % 4}
    assert time.monotonic() - started < 2, "the text index must make a lookup cheap among thousands of pairs"
    unseen = {"messages": prompt("Unseen query about wildfire smoke?", passages[7], "final_score")}
    assert json.loads(judge(unseen)) == {"final_score": 2}
    assert json.loads(grade_judge(grades)(unseen)) == {"final_score": 0}  # no default: grade 0
    with LoopbackServer(answer=judge) as server:
        with pytest.raises(openai.InternalServerError, match="known"):
            ask(client(server), prompt("Nobody knows this query", "nor this passage", "final_score"))
        assert len(server.stats().errors) == 1


def toy_embed(texts: list[str]) -> list[list[float]]:
    return [[float(len(text)), float(text.count("a")), 0.5] for text in texts]


def test_embeddings_round_trip_in_float_and_base64_and_scripted_wrong_answers() -> None:
    texts = ["a flood", "banana", "aaa"]
    with LoopbackServer(embed=toy_embed, model="toy-embedder") as server:
        api = client(server)
        as_floats = api.embeddings.create(model="toy-embedder", input=texts, encoding_format="float")
        as_base64 = api.embeddings.create(model="toy-embedder", input=texts)  # the client asks for base64
        raw = api.embeddings.with_raw_response.create(model="toy-embedder", input=texts).http_response.json()
        assert [item.embedding for item in as_floats.data] == toy_embed(texts)
        assert [item.embedding for item in as_base64.data] == toy_embed(texts)
        assert list(struct.unpack("<3f", base64.b64decode(raw["data"][1]["embedding"]))) == toy_embed(texts)[1]
        assert as_floats.model == "toy-embedder" and as_floats.usage.total_tokens == len(" ".join(texts)) // 4
        server.add_faults(Fault(FaultKind.SHUFFLED), Fault(FaultKind.WRONG_DIMENSION), Fault(FaultKind.WRONG_COUNT),
                          Fault(FaultKind.NON_FINITE))
        shuffled = api.embeddings.create(model="toy-embedder", input=texts, encoding_format="float").data
        assert [item.index for item in shuffled] == [2, 1, 0]
        assert [item.embedding for item in shuffled] == toy_embed(texts)[::-1]
        short = api.embeddings.create(model="toy-embedder", input=texts, encoding_format="float").data
        assert [len(item.embedding) for item in short] == [2, 3, 3]
        assert len(api.embeddings.create(model="toy-embedder", input=texts).data) == 2
        assert math.isnan(api.embeddings.create(model="toy-embedder", input=texts).data[0].embedding[0])
        assert [request.texts for request in server.stats().answered][-1] == texts
    with LoopbackServer() as server, pytest.raises(openai.NotFoundError):
        client(server).embeddings.create(model="none", input=["x"])


def test_faults_are_checked_and_spent_only_where_they_apply() -> None:
    with pytest.raises(ValueError, match="unknown fault kind 'teapot'"):
        Fault("teapot")
    with pytest.raises(ValueError, match="content"):
        Fault(FaultKind.SERVER_ERROR, content="x")
    with LoopbackServer(embed=toy_embed) as server:
        api = client(server)
        server.add_faults(Fault(FaultKind.SHUFFLED), Fault(FaultKind.MALFORMED))
        with pytest.raises(ValueError):
            json.loads(ask(api, prompt(QUERY, PASSAGE, "final_score")))  # the chat request skips SHUFFLED
        assert [item.index for item in api.embeddings.create(model="m", input=["a", "b"]).data] == [1, 0]


def test_process_mode_prints_its_url_serves_grades_and_is_scripted_remotely(tmp_path: Path) -> None:
    grades = tmp_path / "qrels.json"
    grades.write_text(json.dumps([{"user_query": QUERY, "passage": PASSAGE, "score": 3}]), encoding="utf-8")
    with LoopbackProcess(latency=0.01, grades=grades, model="served") as server:
        api = client(server)
        assert server.base_url.startswith("http://127.0.0.1:") and server.process.poll() is None
        assert json.loads(ask(api, prompt(QUERY, PASSAGE, "has_answer"))) == {"has_answer": "Yes"}
        server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=3))
        with pytest.raises(openai.RateLimitError) as error:
            ask(api, prompt(QUERY, PASSAGE, "final_score"))
        assert error.value.response.headers["Retry-After"] == "3"
        server.fail_all()
        with pytest.raises(openai.InternalServerError):
            ask(api, prompt(QUERY, PASSAGE, "final_score"))
        server.fail_all(None)
        assert json.loads(ask(api, prompt(QUERY, PASSAGE, "final_score"))) == {"final_score": 3}
        stats = server.stats()
        assert stats.faults == {"rate_limit": 1, "server_error": 1}
        assert stats.requests == {"/v1/chat/completions": 4}  # the controls and the stats are not counted
        assert [request.content for request in stats.answered] == ['{"has_answer": "Yes"}', '{"final_score": 3}']
        assert stats.answered[0].messages == prompt(QUERY, PASSAGE, "has_answer")
        server.kill()
        with pytest.raises(openai.APIConnectionError):
            ask(api, prompt(QUERY, PASSAGE, "final_score"))


def test_a_client_that_resets_its_connection_is_a_debug_line_not_a_traceback(
        capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """A client killed mid-run resets its kept-alive connection while the server waits for its next request."""
    with caplog.at_level(logging.DEBUG, logger="loopback"), LoopbackServer() as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as connection:
            connection.sendall(b"GET /v1/models HTTP/1.1\r\nHost: loopback\r\n\r\n")
            assert connection.recv(4096).startswith(b"HTTP/1.1 200")
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        deadline = time.monotonic() + 5
        while "went away (ConnectionResetError)" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [model.id for model in client(server).models.list().data] == ["loopback-judge"]  # still serving
    assert "went away (ConnectionResetError)" in caplog.text
    stderr = capfd.readouterr().err
    assert "Traceback" not in stderr and "ConnectionResetError" not in stderr, stderr


def test_the_faults_of_hostile_servers_are_sent_as_scripted() -> None:
    """No or any ``Retry-After``, an exhausted quota, 401, raw bytes, a never-ending body, the headers echoed."""
    with LoopbackServer() as server:
        api = openai.OpenAI(base_url=server.base_url, api_key="sk-loopback-key", max_retries=0, timeout=5.0)
        server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=None),
                          Fault(FaultKind.RATE_LIMIT, headers={"Retry-After": "soon", "retry-after-ms": "-5"}),
                          Fault(FaultKind.QUOTA), Fault(FaultKind.UNAUTHORIZED, echo=True))
        with pytest.raises(openai.RateLimitError) as bare:
            ask(api, prompt(QUERY, PASSAGE, "final_score"))
        with pytest.raises(openai.RateLimitError) as odd:
            ask(api, prompt(QUERY, PASSAGE, "final_score"))
        with pytest.raises(openai.RateLimitError) as quota:
            ask(api, prompt(QUERY, PASSAGE, "final_score"))
        with pytest.raises(openai.AuthenticationError) as refused:
            ask(api, prompt(QUERY, PASSAGE, "final_score"))
        assert "retry-after" not in bare.value.response.headers
        assert (odd.value.response.headers["retry-after"], odd.value.response.headers["retry-after-ms"]) == ("soon",
                                                                                                             "-5")
        assert quota.value.code == "insufficient_quota" and "retry-after" not in quota.value.response.headers
        assert refused.value.code == "invalid_api_key"
        assert "(you sent: Authorization: Bearer sk-loopback-key; " in refused.value.body["message"]

        server.add_faults(Fault(FaultKind.MALFORMED, echo=True), Fault(FaultKind.RAW),
                          Fault(FaultKind.RAW, body=b"<p>hi</p>", content_type="text/html"),
                          Fault(FaultKind.TRICKLE, seconds=1.5))
        assert ask(api, prompt(QUERY, PASSAGE, "final_score")).startswith("You sent: Authorization: Bearer "
                                                                          "sk-loopback-key; ")
        raw = api.chat.completions.with_raw_response.create(model="judge", messages=prompt(QUERY, PASSAGE, "x"))
        assert raw.http_response.content == b"\xff not UTF-8 \xc3\x28"
        html = api.chat.completions.with_raw_response.create(model="judge", messages=prompt(QUERY, PASSAGE, "x"))
        assert (html.http_response.content, html.http_response.headers["content-type"]) == (b"<p>hi</p>", "text/html")
        started = time.monotonic()
        with pytest.raises(openai.APIConnectionError):  # one space every 0.1 s: the 1-s read timeout never fires
            client(server, timeout=1.0).chat.completions.create(model="judge", messages=prompt(QUERY, PASSAGE, "x"))
        assert time.monotonic() - started >= 1.5  # the body kept coming until the server dropped it
        stats = server.stats()
    assert stats.faults == {"rate_limit": 2, "quota": 1, "unauthorized": 1, "malformed": 1, "raw": 2, "trickle": 1}


def test_hostile_faults_are_checked_and_travel_to_a_server_in_its_own_process() -> None:
    with pytest.raises(ValueError, match="body is for 'raw' only"):
        Fault(FaultKind.SERVER_ERROR, body=b"x")
    with pytest.raises(ValueError, match="echo is for"):
        Fault(FaultKind.HANG, echo=True)
    fault = Fault(FaultKind.RAW, body=b"\xff\x00", content_type="text/plain", headers={"X-Test": "1"})
    assert Fault.from_json(json.loads(json.dumps(fault.to_json()))) == fault
    assert Fault(FaultKind.RATE_LIMIT, retry_after=2, headers={"retry-after": "-1"}).answer_headers() == {
        "retry-after": "-1"}
    assert Fault(FaultKind.RATE_LIMIT, retry_after=2.5).answer_headers() == {"Retry-After": "2.5"}

"""The builder's chat requests: the authors' prompts as data, strict readers, and a batch that asks nothing twice,
through a real HTTP server on loopback (the judge's servers, with a generation model's answers)."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import sqlite3
from pathlib import Path

import pytest
from generator_servers import counting, writer, written
from judge_servers import JudgeServer, completion, refuses_schema
from sentences import says

from disastir_mteb.building.generation import generate
from disastir_mteb.building.prompts import (
    PROMPT_DIGEST,
    PROMPT_VERSION,
    SLOTS,
    Ask,
    GeneratedQuery,
    need_ask,
    query_ask,
    read_needs,
    read_query,
    read_summary,
    sample_slots,
    summary_ask,
)
from disastir_mteb.building.store import BuildStore
from disastir_mteb.endpoints.pool import EndpointPool
from disastir_mteb.judging.protocol import MAX_ANSWER_ATTEMPTS, AnswerFault, AnswerFormat
from disastir_mteb.judging.store import JudgementStore
from disastir_mteb.vocabulary.taxonomy import Intent

MODEL = "writer-model"
PASSAGES = [f"Levee {n} on the Mississippi near Vicksburg was raised by crews of the Corps; {n * 3} homes flooded "
            f"and shelter {n} opened at the Vicksburg Convention Center for evacuees from ward {n}." for n in range(8)]


def test_the_prompts_are_pinned_by_their_version() -> None:
    """An edit of a prompt text without a new version would mix two protocols' answers in one store."""
    assert (PROMPT_VERSION, PROMPT_DIGEST) == ("disastir-appendix-b/1", "da621986ae8b8cc85873b61d095174db")


def test_a_need_request_is_the_papers_prompt_with_the_passage_as_the_authors_send_it() -> None:
    ask = need_ask(MODEL, Intent.QA, PASSAGES[0])
    (system, prompt), (user, paragraph) = ask.messages
    assert (system, user) == ("system", "user") and paragraph == "Paragraph: " + PASSAGES[0]
    assert prompt.startswith("Brainstorm a list of useful text retrieval tasks") and "JSON list of 3 strings" in prompt
    assert ask.key == need_ask(MODEL, Intent.QA, PASSAGES[0]).key != need_ask(MODEL, Intent.FC, PASSAGES[0]).key
    assert ask.key != need_ask("other-model", Intent.QA, PASSAGES[0]).key


@pytest.mark.parametrize("intent", list(Intent))
def test_a_query_request_fills_every_slot_its_prompt_names(intent: Intent) -> None:
    slots = sample_slots(intent, random.Random(3))
    assert set(slots) == set(SLOTS)
    ask = query_ask(MODEL, intent, PASSAGES[1], "Given a question about levees, retrieve a passage.", slots, 0)
    prompt = ask.messages[0][1]
    assert "{" not in prompt.replace("{{", "") and "Given a question about levees" in prompt
    named = {slot for slot in SLOTS if slots[slot] in prompt}
    assert named == (set() if intent in (Intent.QAdoc, Intent.Twitter) else set(SLOTS))  # as the paper prints them
    assert ask.schema["required"] == (["user_query"] if intent is Intent.QAdoc else ask.schema["required"])
    assert len(ask.schema["required"]) == (1 if intent is Intent.QAdoc else 2)
    assert ask.key != query_ask(MODEL, intent, PASSAGES[1], "another need", slots, 0).key
    assert ask.key != query_ask(MODEL, intent, PASSAGES[1], "Given a question about levees, retrieve a passage.",
                                slots, 1).key


def test_readers_take_what_was_asked_and_nothing_else() -> None:
    assert read_needs('["a", " b ", ""]') == ["a", "b"] == read_needs('```json\n{"tasks": ["a", "b"]}\n```')
    assert read_summary('{"summary": " S. "}') == "S."
    assert read_query(Intent.FC, '{"claim": "C", "positive_document": "D"}') == GeneratedQuery("C", "D")
    assert read_query(Intent.QAdoc, '{"user_query": "Q"}') == GeneratedQuery("Q", None)
    for reader, text in [(read_needs, "[]"), (read_needs, '{"tasks": [1]}'), (read_needs, "Sure! Here they are"),
                         (read_summary, '{"summary": ""}'),
                         (lambda t: read_query(Intent.QA, t), '{"user_query": "Q"}'),
                         (lambda t: read_query(Intent.NLI, t), '{"premise": "P", "entailed_hypothesis": 3}')]:
        with pytest.raises(AnswerFault):
            reader(text)


def _read(ask: Ask, text: str | None) -> object:
    if ask.stage == "need":
        return read_needs(text)
    if ask.stage == "summary":
        return read_summary(text)
    return read_query(Intent.FC, text).__dict__


def _asks() -> list[Ask]:
    return [need_ask(MODEL, Intent.FC, passage) for passage in PASSAGES] + [summary_ask(MODEL, PASSAGES[0])]


def test_a_batch_is_answered_once_and_a_rerun_sends_nothing(tmp_path: Path) -> None:
    seen: list[dict] = []
    asks = _asks()
    with JudgeServer(counting(writer(), seen.append)) as server:
        with BuildStore(tmp_path / "b.sqlite") as store:
            values, summary = generate(asks, store, EndpointPool([server.base_url], concurrency=2), model=MODEL,
                                       read=_read)
            assert summary.sent == len(asks) and not summary.given_up and set(values) == {a.key for a in asks}
            assert all(len(values[a.key]) == 3 for a in asks[:-1]) and values[asks[-1].key].startswith("Summary:")
            again, summary = generate(asks, store, EndpointPool([server.base_url], concurrency=2), model=MODEL,
                                      read=_read)
            assert again == values and summary.sent == 0 and summary.reused == len(asks)
            counts = store.counts()
    assert len(seen) == len(asks) and {r["response_format"]["type"] for r in seen} == {"json_schema"}
    assert counts["need"] == {"readable": 8, "unreadable": 0, "tries": 8, "prompt_tokens": 800, "completion_tokens": 56}


def test_a_server_without_structured_outputs_is_asked_in_a_plainer_format(tmp_path: Path) -> None:
    with JudgeServer(refuses_schema(written)) as server, BuildStore(tmp_path / "b.sqlite") as store:
        values, summary = generate(_asks()[:3], store, EndpointPool([server.base_url], concurrency=1), model=MODEL,
                                   read=_read)
        assert len(values) == 3 and not summary.given_up
        assert server.formats()[0] == "json_schema" and set(server.formats()[1:]) == {"json_object"}


def test_unreadable_answers_are_kept_and_given_up_after_the_judges_tries(tmp_path: Path) -> None:
    def broken(request: dict) -> tuple[int, str, bytes]:
        return 200, "application/json", completion(request, '{"tasks": ["cut off')

    asks = _asks()[:2]
    with JudgeServer(broken) as server, BuildStore(tmp_path / "b.sqlite") as store:
        values, summary = generate(asks, store, EndpointPool([server.base_url], concurrency=1), model=MODEL,
                                   read=_read, answer_format=AnswerFormat.PLAIN)
        assert values == {} and summary.given_up == {"unparseable": 2} and len(server.requests) == 2 * 3
        stored = store.answers(a.key for a in asks)
        assert all(s.attempts == MAX_ANSWER_ATTEMPTS and s.value is None for s in stored.values())
        _, summary = generate(asks, store, EndpointPool([server.base_url], concurrency=1), model=MODEL, read=_read)
        assert summary.sent == 0 and len(server.requests) == 6


def _child(url: str, store: str) -> None:
    with BuildStore(store) as opened:
        generate(_asks(), opened, EndpointPool([url], concurrency=1), model=MODEL, read=_read)


def test_a_build_killed_mid_batch_asks_no_answered_request_again(tmp_path: Path) -> None:
    """kill -9 while the fourth answer is being written: the three committed are never asked again."""
    asked: list[str] = []
    child: list[multiprocessing.Process] = []

    def killing(request: dict) -> tuple[int, str, bytes]:
        asked.append(json.dumps(request["messages"]))
        if len(asked) == 4:
            os.kill(child[0].pid, signal.SIGKILL)
        return writer()(request)

    with JudgeServer(killing) as server:
        process = multiprocessing.get_context("fork").Process(target=_child, args=(server.base_url, tmp_path / "b"))
        child.append(process)
        process.start()
        process.join(60)
        assert process.exitcode == -signal.SIGKILL
        before = list(asked)
        with BuildStore(tmp_path / "b") as store:
            committed = {k for k, s in store.answers(a.key for a in _asks()).items() if s.value is not None}
            values, summary = generate(_asks(), store, EndpointPool([server.base_url], concurrency=1), model=MODEL,
                                       read=_read)
    assert len(committed) == 3 and summary.reused == 3 and len(values) == len(_asks())
    after = asked[len(before):]
    assert not set(after) & set(before[:3]) and len(after) == len(_asks()) - 3


def test_the_build_store_shares_its_file_with_the_judges_store(tmp_path: Path) -> None:
    with BuildStore(tmp_path / "s.sqlite") as store:
        store.record("k", "need", raw="[]", value=["a"])
    with JudgementStore(tmp_path / "s.sqlite") as judge:
        assert judge.counts() is not None
    with BuildStore(tmp_path / "s.sqlite") as store:
        assert store.answers(["k"])["k"].value == ["a"]
    with sqlite3.connect(tmp_path / "other.sqlite") as db:
        db.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(ValueError) as raised:
        BuildStore(tmp_path / "other.sqlite")
    says(str(raised.value), tmp_path / "other.sqlite", "users", "build store", "--store")


def test_a_damaged_build_store_is_one_sentence_naming_it(tmp_path: Path) -> None:
    """Zeroed pages in the middle of the store: SQLite's error named, never an answer read as missing or other."""
    path = tmp_path / "b.sqlite"
    with BuildStore(path) as store:
        for n in range(400):
            store.record(f"k{n}", "need", raw="[]" * 50, value=[f"need {n}"] * 20)
    data = bytearray(path.read_bytes())
    data[4096:4096 * 4] = bytes(4096 * 3)
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError) as raised:
        with BuildStore(path) as store:
            store.answers(f"k{n}" for n in range(400))
    says(str(raised.value), path)
    assert "SQLite" in str(raised.value)


def test_429s_and_500s_are_waited_out_and_a_dead_server_is_one_sentence_keeping_every_answer(tmp_path: Path) -> None:
    """The judge's pool carries a build's requests: its patience with rate limits and server errors, its stop."""
    from loopback import Fault, FaultKind, LoopbackServer

    from disastir_mteb.endpoints.pool import EndpointError, EndpointLimits

    asks = _asks()
    with LoopbackServer(answer=written) as server, BuildStore(tmp_path / "b.sqlite") as store:
        server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=0), Fault(FaultKind.RATE_LIMIT, retry_after=0),
                          Fault(FaultKind.SERVER_ERROR))
        values, summary = generate(asks[:4], store, EndpointPool([server.base_url], concurrency=1), model=MODEL,
                                   read=_read)
        assert len(values) == 4 and summary.sent == 4 and not summary.given_up
        assert server.stats().faults == {"rate_limit": 2, "server_error": 1}
        server.fail_all()
        quick = EndpointLimits(max_retries=1)  # the client gives the dead server up after one retry, not four (7 s)
        with pytest.raises(EndpointError) as stopped:
            generate(asks, store, EndpointPool([server.base_url], concurrency=1, timeout=2, limits=quick), model=MODEL,
                     read=_read)
        says(str(stopped.value), server.base_url)
        assert {key: stored.value for key, stored in store.answers(a.key for a in asks).items()} == values

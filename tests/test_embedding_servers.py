"""Runs whose vectors come from embedding servers (issue 24), scored exactly as in-process runs.

The servers are real: :class:`~loopback.LoopbackServer` on 127.0.0.1, talked to by
the real ``openai`` client through :class:`~disastir_mteb.models.embedding_servers.EmbeddingServers`. Their
embed function is a real sentence-transformers model shaped as MiniLM (conftest's ``tiny_model``: what is checked is
the serving, not MiniLM's numbers), memoised per text so that the corpus is encoded once per module however
many runs ask for it; a text the client sends in another form (its instruction missing, say) is another text
and gets its own vector, so the memo hides nothing. Data: a 300-passage generated sample and two tasks, one
QA and one STS. The kill -9 test needs more than one store chunk, so it runs on the 1,500-passage sample with
a hashing embedder behind the server.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from loopback import Fault, FaultKind, LoopbackServer, LoopbackStats, MemoisedEncoder
from sentences import says

from disastir_mteb import cli
from disastir_mteb.endpoints.pool import LONGEST_WAIT_ENV, RATE_LIMIT_PATIENCE_ENV, REDACTED, EndpointError
from disastir_mteb.models.embedding_servers import EmbeddingServers, probe_request
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.results.metrics import MAIN_METRIC
from disastir_mteb.runner.run import build_search, evaluate, serve_model
from disastir_mteb.search.store import CHUNK_SIZE
from disastir_mteb.vocabulary.instructions import resolve_instructions
from disastir_mteb.vocabulary.run_settings import RunSettings
from disastir_mteb.vocabulary.taxonomy import get_spec, task_file_stem

MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the served name: what the servers list and are asked for
TASKS = ["DisastIR-QA-Bio", "DisastIR-STS-Tech"]
HASHING = "disastir-tests/hashing"
#: Every text a probe request holds, whatever the batch size (its fillers are numbered alike at every size).
PROBE_SET = frozenset(probe_request(1024))
#: The requests of one server's probe: the request, again, permuted, four texts alone, in base64.
PROBE_REQUESTS = 5


# ---------------------------------------------------------------------- data, the served model, the reference


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from disastir_mteb.sample.generator import write_sample
    from disastir_mteb.sample.scale import SampleScale

    scale = SampleScale("tiny", n_passages=300, queries_per_task=3, judged_per_query=6, passage_words=16)
    return write_sample(tmp_path_factory.mktemp("servers") / "data", scale=scale)


def corpus_texts(data: Path) -> list[str]:
    with (data / "corpus.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle]


def query_texts(data: Path, instructions: str | None) -> list[str]:
    """The tasks' queries exactly as the model must receive them (the instruction in front, or raw)."""
    config = resolve_instructions(instructions)
    texts = []
    for name in TASKS:
        spec = get_spec(name)
        rows = json.loads((data / "query" / f"{task_file_stem(spec.intent, spec.category)}.json").read_text("utf-8"))
        texts += [config.format(spec.intent, row["user_query"]) for row in rows]
    return texts


@pytest.fixture(scope="module")
def in_process(tiny_model: Path) -> Any:
    """The served model, as an in-process run holds it (``-m ./folder``)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(tiny_model), device="cpu")


@pytest.fixture(scope="module")
def minilm(in_process: Any, tiny: Path) -> MemoisedEncoder:
    """The served embed function (named for the model the small one stands in for, under its served name ``MODEL``).

    Warm before any server starts, so that no answer is slow enough to meet a test's short timeout.
    """
    embed = MemoisedEncoder(in_process)
    embed(corpus_texts(tiny) + query_texts(tiny, None) + query_texts(tiny, "disastir"))
    return embed


def ndcg(result: Any) -> dict[str, float]:
    """NDCG@10 (the main score) per task of an mteb ModelResult."""
    return {task.task_name: task.scores["test"][0][MAIN_METRIC.key] for task in result.task_results}


@pytest.fixture(scope="module")
def reference(in_process: Any, tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str | None,
                                                                                                dict[str, float]]:
    """NDCG@10 per task of the in-process run, without and with the DisastIR instructions."""
    store, out = tmp_path_factory.mktemp("reference-store"), tmp_path_factory.mktemp("reference-results")
    scores = {instructions: ndcg(evaluate(in_process, TASKS, data=tiny, instructions=instructions, cache_dir=store,
                                          output_folder=out, show_progress=False))
              for instructions in (None, "disastir")}
    assert scores[None] != pytest.approx(scores["disastir"], abs=1e-3)  # instructions change the scores
    assert sorted(scores[None]) == sorted(TASKS)
    return scores


def is_probe(texts: Sequence[str]) -> bool:
    return set(texts) <= PROBE_SET


def sent_texts(stats: LoopbackStats) -> list[str]:
    """The texts a server encoded for the run: its answered embeddings requests but the probe's."""
    return [text for request in stats.answered if not is_probe(request.texts) for text in request.texts]


def run_on(served: EmbeddingServers, data: Path, out: Path, **options: Any) -> dict[str, float]:
    """NDCG@10 per task of a run on ``served`` (closed afterwards), nothing persisted."""
    try:
        return ndcg(evaluate(served, TASKS, data=data, cache_dir=False, output_folder=out, show_progress=False,
                             **options))
    finally:
        served.close()


def run_cli(*arguments: str, data: Path, out: Path) -> int:
    return cli.main(["run", *arguments, "--data", str(data), "-t", TASKS[0], "--output-folder", str(out),
                     "--no-cache", "--quiet"])


@pytest.fixture
def on_tiny(tiny: Path, use_data: Callable[[Path], None]) -> Path:
    """For command-line runs, which point the whole process at their data: restored after the test."""
    use_data(tiny)
    return tiny


def one_sentence(stderr: str) -> str:
    """The command's error sentence (its last line), checked to come without a traceback."""
    assert "Traceback" not in stderr, stderr
    line = stderr.strip().splitlines()[-1]
    assert line.startswith("disastir-mteb run: "), stderr
    return line


@pytest.fixture
def servers() -> Iterator[Callable[..., LoopbackServer]]:
    """Start loopback servers for one test: ``start(**LoopbackServer keywords)``; all closed at its end."""
    with ExitStack() as stack:
        yield lambda **options: stack.enter_context(LoopbackServer(**options))


def truncated(embed: Callable[[list[str]], Sequence[Sequence[float]]]) -> Callable[[list[str]], list[list[float]]]:
    """The same vectors less their last coordinate: another serving of the model (e.g. Matryoshka-shortened)."""
    return lambda texts: [list(vector)[:-1] for vector in embed(texts)]


# ---------------------------------------------------------------------- the same scores as in-process


@pytest.mark.parametrize("instructions", [None, "disastir"])
def test_one_server_scores_as_the_in_process_model_and_receives_the_texts_it_would(
        instructions: str | None, minilm: MemoisedEncoder, reference: dict[str | None, dict[str, float]], tiny: Path,
        servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    server = servers(embed=minilm, model=MODEL)
    result = evaluate(MODEL, TASKS, data=tiny, embeddings_url=server.base_url, instructions=instructions,
                      cache_dir=False, output_folder=tmp_path, show_progress=False)
    assert ndcg(result) == pytest.approx(reference[instructions], abs=1e-6)
    # Every passage raw and every query in the form an in-process model gets it, each exactly once.
    assert Counter(sent_texts(server.stats())) == Counter(corpus_texts(tiny) + query_texts(tiny, instructions))
    assert all(request.request["model"] == MODEL for request in server.stats().answered)


@pytest.mark.parametrize("n_servers", [2, 3])
def test_several_servers_share_the_corpus_and_score_as_one(
        n_servers: int, minilm: MemoisedEncoder, reference: dict[str | None, dict[str, float]], tiny: Path,
        servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    started = [servers(embed=minilm, model=MODEL, latency=0.02) for _ in range(n_servers)]
    result = evaluate(MODEL, TASKS, data=tiny, embeddings_url=[server.base_url for server in started],
                      embeddings_concurrency=1, cache_dir=False, output_folder=tmp_path, show_progress=False)
    assert ndcg(result) == pytest.approx(reference[None], abs=1e-6)
    sent = [sent_texts(server.stats()) for server in started]
    assert all(sent), [len(texts) for texts in sent]  # every server encoded part of the run
    assert Counter(text for texts in sent for text in texts) == Counter(corpus_texts(tiny) + query_texts(tiny, None))


def test_a_server_that_dies_mid_run_leaves_its_batches_to_the_others(
        minilm: MemoisedEncoder, reference: dict[str | None, dict[str, float]], tiny: Path,
        servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    dying = servers(embed=minilm, model=MODEL, latency=0.1)
    living = servers(embed=minilm, model=MODEL, latency=0.1)
    served = EmbeddingServers(MODEL, [dying.base_url, living.base_url], concurrency=2)
    down, up = served.servers
    down.client = down.client.with_options(max_retries=1)  # give the dead server up in a second, not in 7

    def die_after_two_answers() -> None:  # the server goes away, port and all, with two requests in flight
        deadline = time.monotonic() + 60
        while down.answered < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        dying.close()

    death = threading.Thread(target=die_after_two_answers)
    death.start()
    assert run_on(served, tiny, tmp_path) == pytest.approx(reference[None], abs=1e-6)
    death.join()
    assert (down.alive, up.alive) == (False, True) and down.retried >= 1
    assert 2 <= down.answered < up.answered
    sent = Counter(sent_texts(dying.stats()) + sent_texts(living.stats()))
    assert set(sent) == set(corpus_texts(tiny) + query_texts(tiny, None))  # a batch lost in the death is sent again


# ---------------------------------------------------------------------- faults


@pytest.mark.parametrize("fault", [Fault(FaultKind.RATE_LIMIT, retry_after=1), Fault(FaultKind.SERVER_ERROR),
                                   Fault(FaultKind.HANG, seconds=30), Fault(FaultKind.CLOSE)],
                         ids=lambda fault: fault.kind.value)
def test_a_fault_that_retrying_mends_leaves_the_scores_unchanged(
        fault: Fault, minilm: MemoisedEncoder, reference: dict[str | None, dict[str, float]], tiny: Path,
        servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    server = servers(embed=minilm, model=MODEL)
    served = EmbeddingServers(MODEL, server.base_url, concurrency=1, timeout=1.0)  # a hang ends after 1 s
    server.add_faults(fault)  # after the probe: the fault meets a batch of the run
    started = time.monotonic()
    assert run_on(served, tiny, tmp_path) == pytest.approx(reference[None], abs=1e-6)
    stats, (state,) = server.stats(), served.servers
    assert stats.faults == {fault.kind.value: 1} and state.retried == 1 and state.alive
    assert Counter(sent_texts(stats)) == Counter(corpus_texts(tiny) + query_texts(tiny, None))
    if fault.kind is FaultKind.RATE_LIMIT:  # waited what Retry-After asked before asking again
        (event,) = stats.fault_log
        retry = next(request for request in stats.answered if request.answered_at > event.sent_at)
        assert state.rate_limited == 1 and retry.answered_at - event.sent_at >= 1.0
    if fault.kind is FaultKind.HANG:  # given up after the timeout, not after the hang
        assert time.monotonic() - started < 20


@pytest.mark.parametrize("fault", [Fault(FaultKind.SERVER_ERROR), Fault(FaultKind.RATE_LIMIT, retry_after=0.5)],
                         ids=lambda fault: fault.kind.value)
def test_a_fault_on_the_first_request_is_retried_as_well(
        fault: Fault, minilm: MemoisedEncoder, reference: dict[str | None, dict[str, float]], tiny: Path,
        servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    """The probe that reads the dimension and identity before the run: a server still loading its model answers 503."""
    server = servers(embed=minilm, model=MODEL)
    server.add_faults(fault)
    result = evaluate(MODEL, TASKS, data=tiny, embeddings_url=server.base_url, cache_dir=False, output_folder=tmp_path,
                      show_progress=False)
    assert ndcg(result) == pytest.approx(reference[None], abs=1e-6)
    stats = server.stats()
    assert stats.faults == {fault.kind.value: 1} and stats.fault_log[0].sent_at < stats.answered[0].answered_at
    assert stats.answered[0].texts == list(probe_request(32))  # the probe, answered when retried


def test_vectors_listed_out_of_order_are_placed_by_their_index(
        minilm: MemoisedEncoder, reference: dict[str | None, dict[str, float]], tiny: Path,
        servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    server = servers(embed=minilm, model=MODEL)
    served = EmbeddingServers(MODEL, server.base_url)
    server.fail_all(Fault(FaultKind.SHUFFLED))  # every answer lists its vectors last to first
    assert run_on(served, tiny, tmp_path) == pytest.approx(reference[None], abs=1e-6)
    stats = server.stats()
    assert stats.faults["shuffled"] == len(stats.answered) - PROBE_REQUESTS > 1  # every request of the run


WRONG_ANSWERS = [(FaultKind.WRONG_DIMENSION, "vectors of different dimensions [383, 384] in one answer"),
                 (FaultKind.WRONG_COUNT, "returned 31 vector(s) for 32 text(s)"),
                 (FaultKind.NON_FINITE, "a vector with NaN or infinite values (text 0 of the request")]


@pytest.mark.parametrize(("kind", "says"), WRONG_ANSWERS, ids=[kind.value for kind, _ in WRONG_ANSWERS])
def test_a_wrong_answer_stops_the_run_with_one_sentence_naming_the_server(
        kind: FaultKind, says: str, minilm: MemoisedEncoder, on_tiny: Path, servers: Callable[..., LoopbackServer],
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = servers(embed=minilm, model=MODEL), servers(embed=minilm, model=MODEL)
    served = EmbeddingServers(MODEL, [good.base_url, bad.base_url])
    bad.add_faults(Fault(kind))
    with pytest.raises(EndpointError) as error:
        run_on(served, on_tiny, tmp_path / "api")
    assert str(error.value).startswith(f"{bad.base_url} ") and says in str(error.value)

    # The command line: exit code 2 and the sentence, the probe's requests first (their vectors placed by index).
    bad.add_faults(*[Fault(FaultKind.SHUFFLED)] * PROBE_REQUESTS, Fault(kind))
    assert run_cli("-m", MODEL, "--embeddings-url", bad.base_url, data=on_tiny, out=tmp_path / "cli") == 2
    sentence = one_sentence(capsys.readouterr().err)
    assert sentence.startswith(f"disastir-mteb run: {bad.base_url} ") and says in sentence


def test_a_server_whose_vectors_change_dimension_mid_run_stops_it(
        minilm: MemoisedEncoder, tiny: Path, servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    changed = threading.Event()
    server = servers(embed=lambda texts: (truncated(minilm) if changed.is_set() else minilm)(texts), model=MODEL)
    served = EmbeddingServers(MODEL, server.base_url)
    changed.set()  # the server's model was swapped after the run began
    with pytest.raises(EndpointError) as changed_model:
        run_on(served, tiny, tmp_path)
    says(str(changed_model.value), server.base_url, "383-dimensional", "384", "when the run began")


def test_an_all_zero_vector_stops_the_run(minilm: MemoisedEncoder, tiny: Path,
                                          servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    """A zero vector has no direction: cosine would rank its passage silently last (or NaN), never a score."""
    empty = corpus_texts(tiny)[7]
    server = servers(embed=lambda texts: [[0.0] * 384 if text == empty else vector
                                          for text, vector in zip(texts, minilm(texts), strict=True)], model=MODEL)
    with pytest.raises(EndpointError) as error:
        run_on(EmbeddingServers(MODEL, server.base_url), tiny, tmp_path)
    says(str(error.value), server.base_url, "all-zero vector", repr(empty[:60]))


OTHER_WIDTHS = [("float64", "returned base64 embeddings of 3072 bytes, which is 768 float32 values, but its vectors "
                            "have 384 dimensions (1536 bytes): it may be sending float64; "),
                ("float16", "returned base64 embeddings of 768 bytes, which is 192 float32 values, but its vectors "
                            "have 384 dimensions (1536 bytes): it may be sending float16 or bfloat16; ")]


@pytest.mark.parametrize(("number_type", "says"), OTHER_WIDTHS, ids=[number_type for number_type, _ in OTHER_WIDTHS])
def test_base64_of_another_width_mid_run_stops_the_run_naming_the_server(
        number_type: str, says: str, minilm: MemoisedEncoder, on_tiny: Path, servers: Callable[..., LoopbackServer],
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A server that sent float32 to the probe and another width after it (restarted with other settings, say)."""
    def switching(texts: list[str]) -> Sequence[Sequence[float]]:
        if not is_probe(texts):  # the run's first batch: this very answer goes out in the other width
            server.base64_type = number_type
        return minilm(texts)

    server = servers(embed=switching, model=MODEL)
    served = EmbeddingServers(MODEL, server.base_url)
    assert served.dimension == 384 and server.base64_type == "float32"
    with pytest.raises(EndpointError) as error:
        run_on(served, on_tiny, tmp_path / "api")
    assert str(error.value).startswith(f"{server.base_url} {says}")
    assert str(error.value).endswith("the OpenAI API's base64 embeddings are little-endian float32, so the run stops "
                                     "rather than read them as vectors of another width: have the server send "
                                     "float32.")
    server.base64_type = "float32"
    assert run_cli("-m", MODEL, "--embeddings-url", server.base_url, data=on_tiny, out=tmp_path / "cli") == 2
    assert one_sentence(capsys.readouterr().err) == f"disastir-mteb run: {error.value}"
    assert not list((tmp_path / "cli").rglob("*.json"))  # no result of the task


@pytest.mark.parametrize(("number_type", "size"), [("float64", 3072), ("float16", 768), ("bfloat16", 768)],
                         ids=["float64", "float16", "bfloat16"])
def test_base64_of_another_width_is_named_by_the_probe_before_anything_is_encoded(
        number_type: str, size: int, minilm: MemoisedEncoder, on_tiny: Path, servers: Callable[..., LoopbackServer],
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The probe asks for numbers, then for base64 of the same texts: the width whose reading is the numbers."""
    server = servers(embed=minilm, model=MODEL, base64_type=number_type)
    assert run_cli("-m", MODEL, "--embeddings-url", server.base_url, data=on_tiny, out=tmp_path) == 2
    sentence = one_sentence(capsys.readouterr().err)
    says(sentence, server.base_url, f"as {number_type}:", f"{size} bytes a vector", "384 dimensions",
         "have the server send float32.")
    assert all(is_probe(request.texts) for request in server.stats().answered)  # nothing of the run sent
    assert not list(tmp_path.rglob("*.json"))


BASE64_FOR_NUMBERS = {
    "float64": "but read as 384 float64 values: it appears to send float64",
    "float16": "are no plausible float32 (lengths of ",
    "bfloat16": "read plausibly as 192 float32 values, as 384 float16 values and as 384 bfloat16 values;",
}


@pytest.mark.parametrize("number_type", ["float32", *BASE64_FOR_NUMBERS])
def test_base64_sent_for_numbers_is_read_only_where_float32_alone_is_plausible(
        number_type: str, minilm: MemoisedEncoder, reference: dict[str | None, dict[str, float]], on_tiny: Path,
        servers: Callable[..., LoopbackServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A server answering base64 even to the probe's request for JSON numbers: nothing gives the width but the bytes."""
    server = servers(embed=minilm, model=MODEL, base64_type=number_type, base64_always=True)
    code = run_cli("-m", MODEL, "--embeddings-url", server.base_url, data=on_tiny, out=tmp_path)
    if number_type == "float32":  # plausible as float32 alone: read so, the in-process scores
        assert code == 0
        (path,) = tmp_path.rglob(f"{TASKS[0]}.json")
        score = json.loads(path.read_text(encoding="utf-8"))["scores"]["test"][0][MAIN_METRIC.key]
        assert score == pytest.approx(reference[None][TASKS[0]], abs=1e-6)
        return
    assert code == 2
    sentence = one_sentence(capsys.readouterr().err)
    says(sentence, server.base_url, "answered base64 although asked for JSON numbers", "have the server send float32")
    assert BASE64_FOR_NUMBERS[number_type] in sentence, sentence
    assert all(is_probe(request.texts) for request in server.stats().answered)


def test_vectors_far_from_the_probes_lengths_stop_the_run(
        minilm: MemoisedEncoder, tiny: Path, servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    """Numbers of another scale mid-run (normalisation turned off, another number type read alike): refused."""
    changed = threading.Event()
    server = servers(embed=lambda texts: [[1000 * value for value in vector] if changed.is_set() else vector
                                          for vector in minilm(texts)], model=MODEL)
    served = EmbeddingServers(MODEL, server.base_url)
    changed.set()
    with pytest.raises(EndpointError) as error:
        run_on(served, tiny, tmp_path)
    says(str(error.value), server.base_url, "returned a vector of length 1e+03", "where its probe's vectors are 1 to 1 "
         "long", "so the run stops rather than score them.")


# ---------------------------------------------------------------------- the probe: vectors follow their texts


def reversed_when_large(embed: Callable[[list[str]], Sequence[Sequence[float]]]) -> Callable[..., list[Any]]:
    """The vectors of every request of more than 5 texts listed last to first, under the true indexes."""
    return lambda texts: list(embed(texts))[::-1] if len(texts) > 5 else list(embed(texts))


def rotated_when_large(embed: Callable[[list[str]], Sequence[Sequence[float]]]) -> Callable[..., list[Any]]:
    """Each vector of a request of more than 5 texts given to the text before it (a rotation by one)."""
    return lambda texts: (lambda rows: rows[1:] + rows[:1] if len(texts) > 5 else rows)(list(embed(texts)))


def shuffled_when_large(embed: Callable[[list[str]], Sequence[Sequence[float]]]) -> Callable[..., list[Any]]:
    """The vectors of a request of more than 16 texts in a random order of their own, another each time."""
    import random

    def answer(texts: list[str]) -> list[Any]:
        rows = list(embed(texts))
        if len(texts) > 16:
            random.shuffle(rows)
        return rows

    return answer


def sorted_by_length(embed: Callable[[list[str]], Sequence[Sequence[float]]]) -> Callable[..., list[Any]]:
    """The vectors in the order of the texts' lengths (a server that sorts its batch and forgets to sort back)."""
    return lambda texts: [list(embed(texts))[i] for i in sorted(range(len(texts)), key=lambda i: len(texts[i]))]


MIXED_UP = {"reversed": reversed_when_large, "rotated": rotated_when_large, "shuffled": shuffled_when_large,
            "sorted by length": sorted_by_length}


@pytest.mark.parametrize("fault", list(MIXED_UP))
def test_a_server_that_mixes_up_the_vectors_of_large_requests_is_refused_before_anything_is_encoded(
        fault: str, minilm: MemoisedEncoder, on_tiny: Path, servers: Callable[..., LoopbackServer], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the probe's one small request came back right, the run's did not: NDCG 0.00 / 0.00 / 0.92, exit 0."""
    server = servers(embed=MIXED_UP[fault](minilm), model=MODEL)
    assert run_cli("-m", MODEL, "--embeddings-url", server.base_url, data=on_tiny, out=tmp_path) == 2
    sentence = one_sentence(capsys.readouterr().err)
    says(sentence, server.base_url, "returned vectors that do not follow their texts",
         "the run stops rather than file vectors under the wrong texts.")
    assert all(is_probe(request.texts) for request in server.stats().answered)  # nothing of the run sent
    assert not list(tmp_path.rglob("*.json"))


def test_a_server_embedding_every_text_alike_is_refused(servers: Callable[..., LoopbackServer]) -> None:
    server = servers(embed=lambda texts: [[0.6, 0.8, 0.0]] * len(texts), model="m")
    with pytest.raises(EndpointError) as error:
        EmbeddingServers("m", server.base_url)
    says(str(error.value), server.base_url, "returned one vector for all 32 different texts of the probe",
         "it does not embed what it is sent")


@pytest.mark.parametrize("batch_size", [8, 64])
def test_the_probe_is_one_request_as_large_as_the_runs_batches(
        batch_size: int, minilm: MemoisedEncoder, reference: dict[str | None, dict[str, float]], tiny: Path,
        servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    server = servers(embed=minilm, model=MODEL)
    result = evaluate(MODEL, TASKS, data=tiny, embeddings_url=server.base_url, batch_size=batch_size, cache_dir=False,
                      output_folder=tmp_path, show_progress=False)
    assert ndcg(result) == pytest.approx(reference[None], abs=1e-6)
    probe = [request.texts for request in server.stats().answered[:PROBE_REQUESTS]]
    texts = list(probe_request(batch_size))
    assert len(texts) == max(batch_size, 11) and texts[1] == texts[-1]
    assert probe[0] == probe[1] == probe[4] == texts and sorted(probe[2]) == sorted(texts) != probe[2]
    assert len(probe[3]) == 4 and set(probe[3]) < set(texts)
    assert max(len(request.texts) for request in server.stats().answered[PROBE_REQUESTS:]) == batch_size


# ---------------------------------------------------------------------- the probe: its tolerance and the store


@pytest.fixture(scope="module")
def nearby(in_process: Any, tiny: Path) -> Callable[[float], MemoisedEncoder]:
    """The served model with Gaussian noise of ``scale`` added to every weight: a nearby checkpoint, memoised."""
    import copy

    import torch

    made: dict[float, MemoisedEncoder] = {}

    def checkpoint(scale: float) -> MemoisedEncoder:
        if scale not in made:
            model = copy.deepcopy(in_process)
            generator = torch.Generator().manual_seed(50)
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.add_(torch.randn(parameter.shape, generator=generator) * scale)
            made[scale] = MemoisedEncoder(model)
        return made[scale]

    return checkpoint


def store_run(url: str, tiny: Path, store: Path | None, out: Path) -> dict[str, float]:
    """NDCG@10 per task of ``run --embeddings-url URL`` in Python, its vectors kept in ``store`` (None: nowhere)."""
    return ndcg(evaluate(MODEL, TASKS, data=tiny, embeddings_url=url, cache_dir=store or False, output_folder=out,
                         show_progress=False))


@pytest.mark.parametrize("scale", [5e-4, 5e-5, 5e-6])
def test_a_nearby_checkpoint_under_the_same_name_scores_as_a_fresh_run(
        scale: float, minilm: MemoisedEncoder, nearby: Callable[[float], MemoisedEncoder], tiny: Path,
        servers: Callable[..., LoopbackServer], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A server restarted on every weight + N(0, scale), same name and listing: before, the probe moved 0.0064 at 5e-4,
    under the fixed 1e-2, and the old checkpoint's vectors were reused with exit code 0."""
    store = tmp_path / "store"
    store_run(servers(embed=minilm, model=MODEL).base_url, tiny, store, tmp_path / "a")
    restarted = servers(embed=nearby(scale), model=MODEL)
    with caplog.at_level(logging.WARNING):
        scores = store_run(restarted.base_url, tiny, store, tmp_path / "b")
    fresh = store_run(servers(embed=nearby(scale), model=MODEL).base_url, tiny, None, tmp_path / "c")
    assert scores == pytest.approx(fresh, abs=1e-6)
    assert Counter(sent_texts(restarted.stats())) == Counter(corpus_texts(tiny) + query_texts(tiny, None))
    assert any("computes other vectors than when its cached embeddings were written" in record.getMessage()
               for record in caplog.records)


@pytest.mark.parametrize("sigma", [1e-5, 1e-4])
def test_a_server_adding_noise_of_its_own_is_measured_and_recognised_on_a_second_run(
        sigma: float, minilm: MemoisedEncoder, tiny: Path, servers: Callable[..., LoopbackServer],
        tmp_path: Path) -> None:
    """Its tolerance follows its noise (not the floor, not a constant), and the store knows it again."""
    from disastir_mteb.models.embedding_servers import NOISE_MULTIPLE, TOLERANCE_FLOOR

    generator = np.random.default_rng(7)
    server = servers(embed=lambda texts: (np.asarray(minilm(texts))
                                          + generator.normal(0, sigma, (len(texts), 384))).tolist(), model=MODEL)
    served = EmbeddingServers(MODEL, server.base_url)
    served.close()
    assert 2 * sigma < served.probe_noise < 20 * sigma  # the largest of 32 x 384 differences of two answers
    assert served.probe_tolerance == pytest.approx(NOISE_MULTIPLE * served.probe_noise)
    assert served.probe_tolerance > TOLERANCE_FLOOR
    store = tmp_path / "store"
    first = store_run(server.base_url, tiny, store, tmp_path / "a")
    server.reset_stats()
    assert store_run(server.base_url, tiny, store, tmp_path / "b") == first
    assert sent_texts(server.stats()) == []  # recognised: only the probe was asked


def test_a_damaged_probe_record_is_deleted_and_the_served_model_recognised_again(
        minilm: MemoisedEncoder, tiny: Path, servers: Callable[..., LoopbackServer], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """A server answering bit for bit alike gets the same fingerprint back from its own vectors: nothing re-encoded."""
    server, store = servers(embed=minilm, model=MODEL), tmp_path / "store"
    first = store_run(server.base_url, tiny, store, tmp_path / "a")
    (record,) = (store / "probes").rglob("*.npy")
    record.write_bytes(record.read_bytes()[:-8] + bytes(8))  # its last two numbers zeroed: no longer its digest
    server.reset_stats()
    with caplog.at_level(logging.WARNING):
        assert store_run(server.base_url, tiny, store, tmp_path / "b") == first
    assert sent_texts(server.stats()) == []  # recognised: only the probe was asked
    (warning,) = [entry.getMessage() for entry in caplog.records if "damaged" in entry.getMessage()]
    says(warning, record.name, "not used, and deleted")
    assert record.is_file()  # written again, whole
    assert np.load(record).shape == (32, 384)


def test_a_pinned_revision_and_the_served_identity_are_recorded_in_the_results(
        minilm: MemoisedEncoder, on_tiny: Path, servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    server = servers(embed=minilm, model=MODEL)
    served = EmbeddingServers(MODEL, server.base_url)
    served.close()
    for revision in ("checkpoint-a", None):
        out = tmp_path / str(revision)
        pinned = ("--embeddings-revision", revision) if revision else ()
        assert run_cli("-m", MODEL, "--embeddings-url", server.base_url, *pinned, data=on_tiny, out=out) == 0
        (folder,) = (out / "results" / MODEL.replace("/", "__")).iterdir()
        assert folder.name == (revision or served.served_revision)
        assert json.loads((folder / "model_meta.json").read_text(encoding="utf-8"))["revision"] == folder.name
        per_query = json.loads((folder / "disastir_per_query" / f"{TASKS[0]}_per_query.json").read_text("utf-8"))
        model = per_query["provenance"]["model"]
        assert (model["revision"], model["served"]) == (folder.name, served.served_revision)
        task = json.loads((folder / f"{TASKS[0]}.json").read_text(encoding="utf-8"))["scores"]["test"][0]
        assert task["disastir_model"] == model["fingerprint"]
        assert task["disastir_provenance"] == per_query["provenance"]["digest"]


# ---------------------------------------------------------------------- the store


def test_the_store_serves_a_rerun_and_keeps_different_servings_apart(
        minilm: MemoisedEncoder, tiny: Path, servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    store, n_passages = tmp_path / "store", len(corpus_texts(tiny))

    def run(server: LoopbackServer, revision: str | None = None) -> tuple[str, int, int, dict[str, float]]:
        served = EmbeddingServers(MODEL, server.base_url, revision=revision)
        searcher = build_search(served, RunSettings.from_options(cache_dir=store, progress=False))
        try:
            result = evaluate(searcher, TASKS, data=tiny, output_folder=tmp_path / f"results-{uuid.uuid4().hex}",
                              show_progress=False)
        finally:
            served.close()
        return served.mteb_model_meta.revision, searcher.passages_encoded, searcher.queries_encoded, ndcg(result)

    first = servers(embed=minilm, model=MODEL)
    revision, passages, queries, scores = run(first)
    assert revision.startswith("served-") and (passages, queries) == (n_passages, len(query_texts(tiny, None)))

    # The same model on another server (a restart: another port) is the same serving: nothing encoded again.
    again = servers(embed=minilm, model=MODEL)
    assert run(again) == (revision, 0, 0, scores)
    assert sent_texts(again.stats()) == []  # only the probe

    # Another serving of the name (other vectors, or another owner reported): another entry, encoded afresh.
    shortened = run(servers(embed=truncated(minilm), model=MODEL))
    owned = run(servers(embed=minilm, model=MODEL, owned_by="someone-else"))
    assert len({revision, shortened[0], owned[0]}) == 3
    assert shortened[1] == owned[1] == n_passages

    # A pinned revision is the entry's name, whatever the servers report.
    assert run(first, "checkpoint-a")[:2] == ("checkpoint-a", n_passages)
    assert run(first, "checkpoint-b")[:2] == ("checkpoint-b", n_passages)
    assert run(first, "checkpoint-a")[:3] == ("checkpoint-a", 0, 0)


def hashing_embed() -> Callable[[list[str]], list[list[float]]]:
    encoder = HashingEncoder()
    return lambda texts: encoder.embed(list(texts)).tolist()


def test_another_checkpoint_served_under_the_same_name_and_listing_gets_its_own_entry(
        minilm: MemoisedEncoder, tiny: Path, servers: Callable[..., LoopbackServer], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """Same name, listing and dimension, so the same ``served-`` revision: only the vectors tell them apart."""
    store = tmp_path / "store"

    def run(embed: Callable[[list[str]], Any], cache: Path | bool) -> tuple[str, int, dict[str, float]]:
        served = EmbeddingServers(MODEL, servers(embed=embed, model=MODEL).base_url)
        searcher = build_search(served, RunSettings.from_options(cache_dir=cache, progress=False))  # type: ignore[arg-type]
        try:
            result = evaluate(searcher, TASKS, data=tiny, output_folder=tmp_path / f"results-{uuid.uuid4().hex}",
                              show_progress=False)
        finally:
            served.close()
        return served.mteb_model_meta.revision, searcher.passages_encoded, ndcg(result)

    revision, _, scores = run(minilm, store)
    with caplog.at_level(logging.WARNING):
        other = run(hashing_embed(), store)
    assert other[0] == revision and other[1] == len(corpus_texts(tiny))  # the revision cannot tell; the probe does
    assert other[2] == run(hashing_embed(), False)[2] != scores
    (warning,) = [record.getMessage() for record in caplog.records]
    says(warning, f"{MODEL}@{revision}", "cached embeddings", f"{len(probe_request(32))} probe texts", "1e-05",
         "changed in place")


def test_a_ready_search_model_asks_the_servers_again_at_its_next_run(
        minilm: MemoisedEncoder, tiny: Path, servers: Callable[..., LoopbackServer], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """One search model, two runs, and between them the server's model was swapped (same name, listing, dimension)."""
    serving: dict[str, Callable[[list[str]], Any]] = {"embed": minilm}
    served = EmbeddingServers(MODEL, servers(embed=lambda texts: serving["embed"](texts), model=MODEL).base_url)
    try:
        searcher = build_search(served, RunSettings.from_options(cache_dir=tmp_path / "store", progress=False))
        before = ndcg(evaluate(searcher, TASKS, data=tiny, output_folder=tmp_path / "out", show_progress=False))
        serving["embed"] = hashing_embed()
        with caplog.at_level(logging.WARNING):
            after = ndcg(evaluate(searcher, TASKS, data=tiny, output_folder=tmp_path / "out", show_progress=False))
    finally:
        served.close()
    assert after == run_on(EmbeddingServers(MODEL, servers(embed=hashing_embed(), model=MODEL).base_url), tiny,
                           tmp_path / "alone") != before
    assert searcher.passages_encoded == 2 * len(corpus_texts(tiny))
    identified, replaced = [record.getMessage() for record in caplog.records]  # the model, then its results once
    says(identified, f"{MODEL}@{served.mteb_model_meta.revision}", "computes other vectors")
    assert replaced.startswith(f"{TASKS[0]}: the result in ") and "(model fingerprint " in replaced


def test_kill_9_of_a_run_mid_encoding_resumes_from_the_stored_chunks(
        sample_data: Path, servers: Callable[..., LoopbackServer], tmp_path: Path) -> None:
    store, task = tmp_path / "store", TASKS[0]
    n_passages = len(corpus_texts(sample_data))
    assert CHUNK_SIZE < n_passages < 2 * CHUNK_SIZE  # two chunks: the first stored, the second in flight
    released, embed = threading.Event(), hashing_embed()

    def embed_until_a_chunk_is_stored(texts: list[str]) -> list[list[float]]:
        if not released.is_set() and any(store.rglob("chunk_*.npy")):
            released.wait(60)  # the second chunk's requests wait for the kill
        return embed(texts)

    server = servers(embed=embed_until_a_chunk_is_stored, model=HASHING)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with (tmp_path / "stderr.txt").open("w+", encoding="utf-8") as stderr:
        run = subprocess.Popen([sys.executable, "-m", "disastir_mteb.cli", "run", "-m", HASHING, "--embeddings-url",
                                server.base_url, "--data", str(sample_data), "-t", task, "--cache-dir", str(store),
                                "--output-folder", str(tmp_path / "killed"), "--quiet"],
                               env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + 120
            while not any(store.rglob("chunk_*.npy")) and run.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            run.send_signal(signal.SIGKILL)
            code = run.wait(timeout=30)
            stderr.seek(0)
            assert code == -signal.SIGKILL, stderr.read()[-3000:]  # killed, not finished or failed
        finally:
            if run.poll() is None:
                run.kill()
            released.set()
    assert len(list(store.rglob("chunk_*.npy"))) == 1

    served = EmbeddingServers(HASHING, server.base_url)
    searcher = build_search(served, RunSettings.from_options(cache_dir=store, progress=False))
    try:
        resumed = ndcg(evaluate(searcher, [task], data=sample_data, output_folder=tmp_path / "killed",
                                show_progress=False))
    finally:
        served.close()
    assert searcher.passages_encoded == n_passages - CHUNK_SIZE  # the stored chunk is not asked for again
    whole = ndcg(evaluate(HASHING, [task], data=sample_data, embeddings_url=server.base_url, cache_dir=False,
                          output_folder=tmp_path / "whole", show_progress=False))
    assert resumed == pytest.approx(whole, abs=1e-6) and set(resumed) == {task}


# ---------------------------------------------------------------------- errors before any encoding


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("case", ["another model", "described differently", "other dimensions", "other vectors",
                                  "unreachable"])
def test_servers_that_cannot_serve_the_run_are_one_sentence_before_any_encoding(
        case: str, minilm: MemoisedEncoder, on_tiny: Path, servers: Callable[..., LoopbackServer], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    started = [servers(embed=minilm, model=MODEL)]
    if case == "another model":
        started = [servers(embed=minilm, model="BAAI/bge-small-en-v1.5")]
        says = f"{started[0].base_url} does not serve {MODEL!r}; it serves: BAAI/bge-small-en-v1.5."
    elif case == "described differently":
        started.append(servers(embed=minilm, model=MODEL, owned_by="someone-else"))
        says = f"The embedding servers describe {MODEL!r} differently, so their vectors must not be mixed: "
    elif case == "other dimensions":
        started.append(servers(embed=truncated(minilm), model=MODEL))
        says = (f"The embedding servers answer {MODEL!r} with different dimensions ({started[0].base_url}: 384, "
                f"{started[1].base_url}: 383); their vectors must not be mixed.")
    elif case == "other vectors":  # two checkpoints under one name, listing and dimension
        started.append(servers(embed=hashing_embed(), model=MODEL))
        says = (f"The embedding servers answer {MODEL!r} with different vectors for the same texts "
                f"({started[1].base_url} and {started[0].base_url}: up to ")
    urls = [server.base_url for server in started]
    if case == "unreachable":
        urls = [f"http://127.0.0.1:{free_port()}/v1"]
        says = f"{urls[0]} cannot be reached (APIConnectionError); start the embedding server first"
    options = [option for url in urls for option in ("--embeddings-url", url)]
    assert run_cli("-m", MODEL, *options, data=on_tiny, out=tmp_path) == 2
    captured = capsys.readouterr()
    assert one_sentence(captured.err).startswith(f"disastir-mteb run: {says}"), captured.err
    for server in started:  # nothing of the run was sent: at most the probe
        assert all(is_probe(request.texts) for request in server.stats().answered)


def test_the_key_comes_from_its_variable_and_is_never_printed_or_logged(
        minilm: MemoisedEncoder, on_tiny: Path, servers: Callable[..., LoopbackServer], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    default_key, named_key = f"sk-default-{uuid.uuid4().hex}", f"sk-named-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", default_key)
    monkeypatch.setenv("DISASTIR_TEST_EMBEDDINGS_KEY", named_key)
    server = servers(embed=minilm, model=MODEL)
    for key_env, key in (("OPENAI_API_KEY", default_key), ("DISASTIR_TEST_EMBEDDINGS_KEY", named_key)):
        served = serve_model(MODEL, server.base_url, key_env=key_env)
        try:
            assert [state.client.api_key for state in served.servers] == [key]
        finally:
            served.close()
    with caplog.at_level(logging.DEBUG):
        server.add_faults(Fault(FaultKind.SHUFFLED), Fault(FaultKind.SERVER_ERROR))  # a 500 and its retry logged too
        assert run_cli("-m", MODEL, "--embeddings-url", server.base_url, data=on_tiny, out=tmp_path / "a") == 0
        assert run_cli("-m", MODEL, "--embeddings-url", server.base_url, "--api-key-env",
                       "DISASTIR_TEST_EMBEDDINGS_KEY", data=on_tiny, out=tmp_path / "b") == 0
        assert run_cli("-m", "served/unknown", "--embeddings-url", server.base_url, data=on_tiny,
                       out=tmp_path / "c") == 2
    captured = capsys.readouterr()
    assert "Servers: " in captured.out and "does not serve 'served/unknown'" in captured.err
    assert any("HTTP Request: POST" in record.getMessage() for record in caplog.records)  # DEBUG logs were on
    for text in (captured.out, captured.err, caplog.text):
        assert default_key not in text and named_key not in text


def test_a_server_still_loading_its_model_is_waited_for() -> None:
    """``GET /v1/models`` answered 503 then 429 (a server still loading, then busy): asked again, not an error."""
    from loopback import Fault, FaultKind, LoopbackServer

    from disastir_mteb.models.embedding_servers import EmbeddingServers

    with LoopbackServer(embed=lambda texts: [[1.0, float(len(t))] for t in texts], model="m") as server:
        server.add_faults(Fault(FaultKind.SERVER_ERROR, path="/v1/models"),
                          Fault(FaultKind.RATE_LIMIT, retry_after=0.2, path="/v1/models"))
        served = EmbeddingServers("m", server.base_url)
        try:
            assert served.dimension == 2
            assert [(e.kind, e.path) for e in server.stats().fault_log] == [("server_error", "/v1/models"),
                                                                             ("rate_limit", "/v1/models")]
        finally:
            served.close()


def test_a_model_listing_asking_a_long_wait_or_trickling_is_asked_again_by_the_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``GET /v1/models`` is the client's alone: a ``Retry-After`` of 27 hours waited at the cap (0.2 s here), a
    listing sent one byte every 0.1 s cut off at the timeout (the pool's hook reads it) and asked again."""
    monkeypatch.setenv(LONGEST_WAIT_ENV, "0.2")
    with LoopbackServer(embed=toy_embed, model="m") as server:
        server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=100000, path="/v1/models"),
                          Fault(FaultKind.TRICKLE, seconds=3600, path="/v1/models"))
        started = time.monotonic()
        served = EmbeddingServers("m", server.base_url, timeout=1.0)
        try:
            assert served.dimension == len(toy_embed(["a"])[0]) and time.monotonic() - started < 20
            assert [event.kind for event in server.stats().fault_log] == ["rate_limit", "trickle"]
            says(served.servers[0].last_error, "no whole answer", "1 s")
        finally:
            served.close()


def test_the_store_streams_every_chunk_through_one_queue(tmp_path: Path) -> None:
    """Chunks do not wait for each other: six one-batch chunks at 0.2 s take about one round trip, not six."""
    from loopback import LoopbackServer

    from disastir_mteb.models.embedding_servers import EmbeddingServers

    with LoopbackServer(embed=lambda texts: [[1.0, float(len(t))] for t in texts], model="m") as server:
        served = EmbeddingServers("m", server.base_url, concurrency=6)
        try:
            server.set_latency(0.2)
            chunks = [[f"passage {c}-{i}" for i in range(4)] for c in range(6)]
            heard: list[int] = []
            started = time.perf_counter()
            outputs = list(served.encode_stream(chunks, heard.append, batch_size=4))
            seconds = time.perf_counter() - started
        finally:
            served.close()
    assert [o.tolist() for o in outputs] == [[[1.0, float(len(t))] for t in chunk] for chunk in chunks]
    assert heard == [4] * 6
    assert seconds < 0.8, seconds  # one chunk after the other: at least 6 x 0.2 s


# ---------------------------------------------------------------------- answers that are not the protocol's (issue 29)


def toy_embed(texts: list[str]) -> list[list[float]]:
    return [[1.0, float(len(text)), 0.5] for text in texts]


GARBAGE = [
    (Fault(FaultKind.RAW), "answered /embeddings with bytes that are not UTF-8 text (byte 0xff at position 0 of 14), "
                           "so not with the OpenAI API's JSON; check that this base URL is the server's API (it "
                           "usually ends in /v1)."),
    (Fault(FaultKind.RAW, body=b"<html><body>Welcome to Open WebUI</body></html>", content_type="text/html"),
     "answered /embeddings with something that is not JSON (text/html, 47 bytes, beginning '<html><body>Welcome to "
     "Open WebUI</body></html>'); check that this base URL is the server's API (it usually ends in /v1)."),
    (Fault(FaultKind.RAW, body=b'{"status": "ok"}'),
     "answered an embeddings request with something that is not an embeddings response (no 'data' list)."),
    (Fault(FaultKind.RAW, body=b'{"data": [{"index": 0, "embedding": "not base64!"}]}'),
     "returned an embedding that is neither a list of numbers nor base64."),
    (Fault(FaultKind.RAW, body=b'{"data": [{"index": 0, "embedding": [1, "x", 3]}]}'),
     "returned an embedding that is neither a list of numbers nor base64."),
    (Fault(FaultKind.RAW, body=b'{"data": [{"index": 3, "embedding": [1, 2, 3]}]}'),
     "returned vectors whose indexes are not 0..0 (got [3]); their order cannot be trusted."),
    (Fault(FaultKind.QUOTA), "refused a request: HTTP 429 (Error code: 429 - You exceeded your current quota, please "
                             "check your plan and billing details (scripted by the loopback server)); the account's "
                             "quota is used up, which waiting does not mend: check its plan and billing (or use "
                             "another server)."),
]


@pytest.mark.parametrize(("fault", "says"), GARBAGE,
                         ids=["not UTF-8", "HTML", "other JSON", "bad base64", "not numbers", "wrong index", "quota"])
def test_an_answer_that_is_not_an_embeddings_answer_is_one_sentence_naming_the_server(fault: Fault, says: str) -> None:
    with LoopbackServer(embed=toy_embed, model="m") as server:
        served = EmbeddingServers("m", server.base_url)
        try:
            server.add_faults(fault)
            with pytest.raises(EndpointError) as stopped:
                served.embed(["one text"])
        finally:
            served.close()
    assert str(stopped.value) == f"{served.servers[0].url} {says}"


LISTINGS = [(b"<html>not a listing</html>", "answered /models with something that is not JSON (application/json, "
                                          "26 bytes, beginning '<html>not a listing</html>'); check that this base "
                                          "URL is the server's API (it usually ends in /v1)."),
            (b'{"object": "list", "data": "none"}', "answered GET /models, but not with a model list (a 'data' list "
                                                    "of models with an 'id' each); check that this base URL is the "
                                                    "server's API (it usually ends in /v1).")]


@pytest.mark.parametrize(("body", "says"), LISTINGS, ids=["HTML", "no list"])
def test_a_model_listing_that_is_not_one_is_one_sentence_before_anything_is_encoded(body: bytes, says: str) -> None:
    with LoopbackServer(embed=toy_embed, model="m") as server:
        server.add_faults(Fault(FaultKind.RAW, body=body, path="/v1/models"))
        url = server.base_url
        with pytest.raises(EndpointError) as stopped:
            EmbeddingServers("m", url)
        assert server.stats().answered == ()  # nothing sent to encode
    assert str(stopped.value) == f"{url} {says}"


def test_the_key_an_embedding_server_echoes_is_redacted_from_every_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    """Echoed in a 401's message, and in a model listing that the "described differently" sentence shows."""
    secret = f"sk-echoed-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    with LoopbackServer(embed=toy_embed, model="m") as server, LoopbackServer(embed=toy_embed, model="m") as other:
        served = EmbeddingServers("m", server.base_url)
        try:
            server.add_faults(Fault(FaultKind.UNAUTHORIZED, echo=True))
            with pytest.raises(EndpointError) as refused:
                served.embed(["one text"])
        finally:
            served.close()
        listing = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": f"Bearer {secret}"}]}
        other.add_faults(Fault(FaultKind.RAW, body=json.dumps(listing).encode(), path="/v1/models"))
        with pytest.raises(EndpointError) as described:
            EmbeddingServers("m", [server.base_url, other.base_url])
    says(str(refused.value), served.servers[0].url, "HTTP 401", "Incorrect API key provided",
         f"Authorization: Bearer {REDACTED};")
    assert f'"owned_by": "Bearer {REDACTED}"' in str(described.value)
    assert secret not in str(refused.value) + str(described.value)


def test_an_embedding_servers_waits_are_capped_and_one_answering_only_429_is_given_up(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(LONGEST_WAIT_ENV, "0.2")
    monkeypatch.setenv(RATE_LIMIT_PATIENCE_ENV, "1")
    with LoopbackServer(embed=toy_embed, model="m") as server, \
            caplog.at_level(logging.WARNING, logger="disastir_mteb.endpoints.pool"):
        served = EmbeddingServers("m", server.base_url)
        url = server.base_url
        try:
            server.add_faults(Fault(FaultKind.RATE_LIMIT, retry_after=100000))
            assert served.embed(["a", "b"]).tolist() == toy_embed(["a", "b"])
            assert served.servers[0].waits == [0.2]  # not 27 hours
            assert [record.getMessage() for record in caplog.records] == [
                f"{url}: 429 (rate limited): it asked for 100,000 s, capped at 0.2 s, waiting 0.2 s"]
            server.fail_all(Fault(FaultKind.RATE_LIMIT, retry_after=None, headers={"retry-after-ms": "100"}))
            with pytest.raises(EndpointError) as stopped:
                served.embed(["c"])
        finally:
            served.close()
    says(str(stopped.value), "Every server", f"{url}:", "1 answered", "nothing but 429", "for 1 s",
         f"({served.servers[0].rate_limited} times in all)", "lower the concurrency", "try later")


def test_an_embedding_server_sending_its_answer_for_ever_is_cut_off_at_the_timeout() -> None:
    with LoopbackServer(embed=toy_embed, model="m") as server:
        served = EmbeddingServers("m", server.base_url, timeout=1.0)
        try:
            server.add_faults(Fault(FaultKind.TRICKLE, seconds=3600))
            assert served.embed(["a", "b"]).tolist() == toy_embed(["a", "b"])
        finally:
            served.close()
    assert served.servers[0].retried == 1 and served.servers[0].last_error == "no whole answer within 1 s"

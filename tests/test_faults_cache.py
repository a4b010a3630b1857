"""Faults in caches, runs and outputs: each ends in one clear sentence or a correct run, never in half a file.

Real code paths only: the real store, real USearch graphs and, where ``kill -9`` matters, real child
processes that SIGKILL themselves at a chosen point (after a chunk file, inside mteb's result
writer, after the first task). Data: a 300-passage generated sample, two queries per task.
"""

from __future__ import annotations

import ast
import functools
import itertools
import json
import logging
import multiprocessing
import os
import shutil
import signal
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sentences import says

from conftest import read_only
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.runner.run import evaluate
from disastir_mteb.search.shared_corpus import SharedCorpusSearch
from disastir_mteb.search.store import EmbeddingStore
from disastir_mteb.search.usearch_index import resolve_params
from disastir_mteb.vocabulary.run_settings import RunSettings

TASKS = ["DisastIR-QA-Bio", "DisastIR-FC-Geo", "DisastIR-STS-Tech"]
PACKAGE = Path(__file__).resolve().parents[1] / "disastir_mteb"
N_PASSAGES, CHUNK = 300, 64  # 5 chunk files: 64 x 4 + 44
QUIET = RunSettings(progress=False)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from disastir_mteb.sample.generator import SampleScale, write_sample

    scale = SampleScale("tiny", n_passages=N_PASSAGES, queries_per_task=2, judged_per_query=6, passage_words=16)
    return write_sample(tmp_path_factory.mktemp("tiny") / "data", scale=scale)


@pytest.fixture
def on_tiny(tiny: Path, use_data: Any) -> Path:
    use_data(tiny)
    return tiny


# ---------------------------------------------------------------------- helpers

_CHILD = r'''
import json, os, signal, sys, time
from pathlib import Path

cfg = json.loads(sys.argv[1])
os.environ["DISASTIR_DATA_DIR"] = cfg["data"]
import mteb
from disastir_mteb.search import store
from disastir_mteb.runner.run import evaluate
from disastir_mteb.search.shared_corpus import SharedCorpusSearch
from disastir_mteb.vocabulary.run_settings import RunSettings

def die():
    os.kill(os.getpid(), signal.SIGKILL)

kill = cfg.get("kill") or ""
if kill.startswith("chunk:"):  # SIGKILL right after the n-th chunk file is in place
    limit, written, replace = int(kill[6:]), [], store.write_stream_atomic
    def counting(path, write):
        replace(path, write)
        if path.name.startswith("chunk_"):
            written.append(path.name)
            if len(written) == limit:
                die()
    store.write_stream_atomic = counting
if kill == "mid-result":  # SIGKILL inside mteb's writer, half of the first result file written
    from mteb.results import TaskResult
    def half(self, path):
        text = json.dumps(self.model_dump(mode="json"), indent=2)
        with path.open("w", encoding="utf-8") as handle:
            handle.write(text[: len(text) // 2])
        die()
    TaskResult.to_disk = half
if cfg["model"] != "hashing":  # a sentence-transformers folder
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(cfg["model"], device="cpu")
else:
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    model = HashingEncoder()
    if cfg.get("slow"):
        embed = model.embed
        model.embed = lambda texts: (time.sleep(cfg["slow"]), embed(texts))[1]
if cfg.get("barrier"):  # start the real work together with the other child
    barrier = Path(cfg["barrier"])
    (barrier.parent / f"{barrier.name}.{os.getpid()}").touch()
    while len(list(barrier.parent.glob(barrier.name + ".*"))) < 2:
        time.sleep(0.01)
chunk = {"chunk_size": cfg["chunk_size"]} if cfg.get("chunk_size") else {}  # 0: the store's default
searcher = SharedCorpusSearch(model, RunSettings(progress=False), store=store.EmbeddingStore(cfg["cache"]), **chunk)
evaluate(searcher, cfg["tasks"], output_folder=cfg["out"], show_progress=False,
         on_task_done=(lambda result, seconds: die()) if kill == "after-task" else None)
print(json.dumps({"passages": searcher.passages_encoded, "queries": searcher.queries_encoded}))
'''


class _Child:
    """A run in a child process, as ``subprocess.Popen`` answers for one: ``communicate`` and ``returncode``.

    The child is forked from a server process that imported mteb, torch and the package once (multiprocessing's
    forkserver): a real process of its own, killed for real, without paying 4-5 s of imports every time.
    """

    def __init__(self, config: dict[str, Any], folder: Path) -> None:
        self.folder = folder
        self.process = _forkserver().Process(target=_run_child, args=(json.dumps(config), str(folder)))
        self.process.start()

    @property
    def returncode(self) -> int | None:
        return self.process.exitcode  # as Popen's: -9 for a SIGKILL

    def communicate(self, timeout: float) -> tuple[str, str]:
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
            raise TimeoutError(f"the child run did not end within {timeout} s")
        return tuple((self.folder / name).read_text(encoding="utf-8") for name in ("stdout", "stderr"))


@functools.cache
def _forkserver() -> Any:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["mteb", "sentence_transformers", "disastir_mteb.runner.run",
                                    "disastir_mteb.search.shared_corpus", "disastir_mteb.models.bundled", __name__])
    return context


def _run_child(argument: str, folder: str) -> None:
    """In the forked child: ``_CHILD`` as ``python -c _CHILD argument`` runs it, its output into ``folder``."""
    for descriptor, name in ((1, "stdout"), (2, "stderr")):
        handle = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(handle, descriptor)
        os.close(handle)
    sys.argv = ["-c", argument]
    code = 0
    try:
        exec(compile(_CHILD, "<child>", "exec"), {"__name__": "__main__"})
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


_children = itertools.count()


def _start(data: Path, cache: Path, out: Path, **options: Any) -> _Child:
    config = {"data": str(data), "cache": str(cache), "out": str(out), "tasks": TASKS, "model": "hashing",
              "chunk_size": CHUNK, **options}
    folder = cache.parent / f"child-{next(_children)}"
    folder.mkdir(parents=True)
    return _Child(config, folder)


def _child(data: Path, cache: Path, out: Path, *, killed: bool = False, **options: Any) -> dict[str, int]:
    """Run the child to its end: killed by its own SIGKILL, or finished (its counters returned)."""
    process = _start(data, cache, out, **options)
    stdout, stderr = process.communicate(timeout=300)
    if killed:
        assert process.returncode == -signal.SIGKILL, stderr[-3000:]
        return {}
    assert process.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


def _outputs(out: Path) -> dict[str, Any]:
    """Each task's test scores and each per-query file under ``out``, by relative path (no timings)."""
    found: dict[str, Any] = {}
    for path in sorted(out.rglob("*.json")):
        if any(part.startswith(".") for part in path.relative_to(out).parts):  # a killed writer's hidden staging
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        if path.parent.name == "disastir_per_query":
            found[path.relative_to(out).as_posix()] = data
        elif path.stem.startswith("DisastIR-"):
            found[path.relative_to(out).as_posix()] = data["scores"]
    return found


def _broken_files(root: Path, *, hidden_ok: bool = False) -> list[str]:
    """Files under ``root`` that are half-written (do not parse) or temporary leftovers (hidden names)."""
    broken = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name not in (".disastir-results.lock", ".lock")):
        if any(part.startswith(".") for part in path.relative_to(root).parts):  # lock files stay (tiny)
            if not hidden_ok:
                broken.append(f"{path}: temporary leftover")
            continue
        try:
            if path.suffix == ".json":
                json.loads(path.read_text(encoding="utf-8"))
            elif path.suffix == ".jsonl":
                [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            elif path.suffix == ".npy":
                np.load(path, mmap_mode="r")
        except ValueError as error:
            broken.append(f"{path}: {error}")
    return broken


@pytest.fixture(scope="module")
def reference(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted run of the three tasks: the outputs every faulty run must reproduce."""
    root = tmp_path_factory.mktemp("reference")
    assert _child(tiny, root / "cache", root / "out")["passages"] == N_PASSAGES
    return root / "out"


def _scores(result: Any) -> dict[str, float]:
    return {r.task_name: r.scores["test"][0]["ndcg_at_10"] for r in result.task_results}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# ---------------------------------------------------------------------- caches


def test_another_model_of_another_dimension_is_never_mixed_up(on_tiny: Path, tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    store = EmbeddingStore(tmp_path / "cache")
    evaluate(SharedCorpusSearch(HashingEncoder(name="test/a"), RunSettings(progress=False), store=store), TASKS[:1],
             output_folder=tmp_path / "a", show_progress=False)
    alone = _scores(evaluate(HashingEncoder(dim=64, name="test/b"), TASKS[:1], cache_dir=False,
                             output_folder=tmp_path / "alone", show_progress=False))

    other = SharedCorpusSearch(HashingEncoder(dim=64, name="test/b"), RunSettings(progress=False), store=store)
    assert _scores(evaluate(other, TASKS[:1], output_folder=tmp_path / "b", show_progress=False)) == alone
    assert other.passages_encoded == N_PASSAGES  # other name, other key: nothing of model a is read

    # Same name and revision, other dimension (a model changed in place): what it declares gives it away before a
    # vector is read; it gets entries of its own after one warning, and the scores of a run without cache.
    with caplog.at_level(logging.WARNING):
        changed = SharedCorpusSearch(HashingEncoder(dim=64, name="test/a"), RunSettings(progress=False), store=store)
        scores = _scores(evaluate(changed, TASKS[:2], output_folder=tmp_path / "changed", show_progress=False))
    assert changed.passages_encoded == N_PASSAGES
    assert scores == _scores(evaluate(HashingEncoder(dim=64, name="test/a"), TASKS[:2], cache_dir=False,
                                      output_folder=tmp_path / "changed-alone", show_progress=False))
    (warning,) = _warnings(caplog)
    says(warning, "test/a@1", "64 dimensions", "changed in place", "new revision")


def test_a_key_without_fingerprint_that_mixes_two_dimensions_stops_with_one_sentence(tmp_path: Path) -> None:
    """The store used directly, its keys naming no fingerprint: one model name and revision, two dimensions."""
    from disastir_mteb.search.store import StoreKey, fingerprint_texts

    texts = [f"flood bulletin {i}" for i in range(40)]

    def key(side: str) -> StoreKey:
        return StoreKey("test/a", "1", side, "", fingerprint_texts(texts))  # type: ignore[arg-type]

    store = EmbeddingStore(tmp_path)
    store.get_or_encode(key("corpus"), texts, lambda t: np.ones((len(t), 384)), progress=False)
    with pytest.raises(ValueError) as mixed:
        store.get_or_encode(key("queries"), texts, lambda t: np.ones((len(t), 64)), progress=False)
    says(str(mixed.value), "test/a@1", "64-dimensional", "384-dimensional", f"delete {tmp_path}/corpus/test__a",
         f"{tmp_path}/queries/test__a", "--cache-dir", "--no-cache")


def test_stale_entry_of_a_changed_model_is_rebuilt_when_fresh_vectors_came_first(tmp_path: Path,
                                                                                 caplog: pytest.LogCaptureFixture
                                                                                 ) -> None:
    from disastir_mteb.search.store import StoreKey, fingerprint_texts

    texts = [f"flood bulletin {i}" for i in range(40)]

    def key(side: str) -> StoreKey:
        return StoreKey("org/m", "1", side, "", fingerprint_texts(texts))  # type: ignore[arg-type]

    EmbeddingStore(tmp_path).get_or_encode(key("queries"), texts, lambda t: np.ones((len(t), 8)), progress=False)
    store = EmbeddingStore(tmp_path)  # a new process, whose model now gives 4 dimensions
    store.get_or_encode(key("corpus"), texts, lambda t: np.ones((len(t), 4)), progress=False)
    assert store.cached(key("queries"), len(texts)) is None  # stale: the caller encodes it again
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.store"):
        vectors = store.get_or_encode(key("queries"), texts, lambda t: np.ones((len(t), 4)), progress=False)
    assert vectors.shape == (40, 4) and store.last_encoded_rows == 40
    assert _warnings(caplog) == [f"Embedding cache {store.folder(key('queries'))} holds 8-dimensional vectors, "
                                 "not the model's 4: rebuilding."]


def test_a_sentence_transformer_changed_in_place_is_not_served_its_old_vectors(
        on_tiny: Path, tmp_path: Path, tiny_model: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Same name and revision, a new 64-d head, everything cached: its probe gives it away."""
    import mteb
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Dense

    from disastir_mteb.models.bundled import BUNDLED_MODEL

    meta = mteb.get_model_meta(BUNDLED_MODEL)  # a name and revision from the registry, on conftest's small model
    named = SentenceTransformerEncoderWrapper(SentenceTransformer(str(tiny_model), device="cpu"))
    named.mteb_model_meta = meta
    store = EmbeddingStore(tmp_path / "cache")
    evaluate(SharedCorpusSearch(named, RunSettings(progress=False), store=store), TASKS[:1],
             output_folder=tmp_path / "old", show_progress=False)
    model = SentenceTransformer(str(tiny_model), device="cpu")
    model.append(Dense(384, 64))
    changed = SentenceTransformerEncoderWrapper(model)
    changed.mteb_model_meta = meta  # the name and revision of the cached vectors
    with caplog.at_level(logging.WARNING):
        searcher = SharedCorpusSearch(changed, RunSettings(progress=False), store=EmbeddingStore(tmp_path / "cache"))
        evaluate(searcher, TASKS[:1], output_folder=tmp_path / "new", show_progress=False)
    assert searcher.passages_encoded == N_PASSAGES  # its own entry, not the old model's vectors
    (warning,) = _warnings(caplog)
    says(warning, f"{BUNDLED_MODEL}@{meta.revision}", "weights and tokenizer",
         "changed in place")


def _kill_after_chunks(searcher: SharedCorpusSearch, chunks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the store raise KeyboardInterrupt (a Ctrl-C) once ``chunks`` chunk files are in place."""
    from disastir_mteb.search import store as store_module

    real, written = store_module.write_stream_atomic, []

    def counting(path: Path, write: Any) -> None:
        real(path, write)
        written.append(path.name)
        if sum(name.startswith("chunk_") for name in written) == chunks:
            raise KeyboardInterrupt("simulated kill")

    monkeypatch.setattr(store_module, "write_stream_atomic", counting)
    with pytest.raises(KeyboardInterrupt):
        evaluate(searcher, TASKS[:1], output_folder=Path(str(searcher.store.root) + "-out"),  # type: ignore[union-attr]
                 show_progress=False)
    monkeypatch.setattr(store_module, "write_stream_atomic", real)


@pytest.mark.parametrize("damage", ["truncated", "garbage header", "empty"])
def test_damaged_chunk_file_is_re_encoded_with_a_warning_naming_it(on_tiny: Path, tmp_path: Path, damage: str,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    store = EmbeddingStore(tmp_path / "cache")
    _kill_after_chunks(SharedCorpusSearch(HashingEncoder(), QUIET, store=store, chunk_size=CHUNK), 3,
                       monkeypatch)
    chunks = sorted(store.root.rglob("chunk_*.npy"))
    assert len(chunks) == 3
    data = chunks[1].read_bytes()
    chunks[1].write_bytes({"truncated": data[: len(data) // 2], "garbage header": os.urandom(128) + data[128:],
                           "empty": b""}[damage])

    resumed = SharedCorpusSearch(HashingEncoder(), RunSettings(progress=False), store=store, chunk_size=CHUNK)
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.store"):
        scores = _scores(evaluate(resumed, TASKS[:1], output_folder=tmp_path / "out", show_progress=False))
    assert resumed.passages_encoded == N_PASSAGES - 2 * CHUNK  # chunks 1 and 3 reused, 2, 4 and 5 encoded
    (warning,) = _warnings(caplog)
    says(warning, chunks[1].parent, "1 unusable chunk file(s)", chunks[1].name, "rows 64-128",
         "unreadable or truncated", "re-encoding")
    assert scores == _scores(evaluate(HashingEncoder(), TASKS[:1], cache_dir=False, output_folder=tmp_path / "fresh",
                                      show_progress=False))


def _ann_searcher(store: EmbeddingStore) -> SharedCorpusSearch:
    return SharedCorpusSearch(HashingEncoder(), RunSettings(progress=False, ann=resolve_params("paper", threads=1)),
                              store=store)


@pytest.mark.parametrize("damage", ["truncated", "header", "middle", "tail", "empty"])
def test_damaged_ann_index_is_rebuilt_with_a_warning_naming_it(on_tiny: Path, tmp_path: Path, damage: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """Before checksums, bytes damaged in the middle gave silently other results, and at the tail a traceback."""
    store = EmbeddingStore(tmp_path / "cache")
    first = _ann_searcher(store)
    kwargs: dict[str, Any] = {"search": "ann", "ann_params": {"threads": 1}, "show_progress": False}
    before = _scores(evaluate(first, TASKS[:1], output_folder=tmp_path / "a", **kwargs))
    (path,) = store.root.rglob("*.usearch")
    data = bytearray(path.read_bytes())
    middle, noise = len(data) // 2, np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    path.write_bytes({"truncated": bytes(data[:middle]), "header": noise[:64] + bytes(data[64:]), "empty": b"",
                      "middle": bytes(data[:middle]) + noise + bytes(data[middle + 4096:]),
                      "tail": bytes(data[:-4096]) + noise}[damage])

    again = _ann_searcher(store)
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.usearch_index"):
        after = _scores(evaluate(again, TASKS[:1], output_folder=tmp_path / "b", **kwargs))
    assert after == before and again.index_builds == 1 and again.index_loads == 0
    (warning,) = _warnings(caplog)
    assert warning.startswith(f"USearch index cache {path} ") and warning.endswith(": rebuilding.")
    third = _ann_searcher(store)  # the rebuilt graph was saved with a matching checksum
    assert _scores(evaluate(third, TASKS[:1], output_folder=tmp_path / "c", **kwargs)) == before
    assert third.index_loads == 1 and third.index_builds == 0


@pytest.mark.parametrize("how", ["path under a file", "read-only folder"])
def test_unwritable_cache_runs_in_memory_after_one_warning(on_tiny: Path, tmp_path: Path, how: str,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    if how == "path under a file":
        (tmp_path / "file").write_text("not a folder")
        root, context = tmp_path / "file" / "cache", _nothing()
    else:
        root = tmp_path / "cache"
        root.mkdir()
        context = read_only(root)
    kwargs: dict[str, Any] = {"search": "ann", "ann_params": {"threads": 1}, "show_progress": False}
    with context, caplog.at_level(logging.WARNING):
        searcher = _ann_searcher(EmbeddingStore(root))
        scores = _scores(evaluate(searcher, TASKS, output_folder=tmp_path / "out", **kwargs))
        assert not root.exists() or not any(root.iterdir())  # nothing persisted
    assert scores == _scores(evaluate(_ann_searcher(None), TASKS, output_folder=tmp_path / "none", **kwargs))  # type: ignore[arg-type]
    warnings = _warnings(caplog)
    assert len(warnings) == 2, warnings  # once for the embeddings (not once per task), once for the index
    assert warnings[0].startswith(f"Embedding cache {root}/corpus/") and "cannot be written" in warnings[0]
    says(warnings[0], "nothing is persisted", "--cache-dir DIR", "cache_dir=", "--no-cache")
    assert warnings[1].startswith(f"USearch index cache {root}/usearch/") and "--cache-dir DIR" in warnings[1]


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def test_read_only_cache_that_is_filled_serves_without_writing(on_tiny: Path, tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    store = EmbeddingStore(tmp_path / "cache")
    first = _scores(evaluate(SharedCorpusSearch(HashingEncoder(), RunSettings(progress=False), store=store), TASKS,
                             output_folder=tmp_path / "a", show_progress=False))
    with read_only(store.root), caplog.at_level(logging.WARNING):
        again = SharedCorpusSearch(HashingEncoder(), RunSettings(progress=False), store=EmbeddingStore(store.root))
        assert _scores(evaluate(again, TASKS, output_folder=tmp_path / "b", show_progress=False)) == first
    assert again.passages_encoded == 0 and again.queries_encoded == 0 and _warnings(caplog) == []


# ---------------------------------------------------------------------- runs killed or run twice


def test_kill_9_during_encoding_resumes_only_the_unfinished_chunks(tiny: Path, reference: Path,
                                                                   tmp_path: Path) -> None:
    _child(tiny, tmp_path / "cache", tmp_path / "out", kill="chunk:2", killed=True)
    assert len(list((tmp_path / "cache").rglob("chunk_*.npy"))) == 2 and _outputs(tmp_path / "out") == {}
    assert _child(tiny, tmp_path / "cache", tmp_path / "out")["passages"] == N_PASSAGES - 2 * CHUNK  # 3 of 5
    assert _outputs(tmp_path / "out") == _outputs(reference)
    assert _broken_files(tmp_path) == []


def test_kill_9_during_encoding_with_a_real_model(tiny: Path, tmp_path: Path, tiny_model: Path) -> None:
    """A real sentence-transformers model (conftest's small one) goes through the streaming pipeline."""
    one, model = TASKS[:1], str(tiny_model)
    _child(tiny, tmp_path / "cache", tmp_path / "out", model=model, tasks=one, kill="chunk:1", killed=True)
    resumed = _child(tiny, tmp_path / "cache", tmp_path / "out", model=model, tasks=one)
    assert resumed["passages"] == N_PASSAGES - CHUNK  # chunks 2 to 5 only
    whole = _child(tiny, tmp_path / "cache2", tmp_path / "whole", model=model, tasks=one)
    assert whole["passages"] == N_PASSAGES
    assert _outputs(tmp_path / "out") == _outputs(tmp_path / "whole") != {}
    assert _broken_files(tmp_path) == []


def test_kill_9_on_a_corpus_smaller_than_the_old_chunk_keeps_its_first_chunk(sample_data: Path, tmp_path: Path) -> None:
    """Before, one chunk was 8,192 passages: a kill at 55 s on the 1,500-passage sample lost all of it."""
    from disastir_mteb.search.store import CHUNK_SIZE

    n_passages = sum(1 for _ in (sample_data / "corpus.jsonl").open(encoding="utf-8"))
    assert CHUNK_SIZE < n_passages < 8192
    _child(sample_data, tmp_path / "cache", tmp_path / "out", tasks=TASKS[:1], chunk_size=0, kill="chunk:1",
           killed=True)
    resumed = _child(sample_data, tmp_path / "cache", tmp_path / "out", tasks=TASKS[:1], chunk_size=0)
    assert resumed["passages"] == n_passages - CHUNK_SIZE


def test_kill_9_after_the_first_task_result(tiny: Path, reference: Path, tmp_path: Path) -> None:
    _child(tiny, tmp_path / "cache", tmp_path / "out", kill="after-task", killed=True)
    # The child's pipes closed, so no worker process outlived it (they die with the runner). OUT holds the
    # first task with its per-query file, and whatever the workers finished meanwhile (a task killed between
    # its result and its per-query file is evaluated again by the rerun), none of it half-written. A worker
    # killed while mteb wrote into its hidden staging folder leaves that folder: the rerun removes it.
    written = [path.split("/")[-1].replace("_per_query", "") for path in _outputs(tmp_path / "out")]
    assert written.count(f"{TASKS[0]}.json") == 2 and _broken_files(tmp_path / "out", hidden_ok=True) == []
    assert _child(tiny, tmp_path / "cache", tmp_path / "out") == {"passages": 0, "queries": 0}  # all from the cache
    assert _outputs(tmp_path / "out") == _outputs(reference)
    assert _broken_files(tmp_path) == []


def test_kill_9_inside_the_result_writer_leaves_no_half_file(tiny: Path, reference: Path, tmp_path: Path) -> None:
    _child(tiny, tmp_path / "cache", tmp_path / "out", kill="mid-result", killed=True)
    assert _broken_files(tmp_path / "out", hidden_ok=True) == []  # at most a hidden staging folder
    _child(tiny, tmp_path / "cache", tmp_path / "out")
    assert _outputs(tmp_path / "out") == _outputs(reference)
    assert _broken_files(tmp_path) == []  # the rerun removed the killed run's staging folder


def test_two_runs_at_once_on_one_cache_and_output_folder(tiny: Path, reference: Path, tmp_path: Path) -> None:
    # mteb writes go through atomic_result_cache; "slow" keeps the first run's encoding (5 chunks) open for 1.5 s,
    # so that the second, however late the machine lets it start after the barrier, meets the entry lock
    shared = {"barrier": str(tmp_path / "barrier"), "slow": 0.3}
    children = [_start(tiny, tmp_path / "cache", tmp_path / "out", **shared) for _ in range(2)]
    counts, logs = [], []
    for child in children:
        stdout, stderr = child.communicate(timeout=300)
        assert child.returncode == 0, stderr[-3000:]
        counts.append(json.loads(stdout.strip().splitlines()[-1]))
        logs.append(stderr)
    # Before the entry lock, each run encoded all 300 passages; now the second waits and serves the first's.
    assert sum(count["passages"] for count in counts) == N_PASSAGES
    assert any("is being encoded by another run (process " in log for log in logs)
    assert _outputs(tmp_path / "out") == _outputs(reference)
    assert _broken_files(tmp_path / "out") == [] and _broken_files(tmp_path / "cache") == []
    run_settings = next((tmp_path / "out").rglob("run_settings.jsonl")).read_text().splitlines()
    assert sorted(json.loads(line)["task"] for line in run_settings) == sorted(TASKS)


# ---------------------------------------------------------------------- security


def _calls(tree: ast.AST) -> Iterator[tuple[str, ast.Call]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield ast.unparse(node.func), node


def _true(node: ast.Call, keyword: str) -> bool | None:
    """The keyword's value if it is a constant, None if absent."""
    value = next((k.value for k in node.keywords if k.arg == keyword), None)
    return value.value if isinstance(value, ast.Constant) else (None if value is None else True)


def test_package_never_unpickles_or_trusts_remote_code_by_default() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                problems += [f"{where}:{node.lineno} imports {n}" for n in names
                             if n.split(".")[0] in ("pickle", "cPickle", "dill", "joblib", "shelve", "cloudpickle")]
            if isinstance(node, ast.arguments):
                defaults = dict(zip([a.arg for a in node.args[::-1]], node.defaults[::-1], strict=False))
                defaults |= {a.arg: d for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True) if d is not None}
                value = defaults.get("trust_remote_code")
                if value is not None and not (isinstance(value, ast.Constant) and value.value is False):
                    problems.append(f"{where}:{value.lineno} defaults trust_remote_code to {ast.unparse(value)}")
            if isinstance(node, ast.keyword) and node.arg == "trust_remote_code" and not (
                    isinstance(node.value, ast.Constant) and node.value.value is False):
                problems.append(f"{where}:{node.value.lineno} passes trust_remote_code={ast.unparse(node.value)}")
        for name, call in _calls(tree):
            if name.endswith("torch.load") and _true(call, "weights_only") is not True:
                problems.append(f"{where}:{call.lineno} calls torch.load without weights_only=True")
            if name.split(".")[-1] == "load" and _true(call, "allow_pickle"):
                problems.append(f"{where}:{call.lineno} loads with allow_pickle")
    assert problems == []


def _result_set(reference: Path, tmp_path: Path) -> Path:
    """A copy of the reference run, relabelled as run on a user's own data (no per-query files).

    ``submit`` refuses results on generated data (``tests/test_submit.py``); these cases are about paths.
    """
    copy = tmp_path / "results"
    shutil.copytree(reference, copy, ignore=shutil.ignore_patterns("disastir_per_query"))
    for task_file in copy.rglob("DisastIR-*.json"):
        data = json.loads(task_file.read_text(encoding="utf-8"))
        data["scores"]["test"][0]["disastir_data"] = "local folder data"
        task_file.write_text(json.dumps(data), encoding="utf-8")
    return copy


def _edit(path: Path, **fields: Any) -> None:
    path.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8")) | fields), encoding="utf-8")


def test_submit_refuses_names_that_read_as_paths(reference: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from disastir_mteb.submission.submit import submit

    results = _result_set(reference, tmp_path)
    folder = next(results.rglob("model_meta.json")).parent
    before = sorted(p for p in tmp_path.rglob("*"))
    _edit(folder / "model_meta.json", name="../../x")
    with pytest.raises(ValueError) as refused:
        submit(results, tmp_path / "out")
    says(str(refused.value), folder, "'../../x'", "model_meta.json", "file path", "fix the model's name")
    _edit(folder / "model_meta.json", name="disastir-mteb/hashing-encoder")
    _edit(folder / "DisastIR-FC-Geo.json", task_name="../../evil/DisastIR-FC-Geo")
    with pytest.raises(ValueError) as refused:
        submit(results, tmp_path / "out")
    says(str(refused.value), folder / "DisastIR-FC-Geo.json", "'../../evil/DisastIR-FC-Geo'", "file path",
         "rerun the task")
    assert sorted(p for p in tmp_path.rglob("*")) == before  # nothing written anywhere

    # A result folder given as "../..": before, its name ".." led the copy two folders above --out.
    deep = folder / "a" / "b"
    deep.mkdir(parents=True)
    _edit(folder / "DisastIR-FC-Geo.json", task_name="DisastIR-FC-Geo")
    monkeypatch.chdir(deep)
    submit("../..", "out")
    assert sorted(p.name for p in deep.iterdir()) == ["out"]
    assert {p.name for p in (deep / "out" / "results" / folder.parent.name / folder.name).iterdir()} >= set(
        f"{task}.json" for task in TASKS)


def test_submit_never_writes_through_a_symlink_out_of_out(reference: Path, tmp_path: Path) -> None:
    from disastir_mteb.submission.submit import submit

    results, outside = _result_set(reference, tmp_path), tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.json").write_text("{}")
    out = tmp_path / "out"
    out.mkdir()
    (out / "results").symlink_to(outside)
    with pytest.raises(ValueError) as refused:
        submit(results, out)
    refusal = says(str(refused.value), "symbolic link", f"outside {out};", "remove the link", "another output folder")
    assert f" {out}/results/" in refusal and f" {outside}/" in refusal  # the folder to write, where the link leads
    assert sorted(p.name for p in outside.rglob("*")) == ["keep.json"]

    (out / "results").unlink()
    submit(results, out)
    task_file = next((out / "results").rglob("DisastIR-QA-Bio.json"))
    task_file.unlink()
    task_file.symlink_to(outside / "keep.json")
    with pytest.raises(ValueError) as refused:
        submit(results, out, overwrite=True)
    says(str(refused.value), task_file, "symbolic link", outside / "keep.json", out)
    assert (outside / "keep.json").read_text() == "{}"


def test_export_never_writes_outside_out(on_tiny: Path, tmp_path: Path) -> None:
    from disastir_mteb.exports import export_beir

    with pytest.raises(KeyError) as unknown:
        export_beir(tmp_path / "out", ["../../x"])
    says(unknown.value.args[0], "DisastIR task", "'../../x'")
    assert sorted(tmp_path.iterdir()) == []

    export_beir(tmp_path / "out", TASKS[:1])
    outside = tmp_path / "outside"
    (outside / "DisastIR-FC-Geo").mkdir(parents=True)
    (outside / "DisastIR-FC-Geo" / "queries.jsonl").write_text("mine\n")
    (tmp_path / "out" / "DisastIR-FC-Geo").symlink_to(outside / "DisastIR-FC-Geo")  # a link inside --out
    export_beir(tmp_path / "out", TASKS[:2], overwrite=True)
    assert not (tmp_path / "out" / "DisastIR-FC-Geo").is_symlink()
    assert (outside / "DisastIR-FC-Geo" / "queries.jsonl").read_text() == "mine\n"

    link = tmp_path / "link"  # --out itself a link to an earlier export elsewhere: replaced, not written through
    link.symlink_to(tmp_path / "out")
    before = {p: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    export_beir(link, TASKS[:1], overwrite=True)
    assert link.is_dir() and not link.is_symlink()
    assert {p: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "out", "outside"]  # no leftovers beside --out


# ---------------------------------------------------------------------- encode once across settings


def _run(model: Any, tasks: list[str], cache: Path, out: Path, **settings: Any) -> SharedCorpusSearch:
    from disastir_mteb.runner.run import RunSettings, build_search

    search = {"search": "ann", "ann_params": {"threads": 1}} if settings.pop("search", None) == "ann" else {}
    searcher = build_search(model, RunSettings.from_options(cache_dir=cache, progress=False, devices=None, **search,
                                                            **settings))
    evaluate(searcher, tasks, output_folder=out, show_progress=False, **search)
    return searcher


def test_options_that_only_touch_queries_encode_no_passage(on_tiny: Path, tmp_path: Path) -> None:
    """Before, the corpus key held the query-side instruction setting: each --instructions encoded the corpus again."""
    cache, out = tmp_path / "cache", tmp_path / "out"
    first = _run(HashingEncoder(), TASKS, cache, out, instructions="none")
    assert first.passages_encoded == N_PASSAGES
    for settings in ({"instructions": "disastir"}, {"instructions": "dmretriever"},
                     {"instructions": "dmretriever", "template": "instruct-query"}, {},
                     {"instructions": "disastir", "search": "ann"}):
        again = _run(HashingEncoder(), TASKS[:2], cache, out, **dict(settings))
        assert again.passages_encoded == 0, settings
        if settings.get("instructions") not in (None, "none") and "search" not in settings:
            assert again.queries_encoded > 0, settings  # the queries differ, so their vectors are keyed apart
    instructed = _run(HashingEncoder(), TASKS[:1], cache, out, instructions="disastir", instruct_passages=True)
    assert instructed.passages_encoded == N_PASSAGES  # instructed passages are other texts: their own entry
    assert len(list((cache / "corpus").rglob("manifest.json"))) == 2


def test_instructions_changed_with_a_real_model_reuse_the_corpus_byte_for_byte(
        on_tiny: Path, tmp_path: Path, tiny_model: Path) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_model), device="cpu")  # a real model, conftest's small one
    cache = tmp_path / "cache"
    _run(model, TASKS[:1], cache, tmp_path / "none", instructions="none")
    (entry,) = (cache / "corpus").rglob("embeddings.npy")
    before = np.array(np.load(entry))
    again = _run(model, TASKS[:1], cache, tmp_path / "disastir", instructions="disastir")
    assert again.passages_encoded == 0 and again.queries_encoded > 0
    _run(model, TASKS[:1], tmp_path / "fresh", tmp_path / "fresh-out", instructions="disastir")
    (fresh_entry,) = (tmp_path / "fresh" / "corpus").rglob("embeddings.npy")
    assert np.array_equal(np.load(fresh_entry), before)  # what the second run would have encoded is what it reused
    assert _outputs(tmp_path / "disastir") == _outputs(tmp_path / "fresh-out") != {}


@pytest.mark.parametrize("how", ["64 KB zeroed", "64 KB of 0x7f", "sign bits flipped"])
def test_embeddings_damaged_in_place_are_never_served(on_tiny: Path, tmp_path: Path, how: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """Before checksums: 64 KB zeroed in the corpus gave 62.13 / 39.14 instead of 71.37 / 57.35, exit code 0."""
    store = EmbeddingStore(tmp_path / "cache")
    clean = _scores(evaluate(SharedCorpusSearch(HashingEncoder(), QUIET, store=store, chunk_size=CHUNK),
                             TASKS, output_folder=tmp_path / "a", show_progress=False))
    corpus = next((store.root / "corpus").rglob("embeddings.npy"))
    query = sorted((store.root / "queries").rglob("embeddings.npy"))[0]
    for path, size in ((corpus, 65536), (query, 2000)):
        data = bytearray(path.read_bytes())
        start = len(data) // 2 - size // 2
        part = data[start:start + size]
        data[start:start + size] = (bytes(size) if how.endswith("zeroed") else b"\x7f" * size if "0x7f" in how
                                    else bytes(b ^ 0x80 if i % 4 == 3 else b for i, b in enumerate(part)))
        path.write_bytes(bytes(data))

    again = SharedCorpusSearch(HashingEncoder(), QUIET, store=EmbeddingStore(store.root), chunk_size=CHUNK)
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.store"):
        assert _scores(evaluate(again, TASKS, output_folder=tmp_path / "b", show_progress=False)) == clean
    warnings = _warnings(caplog)
    assert len(warnings) == 2, warnings  # one per damaged file, each naming it
    says(warnings[0], f"Embedding cache {corpus}", "fails its checksum", "rows")
    says(warnings[1], f"Embedding cache {query}", "fails its checksum")
    assert 0 < again.passages_encoded <= N_PASSAGES and again.queries_encoded == 2


def test_a_result_scored_on_other_data_or_with_another_gain_is_scored_again(
        tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Results are filed by model and settings, not by data: a second run of the same model into the same folder on
    other data (or with another gain) must get its own scores, not mteb's stored ones of the first."""
    from disastir_mteb.sample.generator import SampleScale, write_sample

    other = write_sample(tmp_path / "other", scale=SampleScale("tiny", n_passages=N_PASSAGES, queries_per_task=2,
                                                               judged_per_query=6, passage_words=16), seed=7)
    out, store = tmp_path / "out", tmp_path / "store"

    def score(data: Path) -> float:
        result = evaluate(HashingEncoder(), TASKS[:1], data=data, output_folder=out, cache_dir=store,
                          show_progress=False)
        return result.task_results[0].get_score()

    first = score(tiny)
    fresh_other = evaluate(HashingEncoder(), TASKS[:1], data=other, output_folder=tmp_path / "fresh",
                           cache_dir=store, show_progress=False).task_results[0].get_score()
    assert fresh_other != first  # the two data folders score differently
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.runner.run"):
        assert score(other) == fresh_other
    [warning] = [r.getMessage() for r in caplog.records if "other inputs" in r.getMessage()]
    assert "data files" in warning and "seed 7" in warning and "replacing it" in warning
    caplog.clear()
    assert score(other) == fresh_other and not [r for r in caplog.records if "other inputs" in r.getMessage()]
    monkeypatch.setenv("DISASTIR_GAIN", "linear")
    linear = evaluate(HashingEncoder(), TASKS[:1], data=other, output_folder=out, cache_dir=store,
                      show_progress=False).task_results[0]
    assert linear.scores["test"][0]["disastir_gain"] == "linear"
    assert linear.get_score() == pytest.approx(linear.scores["test"][0]["ndcg_at_10_linear_gain"], abs=1e-5)

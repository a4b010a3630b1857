"""Corpus encoding at the limit: one encode call's batches, bit for bit, resumable, precision and batch size keyed.

The pipeline is checked on conftest's small real model (``tiny_model``, its files shaped as MiniLM's) and, end to end
through the runner, on the bundled MiniLM itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import mteb
import numpy as np
import pytest
import torch
from sentences import says

from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.models.precision import in_precision
from disastir_mteb.runner.run import evaluate
from disastir_mteb.search.encoding import SentenceTransformerPipeline, length_order
from disastir_mteb.search.prefetch import prefetch
from disastir_mteb.search.shared_corpus import SharedCorpusSearch
from disastir_mteb.search.store import EmbeddingStore
from disastir_mteb.vocabulary.run_settings import RunSettings
from disastir_mteb.vocabulary.settings import parse_precision

_WORDS = ("flood river gauge levee storm surge evacuation shelter wildfire smoke drought crop earthquake "
          "aftershock landslide cholera outbreak hurricane wind damage power outage relief convoy").split()


def _texts(n: int, seed: int = 0, lengths: tuple[int, ...] = (3, 12, 40, 90, 300)) -> list[str]:
    """Passages of very different lengths (3 to 300 words), in no particular order, some past 256 tokens.

    Tests of what files and keys hold pass shorter ``lengths``: padding still differs between batches.
    """
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(_WORDS, size=int(rng.choice(lengths)))) + f" report {i}." for i in range(n)]


def _fresh_model(folder: Path) -> object:
    """A private mteb encoder of a real sentence-transformers folder (precision tests cast weights in place)."""
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    return SentenceTransformerEncoderWrapper(SentenceTransformer(str(folder), device="cpu"))


@pytest.fixture(scope="module")
def small_model(tiny_model: Path) -> object:
    """conftest's small real model as an mteb encoder, for the tests that leave it as it is."""
    return _fresh_model(tiny_model)


def _corpus_task(tmp_path: Path, use_data: object, texts: list[str]) -> object:
    from conftest import write_layout

    passages = {f"d{i}": text for i, text in enumerate(texts)}
    qrels = [{"user_query": "river gauge levels", "passage": texts[3], "score": 2}]
    root = write_layout(tmp_path / "data", passages,
                        {"QA_Bio": ([{"query_id": "q1", "user_query": "river gauge levels"}], qrels)})
    use_data(root)
    task = mteb.get_task("DisastIR-QA-Bio")
    task.load_data()
    return task


def _index(searcher: SharedCorpusSearch, task: object, batch_size: int = 8) -> None:
    searcher.index(task.dataset["default"]["test"]["corpus"], task_metadata=task.metadata, hf_split="test",
                   hf_subset="default", encode_kwargs={"batch_size": batch_size})


def test_length_order_is_sentence_transformers_order() -> None:
    texts = _texts(200)
    assert np.array_equal(length_order(texts), np.argsort([-len(t) for t in texts]))
    assert [len(texts[i]) for i in length_order(texts)] == sorted(map(len, texts), reverse=True)


@pytest.fixture(scope="module")
def one_call(small_model: object) -> tuple[list[str], np.ndarray]:
    """120 passages and their vectors from one plain ``encode_document`` call, the reference of every thread count."""
    texts = _texts(120)
    return texts, small_model.model.encode_document(texts, batch_size=8)


@pytest.mark.parametrize("threads", [0, 1, 3])
def test_pipeline_gives_one_encode_call_bit_for_bit(small_model: object, one_call: tuple[list[str], np.ndarray],
                                                    threads: int) -> None:
    """Chunks of the length order, whole batches each, in any number of calls: the bytes of one encode call."""
    st = small_model.model
    texts, expected = one_call
    order = length_order(texts)
    pipeline = SentenceTransformerPipeline(st, batch_size=8, tokenize_threads=threads)
    chunks = [[texts[i] for i in order[start:start + 32]] for start in range(0, len(texts), 32)]
    got = np.empty_like(expected)
    for start, vectors in zip(range(0, len(texts), 32), pipeline.encode_stream(chunks), strict=True):
        got[order[start:start + 32]] = vectors
    np.testing.assert_array_equal(got, expected)
    assert pipeline.report.parity == "bitwise" and pipeline.report.path == "pipelined"
    assert pipeline.report.texts == len(texts) and pipeline.report.tokenize_threads == threads
    limit = st.max_seq_length
    long = sum(len(st.tokenizer(t)["input_ids"]) >= limit for t in texts)
    assert long > 0 and pipeline.report.at_max_length == long  # truncated passages are counted, not hidden


def test_runner_stores_exactly_what_sentence_transformers_encodes(bundled_model: object, tmp_path: Path,
                                                                  use_data: object) -> None:
    texts = _texts(90)
    task = _corpus_task(tmp_path, use_data, texts)
    searcher = SharedCorpusSearch(bundled_model, RunSettings(progress=False, devices=None),
                                  store=EmbeddingStore(tmp_path / "cache"), chunk_size=20)  # 20 -> 24: batches of 8
    _index(searcher, task)
    np.testing.assert_array_equal(np.asarray(searcher.corpus_embeddings),
                                  bundled_model.model.encode_document(texts, batch_size=8))
    assert searcher.encoding.path == "pipelined" and searcher.encoding.parity == "bitwise"
    summary = searcher.describe_encoding()
    assert "90 texts in length-sorted batches of 8" in summary and "max_seq_length 256" in summary
    assert searcher.passages_encoded == 90



def test_killed_pipelined_run_resumes_and_gives_the_same_bytes(tmp_path: Path, use_data: object,
                                                               tiny_model: Path) -> None:
    model = _fresh_model(tiny_model)
    st = model.model
    texts = _texts(90, seed=1)
    task = _corpus_task(tmp_path, use_data, texts)
    store = EmbeddingStore(tmp_path / "cache")
    calls = {"n": 0}
    forward = st.forward

    def dying_forward(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] == 14:  # the probe four passes, the parity check two, then chunks of 3 batches: dies in chunk 3
            raise KeyboardInterrupt("simulated kill")
        return forward(*args, **kwargs)

    st.forward = dying_forward
    first = SharedCorpusSearch(model, RunSettings(progress=False, devices=None), store=store, chunk_size=24)
    with pytest.raises(KeyboardInterrupt):
        _index(first, task)
    assert first.passages_encoded == 48  # two whole chunks written, the third lost
    del st.forward
    second = SharedCorpusSearch(model, RunSettings(progress=False, devices=None), store=store, chunk_size=24)
    _index(second, task)
    assert second.passages_encoded == 90 - 48
    np.testing.assert_array_equal(np.asarray(second.corpus_embeddings), st.encode_document(texts, batch_size=8))


def test_prompted_models_get_their_prompt_on_the_pipelined_path(tmp_path: Path, use_data: object,
                                                                tiny_model: Path) -> None:
    from mteb.models import SentenceTransformerEncoderWrapper

    st = _fresh_model(tiny_model).model  # a copy of its own: the wrapper sets its prompts
    prompted = SentenceTransformerEncoderWrapper(st, model_prompts={"query": "query: ", "document": "passage: "})
    prompted.mteb_model_meta = prompted.mteb_model_meta.model_copy(update={"name": "test/prompted-minilm"})
    texts = _texts(40, seed=2)
    task = _corpus_task(tmp_path, use_data, texts)
    searcher = SharedCorpusSearch(prompted, RunSettings(progress=False, devices=None), store=None)
    _index(searcher, task)
    assert searcher.encoding.path == "pipelined"
    np.testing.assert_array_equal(np.asarray(searcher.corpus_embeddings),
                                  st.encode_document(texts, prompt="passage: ", batch_size=8))


def test_batch_size_and_precision_are_part_of_the_cache_key(tmp_path: Path, use_data: object,
                                                            tiny_model: Path) -> None:
    model = _fresh_model(tiny_model)
    texts = _texts(40, seed=3, lengths=(3, 12, 40))
    task = _corpus_task(tmp_path, use_data, texts)
    store = EmbeddingStore(tmp_path / "cache")
    by_batch = {}
    for batch_size in (8, 16, 8):
        searcher = SharedCorpusSearch(model, RunSettings(progress=False, devices=None, batch_size=batch_size),
                                      store=store)
        _index(searcher, task)
        by_batch.setdefault(batch_size, []).append((searcher.passages_encoded, np.asarray(searcher.corpus_embeddings)))
    assert [n for n, _ in by_batch[8]] == [40, 0] and by_batch[16][0][0] == 40  # own entry per batch size
    np.testing.assert_allclose(by_batch[8][0][1], by_batch[16][0][1], atol=1e-5)  # rounding-level differences

    half = SharedCorpusSearch(model, RunSettings(progress=False, devices=None, batch_size=8, precision="bf16"),
                              store=store)
    assert next(model.model.parameters()).dtype == torch.float32  # the caller's model stays as it was
    assert next(half.model.model.parameters()).dtype == torch.bfloat16  # a cast copy encodes
    _index(half, task)
    assert half.passages_encoded == 40 and half.model_dtype == "bfloat16"
    assert half.mteb_model_meta.experiment_kwargs["disastir_precision"] == "bf16"
    cosine = np.sum(np.asarray(half.corpus_embeddings) * by_batch[8][0][1], axis=1) / (
        np.linalg.norm(np.asarray(half.corpus_embeddings), axis=1) * np.linalg.norm(by_batch[8][0][1], axis=1))
    assert cosine.min() > 0.99 and not np.array_equal(np.asarray(half.corpus_embeddings), by_batch[8][0][1])
    again = SharedCorpusSearch(model, RunSettings(progress=False, devices=None, batch_size=8), store=store)
    assert "disastir_precision" not in (again.mteb_model_meta.experiment_kwargs or {})  # its own precision again


def test_precision_results_are_filed_apart(use_data: object, tmp_path: Path, tiny_model: Path) -> None:
    _corpus_task(tmp_path, use_data, _texts(40, seed=5, lengths=(3, 12, 40)))
    model = _fresh_model(tiny_model)
    plain = evaluate(model, ["DisastIR-QA-Bio"], cache_dir=tmp_path / "cache", output_folder=tmp_path / "r",
                     show_progress=False)
    half = evaluate(model, ["DisastIR-QA-Bio"], cache_dir=tmp_path / "cache", output_folder=tmp_path / "r",
                    show_progress=False, precision="bf16")
    files = sorted(p.relative_to(tmp_path / "r").as_posix() for p in (tmp_path / "r").rglob("DisastIR-QA-Bio.json"))
    assert len(files) == 2 and any("/experiments/disastir_precision_bf16/" in f for f in files)
    recorded = {path.parent.parent.name: json.loads(path.read_text())["encoding"]
                for path in (tmp_path / "r").rglob("DisastIR-QA-Bio_per_query.json")}
    assert {(s["model_dtype"], s["batch_size"], s["max_seq_length"]) for s in recorded.values()} == {
        ("float32", 32, 256), ("bfloat16", 32, 256)}  # how the vectors were made, beside each task's scores
    assert plain.task_results[0].get_score() == pytest.approx(half.task_results[0].get_score(), abs=0.05)


def test_precision_and_batch_size_errors_are_one_sentence() -> None:
    assert parse_precision("float16") == "fp16" and parse_precision(None) is None
    with pytest.raises(ValueError) as refused:
        parse_precision("fp8")
    says(str(refused.value), "'fp8'", "fp32, fp16, bf16")
    with pytest.raises(ValueError) as refused:
        in_precision(HashingEncoder(), "fp16")
    says(str(refused.value), "torch model", "HashingEncoder")
    with pytest.raises(ValueError) as refused:
        SharedCorpusSearch(HashingEncoder(), RunSettings(batch_size=0))
    says(str(refused.value), "batch_size=0", ">= 1")
    with pytest.raises(ValueError, match="tokenize_threads=-1"):
        SharedCorpusSearch(HashingEncoder(), RunSettings(tokenize_threads=-1))
    for bad in ({"precision": "fp8"}, {"batch_size": 0}):  # refused before the (unloadable) model is looked up
        with pytest.raises(ValueError) as refused:
            evaluate("no-such-org/no-such-model", ["DisastIR-QA-Bio"], cache_dir=False, **bad)
        says(str(refused.value), "'fp8'" if "precision" in bad else "batch_size=0")


def test_other_encoders_keep_their_own_encode_in_length_order(tmp_path: Path, use_data: object) -> None:
    texts = _texts(50, seed=4)
    task = _corpus_task(tmp_path, use_data, texts)
    encoder = HashingEncoder()
    searcher = SharedCorpusSearch(encoder, RunSettings(progress=False), store=EmbeddingStore(tmp_path / "cache"),
                                  chunk_size=16)
    _index(searcher, task)
    assert searcher.encoding.path == "model.encode (mteb)"
    np.testing.assert_array_equal(np.asarray(searcher.corpus_embeddings), HashingEncoder().embed(texts))


def test_all_tasks_queries_in_one_pass_equal_task_by_task(use_data: object, tmp_path: Path, small_model: object,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Queries of many tasks, with the DisastIR instructions, encoded together: the vectors each task's own
    encode gives (to float rounding: other batches), under the same store keys, so a rerun encodes nothing.

    On 300 passages (3 queries per task): the corpus is encoded once on the way, not checked."""
    from disastir_mteb.models.adapter import with_instructions
    from disastir_mteb.sample.generator import SampleScale, write_sample
    from disastir_mteb.vocabulary.taxonomy import get_spec

    use_data(write_sample(tmp_path / "data", scale=SampleScale("queries", n_passages=300, queries_per_task=3,
                                                                judged_per_query=14, passage_words=32)))
    model = with_instructions(small_model, "disastir")
    names = ["DisastIR-QA-Bio", "DisastIR-FC-Geo", "DisastIR-STS-Tech"]
    tasks = [mteb.get_task(name) for name in names]
    store = EmbeddingStore(tmp_path / "cache")
    joint = SharedCorpusSearch(model, RunSettings(progress=False, devices=None), store=store)
    with caplog.at_level("INFO", logger="disastir_mteb.search"):
        prefetch(joint, tasks, encode_kwargs={"batch_size": 8})
    assert "Encoded the queries of 3 task(s) in one length-sorted pass" in caplog.text
    n_queries = sum(len(t.dataset["default"]["test"]["queries"]) for t in tasks)
    assert joint.queries_encoded == n_queries

    separate = SharedCorpusSearch(model, RunSettings(progress=False, devices=None), store=None)
    st = small_model.model
    for task in tasks:
        data = task.dataset["default"]["test"]
        stored = joint._query_embeddings(data["queries"], task.metadata, "test", "default", {"batch_size": 8}, None)
        own = separate._query_embeddings(data["queries"], task.metadata, "test", "default", {"batch_size": 8}, None)
        np.testing.assert_allclose(stored, own, atol=1e-5)
        instructed = [model.config.format(get_spec(task.metadata.name).intent, q) for q in data["queries"]["text"]]
        np.testing.assert_allclose(stored, st.encode_query(instructed, batch_size=8), atol=1e-5)
    assert joint.queries_encoded == n_queries  # the per-task calls above were store hits

    again = SharedCorpusSearch(model, RunSettings(progress=False, devices=None), store=store)
    prefetch(again, tasks, encode_kwargs={"batch_size": 8})
    assert again.queries_encoded == 0 and again.passages_encoded == 0


class _BrokenPromptLookup(HashingEncoder):
    """A model whose mteb prompt lookup fails (its own prompt table lacks an entry it needs)."""

    def get_prompt(self, task_metadata: object, prompt_type: object) -> str:
        raise KeyError("the model's prompt table has no entry for Retrieval")


class _OtherPromptApi(HashingEncoder):
    """A model with a ``get_prompt`` of another library's API: not mteb's (task_metadata, prompt_type) lookup."""

    def get_prompt(self) -> str:
        return "not mteb's"


def test_a_failing_prompt_lookup_raises_instead_of_changing_the_cache_key(tmp_path: Path, use_data: object) -> None:
    """The passage prompt is part of the embedding key: a lookup that fails is an error, never "no prompt"."""
    texts = _texts(20, seed=5)
    task = _corpus_task(tmp_path, use_data, texts)
    store = EmbeddingStore(tmp_path / "cache")
    with pytest.raises(KeyError, match="prompt table has no entry"):
        _index(SharedCorpusSearch(_BrokenPromptLookup(), RunSettings(progress=False), store=store), task)
    assert _embedding_files(tmp_path / "cache") == []  # nothing filed under a key without the prompt
    other = SharedCorpusSearch(_OtherPromptApi(), RunSettings(progress=False), store=store)
    _index(other, task)  # another API's get_prompt: no mteb prompt, as for a model without one
    np.testing.assert_array_equal(np.asarray(other.corpus_embeddings), HashingEncoder().embed(texts))
    assert _embedding_files(tmp_path / "cache")


def _embedding_files(root: Path) -> list[Path]:
    """The store's embedding chunk files (the model identity's probe vectors aside)."""
    return [path for path in root.rglob("*.npy") if "probes" not in path.relative_to(root).parts]

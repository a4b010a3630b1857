"""Exact search: equal to a brute-force reference (ties included), and equal to mteb's own search."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mteb
import numpy as np
import pytest
import torch
from datasets import Dataset
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.mocks.mock_tasks.retrieval import general_args
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from mteb.models.search_wrappers import SearchEncoderWrapper
from mteb.similarity_functions import cos_sim, dot_score, euclidean_sim
from sentences import says

from disastir_mteb.search import exact_search, torch_device
from disastir_mteb.search import top_k as kernel
from disastir_mteb.search.exact_search import ExactIndex, similarity_kind, top_k_inner_product

BACKENDS = ["torch", "numpy"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "numpy":
        for module in (exact_search, kernel):  # the backend's and the kernel's
            monkeypatch.setattr(module, "import_torch", lambda: None)
    return request.param


def brute_force(queries: np.ndarray, corpus: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Full float64 similarity matrix, sorted by (similarity descending, index ascending)."""
    scores = queries.astype(np.float64) @ corpus.astype(np.float64).T
    top_k = min(top_k, corpus.shape[0])
    order = np.array([np.lexsort((np.arange(corpus.shape[0]), -row))[:top_k] for row in scores], dtype=np.int64)
    order = order.reshape(len(queries), top_k)
    return np.take_along_axis(scores, order, axis=1), order


def small_integers(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Vectors whose inner products are exact in float32 whatever the summation order: many exact ties."""
    return rng.integers(-2, 3, shape).astype(np.float32)


@pytest.mark.parametrize("seed", range(6))
def test_equals_brute_force_with_ties(backend: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    queries, corpus = small_integers(rng, (23, 4)), small_integers(rng, (97, 4))
    for top_k in (1, 5, 10, 96, 97, 500):
        expected_sim, expected_idx = brute_force(queries, corpus, top_k)
        similarities, indices = top_k_inner_product(queries, corpus, top_k)
        assert similarities.dtype == np.float32 and indices.dtype == np.int64
        assert indices.shape == (23, min(top_k, 97))
        np.testing.assert_array_equal(indices, expected_idx)
        np.testing.assert_array_equal(similarities, expected_sim)


def test_small_blocks_give_identical_results(backend: str) -> None:
    rng = np.random.default_rng(7)
    queries, corpus = small_integers(rng, (50, 6)), small_integers(rng, (200, 6))
    expected = brute_force(queries, corpus, 10)
    for query_block, corpus_block in ((7, 13), (1, 1), (50, 9), (3, 200)):
        similarities, indices = top_k_inner_product(queries, corpus, 10, query_block=query_block,
                                                    corpus_block=corpus_block)
        np.testing.assert_array_equal(indices, expected[1])
        np.testing.assert_array_equal(similarities, expected[0])


def test_gaussian_vectors(backend: str) -> None:
    rng = np.random.default_rng(3)
    queries = rng.standard_normal((40, 32), dtype=np.float32)
    corpus = rng.standard_normal((1000, 32), dtype=np.float32)
    expected_sim, expected_idx = brute_force(queries, corpus, 20)
    similarities, indices = top_k_inner_product(queries, corpus, 20, query_block=7, corpus_block=130)
    np.testing.assert_array_equal(indices, expected_idx)
    np.testing.assert_allclose(similarities, expected_sim, rtol=1e-5, atol=1e-5)


def test_edge_shapes(backend: str) -> None:
    rng = np.random.default_rng(0)
    corpus = rng.standard_normal((5, 3), dtype=np.float32)
    similarities, indices = top_k_inner_product(np.zeros((0, 3), np.float32), corpus, 10)
    assert similarities.shape == indices.shape == (0, 5)
    one = corpus[:1]
    similarities, indices = top_k_inner_product(corpus, one, 10)
    assert indices.tolist() == [[0]] * 5
    np.testing.assert_allclose(similarities[:, 0], corpus @ one[0], rtol=1e-6)
    with pytest.raises(ValueError, match="top_k=0"):
        top_k_inner_product(corpus, corpus, 0)
    with pytest.raises(ValueError, match="dimension 3"):
        top_k_inner_product(corpus, np.zeros((4, 2), np.float32), 1)
    with pytest.raises(ValueError, match="NaN"):
        top_k_inner_product(np.full((1, 3), np.nan, np.float32), corpus, 1)


def test_float16_memory_mapped_corpus(backend: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    queries = rng.standard_normal((30, 16), dtype=np.float32)
    path = tmp_path / "corpus.npy"
    np.save(path, rng.standard_normal((300, 16)).astype(np.float16))
    corpus = np.load(path, mmap_mode="r")
    expected_sim, expected_idx = brute_force(queries, np.asarray(corpus, dtype=np.float32), 10)
    similarities, indices = top_k_inner_product(queries, corpus, 10, corpus_block=64)
    np.testing.assert_array_equal(indices, expected_idx)
    np.testing.assert_allclose(similarities, expected_sim, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------- inside mteb


class HashEncoder(AbsEncoder):
    """A deterministic encoder: a seeded Gaussian vector per text, with norms from 0.2 to 3."""

    def __init__(self, similarity: ScoringFunction) -> None:
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={
            "name": f"test/hash-{similarity.value}", "revision": "1", "similarity_fn_name": similarity})

    def encode(self, inputs: Any, **kwargs: Any) -> np.ndarray:
        vectors = []
        for batch in inputs:
            for text in batch["text"]:
                rng = np.random.default_rng(int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest()))
                vectors.append(rng.normal(size=16) * rng.uniform(0.2, 3.0))
        return np.asarray(vectors, dtype=np.float32)


def _split(with_top_ranked: bool) -> RetrievalSplitData:
    rng = np.random.default_rng(0)
    corpus = [{"id": f"d{i}", "text": f"passage {i}", "title": ""} for i in range(60)]
    queries = [{"id": f"q{i}", "text": f"query {i}"} for i in range(12)]
    relevant = {q["id"]: {f"d{j}": int(rng.integers(1, 3)) for j in rng.choice(60, 6, replace=False)}
                for q in queries}
    top_ranked = ({q["id"]: [f"d{j}" for j in rng.choice(60, 15, replace=False)] for q in queries}
                  if with_top_ranked else None)
    return RetrievalSplitData(queries=Dataset.from_list(queries), corpus=Dataset.from_list(corpus),
                              relevant_docs=relevant, top_ranked=top_ranked)


class ParityRetrieval(AbsTaskRetrieval):
    metadata = TaskMetadata(type="Retrieval", name="ExactIndexParityRetrieval", main_score="ndcg_at_10",
                            **general_args)

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        self.dataset = {"default": {"test": _split(with_top_ranked=False)}}
        self.data_loaded = True


class ParityReranking(AbsTaskRetrieval):
    metadata = TaskMetadata(type="Reranking", name="ExactIndexParityReranking", main_score="map_at_1000",
                            **general_args)

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        self.dataset = {"default": {"test": _split(with_top_ranked=True)}}
        self.data_loaded = True


def _run(model: Any, task: AbsTaskRetrieval, folder: Path) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    result = mteb.evaluate(model, task, cache=None, show_progress_bar=False, prediction_folder=folder)
    predictions = json.loads((folder / f"{task.metadata.name}_predictions.json").read_text())
    return result.task_results[0].scores["test"][0], predictions["default"]["test"]


@pytest.mark.parametrize("similarity", [ScoringFunction.COSINE, ScoringFunction.DOT_PRODUCT], ids=["cos", "dot"])
@pytest.mark.parametrize("task_class", [ParityRetrieval, ParityReranking], ids=["retrieval", "rerank"])
def test_matches_mteb_default_search(similarity: ScoringFunction, task_class: type, tmp_path: Path) -> None:
    encoder = HashEncoder(similarity)
    ours, our_predictions = _run(SearchEncoderWrapper(encoder, index_backend=ExactIndex()), task_class(),
                                 tmp_path / "exact")
    reference, reference_predictions = _run(SearchEncoderWrapper(encoder), task_class(), tmp_path / "mteb")
    assert ours["main_score"] > 0
    numeric = {name for name, value in reference.items() if isinstance(value, float)}
    assert {name: ours[name] for name in numeric} == pytest.approx({name: reference[name] for name in numeric},
                                                                   abs=1e-6, nan_ok=True)
    assert our_predictions.keys() == reference_predictions.keys()
    for query_id, ranked in reference_predictions.items():
        assert our_predictions[query_id] == pytest.approx(ranked, abs=1e-6)


def test_similarity_detection() -> None:
    assert similarity_kind(cos_sim, 8) == "cosine"
    assert similarity_kind(dot_score, 8) == "dot"
    assert similarity_kind(HashEncoder(ScoringFunction.COSINE).similarity, 8) == "cosine"
    assert similarity_kind(HashEncoder(ScoringFunction.DOT_PRODUCT).similarity, 8) == "dot"
    with pytest.raises(ValueError, match="neither"):
        similarity_kind(euclidean_sim, 8)


def test_rerank_indices_point_into_the_candidate_list() -> None:
    documents = np.eye(4, dtype=np.float32) * np.array([[1.0], [2.0], [3.0], [4.0]], dtype=np.float32)
    index = ExactIndex()
    index.add_documents(documents, ["a", "b", "c", "d"])
    queries = np.ones((2, 4), np.float32)
    similarities, indices = index.search(queries, 2, dot_score, top_ranked={"q1": ["b", "d", "a"], "q2": []},
                                         query_idx_to_id={0: "q1", 1: "q2"})
    assert indices == [[1, 0], []] and similarities == [[4.0, 2.0], []]
    with pytest.raises(ValueError, match="query_idx_to_id"):
        index.search(queries, 2, dot_score, top_ranked={"q1": ["a"]})
    with pytest.raises(KeyError, match="not among"):
        index.search(queries[:1], 2, dot_score, top_ranked={"q1": ["zz"]}, query_idx_to_id={0: "q1"})


def test_keep_on_clear() -> None:
    rng = np.random.default_rng(0)
    documents = rng.standard_normal((20, 8), dtype=np.float32)
    queries = rng.standard_normal((3, 8), dtype=np.float32)
    ids = [f"d{i}" for i in range(20)]

    plain = ExactIndex()
    plain.add_documents(documents, ids)
    plain.clear()
    with pytest.raises(ValueError, match="holds no documents"):
        plain.search(queries, 5, cos_sim)

    kept = ExactIndex(keep_on_clear=True)
    kept.add_documents(documents, ids)
    first = kept.search(queries, 5, cos_sim)
    kept.clear()
    kept.add_documents(documents.copy(), ids)  # the same corpus again, as mteb does for the next task
    assert kept.adds_skipped == 1
    assert kept.search(queries, 5, cos_sim) == first
    kept.add_documents(documents[:10], ids[:10])  # other ids: replaced
    assert kept.adds_skipped == 1 and kept.idxs == ids[:10]
    assert max(max(row) for row in kept.search(queries, 20, dot_score)[1]) == 9
    kept.add_documents(documents[:10] * 2, ids[:10])  # same ids, other vectors: replaced, never served stale
    assert kept.adds_skipped == 1
    best = 2 * float(np.max(queries[0] @ documents[:10].T))
    assert kept.search(queries, 1, dot_score)[0][0][0] == pytest.approx(best, rel=1e-5)


# ---------------------------------------------------------------------- on the model's device

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


def planted_ties(rng: np.random.Generator, n_queries: int, n_docs: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Small-integer vectors (exact float32 products) with duplicated corpus rows, so ties straddle the k-th place."""
    queries, corpus = small_integers(rng, (n_queries, dim)), small_integers(rng, (n_docs, dim))
    copies = rng.choice(n_docs, n_docs // 3, replace=False)
    corpus[copies] = corpus[rng.integers(0, n_docs, copies.size)]
    return queries, corpus


def straddles_kth(similarities: np.ndarray, queries: np.ndarray, corpus: np.ndarray, top_k: int) -> int:
    """How many queries have a tie across the k-th place (so the test really exercises tie breaking)."""
    scores = queries.astype(np.float64) @ corpus.astype(np.float64).T
    kth = similarities[:, top_k - 1:top_k]
    return int(((scores == kth).sum(axis=1) > (similarities == kth).sum(axis=1)).sum())


@pytest.fixture
def tensor_path_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The score blocks the device path ranks, recorded: they must stay torch tensors."""
    calls: list[Any] = []
    real = kernel._exact_top_tensor

    def spy(scores: Any, offset: int, top_k: int, torch_module: Any) -> tuple[np.ndarray, np.ndarray]:
        calls.append(scores)
        return real(scores, offset, top_k, torch_module)

    monkeypatch.setattr(kernel, "_exact_top_tensor", spy)
    return calls


@pytest.mark.parametrize(("seed", "device"), [(0, "cpu"), (1, "cpu"), (2, "cpu"), (3, torch.device("cpu"))])
def test_device_cpu_equals_default_and_brute_force(device: Any, seed: int, tensor_path_calls: list[Any]) -> None:
    rng = np.random.default_rng(seed)
    queries, corpus = planted_ties(rng, 37, 211, 5)
    straddling = 0
    for top_k in (1, 7, 211, 300):
        expected = brute_force(queries, corpus, top_k)
        straddling += straddles_kth(expected[0], queries, corpus, min(top_k, 211))
        for query_block, corpus_block in ((None, 65536), (5, 17), (2, 3), (37, 10), (4, 211)):
            default = top_k_inner_product(queries, corpus, top_k, query_block=query_block, corpus_block=corpus_block)
            calls = len(tensor_path_calls)
            on_device = top_k_inner_product(queries, corpus, top_k, query_block=query_block,
                                            corpus_block=corpus_block, device=device)
            assert len(tensor_path_calls) > calls
            assert all(isinstance(scores, torch.Tensor) for scores in tensor_path_calls)
            assert on_device[0].dtype == np.float32 and on_device[1].dtype == np.int64
            for result in (default, on_device):
                np.testing.assert_array_equal(result[1], expected[1])
                np.testing.assert_array_equal(result[0], expected[0])
    assert straddling > 0


@pytest.mark.parametrize("corpus_block", [64, 100, 300])
def test_device_cpu_float16_memory_map(tmp_path: Path, corpus_block: int) -> None:
    rng = np.random.default_rng(5)
    queries, corpus = planted_ties(rng, 30, 300, 16)
    path = tmp_path / "corpus.npy"
    np.save(path, corpus.astype(np.float16))
    mapped = np.load(path, mmap_mode="r")
    expected = brute_force(queries, corpus, 10)
    assert straddles_kth(expected[0], queries, corpus, 10) > 0
    default = top_k_inner_product(queries, mapped, 10, corpus_block=corpus_block)
    for result in (default, top_k_inner_product(queries, mapped, 10, corpus_block=corpus_block, device="cpu"),
                   top_k_inner_product(queries, torch.from_numpy(corpus.astype(np.float16)), 10,
                                       corpus_block=corpus_block, device="cpu")):
        np.testing.assert_array_equal(result[1], expected[1])
        np.testing.assert_array_equal(result[0], expected[0])


def test_device_cpu_gaussian_equals_default() -> None:
    rng = np.random.default_rng(3)
    queries = rng.standard_normal((40, 32), dtype=np.float32)
    corpus = rng.standard_normal((1000, 32), dtype=np.float32)
    default = top_k_inner_product(queries, corpus, 20, query_block=7, corpus_block=130)
    on_device = top_k_inner_product(queries, corpus, 20, query_block=7, corpus_block=130, device="cpu")
    from_tensor = top_k_inner_product(queries, torch.from_numpy(corpus), 20, query_block=7, corpus_block=130)
    for result in (on_device, from_tensor):
        np.testing.assert_array_equal(result[1], default[1])
        np.testing.assert_array_equal(result[0], default[0])


def test_tie_straddling_kth_goes_to_lowest_ids_on_device() -> None:
    corpus = np.zeros((50, 2), np.float32)
    corpus[:, 0] = 1.0
    corpus[[3, 41], 0] = 2.0  # two clear winners, then 48 rows tied for the remaining places
    for corpus_block in (1, 6, 50):
        similarities, indices = top_k_inner_product(np.ones((2, 2), np.float32), corpus, 5,
                                                    corpus_block=corpus_block, device="cpu")
        assert indices.tolist() == [[3, 41, 0, 1, 2]] * 2
        assert similarities.tolist() == [[2.0, 2.0, 1.0, 1.0, 1.0]] * 2


@pytest.mark.skipif(CUDA, reason="CUDA is available here")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda")], ids=str)
def test_cuda_without_cuda_is_a_clear_error(device: Any) -> None:
    corpus = np.eye(3, dtype=np.float32)
    with pytest.raises(ValueError) as refused:
        top_k_inner_product(corpus, corpus, 1, device=device)
    says(str(refused.value), f"device={device!r}", "CUDA is not available", "device=None", "'cpu'")
    with pytest.raises(ValueError) as refused:
        ExactIndex(device=device)
    says(str(refused.value), f"device={device!r}", "CUDA is not available")
    index = ExactIndex()
    with pytest.raises(ValueError) as refused:
        index.device = device
    says(str(refused.value), f"device={device!r}", "CUDA is not available")
    assert index.device is None


def test_unsupported_device_is_a_clear_error() -> None:
    corpus = np.eye(3, dtype=np.float32)
    with pytest.raises(ValueError) as refused:
        top_k_inner_product(corpus, corpus, 1, device="tpu")
    says(str(refused.value), "device='tpu'", "'cpu', 'cuda'")
    with pytest.raises(ValueError) as refused:
        top_k_inner_product(corpus, corpus, 1, device="meta")
    says(str(refused.value), "device='meta'", "not supported by exact search", "'cpu', 'cuda'")


def test_cuda_device_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    """"cuda" means the current GPU; a GPU index that does not exist is refused (CUDA faked present)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert torch_device.resolve_device("cuda", torch) == torch.device("cuda:1")
    assert torch_device.resolve_device(torch.device("cuda:0"), torch) == torch.device("cuda:0")
    with pytest.raises(ValueError) as refused:
        torch_device.resolve_device("cuda:2", torch)
    says(str(refused.value), "device='cuda:2'", "does not exist", "2 CUDA device(s)", "'cuda:0' to 'cuda:1'")


def test_numpy_fallback_accepts_device_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel, "import_torch", lambda: None)
    rng = np.random.default_rng(2)
    queries, corpus = planted_ties(rng, 9, 40, 4)
    expected = brute_force(queries, corpus, 6)
    similarities, indices = top_k_inner_product(queries, corpus, 6, corpus_block=7, device="cpu")
    np.testing.assert_array_equal(indices, expected[1])
    np.testing.assert_array_equal(similarities, expected[0])
    with pytest.raises(ValueError, match="needs torch"):
        top_k_inner_product(queries, corpus, 6, device="cuda")


def _fp32_switches() -> dict[str, Any]:
    """torch's new-API TF32 switches (``fp32_precision``), parents first."""
    backends = torch.backends
    return {"generic": backends, "matmul": backends.cuda.matmul, "cudnn": backends.cudnn,
            "conv": backends.cudnn.conv, "rnn": backends.cudnn.rnn, "mkldnn": backends.mkldnn,
            "mkldnn.matmul": backends.mkldnn.matmul, "mkldnn.conv": backends.mkldnn.conv,
            "mkldnn.rnn": backends.mkldnn.rnn}


def _tf32_state() -> dict[str, Any]:
    """Every TF32 flag, legacy and new API; ``"raises"`` where torch refuses to read one."""
    state = {name: switch.fp32_precision for name, switch in _fp32_switches().items()}
    readers: dict[str, Any] = {"matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
                               "cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
                               "precision": torch.get_float32_matmul_precision}
    for name, read in readers.items():
        try:
            state[name] = read()
        except RuntimeError:
            state[name] = "raises"
    return state


@pytest.fixture
def restore_tf32() -> Iterator[None]:
    """Put torch's process-wide TF32 flags back after a test that changes them (legacy first, then new API)."""
    saved = _tf32_state()
    yield
    if saved["precision"] != "raises":
        torch.set_float32_matmul_precision(saved["precision"])
    if saved["cudnn.allow_tf32"] != "raises":
        torch.backends.cudnn.allow_tf32 = saved["cudnn.allow_tf32"]
    for name, switch in _fp32_switches().items():
        switch.fp32_precision = saved[name]
    assert _tf32_state() == saved


CALLER_TF32 = {
    "defaults": lambda: None,
    "legacy allow_tf32": lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", True),
    "matmul precision high": lambda: torch.set_float32_matmul_precision("high"),
    "new API tf32": lambda: setattr(torch.backends, "fp32_precision", "tf32"),
    "oneDNN matmul bf16": lambda: setattr(torch.backends.mkldnn.matmul, "fp32_precision", "bf16"),
    "mixed APIs": lambda: (setattr(torch.backends.cuda.matmul, "allow_tf32", True),
                           setattr(torch.backends.cudnn.conv, "fp32_precision", "ieee")),
}


@pytest.mark.parametrize("caller", CALLER_TF32)
def test_tf32_is_off_during_a_cuda_search_and_restored_after(caller: str, restore_tf32: None) -> None:
    CALLER_TF32[caller]()
    before = _tf32_state()
    with torch_device.float32_matmul(torch, torch.device("cuda")):
        inside = _tf32_state()
    assert _tf32_state() == before
    assert inside["matmul"] == inside["conv"] == inside["rnn"] == "ieee"
    assert inside["matmul.allow_tf32"] is False
    with torch_device.float32_matmul(torch, torch.device("cpu")):
        assert _tf32_state() == before  # the CPU search touches nothing


@pytest.mark.parametrize("similarity", [cos_sim, dot_score], ids=["cos", "dot"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_exact_index_device_cpu_equals_default(similarity: Any, dtype: type) -> None:
    rng = np.random.default_rng(4)
    documents = rng.standard_normal((300, 12)).astype(dtype)
    queries = rng.standard_normal((17, 12), dtype=np.float32)
    ids = [f"d{i}" for i in range(300)]
    plain, on_cpu = ExactIndex(corpus_block=64), ExactIndex(corpus_block=64, device="cpu")
    for index in (plain, on_cpu):
        index.add_documents(documents, ids)
    assert on_cpu.device == torch.device("cpu") and plain.device is None
    assert on_cpu.search(queries, 10, similarity) == plain.search(queries, 10, similarity)
    assert on_cpu.device_bytes == 0 and on_cpu.device_copies == 0  # the CPU reads the documents in place


def test_exact_index_resident_copy_life_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU bookkeeping, run on the CPU: one copy per corpus and kind, dropped when anything changes."""
    monkeypatch.setattr(exact_search, "_wants_resident_copy", lambda device: device is not None)
    rng = np.random.default_rng(6)
    documents = rng.standard_normal((200, 8)).astype(np.float16)
    queries = rng.standard_normal((5, 8), dtype=np.float32)
    ids = [f"d{i}" for i in range(200)]
    plain = ExactIndex(corpus_block=50)
    plain.add_documents(documents, ids)
    index = ExactIndex(keep_on_clear=True, corpus_block=50)
    index.add_documents(documents, ids)
    assert index.device is None and index.device_bytes == 0
    index.device = "cpu"  # as the search wrapper sets it from the model's device
    assert index.search(queries, 10, dot_score) == plain.search(queries, 10, dot_score)
    assert index.device_copies == 1 and index.device_bytes == 200 * 8 * 2  # float16 stays float16
    index.clear()
    index.add_documents(documents.copy(), ids)  # the next task's same corpus
    assert index.search(queries, 10, dot_score) == plain.search(queries, 10, dot_score)
    assert index.device_copies == 1 and index.device_bytes == 200 * 8 * 2  # the same copy, kept
    assert index.search(queries, 10, cos_sim) == plain.search(queries, 10, cos_sim)
    assert index.device_copies == 2 and index.device_bytes == 200 * 8 * 4  # normalised: float32
    assert index.search(queries, 10, cos_sim) == plain.search(queries, 10, cos_sim)
    assert index.device_copies == 2
    index.add_documents(documents[:100], ids[:100])  # other documents: the copy goes
    assert index.device_bytes == 0
    index.device = torch.device("cpu")  # the same device: nothing happens
    index.search(queries, 10, cos_sim)
    assert index.device_copies == 3 and index.device_bytes == 100 * 8 * 4
    index.device = None
    assert index.device_bytes == 0
    index.search(queries, 10, cos_sim)
    assert index.device_copies == 3


# ---------------------------------------------------------------------- on a GPU (skipped without CUDA)


@needs_cuda
@pytest.mark.parametrize("seed", range(4))
def test_cuda_equals_cpu_with_planted_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    queries, corpus = planted_ties(rng, 300, 5000, 8)
    for top_k in (1, 10, 100):
        cpu = top_k_inner_product(queries, corpus, top_k, device="cpu")
        assert straddles_kth(cpu[0], queries, corpus, top_k) > 0
        for query_block, corpus_block in ((None, 65536), (64, 1000), (7, 333)):
            gpu = top_k_inner_product(queries, corpus, top_k, query_block=query_block, corpus_block=corpus_block,
                                      device="cuda")
            np.testing.assert_array_equal(gpu[1], cpu[1])
            np.testing.assert_array_equal(gpu[0], cpu[0])


@needs_cuda
def test_cuda_float16_memory_map_equals_cpu(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    queries, corpus = planted_ties(rng, 100, 3000, 16)
    path = tmp_path / "corpus.npy"
    np.save(path, corpus.astype(np.float16))
    mapped = np.load(path, mmap_mode="r")
    cpu = top_k_inner_product(queries, mapped, 10, corpus_block=700)
    for corpus_input in (mapped, torch.from_numpy(corpus.astype(np.float16)).cuda()):
        gpu = top_k_inner_product(queries, corpus_input, 10, corpus_block=700, device="cuda")
        np.testing.assert_array_equal(gpu[1], cpu[1])
        np.testing.assert_array_equal(gpu[0], cpu[0])


@needs_cuda
def test_cuda_scores_are_float32_even_with_tf32_enabled(restore_tf32: None) -> None:
    torch.backends.cuda.matmul.allow_tf32 = True  # what many training scripts set; TF32 errors are ~1e-3
    rng = np.random.default_rng(9)
    queries = rng.standard_normal((200, 256), dtype=np.float32)
    corpus = rng.standard_normal((4000, 256), dtype=np.float32)
    expected_sim, expected_idx = brute_force(queries, corpus, 10)
    similarities, indices = top_k_inner_product(queries, corpus, 10, device="cuda")
    assert torch.backends.cuda.matmul.allow_tf32 is True
    np.testing.assert_array_equal(indices, expected_idx)
    np.testing.assert_allclose(similarities, expected_sim, rtol=1e-5, atol=1e-4)


@needs_cuda
@pytest.mark.parametrize("similarity", [cos_sim, dot_score], ids=["cos", "dot"])
def test_exact_index_on_cuda_equals_cpu(similarity: Any) -> None:
    rng = np.random.default_rng(10)  # Gaussian: normalising on the CPU and scoring on the GPU may round a last bit
    queries = rng.standard_normal((50, 32), dtype=np.float32)
    documents = rng.standard_normal((2000, 32), dtype=np.float32)
    ids = [f"d{i}" for i in range(2000)]
    cpu, gpu = ExactIndex(keep_on_clear=True), ExactIndex(keep_on_clear=True)
    gpu.device = "cuda"
    for index in (cpu, gpu):
        index.add_documents(documents, ids)
    expected = cpu.search(queries, 20, similarity)
    for _ in range(2):  # the second search reuses the copy on the GPU
        found = gpu.search(queries, 20, similarity)
        assert found[1] == expected[1]
        assert np.allclose(found[0], expected[0], rtol=1e-6, atol=1e-5)
    assert gpu.device_copies == 1 and gpu.device_bytes == 2000 * 32 * 4
    gpu.device = None
    assert gpu.device_bytes == 0 and gpu.search(queries, 20, similarity)[1] == expected[1]


def _resident_file_mib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no RssFile line")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc/self/status")
def test_normalising_a_stored_corpus_keeps_one_copy_in_memory(tmp_path: Path) -> None:
    """A cosine model's unit rows replace the store's mapped pages in memory, not join them; the map stays right."""
    vectors = np.random.default_rng(0).standard_normal((60_000, 384)).astype(np.float32)  # 88 MiB
    np.save(tmp_path / "embeddings.npy", vectors)
    mapped = np.load(tmp_path / "embeddings.npy", mmap_mode="r")
    untouched = _resident_file_mib()
    assert float(mapped.sum()) == float(vectors.sum())  # as the store's checksum pass does: every page read
    assert _resident_file_mib() - untouched > 70

    unit = exact_search.normalised(mapped)

    assert _resident_file_mib() - untouched < 10
    np.testing.assert_array_equal(unit, exact_search.normalised(vectors))
    np.testing.assert_array_equal(mapped[12_345], vectors[12_345])  # read again from the file, unchanged


def test_copy_on_write_maps_keep_their_changes_when_normalised(tmp_path: Path) -> None:
    np.save(tmp_path / "embeddings.npy", np.ones((2_000, 8), np.float32))
    changed = np.load(tmp_path / "embeddings.npy", mmap_mode="c")
    changed[5] = 3.0

    exact_search.normalised(changed)

    assert changed[5, 0] == 3.0

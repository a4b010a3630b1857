"""Exact search: equal to a brute-force reference (ties included), and equal to mteb's own search."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import mteb
import numpy as np
import pytest
from datasets import Dataset
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.mocks.mock_tasks.retrieval import general_args
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from mteb.models.search_wrappers import SearchEncoderWrapper
from mteb.similarity_functions import cos_sim, dot_score, euclidean_sim

from disastir_mteb import exact_search
from disastir_mteb.exact_search import ExactIndex, similarity_kind, top_k_inner_product

BACKENDS = ["torch", "numpy"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "numpy":
        monkeypatch.setattr(exact_search, "_torch", lambda: None)
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

"""USearch backend: exact parity, the paper's parameters reaching USearch, recall floors, persistence, mteb parity."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import mteb
import numpy as np
import pytest
from datasets import Dataset
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.mocks.mock_tasks.retrieval import MockRetrievalTask, general_args
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from mteb.models.search_wrappers import SearchEncoderWrapper
from mteb.similarity_functions import cos_sim, dot_score
from sentences import says

from disastir_mteb.search.exact_search import ExactIndex, top_k_inner_product
from disastir_mteb.search.usearch_index import PRESETS, AnnParams, UsearchIndex, resolve_params

usearch_index = pytest.importorskip("usearch.index")

N_DOCS, N_QUERIES, DIM = 2000, 200, 64


def clustered(seed: int = 0, n_docs: int = N_DOCS, dim: int = DIM) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Gaussian clusters like sentence embeddings (random vectors are meaningless for HNSW): raw, not unit length."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    docs = centres[rng.integers(0, 40, n_docs)] + rng.standard_normal((n_docs, dim)).astype(np.float32) * 0.6 / 8
    queries = docs[rng.integers(0, n_docs, N_QUERIES)] + rng.standard_normal((N_QUERIES, dim)).astype(np.float32) / 16
    scale = rng.uniform(0.5, 2.0, (n_docs, 1)).astype(np.float32)  # unequal norms: cosine and dot rank differently
    return docs * scale, queries, [f"d{i}" for i in range(n_docs)]


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def recall_at_10(found: list[list[int]], reference: np.ndarray) -> float:
    return float(np.mean([len(set(row) & set(ref)) / 10 for row, ref in zip(found, reference.tolist(), strict=True)]))


def assert_same_ranking(found: tuple[list[list[float]], list[list[int]]], reference: tuple[np.ndarray, np.ndarray]):
    """Equal indices, except where two documents tie within float32 rounding; similarities equal to 1e-5."""
    similarities, indices = np.array(found[0]), np.array(found[1])
    assert indices.shape == reference[1].shape
    np.testing.assert_allclose(similarities, reference[0], atol=1e-5)
    differ = indices != reference[1]
    assert not (differ & (np.abs(similarities - reference[0]) > 1e-5)).any()
    assert differ.sum() <= 2  # ties are rare with Gaussian noise


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, list[str]]:
    return clustered()


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
@pytest.mark.parametrize("params", [PRESETS["exact"], resolve_params("paper", expansion_search=2000, threads=1)],
                         ids=["exact", "hnsw-ef2000"])
def test_equal_to_exact_top_k(data: Any, params: AnnParams, similarity: str) -> None:
    docs, queries, ids = data
    index = UsearchIndex(params)
    index.add_documents(docs, ids)
    if similarity == "cosine":
        found, reference = index.search(queries, 10, cos_sim), top_k_inner_product(unit(queries), unit(docs), 10)
    else:
        found, reference = index.search(queries, 10, dot_score), top_k_inner_product(queries, docs, 10)
    assert_same_ranking(found, reference)
    assert all(row == sorted(row, reverse=True) for row in found[0])  # similarities: higher is better


def test_paper_parameters_reach_usearch(data: Any) -> None:
    import disastir_mteb

    assert disastir_mteb.UsearchIndex is UsearchIndex and disastir_mteb.PRESETS["paper"] == AnnParams()
    docs, _, ids = data
    index = UsearchIndex("paper")
    assert index.usearch_index is None  # built at the first search, which knows the similarity
    index.add_documents(docs, ids)
    similarities, indices = index.search(docs[:3], 1, cos_sim)
    built = index.usearch_index
    assert (built.connectivity, built.expansion_add, built.expansion_search) == (16, 128, 64)
    assert built.dtype == usearch_index.ScalarKind.F32 and built.metric == usearch_index.MetricKind.IP
    assert (built.ndim, len(built)) == (DIM, N_DOCS)
    assert indices == [[0], [1], [2]] and np.ravel(similarities) == pytest.approx([1.0] * 3, abs=1e-6)  # self-match
    assert index.memory_bytes > 0 and index.builds == 1
    assert PRESETS["paper"].threads == 1 and index.params.threads == 1  # one build thread: the same graph every time
    dot = UsearchIndex("paper", similarity="dot")
    dot.add_documents(docs, ids)  # built at once
    assert dot.builds == 1
    assert dot.search(docs[:1], 1, dot_score)[0][0][0] == pytest.approx(float(docs[0] @ docs[0]), rel=1e-5)


def test_paper_recall(data: Any) -> None:
    docs, queries, ids = data
    index = UsearchIndex("paper")
    index.add_documents(docs, ids)
    assert recall_at_10(index.search(queries, 10, cos_sim)[1], top_k_inner_product(unit(queries), unit(docs), 10)[1]) \
        >= 0.99


@pytest.mark.parametrize("preset", ["f16", "i8", "b1"])
def test_quantised_presets_with_rescore(data: Any, preset: str) -> None:
    docs, queries, ids = data
    index = UsearchIndex(preset)
    index.add_documents(docs, ids)
    found = index.search(queries, 10, cos_sim)
    reference = top_k_inner_product(unit(queries), unit(docs), 10)
    assert recall_at_10(found[1], reference[1]) >= 0.95
    assert index.usearch_index.dtype.name.lower() == preset
    # rescored similarities are exact float32 inner products of the returned documents
    returned = np.einsum("qd,qkd->qk", unit(queries), unit(docs)[np.array(found[1])])
    np.testing.assert_allclose(found[0], returned, atol=1e-5)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_k_above_size_empty_and_one_document(data: Any, preset: str) -> None:
    docs, queries, ids = data
    small = UsearchIndex(preset)
    small.add_documents(docs[:7], ids[:7])
    similarities, indices = small.search(queries[:5], 50, cos_sim)
    assert [sorted(row) for row in indices] == [list(range(7))] * 5  # no sentinel keys, no NaN, no duplicates
    assert all(np.isfinite(row).all() for row in similarities)
    one = UsearchIndex(preset)
    one.add_documents(docs[:1], ids[:1])
    similarities, indices = one.search(queries[:2], 10, cos_sim)
    assert indices == [[0], [0]]
    assert similarities[0] == pytest.approx([float(unit(queries[:1])[0] @ unit(docs[:1])[0])], abs=1e-5)
    empty = UsearchIndex(preset)
    empty.add_documents(np.zeros((0, DIM), np.float32), [])
    assert empty.search(queries[:2], 10, cos_sim) == ([[], []], [[], []])
    assert one.search(np.zeros((0, DIM), np.float32), 10, cos_sim) == ([], [])
    with pytest.raises(ValueError, match="holds no documents"):
        UsearchIndex(preset).search(queries, 10, cos_sim)


def test_k_caps_results_as_the_paper_and_none_follows_mteb(data: Any) -> None:
    docs, queries, ids = data
    paper = UsearchIndex("paper")  # k=10: the paper's top-10, whatever depth mteb asks for
    paper.add_documents(docs, ids)
    assert {len(row) for row in paper.search(queries, 100, cos_sim)[1]} == {10}
    deep = UsearchIndex(resolve_params("paper", k=None))
    deep.add_documents(docs, ids)
    assert {len(row) for row in deep.search(queries, 100, cos_sim)[1]} == {100}
    assert PRESETS["exact"].k is None and resolve_params("exact", threads=4).label() == "exact-ip-f32-kall-t4"
    with pytest.raises(ValueError) as refused:
        resolve_params("paper", k=0)
    says(str(refused.value), "AnnParams.k=0", ">= 1", "None")


def test_rerank_mode_points_into_candidates(data: Any) -> None:
    docs, queries, ids = data
    index, exact = UsearchIndex("paper"), ExactIndex()
    index.add_documents(docs, ids)
    exact.add_documents(docs, ids)
    top_ranked = {"q0": ["d5", "d900", "d17", "d1999"], "q1": ["d3"], "q2": []}
    query_ids = {0: "q0", 1: "q1", 2: "q2"}
    found = index.search(queries[:3], 3, cos_sim, top_ranked=top_ranked, query_idx_to_id=query_ids)
    assert found == exact.search(queries[:3], 3, cos_sim, top_ranked=top_ranked, query_idx_to_id=query_ids)
    assert sorted(found[1][0]) == sorted(set(found[1][0])) and max(found[1][0]) <= 3 and found[1][1:] == [[0], []]
    assert index.builds == 0  # reranking needs no graph


def test_keep_on_clear_builds_once(data: Any) -> None:
    docs, queries, ids = data
    index = UsearchIndex("paper", keep_on_clear=True)
    index.add_documents(docs, ids)
    first = index.search(queries, 10, cos_sim)
    index.clear()
    index.add_documents(docs.copy(), ids)  # the next task, same corpus
    assert index.search(queries, 10, cos_sim) == first
    assert (index.builds, index.builds_skipped) == (1, 1)
    index.add_documents(docs[:100], ids[:100])  # another corpus replaces it
    assert max(max(row) for row in index.search(queries, 10, cos_sim)[1]) < 100 and index.builds == 2
    plain = UsearchIndex("paper")
    plain.add_documents(docs, ids)
    plain.clear()
    with pytest.raises(ValueError, match="holds no documents"):
        plain.search(queries, 10, cos_sim)


#: One fresh build in a child process: ``os.cpu_count`` reports argv[3] cores; the paper preset builds into the
#: cache at argv[2] the vectors saved at argv[1] (USearch and numpy only: no mteb import, about 0.5 s).
_FRESH_BUILD = """
import os, sys
import numpy as np
os.cpu_count = lambda: int(sys.argv[3])
from disastir_mteb.search.usearch_index import UsearchIndex
docs = np.load(sys.argv[1])
index = UsearchIndex("paper", cache_dir=sys.argv[2], cache_key="fresh", similarity="cosine")
index.add_documents(docs, [f"d{i}" for i in range(len(docs))])
print(index.builds, index.params.label())
"""


def test_fresh_builds_save_the_same_index_and_find_the_same_passages(tmp_path: Path) -> None:
    """The paper preset in two fresh processes, told of 1 and of 8 cores: byte-identical index files, the same
    label and cache entry, and the same results from each (a multi-threaded build gave other bytes every time)."""
    import subprocess
    import sys

    docs, queries, ids = clustered(seed=5, n_docs=3000)
    np.save(tmp_path / "docs.npy", docs)
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    files, found = [], []
    for cores in (1, 8):
        child = subprocess.run([sys.executable, "-c", _FRESH_BUILD, str(tmp_path / "docs.npy"),
                                str(tmp_path / f"cores{cores}"), str(cores)],
                               capture_output=True, text=True, env=env, check=False)
        assert child.returncode == 0, child.stderr
        assert child.stdout.split() == ["1", "hnsw-ip-f32-M16-efC128-ef64-k10-t1"]
        (file,) = (tmp_path / f"cores{cores}").rglob("*.usearch")
        files.append(file)
        loaded = UsearchIndex("paper", cache_dir=tmp_path / f"cores{cores}", cache_key="fresh", similarity="cosine")
        loaded.add_documents(docs, ids)  # this process's own cores: the same cache entry
        assert (loaded.builds, loaded.loads) == (0, 1)
        found.append(loaded.search(queries, 10, cos_sim))
    assert files[0].relative_to(tmp_path / "cores1") == files[1].relative_to(tmp_path / "cores8")
    assert files[0].read_bytes() == files[1].read_bytes()
    assert found[0] == found[1]
    here = UsearchIndex("paper", similarity="cosine")
    here.add_documents(docs, ids)  # and a third build, in this process
    assert bytes(here.usearch_index.save()) == files[0].read_bytes() and here.search(queries, 10, cos_sim) == found[0]


def test_threads_resolve_to_the_cores_in_labels_and_cache_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    paper, all_cores = PRESETS["paper"], resolve_params("paper", threads=0)
    assert paper == AnnParams() == resolve_params("paper") and paper.threads == 1  # one thread, on every machine
    assert paper.describe() == "HNSW ip f32 M=16 efC=128 ef=64 k=10 threads=1"
    assert paper.label() == "hnsw-ip-f32-M16-efC128-ef64-k10-t1" and paper.repeatable
    assert all_cores.threads == 0 and all_cores.resolved() == resolve_params("paper", threads=16)  # as given
    assert all_cores.resolved().resolved() == all_cores.resolved()
    assert all_cores.label() == "hnsw-ip-f32-M16-efC128-ef64-k10-t16" and not all_cores.repeatable
    assert resolve_params("paper", threads=4).label() == "hnsw-ip-f32-M16-efC128-ef64-k10-t4"
    assert [PRESETS[name].label() for name in ("exact", "f16", "b1")] == [
        "exact-ip-f32-kall-t16", "hnsw-ip-f16-M16-efC128-ef64-k10-t1-x2",  # brute force repeats on all cores
        "hnsw-hamming-b1-M16-efC128-ef64-k10-t1-x32"]
    assert all(PRESETS[name].repeatable for name in PRESETS)
    assert all_cores.digest == resolve_params("paper", threads=16).digest  # the same build, the same cache entry
    assert len({paper.digest, *(resolve_params("paper", threads=n).digest for n in (0, 2))}) == 3
    assert UsearchIndex(all_cores).params.threads == 16  # the count handed to USearch
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert all_cores.label().endswith("-k10-t2") and all_cores.digest != resolve_params("paper", threads=16).digest
    assert paper.label().endswith("-k10-t1") and paper.digest == resolve_params("paper", threads=1).digest
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # unknown: one thread, which repeats
    assert all_cores.label().endswith("-k10-t1") and all_cores.repeatable


def test_a_multi_threaded_build_is_an_opt_in_that_says_it_does_not_repeat(data: Any,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    docs, _, ids = data
    assert PRESETS["paper"].build_warning() is None
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.usearch_index"):
        UsearchIndex("paper", similarity="cosine").add_documents(docs, ids)
        assert not caplog.records  # the default is quiet
        racy = UsearchIndex(resolve_params("paper", threads=2), similarity="cosine")
        racy.add_documents(docs, ids)
    (record,) = caplog.records
    assert "built on 2 threads" in record.getMessage() and "--ann-threads 1" in record.getMessage()
    assert racy.builds == 1 and racy.params.label().endswith("-t2")


def test_multi_thread_build_recall_matches_single_thread_and_search_is_deterministic() -> None:
    docs, queries, ids = clustered(seed=3, n_docs=20_000)
    reference = top_k_inner_product(unit(queries), unit(docs), 10)[1]
    recalls = {}
    for threads in (1, 4):
        index = UsearchIndex(resolve_params("paper", threads=threads), similarity="cosine")
        index.add_documents(docs, ids)
        found = index.search(queries, 10, cos_sim)
        recalls[threads] = recall_at_10(found[1], reference)
        index.params = resolve_params(index.params, threads=1 if threads > 1 else 4)  # same graph, other search threads
        assert index.search(queries, 10, cos_sim) == found
    assert recalls[1] >= 0.98 and abs(recalls[4] - recalls[1]) <= 0.01, recalls


def test_builds_with_other_thread_counts_do_not_share_a_cached_index(data: Any, tmp_path: Path) -> None:
    docs, _, ids = data
    for threads, (builds, loads) in [(1, (1, 0)), (2, (1, 0)), (1, (0, 1)), (2, (0, 1))]:
        index = UsearchIndex(resolve_params("paper", threads=threads), cache_dir=tmp_path, cache_key="m@r corpus",
                             similarity="cosine")
        index.add_documents(docs, ids)
        assert (index.builds, index.loads) == (builds, loads), threads
    assert len(list(tmp_path.rglob("*.usearch"))) == 2


def test_persisted_index_reloads(data: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    docs, queries, ids = data
    key = f"test/model@rev corpus 1234 {PRESETS['paper'].digest}"
    built = UsearchIndex("paper", cache_dir=tmp_path, cache_key=key)
    built.add_documents(docs, ids)
    expected = built.search(queries, 10, cos_sim)
    assert (built.builds, built.loads) == (1, 0)
    files = sorted(path.name for path in tmp_path.rglob("*") if path.is_file())
    assert len(files) == 2 and files[0].endswith(".json") and files[1].endswith(".usearch")  # no temporaries left

    loaded = UsearchIndex("paper", cache_dir=tmp_path, cache_key=key, similarity="cosine")
    loaded.add_documents(docs, ids)
    assert (loaded.builds, loaded.loads) == (0, 1)  # memory-mapped at add_documents, not built
    assert loaded.search(queries, 10, cos_sim) == expected
    assert loaded.memory_bytes == next(tmp_path.rglob("*.usearch")).stat().st_size

    other = UsearchIndex("paper", cache_dir=tmp_path, cache_key=key)
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.usearch_index"):
        other.add_documents(docs, [f"x{i}" for i in range(N_DOCS)])  # other ids under the same key
        other.search(queries[:1], 10, cos_sim)
    assert (other.builds, other.loads) == (1, 0)
    assert len(caplog.records) == 1 and "was built for ids=" in caplog.text and ".usearch" in caplog.text

    caplog.clear()
    index_file = next(tmp_path.rglob("*.usearch"))
    index_file.write_bytes(index_file.read_bytes()[:1000])  # truncated
    corrupt = UsearchIndex("paper", cache_dir=tmp_path, cache_key=key)
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.usearch_index"):
        corrupt.add_documents(docs, [f"x{i}" for i in range(N_DOCS)])
        corrupt.search(queries[:1], 10, cos_sim)
    assert (corrupt.builds, corrupt.loads) == (1, 0)
    assert len(caplog.records) == 1 and str(index_file) in caplog.text and "memory-mapped" in caplog.text


def test_unknown_names_are_refused() -> None:
    with pytest.raises(ValueError) as refused:
        resolve_params("papr")
    says(str(refused.value), "'papr'", "paper, exact, f16, i8, b1", "'paper'")
    with pytest.raises(ValueError) as refused:
        resolve_params("paper", ef=128)
    says(str(refused.value), "AnnParams", "'ef'", "metric, dtype, connectivity")
    with pytest.raises(ValueError, match="Unknown preset"):
        UsearchIndex("hnsw")
    with pytest.raises(ValueError, match="dtype='f8'"):
        resolve_params(dtype="f8")
    with pytest.raises(ValueError) as refused:
        AnnParams(dtype="b1")
    says(str(refused.value), "AnnParams.metric='ip'", "dtype='b1'", "metric='hamming'")
    assert resolve_params("paper", dtype="b1").metric == "hamming"
    with pytest.raises(ValueError, match="connectivity=0"):
        resolve_params(connectivity=0)
    assert resolve_params("i8", threads=1).digest != resolve_params("i8", threads=3).digest
    assert resolve_params("b1").as_dict()["rescore"] == PRESETS["b1"].rescore


# ---------------------------------------------------------------------- inside mteb


class ClusterEncoder(AbsEncoder):
    """Deterministic clustered vectors: the text's hash picks a cluster and the noise."""

    def __init__(self, similarity: ScoringFunction = ScoringFunction.COSINE) -> None:
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={
            "name": f"test/cluster-{similarity.value}", "revision": "1", "similarity_fn_name": similarity})
        self.centres = np.random.default_rng(0).standard_normal((8, 16))

    def encode(self, inputs: Any, **kwargs: Any) -> np.ndarray:
        vectors = []
        for batch in inputs:
            for text in batch["text"]:
                rng = np.random.default_rng(int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest()))
                vectors.append((self.centres[rng.integers(8)] + rng.normal(size=16) * 0.3) * rng.uniform(0.5, 2))
        return np.asarray(vectors, dtype=np.float32)


def _split(seed: int) -> RetrievalSplitData:
    rng = np.random.default_rng(seed)
    corpus = [{"id": f"d{i}", "text": f"passage {i}", "title": ""} for i in range(80)]  # shared by both tasks
    queries = [{"id": f"q{i}", "text": f"query {seed} {i}"} for i in range(10)]
    relevant = {q["id"]: {f"d{j}": int(rng.integers(1, 3)) for j in rng.choice(80, 5, replace=False)} for q in queries}
    return RetrievalSplitData(queries=Dataset.from_list(queries), corpus=Dataset.from_list(corpus),
                              relevant_docs=relevant, top_ranked=None)


def _task(seed: int) -> AbsTaskRetrieval:
    class SharedCorpusTask(AbsTaskRetrieval):
        metadata = TaskMetadata(type="Retrieval", name=f"UsearchSharedCorpus{seed}", main_score="ndcg_at_10",
                                **general_args)

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = {"default": {"test": _split(seed)}}
            self.data_loaded = True

    return SharedCorpusTask()


def _scores(model: Any, tasks: list[AbsTaskRetrieval]) -> list[dict[str, float]]:
    results = mteb.evaluate(model, tasks, cache=None, show_progress_bar=False)
    return [{name: value for name, value in result.scores["test"][0].items() if isinstance(value, float)}
            for result in results.task_results]


@pytest.mark.parametrize("similarity", [ScoringFunction.COSINE, ScoringFunction.DOT_PRODUCT], ids=["cos", "dot"])
def test_one_build_for_two_mteb_tasks_and_mteb_parity(similarity: ScoringFunction) -> None:
    encoder = ClusterEncoder(similarity)
    backend = UsearchIndex("exact", keep_on_clear=True)
    ours = _scores(SearchEncoderWrapper(encoder, index_backend=backend), [_task(1), _task(2)])
    reference = _scores(SearchEncoderWrapper(encoder), [_task(1), _task(2)])
    assert (backend.builds, backend.builds_skipped) == (1, 1)  # the second task reused the first one's index
    for mine, theirs in zip(ours, reference, strict=True):
        assert mine["main_score"] > 0
        assert mine == pytest.approx(theirs, abs=1e-5, nan_ok=True)


def test_mock_retrieval_task_parity() -> None:
    encoder = ClusterEncoder(ScoringFunction.COSINE)
    for params in ("exact", "paper"):
        ours = _scores(SearchEncoderWrapper(encoder, index_backend=UsearchIndex(params)), [MockRetrievalTask()])
        reference = _scores(SearchEncoderWrapper(encoder), [MockRetrievalTask()])
        assert ours[0] == pytest.approx(reference[0], abs=1e-5, nan_ok=True)


def test_the_search_setting_is_written_and_read_back_by_one_pair() -> None:
    """``search_setting`` writes what ``parse_search_setting`` reads: every preset and a hand-set graph round-trip
    (threads as resolved); a damaged or impossible value is one ValueError sentence, never other parameters."""
    from disastir_mteb.results.describe import describe_setting
    from disastir_mteb.vocabulary.ann_params import parse_search_setting, search_setting

    hand_set = resolve_params("paper", connectivity=4, expansion_add=16, expansion_search=12, k=None, threads=1)
    for params in [*PRESETS.values(), hand_set]:
        assert parse_search_setting(search_setting(params)) == params.resolved()
    assert parse_search_setting("exact") is None and search_setting(None) == "exact"
    for damaged, message in [("ann-", "is not an ANN label"),
                             ("ann-hnsw-ip-f32-M16-efC128-ef64-k10", "is not an ANN label"),
                             ("ann-hnsw-ip-f64-M16-efC128-ef64-k10-t2", "dtype='f64' is not supported"),
                             ("ann-hnsw-ip-f32-M1-efC128-ef64-k10-t2", "connectivity=1 must be an integer >= 2"),
                             ("hnsw-ip-f32-M16-efC128-ef64-k10-t2", "is not a DisastIR search setting")]:
        with pytest.raises(ValueError, match=message):
            parse_search_setting(damaged)
        assert describe_setting({"disastir_search": damaged}) == damaged  # shown as written, never re-interpreted

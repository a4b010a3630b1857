"""The runner: one corpus encoding for many tasks, resumable, and mteb's own scores."""

from __future__ import annotations

import json
from pathlib import Path

import mteb
import numpy as np
import pytest

from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.runner.run import evaluate
from disastir_mteb.runner.task_pool import PROCESSES_ENV
from disastir_mteb.search.shared_corpus import SharedCorpusSearch
from disastir_mteb.search.store import EmbeddingStore
from disastir_mteb.vocabulary.provenance import MODEL_KEY, PROVENANCE_KEY, SETTINGS_KEY
from disastir_mteb.vocabulary.run_settings import RunSettings
from disastir_mteb.vocabulary.taxonomy import TASK_NAMES

SIX = ["DisastIR-QA-Bio", "DisastIR-QAdoc-Chem", "DisastIR-Twitter-Env", "DisastIR-FC-Geo", "DisastIR-NLI-Soc",
       "DisastIR-STS-Tech"]


@pytest.fixture
def on_sample(sample_data: Path, use_data: object) -> Path:
    use_data(sample_data)
    return sample_data


def _corpus_size(data: Path) -> int:
    return sum(1 for _ in (data / "corpus.jsonl").open())


def _scores(result: object) -> dict[str, dict[str, float]]:
    return {r.task_name: r.scores["test"][0] for r in result.task_results}


def test_corpus_encoded_once_for_many_tasks_and_never_again(on_sample: Path, tmp_path: Path) -> None:
    encoder = HashingEncoder()
    store = EmbeddingStore(tmp_path / "cache")
    searcher = SharedCorpusSearch(encoder, RunSettings(progress=False), store=store)
    result = evaluate(searcher, SIX, cache_dir=tmp_path / "cache", output_folder=tmp_path / "r1", show_progress=False)
    n = _corpus_size(on_sample)
    assert len(result.task_results) == 6
    assert searcher.passages_encoded == n and searcher.corpus_indexings == 1
    assert searcher.corpus_passes == 1  # all six tasks' queries searched in one pass (prefetch)
    assert encoder.texts_encoded == n + searcher.queries_encoded + searcher.texts_probed  # and the identity probe

    again = SharedCorpusSearch(HashingEncoder(), RunSettings(progress=False), store=store)
    evaluate(again, SIX, output_folder=tmp_path / "r2", show_progress=False)
    assert again.passages_encoded == 0 and again.queries_encoded == 0  # everything from the persistent store


#: What a task records of the search model that evaluated it: the runner's states its model and settings, plain
#: mteb's does not, so these (and the digest over them) are the one difference between the two files.
_SEARCH_MODEL_RECORD = (PROVENANCE_KEY, MODEL_KEY, SETTINGS_KEY)


def _stored(folder: Path) -> dict[str, str]:
    """Each task's stored scores under ``folder``, as canonical JSON text (so NaN equals NaN, and 0.1 only 0.1).

    The search model's record (:data:`_SEARCH_MODEL_RECORD`) left out.
    """
    def scores(path: Path) -> object:
        content = json.loads(path.read_text(encoding="utf-8"))["scores"]
        return {split: [{key: value for key, value in block.items() if key not in _SEARCH_MODEL_RECORD}
                        for block in blocks] for split, blocks in content.items()}

    return {path.stem: json.dumps(scores(path), sort_keys=True)
            for path in folder.rglob("*.json") if path.stem in TASK_NAMES}


def test_runner_results_equal_plain_mteb(on_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every number stored for the 48 tasks (all 140 metrics each, nAUC included) is, character for character, what
    plain per-task ``mteb.evaluate`` with mteb's own search stores (mteb rounds to 5-6 decimals; the unrounded nAUC
    is compared bit for bit in test_scoring_speed.py); scored in worker processes or in the runner's own, the runner
    writes the same result and per-query files."""
    monkeypatch.setenv(PROCESSES_ENV, "2")  # scored in worker processes (the sample's 384 queries, unasked, are not)
    tasks = [mteb.get_task(name) for name in TASK_NAMES]  # all 48: the corpus encoding is shared
    evaluate(HashingEncoder(), tasks, cache_dir=False, output_folder=tmp_path / "ours", show_progress=False)
    mteb.evaluate(HashingEncoder(), [mteb.get_task(n) for n in TASK_NAMES], cache=mteb.ResultCache(tmp_path / "plain"),
                  show_progress_bar=False)
    ours, plain = _stored(tmp_path / "ours"), _stored(tmp_path / "plain")
    assert set(ours) == set(plain) == set(TASK_NAMES)
    assert [name for name in TASK_NAMES if ours[name] != plain[name]] == []
    assert len(json.loads(ours["DisastIR-QA-Bio"])["test"][0]) == 142  # 140 metrics and records, 2 data digests

    monkeypatch.setenv(PROCESSES_ENV, "1")  # every task in this process, one after another
    evaluate(HashingEncoder(), TASK_NAMES, cache_dir=False, output_folder=tmp_path / "one", show_progress=False)
    assert _stored(tmp_path / "one") == ours
    per_query = {side: {p.name: p.read_bytes() for p in (tmp_path / side).rglob("*_per_query.json")}
                 for side in ("ours", "one")}
    assert len(per_query["ours"]) == 48 and per_query["ours"] == per_query["one"]


class _Flaky(HashingEncoder):
    """Dies after ``fail_after`` passages, like a run killed part-way through the corpus."""

    def __init__(self, fail_after: int) -> None:
        super().__init__()
        self.fail_after = fail_after

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.texts_encoded + len(texts) > self.fail_after and len(texts) > 10:
            raise KeyboardInterrupt("simulated kill")
        return super().embed(texts)


def test_killed_corpus_encoding_resumes_from_the_last_chunk(on_sample: Path, tmp_path: Path) -> None:
    store = EmbeddingStore(tmp_path / "cache")
    n = _corpus_size(on_sample)
    first = SharedCorpusSearch(_Flaky(fail_after=700), RunSettings(progress=False), store=store, chunk_size=256)
    with pytest.raises(KeyboardInterrupt):
        evaluate(first, ["DisastIR-QA-Bio"], output_folder=tmp_path / "r", show_progress=False)
    done = first.passages_encoded
    assert 0 < done < n and done % 256 == 0
    second = SharedCorpusSearch(HashingEncoder(), RunSettings(progress=False), store=store, chunk_size=256)
    evaluate(second, ["DisastIR-QA-Bio"], output_folder=tmp_path / "r", show_progress=False)
    assert second.passages_encoded == n - done

    fresh = _scores(evaluate(HashingEncoder(), ["DisastIR-QA-Bio"], cache_dir=False,
                             output_folder=tmp_path / "fresh", show_progress=False))
    resumed = _scores(evaluate(SharedCorpusSearch(HashingEncoder(), RunSettings(progress=False), store=store),
                               ["DisastIR-QA-Bio"], output_folder=tmp_path / "again", show_progress=False))
    assert resumed["DisastIR-QA-Bio"]["ndcg_at_10"] == fresh["DisastIR-QA-Bio"]["ndcg_at_10"]


def test_another_model_never_reuses_the_cache(on_sample: Path, tmp_path: Path) -> None:
    store = EmbeddingStore(tmp_path / "cache")
    first = SharedCorpusSearch(HashingEncoder(name="test/model-a"), RunSettings(progress=False), store=store)
    evaluate(first, ["DisastIR-QA-Bio"], output_folder=tmp_path / "r", show_progress=False)
    other = SharedCorpusSearch(HashingEncoder(dim=64, name="test/model-b"), RunSettings(progress=False), store=store)
    evaluate(other, ["DisastIR-QA-Bio"], output_folder=tmp_path / "r", show_progress=False)
    assert other.passages_encoded == first.passages_encoded == _corpus_size(on_sample)


def test_corpus_encoding_spreads_over_devices_with_identical_vectors(tmp_path: Path, use_data: object,
                                                                     tiny_model: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """Two CPU 'devices' exercise sentence-transformers' multi-process pool (CUDA devices work the same way).

    On conftest's small real model: each pool process loads it, and what is checked is the pool, not its numbers.
    """
    from sentence_transformers import SentenceTransformer

    from conftest import write_layout

    passages = {f"d{i}": f"Flood bulletin {i}: river levels at gauge {i * 7} rising near district {i % 5}."
                for i in range(24)}
    qrels = [{"user_query": "river levels rising at the gauge", "passage": passages["d3"], "score": 2}]
    root = write_layout(tmp_path / "data", passages,
                        {"QA_Bio": ([{"query_id": "q1", "user_query": "river levels rising at the gauge"}], qrels)})
    use_data(root)
    model = SentenceTransformer(str(tiny_model), device="cpu")
    pooled = SharedCorpusSearch(model, RunSettings(progress=False, devices=["cpu", "cpu"]), store=None)
    single = SharedCorpusSearch(model, RunSettings(progress=False, devices=None), store=None)
    assert pooled.devices == ("cpu", "cpu") and single.devices == ()
    task = mteb.get_task("DisastIR-QA-Bio")
    task.load_data()
    corpus = task.dataset["default"]["test"]["corpus"]
    with caplog.at_level("INFO", logger="disastir_mteb.search"):
        for searcher in (pooled, single):
            searcher.index(corpus, task_metadata=task.metadata, hf_split="test", hf_subset="default",
                           encode_kwargs={"batch_size": 8})
    assert sum("multi-process pool" in r.getMessage() for r in caplog.records) == 1  # only the pooled searcher
    np.testing.assert_allclose(pooled.corpus_embeddings, single.corpus_embeddings, atol=1e-5)
    assert pooled.passages_encoded == single.passages_encoded == 24


def test_one_settings_value_from_the_options_to_the_search_model() -> None:
    """``RunSettings.from_options`` checks every option once; the search model holds that value and honours it."""
    from disastir_mteb.runner.run import build_search
    from disastir_mteb.vocabulary.ann_params import parse_search_setting

    settings = RunSettings.from_options(search="ann", ann_params={"threads": 1}, instructions="dmretriever",
                                        batch_size=8, cache_dir=False, progress=False, devices=["cpu"])
    searcher = build_search(HashingEncoder(), settings)
    assert searcher.settings is settings and searcher.store is None  # cache_dir=False: in memory
    assert (searcher.ann, searcher.batch_size, searcher.progress) == (settings.ann, 8, False)
    assert settings.devices == ("cpu",) and settings.ann is not None and settings.ann.threads == 1
    experiment = searcher.mteb_model_meta.experiment_kwargs
    assert parse_search_setting(experiment["disastir_search"]) == settings.ann.resolved()
    assert experiment["disastir_instructions"] == "dmretriever" and experiment["disastir_template"] == "colon"
    assert RunSettings(ann="paper").ann == RunSettings.from_options(search="ann").ann  # a preset name resolves
    for options, message in [({"search": "hnsw"}, "Unknown search 'hnsw'"), ({"batch_size": 0}, "batch_size=0"),
                             ({"precision": "fp8"}, "Unknown precision 'fp8'"),
                             ({"instructions": "disastr"}, "Unknown instruction set 'disastr'"),
                             ({"ann_params": {"connectivity": 8}}, "were given for search='exact'"),
                             ({"ann_preset": "paper"}, "ann_preset='paper' was given for search='exact'")]:
        with pytest.raises(ValueError, match=message):
            RunSettings.from_options(**options)


def test_a_loaded_task_counts_the_queries_it_scores_which_decides_forking(on_sample: Path) -> None:
    """The count the runner weighs against MIN_FORKED_QUERIES: a task's own queries, 0 before it is loaded."""
    from disastir_mteb.search.prefetch import query_count
    from disastir_mteb.vocabulary.taxonomy import Category, Intent, task_file_stem

    task = mteb.get_task("DisastIR-QA-Bio")
    assert query_count(task) == 0
    task.load_data()
    stem = task_file_stem(Intent.QA, Category.Bio)
    written = json.loads(next((on_sample / "query").glob(f"{stem}*.json")).read_text())
    assert query_count(task) == len(written) > 0

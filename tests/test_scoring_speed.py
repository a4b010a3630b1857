"""The runner's work after the shared pass: mteb's scoring without its repeated checks, on every core, same numbers.

The stored numbers themselves are compared with plain ``mteb.evaluate``, metric for metric, in
``tests/test_runner.py::test_runner_results_equal_plain_mteb``.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType

import numpy as np
import pytest
import sklearn.metrics
from mteb._evaluators.retrieval_metrics import nauc
from workers import forks_workers

from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.runner.run import evaluate
from disastir_mteb.runner.scoring_patch import exact_auc, faster_scoring, missing
from disastir_mteb.runner.task_pool import PROCESSES_ENV

SIX = ["DisastIR-QA-Bio", "DisastIR-QAdoc-Chem", "DisastIR-Twitter-Env", "DisastIR-FC-Geo", "DisastIR-NLI-Soc",
       "DisastIR-STS-Tech"]


@pytest.fixture
def on_sample(sample_data: Path, use_data: object) -> Path:
    use_data(sample_data)  # type: ignore[operator]
    return sample_data


def _bits(value: float) -> bytes:
    return np.float64(value).tobytes()


def _curves(seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(confidences, per-query metrics) as mteb's nauc gets them: ties, zeros, constants, one query, none."""
    rng = np.random.default_rng(seed)
    for n in (0, 1, 2, 7, 200):
        yield rng.random(n), rng.random(n)
        yield rng.integers(0, 3, n).astype(np.float64), rng.integers(0, 4, n) / 3.0
        yield np.full(n, 0.5), rng.random(n)
        yield rng.random(n), np.zeros(n)


def test_the_mteb_and_scikit_learn_names_the_patch_uses_are_there() -> None:
    """The canary: if mteb or scikit-learn renames what scoring_patch touches, this fails (scoring is then slower)."""
    import mteb._evaluators.retrieval_metrics as metrics
    import mteb.cache.result_cache as result_cache

    assert missing() == []
    before = (metrics.auc, result_cache._get_package_versions)
    with faster_scoring():
        assert metrics.auc is not before[0] and result_cache._get_package_versions is not before[1]
        assert result_cache._get_package_versions() == before[1]()
    assert (metrics.auc, result_cache._get_package_versions) == before


def test_nauc_is_the_same_to_the_bit_without_scikit_learn_checks() -> None:
    compared = 0
    for seed in range(20):
        for confidences, scores in _curves(seed):
            plain = nauc(confidences, scores)
            with faster_scoring():
                fast = nauc(confidences, scores)
            assert type(fast) is type(plain) and _bits(fast) == _bits(plain), (confidences, scores)
            compared += 1
    assert compared == 20 * 20


def test_exact_auc_is_scikit_learns_auc_or_hands_over_to_it() -> None:
    x = np.linspace(0, 1, 11)[:-1]
    rng = np.random.default_rng(0)
    for y in (rng.random(10), np.full(10, np.nan), np.zeros(10), rng.random(10) * 1e-300):
        assert _bits(exact_auc(x, y)) == _bits(sklearn.metrics.auc(x, y))
    for other_x, y in ((x[::-1], rng.random(10)), (list(x), list(rng.random(10))), (np.arange(10), np.arange(10)),
                       (x.astype(np.float32), rng.random(10).astype(np.float32))):
        assert _bits(exact_auc(other_x, y)) == _bits(sklearn.metrics.auc(other_x, y))
    for bad_x, y in ((np.array([0.0, 1.0, 0.5]), np.ones(3)), (np.array([0.5]), np.ones(1))):
        with pytest.raises(ValueError) as ours:
            exact_auc(bad_x, y)
        with pytest.raises(ValueError) as theirs:
            sklearn.metrics.auc(bad_x, y)
        assert str(ours.value) == str(theirs.value)


@contextmanager
def _counting(targets: dict[str, CodeType]) -> Iterator[dict[str, int]]:
    """How often each code object is entered in this thread (a profile hook observes; nothing is replaced)."""
    counts = dict.fromkeys(targets, 0)
    wanted = {code: name for name, code in targets.items()}

    def hook(frame: object, event: str, _arg: object) -> None:
        if event == "call" and frame.f_code in wanted:  # type: ignore[attr-defined]
            counts[wanted[frame.f_code]] += 1  # type: ignore[attr-defined]

    sys.setprofile(hook)
    try:
        yield counts
    finally:
        sys.setprofile(None)


def _code(function: Callable[..., object]) -> CodeType:
    return getattr(function, "__wrapped__", function).__code__


def test_scoring_skips_scikit_learn_checks_and_reads_package_versions_once(
        on_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mteb calls scikit-learn's auc 180 times per task (each mostly argument checks) and reads 5 package versions
    from the installed metadata twice per task (360 and 4 calls here); the runner does neither per task."""
    import mteb.cache.result_cache as result_cache

    monkeypatch.setenv(PROCESSES_ENV, "1")  # in this process, where the hook sees it
    two = SIX[:2]
    evaluate(HashingEncoder(), two, cache_dir=tmp_path / "store", output_folder=tmp_path, show_progress=False)
    targets = {"auc": _code(sklearn.metrics.auc), "versions": _code(result_cache._get_package_versions)}
    with _counting(targets) as counts:  # the vectors from the store: the hook sees the tasks' scoring, not encoding
        result = evaluate(HashingEncoder(), two, cache_dir=tmp_path / "store", output_folder=tmp_path,
                          show_progress=False, overwrite=True)
    assert len(result.task_results) == 2
    assert counts == {"auc": 0, "versions": 1}


@pytest.mark.skipif(not forks_workers(2), reason="one usable core or not Linux: the runner scores in its own process")
def test_tasks_the_pass_answered_are_scored_in_worker_processes(on_sample: Path, tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROCESSES_ENV, "2")  # asked for: the sample's queries alone would be scored here
    with caplog.at_level(logging.INFO):
        evaluate(HashingEncoder(), SIX, cache_dir=False, output_folder=tmp_path, show_progress=False)
    scored = [r for r in caplog.records if r.getMessage().endswith("(main score; x100)")]
    assert [r.getMessage().split(":")[0] for r in scored] == SIX  # re-issued here, in task order
    assert all(r.process != os.getpid() for r in scored)  # ... by the workers that scored them
    assert not math.isnan(float(scored[0].getMessage().split("ndcg@10 ")[1].split()[0]))


def test_per_query_ndcg_reads_only_the_top_10_and_is_the_same_to_the_bit() -> None:
    """Per-query NDCG@10 of any task from the stored top 10 is pytrec_eval's on the whole run, to the bit; ties
    stored as trec_eval ranks them; negative grades, unjudged lists and judged queries without a list as it does."""
    import pytrec_eval

    from disastir_mteb.results.per_query import ndcg_by_id, score_queries

    rng = np.random.default_rng(7)
    docs = [f"d{i:04d}" for i in range(400)]
    qrels = {f"q{q}": {d: int(g) for d, g in zip(rng.choice(docs, 40, replace=False), rng.integers(0, 4, 40),
                                                   strict=True)} for q in range(60)}
    run = {}
    for q, judged in qrels.items():  # a top-100 with coarse similarities: ties at the 10th place are common
        chosen = list(judged)[:20] + [d for d in rng.choice(docs, 80, replace=False) if d not in judged]
        run[q] = {d: float(rng.integers(0, 12)) / 8 for d in chosen}
    run["q0"] = {d: 0.5 for d in list(run["q0"])}  # every similarity tied
    run["q1"] = dict(list(run["q1"].items())[:7])  # fewer than 10
    qrels["q2"] = {d: -1 if n % 3 == 0 else g for n, (d, g) in enumerate(qrels["q2"].items())}  # negative: gain 0
    qrels["q3"] = {d: 0 for d in qrels["q3"]}  # judged, nothing relevant: 0
    del run["q4"]  # judged, no list: left out, as mteb leaves it out
    run["unjudged"] = {d: 1.0 for d in docs[:10]}  # a list without judgements: left out
    ours = score_queries("DisastIR-QA-Bio", run, ndcg_by_id(qrels))
    whole = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    assert "q4" not in whole and "unjudged" not in whole and whole["q3"]["ndcg_cut_10"] == 0
    assert {q: _bits(v) for q, v in ours.ndcg_at_10.items()} == {q: _bits(v["ndcg_cut_10"]) for q, v in whole.items()}
    # similarity, then passage id, both descending: the order trec_eval scores, so the stored list is the scored one
    assert ours.top10 == {q: [d for d, _ in sorted(r.items(), key=lambda item: (item[1], item[0]), reverse=True)[:10]]
                          for q, r in run.items() if q in qrels}
    tied = sum(sorted(r.values(), reverse=True)[9] == sorted(r.values(), reverse=True)[10] for r in run.values()
               if len(r) > 10)
    assert tied >= 30

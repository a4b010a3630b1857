"""The validation the papers made, on the synthetic sample: regenerate it from its own passages and rank the same
models on both; the rankings agree for a faithful generator and judge, and less as the judge's noise rises.

The pool is the ranked models themselves, as DisastIR pooled the 30 models it ranks: every top 10 is judged, so a
judge's errors, not the pool, decide how far the rankings part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from generator_servers import overlap_judge, writer
from judge_servers import JudgeServer, constrained
from sentences import says

from disastir_mteb.building.build import BuildSettings, run_build
from disastir_mteb.building.study import rank_agreement
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.runner.build_pool import RunnerRetrievers, per_query_scores
from disastir_mteb.vocabulary.taxonomy import Category, Intent, task_file_stem

CATEGORIES = ("Bio", "Geo", "MH", "Tech")
#: Hashing encoders of growing width: fewer collisions, a better lexical retriever (a ranking to recover).
DIMS = (2, 8, 64, 512)


@pytest.fixture(scope="module")
def regenerated(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sample's most similar STS passages of four categories as an organisation's documents, one JSONL each.

    STS, since its judge asks one prompt per pair (the others ten): the same study, a tenth of the requests.
    """
    root = tmp_path_factory.mktemp("study")
    docs = root / "docs"
    for category in CATEGORIES:
        stem = task_file_stem(Intent.STS, Category(category))
        qrels = json.loads((sample_data / "qrels" / f"{stem}_qrels.json").read_text())
        passages = list(dict.fromkeys(row["passage"] for row in qrels if row["score"] >= 4))[:12]
        (docs / category).mkdir(parents=True)
        (docs / category / "passages.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in passages))
    return root, docs


def _build(root: Path, docs: Path, noise: float, *, quality: bool = False) -> Path:
    out = root / f"bench-{noise}{'-qc' if quality else ''}"
    with JudgeServer(writer(), model="writer") as generation, \
            JudgeServer(constrained(overlap_judge(noise)), model="judge") as judge:
        settings = BuildSettings(docs=docs, out=out, name="Regen", model="writer", base_urls=(generation.base_url,),
                                 judge_model="judge", judge_urls=(judge.base_url,),
                                 pool_models=tuple(f"test/hashing-{dim}" for dim in DIMS), intents=(Intent.STS,),
                                 queries_per_task=3, seed=1, yes=True, quality=quality, concurrency=4)
        run_build(settings, RunnerRetrievers(_models(), results=root / f"pool-{out.name}", show_progress=False),
                  say=lambda line: None, confirm=lambda plan, requests: True)
    return out


def _models() -> list[HashingEncoder]:
    return [HashingEncoder(dim, name=f"test/hashing-{dim}") for dim in DIMS]


def _scores(data: Path, output: Path, tasks: list[str] | None = None) -> dict[str, dict[str, float]]:
    return {model.mteb_model_meta.name: per_query_scores(model, data, output / str(model.dim), tasks=tasks)
            for model in _models()}


def test_a_regenerated_sample_ranks_models_as_the_original_less_so_as_its_judge_errs_and_more_with_quality_control(
        sample_data: Path, regenerated: tuple[Path, Path]) -> None:
    root, docs = regenerated
    reference = _scores(sample_data, root / "reference", [f"DisastIR-STS-{c}" for c in CATEGORIES])
    taus = {}
    for noise, quality in ((0.0, False), (0.6, False), (1.0, False), (0.6, True)):
        built = _build(root, docs, noise, quality=quality)
        study = rank_agreement(reference, _scores(built, root / f"runs-{built.name}"), resamples=200)
        taus[noise, quality] = study.tau
        assert study.tau_interval[0] <= study.tau <= study.tau_interval[1]
        says(study.describe(), "4 models", "0.93", "0.82")
    assert taus[0.0, False] > taus[0.6, False] and taus[0.0, False] >= 0.6 > taus[1.0, False], taus
    # AIR-Bench's step: dropping the queries whose own passages the (noisy) judge grades below relevant
    kept = {name: json.loads((root / name / "report.json").read_text())["stages"]["quality"]["kept"]
            for name in ("bench-0.6", "bench-0.6-qc")}
    assert kept["bench-0.6-qc"] < kept["bench-0.6"] and taus[0.6, True] > taus[0.6, False], (kept, taus)


def test_a_study_needs_three_models_on_both_benchmarks() -> None:
    with pytest.raises(ValueError) as raised:
        rank_agreement({"a": {"q": 1.0}, "b": {"q": 0.5}}, {"a": {"q": 1.0}, "b": {"q": 0.2}, "c": {"q": 0.1}})
    says(str(raised.value), "three models", "found 2", "a, b")

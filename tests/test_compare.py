"""compare with several models: one Table 3 row each, Kendall's tau between the exact and ANN rankings."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from disastir_mteb import cli
from disastir_mteb.benchmark.taxonomy import TASK_NAMES
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.runner import evaluate


def test_several_models_give_rows_and_kendall_tau(sample_data: Path, use_data: object, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    use_data(sample_data)  # type: ignore[operator]
    for dim in (64, 128, 384):
        model = HashingEncoder(dim=dim, name=f"disastir-mteb/hashing-{dim}")
        evaluate(model, TASK_NAMES, cache_dir=tmp_path / "cache", output_folder=tmp_path / "exact",
                 show_progress=False)
        evaluate(model, TASK_NAMES, search="ann", cache_dir=tmp_path / "cache", output_folder=tmp_path / "ann",
                 show_progress=False)
    assert cli.main(["compare", str(tmp_path / "exact"), str(tmp_path / "ann")]) == 0
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if line.startswith("hashing-")]
    assert len(rows) == 3 and "Ex. Avg" in printed
    overall = next(line for line in printed.splitlines() if "(overall, 3 models)" in line)
    assert -1.0 <= float(overall.split()[-1]) <= 1.0
    assert printed.count("Kendall's tau") == 7  # overall and the six intents

    one_folder = tmp_path / "both"
    shutil.copytree(tmp_path / "exact", one_folder)
    shutil.copytree(tmp_path / "ann", one_folder, dirs_exist_ok=True)
    assert cli.main(["compare", str(one_folder)]) == 0
    assert printed.splitlines()[0] == capsys.readouterr().out.splitlines()[0]

    exact_64, ann_64 = (next(p.parent for p in (tmp_path / side).rglob("model_meta.json") if "hashing-64" in str(p))
                        for side in ("exact", "ann"))
    assert cli.main(["compare", str(exact_64), str(ann_64)]) == 0
    labels = capsys.readouterr().out.splitlines()[:2]  # readable: no raw `disastir_search=ann-hnsw-...-t16`
    assert labels[0].startswith("Exact: disastir-mteb/hashing-64 — exact (synthetic data)  [")
    assert labels[1].startswith("ANN: disastir-mteb/hashing-64 — ANN (HNSW M=16, ef=64) (synthetic data)  [")

    for per_query in (tmp_path / "ann").rglob("disastir_per_query"):
        shutil.rmtree(per_query)  # as if written by plain `mteb run`
    single_exact = next((tmp_path / "exact").rglob("model_meta.json")).parent
    single_ann = next(p.parent for p in (tmp_path / "ann").rglob("model_meta.json") if single_exact.parent.name
                      in str(p))
    assert cli.main(["compare", str(single_exact), str(single_ann)]) == 0
    detail = capsys.readouterr().out
    assert "Recall@10 and the tests need per-query files" in detail and "48 task(s) lack them" in detail

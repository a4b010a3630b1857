"""Reports: the paper's aggregation, published numbers beside ours, figures, formats, significance."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from disastir_mteb import cli
from disastir_mteb.hashing_encoder import HashingEncoder
from disastir_mteb.published import published_for
from disastir_mteb.report import report_text, write_report
from disastir_mteb.results import ResultSet, find_result_sets, load_result_set
from disastir_mteb.runner import evaluate
from disastir_mteb.significance import kendall_tau, paired_test
from disastir_mteb.taxonomy import INTENTS, TASK_NAMES

PNG = b"\x89PNG\r\n\x1a\n"


def _published_set(model: str, drop: str | None = None) -> ResultSet:
    """A result set holding exactly the appendix scores of ``model`` (Tables 19-23)."""
    appendix = next(r for r in published_for(model) if r.tasks)
    scores = {name: score for name, score in appendix.tasks.items() if name != drop}  # type: ignore[union-attr]
    return ResultSet(folder=Path("/nowhere"), model=model, revision="a" * 40, experiment={}, scores=scores)


def test_every_appendix_model_aggregates_to_its_table3_row() -> None:
    """Our means of the published per-task cells give the paper's Table 3 (to its rounding)."""
    checked = 0
    for model in ["intfloat/e5-small-v2", "infly/inf-retriever-v1", "nvidia/NV-Embed-v2", "thenlper/gte-base",
                  "ibm-granite/granite-embedding-125m-english", "Snowflake/snowflake-arctic-embed-m-v2.0"]:
        records = {r.source: r for r in published_for(model)}
        grid = _published_set(model).grid
        table3 = records["paper-table3"]
        for intent in INTENTS:
            assert grid.intent_mean(intent) == pytest.approx(table3.intents[intent], abs=6e-5), (model, intent)
        assert grid.overall() == pytest.approx(table3.overall, abs=6e-5), model
        checked += 1
    assert checked == 6
    assert [r.source for r in published_for("intfloat/e5-small-v2")] == [
        "repo-2025-09", "paper-table3", "paper-tables19-23"]
    assert published_for("DMIR01/DMRetriever-33M")[0].overall == pytest.approx(0.5861)
    assert published_for("no/such-model") == []


def test_report_puts_published_numbers_beside_ours_and_shows_missing(tmp_path: Path) -> None:
    complete = _published_set("intfloat/e5-small-v2")
    text = report_text([complete])
    assert "DisastIR paper, Table 3 (disastir instructions)" in text and "62.29" in text  # the paper's Avg
    difference = next(line for line in text.splitlines() if line.startswith("this run − paper-table3"))
    assert all(abs(float(cell)) <= 0.01 for cell in difference.split()[-8:-1])  # 6 intents + Avg; ANN Avg "–"
    appendix_rows = text.split("this run minus DisastIR paper, Tables 19-23")[1].splitlines()[2:9]
    assert all(cell == "+0.00" for row in appendix_rows for cell in row.split()[1:])

    partial = _published_set("intfloat/e5-small-v2", drop="DisastIR-NLI-Geo")
    text = report_text([partial])
    nli = next(line for line in text.splitlines() if line.startswith("NLI "))
    assert nli.split()[5] == "–" and nli.split()[-1] == "–"  # the cell and the NLI mean
    assert "Missing (1): DisastIR-NLI-Geo." in text

    written = write_report([complete, partial], tmp_path / "report", formats=["md", "csv", "html"])
    names = {path.name for path in written}
    assert {"report.md", "report.html", "scores.csv", "intents.png"} <= names
    assert len([n for n in names if n.startswith("heatmap-")]) == 2  # same model and settings, two folders
    for path in written:
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == PNG and path.stat().st_size > 20_000
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "![Per-intent NDCG@10" in markdown and "| QA | 65.87 |" not in markdown
    for image in [line.split("](")[1].rstrip(")") for line in markdown.splitlines() if line.startswith("![")]:
        assert (tmp_path / "report" / image).is_file()
    assert "<img src=\"intents.png\"" in (tmp_path / "report" / "report.html").read_text()
    rows = list(csv.DictReader((tmp_path / "report" / "scores.csv").open()))
    assert len(rows) == 48 + 47 and {r["intent"] for r in rows} == {i.value for i in INTENTS}


def test_report_cli_on_runner_results(sample_data: Path, use_data: object, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    use_data(sample_data)  # type: ignore[operator]
    evaluate(HashingEncoder(), TASK_NAMES[:8], cache_dir=False, output_folder=tmp_path / "results",
             show_progress=False)
    out = tmp_path / "report"
    assert cli.main(["report", str(tmp_path / "results"), "--out", str(out), "--format", "md", "html"]) == 0
    printed = capsys.readouterr().out
    assert "disastir-mteb/hashing-encoder" in printed and "40 of 48" not in printed and "8/48" in printed
    assert (out / "report.md").is_file() and (out / "report.html").is_file() and not (out / "scores.csv").exists()
    assert cli.main(["report", str(tmp_path / "results"), "--model", "e5"]) == 2
    assert "No DisastIR result sets for model(s) e5 under" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path / "nothing-here")]) == 2
    assert "No results at" in capsys.readouterr().err
    [folder] = find_result_sets(tmp_path / "results")
    assert load_result_set(folder).has_per_query(TASK_NAMES[0])


def test_paired_test_and_kendall_tau() -> None:
    base = [0.1 * (i % 7) for i in range(200)]
    better = [x + 0.05 + 0.01 * (i % 3) for i, x in enumerate(base)]
    test = paired_test(base, better)
    assert test.n == 200 and test.difference == pytest.approx(0.06, abs=1e-3)
    assert test.p_value < 1e-10 and test.significant() and 0.05 < test.ci_low <= test.ci_high < 0.071
    worse = paired_test(better, base)  # the other direction is tested as "less"
    assert worse.p_value < 1e-10 and worse.difference < 0
    same = paired_test(base, base)
    assert same.p_value == 1.0 and same.ci_low == same.ci_high == 0.0
    noisy = paired_test(base, [x + (0.01 if i % 2 else -0.01) for i, x in enumerate(base)])
    assert not noisy.significant() and noisy.ci_low < 0 < noisy.ci_high
    with pytest.raises(ValueError, match="equally long"):
        paired_test([0.1], [0.1, 0.2])

    scores = {"a": 0.6, "b": 0.5, "c": 0.4, "d": 0.3}
    assert kendall_tau(scores, scores) == (1.0, 4)
    assert kendall_tau(scores, {k: -v for k, v in scores.items()}) == (-1.0, 4)
    tau, n = kendall_tau(scores, {"a": 0.5, "b": 0.6, "c": 0.4, "d": 0.3, "e": 0.9})
    assert n == 4 and tau == pytest.approx(2 / 3)
    assert math.isnan(kendall_tau(scores, dict.fromkeys(scores, 0.5))[0])
    with pytest.raises(ValueError, match="at least two models"):
        kendall_tau(scores, {"a": 0.1})

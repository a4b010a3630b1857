"""Reports: the paper's aggregation, published numbers beside ours, figures, formats, significance."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from sentences import says

from conftest import write_layout
from disastir_mteb import cli
from disastir_mteb.data.layout import MARKER
from disastir_mteb.data.source import DataSource
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.results.metrics import MAIN_METRIC, get_metric
from disastir_mteb.results.per_query import PerQuery, per_query_file, write_per_query
from disastir_mteb.results.provenance import provenance_of
from disastir_mteb.results.published import published_for
from disastir_mteb.results.report import build_report, report_text, write_report
from disastir_mteb.results.report_format import Block, Image, Notice, Paragraph, Table
from disastir_mteb.results.result_sets import ResultSet, describe_setting, find_result_sets, load_result_set
from disastir_mteb.results.significance import kendall_tau, paired_test
from disastir_mteb.runner.run import evaluate
from disastir_mteb.search.usearch_index import PRESETS, resolve_params
from disastir_mteb.vocabulary.taxonomy import INTENTS, TASK_NAMES, get_spec

PNG = b"\x89PNG\r\n\x1a\n"
SYNTHETIC = "Synthetic data: scores exercise the pipeline and are not DisastIR results."
ANN_PAPER = {"disastir_search": "ann-hnsw-ip-f32-M16-efC128-ef64-k10-t16"}


def _png_text(path: Path) -> dict[str, str]:
    """The text chunks of a PNG (title and raw settings written by the report)."""
    from PIL import Image as PILImage

    with PILImage.open(path) as image:
        return dict(image.text)  # type: ignore[attr-defined]


def _recorded_set(folder: Path, *, synthetic: bool | None, model: str = "no/such-model",
                  experiment: dict[str, str] | None = None) -> ResultSet:
    """A set of 3 tasks whose per-query files record real or synthetic data (None: files without the record)."""
    scores = dict.fromkeys(TASK_NAMES[:3], 0.5)
    data = None if synthetic is None else {"source": "somewhere", "synthetic": synthetic}
    for task in scores:
        write_per_query(per_query_file(folder, task), PerQuery(task, {"q1": 0.5}, {"q1": ["d1"]}), data=data)
    return ResultSet(folder=folder, model=model, revision="b" * 40, experiment=dict(experiment or {}), scores=scores)


def _table(blocks: list[Block], *headers: str, after: str | None = None) -> Table:
    """The first table of a report whose headings start with ``headers`` (after the paragraph starting ``after``)."""
    start = 0 if after is None else next(n for n, b in enumerate(blocks)
                                         if isinstance(b, Paragraph) and b.text.startswith(after))
    return next(b for b in blocks[start:] if isinstance(b, Table) and b.headers[:len(headers)] == list(headers))


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
    blocks = build_report([complete], figures=False)
    published = _table(blocks, "source")
    assert published.row("DisastIR paper, Table 3 (disastir instructions)")["Avg"] == "62.29"  # the paper's Avg
    difference = published.row("this run − paper-table3")
    assert all(abs(float(difference[column])) <= 0.01 for column in [*(i.value for i in INTENTS), "Avg"])
    assert difference["ANN Avg"] == "–"
    appendix = _table(blocks, "NDCG@10 x100", after="Per task, this run minus DisastIR paper, Tables 19-23")
    assert [row[0] for row in appendix.rows] == [*(i.value for i in INTENTS), "Mean"]
    assert all(cell == "+0.00" for row in appendix.rows for cell in row[1:])

    partial = _published_set("intfloat/e5-small-v2", drop="DisastIR-NLI-Geo")
    blocks = build_report([partial], figures=False)
    nli = _table(blocks, "NDCG@10 x100").row("NLI")
    assert nli["Geo"] == "–" and nli["Mean"] == "–" and nli["Bio"] != "–"  # the cell and the NLI mean
    assert "Missing (1): DisastIR-NLI-Geo." in report_text([partial])

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
    # the terminal gets the overview; the grids, provenance and the 40-name "Missing" list are in the files
    assert "Overview" in printed and "Missing (" not in printed and "Provenance" not in printed
    assert "Missing (40): " in (out / "report.md").read_text() and f"4 file(s) in {out.resolve()}" in printed
    assert (out / "report.md").is_file() and (out / "report.html").is_file() and not (out / "scores.csv").exists()
    assert cli.main(["report", str(tmp_path / "results"), "--model", "e5"]) == 2
    says(capsys.readouterr().err, "disastir-mteb report:", "model(s) e5", tmp_path / "results")
    assert cli.main(["report", str(tmp_path / "nothing-here")]) == 2
    assert "No results at" in capsys.readouterr().err
    [folder] = find_result_sets(tmp_path / "results")
    assert load_result_set(folder).has_per_query(TASK_NAMES[0])


def test_metric_names_are_derived_from_mteb_keys_and_a_wrong_name_is_one_sentence() -> None:
    names = {"ndcg_at_10": "NDCG@10", "recall_at_100": "Recall@100", "mrr_at_10": "MRR@10", "map_at_10": "MAP@10",
             "precision_at_5": "Precision@5", "hit_rate_at_20": "Hit rate@20", "recall_at_1000": "Recall@1000",
             "ndcg_at_10_linear_gain": "NDCG@10 (linear gain)", "accuracy": "Accuracy"}
    assert {key: get_metric(key).name for key in names} == names
    assert get_metric("ndcg_at_10") == MAIN_METRIC and get_metric("main_score") == MAIN_METRIC
    assert MAIN_METRIC.is_main and not get_metric("ndcg_at_10_linear_gain").is_main
    with pytest.raises(ValueError) as refused:
        get_metric("Recall@10")
    says(str(refused.value), "'Recall@10'", "'recall_at_10'", "<family>_at_<k>", "ndcg, map", "ndcg_at_10")
    with pytest.raises(ValueError) as refused:
        get_metric("nauc_ndcg_at_10_max")
    says(str(refused.value), "'nauc_ndcg_at_10_max'", "abstention metrics", "[0, 1]", "ndcg_at_10")


def test_report_on_another_metric_shows_the_result_files_numbers(sample_data: Path, use_data: object, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``--metric recall_at_10`` / ``map_at_10``: the numbers are mteb's, read here from the JSON files."""
    use_data(sample_data)  # type: ignore[operator]
    tasks = TASK_NAMES[:8]  # the 8 categories of QA: its intent mean is defined
    assert {get_spec(task).intent.value for task in tasks} == {"QA"}
    evaluate(HashingEncoder(), tasks, cache_dir=False, output_folder=tmp_path / "results", show_progress=False)
    [folder] = find_result_sets(tmp_path / "results")
    blocks = {task: json.loads((folder / f"{task}.json").read_text())["scores"]["test"][0] for task in tasks}
    for key, name in (("recall_at_10", "Recall@10"), ("map_at_10", "MAP@10")):
        files = {task: block[key] for task, block in blocks.items()}
        assert files != {task: block["ndcg_at_10"] for task, block in blocks.items()}  # another number than NDCG@10
        out = tmp_path / key
        assert cli.main(["report", str(tmp_path / "results"), "--metric", key, "--out", str(out),
                         "--format", "md", "csv"]) == 0
        printed = capsys.readouterr().out
        rows = list(csv.DictReader((out / "scores.csv").open()))
        assert {row["task"]: float(row[key]) for row in rows} == pytest.approx(files, abs=5e-6)  # 5 decimals
        assert "ndcg_at_10" not in rows[0]

        built = build_report([load_result_set(folder)], figures=False, metric=key)
        qa = _table(built, f"{name} x100").row("QA")
        assert {task: qa[get_spec(task).category.value] for task in tasks} == {
            task: f"{100 * value:.2f}" for task, value in files.items()}
        mean = f"{100 * sum(files.values()) / len(files):.2f}"
        overview = _table(built, "model", "setting").row("disastir-mteb/hashing-encoder")
        assert qa["Mean"] == mean and overview["QA"] == mean and overview["Avg"] == "–"  # 5 intents not run
        assert f"{name} x100;" in printed and f"| {name} x100 | Bio |" in (out / "report.md").read_text()
        assert printed.count(f"The authors publish NDCG@10 only: no published numbers are set beside {name}.") == 1
        assert _png_text(out / "intents.png")["Title"] == f"DisastIR {name} per intent (synthetic data)"
        [heatmap] = out.glob("heatmap-*.png")
        assert _png_text(heatmap)["Title"].endswith(f": {name} (synthetic data)")

    default = report_text([load_result_set(folder)])
    assert "NDCG@10 x100" in default and "The authors publish" not in default and "Recall@10" not in default
    assert report_text([load_result_set(folder)], metric="ndcg_at_10") == default

    results = str(tmp_path / "results")
    assert cli.main(["report", results, "--metric", "recall_at_7", "--out", str(tmp_path / "no")]) == 2
    printed = capsys.readouterr()
    first = folder / f"{sorted(tasks)[0]}.json"
    assert printed.out == "" and not (tmp_path / "no").exists()  # nothing printed or written half-way
    says(printed.err, "disastir-mteb report:", first, "recall_at_7", "(Recall@7)", "ndcg_at_{1,3,5,10,20,100}",
         "map_at_{1,3,5,10,20,100}", "the nearest: recall_at_5")
    assert cli.main(["report", results, "--metric", "NDCG@10"]) == 2
    says(capsys.readouterr().err, "disastir-mteb report:", "'NDCG@10'", "'ndcg_at_10'")


def test_synthetic_data_is_said_from_the_generator_to_the_report(sample_data: Path, use_data: object,
                                                                   tmp_path: Path) -> None:
    """Generator marker -> per-query ``data`` record -> ResultSet.synthetic -> first line and figure titles."""
    assert json.loads((sample_data / MARKER).read_text())["synthetic"] is True
    use_data(sample_data)  # type: ignore[operator]
    evaluate(HashingEncoder(), TASK_NAMES[:4], cache_dir=False, output_folder=tmp_path / "results",
             show_progress=False)
    [folder] = find_result_sets(tmp_path / "results")
    record = json.loads(per_query_file(folder, TASK_NAMES[0]).read_text())
    assert record["data"]["source"] == str(sample_data.resolve()) and record["data"]["synthetic"] is True
    assert record["data"]["generator"]["scale"] == "small" and "encoding" in record
    result = load_result_set(folder)
    assert result.synthetic is True and result.data_sources[0]["source"] == str(sample_data.resolve())

    text = report_text([result])
    assert text.splitlines()[2] == f"!! {SYNTHETIC}"  # right under the title
    written = write_report([result], tmp_path / "report", formats=["md", "html", "csv"])
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert markdown.splitlines()[2] == f"> **{SYNTHETIC}**"
    assert f'<p class="notice"><strong>{SYNTHETIC}</strong></p>' in (tmp_path / "report" / "report.html").read_text()
    for png in [p for p in written if p.suffix == ".png"]:
        assert _png_text(png)["Title"].endswith("(synthetic data)"), png.name
        assert _png_text(png)["Warning"] == SYNTHETIC
    rows = list(csv.DictReader((tmp_path / "report" / "scores.csv").open()))
    assert {(r["synthetic"], r["data"]) for r in rows} == {("true", f"local folder {sample_data.name}")}  # no path


def test_real_and_unrecorded_data_make_no_synthetic_claim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from disastir_mteb.vocabulary.metadata import DATASET_REPO, DATASET_REVISION

    assert DataSource().record() == {"source": f"hf:{DATASET_REPO}@{DATASET_REVISION}", "synthetic": False}
    own = write_layout(tmp_path / "own-data", {"d1": "text"}, {})
    monkeypatch.setenv("DISASTIR_DATA_DIR", str(own))
    assert DataSource.from_environment().record() == {"source": str(own.resolve()), "synthetic": False}  # no marker

    real = _recorded_set(tmp_path / "real", synthetic=False)
    unknown = _recorded_set(tmp_path / "unknown", synthetic=None)  # per-query files from before the record
    fake = _recorded_set(tmp_path / "fake", synthetic=True, model="other/model")
    assert (real.synthetic, unknown.synthetic, fake.synthetic) == (False, None, True)
    assert _published_set("intfloat/e5-small-v2").synthetic is None  # no per-query files at all (plain mteb run)
    for sets in ([real], [unknown], [real, unknown, _published_set("intfloat/e5-small-v2")]):
        text = report_text(sets)
        assert "ynthetic data" not in text and not any(isinstance(b, Notice) for b in build_report(sets))
    # the data each set records is in the Provenance table (a local folder by its name only), said once
    assert provenance_of(unknown).dataset is None and provenance_of(real).dataset == "local folder somewhere"
    assert "local folder somewhere" in report_text([real]) and "Data:" not in report_text([real])

    mixed = report_text([real, fake])
    assert mixed.splitlines()[2] == f"!! {SYNTHETIC.removesuffix('.')} (1 of 2 result sets, marked below)."
    assert "other/model — exact (synthetic data)" in mixed and "no/such-model — exact (synthetic" not in mixed
    written = write_report([real, fake], tmp_path / "report", formats=["md"])
    titles = {p.name: _png_text(p)["Title"] for p in written if p.suffix == ".png"}
    assert titles["intents.png"] == "DisastIR NDCG@10 per intent (some sets on synthetic data)"
    assert sorted(t.endswith("(synthetic data)") for n, t in titles.items() if n.startswith("heatmap")) == [False, True]


def test_intent_caption_mentions_published_ticks_only_when_drawn(tmp_path: Path) -> None:
    def caption(sets: list[ResultSet]) -> str:
        return next(b.caption for b in build_report(sets) if isinstance(b, Image) and b.path == "intents.png")

    unknown = _recorded_set(tmp_path / "unknown", synthetic=None)
    assert caption([unknown]) == "Per-intent NDCG@10 of every result set."
    known = _published_set("intfloat/e5-small-v2")
    assert caption([unknown, known]) == "Per-intent NDCG@10 of every result set (black ticks: published)."


def test_readable_labels_for_people_raw_settings_in_the_files(tmp_path: Path) -> None:
    assert describe_setting({}) == "exact"
    assert describe_setting({"disastir_search": "ann-" + PRESETS["paper"].label()}) == "ANN (HNSW M=16, ef=64)"
    assert describe_setting({"disastir_search": "ann-" + PRESETS["i8"].label()}) == \
        "ANN (HNSW M=16, ef=64, i8, rescore x4)"
    assert describe_setting({"disastir_search": "ann-" + resolve_params(
        "paper", connectivity=4, expansion_add=16, expansion_search=16, threads=1).label()}) == \
        "ANN (HNSW M=4, ef=16, efC=16)"
    assert describe_setting({"disastir_search": "ann-" + PRESETS["exact"].label()}) == "USearch brute force (k=all)"
    assert describe_setting({"disastir_instructions": "disastir", "disastir_template": "instruct-query"}) == \
        "instructions: disastir"
    assert describe_setting({"disastir_instructions": "dmretriever", "disastir_template": "instruct-query",
                             "disastir_passages": "instructed", "disastir_precision": "fp16", **ANN_PAPER}) == \
        "ANN (HNSW M=16, ef=64); instructions: dmretriever (template instruct-query), also on passages; fp16 weights"
    assert describe_setting({"disastir_search": "ann-something-new"}) == "ann-something-new"  # unknown: as is

    exact = _recorded_set(tmp_path / "exact", synthetic=None, model="intfloat/e5-small-v2")
    ann = _recorded_set(tmp_path / "ann", synthetic=None, model="intfloat/e5-small-v2", experiment=ANN_PAPER)
    instructed = _recorded_set(tmp_path / "instructed", synthetic=None, model="intfloat/e5-small-v2",
                               experiment={"disastir_instructions": "disastir", "disastir_template": "instruct-query"})
    text = report_text([exact, ann, instructed])
    assert "intfloat/e5-small-v2 — ANN (HNSW M=16, ef=64)\n" in text and "intfloat/e5-small-v2 — exact\n" in text
    assert "intfloat/e5-small-v2 — instructions: disastir\n" in text
    overview = _table(build_report([exact, ann, instructed], figures=False), "model", "setting")
    assert overview.column("setting") == ["exact", "ANN (HNSW M=16, ef=64)", "instructions: disastir"]  # not "plain"
    assert "Settings as mteb files them: `disastir_search=ann-hnsw-ip-f32-M16-efC128-ef64-k10-t16`." in text

    written = write_report([exact, ann, instructed], tmp_path / "report", formats=["md", "csv"])
    pngs = {p.name: _png_text(p) for p in written if p.suffix == ".png"}
    [ann_png] = [meta for name, meta in pngs.items() if "ann-hnsw" in name]
    assert ann_png["Title"] == "intfloat/e5-small-v2 — ANN (HNSW M=16, ef=64): NDCG@10"
    assert "disastir_search=ann-hnsw-ip-f32-M16-efC128-ef64-k10-t16" in ann_png["Description"]
    legend = pngs["intents.png"]["Description"]
    assert "e5-small-v2 — ANN (HNSW M=16, ef=64): intfloat/e5-small-v2 (disastir_search=ann-hnsw-" in legend
    rows = {r["setting"]: r for r in csv.DictReader((tmp_path / "report" / "scores.csv").open())}
    assert set(rows) == {"exact", "ANN (HNSW M=16, ef=64)", "instructions: disastir"}
    assert rows["ANN (HNSW M=16, ef=64)"]["experiment"] == "disastir_search=ann-hnsw-ip-f32-M16-efC128-ef64-k10-t16"
    assert rows["exact"]["synthetic"] == "" and rows["exact"]["data"] == ""  # not recorded: no claim


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


def _svg_texts(path: Path) -> list[str]:
    """The text drawn in an SVG (kept as <text> elements for editing), not its metadata."""
    import xml.etree.ElementTree as ElementTree

    root = ElementTree.parse(path).getroot()  # raises unless the file is well-formed XML
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return ["".join(node.itertext()) for node in root.iter("{http://www.w3.org/2000/svg}text")]


def test_figures_for_papers_pdf_svg_untitled_and_a_fitted_colour_scale(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb.results.plots import colour_limits

    result = _published_set("intfloat/e5-small-v2")  # the paper's 48 cells: 100 x min and max set the scale
    low, high = 100 * min(result.scores.values()), 100 * max(result.scores.values())
    assert colour_limits(result.grid) == (low, high) and colour_limits(result.grid, "0-100") == (0.0, 100.0)
    assert 0 < low < high < 100  # the fixed scale would waste colours on [0, low) and (high, 100]
    with pytest.raises(ValueError) as refused:
        colour_limits(result.grid, "0-1")
    says(str(refused.value), "'0-1'", "data, 0-100")

    paper = tmp_path / "paper"
    written = write_report([result], paper, formats=["md"], figure_formats=["pdf", "svg"], figure_titles=False)
    assert sorted(p.suffix for p in written) == [".md", ".pdf", ".pdf", ".svg", ".svg"]  # md embeds the SVG: no PNG
    title = "intfloat/e5-small-v2 — exact: NDCG@10"
    for pdf in paper.glob("*.pdf"):
        data = pdf.read_bytes()
        assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF") and b"/Type3" not in data  # TrueType
    [heatmap_svg] = paper.glob("heatmap-*.svg")
    texts = _svg_texts(heatmap_svg)
    assert title not in texts and f"NDCG@10 (x100), scale fitted: {low:.2f}–{high:.2f}" in texts  # the bar says it
    assert _svg_texts(paper / "intents.svg") and "NDCG@10 per intent" not in " ".join(_svg_texts(paper / "intents.svg"))
    assert f"]({heatmap_svg.name})" in (paper / "report.md").read_text()

    titled = write_report([result], tmp_path / "titled", formats=[], figure_formats=["svg"], colour_scale="0-100")
    [svg] = [p for p in titled if p.name.startswith("heatmap-")]
    assert title in _svg_texts(svg) and "NDCG@10 (x100), fixed scale 0–100" in _svg_texts(svg)

    with pytest.raises(ValueError) as refused:
        write_report([result], tmp_path / "eps", figure_formats=["eps"])
    says(str(refused.value), "['eps']", "png, pdf, svg")
    assert not (tmp_path / "eps").exists()
    results = tmp_path / "runs" / "results" / "intfloat__e5-small-v2" / ("a" * 40)
    results.mkdir(parents=True)
    for name, score in result.scores.items():
        (results / f"{name}.json").write_text(json.dumps({"task_name": name, "scores": {"test": [
            {"main_score": score, "ndcg_at_10": score, "hf_subset": "default"}]}}), encoding="utf-8")
    out = tmp_path / "cli"
    assert cli.main(["report", str(results), "--out", str(out), "--format", "md", "--figure-format", "pdf"]) == 0
    assert sorted(p.suffix for p in out.iterdir()) == [".md", ".pdf", ".pdf", ".png", ".png"]  # PDFs, PNGs for the md
    capsys.readouterr()
    assert cli.main(["report", str(results), "--colour-scale", "0-100", "--no-figure-title"]) == 2
    says(capsys.readouterr().err, "disastir-mteb report:", "--no-figure-title", "--colour-scale", "pass --out DIR")


def test_scores_csv_names_a_local_data_folder_without_this_machines_path(sample_data: Path, use_data: object,
                                                                          tmp_path: Path) -> None:
    use_data(sample_data)  # type: ignore[operator]
    evaluate(HashingEncoder(), TASK_NAMES[:1], cache_dir=False, output_folder=tmp_path / "results",
             show_progress=False)
    assert cli.main(["report", str(tmp_path / "results"), "--out", str(tmp_path / "report"), "--format", "csv"]) == 0
    [row] = list(csv.DictReader((tmp_path / "report" / "scores.csv").open()))
    assert row["data"] == f"local folder {sample_data.name}" and str(sample_data.parent) not in row["data"]

"""Query sets in results, reports, compare and the runner: full, DisastIR-Test and DisastIR-DevLite.

The results-layer tests write mteb result files by hand (one folder may hold all three query sets'
files, as mteb files them); the runner tests run HashingEncoder on the bundled sample and need the
split tasks registered (``mteb.get_task("DisastIR-DevLite-QA-Bio")``); they are skipped otherwise.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from scipy.stats import kendalltau
from sentences import says

from disastir_mteb import cli
from disastir_mteb.results.provenance import provenance_of
from disastir_mteb.results.published import published_for
from disastir_mteb.results.report import build_report, report_text, write_report
from disastir_mteb.results.report_format import Heading, Table
from disastir_mteb.results.result_sets import (
    collect_result_sets,
    find_result_sets,
    load_result_set,
    load_result_sets,
    resolve_result_set,
)
from disastir_mteb.results.split_agreement import split_agreement
from disastir_mteb.runner.task_selection import corpus_groups, resolve_tasks
from disastir_mteb.vocabulary.settings import HASHING_ENCODER
from disastir_mteb.vocabulary.taxonomy import INTENTS, SPLIT_TASK_NAMES, TASK_NAMES, Intent, Split

REVISION = "a" * 40
TABLE2 = "DMRetriever paper, Table 2, DisastIR-Test (dmretriever instructions)"
DISASTIR_PAPER = ("DisastIR paper, Table 3", "DisastIR repository leaderboard", "DisastIR paper, Tables 19-23")


def _write_task(folder: Path, name: str, score: float) -> None:
    """One mteb result file as mteb 2 writes it (the fields the plugin reads, and a few more)."""
    folder.mkdir(parents=True, exist_ok=True)
    block = {"main_score": score, "ndcg_at_10": score, "hf_subset": "default", "languages": ["eng-Latn"]}
    (folder / f"{name}.json").write_text(json.dumps({
        "dataset_revision": "0" * 40, "task_name": name, "mteb_version": "2.26.24",
        "scores": {"test": [block]}, "evaluation_time": 1.0, "kg_co2_emissions": None}), encoding="utf-8")


def _run(root: Path, model: str, scores: dict[Split, dict[Intent, float]], *,
         experiment: dict[str, str] | None = None) -> Path:
    """A revision folder holding the task files of each split in ``scores``: every category of an intent alike."""
    folder = root / "results" / model.replace("/", "__") / REVISION
    if experiment:
        folder = folder / "experiments" / "-".join(experiment.values())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model_meta.json").write_text(json.dumps({"name": model, "revision": REVISION,
                                                        "experiment_kwargs": experiment or {}}))
    for split, intents in scores.items():
        for spec_name, base in zip(SPLIT_TASK_NAMES[split], TASK_NAMES, strict=True):
            intent = Intent(base.split("-")[1])
            _write_task(folder, spec_name, intents[intent])
    return folder


def _flat(value: float) -> dict[Intent, float]:
    return dict.fromkeys(INTENTS, value)


def _split_tasks_registered() -> bool:
    import mteb

    try:
        mteb.get_task("DisastIR-DevLite-QA-Bio")
        mteb.get_task("DisastIR-Test-QA-Bio")
    except KeyError:
        return False
    return True


def test_one_folder_holds_three_result_sets(tmp_path: Path) -> None:
    folder = _run(tmp_path, "org/model", {Split.full: _flat(0.5), Split.test: _flat(0.4), Split.devlite: _flat(0.3)})
    sets = collect_result_sets(tmp_path)
    assert [s.split for s in sets] == [Split.full, Split.test, Split.devlite]
    assert {s.folder for s in sets} == {folder} and [s.grid.overall() for s in sets] == pytest.approx([0.5, 0.4, 0.3])
    assert all(set(s.scores) == set(TASK_NAMES) for s in sets)  # keyed by the full set's names
    full, test, devlite = sets
    assert [s.display_label for s in sets] == ["org/model — exact", "org/model — DisastIR-Test; exact",
                                               "org/model — DisastIR-DevLite; exact"]
    assert [s.label for s in sets] == ["org/model", "org/model [DisastIR-Test]", "org/model [DisastIR-DevLite]"]
    assert [s.benchmark for s in sets] == ["DisastIR", "DisastIR-Test", "DisastIR-DevLite"]
    assert test.file_task("DisastIR-QA-Bio") == "DisastIR-Test-QA-Bio" and full.file_task("DisastIR-QA-Bio") == \
        "DisastIR-QA-Bio"
    assert test.task_record("DisastIR-QA-Bio")["main_score"] == pytest.approx(0.4)  # read from the Test file
    assert set(test.file_scores) == set(SPLIT_TASK_NAMES[Split.test]) and full.file_scores == full.scores
    assert provenance_of(full).dataset.endswith("(declared by the task)")  # type: ignore[union-attr]
    assert provenance_of(test).dataset is None  # a split task's data is its file's own record, never guessed

    # the old entry points read the full set, as they always did
    assert find_result_sets(tmp_path) == [folder] and load_result_set(folder).split is Split.full
    assert load_result_set(folder).scores == full.scores
    assert resolve_result_set(tmp_path).split is Split.full
    assert resolve_result_set(tmp_path, split="devlite").scores == devlite.scores
    with pytest.raises(ValueError, match="holds 3 result sets"):
        resolve_result_set(tmp_path, split=None)
    assert [s.split for s in load_result_sets(folder)] == [Split.full, Split.test, Split.devlite]

    test_only = _run(tmp_path / "other", "org/test-only", {Split.test: _flat(0.2)})
    assert find_result_sets(tmp_path / "other") == [] and find_result_sets(tmp_path / "other", split="test") == \
        [test_only]
    with pytest.raises(FileNotFoundError) as missing:
        load_result_set(test_only)
    says(str(missing.value), test_only, "(DisastIR-*.json)", "DisastIR-Test files", "(split='test'", "load_result_sets")
    with pytest.raises(ValueError) as refused:
        load_result_set(test_only, split="dev")
    says(str(refused.value), "'dev'", "'devlite'")


def test_test_set_is_reported_beside_table2_only(tmp_path: Path) -> None:
    model = "thenlper/gte-base"  # in DMRetriever's Table 2 and in the DisastIR paper
    table2 = next(r for r in published_for(model) if r.source == "dmretriever-table2")
    _run(tmp_path, model, {Split.full: _flat(0.3), Split.test: dict(table2.intents)})
    test = resolve_result_set(tmp_path, split="test")
    text = report_text([test])
    assert TABLE2 in text and not any(source in text for source in DISASTIR_PAPER)
    [published] = [b for b in build_report([test], figures=False) if isinstance(b, Table) and b.headers[0] == "source"]
    difference = published.row("this run − dmretriever-table2")
    assert all(abs(float(difference[c])) <= 0.01 for c in [*(i.value for i in INTENTS), "Avg"])  # Table 2's rounding
    headings = [b.text for b in build_report([test], figures=False) if isinstance(b, Heading)]
    assert headings[0] == "DisastIR report: DisastIR-Test"
    assert "thenlper/gte-base — DisastIR-Test; exact (Test: 9,120 queries)" in headings

    devlite = _run(tmp_path / "dev", model, {Split.devlite: _flat(0.2)})
    text = report_text(load_result_sets(devlite))
    assert "(DevLite: 480 queries, 10 per task)" in text and "Published numbers" not in text
    assert "Missing" not in text and "48/48" in text


def test_any_test_run_is_ranked_among_table2(tmp_path: Path) -> None:
    """A model Table 2 does not list is still placed among its models, by the average of the intent means."""
    from disastir_mteb.results.published import published_source

    table2 = published_source("dmretriever-table2")
    second = sorted((record.overall for _, record in table2), reverse=True)[1]
    _run(tmp_path, "someone/new-model", {Split.test: _flat(second - 0.0001), Split.full: _flat(0.9)})
    sets = load_result_sets(tmp_path / "results" / "someone__new-model" / REVISION)
    text = report_text(sets)
    assert "new-model among DMRetriever's Table 2 (DisastIR-Test)" in text
    assert f"Rank 3 of {len(table2) + 1} by the average" in text
    [standing] = [b for b in build_report(sets, figures=False) if isinstance(b, Table) and b.headers[0] == "#"]
    assert [rank for rank, model in zip(standing.column("#"), standing.column("model"), strict=True)
            if model.startswith("**this run** someone/new-model")] == ["3"]
    assert text.count("among DMRetriever's Table 2") == 1  # the full set gets no standing

    _run(tmp_path / "partial", "someone/new-model", {Split.test: _flat(0.5)})
    partial = tmp_path / "partial" / "results" / "someone__new-model" / REVISION
    next(partial.glob("DisastIR-Test-QA-Bio.json")).unlink()
    assert "Not placed: the run has 47 of the 48 DisastIR-Test tasks" in report_text(load_result_sets(partial))


def test_full_set_report_is_unchanged_by_split_files_and_shows_no_table2(tmp_path: Path) -> None:
    model = "thenlper/gte-base"
    appendix = next(r for r in published_for(model) if r.tasks)
    folder = _run(tmp_path, model, {})  # model_meta.json only
    for name, score in appendix.tasks.items():  # type: ignore[union-attr]
        _write_task(folder, name, score)
    before = report_text([load_result_set(folder)])
    write_report([load_result_set(folder)], tmp_path / "before", formats=["md", "csv"])

    _run(tmp_path, model, {Split.test: _flat(0.4), Split.devlite: _flat(0.3)})  # the same folder, other query sets
    full = load_result_set(folder)
    assert report_text([full]) == before
    write_report([full], tmp_path / "after", formats=["md", "csv"])
    for name in ("report.md", "scores.csv"):
        assert (tmp_path / "after" / name).read_bytes() == (tmp_path / "before" / name).read_bytes()
    assert "DisastIR paper, Table 3 (disastir instructions)" in before and TABLE2 not in before  # a correction
    assert "dmretriever-table2" not in before

    both = report_text(collect_result_sets(tmp_path))
    assert both.splitlines()[0] == "DisastIR report: DisastIR, DisastIR-Test, DisastIR-DevLite"
    assert both.count(TABLE2) == 1  # beside the Test set only
    write_report(collect_result_sets(tmp_path), tmp_path / "all", formats=["md", "csv"])
    heatmaps = sorted(p.name for p in (tmp_path / "all").glob("heatmap-*.png"))
    assert len(heatmaps) == 3 and any(n.endswith("-DisastIR-Test.png") for n in heatmaps)
    rows = (tmp_path / "all" / "scores.csv").read_text().splitlines()
    assert sum(",DisastIR-Test-QA-Bio," in row for row in rows) == 1 and len(rows) == 1 + 3 * 48


MODELS = {  # model -> (full, DevLite) per-intent scores; every category of an intent alike
    "org/alpha": ({Intent.QA: 0.70, Intent.QAdoc: 0.60, Intent.Twitter: 0.50, Intent.FC: 0.65, Intent.NLI: 0.40,
                   Intent.STS: 0.80},
                  {Intent.QA: 0.72, Intent.QAdoc: 0.55, Intent.Twitter: 0.52, Intent.FC: 0.60, Intent.NLI: 0.45,
                   Intent.STS: 0.79}),
    "org/beta": ({Intent.QA: 0.60, Intent.QAdoc: 0.62, Intent.Twitter: 0.45, Intent.FC: 0.55, Intent.NLI: 0.42,
                  Intent.STS: 0.70},
                 {Intent.QA: 0.50, Intent.QAdoc: 0.66, Intent.Twitter: 0.40, Intent.FC: 0.58, Intent.NLI: 0.30,
                  Intent.STS: 0.71}),
    "org/gamma": ({Intent.QA: 0.55, Intent.QAdoc: 0.50, Intent.Twitter: 0.48, Intent.FC: 0.50, Intent.NLI: 0.38,
                   Intent.STS: 0.65},
                  {Intent.QA: 0.58, Intent.QAdoc: 0.52, Intent.Twitter: 0.49, Intent.FC: 0.48, Intent.NLI: 0.50,
                   Intent.STS: 0.66}),
    "org/delta": ({Intent.QA: 0.30, Intent.QAdoc: 0.35, Intent.Twitter: 0.20, Intent.FC: 0.40, Intent.NLI: 0.30,
                   Intent.STS: 0.50},
                  {Intent.QA: 0.31, Intent.QAdoc: 0.30, Intent.Twitter: 0.25, Intent.FC: 0.35, Intent.NLI: 0.28,
                   Intent.STS: 0.45}),
}


def _mean(scores: dict[Intent, float]) -> float:
    return sum(scores.values()) / len(scores)


def test_kendall_tau_between_devlite_and_full_rankings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for model, (full, devlite) in MODELS.items():
        _run(tmp_path / "both", model, {Split.full: full, Split.devlite: devlite})
        _run(tmp_path / "full", model, {Split.full: full})
        _run(tmp_path / "devlite", model, {Split.devlite: devlite})
    # full overall: alpha 60.83 > beta 55.67 > gamma 51.00 > delta 34.17; DevLite: alpha 60.50 > gamma 53.83 >
    # beta 52.50 > delta 32.33: one discordant pair of six, tau = (5 - 1) / 6
    [agreement] = split_agreement(collect_result_sets(tmp_path / "both"))
    assert (agreement.split, agreement.reference) == (Split.devlite, Split.full)
    assert agreement.tau() == (pytest.approx(2 / 3), 4)
    assert agreement.tau()[0] == pytest.approx(kendalltau([_mean(f) for f, _ in MODELS.values()],
                                                          [_mean(d) for _, d in MODELS.values()]).statistic)
    for intent in INTENTS:
        expected = kendalltau([f[intent] for f, _ in MODELS.values()], [d[intent] for _, d in MODELS.values()])
        assert agreement.tau(intent)[0] == pytest.approx(expected.statistic), intent

    assert cli.main(["compare", str(tmp_path / "both")]) == 0
    printed = capsys.readouterr().out
    assert "Kendall's tau between the model rankings (overall, 4 models): 0.667" in printed
    assert printed.count("Kendall's tau between the model rankings (") == 7  # overall and the six intents
    assert "the DMRetriever authors report 0.90 overall and 0.73-0.91 per intent" in printed
    gamma = next(line for line in printed.splitlines() if line.startswith("gamma — exact"))
    assert gamma.split()[-4:] == ["53.83", "51.00", "2", "3"]  # DevLite, full, and the ranks on each
    assert cli.main(["compare", str(tmp_path / "devlite"), str(tmp_path / "full")]) == 0
    assert capsys.readouterr().out == printed  # a folder of each: the same pairs

    _run(tmp_path / "one", "org/alpha", {Split.full: MODELS["org/alpha"][0], Split.devlite: MODELS["org/alpha"][1]})
    assert cli.main(["compare", str(tmp_path / "one")]) == 0
    says(next(line for line in capsys.readouterr().out.splitlines() if line.startswith("Kendall's tau (overall):")),
         "at least two models", "both result sets", "found 1")


def test_rankings_across_query_sets_on_another_metric(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--metric mrr_at_10`` ranks by the files' mrr_at_10: here the full set's NDCG@10 on both query sets."""
    for model, (full, devlite) in MODELS.items():
        _run(tmp_path, model, {Split.full: full, Split.devlite: devlite})
    for path in sorted(tmp_path.rglob("DisastIR-*.json")):
        record = json.loads(path.read_text())
        full_file = path.with_name(path.name.replace("DisastIR-DevLite-", "DisastIR-"))
        record["scores"]["test"][0]["mrr_at_10"] = json.loads(full_file.read_text())["scores"]["test"][0]["ndcg_at_10"]
        path.write_text(json.dumps(record))
    sets = collect_result_sets(tmp_path)
    [agreement] = split_agreement(sets, metric="mrr_at_10")
    first, second = agreement.scores()
    assert first == pytest.approx(second) == {model: _mean(full) for model, (full, _) in MODELS.items()}
    assert agreement.tau() == (pytest.approx(1.0), 4)  # and 2/3 on NDCG@10
    assert split_agreement(sets)[0].tau() == (pytest.approx(2 / 3), 4)

    assert cli.main(["compare", str(tmp_path), "--metric", "mrr_at_10"]) == 0
    printed = capsys.readouterr().out
    assert "MRR@10 x100, averaged as the authors do" in printed and "NDCG@10 x100" not in printed
    assert "Kendall's tau between the model rankings (overall, 4 models): 1.000" in printed
    assert "the DMRetriever authors report 0.90 overall and 0.73-0.91 per intent (ranking by NDCG@10)." in printed
    assert cli.main(["compare", str(tmp_path), "--metric", "recall_at_10"]) == 2
    says(capsys.readouterr().err, "disastir-mteb compare:", sets[0].folder / "DisastIR-FC-Bio.json", "recall_at_10",
         "(Recall@10)", "main_score, ndcg_at_10, mrr_at_10")


def test_exact_and_ann_compare_per_query_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ann = {"disastir_search": "ann-hnsw-ip-f32-M16-efC128-ef64-k10-t16"}
    _run(tmp_path / "exact", "org/alpha", {Split.full: _flat(0.5)})
    _run(tmp_path / "ann", "org/alpha", {Split.full: _flat(0.45)}, experiment=ann)
    assert cli.main(["compare", str(tmp_path / "exact"), str(tmp_path / "ann")]) == 0
    full_only = capsys.readouterr().out
    assert full_only.startswith("Exact: org/alpha — exact  [") and "DisastIR-Test" not in full_only

    _run(tmp_path / "exact", "org/alpha", {Split.test: _flat(0.4)})  # Test runs beside them, same folders
    _run(tmp_path / "ann", "org/alpha", {Split.test: _flat(0.3)}, experiment=ann)
    assert cli.main(["compare", str(tmp_path / "exact"), str(tmp_path / "ann")]) == 0
    printed = capsys.readouterr().out  # one block per query set, the full set's exactly as before
    test_block = "\nDisastIR-Test:\nExact: org/alpha — DisastIR-Test; exact  ["
    assert printed.startswith("DisastIR:\n" + full_only + test_block)


def test_submit_copies_split_task_files(tmp_path: Path) -> None:
    from disastir_mteb.submission.checks import submitted_folders
    from disastir_mteb.submission.submit import submit

    _run(tmp_path / "runs", "org/alpha", {Split.full: _flat(0.5), Split.test: _flat(0.4)})
    _run(tmp_path / "runs", "org/test-only", {Split.devlite: _flat(0.4)})
    report = submit(tmp_path / "runs", tmp_path / "out")
    names = {path.name for path in report.written}
    assert {"DisastIR-QA-Bio.json", "DisastIR-Test-QA-Bio.json", "DisastIR-DevLite-QA-Bio.json"} <= names
    assert len(report.sources) == 2 and len(submitted_folders(tmp_path / "out" / "results")) == 2


def test_corpus_groups_and_split_names_without_the_split_tasks() -> None:
    def task(name: str) -> SimpleNamespace:
        return SimpleNamespace(metadata=SimpleNamespace(name=name))

    full, test, devlite, other = (task("DisastIR-QA-Bio"), task("DisastIR-Test-QA-Chem"),
                                  task("DisastIR-DevLite-NLI-Geo"), task("NFCorpus"))
    assert corpus_groups([full, other, test]) == [[full, other, test]]  # one DisastIR corpus: order as given
    assert corpus_groups([devlite, full, other, test]) == [[devlite], [full, test], [other]]
    with pytest.raises(ValueError) as refused:
        resolve_tasks(["DisastIR-DevLite-QA-Bio"], split="test")
    says(str(refused.value), "'DisastIR-DevLite-QA-Bio'", "'devlite'", "split='test'", "'DisastIR-QA-Bio'")
    with pytest.raises(ValueError) as refused:
        resolve_tasks(["DisastIR-QA-Bio"], split="dev")
    says(str(refused.value), "'dev'", "'devlite'")
    assert cli.build_parser().parse_args(["run", "-m", "bundled", "--split", "devlite"]).split == "devlite"


def test_split_tasks_get_their_intents_instruction() -> None:
    import mteb
    from datasets import Dataset
    from mteb.types import PromptType
    from torch.utils.data import DataLoader

    from disastir_mteb.models.adapter import with_instructions
    from disastir_mteb.vocabulary.instructions import INSTRUCTION_SETS

    seen: list[str] = []

    def spy(texts: list[str]) -> object:
        seen.extend(texts)
        return [[1.0, 0.0]] * len(texts)

    encoder = with_instructions(spy, "disastir")
    full = mteb.get_task("DisastIR-NLI-Bio").metadata
    for name in ("DisastIR-NLI-Bio", "DisastIR-Test-NLI-Bio", "DisastIR-DevLite-NLI-Bio"):
        loader = DataLoader(Dataset.from_dict({"id": ["q1"], "text": ["a claim"]}), batch_size=1)
        encoder.encode(loader, task_metadata=full.model_copy(update={"name": name}), hf_split="test",
                       hf_subset="default", prompt_type=PromptType.query)
    assert len(set(seen)) == 1 and INSTRUCTION_SETS["disastir"][Intent.NLI] in seen[0]


def test_the_embedding_cache_keeps_two_corpora_apart(tmp_path: Path) -> None:
    """DevLite's corpus and the full corpus never share a store entry: the key is the texts, not the task."""
    import mteb
    from datasets import Dataset

    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch
    from disastir_mteb.search.store import EmbeddingStore
    from disastir_mteb.vocabulary.run_settings import RunSettings

    store = EmbeddingStore(tmp_path / "cache")
    searcher = SharedCorpusSearch(HashingEncoder(), RunSettings(progress=False), store=store)
    metadata = mteb.get_task("DisastIR-QA-Bio").metadata
    full = Dataset.from_dict({"id": ["d1", "d2", "d3"], "text": ["flood water", "storm surge", "wildfire smoke"]})
    devlite = Dataset.from_dict({"id": ["d1", "d3"], "text": ["flood water", "wildfire smoke"]})  # a pooled subset
    for corpus in (full, devlite, full):
        searcher.index(corpus, task_metadata=metadata, hf_split="test", hf_subset="default",
                       encode_kwargs={"batch_size": 2})
    assert searcher.passages_encoded == 5 and searcher.corpus_indexings == 3  # the third came from the store
    assert len(list((tmp_path / "cache" / "corpus").rglob("manifest.json"))) == 2


needs_split_tasks = pytest.mark.skipif(not _split_tasks_registered(),
                                       reason="the DisastIR-Test and DevLite tasks are not registered yet")


@pytest.fixture
def split_sample(sample_data: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The small sample as the full set and a DevLite folder split from it (2 of 8 queries per task)."""
    from disastir_mteb.data import devlite as split_data
    from disastir_mteb.sample.devlite import devlite_sample_dir
    from disastir_mteb.tasks import retrieval as tasks

    monkeypatch.setenv("DISASTIR_DATA_DIR", str(sample_data))
    monkeypatch.setenv("DISASTIR_DEVLITE_DIR", str(devlite_sample_dir("small", cache_dir=cache_dir)))
    tasks.forget_data_files()
    split_data.cached_split_files.cache_clear()
    yield sample_data
    tasks.forget_data_files()
    split_data.cached_split_files.cache_clear()


@needs_split_tasks
def test_runner_runs_devlite_and_test_each_corpus_encoded_once(split_sample: Path, tmp_path: Path) -> None:
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.runner.run import evaluate
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch
    from disastir_mteb.search.store import EmbeddingStore
    from disastir_mteb.vocabulary.run_settings import RunSettings

    store = EmbeddingStore(tmp_path / "cache")
    devlite = SharedCorpusSearch(HashingEncoder(), RunSettings(progress=False), store=store)
    result = evaluate(devlite, split="devlite", output_folder=tmp_path / "out", show_progress=False)
    assert sorted(r.task_name for r in result.task_results) == sorted(SPLIT_TASK_NAMES[Split.devlite])
    assert devlite.corpus_indexings == 1 and devlite.corpus_passes == 1  # one corpus, one pass for 48 tasks
    devlite_passages = devlite.indexed_passages
    assert devlite.passages_encoded == devlite_passages

    test = SharedCorpusSearch(HashingEncoder(), RunSettings(progress=False), store=store)
    result = evaluate(test, split="test", output_folder=tmp_path / "out", show_progress=False)
    assert sorted(r.task_name for r in result.task_results) == sorted(SPLIT_TASK_NAMES[Split.test])
    assert test.corpus_indexings == 1 and test.passages_encoded == test.indexed_passages != devlite_passages
    assert len(list((tmp_path / "cache" / "corpus").rglob("manifest.json"))) == 2  # two corpora, two entries

    mixed = SharedCorpusSearch(HashingEncoder(), RunSettings(progress=False), store=store)
    names = ["DisastIR-DevLite-QA-Bio", "DisastIR-QA-Bio", "DisastIR-Test-QA-Chem", "DisastIR-DevLite-NLI-Geo"]
    result = evaluate(mixed, names, output_folder=tmp_path / "out", show_progress=False)
    assert [r.task_name for r in result.task_results] == [names[0], names[3], names[1], names[2]]  # by corpus
    assert mixed.passages_encoded == 0 and mixed.corpus_indexings == 2  # both corpora from the store, once each
    assert [t.metadata.name for t in resolve_tasks(["DisastIR-QA-Bio"], split="test")] == ["DisastIR-Test-QA-Bio"]
    generated = (name for name in ["DisastIR-QA-Bio", "DisastIR-FC-Geo"])  # any iterable, read once
    assert [t.metadata.name for t in resolve_tasks(generated, split="test")] == ["DisastIR-Test-QA-Bio",
                                                                                "DisastIR-Test-FC-Geo"]

    sets = collect_result_sets(tmp_path / "out")
    assert [s.split for s in sets] == [Split.full, Split.test, Split.devlite] and len({s.folder for s in sets}) == 1
    assert len(sets[1].scores) == 48 and sets[2].has_per_query("DisastIR-QA-Bio")
    assert sets[2].per_query("DisastIR-QA-Bio").task_name == "DisastIR-DevLite-QA-Bio"
    shutil.rmtree(tmp_path / "cache")


@needs_split_tasks
def test_run_command_split_flag(split_sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``disastir-mteb run --split devlite -t DisastIR-QA-Bio`` runs DevLite's QA-Bio and prints its own grid."""
    out = tmp_path / "results"  # the model-free encoder: the split is what is under test, not the vectors
    assert cli.main(["run", "-m", HASHING_ENCODER, "--split", "devlite", "-t", "DisastIR-QA-Bio", "--output-folder",
                     str(out), "--no-cache", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "\nDisastIR-DevLite NDCG@10 x100 " in printed and "47 of 48 tasks missing" in printed
    [result] = collect_result_sets(out)
    assert result.split is Split.devlite and list(result.file_scores) == ["DisastIR-DevLite-QA-Bio"]
    assert cli.main(["run", "-m", HASHING_ENCODER, "--split", "test", "-t", "DisastIR-DevLite-QA-Bio",
                     "--output-folder", str(out), "--no-cache", "--quiet"]) == 2
    says(capsys.readouterr().err, "disastir-mteb run:", "'DisastIR-DevLite-QA-Bio'", "'devlite'", "split='test'")


def test_run_devlite_option_names_a_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``run --devlite DIR``: a folder that is not there is one sentence, before any model loads."""
    monkeypatch.delenv("DISASTIR_DEVLITE_DIR", raising=False)
    assert cli.main(["run", "-m", "bundled", "--split", "test", "--devlite", str(tmp_path / "nope"),
                     "--output-folder", str(tmp_path / "out"), "--quiet"]) == 2
    says(capsys.readouterr().err, "disastir-mteb run:", f"--devlite {tmp_path / 'nope'}", "no such folder")


def test_one_folder_with_an_unpaired_test_run_beside_full_runs_compares_what_is_comparable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "No model has runs with the same settings on DisastIR and on DisastIR-Test", exit 2."""
    ann = {"disastir_search": "ann-hnsw-ip-f32-M16-efC128-ef64-k10-t16"}
    for folder in ("full", "one"):
        _run(tmp_path / folder, "org/alpha", {Split.full: _flat(0.5)})
        _run(tmp_path / folder, "org/alpha", {Split.full: _flat(0.45)}, experiment=ann)
    assert cli.main(["compare", str(tmp_path / "full")]) == 0
    full_only = capsys.readouterr().out.replace(str(tmp_path / "full"), str(tmp_path / "one"))
    _run(tmp_path / "one", "org/alpha", {Split.test: _flat(0.4)}, experiment={"instructions": "disastir"})

    assert cli.main(["compare", str(tmp_path / "one")]) == 0
    captured = capsys.readouterr()
    assert captured.out == full_only  # the full set's exact against its ANN run, as without the Test run
    assert captured.err.startswith("Set aside: org/alpha") and "DisastIR-Test" in captured.err

"""DisastIR-Test and DisastIR-DevLite: both DevLite layouts, Test derived from the full set, mteb names and results.

Every test reads the session's small sample (8 queries per task) and DevLite folders split from it (2 queries per
task), and the full tasks are pinned to what they were before the splits existed (``pinned_full_tasks.json``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import mteb
import pytest
from sentences import says

import disastir_mteb
from disastir_mteb import cli
from disastir_mteb.data import devlite as split_data
from disastir_mteb.data.devlite_layout import find_split_files, resolve_devlite_dir
from disastir_mteb.sample.devlite import devlite_queries_per_task, devlite_sample_dir, write_devlite_sample
from disastir_mteb.tasks import retrieval as tasks
from disastir_mteb.vocabulary import metadata
from disastir_mteb.vocabulary.taxonomy import SPLIT_TASK_NAMES, TASK_NAMES, Split, benchmark_name, get_spec

LAYOUTS = ("eval-code", "card")
PIN = Path(__file__).with_name("pinned_full_tasks.json")


@pytest.fixture(scope="session")
def devlite_dirs(sample_data: Path, cache_dir: Path) -> dict[str, Path]:
    """The DevLite folders split from the session sample, one per layout."""
    return {layout: devlite_sample_dir("small", layout=layout, cache_dir=cache_dir) for layout in LAYOUTS}


@pytest.fixture
def use_split(monkeypatch: pytest.MonkeyPatch, sample_data: Path) -> Callable[[Path], None]:
    """Point DISASTIR_DATA_DIR at the sample and DISASTIR_DEVLITE_DIR at a DevLite folder, caches reset."""

    def use(devlite: Path) -> None:
        monkeypatch.setenv("DISASTIR_DATA_DIR", str(sample_data))
        monkeypatch.setenv("DISASTIR_DEVLITE_DIR", str(devlite))
        tasks.forget_data_files()
        split_data.cached_split_files.cache_clear()

    yield use
    tasks.forget_data_files()
    split_data.cached_split_files.cache_clear()


def _load(name: str) -> tuple[object, dict]:
    task = mteb.get_task(name)
    task.load_data()
    return task, task.dataset["default"]["test"]


def _marker(folder: Path) -> dict:
    return json.loads((folder / "DISASTIR_SAMPLE.json").read_text(encoding="utf-8"))["devlite"]


# ----------------------------------------------------------------------------- loading


@pytest.mark.parametrize("layout", LAYOUTS)
def test_both_layouts_load_all_48_devlite_tasks(layout: str, devlite_dirs: dict[str, Path], use_split: Callable,
                                                 sample_data: Path) -> None:
    use_split(devlite_dirs[layout])
    pooled = _marker(devlite_dirs[layout])["pooled_passages"]
    full_corpus = {json.loads(line)["corpus_id"] for line in (sample_data / "corpus.jsonl").open(encoding="utf-8")}
    for name in SPLIT_TASK_NAMES[Split.devlite]:
        task, split = _load(name)
        full_ids = set(_load(get_spec(name).base.name)[1]["queries"]["id"])
        assert len(split["queries"]) == 2 and set(split["queries"]["id"]) <= full_ids  # the full set's query ids
        assert len(split["corpus"]) == pooled and set(split["corpus"]["id"]) <= full_corpus  # the main corpus ids
        assert sum(len(judged) for judged in split["relevant_docs"].values()) == 2 * 14
        assert task.load_report.clean and task.load_report.outside_corpus_rows == 0, task.load_report.summary()
        # eval-code: qrels_with_added holds the DevLite rows only; card: the main qrels, the Test rows skipped
        assert task.load_report.other_split_rows == (0 if layout == "eval-code" else 6 * 14)
    assert task.data_source.startswith(f"local folder {devlite_dirs[layout].name} (synthetic sample, scale small")
    assert ("with the judgements of" in task.data_source) is (layout == "card")


def test_both_layouts_give_the_same_devlite_data(devlite_dirs: dict[str, Path], use_split: Callable) -> None:
    seen = []
    for layout in LAYOUTS:
        use_split(devlite_dirs[layout])
        _, split = _load("DisastIR-DevLite-NLI-Geo")
        seen.append((split["queries"]["id"], split["corpus"]["id"], split["relevant_docs"]))
    assert seen[0] == seen[1]


def test_test_is_the_full_set_minus_devlite(devlite_dirs: dict[str, Path], use_split: Callable) -> None:
    use_split(devlite_dirs["eval-code"])
    for spec in [get_spec(name) for name in SPLIT_TASK_NAMES[Split.test]]:
        _, full = _load(spec.base.name)
        test_task, test = _load(spec.name)
        _, devlite = _load(spec.name.replace("-Test-", "-DevLite-"))
        test_ids, devlite_ids = set(test["queries"]["id"]), set(devlite["queries"]["id"])
        assert not test_ids & devlite_ids and test_ids | devlite_ids == set(full["queries"]["id"])
        assert (len(test_ids), len(devlite_ids)) == (6, 2)
        assert test["relevant_docs"] == {q: full["relevant_docs"][q] for q in test_ids}
        assert test["corpus"] is full["corpus"]  # the full corpus, read once
        assert test_task.load_report.other_split_rows == 2 * 14 and test_task.load_report.clean
    devlite_name = devlite_dirs["eval-code"].name
    assert test_task.data_source.endswith(f"without the DevLite queries of local folder {devlite_name} "
                                          "(synthetic sample, scale small, seed 0)")


def test_test_query_files_are_a_cross_check(devlite_dirs: dict[str, Path], use_split: Callable, tmp_path: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "devlite"
    shutil.copytree(devlite_dirs["eval-code"], folder)
    path = folder / "test_query_test" / "QA_Biological.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps([*rows[1:], {"user_query": "Not a query of the main dataset"}]), encoding="utf-8")
    use_split(folder)
    with caplog.at_level(logging.WARNING, logger="mteb.disastir"):
        _, split = _load("DisastIR-Test-QA-Bio")
    assert len(split["queries"]) == 6  # derived anyway
    says(next(r.getMessage() for r in caplog.records if "QA_Biological.json" in r.getMessage()), "Test queries (6)",
         "QA_Biological.json (6)", "1 only derived", "1 only in the file")


def test_devlite_ids_and_judgements_outside_the_pool(devlite_dirs: dict[str, Path], use_split: Callable,
                                                     tmp_path: Path) -> None:
    """Card layout (main qrels): a judged passage left out of the pool is dropped and counted; new texts get ids."""
    folder = tmp_path / "devlite"
    shutil.copytree(devlite_dirs["card"], folder)
    use_split(devlite_dirs["card"])
    _, before = _load("DisastIR-DevLite-FC-Chem")
    dropped = next(iter(before["relevant_docs"][before["queries"]["id"][0]]))
    text = before["corpus"]["text"][before["corpus"]["id"].index(dropped)]
    path = folder / "DisastIR_devlite_passage.json"
    passages = [p for p in json.loads(path.read_text(encoding="utf-8")) if p["contents"] != text]
    path.write_text(json.dumps([*passages, {"contents": "A passage the main corpus lacks."}]), encoding="utf-8")
    queries = folder / "DisastIR_devlite_query.json"
    rows = json.loads(queries.read_text(encoding="utf-8"))
    queries.write_text(json.dumps([*rows, {"task": "FactCheck_Chemical", "query_id": "x1", "user_query": "New?"}]),
                       encoding="utf-8")
    use_split(folder)
    task, after = _load("DisastIR-DevLite-FC-Chem")
    assert task.load_report.outside_corpus_rows == sum(dropped in judged for judged in before["relevant_docs"].values())
    assert "judgement(s) outside the pooled corpus dropped" in task.load_report.summary()
    new = hashlib.blake2b(b"A passage the main corpus lacks.", digest_size=8).hexdigest()
    assert after["corpus"]["id"][-1] == f"devlite-p-{new}"
    assert task.load_report.queries == 3 and task.load_report.queries_without_judgements == 1  # 'devlite-x1': no qrels


# ----------------------------------------------------------------------------- errors


def test_misnamed_file_and_missing_task_fail_in_one_sentence(devlite_dirs: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "devlite"
    shutil.copytree(devlite_dirs["eval-code"], folder)
    (folder / "test_query_eva" / "QA_Biological.json").rename(folder / "test_query_eva" / "QA_Biologic.json")
    (folder / "qrels_with_added" / "NLI_Societal_qrels.json").unlink()
    (folder / "notes.txt").write_text("stray")
    with pytest.raises(ValueError) as caught:
        find_split_files(folder)
    message = str(caught.value)
    says(message, f"DisastIR-DevLite folder {folder}:", "test_query_eva/QA_Biologic.json",
         "(DisastIR-DevLite-QA-Bio)", "no DevLite queries", "(DisastIR-DevLite-NLI-Soc)", "qrels_with_added/",
         "eval-code layout")
    assert message.endswith(".") and ". " not in message and "\n" not in message


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_blank_devlite_query_is_one_sentence_naming_the_file_and_row(layout: str, devlite_dirs: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    """As in the main query files: a query without words would be scored like any other."""
    folder = tmp_path / "devlite"
    shutil.copytree(devlite_dirs[layout], folder)
    path = folder / ("test_query_eva/QA_Biological.json" if layout == "eval-code" else "DisastIR_devlite_query.json")
    rows = json.loads(path.read_text(encoding="utf-8"))
    rows[1]["user_query"] = "   "
    path.write_text(json.dumps(rows), encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        find_split_files(folder)
    says(str(caught.value), f"{path}:", "row 1", "blank query text", "('   ')", "write its text", "delete the row")


def test_card_rows_that_name_no_task_are_named(devlite_dirs: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "devlite"
    shutil.copytree(devlite_dirs["card"], folder)
    path = folder / "DisastIR_devlite_query.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    rows[0]["intent"] = rows[1]["event"] = "Retrieval"  # both DevLite queries of QA-Bio
    path.write_text(json.dumps(rows), encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        find_split_files(folder)
    says(str(refused.value), "2 row(s)", "DisastIR_devlite_query.json", "(row 0, row 1)", "naming no task",
         "1 task(s)", "(DisastIR-DevLite-QA-Bio)", "expected")
    rows[0]["intent"] = rows[1]["event"] = None
    rows[0]["task"], rows[1]["intent"] = "DisastIR-QA-Bio", "QA_Biological"  # one field naming the whole task
    path.write_text(json.dumps(rows), encoding="utf-8")
    assert len(find_split_files(folder).devlite_queries[get_spec("DisastIR-QA-Bio")]) == 2


def test_other_layout_spellings_and_strays(devlite_dirs: dict[str, Path], tmp_path: Path,
                                           caplog: pytest.LogCaptureFixture) -> None:
    """Alias file names, JSON lines, the full corpus and a README are placed; a stray non-JSON file only warns."""
    folder = tmp_path / "devlite"
    shutil.copytree(devlite_dirs["eval-code"], folder)
    eva = folder / "test_query_eva"
    (eva / "FactCheck_Biological.json").rename(eva / "fc_bio.json")
    rows = json.loads((eva / "QA_Biological.json").read_text(encoding="utf-8"))
    (eva / "QA_Biological.json").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    (folder / "ordered_corpus_full.json").write_text("[]")
    (folder / "README.md").write_text("card")
    (folder / "notes.txt").write_text("stray")
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.data.devlite_layout"):
        files = find_split_files(folder)
    assert files.layout == "eval-code" and len(files.devlite_queries) == len(files.qrels) == 48
    assert files.full_corpus == folder / "ordered_corpus_full.json"
    assert "notes.txt" in caplog.text and "README" not in caplog.text


def test_devlite_dir_env_and_hub_snapshot(devlite_dirs: dict[str, Path], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setenv("DISASTIR_DEVLITE_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError) as missing:
        resolve_devlite_dir(metadata.DEVLITE_REPO, metadata.DEVLITE_REVISION)
    says(str(missing.value), "DISASTIR_DEVLITE_DIR", "--devlite DIR")
    monkeypatch.delenv("DISASTIR_DEVLITE_DIR")
    revision = "0" * 40
    repo = tmp_path / "datasets--DMIR01--DisastIR-DevLite"
    shutil.copytree(devlite_dirs["card"], repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / metadata.DEVLITE_REVISION).write_text(revision)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert resolve_devlite_dir("DMIR01/DisastIR-DevLite", metadata.DEVLITE_REVISION) == repo / "snapshots" / revision
    with pytest.raises(FileNotFoundError) as missing:
        resolve_devlite_dir("DMIR01/DisastIR-DevLite", "1234567")
    says(str(missing.value), "DMIR01/DisastIR-DevLite@1234567", "Hugging Face cache", "DISASTIR_DEVLITE_DIR",
         "--devlite DIR", "disastir-mteb sample --out DIR --devlite eval-code")


# ----------------------------------------------------------------------------- mteb


def test_mteb_resolves_the_split_tasks_and_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    assert [t.metadata.name for t in mteb.get_tasks(["DisastIR-Test-QA-Bio", "DisastIR-DevLite-STS-Tech"])] == [
        "DisastIR-Test-QA-Bio", "DisastIR-DevLite-STS-Tech"]
    for split in (Split.test, Split.devlite):
        bench = mteb.get_benchmark(benchmark_name(split))
        assert [t.metadata.name for t in bench.tasks] == list(SPLIT_TASK_NAMES[split])
        groupings = {g.name: g for g in bench.aggregations if hasattr(g, "groups")}
        assert [g.label for g in groupings["Intent"].groups] == ["QA", "QAdoc", "Twitter", "FC", "NLI", "STS"]
        assert len(groupings["Category"].groups) == 8
    test, devlite = mteb.get_task("DisastIR-Test-QA-Bio").metadata, mteb.get_task("DisastIR-DevLite-QA-Bio").metadata
    assert test.dataset == {"path": "DMIR01/DisastIR", "revision": metadata.DATASET_REVISION}
    assert devlite.dataset == {"path": "DMIR01/DisastIR-DevLite", "revision": metadata.DEVLITE_REVISION}
    assert test.adapted_from == devlite.adapted_from == ["DisastIR-QA-Bio"]
    assert test.description.startswith("DisastIR-Test ") and "DisastIR-Test query set" in test.description
    assert "pooled corpus of 9,316 passages" in devlite.description
    assert test.main_score == devlite.main_score == "ndcg_at_10" and test.prompt == devlite.prompt
    for declared in (test, devlite):
        declared._validate_metadata()
        assert declared.is_filled()
    assert [t.metadata.name for t in mteb.get_benchmark("DisastIR").tasks] == list(TASK_NAMES)
    assert [t.metadata.name for t in disastir_mteb.get_tasks()] == list(TASK_NAMES)
    assert [t.metadata.name for t in tasks.get_tasks(["QA"], ["Bio"], split="devlite")] == ["DisastIR-DevLite-QA-Bio"]
    assert cli.main(["tasks"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(TASK_NAMES)


def test_full_tasks_are_unchanged() -> None:
    """Class, k_values and the whole TaskMetadata of each full task equal the values committed before the splits."""
    pin = json.loads(PIN.read_text(encoding="utf-8"))

    def entry(cls: type) -> dict:
        return {"class": f"{cls.__module__}.{cls.__qualname__}", "k_values": list(cls.k_values),
                "metadata": cls.metadata.model_dump(mode="json")}

    assert entry(tasks.TASK_CLASSES["DisastIR-QA-Bio"]) == pin["example"]["DisastIR-QA-Bio"]
    digests = {name: hashlib.sha256(json.dumps(entry(tasks.TASK_CLASSES[name]), sort_keys=True, ensure_ascii=False)
                                    .encode("utf-8")).hexdigest() for name in TASK_NAMES}
    assert digests == pin["sha256"]
    assert list(tasks.TASK_CLASSES) == list(TASK_NAMES)
    for name, names in pin["benchmarks"].items():
        assert [t.metadata.name for t in mteb.get_benchmark(name).tasks] == names


def test_mteb_evaluate_writes_split_results(devlite_dirs: dict[str, Path], use_split: Callable,
                                            tmp_path: Path) -> None:
    from disastir_mteb.models.hashing_encoder import HashingEncoder

    use_split(devlite_dirs["eval-code"])
    names = ["DisastIR-DevLite-QA-Bio", "DisastIR-Test-QA-Bio"]
    mteb.evaluate(HashingEncoder(), mteb.get_tasks(names), cache=mteb.ResultCache(tmp_path), show_progress_bar=False,
                  co2_tracker=False)
    for name in names:
        (path,) = tmp_path.rglob(f"{name}.json")
        result = json.loads(path.read_text(encoding="utf-8"))
        scores = result["scores"]["test"][0]
        assert result["task_name"] == name and scores["main_score"] == scores["ndcg_at_10"]
        assert scores["disastir_gain"] == "exponential" and "synthetic sample" in scores["disastir_data"]
        assert scores["ndcg_at_10_exponential_gain"] == pytest.approx(scores["ndcg_at_10"], abs=1e-5)
    assert sorted(p.name for p in path.parent.glob("DisastIR-*.json")) == [f"{n}.json" for n in sorted(names)]


# ----------------------------------------------------------------------------- the sample


def test_devlite_sample_is_deterministic_and_cli_writes_it(sample_data: Path, devlite_dirs: dict[str, Path],
                                                           tmp_path: Path) -> None:
    again = write_devlite_sample(sample_data, tmp_path / "again", layout="card", seed=0)
    for path in devlite_dirs["card"].rglob("*"):
        if path.is_file():
            assert (again / path.relative_to(devlite_dirs["card"])).read_bytes() == path.read_bytes(), path.name
    other = write_devlite_sample(sample_data, tmp_path / "other", layout="card", seed=1)
    assert (other / "DisastIR_devlite_query.json").read_bytes() != (again / "DisastIR_devlite_query.json").read_bytes()
    with pytest.raises(ValueError) as refused:
        write_devlite_sample(sample_data, tmp_path / "bad", layout="beir")
    says(str(refused.value), "'beir'", "'card'", "'eval-code'")
    assert cli.main(["sample", "--out", str(tmp_path / "s"), "--devlite", "eval-code", "--quiet"]) == 0
    assert (tmp_path / "s" / "corpus.jsonl").is_file()
    assert len(find_split_files(tmp_path / "s-devlite").devlite_queries) == 48
    assert [devlite_queries_per_task(n) for n in (200, 8, 2)] == [10, 2, 1]  # the paper's 10 of 200; Test keeps one


def test_export_stays_full_only(tmp_path: Path) -> None:
    from disastir_mteb.exports import export_beir

    with pytest.raises(ValueError) as refused:
        export_beir(tmp_path / "out", ["DisastIR-Test-QA-Bio"])
    says(str(refused.value), "DisastIR-Test-QA-Bio", "48 full DisastIR tasks", "DisastIR-QA-Bio")

"""BEIR and mteb-native exports, checked against the mteb tasks on the real small sample data."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores
from sentences import says

from authors_metric import authors_ndcg_at_10
from disastir_mteb.data.layout import find_task_files
from disastir_mteb.exports import export_beir, export_mteb, mteb_subset
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.tasks.retrieval import TASK_CLASSES
from disastir_mteb.vocabulary.taxonomy import get_spec

TASKS = ["DisastIR-QA-Bio", "DisastIR-FC-Geo", "DisastIR-STS-Tech"]


@pytest.fixture
def data(sample_data: Path, use_data) -> Path:
    use_data(sample_data)
    return sample_data


def _split(name: str, gain: str | None = None) -> dict:
    task = TASK_CLASSES[name](gain=gain)
    task.load_data()
    return task.dataset["default"]["test"]


def _run(corpus: dict[str, str], queries: dict[str, str], top_k: int = 100) -> dict[str, dict[str, float]]:
    """A deterministic run: hashing embeddings, dot product, top 100, similarities strictly decreasing."""
    encoder = HashingEncoder(dim=256)
    doc_ids, query_ids = list(corpus), list(queries)
    similarities = encoder.embed([queries[q] for q in query_ids]) @ encoder.embed([corpus[d] for d in doc_ids]).T
    run = {}
    for row, query_id in enumerate(query_ids):
        order = sorted(range(len(doc_ids)), key=lambda i: (-similarities[row, i], doc_ids[i]))[:top_k]
        run[query_id] = {doc_ids[i]: float(top_k - rank) for rank, i in enumerate(order)}
    return run


def _ndcg10(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> float:
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    return float(np.mean([per_query[q]["ndcg_cut_10"] for q in qrels]))


def test_beir_export_loads_and_reproduces_the_task_scores(data: Path, tmp_path: Path) -> None:
    beir_loader = pytest.importorskip("beir.datasets.data_loader")
    messages: list[str] = []
    folders = export_beir(tmp_path / "beir", TASKS, progress=messages.append)
    assert folders == [tmp_path / "beir" / name for name in TASKS]
    assert len(messages) == len(TASKS) and "README.md" in os.listdir(tmp_path / "beir")
    files = find_task_files(data)
    for name, folder in zip(TASKS, folders, strict=True):
        corpus, queries, qrels = beir_loader.GenericDataLoader(data_folder=str(folder)).load(split="test")
        split = _split(name)
        assert len(corpus) == len(split["corpus"]) and len(queries) == len(split["queries"])
        assert queries == dict(zip(split["queries"]["id"], split["queries"]["text"], strict=True))
        assert {d: c["text"] for d, c in corpus.items()} == dict(
            zip(split["corpus"]["id"], split["corpus"]["text"], strict=True))
        assert qrels == split["relevant_docs"]  # the task's own gains, exponential by default
        assert max(max(j.values()) for j in qrels.values()) in ((31, 15) if "STS" in name else (7,))  # 2^g - 1

        run = _run({d: c["text"] for d, c in corpus.items()}, queries)
        exported = _ndcg10(qrels, run)
        mteb_scores = calculate_retrieval_scores(run, split["relevant_docs"], k_values=[10])
        mteb_unrounded = float(np.mean([mteb_scores.all_scores[q]["ndcg_cut_10"] for q in split["relevant_docs"]]))
        assert exported == pytest.approx(mteb_unrounded, abs=1e-6)
        assert exported == pytest.approx(mteb_scores.ndcg["NDCG@10"], abs=1e-5)  # mteb rounds to 5 places
        # and the exported exponential gains reproduce the authors' text-keyed NDCG@10
        query_file, qrels_file = files.for_task(get_spec(name))
        ranked = {q: sorted(docs, key=docs.get, reverse=True) for q, docs in run.items()}
        assert exported == pytest.approx(authors_ndcg_at_10(query_file, qrels_file, files.corpus, ranked), abs=1e-9)
        assert 0.0 < exported < 1.0


def test_beir_linear_gain_writes_the_grades(data: Path, tmp_path: Path) -> None:
    beir_loader = pytest.importorskip("beir.datasets.data_loader")
    (folder,) = export_beir(tmp_path / "linear", ["DisastIR-STS-Tech"], gain="linear")
    _, _, qrels = beir_loader.GenericDataLoader(data_folder=str(folder)).load(split="test")
    assert qrels == _split("DisastIR-STS-Tech", gain="linear")["relevant_docs"]
    assert max(max(j.values()) for j in qrels.values()) in (4, 5)  # STS grades 0..5 (the small sample tops at 4)
    assert "linear gain" in (tmp_path / "linear" / "README.md").read_text()
    with pytest.raises(ValueError, match=r"Unknown gain 'log'"):
        export_beir(tmp_path / "bad", ["DisastIR-STS-Tech"], gain="log")


def test_corpus_is_written_once_and_shared(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "beir"
    export_beir(out, TASKS[:2])
    for name in TASKS[:2]:  # same inode (hard link) or a symlink to it: never a copy per task
        assert (out / name / "corpus.jsonl").samefile(out / "corpus.jsonl")
    assert sum(1 for line in (out / "corpus.jsonl").open()) == len(_split(TASKS[0])["corpus"])


def test_corpus_falls_back_to_symlink_then_copy(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object) -> None:
        raise OSError("refused by this filesystem")

    monkeypatch.setattr(os, "link", refuse)
    (folder,) = export_beir(tmp_path / "sym", ["DisastIR-QA-Bio"])
    assert (folder / "corpus.jsonl").is_symlink()
    assert (folder / "corpus.jsonl").read_bytes() == (tmp_path / "sym" / "corpus.jsonl").read_bytes()
    monkeypatch.setattr(os, "symlink", refuse)
    (folder,) = export_beir(tmp_path / "copy", ["DisastIR-QA-Bio"])
    assert not (folder / "corpus.jsonl").is_symlink()
    assert (folder / "corpus.jsonl").read_bytes() == (tmp_path / "copy" / "corpus.jsonl").read_bytes()


def test_rerun_refuses_without_overwrite(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "beir"
    export_beir(out, ["DisastIR-QA-Bio"])
    with pytest.raises(FileExistsError, match=r"not empty; pass overwrite=True \(--overwrite\)"):
        export_beir(out, ["DisastIR-FC-Geo"])
    assert sorted(p.name for p in out.iterdir()) == ["DisastIR-QA-Bio", "README.md", "corpus.jsonl"]
    export_beir(out, ["DisastIR-FC-Geo"], overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["DisastIR-FC-Geo", "README.md", "corpus.jsonl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["beir"]  # no temporary folders left behind

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match=r"not a DisastIR export"):
        export_beir(foreign, ["DisastIR-QA-Bio"], overwrite=True)
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_interrupted_export_leaves_nothing(data: Path, tmp_path: Path) -> None:
    def interrupt(_message: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_beir(tmp_path / "beir", TASKS, progress=interrupt)
    assert list(tmp_path.iterdir()) == []


def test_unknown_task_is_one_clear_line(data: Path, tmp_path: Path) -> None:
    with pytest.raises(KeyError, match=r"Unknown DisastIR task 'DisastIR-QA-Bi'\. Did you mean DisastIR-QA-Bio") as err:
        export_beir(tmp_path / "beir", ["DisastIR-QA-Bio", "DisastIR-QA-Bi"])
    assert "\n" not in str(err.value)  # taxonomy.get_spec's message: one line, the bad name, close matches
    with pytest.raises(KeyError, match=r"'QA-Bio'"):
        export_mteb(tmp_path / "mteb", "QA-Bio")
    with pytest.raises(ValueError, match=r"No DisastIR tasks to export"):
        export_beir(tmp_path / "beir", [])
    assert list(tmp_path.iterdir()) == []


def test_mteb_export_loads_with_datasets_and_mteb(data: Path, tmp_path: Path) -> None:
    import datasets
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    names = TASKS[1:]
    out = export_mteb(tmp_path / "mteb", names)
    assert out == tmp_path / "mteb"
    configs = datasets.get_dataset_config_names(str(out))
    assert set(configs) == {"corpus"} | {f"{mteb_subset(n)}-{part}" for n in names
                                          for part in ("corpus", "queries", "qrels")}
    for name in names:
        subset, split = mteb_subset(name), _split(name, gain="exponential")
        grades = _split(name, gain="linear")["relevant_docs"]
        corpus = datasets.load_dataset(str(out), f"{subset}-corpus", split="test")
        queries = datasets.load_dataset(str(out), f"{subset}-queries", split="test")
        qrels = datasets.load_dataset(str(out), f"{subset}-qrels", split="test")
        assert corpus.column_names == ["id", "text"] and len(corpus) == len(split["corpus"])
        assert queries.column_names == ["id", "text"] and queries["id"] == split["queries"]["id"]
        assert qrels.column_names == ["query-id", "corpus-id", "score", "grade"]
        assert qrels.features["score"].dtype == "int32" and all(isinstance(s, int) for s in qrels["score"])
        assert len(qrels) == sum(len(j) for j in split["relevant_docs"].values())
        assert all(s == 2**g - 1 for s, g in zip(qrels["score"], qrels["grade"], strict=True))
        assert all(grades[q][d] == g for q, d, g in zip(qrels["query-id"], qrels["corpus-id"], qrels["grade"],
                                                        strict=True))

        # a stock mteb task pointed at the folder: the upstream shape, no custom loading code
        metadata = TASK_CLASSES[name].metadata.model_copy(update={
            "dataset": {"path": str(out), "revision": "main"}, "eval_langs": {subset: ["eng-Latn"]}})
        upstream = type("Upstream", (AbsTaskRetrieval,), {"metadata": metadata})()
        upstream.load_data()
        loaded = upstream.dataset[subset]["test"]
        assert loaded["relevant_docs"] == split["relevant_docs"]
        assert len(loaded["corpus"]) == len(split["corpus"]) and loaded["queries"]["id"] == split["queries"]["id"]


def test_export_command_line(sample_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb import cli

    out = tmp_path / "beir"
    args = ["export", "--format", "beir", "--out", str(out), "--data", str(sample_data), "-t", "DisastIR-QA-Bio",
            "--quiet"]
    assert cli.main(args) == 0
    assert "Wrote 1 BEIR task folder(s)" in capsys.readouterr().out
    assert (out / "DisastIR-QA-Bio" / "qrels" / "test.tsv").is_file()
    assert cli.main(args) == 2
    assert "pass overwrite=True (--overwrite)" in capsys.readouterr().err
    assert cli.main(["export", "--format", "mteb", "--out", str(tmp_path / "hf"), "--gain", "linear"]) == 2
    assert "--gain applies to --format beir" in capsys.readouterr().err


def test_export_without_data_offline_names_its_own_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """No --data, no DISASTIR_DATA_DIR, no Hub: the sentence names export's --data, not run's."""
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    from disastir_mteb import cli

    def offline(**kwargs: object) -> str:
        raise LocalEntryNotFoundError("offline")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    monkeypatch.delenv("DISASTIR_DATA_DIR", raising=False)
    assert cli.main(["export", "--format", "beir", "--out", str(tmp_path / "beir"), "-t", "DisastIR-QA-Bio"]) == 2
    error = says(capsys.readouterr().err, "disastir-mteb export:", "DISASTIR_DATA_DIR", "--data DIR",
                 "disastir-mteb sample --out DIR")
    assert "disastir-mteb run" not in error


def test_a_command_called_from_python_leaves_the_environment_as_it_found_it(sample_data: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The data folder a command hands mteb's loaders must not outlive it: a next call would read that data."""
    from disastir_mteb.cli import main

    monkeypatch.delenv("DISASTIR_DATA_DIR", raising=False)
    before = dict(os.environ)
    assert main(["export", "--format", "mteb", "--data", str(sample_data), "--out", str(tmp_path / "out"),
                 "--tasks", "DisastIR-QA-Bio", "--quiet"]) == 0
    assert (tmp_path / "out").is_dir()
    assert dict(os.environ) == before


def test_export_says_progress_on_stderr_and_its_result_on_stdout_in_order(sample_data: Path, tmp_path: Path) -> None:
    """A user's `export ... > log 2>&1`: the task lines, then the result line; each on its own stream."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "disastir_mteb.cli", "export", "--format", "beir", "--data", str(sample_data),
               "-t", "DisastIR-QA-Bio", "DisastIR-FC-Geo"]
    merged = subprocess.run([*command, "--out", str(tmp_path / "one")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=300, check=True).stdout.splitlines()
    assert [line.split(":")[0] for line in merged] == ["DisastIR-QA-Bio", "DisastIR-FC-Geo", merged[-1].split(":")[0]]
    assert merged[-1].startswith("Wrote 2 BEIR task folder(s) to ")
    apart = subprocess.run([*command, "--out", str(tmp_path / "two")], capture_output=True, text=True, timeout=300,
                           check=True)
    assert len(apart.stdout.splitlines()) == 1 and apart.stdout.startswith("Wrote 2 BEIR task folder(s) to ")
    assert [line.split(":")[0] for line in apart.stderr.splitlines()] == ["DisastIR-QA-Bio", "DisastIR-FC-Geo"]

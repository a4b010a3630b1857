"""The same number only for the same inputs: a changed model, setting or data file is never served an old number.

Each case is an ordinary edit a researcher makes between two runs (a model's token limit or query prompt, a
grade fixed in the data, a corrected passage, a model changed in place and run with ``--no-cache``); each ends
in the number a fresh run gives. Real parts: a real sentence-transformers model (conftest's ``tiny_model``, shaped as
MiniLM; what is checked is which inputs a number comes from, not MiniLM's numbers) copied into a folder and edited
there, a generated 400-passage sample copied and edited (400 short ones for the real model), the real store,
mteb and the runner; the command line where the case is a command line's.
"""

from __future__ import annotations

import ast
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from sentences import says

from disastir_mteb import cli
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.runner.run import build_search, evaluate
from disastir_mteb.vocabulary.provenance import MODEL_KEY, PROVENANCE_KEY, SETTINGS_KEY
from disastir_mteb.vocabulary.run_settings import RunSettings

TASK = "DisastIR-QA-Bio"
N_PASSAGES = 400
SMALL_PASSAGES = 400
SMALL_QUERIES = 4  # per task
PACKAGE = Path(__file__).resolve().parents[1] / "disastir_mteb"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from disastir_mteb.sample.generator import SampleScale, write_sample

    scale = SampleScale("tiny", n_passages=N_PASSAGES, queries_per_task=4, judged_per_query=6, passage_words=40)
    return write_sample(tmp_path_factory.mktemp("tiny") / "data", scale=scale)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A smaller sample for the cases that encode with the real model three times each (short passages, so that a
    token limit of 8 still cuts them)."""
    from disastir_mteb.sample.generator import SampleScale, write_sample

    scale = SampleScale("small-mini", n_passages=SMALL_PASSAGES, queries_per_task=SMALL_QUERIES, judged_per_query=4,
                        passage_words=20)
    return write_sample(tmp_path_factory.mktemp("small") / "data", scale=scale)


@pytest.fixture
def mini(tiny_model: Path, tmp_path: Path) -> Path:
    """A copy of a real model folder in a folder of its own, to edit as a user edits a model folder."""
    return Path(shutil.copytree(tiny_model, tmp_path / "mini"))


def _edit_json(path: Path, **changes: Any) -> None:
    content = json.loads(path.read_text(encoding="utf-8"))
    content.update(changes)
    path.write_text(json.dumps(content), encoding="utf-8")


def _run(model: Any, data: Path, out: Path, cache: Path | bool, **settings: Any) -> tuple[float, Any]:
    """One task through the runner; its NDCG@10 and the search model (its counters)."""
    searcher = build_search(model, RunSettings.from_options(progress=False, cache_dir=cache, **settings))
    result = evaluate(searcher, [TASK], output_folder=out, show_progress=False, data=data)
    return result.task_results[0].get_score(), searcher


def _truth(model: Any, data: Path, tmp_path: Path) -> float:
    """What a fresh run gives: no embedding cache, an empty output folder."""
    return _run(model, data, tmp_path / "truth", False)[0]


def test_a_changed_token_limit_is_encoded_and_scored_again(mini: Path, small: Path, tmp_path: Path) -> None:
    cache, out = tmp_path / "cache", tmp_path / "out"
    before, _ = _run(str(mini), small, out, cache)
    _edit_json(mini / "sentence_bert_config.json", max_seq_length=8)  # the probe's long text sees the cut
    after, searcher = _run(str(mini), small, tmp_path / "B", cache)
    assert searcher.passages_encoded == SMALL_PASSAGES and searcher.queries_encoded > 0  # nothing old served
    assert after == pytest.approx(_truth(str(mini), small, tmp_path), abs=1e-9)
    assert after != pytest.approx(before, abs=1e-6)
    again, searcher = _run(str(mini), small, out, cache)  # the first folder: the stored number is not the answer
    assert again == pytest.approx(after, abs=1e-9) and searcher.passages_encoded == 0


def test_a_query_prompt_added_encodes_queries_again_and_keeps_the_corpus(mini: Path, small: Path,
                                                                          tmp_path: Path) -> None:
    cache, out = tmp_path / "cache", tmp_path / "out"
    before, _ = _run(str(mini), small, out, cache)
    _edit_json(mini / "config_sentence_transformers.json",
               prompts={"query": "Represent this question for searching relevant passages: ", "document": ""})
    after, searcher = _run(str(mini), small, out, cache)
    assert searcher.passages_encoded == 0 and searcher.queries_encoded == SMALL_QUERIES  # only the side that changed
    assert after == pytest.approx(_truth(str(mini), small, tmp_path), abs=1e-9)
    assert after != pytest.approx(before, abs=1e-6)


def test_an_in_memory_model_changed_on_the_query_side_gets_its_own_vectors_and_folder(
        tiny_model: Path, small: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tiny_model), device="cpu")
    cache, out = tmp_path / "cache", tmp_path / "out"
    before, first = _run(st, small, out, cache)
    st.prompts["query"] = "Recipes and cooking times for a family dinner: "  # a notebook edit; passages unchanged
    after, second = _run(st, small, out, cache)
    assert second.passages_encoded == 0 and second.queries_encoded == SMALL_QUERIES
    assert second.identity.fingerprint != first.identity.fingerprint
    assert second.identity.passage_fingerprint == first.identity.passage_fingerprint
    assert second.mteb_model_meta.revision != first.mteb_model_meta.revision  # a result folder of its own
    assert after == pytest.approx(_truth(st, small, tmp_path), abs=1e-9) and after != pytest.approx(before, abs=1e-6)


@pytest.mark.parametrize("edit", ["grades zeroed", "passages corrected"])
def test_edited_data_is_scored_again_into_the_same_folder(edit: str, tiny: Path, tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    data = Path(shutil.copytree(tiny, tmp_path / "data"))
    cache, out = tmp_path / "cache", tmp_path / "out"
    before, _ = _run(HashingEncoder(), data, out, cache)
    if edit == "grades zeroed":
        qrels = data / "qrels" / "QA_Biological_qrels.json"
        rows = json.loads(qrels.read_text(encoding="utf-8"))
        qrels.write_text(json.dumps([{**row, "score": 0} for row in rows]), encoding="utf-8")
    else:  # five unjudged passages rewritten into the task's own questions: they now lead its rankings
        judged = {row["passage"] for path in (data / "qrels").iterdir()
                  for row in json.loads(path.read_text(encoding="utf-8"))}
        questions = [row["user_query"] for row in
                     json.loads((data / "query" / "QA_Biological.json").read_text(encoding="utf-8"))]
        rows = [json.loads(line) for line in (data / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
        unjudged = [row for row in rows if row["text"] not in judged][:5]
        for n, row in enumerate(unjudged):
            row["text"] = f"{questions[n % len(questions)]} (corrected)"
        (data / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.runner.run"):
        after, searcher = _run(HashingEncoder(), data, out, cache)
    assert after == pytest.approx(_truth(HashingEncoder(), data, tmp_path), abs=1e-9)
    assert after != pytest.approx(before, abs=1e-6)
    said = " ".join(record.getMessage() for record in caplog.records)
    says(caplog.records[0].getMessage(), "DisastIR-QA-Bio:", next(out.rglob("DisastIR-QA-Bio.json")),
         "other inputs than this run's", "(data files", "evaluating it again")
    if edit == "passages corrected":
        assert "corpus" in said and searcher.passages_encoded == N_PASSAGES  # the corpus's texts changed: encoded again


def test_a_model_changed_in_place_and_run_without_cache_is_scored_again(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(HashingEncoder(), tiny, out, tmp_path / "cache")
    changed = HashingEncoder(dim=64)  # same name and revision, another model
    after, _ = _run(changed, tiny, out, False)
    assert after == pytest.approx(_truth(HashingEncoder(dim=64), tiny, tmp_path), abs=1e-9)
    record = json.loads(next(out.rglob(f"{TASK}.json")).read_text(encoding="utf-8"))["scores"]["test"][0]
    assert record[MODEL_KEY] == _run(changed, tiny, tmp_path / "again", False)[1].identity.fingerprint


def test_an_unchanged_rerun_reuses_every_result_without_a_word(tiny: Path, tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    cache, out = tmp_path / "cache", tmp_path / "out"
    score, _ = _run(HashingEncoder(), tiny, out, cache)
    task_file = next(out.rglob(f"{TASK}.json"))
    written = task_file.stat().st_mtime_ns
    with caplog.at_level(logging.WARNING):
        again, searcher = _run(HashingEncoder(), tiny, out, cache)
    assert again == score and searcher.passages_encoded == searcher.queries_encoded == 0
    assert task_file.stat().st_mtime_ns == written and not caplog.records


def test_every_result_records_its_provenance_and_the_settings(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(HashingEncoder(), tiny, out, False, instructions="disastir")
    task_file = next(out.rglob(f"{TASK}.json"))
    record = json.loads(task_file.read_text(encoding="utf-8"))["scores"]["test"][0]
    per_query = json.loads(next(out.rglob(f"{TASK}_per_query.json")).read_text(encoding="utf-8"))
    settings = json.loads(record[SETTINGS_KEY])
    assert settings["instructions"] == "disastir" and settings["search"] == "exact"
    assert per_query["provenance"]["digest"] == record[PROVENANCE_KEY]
    assert per_query["provenance"]["model"]["fingerprint"] == record[MODEL_KEY]


def test_the_callers_model_is_never_changed(tiny_model: Path, small: Path, tmp_path: Path) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tiny_model), device="cpu")
    attributes = dict(st.__dict__)
    weights = {name: tensor.clone() for name, tensor in st.state_dict().items()}
    result = evaluate(st, [TASK], precision="bf16", cache_dir=False, output_folder=tmp_path / "out",
                      show_progress=False, data=small)
    assert result.task_results[0].get_score() > 0
    assert {parameter.dtype for parameter in st.parameters()} == {torch.float32}
    assert st.__dict__.keys() == attributes.keys()
    assert all(st.__dict__[name] is value for name, value in attributes.items())
    assert all(torch.equal(weights[name], tensor) for name, tensor in st.state_dict().items())
    # the cast run's files record the precision as its experiment folder names it, so readers take it as one run
    from disastir_mteb.results.result_sets import load_result_set

    [meta] = (tmp_path / "out").rglob("model_meta.json")
    assert "disastir_precision_bf16" in meta.parts
    record = json.loads(next(meta.parent.glob(f"{TASK}.json")).read_text(encoding="utf-8"))["scores"]["test"][0]
    assert json.loads(record[SETTINGS_KEY])["precision"] == "bf16"
    assert set(load_result_set(meta.parent).scores) == {TASK}


def test_the_command_line_and_evaluate_write_the_same_results(tiny: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert cli.main(["run", "-m", "disastir-mteb/hashing-encoder", "--data", str(tiny), "-t", TASK, "--quiet",
                     "--output-folder", str(tmp_path / "cli"), "--cache-dir", str(cache)]) == 0
    _run(HashingEncoder(), tiny, tmp_path / "python", cache)

    def record(folder: Path) -> dict[str, Any]:
        return json.loads(next(folder.rglob(f"{TASK}.json")).read_text(encoding="utf-8"))["scores"]["test"][0]

    assert record(tmp_path / "cli") == record(tmp_path / "python")


def _writes_the_environment(node: ast.AST) -> bool:
    """Whether ``node`` assigns, updates, pops or deletes an entry of ``os.environ`` (or calls ``putenv``)."""
    def environ(target: ast.AST) -> bool:
        return isinstance(target, ast.Attribute) and target.attr == "environ"

    if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        return any(isinstance(target, ast.Subscript) and environ(target.value) for target in targets)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method = node.func
        return ((environ(method.value) and method.attr in ("update", "pop", "setdefault", "clear", "popitem"))
                or method.attr in ("putenv", "unsetenv"))
    return False


#: The only writes left: switches of other libraries that read them when first imported (Hugging Face's offline
#: mode when the Hub cannot be reached, gradio's analytics off), at a run's edge. No DisastIR setting.
_LIBRARY_SWITCHES = {("util/hub.py", "offline_if_unreachable"), ("leaderboard/app.py", "_require_gradio")}


def test_no_module_of_the_package_writes_the_environment() -> None:
    found = []

    class Visitor(ast.NodeVisitor):
        def __init__(self, path: Path) -> None:
            self.path, self.functions = path, ["<module>"]

        def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
            self.functions.append(node.name)
            self.generic_visit(node)
            self.functions.pop()

        def generic_visit(self, node: ast.AST) -> None:
            where = (str(self.path.relative_to(PACKAGE)), self.functions[-1])
            if _writes_the_environment(node) and where not in _LIBRARY_SWITCHES:
                found.append(f"{where[0]}:{node.lineno} ({where[1]})")  # type: ignore[attr-defined]
            super().generic_visit(node)

    for path in sorted(PACKAGE.rglob("*.py")):
        Visitor(path).visit(ast.parse(path.read_text(encoding="utf-8")))
    assert not found, f"these write os.environ: {found}"

"""The exact strings that reach a model: per-intent instructions, both templates, nothing doubled."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import mteb
import numpy as np
import pytest
from mteb.mocks.mock_tasks.retrieval import MockRetrievalTask
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from sentences import says

from conftest import write_layout
from disastir_mteb.models.adapter import with_instructions
from disastir_mteb.vocabulary.instructions import INSTRUCTION_SETS, TEMPLATES, resolve_instructions
from disastir_mteb.vocabulary.taxonomy import INTENT_FILE_KEYS, INTENTS, Intent

PASSAGES = {"d1": "Evacuate low-lying areas before the storm surge.", "d2": "Boil water for one minute.",
            "d3": "Aftershocks can last for weeks."}
QUERIES = {intent: [f"{intent.value} query one?", f"{intent.value} query two?"] for intent in INTENTS}


class Spy:
    """A callable embedder that records every text it is asked to embed."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.__name__ = "spy"

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        seeds = [int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest()) for t in texts]
        rows = [np.random.default_rng(seed).normal(size=8) for seed in seeds]
        return np.stack(rows)


@pytest.fixture
def six_intents(tmp_path: Path, use_data: object) -> Path:
    tasks = {}
    for intent in INTENTS:
        queries = [{"query_id": f"q{i}", "user_query": q} for i, q in enumerate(QUERIES[intent])]
        qrels = [{"user_query": q, "passage": PASSAGES["d1"], "score": 1} for q in QUERIES[intent]]
        tasks[f"{INTENT_FILE_KEYS[intent]}_Biological"] = (queries, qrels)
    root = write_layout(tmp_path / "data", PASSAGES, tasks)
    use_data(root)
    return root


def _run(model: object, names: list[str]) -> None:
    mteb.evaluate(model, mteb.get_tasks(tasks=names), cache=None, show_progress_bar=False)


@pytest.mark.parametrize(("name", "template"), [("disastir", "instruct-query"), ("dmretriever", "colon"),
                                                ("disastir", "colon"), ("dmretriever", "instruct-query")])
def test_exact_strings_for_all_six_intents(six_intents: Path, name: str, template: str) -> None:
    spy = Spy()
    _run(with_instructions(spy, name, template), [f"DisastIR-{i.value}-Bio" for i in INTENTS])
    expected_queries = {TEMPLATES[template].format(instruction=INSTRUCTION_SETS[name][intent], query=q)
                        for intent in INTENTS for q in QUERIES[intent]}
    seen = set(spy.seen)
    assert expected_queries <= seen
    assert seen - expected_queries == set(PASSAGES.values())  # passages untouched, nothing else sent
    if template == "instruct-query":
        assert "Instruct: Given the sentence," in next(s for s in seen if "STS query one?" in s)


def test_published_strings_verbatim() -> None:
    disastir = resolve_instructions("disastir")
    assert disastir.format(Intent.FC, "Floods are rising.") == (
        "Instruct: Given the claim, retrieve the most relevant document that supports or refutes it\n"
        "Query: Floods are rising.")
    dmr = resolve_instructions("dmretriever")
    assert dmr.format(Intent.Twitter, "power outage Dhaka") == (
        "Given the user query, retrieve the most relevant Twitter text that meets the request: power outage Dhaka")
    assert resolve_instructions("none").format(Intent.QA, "raw?") == "raw?"


def test_none_sends_raw_queries(six_intents: Path) -> None:
    spy = Spy()
    _run(with_instructions(spy, "none"), ["DisastIR-QA-Bio"])
    assert set(spy.seen) == set(QUERIES[Intent.QA]) | set(PASSAGES.values())


def test_custom_mapping_template_and_passages(six_intents: Path) -> None:
    mapping = {i.value: f"Do {i.value}" for i in INTENTS}
    spy = Spy()
    _run(with_instructions(spy, mapping, "<{instruction}> {query}", passages=True), ["DisastIR-NLI-Bio"])
    assert set(spy.seen) == {f"<Do NLI> {q}" for q in QUERIES[Intent.NLI]} | {f"<Do NLI> {p}" for p in
                                                                              PASSAGES.values()}


def test_non_disastir_tasks_pass_through() -> None:
    spy = Spy()
    task = MockRetrievalTask()
    mteb.evaluate(with_instructions(spy, "disastir"), task, cache=None, show_progress_bar=False)
    task.load_data()
    split = task.dataset["default"][task.metadata.eval_splits[0]]
    originals = set(split["queries"]["text"]) | {t for t in split["corpus"]["text"]}
    assert spy.seen and set(spy.seen) <= originals | {f"{c['title']} {c['text']}".strip() for c in split["corpus"]}
    assert not any("Instruct:" in s for s in spy.seen)


def test_bad_choices_fail_clearly() -> None:
    with pytest.raises(ValueError) as refused:
        resolve_instructions("disaster")
    says(str(refused.value), "'disaster'", "'disastir'", "{intent: instruction}")
    with pytest.raises(ValueError, match=r"lack intent\(s\)"):
        resolve_instructions({"QA": "x"})
    with pytest.raises(ValueError, match="must contain"):
        resolve_instructions("disastir", "{query} only")
    with pytest.raises(TypeError) as refused:
        with_instructions(42)
    says(str(refused.value), "SentenceTransformer", "mteb encoder", "callable", "int")


@pytest.fixture(scope="module")
def instruct_model() -> object:
    """mteb's own instruction-aware wrapper around the bundled MiniLM, with a spy on the final strings."""
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel

    from disastir_mteb.models.bundled import bundled_model_path

    model = InstructSentenceTransformerModel(str(bundled_model_path()), revision=None, device="cpu",
                                             instruction_template="Instruct: {instruction}\nQuery: ",
                                             apply_instruction_to_passages=False)
    model.mteb_model_meta = ModelMeta.create_empty(overwrites={
        "name": "test/instruct-minilm", "use_instructions": True, "similarity_fn_name": ScoringFunction.COSINE})
    model.final_texts = []
    encode = model.model.encode

    def spy_encode(sentences: list[str], prompt: str | None = None, **kwargs: object) -> np.ndarray:
        model.final_texts.extend((prompt or "") + s for s in sentences)
        return encode(sentences, prompt=prompt, **kwargs)

    model.model.encode = spy_encode
    return model


def test_instruction_aware_model_gets_exactly_one_instruction(six_intents: Path, instruct_model: object) -> None:
    instruct_model.final_texts.clear()
    wrapped = with_instructions(instruct_model, "dmretriever")
    assert wrapped.model_prompt == "take-over"
    _run(wrapped, ["DisastIR-QA-Bio"])
    expected = {f"{INSTRUCTION_SETS['dmretriever'][Intent.QA]}: {q}" for q in QUERIES[Intent.QA]}
    assert expected <= set(instruct_model.final_texts)
    assert not any(t.startswith("Instruct:") for t in instruct_model.final_texts)
    assert instruct_model.get_task_instruction(mteb.get_task("DisastIR-QA-Bio").metadata, None)  # restored after


def test_take_over_wraps_the_model_and_leaves_it_as_it_is(six_intents: Path, instruct_model: object) -> None:
    """While a take-over encode runs, the model itself (which other callers may share) still gives its own
    instruction and carries no replaced method: the adapter runs the encode on a view, never rewrites the model."""
    from mteb.types import PromptType

    metadata = mteb.get_task("DisastIR-QA-Bio").metadata
    own = instruct_model.get_task_instruction(metadata, PromptType.query)
    attributes = set(vars(instruct_model))
    encode, seen = instruct_model.model.encode, []

    def watching(sentences: list[str], prompt: str | None = None, **kwargs: object) -> np.ndarray:
        seen.append((instruct_model.get_task_instruction(metadata, PromptType.query), set(vars(instruct_model))))
        return encode(sentences, prompt=prompt, **kwargs)

    instruct_model.model.encode = watching
    try:
        instruct_model.final_texts.clear()
        _run(with_instructions(instruct_model, "dmretriever"), ["DisastIR-QA-Bio"])
    finally:
        instruct_model.model.encode = encode
    assert own.startswith("Instruct: ") and seen and all(entry == (own, attributes) for entry in seen)
    expected = {f"{INSTRUCTION_SETS['dmretriever'][Intent.QA]}: {q}" for q in QUERIES[Intent.QA]}
    assert expected <= set(instruct_model.final_texts)
    assert not any(t.startswith("Instruct:") for t in instruct_model.final_texts)


class OwnInstruction(AbsEncoder):
    """An mteb encoder that adds its own task instruction through a method set on the instance, over its class's."""

    def __init__(self) -> None:
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={
            "name": "test/own-instruction", "use_instructions": True, "similarity_fn_name": ScoringFunction.COSINE})
        self.get_task_instruction = lambda task_metadata, prompt_type: "Own: "
        self.embed = Spy()

    def encode(self, inputs: object, *, task_metadata: object, prompt_type: object = None,
               **kwargs: object) -> np.ndarray:
        instruction = self.get_task_instruction(task_metadata, prompt_type)
        return self.embed([instruction + text for batch in inputs for text in batch["text"]])


def test_take_over_switches_off_an_instruction_method_set_on_the_instance(six_intents: Path) -> None:
    model = OwnInstruction()
    _run(with_instructions(model, "dmretriever"), ["DisastIR-QA-Bio"])
    expected = {f"{INSTRUCTION_SETS['dmretriever'][Intent.QA]}: {q}" for q in QUERIES[Intent.QA]}
    assert expected <= set(model.embed.seen) and not any(t.startswith("Own: ") for t in model.embed.seen)
    assert model.get_task_instruction(None, None) == "Own: "  # the model itself is as it was


def test_instruction_aware_model_left_alone(six_intents: Path, instruct_model: object) -> None:
    instruct_model.final_texts.clear()
    wrapped = with_instructions(instruct_model, "dmretriever", model_prompt="leave")
    _run(wrapped, ["DisastIR-QA-Bio"])
    own = f"Instruct: {INSTRUCTION_SETS['disastir'][Intent.QA]}\nQuery: "
    assert {own + q for q in QUERIES[Intent.QA]} <= set(instruct_model.final_texts)
    assert wrapped.mteb_model_meta.experiment_kwargs["disastir_instructions"] == "model"


def test_runs_with_different_instructions_are_separate_records(six_intents: Path, tmp_path: Path) -> None:
    cache = mteb.ResultCache(tmp_path / "results")
    for name in ("disastir", "dmretriever", "none"):
        mteb.evaluate(with_instructions(Spy(), name), mteb.get_task("DisastIR-QA-Bio"), cache=cache,
                      show_progress_bar=False)
    files = sorted((tmp_path / "results").rglob("DisastIR-QA-Bio.json"))
    assert len(files) == 3
    folders = {f.parent.name for f in files}
    assert len(folders) == 3
    assert any("dmretriever" in f and "colon" in f for f in folders)
    assert any("disastir_instructions_none" in f for f in folders)


def test_a_new_instruction_set_is_one_entry_in_one_file(tmp_path: Path) -> None:
    """The README's design section: a set added to ``vocabulary/instructions.py`` (with its template) reaches the
    command line's help, the resolver and the results' readable setting names, with no copy elsewhere."""
    import shutil
    import subprocess
    import sys

    import disastir_mteb

    tree = tmp_path / "tree"
    shutil.copytree(Path(disastir_mteb.__file__).parents[1] / "disastir_mteb", tree / "disastir_mteb",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(Path(disastir_mteb.__file__).parents[1] / "task_metadata", tree / "task_metadata")
    source = tree / "disastir_mteb" / "vocabulary" / "instructions.py"
    text = source.read_text(encoding="utf-8")
    entry = '    "terse": MappingProxyType({i: "Find it" for i in Intent}),\n'
    text = text.replace('    "none": None,\n})', entry + '    "none": None,\n})')
    text = text.replace('{"disastir": "instruct-query", "dmretriever": "colon"}',
                        '{"disastir": "instruct-query", "dmretriever": "colon", "terse": "colon"}')
    source.write_text(text, encoding="utf-8")
    code = """
from disastir_mteb.cli import build_parser
from disastir_mteb.results.describe import describe_setting
from disastir_mteb.vocabulary.instructions import Intent, resolve_instructions
config = resolve_instructions("terse")
print(config.format(Intent.QA, "Flooded roads?"))
print(describe_setting(config.experiment_kwargs()))
print(" ".join(build_parser()._subparsers._group_actions[0].choices["run"].format_help().split()))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    formatted, described, help_text = done.stdout.splitlines()
    assert formatted == "Find it: Flooded roads?"
    assert described == "instructions: terse"  # its own template: not named as a departure
    assert "disastir | dmretriever | terse | none" in help_text

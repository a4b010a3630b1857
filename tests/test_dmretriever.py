"""DMRetriever models: the authors' pooling and instructions, tested on a local folder built from MiniLM."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import mteb
import numpy as np
import pytest

from conftest import write_layout
from disastir_mteb.benchmark.taxonomy import Intent
from disastir_mteb.models.adapter import with_instructions
from disastir_mteb.models.bundled import bundled_model_path
from disastir_mteb.models.dmretriever import DMRetrieverEncoder
from disastir_mteb.models.instructions import INSTRUCTION_SETS

_TRANSFORMER_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                      "special_tokens_map.json")
PASSAGES = {"d1": "Evacuate low-lying areas before the storm surge.", "d2": "Boil water for one minute.",
            "d3": "Aftershocks can last for weeks."}
QUERY = "What should coastal residents do before a storm surge?"


def _dmretriever_like_folder(target: Path) -> Path:
    """A BERT-style checkpoint folder (config, tokenizer, weights) like DMIR01/DMRetriever-33M's."""
    target.mkdir(parents=True, exist_ok=True)
    for name in _TRANSFORMER_FILES:
        shutil.copy(bundled_model_path() / name, target / name)
    return target


@pytest.fixture(scope="module")
def local_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _dmretriever_like_folder(tmp_path_factory.mktemp("dmr") / "DMRetriever-33M-local")


@pytest.fixture
def tiny_data(tmp_path: Path, use_data: object) -> Path:
    qrels = [{"user_query": QUERY, "passage": PASSAGES["d1"], "score": 3},
             {"user_query": QUERY, "passage": PASSAGES["d2"], "score": 0}]
    root = write_layout(tmp_path / "data", PASSAGES, {"QA_Bio": ([{"query_id": "q1", "user_query": QUERY}], qrels)})
    use_data(root)
    return root


def test_metas_are_registered_with_mteb() -> None:
    meta = mteb.get_model_meta("DMIR01/DMRetriever-33M")
    assert meta.loader is DMRetrieverEncoder and meta.embed_dim == 384 and meta.max_tokens == 512
    assert meta.use_instructions is True
    assert {m.name for m in mteb.get_model_metas() if m.name.startswith("DMIR01/")} == {
        f"DMIR01/DMRetriever-{s}" for s in ("33M", "109M", "335M", "596M", "4B", "7.6B")}


@pytest.mark.parametrize("size", ["596M", "4B", "7.6B"])
def test_bidirectional_qwen_sizes_fail_with_a_clear_error(size: str) -> None:
    with pytest.raises(NotImplementedError, match=r"Qwen3BiModel.*not installable from PyPI"):
        DMRetrieverEncoder(f"DMIR01/DMRetriever-{size}")


def test_mean_pooling_normalised_and_instructed_queries(local_checkpoint: Path, tiny_data: Path) -> None:
    from sentence_transformers import SentenceTransformer

    encoder = DMRetrieverEncoder(str(local_checkpoint), device="cpu")
    task = mteb.get_task("DisastIR-QA-Bio")
    instruction = INSTRUCTION_SETS["dmretriever"][Intent.QA]
    assert encoder.texts_for([QUERY], task.metadata, mteb.types.PromptType.query) == [f"{instruction}: {QUERY}"]
    assert encoder.texts_for([PASSAGES["d1"]], task.metadata, mteb.types.PromptType.document) == [PASSAGES["d1"]]

    reference = SentenceTransformer(str(bundled_model_path()), device="cpu")  # MiniLM: mean pooling + normalise
    from torch.utils.data import DataLoader

    loader = DataLoader([{"text": QUERY}], batch_size=4)
    ours = encoder.encode(loader, task_metadata=task.metadata, hf_split="test", hf_subset="default",
                          prompt_type=mteb.types.PromptType.query)
    expected = reference.encode([f"{instruction}: {QUERY}"], normalize_embeddings=True)
    np.testing.assert_allclose(ours, expected, atol=1e-5)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_with_instructions_takes_over_without_doubling(local_checkpoint: Path, tiny_data: Path) -> None:
    encoder = DMRetrieverEncoder(str(local_checkpoint), device="cpu")
    seen: list[str] = []
    tokenizer = encoder.tokenizer

    def spy(texts: list[str], **kwargs: object) -> object:
        seen.extend(texts)
        return tokenizer(texts, **kwargs)

    encoder.tokenizer = spy
    mteb.evaluate(with_instructions(encoder, "disastir"), mteb.get_task("DisastIR-QA-Bio"), cache=None,
                  show_progress_bar=False)
    disastir = INSTRUCTION_SETS["disastir"][Intent.QA]
    assert f"Instruct: {disastir}\nQuery: {QUERY}" in seen
    assert not any(INSTRUCTION_SETS["dmretriever"][Intent.QA] in s for s in seen)
    assert set(PASSAGES.values()) <= set(seen)


def test_mteb_run_loads_dmretriever_with_its_recipe(local_checkpoint: Path, tiny_data: Path, tmp_path: Path) -> None:
    """`mteb run -m DMIR01/DMRetriever-33M` offline, weights from a Hugging Face cache."""
    hub = tmp_path / "hub"
    repo = hub / "models--DMIR01--DMRetriever-33M"
    commit = "1" * 40
    shutil.copytree(local_checkpoint, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub), "DISASTIR_DATA_DIR": str(tiny_data)}
    proc = subprocess.run([str(Path(sys.executable).with_name("mteb")), "run", "-m", "DMIR01/DMRetriever-33M", "-t",
                           "DisastIR-QA-Bio", "--output-folder", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [result] = list((tmp_path / "out").rglob("DisastIR-QA-Bio.json"))
    assert "DMIR01__DMRetriever-33M" in str(result)
    scores = json.loads(result.read_text())["scores"]["test"][0]
    assert scores["ndcg_at_10"] == pytest.approx(1.0)  # the grade-3 passage is the obvious answer

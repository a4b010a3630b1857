"""DMRetriever models: the authors' architecture, pooling and instructions.

Encoder sizes: a local folder built from MiniLM. Qwen3 sizes: a tiny randomly initialised Qwen3 saved
like a release, checked against a plain PyTorch forward pass written here.
"""

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
from sentences import says

from conftest import write_layout
from disastir_mteb.models.adapter import with_instructions
from disastir_mteb.models.bundled import bundled_model_path
from disastir_mteb.models.dmretriever import DMRetrieverEncoder
from disastir_mteb.vocabulary.instructions import INSTRUCTION_SETS
from disastir_mteb.vocabulary.taxonomy import Intent

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


# ---------------------------------------------------------------------------------------------------------------
# The Qwen3 sizes (596M, 4B, 7.6B): a tiny random Qwen3 saved like a release
# ---------------------------------------------------------------------------------------------------------------

DECODERS = {"596M": (596_000_000, 1024, "Qwen/Qwen3-0.6B"), "4B": (4_000_000_000, 2560, "Qwen/Qwen3-4B"),
            "7.6B": (7_568_000_000, 4096, "Qwen/Qwen3-8B")}
TEXTS = [QUERY, *PASSAGES.values(), "Flood."]


def _tiny_qwen3_folder(target: Path) -> Path:
    """A Qwen3 checkpoint saved by plain transformers (causal class), with a byte-level BPE tokenizer.

    The tokenizer has no pad token (the plugin falls back to EOS, as the authors) and pads on the left
    (the plugin pads on the right, as the authors).
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3Model

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([*TEXTS, *INSTRUCTION_SETS["dmretriever"].values()], trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", padding_side="left")
    config = Qwen3Config(vocab_size=bpe.get_vocab_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, initializer_range=0.1,
                         eos_token_id=bpe.token_to_id("<|endoftext|>"))
    torch.manual_seed(0)
    Qwen3Model(config).save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


@pytest.fixture(scope="module")
def qwen3_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tiny_qwen3_folder(tmp_path_factory.mktemp("dmr-qwen3") / "DMRetriever-596M")


def _weights(folder: Path) -> dict[str, object]:
    from safetensors.torch import load_file

    return {k.removeprefix("model."): v.double() for k, v in load_file(folder / "model.safetensors").items()}


def _reference(folder: Path, weights: dict[str, object], texts: list[str]) -> np.ndarray:
    """Plain PyTorch, one text at a time: embeddings, full-attention layers, final norm, mean, L2 normalise.

    Reads config.json, tokenizer.json (the tokenizers library) and the weights directly; float64.
    """
    import torch
    import torch.nn.functional as F
    from tokenizers import Tokenizer

    config = json.loads((folder / "config.json").read_text())
    heads, kv_heads, head_dim = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    eps, theta = config["rms_norm_eps"], config["rope_parameters"]["rope_theta"]
    w = weights

    def rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    def rope(x: torch.Tensor) -> torch.Tensor:  # (heads, length, head_dim), rotate-half convention
        angles = torch.arange(x.shape[1], dtype=torch.float64)[:, None] * theta ** (
            -torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
        half = head_dim // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    vectors = []
    for text in texts:
        ids = torch.tensor(tokenizer.encode(text).ids)
        h = w["embed_tokens.weight"][ids]
        length = len(ids)
        for i in range(config["num_hidden_layers"]):
            p = f"layers.{i}."
            x = rms(h, w[p + "input_layernorm.weight"])
            q = rms((x @ w[p + "self_attn.q_proj.weight"].T).view(length, heads, head_dim),
                    w[p + "self_attn.q_norm.weight"]).transpose(0, 1)
            k = rms((x @ w[p + "self_attn.k_proj.weight"].T).view(length, kv_heads, head_dim),
                    w[p + "self_attn.k_norm.weight"]).transpose(0, 1)
            v = (x @ w[p + "self_attn.v_proj.weight"].T).view(length, kv_heads, head_dim).transpose(0, 1)
            k, v = k.repeat_interleave(heads // kv_heads, 0), v.repeat_interleave(heads // kv_heads, 0)
            attention = torch.softmax(rope(q) @ rope(k).transpose(1, 2) / head_dim ** 0.5, -1)  # no mask at all
            h = h + (attention @ v).transpose(0, 1).reshape(length, -1) @ w[p + "self_attn.o_proj.weight"].T
            x = rms(h, w[p + "post_attention_layernorm.weight"])
            h = h + (F.silu(x @ w[p + "mlp.gate_proj.weight"].T) * (x @ w[p + "mlp.up_proj.weight"].T)) \
                @ w[p + "mlp.down_proj.weight"].T
        vectors.append(F.normalize(rms(h, w["norm.weight"]).mean(0), dim=0).numpy())
    return np.stack(vectors)


def _encode(encoder: DMRetrieverEncoder, texts: list[str], *, batch_size: int = 8,
            prompt_type: mteb.types.PromptType = mteb.types.PromptType.document) -> np.ndarray:
    from torch.utils.data import DataLoader

    return encoder.encode(DataLoader([{"text": t} for t in texts], batch_size=batch_size),
                          task_metadata=mteb.get_task("DisastIR-QA-Bio").metadata, hf_split="test",
                          hf_subset="default", prompt_type=prompt_type)


@pytest.mark.parametrize("size", sorted(DECODERS))
def test_decoder_metas_pin_the_releases(size: str) -> None:
    parameters, dim, backbone = DECODERS[size]
    meta = mteb.get_model_meta(f"DMIR01/DMRetriever-{size}")
    assert meta.loader is DMRetrieverEncoder
    assert (meta.n_parameters, meta.embed_dim, meta.max_tokens, meta.adapted_from) == (parameters, dim, 512, backbone)
    assert meta.use_instructions is True and meta.similarity_fn_name == "cosine" and meta.license == "apache-2.0"


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_attention_is_bidirectional(qwen3_checkpoint: Path, attn_implementation: str) -> None:
    """A later token changes an earlier token's state; in plain (causal) Qwen3 with the same weights it does not."""
    import torch
    from transformers import Qwen3Model

    encoder = DMRetrieverEncoder(str(qwen3_checkpoint), device="cpu", attn_implementation=attn_implementation)
    assert type(encoder.model).__name__ == "BidirectionalQwen3Model"
    assert encoder.model.config._attn_implementation == attn_implementation
    causal = Qwen3Model.from_pretrained(qwen3_checkpoint, attn_implementation=attn_implementation).eval()
    ids = torch.tensor([[5, 60, 70, 80, 90, 100], [5, 61, 71, 81, 91, 0]])
    changed = ids.clone()
    changed[:, 4] += 1  # a later token of both rows (row 1 is padded after it)
    for mask in (torch.ones_like(ids), torch.tensor([[1] * 6, [1] * 5 + [0]])):
        with torch.no_grad():
            ours = [encoder.model(input_ids=i, attention_mask=mask).last_hidden_state for i in (ids, changed)]
            plain = [causal(input_ids=i, attention_mask=mask).last_hidden_state for i in (ids, changed)]
        assert (ours[0][:, 0] - ours[1][:, 0]).abs().min() > 1e-4  # token 0 sees token 4
        assert torch.equal(plain[0][:, :4], plain[1][:, :4])  # the causal model: tokens 0-3 do not
        assert (plain[0][:, 4] - plain[1][:, 4]).abs().max() > 1e-4


def test_embeddings_equal_a_plain_pytorch_forward_pass(qwen3_checkpoint: Path) -> None:
    """Mean over non-padding tokens, L2-normalised, in a padded batch = each text alone, unpadded, in float64."""
    encoder = DMRetrieverEncoder(str(qwen3_checkpoint), device="cpu")
    assert encoder.tokenizer.padding_side == "right" and encoder.tokenizer.pad_token == "<|endoftext|>"
    assert str(encoder.model.dtype) == "torch.float32"  # float32 on a CPU
    batched = _encode(encoder, TEXTS)
    alone = np.concatenate([_encode(encoder, [text]) for text in TEXTS])
    expected = _reference(qwen3_checkpoint, _weights(qwen3_checkpoint), TEXTS)
    np.testing.assert_allclose(batched, expected, atol=1e-5)
    np.testing.assert_allclose(batched, alone, atol=1e-5)  # padding never changes a text's vector
    assert batched.shape == (len(TEXTS), 32) and batched.dtype == np.float32


def test_a_causal_lm_checkpoint_loads_as_the_same_backbone(qwen3_checkpoint: Path, tmp_path: Path) -> None:
    """A ``Qwen3ForCausalLM`` folder (``model.``-prefixed keys and an LM head, like Qwen/Qwen3-0.6B) loads too."""
    from transformers import Qwen3ForCausalLM, Qwen3Model

    lm = Qwen3ForCausalLM(Qwen3Model.from_pretrained(qwen3_checkpoint).config)
    lm.model.load_state_dict(Qwen3Model.from_pretrained(qwen3_checkpoint).state_dict())
    lm.save_pretrained(tmp_path / "Qwen3-tiny")
    shutil.copy(qwen3_checkpoint / "tokenizer.json", tmp_path / "Qwen3-tiny")
    shutil.copy(qwen3_checkpoint / "tokenizer_config.json", tmp_path / "Qwen3-tiny")
    ours = _encode(DMRetrieverEncoder(str(tmp_path / "Qwen3-tiny"), device="cpu"), TEXTS)
    np.testing.assert_allclose(ours, _reference(qwen3_checkpoint, _weights(qwen3_checkpoint), TEXTS), atol=1e-5)


def test_decoder_queries_get_the_colon_instruction_passages_stay_raw(qwen3_checkpoint: Path) -> None:
    encoder = DMRetrieverEncoder(str(qwen3_checkpoint), device="cpu")
    seen: list[str] = []
    tokenizer = encoder.tokenizer

    def spy(texts: list[str], **kwargs: object) -> object:
        seen.extend(texts)
        return tokenizer(texts, **kwargs)

    encoder.tokenizer = spy
    query = _encode(encoder, [QUERY], prompt_type=mteb.types.PromptType.query)
    passage = _encode(encoder, [PASSAGES["d1"]])
    instruction = INSTRUCTION_SETS["dmretriever"][Intent.QA]
    assert seen == [f"{instruction}: {QUERY}", PASSAGES["d1"]]
    prompts = encoder.prompts_dict  # the DMRetriever query sets too
    assert {prompts[f"DisastIR-{s}QA-Bio"] for s in ("", "Test-", "DevLite-")} == {instruction}
    expected = _reference(qwen3_checkpoint, _weights(qwen3_checkpoint), [f"{instruction}: {QUERY}", PASSAGES["d1"]])
    np.testing.assert_allclose(np.concatenate([query, passage]), expected, atol=1e-5)


def test_decoder_dtype_follows_the_authors() -> None:
    import torch

    from disastir_mteb.models.bidirectional_qwen3 import resolve_dtype

    assert resolve_dtype(None, "cuda:0") == torch.float16 and resolve_dtype(None, "cpu") == torch.float32
    assert resolve_dtype("bf16", "cuda") == torch.bfloat16 and resolve_dtype("float32", "cuda") == torch.float32
    with pytest.raises(ValueError) as refused:
        resolve_dtype("int8", "cpu")
    says(str(refused.value), "'int8'", "bfloat16")


def test_release_name_without_weights_fails_clearly_and_builds_from_the_cache(qwen3_checkpoint: Path,
                                                                               tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    hub.mkdir()
    with pytest.raises(FileNotFoundError) as missing:
        mteb.get_model("DMIR01/DMRetriever-596M", cache_dir=str(hub), local_files_only=True)
    says(str(missing.value), "'DMIR01/DMRetriever-596M'", "not available here", "hf download DMIR01/DMRetriever-596M",
         "HF_HUB_CACHE")
    repo = hub / "models--DMIR01--DMRetriever-596M"
    shutil.copytree(qwen3_checkpoint, repo / "snapshots" / ("2" * 40))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("2" * 40)
    model = mteb.get_model("DMIR01/DMRetriever-596M", device="cpu", cache_dir=str(hub), local_files_only=True)
    assert type(model.model).__name__ == "BidirectionalQwen3Model"
    assert model.mteb_model_meta.name == "DMIR01/DMRetriever-596M"
    np.testing.assert_allclose(_encode(model, TEXTS[:2]),
                               _reference(qwen3_checkpoint, _weights(qwen3_checkpoint), TEXTS[:2]), atol=1e-5)


@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")  # get_peft_model
def test_lora_adapter_is_merged_into_its_base(qwen3_checkpoint: Path, tmp_path: Path) -> None:
    """An adapter folder loads its base, applies LoRA (random non-zero B) and equals W + alpha/r * B A by hand."""
    peft = pytest.importorskip("peft", reason="LoRA checkpoints need the optional peft (disastir-mteb[lora])")
    import torch
    from safetensors.torch import load_file

    from disastir_mteb.models.bidirectional_qwen3 import BidirectionalQwen3Model

    torch.manual_seed(1)
    base = BidirectionalQwen3Model.from_pretrained(qwen3_checkpoint)
    rank, alpha = 4, 8
    lora = peft.get_peft_model(base, peft.LoraConfig(r=rank, lora_alpha=alpha, init_lora_weights=False,
                                                     target_modules=["q_proj", "v_proj", "down_proj"]))
    adapter = tmp_path / "DMRetriever-596M-lora"
    lora.save_pretrained(adapter)
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == str(
        qwen3_checkpoint)

    merged = dict(_weights(qwen3_checkpoint))
    deltas = load_file(adapter / "adapter_model.safetensors")
    for key, down in deltas.items():
        if ".lora_A." in key:
            up = deltas[key.replace(".lora_A.", ".lora_B.")]
            target = key.removeprefix("base_model.model.").replace(".lora_A.weight", ".weight")
            merged[target] = merged[target] + alpha / rank * (up.double() @ down.double())
    ours = _encode(DMRetrieverEncoder(str(adapter), device="cpu"), TEXTS)
    np.testing.assert_allclose(ours, _reference(qwen3_checkpoint, merged, TEXTS), atol=1e-5)
    assert np.abs(ours - _reference(qwen3_checkpoint, _weights(qwen3_checkpoint), TEXTS)).max() > 1e-3

    moved = tmp_path / "elsewhere"  # the base named in adapter_config.json is gone: base_model= points to it
    shutil.move(qwen3_checkpoint, moved)
    try:
        np.testing.assert_allclose(_encode(DMRetrieverEncoder(str(adapter), device="cpu", base_model=str(moved)),
                                           TEXTS), ours, atol=1e-6)
    finally:
        shutil.move(moved, qwen3_checkpoint)


def test_lora_adapter_without_peft_names_the_extra(qwen3_checkpoint: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(qwen3_checkpoint),
                                                             "peft_type": "LORA"}))
    (adapter / "adapter_model.safetensors").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "peft", None)  # import peft -> ImportError
    with pytest.raises(ImportError) as missing:
        DMRetrieverEncoder(str(adapter), device="cpu")
    says(str(missing.value), adapter, "LoRA adapter", "peft", 'pip install "disastir-mteb[lora]"')


def test_folder_without_a_checkpoint_and_other_decoders_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as missing:
        DMRetrieverEncoder(str(tmp_path), device="cpu")
    says(str(missing.value), repr(str(tmp_path)), "config.json", "adapter_config.json")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    with pytest.raises(ValueError) as refused:
        DMRetrieverEncoder(str(tmp_path), device="cpu")
    says(str(refused.value), repr(str(tmp_path)), "'qwen2'", "Qwen3", "'qwen3'")


def test_a_decoder_folder_given_to_the_runner_loads_bidirectional(qwen3_checkpoint: Path) -> None:
    """`disastir-mteb run -m ./DMRetriever-596M`: not SentenceTransformer, which would run Qwen3 causally."""
    from disastir_mteb.models.dmretriever import DMRetrieverEncoder
    from disastir_mteb.models.loading import load_model

    encoder = load_model(str(qwen3_checkpoint), device="cpu")
    assert isinstance(encoder, DMRetrieverEncoder)
    assert type(encoder.model).__name__ == "BidirectionalQwen3Model"

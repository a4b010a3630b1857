"""The caller's model is handed back as it came: every module's training flag, dtype, device and attributes.

Real parts: a real sentence-transformers model (conftest's ``tiny_model``, MiniLM's files on a small BERT) as a
``SentenceTransformer`` in train mode (a training loop that evaluates
between steps), inside mteb's own wrapper, as a ``transformers`` model behind a callable, and cast to bf16; mteb and
the runner on a 96-passage generated sample (one query per task); ``build_search`` alone where its probe is the
point. A model comes back as it came from ``evaluate``, from ``build_search`` and from a run that fails half-way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from disastir_mteb.models.loan import borrow
from disastir_mteb.models.precision import module_dtype, torch_module
from disastir_mteb.runner.run import build_search, evaluate
from disastir_mteb.vocabulary.run_settings import RunSettings

TASKS = ["DisastIR-QA-Bio", "DisastIR-FC-Geo"]
TEXT = ["Flood warning: the river is expected to crest at 5.2 m near the old bridge."]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from disastir_mteb.sample.generator import SampleScale, write_sample

    scale = SampleScale("tiny", n_passages=96, queries_per_task=1, judged_per_query=6, passage_words=16)
    return write_sample(tmp_path_factory.mktemp("loan") / "data", scale=scale)


def training_model(folder: Path) -> Any:
    """A fresh model of ``folder`` in train mode, its embeddings frozen in eval mode (flags that differ between
    modules), and its tokenizer without padding: settings that its own ``encode`` changes."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    model.train()
    model[0].auto_model.embeddings.eval()
    model.tokenizer.backend_tokenizer.no_padding()
    return model


class State:
    """What a caller can see of a model: each object's attributes (the objects themselves, and a dict's or list's
    entries), each module's training flag, each tensor's dtype, device and requires_grad, each tokenizer's truncation
    and padding."""

    def __init__(self, model: torch.nn.Module, *others: Any) -> None:
        self.model = model
        self.objects = [*model.modules(), *others]
        self.attributes = [dict(vars(obj)) for obj in self.objects]
        self.entries = [{name: _entries(value) for name, value in vars(obj).items() if type(value) in (dict, list)}
                        for obj in self.objects]
        self.flags = self._flags()
        self.tensors = self._tensors()
        self.tokenizers = [(t, t.backend_tokenizer.truncation, t.backend_tokenizer.padding) for t in self.objects
                           if hasattr(t, "backend_tokenizer")]

    def _flags(self) -> list[bool]:
        return [obj.training for obj in self.objects if isinstance(obj, torch.nn.Module)]

    def _tensors(self) -> list[tuple[Any, ...]]:
        return [(t.dtype, t.device, t.requires_grad) for t in (*self.model.parameters(), *self.model.buffers())]

    def changes(self) -> list[str]:
        """Every difference between the model now and when it was observed, named."""
        found = []
        for obj, before, entries in zip(self.objects, self.attributes, self.entries, strict=True):
            now = vars(obj)
            found += [f"{type(obj).__name__}.{name}" for name in before.keys() | now.keys()
                      if before.get(name, before) is not now.get(name, now)]
            found += [f"{type(obj).__name__}.{name} (entries)" for name, saved in entries.items()
                      if not _same(saved, _entries(now[name]))]
        found += ["training flags"] * (self.flags != self._flags()) + ["tensors"] * (self.tensors != self._tensors())
        found += [f"tokenizer settings of {type(t).__name__}" for t, truncation, padding in self.tokenizers
                  if (t.backend_tokenizer.truncation, t.backend_tokenizer.padding) != (truncation, padding)]
        return found


def _entries(container: Any) -> list[Any]:
    return [item for pair in container.items() for item in pair] if isinstance(container, dict) else list(container)


def _same(saved: list[Any], now: list[Any]) -> bool:
    return len(saved) == len(now) and all(a is b or (isinstance(a, str) and a == b)
                                          for a, b in zip(saved, now, strict=True))


def dropout_active(model: Any) -> bool:
    """Whether two forward passes of the same text differ: dropout is on, as training needs it."""
    features = model.preprocess(TEXT)
    with torch.no_grad():
        first, second = (model(dict(features))["sentence_embedding"] for _ in range(2))
    return not torch.equal(first, second)


def quiet(**options: Any) -> RunSettings:
    return RunSettings.from_options(cache_dir=False, progress=False, **options)


def test_a_sentence_transformer_in_train_mode_comes_back_training(tiny: Path, tiny_model: Path, tmp_path: Path) -> None:
    """The issue's case: evaluate() between two training steps left all 124 modules in eval mode, with no word."""
    model = training_model(tiny_model)
    settings = (model.max_seq_length, dict(model.prompts), model.default_prompt_name)
    state = State(model, model.model_card_data, model.tokenizer)
    searcher = build_search(model, quiet())
    assert state.changes() == []
    result = evaluate(model, TASKS, data=tiny, cache_dir=False, output_folder=tmp_path / "out", show_progress=False)
    assert len(result.task_results) == 2
    assert state.changes() == []
    assert model.training and not model[0].auto_model.embeddings.training and dropout_active(model)
    assert (model.max_seq_length, model.prompts, model.default_prompt_name) == settings
    # it encoded in eval mode all the same: what it computes is what the same model in eval mode computes
    assert searcher.identity.fingerprint == build_search(model.eval(), quiet()).identity.fingerprint


def test_mteb_wrapper_around_a_training_model_comes_back_as_it_came(tiny: Path, tiny_model: Path,
                                                                    tmp_path: Path) -> None:
    """mteb's own wrapper (what mteb.get_model returns for a SentenceTransformer), with instructions in front."""
    from mteb.models import SentenceTransformerEncoderWrapper

    model = training_model(tiny_model)
    wrapper = SentenceTransformerEncoderWrapper(model)
    meta = wrapper.mteb_model_meta.model_dump()
    state = State(model, model.model_card_data, model.tokenizer, wrapper, wrapper.mteb_model_meta)
    evaluate(wrapper, TASKS[:1], instructions="disastir", data=tiny, cache_dir=False, output_folder=tmp_path / "out",
             show_progress=False)
    assert state.changes() == []
    assert wrapper.mteb_model_meta.model_dump() == meta and dropout_active(model)


class MeanPooled:
    """A wrapped transformers model: a callable over ``AutoModel`` and its tokenizer, counting the texts it embeds."""

    def __init__(self, folder: Path) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.model = AutoModel.from_pretrained(str(folder))
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.texts = 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        return mean_pooled(self.model, self.tokenizer, texts)


def mean_pooled(model: Any, tokenizer: Any, texts: list[str]) -> np.ndarray:
    batch = tokenizer(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        tokens = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1)
    return ((tokens * mask).sum(1) / mask.sum(1)).numpy()


def test_a_callable_over_a_training_transformers_model_comes_back_as_it_came(tiny: Path, tiny_model: Path,
                                                                             tmp_path: Path) -> None:
    """The callable's own record (its count) is its own; its model and tokenizer are handed back as they came."""
    embed = MeanPooled(tiny_model)
    embed.model.train()
    embed.tokenizer.backend_tokenizer.no_truncation()
    state = State(embed.model, embed.tokenizer)
    searcher = build_search(embed, quiet())
    assert state.changes() == [] and embed.model.training
    evaluate(searcher, TASKS, data=tiny, output_folder=tmp_path / "out", show_progress=False)
    assert state.changes() == [] and embed.model.training
    assert embed.texts == searcher.texts_probed + searcher.passages_encoded + searcher.queries_encoded > 96
    # encoded in eval mode (no dropout): the same identity as the same model in eval mode
    reference = MeanPooled(tiny_model)
    reference.model.eval()
    assert build_search(reference, quiet()).identity.fingerprint == searcher.identity.fingerprint


def test_a_function_closing_over_a_training_model_keeps_its_attributes(tiny_model: Path) -> None:
    """A plain function: its attributes are left as they are; the model its closure holds encodes in eval mode and
    comes back training."""
    held = MeanPooled(tiny_model)
    model, tokenizer = held.model.train(), held.tokenizer
    training_while_called = []

    def embed(texts: list[str]) -> np.ndarray:
        training_while_called.append(model.training)
        return mean_pooled(model, tokenizer, texts)

    embed.note = "mine"  # type: ignore[attr-defined]
    attributes = dict(vars(embed))
    state = State(model, tokenizer)
    build_search(embed, quiet())
    assert training_while_called and not any(training_while_called)
    assert vars(embed) == attributes and state.changes() == [] and model.training


def test_precision_encodes_with_a_cast_copy_and_the_training_model_stays_as_it_was(tiny_model: Path) -> None:
    model = training_model(tiny_model)
    weights = {name: (tensor.clone(), tensor.data_ptr()) for name, tensor in model.state_dict().items()}
    state = State(model, model.model_card_data, model.tokenizer)
    searcher = build_search(model, quiet(precision="bf16"))
    copy = torch_module(searcher.model)
    assert copy is not model and module_dtype(copy) == "bfloat16" and not copy.training  # the copy encodes
    assert state.changes() == [] and module_dtype(model) == "float32" and dropout_active(model)
    assert all(torch.equal(weights[name][0], tensor) and weights[name][1] == tensor.data_ptr()
               for name, tensor in model.state_dict().items())  # the same storage, the same values


def test_a_run_that_fails_half_way_hands_the_model_back(tiny: Path, tiny_model: Path, tmp_path: Path) -> None:
    """The model raises while the corpus is encoded (after the probe), or in the probe itself: back as it came."""
    model = training_model(tiny_model)
    armed = {"on": False}

    def fail(*args: Any) -> None:
        if armed["on"]:
            raise RuntimeError("out of memory (simulated)")

    model[1].register_forward_hook(fail)
    state = State(model, model.model_card_data, model.tokenizer)
    searcher = build_search(model, quiet())
    armed["on"] = True
    with pytest.raises(RuntimeError, match="simulated"):
        evaluate(searcher, TASKS, data=tiny, output_folder=tmp_path / "out", show_progress=False)
    assert state.changes() == []
    with pytest.raises(RuntimeError, match="simulated"):
        build_search(model, quiet())
    assert state.changes() == []
    armed["on"] = False
    assert dropout_active(model)


def test_borrow_puts_back_what_changed_and_only_that(tiny_model: Path) -> None:
    """What a library may do to a model while it encodes, done by hand inside ``borrow``, then an error."""
    model = training_model(tiny_model)
    model.tokenizer.backend_tokenizer.enable_padding(length=32)
    state = State(model, model.model_card_data, model.tokenizer)
    kept = model[0].auto_model.config
    with pytest.raises(KeyError), borrow(model):
        assert not any(module.training for module in model.modules())  # eval mode while borrowed
        model.to(torch.float16)  # as sentence-transformers' multi-process pool moves the model (to the CPU)
        model[0].auto_model.embeddings.word_embeddings.weight.requires_grad_(False)
        model.max_seq_length = 8
        model.prompts["query"] = "query: "
        model.default_prompt_name = "query"
        model.similarity_fn_name = "dot"
        model.model_card_data.language = ["fr"]
        model.register_forward_hook(lambda *args: None)
        model.tokenizer.backend_tokenizer.no_truncation()
        model.tokenizer.backend_tokenizer.no_padding()
        model.tokenizer.model_max_length = 8
        model.added = "by the run"
        raise KeyError("the run fails")
    assert state.changes() == [] and module_dtype(model) == "float32" and dropout_active(model)
    assert model[0].auto_model.config is kept and model.max_seq_length == 256 and model.default_prompt_name is None

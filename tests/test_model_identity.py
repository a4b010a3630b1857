"""A model is identified by what it is: its files, its weights and tokenizer, or a version its caller names.

Real parts only: a real ``SentenceTransformer`` folder (conftest's ``tiny_model``: MiniLM's tokenizer on a small
BERT; what is checked is the plumbing, not MiniLM's numbers) changed in place (Gaussian noise on every weight, as a
training step would), copies of its folder with a tokenizer or weights edited, plain callables, the real store,
runner, ``report`` and ``submit``. Data: a 200-passage generated sample, two queries per task.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sentences import says

from disastir_mteb import cli
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.models.identity import PROBE_TEXTS, PROBE_TOLERANCE, fingerprint_of, identify, probe_vectors
from disastir_mteb.runner.run import build_search, evaluate
from disastir_mteb.vocabulary.run_settings import RunSettings

TASKS = ["DisastIR-QA-Bio", "DisastIR-FC-Geo"]
N_PASSAGES = 200
UNNAMED = "no_model_name__available"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated sample without the generator's marker (so that ``submit`` judges the model, not the data)."""
    from disastir_mteb.data.layout import MARKER
    from disastir_mteb.sample.generator import SampleScale, write_sample

    scale = SampleScale("tiny", n_passages=N_PASSAGES, queries_per_task=2, judged_per_query=6, passage_words=16)
    data = write_sample(tmp_path_factory.mktemp("identity") / "data", scale=scale)
    (data / MARKER).unlink()
    return data


def load(folder: Path) -> Any:
    """A fresh in-memory ``SentenceTransformer`` of ``folder``: no name, no revision (what a notebook holds)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu")


def add_noise(model: Any, scale: float = 0.3, seed: int = 0) -> None:
    """Change every weight in place, as a training step does (0.3: the small model's word vectors are N(0, 1))."""
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(scale * torch.randn_like(parameter))


def ndcg(result: Any) -> dict[str, float]:
    return {task.task_name: task.scores["test"][0]["ndcg_at_10"] for task in result.task_results}


def stored(out: Path) -> dict[str, dict[str, float]]:
    """NDCG@10 of every task file under ``out``, by its revision folder."""
    found: dict[str, dict[str, float]] = {}
    for path in sorted(p for p in out.rglob("DisastIR-*.json") if p.stem in TASKS):
        scores = json.loads(path.read_text(encoding="utf-8"))["scores"]["test"][0]["ndcg_at_10"]
        found.setdefault(path.parent.relative_to(out / "results").as_posix(), {})[path.stem] = scores
    return found


def every_score(out: Path) -> dict[str, dict[str, float]]:
    """Every test score (NDCG@1..1000, MAP, MRR, recall, ...) of every task file under ``out``, by task and folder."""
    found: dict[str, dict[str, float]] = {}
    for path in sorted(p for p in out.rglob("DisastIR-*.json") if p.stem in TASKS):
        scores = json.loads(path.read_text(encoding="utf-8"))["scores"]["test"][0]
        found[f"{path.parent.name}/{path.stem}"] = {key: value for key, value in scores.items()
                                                    if isinstance(value, float)}
    return found


def quiet(cache: Path | bool) -> RunSettings:
    return RunSettings.from_options(cache_dir=cache, progress=False)  # type: ignore[arg-type]


def corpus_entries(cache: Path) -> int:
    return len(list((cache / "corpus").rglob("manifest.json")))


# ---------------------------------------------------------------------- the notebook workflow


def test_weights_changed_in_place_get_new_numbers_from_their_own_encoding(
        tiny: Path, tiny_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: evaluate, train (here: noise), evaluate again into the same cache and output folder."""
    cache, out = tmp_path / "cache", tmp_path / "out"
    model = load(tiny_model)
    before = ndcg(evaluate(model, TASKS, data=tiny, cache_dir=cache, output_folder=out, show_progress=False))
    add_noise(model)
    with caplog.at_level(logging.INFO, logger="disastir_mteb"):
        after = ndcg(evaluate(model, TASKS, data=tiny, cache_dir=cache, output_folder=out, show_progress=False))
    fresh = ndcg(evaluate(model, TASKS, data=tiny, cache_dir=tmp_path / "fresh", output_folder=tmp_path / "out-fresh",
                          show_progress=False))
    assert after == fresh and after != before  # the changed model's own numbers, not the cached ones
    assert corpus_entries(cache) == 2  # encoded again, under its own key
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # another unnamed model is no fault

    # Each model's results in a folder of its own: the first model's were neither reused nor overwritten.
    folders = stored(out)
    assert len(folders) == 2 and all(name.startswith(f"{UNNAMED}/fingerprint-") for name in folders)
    assert sorted(sorted(scores.items()) for scores in folders.values()) == sorted([sorted(before.items()),
                                                                                  sorted(after.items())])
    (said,) = [r.getMessage() for r in caplog.records if "it is identified by" in r.getMessage()]
    folder = next(name for name, scores in folders.items() if scores == after)
    says(said, out / "results" / folder)

    # The same model again: nothing encoded, the same numbers.
    again = build_search(model, quiet(cache))
    assert ndcg(evaluate(again, TASKS, data=tiny, output_folder=out, show_progress=False)) == after
    assert (again.passages_encoded, again.queries_encoded) == (0, 0)

    # submit still refuses a model without a name and revision of its own: its folder's revision is no commit.
    assert cli.main(["submit", str(out), "--out", str(tmp_path / "submission")]) == 1
    printed = capsys.readouterr().out
    assert f"'{folder.split('/')[1]}'" in printed and "40-character" in printed  # the revision, and what one is


def test_two_in_memory_models_in_one_session_keep_their_vectors_and_results_apart(
        tiny: Path, tiny_model: Path, tmp_path: Path) -> None:
    """Two unnamed models, each evaluated twice in turn, on one cache and one output folder."""
    cache, out = tmp_path / "cache", tmp_path / "out"
    first, second = load(tiny_model), load(tiny_model)
    add_noise(second, seed=1)
    searchers, scores = [], []
    for model in (first, second, first, second):
        searchers.append(build_search(model, quiet(cache)))
        scores.append(ndcg(evaluate(searchers[-1], TASKS, data=tiny, output_folder=out, show_progress=False)))
    assert scores[0] == scores[2] != scores[1] == scores[3]  # the second is not served the first one's vectors
    assert [s.passages_encoded for s in searchers] == [N_PASSAGES, N_PASSAGES, 0, 0]  # each encoded once
    assert searchers[0].identity.fingerprint == searchers[2].identity.fingerprint != searchers[1].identity.fingerprint
    assert stored(out) == {f"{UNNAMED}/{searchers[0].identity.results_revision}": scores[0],
                           f"{UNNAMED}/{searchers[1].identity.results_revision}": scores[1]}


def test_a_ready_search_model_evaluated_again_after_its_model_changed(tiny: Path, tmp_path: Path) -> None:
    """A search model built once and evaluated before and after its model changed: probed again at each run."""
    base = HashingEncoder()
    state = {"trained": False}

    def embed(texts: list[str]) -> np.ndarray:  # a plain callable whose behaviour changes in place
        return base.embed([" ".join(word[1:] for word in text.split()) if state["trained"] else text
                           for text in texts])

    searcher = build_search(embed, quiet(tmp_path / "cache"))
    before = ndcg(evaluate(searcher, TASKS, data=tiny, output_folder=tmp_path / "out", show_progress=False))
    first = searcher.identity.results_revision
    state["trained"] = True
    after = ndcg(evaluate(searcher, TASKS, data=tiny, output_folder=tmp_path / "out", show_progress=False))
    assert after != before
    assert after == ndcg(evaluate(embed, TASKS, data=tiny, cache_dir=False, output_folder=tmp_path / "fresh",
                                  show_progress=False))
    assert searcher.passages_encoded == 2 * N_PASSAGES
    assert stored(tmp_path / "out") == {f"callable__embed/{first}": before,
                                        f"callable__embed/{searcher.identity.results_revision}": after}


def test_a_callable_changed_between_two_calls_is_never_served_the_first_calls_vectors(
        tiny: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A plain callable has nothing to read: each call is its own, unless the caller names a version."""
    base = HashingEncoder()
    state = {"trained": False}

    def embed(texts: list[str]) -> np.ndarray:
        return base.embed([" ".join(word[1:] for word in text.split()) if state["trained"] else text
                           for text in texts])

    cache, out = tmp_path / "cache", tmp_path / "out"
    with caplog.at_level(logging.WARNING):
        before = ndcg(evaluate(embed, TASKS, data=tiny, cache_dir=cache, output_folder=out, show_progress=False))
    (said,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    says(said, "callable/embed", "model_revision=...", "--model-revision")  # the model, and how to name a version
    state["trained"] = True
    after = ndcg(evaluate(embed, TASKS, data=tiny, cache_dir=cache, output_folder=out, show_progress=False))
    fresh = ndcg(evaluate(embed, TASKS, data=tiny, cache_dir=False, output_folder=tmp_path / "fresh",
                          show_progress=False))
    assert after == fresh != before
    assert corpus_entries(cache) == 0  # nothing kept that no later call may take
    folders = stored(out)  # a folder of its own for each call
    assert len(folders) == 2 and all(name.startswith("callable__embed/unversioned-") for name in folders)

    # A version named: kept, taken again by a later call, filed under it; another version is another model.
    named = ndcg(evaluate(embed, TASKS, data=tiny, cache_dir=cache, output_folder=out, show_progress=False,
                          model_revision="v2"))
    again = build_search(embed, RunSettings.from_options(cache_dir=cache, progress=False, model_revision="v2"))
    assert ndcg(evaluate(again, TASKS, data=tiny, output_folder=out, show_progress=False)) == named == after
    assert (again.passages_encoded, again.queries_encoded) == (0, 0)
    assert stored(out)["callable__embed/v2"] == named
    other = build_search(embed, RunSettings.from_options(cache_dir=cache, progress=False, model_revision="v3"))
    evaluate(other, TASKS, data=tiny, output_folder=out, show_progress=False)
    assert other.passages_encoded == N_PASSAGES


def test_model_revision_is_refused_where_it_cannot_be_a_revision() -> None:
    for bad in ("", "a/b"):
        with pytest.raises(ValueError) as raised:
            RunSettings.from_options(model_revision=bad)
        says(str(raised.value), f"model_revision={bad!r}", "'/'")


# ---------------------------------------------------------------------- a model folder edited in place

_SWAPPED = (("health", "storm"), ("people", "solar"))  # frequent in the sample's texts, none in the probe


def swap_words(folder: Path) -> None:
    """Each pair of words maps to the other's id, in tokenizer.json and vocab.txt alike (an edited tokenizer)."""
    tokenizer = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tokenizer["model"]["vocab"]
    lines = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
    for first, second in _SWAPPED:
        vocab[first], vocab[second] = vocab[second], vocab[first]
        lines[vocab[first]], lines[vocab[second]] = first, second
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    (folder / "vocab.txt").write_text("\n".join(lines), encoding="utf-8")


def swap_rows(folder: Path) -> None:
    """The embedding rows of each pair of words swapped in model.safetensors (an edited checkpoint)."""
    from safetensors.torch import load_file, save_file

    vocab = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    tensors = load_file(folder / "model.safetensors")
    table = tensors["embeddings.word_embeddings.weight"]
    for first, second in _SWAPPED:
        table[[vocab[first], vocab[second]]] = table[[vocab[second], vocab[first]]]
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize("edit", [swap_words, swap_rows], ids=["tokenizer", "weights"])
def test_a_model_folder_edited_in_place_gets_the_numbers_of_a_fresh_run(
        tiny: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any) -> None:
    """``-m ./folder`` run, the folder edited where the probe texts cannot see it, run again: its own numbers."""
    model = tmp_path / "my-model"
    shutil.copytree(tiny_model, model)

    def run(out: Path, *options: str) -> None:
        assert cli.main(["run", "-m", str(model), "--data", str(tiny), "-t", *TASKS, "--output-folder", str(out),
                         "--quiet", *options]) == 0

    cached = ("--cache-dir", str(tmp_path / "cache"))
    run(tmp_path / "out", *cached)
    (first,) = stored(tmp_path / "out")
    edit(model)
    capsys.readouterr()
    run(tmp_path / "out", *cached)
    assert f"; {N_PASSAGES} passages and 4 queries encoded" in capsys.readouterr().out
    run(tmp_path / "fresh", "--no-cache")
    ((folder, fresh),) = stored(tmp_path / "fresh").items()
    assert folder != first and stored(tmp_path / "out") == {first: stored(tmp_path / "out")[first], folder: fresh}
    ours = every_score(tmp_path / "out")
    assert {name: scores for name, scores in ours.items() if name.startswith(folder.split("/")[1])} == every_score(
        tmp_path / "fresh")
    assert ours[f"{first.split('/')[1]}/{TASKS[0]}"] != ours[f"{folder.split('/')[1]}/{TASKS[0]}"]  # the edit tells


def test_a_hub_model_is_known_by_its_snapshot_commit_and_files(tiny: Path, tiny_model: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """A Hub name loaded from the Hugging Face cache: its snapshot's commit and files; an edit there is seen."""
    import huggingface_hub.constants

    from disastir_mteb.models import bundled
    from disastir_mteb.models.bundled import BUNDLED_MODEL, seed_hf_cache

    monkeypatch.setattr(bundled, "bundled_model_path", lambda: tiny_model)  # the small model's files under the name
    snapshot = seed_hf_cache(tmp_path / "hub")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    cache, out = tmp_path / "cache", tmp_path / "out"
    first = build_search(BUNDLED_MODEL, quiet(cache))
    assert first.identity.content.startswith("hub:") and f"{BUNDLED_MODEL}@{snapshot.name}" in first.identity.detail
    before = ndcg(evaluate(first, TASKS, data=tiny, output_folder=out, show_progress=False))
    again = build_search(BUNDLED_MODEL, quiet(cache))
    assert ndcg(evaluate(again, TASKS, data=tiny, output_folder=out, show_progress=False)) == before
    assert (again.identity.fingerprint, again.passages_encoded) == (first.identity.fingerprint, 0)
    swap_words(snapshot)  # the cached snapshot edited under the same commit
    with caplog.at_level(logging.WARNING):
        edited = build_search(BUNDLED_MODEL, quiet(cache))
        evaluate(edited, TASKS, data=tiny, output_folder=out, show_progress=False)
    assert edited.identity.fingerprint != first.identity.fingerprint and edited.passages_encoded == N_PASSAGES
    (warning,) = [r.getMessage() for r in caplog.records if "changed in place" in r.getMessage()]
    says(warning, f"{BUNDLED_MODEL}@{snapshot.name}", "Hub snapshot", "new revision")


def test_a_folder_digest_is_remembered_so_a_warm_start_reads_no_weight_file(tiny_model: Path, tmp_path: Path) -> None:
    """The files' digests are kept by size, times and inode: a second start hashes nothing, an edit is seen."""
    from disastir_mteb.models.content import folder_content

    model = tmp_path / "my-model"
    shutil.copytree(tiny_model, model)
    weights = (model / "model.safetensors").stat().st_size
    cold = folder_content(model, tmp_path / "memo")
    assert cold.bytes_read >= weights
    warm = folder_content(model, tmp_path / "memo")
    assert (warm.digest, warm.bytes_read) == (cold.digest, 0)
    swap_words(model)
    edited = folder_content(model, tmp_path / "memo")
    assert edited.digest != cold.digest and 0 < edited.bytes_read < weights  # the two tokenizer files, read again
    (model / "README.md").write_text("notes", encoding="utf-8")  # documentation shapes no vector
    assert folder_content(model, tmp_path / "memo").digest == edited.digest


def test_an_in_memory_model_is_read_by_its_weights_and_tokenizer(tiny_model: Path, tmp_path: Path) -> None:
    """Two models of equal weights and other vocabularies differ; encoding, train mode and a wrapper change nothing."""
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from disastir_mteb.models.content import object_content

    model = load(tiny_model)
    reference = object_content(model)
    assert reference is not None and reference.kind == "parameters"
    model.encode(["a flood warning"])
    model.train()
    assert object_content(SentenceTransformerEncoderWrapper(model)).digest == reference.digest
    edited = tmp_path / "edited"
    shutil.copytree(tiny_model, edited)
    swap_words(edited)
    assert object_content(SentenceTransformer(str(edited), device="cpu")).digest != reference.digest
    add_noise(model, scale=1e-6)  # a step far below what any probe tolerance would have seen
    assert object_content(model).digest != reference.digest


def test_a_result_set_of_two_models_by_content_is_refused(tiny: Path, tiny_model: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """One name and revision, two contents: a task rerun after the weights changed leaves a set of two models."""
    model = tmp_path / "my-model"
    shutil.copytree(tiny_model, model)
    out = tmp_path / "out"
    base = ["run", "-m", str(model), "--data", str(tiny), "--output-folder", str(out), "--model-revision", "v1",
            "--cache-dir", str(tmp_path / "cache"), "--quiet", "-t"]
    assert cli.main([*base, *TASKS]) == 0
    assert list(stored(out)) == ["local__my-model/v1"]
    swap_rows(model)
    assert cli.main([*base, TASKS[0]]) == 0  # one task evaluated again by the changed model, the other left
    capsys.readouterr()
    assert cli.main(["report", str(out), "--out", str(tmp_path / "report")]) != 0
    printed = capsys.readouterr()
    says((printed.err or printed.out).strip().splitlines()[-1], TASKS[0], "model fingerprint", "another model")


# ---------------------------------------------------------------------- a named model changed in place


def test_a_named_model_changed_in_place_is_encoded_again_after_one_warning(
        tiny: Path, tiny_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Same name and revision (the registry's), same dimension, other weights: a new entry and the right numbers."""
    import mteb
    from mteb.models import SentenceTransformerEncoderWrapper

    from disastir_mteb.models.bundled import BUNDLED_MODEL

    meta = mteb.get_model_meta(BUNDLED_MODEL)  # the small model under the registry's name and revision for MiniLM
    cache, out = tmp_path / "cache", tmp_path / "out"
    named = SentenceTransformerEncoderWrapper(load(tiny_model))
    named.mteb_model_meta = meta
    before = ndcg(evaluate(named, TASKS, data=tiny, cache_dir=cache, output_folder=out, show_progress=False))
    changed = SentenceTransformerEncoderWrapper(load(tiny_model))
    changed.mteb_model_meta = meta
    add_noise(changed.model)
    fresh = ndcg(evaluate(changed, TASKS, data=tiny, cache_dir=False, output_folder=tmp_path / "fresh",
                          show_progress=False))
    with caplog.at_level(logging.WARNING):
        searcher = build_search(changed, quiet(cache))
        assert ndcg(evaluate(searcher, TASKS, data=tiny, output_folder=out, show_progress=False)) == fresh != before
    warning, replaced = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    # which model, what of it changed, and what to do: a new revision
    says(warning, f"{meta.name}@{meta.revision}", "weights and tokenizer", "changed in place", "new revision")
    says(replaced, TASKS[0], "fingerprint")  # said once
    assert searcher.passages_encoded == N_PASSAGES and corpus_entries(cache) == 2
    # Its result files (the name and revision's folder) now hold the numbers of the model that computed them.
    assert stored(out) == {f"{meta.name.replace('/', '__')}/{meta.revision}": fresh}

    caplog.clear()
    with caplog.at_level(logging.WARNING):  # the changed model again: recognised, nothing encoded, no warning
        again = build_search(changed, quiet(cache))
        assert ndcg(evaluate(again, TASKS, data=tiny, output_folder=out, show_progress=False)) == fresh
    assert (again.passages_encoded, again.queries_encoded, caplog.records) == (0, 0, [])


def test_results_written_before_fingerprints_were_recorded_are_taken_as_they_are(tiny: Path, tmp_path: Path) -> None:
    """An upgrade evaluates no finished task again: a per-query file that records no fingerprint is believed."""
    out = tmp_path / "out"
    evaluate(HashingEncoder(name="test/hashing"), TASKS, data=tiny, cache_dir=False, output_folder=out,
             show_progress=False)
    for path in out.rglob("*_per_query.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        del record["encoding"]["model_fingerprint"]
        path.write_text(json.dumps(record), encoding="utf-8")
    written = {path: path.read_bytes() for path in out.rglob("*.json")}
    evaluate(HashingEncoder(name="test/hashing"), TASKS, data=tiny, cache_dir=False, output_folder=out,
             show_progress=False)
    assert {path: path.read_bytes() for path in out.rglob("*.json")} == written  # nothing evaluated or written again


# ---------------------------------------------------------------------- every kind of encoder


def test_the_probe_reaches_every_kind_of_encoder(tiny_model: Path) -> None:
    """The vectors of a model are its vectors, whatever wraps it; instructed passages are another computation."""
    from mteb.models import SentenceTransformerEncoderWrapper

    from disastir_mteb.models.adapter import as_mteb_encoder, with_instructions

    st = load(tiny_model)
    reference = probe_vectors(SentenceTransformerEncoderWrapper(load(tiny_model)))  # passages, then queries
    assert reference.shape == (2 * len(PROBE_TEXTS), 384) and reference.dtype == np.float32
    assert np.array_equal(probe_vectors(as_mteb_encoder(st)), reference)
    instructed_queries = probe_vectors(with_instructions(st, "disastir"))
    side = len(PROBE_TEXTS)
    assert np.array_equal(instructed_queries[:side], reference[:side])  # the instruction reaches queries only
    assert not np.allclose(instructed_queries[side:], reference[side:], atol=1e-3)
    instructed = probe_vectors(with_instructions(st, "disastir", passages=True))
    assert instructed.shape == reference.shape and not np.allclose(instructed, reference, atol=1e-3)
    hashing = HashingEncoder()
    both_sides = np.concatenate([hashing.embed(list(PROBE_TEXTS))] * 2)  # it encodes a query as a passage
    assert np.array_equal(probe_vectors(hashing), both_sides)
    assert np.array_equal(probe_vectors(as_mteb_encoder(hashing.embed)), both_sides)


class _OneShort(HashingEncoder):
    """An mteb encoder that loses the last text of every call."""

    def embed(self, texts: list[str]) -> np.ndarray:
        return super().embed(texts)[:-1]


def test_a_model_that_cannot_answer_the_probe_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as raised:
        build_search(_OneShort(), quiet(tmp_path))
    says(str(raised.value), "float32", "(3, 384)", "4 texts", "documents", "(4, dim)")
    with pytest.raises(ValueError) as raised:
        build_search(lambda texts: np.full((len(texts), 2), np.nan), quiet(tmp_path))
    says(str(raised.value), "NaN", "4 texts", "documents", repr(PROBE_TEXTS[0])[:14])


# ---------------------------------------------------------------------- the records: tolerance, damage


def test_rounding_keeps_the_fingerprint_and_a_change_does_not(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                                              ) -> None:
    vectors = np.random.default_rng(0).standard_normal((len(PROBE_TEXTS), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    def identity(probe: np.ndarray, precision: str | None = "float32", revision: str | None = "abc") -> str:
        return identify(probe=probe, name="org/model", revision=revision, precision=precision,
                        root=tmp_path).fingerprint

    first = identity(vectors)
    assert first == fingerprint_of(vectors) == identity(vectors)
    rounded = vectors + np.float32(1e-7) * np.sign(vectors)  # float32 rounding of another device or batch shape
    assert not np.array_equal(rounded, vectors) and identity(rounded) == first
    with caplog.at_level(logging.WARNING):
        changed = vectors.copy()
        changed[2, 7] += 4 * PROBE_TOLERANCE["float32"]
        assert identity(changed) == fingerprint_of(changed) != first
    assert len(caplog.records) == 1 and "computes other vectors" in caplog.records[0].getMessage()
    # Half precision rounds more, and gets a tolerance to match; each precision keeps its own records.
    assert identity(changed, "bfloat16") == fingerprint_of(changed)
    assert identity(vectors + np.float32(1e-3), "bfloat16") == fingerprint_of(changed)
    # Without a revision of its own, a model that matches none of the records is another model: no warning.
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert identity(vectors, revision=None) == first
        assert identity(changed, revision=None) == fingerprint_of(changed)
    assert caplog.records == []


# ---------------------------------------------------------------------- the command line, submit


def test_a_model_folder_without_revision_is_filed_under_its_fingerprint_and_submit_refuses_it(
        tiny: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``-m ./folder``: named ``local/<folder>``, no revision; the summary says where its results went."""
    model = tmp_path / "my-model"
    shutil.copytree(tiny_model, model)
    command = ["run", "-m", str(model), "--data", str(tiny), "-t", *TASKS, "--cache-dir", str(tmp_path / "cache"),
               "--output-folder", str(tmp_path / "out"), "--quiet"]
    assert cli.main(command) == 0
    (folder,) = stored(tmp_path / "out")
    assert folder.startswith("local__my-model/fingerprint-")
    printed = capsys.readouterr().out
    (summary,) = [line for line in printed.splitlines() if "task result(s)" in line]
    says(summary, "2 task result(s)", (tmp_path / "out" / "results" / folder).resolve(), "revision", "fingerprint",
         f"{N_PASSAGES} passages", "4 queries")
    assert cli.main(command) == 0
    assert "; 0 passages and 0 queries encoded" in capsys.readouterr().out

    assert cli.main(["submit", str(tmp_path / "out"), "--out", str(tmp_path / "submission")]) == 1
    printed = capsys.readouterr().out
    assert f"'{folder.split('/')[1]}'" in printed and "40-character" in printed  # the revision, and what one is

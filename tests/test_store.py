"""The embedding store: encode once, resume after a crash, never serve a wrong or half-written vector."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from disastir_mteb.search.store import EmbeddingStore, StoreKey, fingerprint_texts
from disastir_mteb.util.cache_dir import cache_root

TEXTS = [f"passage number {i} about floods" for i in range(50)]


class CountingEncoder:
    """Deterministic 8-dim vectors per text; counts rows and can fail after ``fail_after`` calls."""

    def __init__(self, dim: int = 8, fail_after: int | None = None) -> None:
        self.dim, self.fail_after = dim, fail_after
        self.rows = self.calls = 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("encoder died")
        self.calls += 1
        self.rows += len(texts)
        numbers = np.array([int(t.split()[2]) for t in texts], dtype=np.float32)
        return numbers[:, None] + np.arange(self.dim, dtype=np.float32) / 10


def key_for(texts: list[str], **overrides: object) -> StoreKey:
    fields: dict[str, object] = {"model_name": "org/model", "model_revision": "abc123", "side": "corpus",
                                 "prompt": "", "instructions": "", "texts_fingerprint": fingerprint_texts(texts)}
    return StoreKey(**(fields | overrides))  # type: ignore[arg-type]


def expected(texts: list[str], dim: int = 8) -> np.ndarray:
    return CountingEncoder(dim)(texts)


def test_fingerprint_is_ordered_and_length_prefixed() -> None:
    assert len(fingerprint_texts(["a"])) == 32
    assert fingerprint_texts(["ab", "c"]) != fingerprint_texts(["a", "bc"])
    assert fingerprint_texts(["a", "b"]) != fingerprint_texts(["b", "a"])
    assert fingerprint_texts(iter(["a", "b"])) == fingerprint_texts(["a", "b"])


def test_key_digest_and_folder() -> None:
    key = key_for(TEXTS)
    assert key.digest == key_for(TEXTS).digest
    assert key.folder_name == f"corpus/org__model/{key.digest[:16]}"
    for change in ({"model_revision": None}, {"prompt": "passage: "}, {"dtype": "float16"}, {"side": "queries"}):
        assert key_for(TEXTS, **change).digest != key.digest
    assert "org/model@abc123" in key.describe()
    with pytest.raises(ValueError, match="side"):
        key_for(TEXTS, side="docs")


def test_cache_root_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DISASTIR_CACHE_DIR", str(tmp_path / "a"))
    assert cache_root() == tmp_path / "a"
    monkeypatch.delenv("DISASTIR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "disastir_mteb"
    assert EmbeddingStore().root == tmp_path / "xdg" / "disastir_mteb"


def test_encodes_once_and_serves_a_read_only_memmap(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store, encoder = EmbeddingStore(tmp_path), CountingEncoder()
    first = store.get_or_encode(key_for(TEXTS), TEXTS, encoder, chunk_size=16, progress=False)
    assert store.last_encoded_rows == encoder.rows == 50 and encoder.calls == 4
    assert isinstance(first, np.memmap) and not first.flags.writeable
    np.testing.assert_array_equal(first, expected(TEXTS))
    folder = store.folder(key_for(TEXTS))
    assert sorted(p.name for p in folder.iterdir()) == ["embeddings.npy", "manifest.json"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["n_rows"] == 50 and manifest["dim"] == 8 and manifest["model_name"] == "org/model"
    assert manifest["versions"]["numpy"] == np.__version__

    with caplog.at_level(logging.INFO, logger="disastir_mteb.search.store"):
        again = EmbeddingStore(tmp_path).get_or_encode(key_for(TEXTS), TEXTS, encoder, progress=False)
    assert encoder.rows == 50
    np.testing.assert_array_equal(again, first)
    assert "cache hit" in caplog.text and not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_resumes_after_a_crash(tmp_path: Path) -> None:
    store = EmbeddingStore(tmp_path)
    dying = CountingEncoder(fail_after=2)
    with pytest.raises(RuntimeError, match="encoder died"):
        store.get_or_encode(key_for(TEXTS), TEXTS, dying, chunk_size=16, progress=False)
    assert store.last_encoded_rows == 32
    assert len(list(store.folder(key_for(TEXTS)).glob("chunk_*.npy"))) == 2
    resumed = CountingEncoder()
    vectors = store.get_or_encode(key_for(TEXTS), TEXTS, resumed, chunk_size=16, progress=False)
    assert dying.rows + resumed.rows == 50 and store.last_encoded_rows == 18
    np.testing.assert_array_equal(vectors, expected(TEXTS))


def test_truncated_file_is_rebuilt_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = EmbeddingStore(tmp_path)
    store.get_or_encode(key_for(TEXTS), TEXTS, CountingEncoder(), progress=False)
    path = store.folder(key_for(TEXTS)) / "embeddings.npy"
    path.write_bytes(path.read_bytes()[:-40])
    encoder = CountingEncoder()
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.store"):
        vectors = store.get_or_encode(key_for(TEXTS), TEXTS, encoder, progress=False)
    assert encoder.rows == 50
    np.testing.assert_array_equal(vectors, expected(TEXTS))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "truncated" in warnings[0] and str(path.parent) in warnings[0]


def test_other_models_and_texts_never_reuse_an_entry(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = EmbeddingStore(tmp_path)
    store.get_or_encode(key_for(TEXTS), TEXTS, CountingEncoder(), progress=False)
    for key, texts in ((key_for(TEXTS, model_name="org/other"), TEXTS), (key_for(TEXTS[:30]), TEXTS[:30])):
        encoder = CountingEncoder()
        store.get_or_encode(key, texts, encoder, progress=False)
        assert encoder.rows == len(texts) and store.folder(key) != store.folder(key_for(TEXTS))
    with pytest.raises(ValueError, match="fingerprint"):
        store.get_or_encode(key_for(TEXTS), TEXTS[:30], CountingEncoder(), progress=False)

    manifest_path = store.folder(key_for(TEXTS)) / "manifest.json"
    for field, value in (("model_name", "org/other"), ("n_rows", 40)):
        manifest = json.loads(manifest_path.read_text())
        manifest_path.write_text(json.dumps(manifest | {field: value}))
        encoder = CountingEncoder()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.store"):
            store.get_or_encode(key_for(TEXTS), TEXTS, encoder, progress=False)
        assert encoder.rows == 50
        assert len(caplog.records) == 1
    assert "was built for 40 passages, not 50: rebuilding" in caplog.records[0].getMessage()


def test_chunk_with_another_dimension_is_re_encoded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = EmbeddingStore(tmp_path)
    with pytest.raises(RuntimeError):
        store.get_or_encode(key_for(TEXTS), TEXTS, CountingEncoder(fail_after=3), chunk_size=16, progress=False)
    folder = store.folder(key_for(TEXTS))
    odd = sorted(folder.glob("chunk_*.npy"))[1]
    np.save(odd, np.zeros((16, 5), np.float32))  # a chunk written by some other encoder
    encoder = CountingEncoder()
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.store"):
        vectors = store.get_or_encode(key_for(TEXTS), TEXTS, encoder, chunk_size=16, progress=False)
    assert encoder.rows == 16 + 2  # the odd chunk and the never-written last one
    np.testing.assert_array_equal(vectors, expected(TEXTS))
    assert len(caplog.records) == 1 and "dimension 5" in caplog.records[0].getMessage()


def test_encoder_dimension_change_discards_older_chunks(tmp_path: Path) -> None:
    store = EmbeddingStore(tmp_path)
    with pytest.raises(RuntimeError):
        store.get_or_encode(key_for(TEXTS), TEXTS, CountingEncoder(dim=4, fail_after=2), chunk_size=16,
                            progress=False)
    encoder = CountingEncoder(dim=8)
    vectors = store.get_or_encode(key_for(TEXTS), TEXTS, encoder, chunk_size=16, progress=False)
    assert encoder.rows == 50
    np.testing.assert_array_equal(vectors, expected(TEXTS))


def test_float16_storage(tmp_path: Path) -> None:
    store = EmbeddingStore(tmp_path)
    key = key_for(TEXTS, dtype="float16")
    vectors = store.get_or_encode(key, TEXTS, CountingEncoder(), progress=False)
    assert vectors.dtype == np.float16 and isinstance(vectors, np.memmap)
    np.testing.assert_allclose(vectors.astype(np.float32), expected(TEXTS), rtol=1e-3)
    assert store.folder(key) != store.folder(key_for(TEXTS))
    assert (store.folder(key) / "embeddings.npy").stat().st_size < 50 * 8 * 2 + 200


def test_torch_output_is_accepted(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    vectors = EmbeddingStore(tmp_path).get_or_encode(
        key_for(TEXTS), TEXTS, lambda texts: torch.from_numpy(expected(texts)).to(torch.bfloat16), progress=False)
    assert vectors.dtype == np.float32 and vectors.shape == (50, 8)


@pytest.mark.parametrize(("output", "message"), [
    (lambda texts: np.zeros((len(texts) - 1, 4), np.float32), "shape"),
    (lambda texts: np.zeros(len(texts), np.float32), "shape"),
    (lambda texts: np.zeros((len(texts), 4), np.int64), "dtype"),
    (lambda texts: np.full((len(texts), 4), np.nan, np.float32), "NaN"),
    (lambda texts: np.full((len(texts), 4), 1e6, np.float32), "NaN or infinite values \\(as float16\\)"),
])
def test_bad_encoder_output_is_refused(tmp_path: Path, output: object, message: str) -> None:
    dtype = "float16" if "float16" in message else "float32"
    with pytest.raises(ValueError, match=message) as error:
        EmbeddingStore(tmp_path).get_or_encode(key_for(TEXTS, dtype=dtype), TEXTS, output,  # type: ignore[arg-type]
                                               chunk_size=16, progress=False)
    assert "rows 0-16" in str(error.value)


def test_progress_bar_reports_passages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    EmbeddingStore(tmp_path).get_or_encode(key_for(TEXTS), TEXTS, CountingEncoder(), chunk_size=16)
    assert "50/50" in capsys.readouterr().err

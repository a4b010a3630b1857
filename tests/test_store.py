"""The embedding store: encode once, resume after a crash, never serve a wrong or half-written vector."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from sentences import says

from disastir_mteb.search.store import EmbeddingStore, StoreKey, checksum, fingerprint_texts, row_checksums
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
                                 "prompt": "", "texts_fingerprint": fingerprint_texts(texts)}
    return StoreKey(**(fields | overrides))  # type: ignore[arg-type]


def expected(texts: list[str], dim: int = 8) -> np.ndarray:
    return CountingEncoder(dim)(texts)


def test_key_digests_are_pinned_so_a_refactor_cannot_silently_send_every_cache_to_be_encoded_again() -> None:
    """A changed digest moves every entry to a new folder (hours for a 7B model): it must be a deliberate change."""
    texts = fingerprint_texts(["a", "b"])
    assert StoreKey("org/model", "abc123", "corpus", "", texts).digest == "51c9d0fa996c9a8fd9b53da1c1a045d4"
    assert StoreKey("sentence-transformers/all-MiniLM-L6-v2", "c9745ed1", "queries", "query: ", texts, "float16", 32,
                    "float32", "ab" * 16).digest == "e60eb07883a28d06b18f5f853f54a1a1"


def test_fingerprint_is_ordered_and_length_prefixed() -> None:
    assert len(fingerprint_texts(["a"])) == 32
    assert fingerprint_texts(["ab", "c"]) != fingerprint_texts(["a", "bc"])
    assert fingerprint_texts(["a", "b"]) != fingerprint_texts(["b", "a"])
    assert fingerprint_texts(iter(["a", "b"])) == fingerprint_texts(["a", "b"])


def test_key_digest_and_folder() -> None:
    key = key_for(TEXTS)
    assert key.digest == key_for(TEXTS).digest
    assert key.folder_name == f"corpus/org__model/{key.digest[:16]}"
    for change in ({"model_revision": None}, {"prompt": "passage: "}, {"dtype": "float16"}, {"side": "queries"},
                   {"model_fingerprint": "0" * 32}):
        assert key_for(TEXTS, **change).digest != key.digest
    assert "org/model@abc123" in key.describe()
    assert "org/model@abc123#ffffffffffff " in key_for(TEXTS, model_fingerprint="f" * 32).describe()
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
    assert sorted(p.name for p in folder.iterdir()) == [".lock", "checksums.npy", "embeddings.npy", "manifest.json"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["n_rows"] == 50 and manifest["dim"] == 8 and manifest["model_name"] == "org/model"
    assert manifest["chunks"] == [[0, 16], [16, 32], [32, 48], [48, 50]]
    assert manifest["checksums"] == checksum(np.load(folder / "checksums.npy"))
    np.testing.assert_array_equal(np.load(folder / "checksums.npy"), row_checksums(expected(TEXTS)))
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
    says(caplog.records[0].getMessage(), "built for 40 passages", "not 50", "rebuilding")


def test_chunk_with_another_dimension_is_re_encoded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = EmbeddingStore(tmp_path)
    with pytest.raises(RuntimeError):
        store.get_or_encode(key_for(TEXTS), TEXTS, CountingEncoder(fail_after=3), chunk_size=16, progress=False)
    folder = store.folder(key_for(TEXTS))
    odd = sorted(folder.glob("chunk_*.npy"))[1]
    other = np.zeros((16, 5), np.float32)  # a sound chunk file (its checksum holds) written by some other encoder
    odd.unlink()
    np.save(folder / f"chunk_{16:010d}_{32:010d}_{checksum(other)}.npy", other)
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


# ---------------------------------------------------------------------- bytes damaged in place

MANY = [f"passage number {i} about floods" for i in range(3000)]  # 3000 x 8 float32: 96 KB


def _damage(path: Path, how: str, offset: int, size: int) -> None:
    """Damage ``size`` bytes of ``path`` at ``offset`` in place, keeping its size (what shape checks cannot see)."""
    data = bytearray(path.read_bytes())
    part = data[offset:offset + size]
    if how == "zeros":
        part = bytearray(len(part))
    elif how == "0x7f":
        part = bytearray(b"\x7f" * len(part))
    else:  # sign bits flipped: the last byte of every little-endian float32
        for i in range(3, len(part), 4):
            part[i] ^= 0x80
    data[offset:offset + size] = part
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["zeros", "0x7f", "sign bits"])
def test_damaged_bytes_in_a_finished_entry_re_encode_only_the_chunks_holding_them(
        tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture) -> None:
    """Before checksums, damaged bytes of the right file size were served: other scores, exit code 0."""
    order = np.random.default_rng(0).permutation(len(MANY))  # encoded out of text order, as the runner does
    store = EmbeddingStore(tmp_path)
    store.get_or_encode(key_for(MANY), MANY, CountingEncoder(), chunk_size=500, progress=False, order=order)
    path = store.folder(key_for(MANY)) / "embeddings.npy"
    header = np.load(path, mmap_mode="r").offset
    _damage(path, how, header + 1100 * 32 + 8, 48)  # rows 1100-1101 (32 bytes a row)

    encoder = CountingEncoder()
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.store"):
        vectors = EmbeddingStore(tmp_path).get_or_encode(key_for(MANY), MANY, encoder, chunk_size=500,
                                                         progress=False, order=order)
    np.testing.assert_array_equal(vectors, expected(MANY))
    rank = np.argsort(order)
    touched = {int(rank[row]) // 500 for row in (1100, 1101)}  # the chunks of the order holding those rows
    assert encoder.rows == 500 * len(touched) <= 1000
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    says(warning, f"Embedding cache {path}", "fails its checksum", "rows 1100-1101", "damaged on disk",
         f"re-encoding the {encoder.rows} passages", f"{len(touched)} chunk(s)")
    assert EmbeddingStore(tmp_path).cached(key_for(MANY), len(MANY)) is not None  # repaired, verifies again


def test_damaged_bytes_in_a_chunk_file_re_encode_that_chunk(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = EmbeddingStore(tmp_path)
    with pytest.raises(RuntimeError):
        store.get_or_encode(key_for(TEXTS), TEXTS, CountingEncoder(fail_after=3), chunk_size=16, progress=False)
    second = sorted(store.folder(key_for(TEXTS)).glob("chunk_*.npy"))[1]
    _damage(second, "sign bits", np.load(second, mmap_mode="r").offset + 64, 64)
    encoder = CountingEncoder()
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.store"):
        vectors = store.get_or_encode(key_for(TEXTS), TEXTS, encoder, chunk_size=16, progress=False)
    np.testing.assert_array_equal(vectors, expected(TEXTS))
    assert encoder.rows == 16 + 2  # the damaged chunk and the never-written last one
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    says(warning, second.parent, "1 unusable chunk file(s)", second.name, "(rows 16-32)", "fail their checksum")


def test_an_entry_of_an_older_format_is_encoded_again_once_after_one_warning_naming_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from disastir_mteb.search.store import STORE_FORMAT

    store = EmbeddingStore(tmp_path)
    store.get_or_encode(key_for(TEXTS), TEXTS, CountingEncoder(), chunk_size=16, progress=False)
    folder = store.folder(key_for(TEXTS))
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "format": STORE_FORMAT - 1}))
    assert store.cached(key_for(TEXTS), 50) is None

    encoder = CountingEncoder()
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.store"):
        vectors = EmbeddingStore(tmp_path).get_or_encode(key_for(TEXTS), TEXTS, encoder, chunk_size=16, progress=False)
        again = CountingEncoder()
        EmbeddingStore(tmp_path).get_or_encode(key_for(TEXTS), TEXTS, again, chunk_size=16, progress=False)
    assert encoder.rows == 50 and again.rows == 0  # encoded once more, in its folder, then served
    np.testing.assert_array_equal(vectors, expected(TEXTS))
    assert json.loads((folder / "manifest.json").read_text())["format"] == STORE_FORMAT
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert str(folder) in line and f"format {STORE_FORMAT - 1}" in line


def test_chunks_of_an_older_format_are_encoded_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = EmbeddingStore(tmp_path)
    with pytest.raises(RuntimeError):
        store.get_or_encode(key_for(TEXTS), TEXTS, CountingEncoder(fail_after=1), chunk_size=16, progress=False)
    folder = store.folder(key_for(TEXTS))
    record = json.loads((folder / "order.json").read_text())
    (folder / "order.json").write_text(json.dumps({**record, "format": record["format"] - 1}))
    encoder = CountingEncoder()
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.search.store"):
        store.get_or_encode(key_for(TEXTS), TEXTS, encoder, chunk_size=16, progress=False)
    assert encoder.rows == 50
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert str(folder) in line and "1 chunk file(s)" in line and f"format {record['format'] - 1}" in line


def test_an_entry_whose_manifest_lacks_the_checksum_of_its_row_checksums_is_not_served(tmp_path: Path) -> None:
    store = EmbeddingStore(tmp_path)
    store.get_or_encode(key_for(TEXTS), TEXTS, CountingEncoder(), chunk_size=16, progress=False)
    manifest_path = store.folder(key_for(TEXTS)) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({k: v for k, v in manifest.items() if k != "checksums"}))
    assert store.cached(key_for(TEXTS), 50) is None


def test_a_hit_removes_chunk_files_a_killed_consolidation_left(tmp_path: Path) -> None:
    """A run killed between writing the manifest and deleting its chunks leaves them; the next hit drops them."""
    store = EmbeddingStore(tmp_path)
    store.get_or_encode(key_for(TEXTS), TEXTS, CountingEncoder(), chunk_size=16, progress=False)
    leftover = store.folder(key_for(TEXTS)) / f"chunk_{0:010d}_{16:010d}_{checksum(expected(TEXTS[:16]))}.npy"
    np.save(leftover, expected(TEXTS[:16]))
    encoder = CountingEncoder()
    EmbeddingStore(tmp_path).get_or_encode(key_for(TEXTS), TEXTS, encoder, chunk_size=16, progress=False)
    assert encoder.rows == 0 and not leftover.exists()


def test_chunk_files_are_written_while_the_next_chunk_is_encoded(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """No serial stall per chunk: the first chunk's file waits until the second chunk is being encoded, which only
    a write on another thread allows (written in turn, it would wait for ever: the check gives up after 10 s)."""
    import threading

    from disastir_mteb.search import store as module

    encoder, second_chunk = CountingEncoder(), threading.Event()
    real = module.write_stream_atomic
    writers: set[str] = set()

    def encode(texts: list[str]) -> np.ndarray:
        if encoder.calls == 1:
            second_chunk.set()
        return encoder(texts)

    def write_after_the_next_chunk_began(path: Path, write: object) -> None:
        if path.name.startswith("chunk_"):
            writers.add(threading.current_thread().name)
            if not second_chunk.wait(10):
                raise AssertionError("the next chunk was not encoded while this chunk's file was written")
        real(path, write)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "write_stream_atomic", write_after_the_next_chunk_began)
    vectors = EmbeddingStore(tmp_path).get_or_encode(key_for(TEXTS), TEXTS, encode, chunk_size=10)
    assert np.array_equal(vectors, expected(TEXTS)) and encoder.rows == len(TEXTS)
    assert writers and threading.current_thread().name not in writers
    monkeypatch.setattr(module, "write_stream_atomic", real)
    again = CountingEncoder()
    assert np.array_equal(EmbeddingStore(tmp_path).get_or_encode(key_for(TEXTS), TEXTS, again, chunk_size=10),
                          expected(TEXTS)) and again.rows == 0  # every chunk file was written and the entry joined

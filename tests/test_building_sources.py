"""A build's first stages: an organisation's folder read with digests and licences, personal details found and
masked, and documents cut into deduplicated passages under the pool tokenizer's limit (real pypdf, datasketch,
semchunk, USearch and MiniLM's tokenizer)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from sentences import says
from tokenizers import Tokenizer

from disastir_mteb.building.passages import (
    MAX_TOKENS,
    clean,
    make_passages,
    near_duplicate_passages,
    passage_id,
)
from disastir_mteb.building.pii import find_pii, redact
from disastir_mteb.building.sources import SourceText, read_sources
from disastir_mteb.models.bundled import bundled_model_path
from disastir_mteb.util.errors import InvalidInput, MissingInput, NotAFolder
from disastir_mteb.util.tokens import token_counter

REPORT = "Hurricane Delta situation report. " + " ".join(
    f"Shelter {n} in Lake Charles opened at {600 + n} with {100 + 7 * n} cots; {40 + n} crews restore power in "
    f"Calcasieu Parish ward {n} within {n + 12} hours." for n in range(12))


def _pdf(text: str) -> bytes:
    """A one-page PDF whose text layer holds ``text`` (Helvetica, one line), with a correct cross-reference table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


@pytest.fixture
def documents(tmp_path: Path) -> Path:
    """Four category folders: plans (.md, .txt), a PDF, tweets as JSONL and CSV; a licence file for two of them."""
    root = tmp_path / "docs"
    for folder in ("Flood", "Hurricane", "Wildfire", "Social"):
        (root / folder).mkdir(parents=True)
    (root / "LICENSE").write_text("\nCC-BY-4.0\n")
    (root / "Social" / "LICENCE.txt").write_text("Internal use only\n")
    (root / "Hurricane" / "sitrep-1.txt").write_text(REPORT)
    (root / "Hurricane" / "plan.md").write_text("# Evacuation plan\n\nZone A leaves first.\n")
    (root / "Flood" / "bulletin.pdf").write_bytes(_pdf("River gauge at Baton Rouge reads 41 feet"))
    (root / "Social" / "tweets.jsonl").write_text(
        json.dumps({"text": "Water rising on Main St, need boat @CajunNavy"}) + "\n\n"
        + json.dumps({"text": "Shelter at 555-123-4567 is full", "id": 7}) + "\n")
    (root / "Social" / "more.csv").write_text("id,text\n1,\"Smoke over the ridge, road closed\"\n2,\n")
    (root / "Wildfire" / "notes.txt").write_bytes(b"\xef\xbb\xbfRed flag warning until 8 PM.")
    (root / "Wildfire" / "map.png").write_bytes(b"\x89PNG")
    (root / ".hidden.txt").write_text("not a source")
    return root


def test_every_source_is_recorded_with_its_digest_licence_and_category(documents: Path) -> None:
    sources, texts, skipped = read_sources(documents)
    by_path = {source.path: source for source in sources}
    assert list(by_path) == ["Flood/bulletin.pdf", "Hurricane/plan.md", "Hurricane/sitrep-1.txt", "Social/more.csv",
                             "Social/tweets.jsonl", "Wildfire/notes.txt"]
    sitrep = by_path["Hurricane/sitrep-1.txt"]
    assert sitrep.digest == hashlib.sha256(REPORT.encode()).hexdigest() and sitrep.size == len(REPORT)
    assert sitrep.licence == "CC-BY-4.0" and by_path["Social/tweets.jsonl"].licence == "Internal use only"
    assert {source.category for source in sources} == {"Flood", "Hurricane", "Social", "Wildfire"}
    assert skipped == {".png": 1}
    rows = [text for text in texts if text.kind == "row"]
    assert [(text.source, text.text) for text in rows] == [
        ("Social/more.csv#2", "Smoke over the ridge, road closed"),
        ("Social/tweets.jsonl#1", "Water rising on Main St, need boat @CajunNavy"),
        ("Social/tweets.jsonl#3", "Shelter at 555-123-4567 is full")]
    by_source = {text.source: text.text for text in texts}
    assert "River gauge at Baton Rouge reads 41 feet" in by_source["Flood/bulletin.pdf"]
    assert by_source["Wildfire/notes.txt"] == "Red flag warning until 8 PM."  # the BOM is not text
    assert all(source.licence == "MIT" for source in read_sources(documents, licence="MIT")[0])


def test_a_top_level_file_has_no_category(tmp_path: Path) -> None:
    (tmp_path / "one.txt").write_text("A single report.")
    (source,), (text,), _ = read_sources(tmp_path)
    assert source.category is None and text.category is None and source.licence is None


@pytest.mark.parametrize("case", ["missing", "file", "empty", "only-images"])
def test_a_folder_without_sources_is_one_sentence(tmp_path: Path, case: str) -> None:
    folder = tmp_path / "docs"
    if case == "file":
        folder.write_text("x")
    elif case != "missing":
        folder.mkdir()
        if case == "only-images":
            (folder / "a.png").write_bytes(b"x")
    error = NotAFolder if case == "file" else MissingInput
    with pytest.raises(error) as raised:
        read_sources(folder)
    says(str(raised.value), folder)


@pytest.mark.parametrize(("name", "content", "facts"), [
    ("latin1.txt", b"Caf\xe9 flooded", ["0xe9", "offset 3", "iconv"]),
    ("broken.jsonl", b'{"text": "ok"}\n{"text": \n', ["line 2", "JSON"]),
    ("notext.jsonl", b'{"body": "ok"}\n', ["line 1", "'text'"]),
    ("nocolumn.csv", b"id,body\n1,ok\n", ["'text'", "id, body"]),
    ("garbage.pdf", b"not a pdf at all", ["PDF"]),
])
def test_an_unreadable_source_is_one_sentence_naming_it(tmp_path: Path, name: str, content: bytes,
                                                       facts: list[str]) -> None:
    (tmp_path / "fine.txt").write_text("A readable report.")
    (tmp_path / name).write_bytes(content)
    with pytest.raises(InvalidInput) as raised:
        read_sources(tmp_path)
    says(str(raised.value), tmp_path / name, *facts)


def test_an_encrypted_or_scanned_pdf_is_one_sentence_saying_what_to_do(tmp_path: Path) -> None:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(612, 792)
    with open(tmp_path / "scanned.pdf", "wb") as fh:
        writer.write(fh)
    with pytest.raises(InvalidInput) as raised:
        read_sources(tmp_path)
    says(str(raised.value), tmp_path / "scanned.pdf", "OCR")
    writer.encrypt("secret", algorithm="RC4-128")
    with open(tmp_path / "scanned.pdf", "wb") as fh:
        writer.write(fh)
    with pytest.raises(InvalidInput) as raised:
        read_sources(tmp_path)
    says(str(raised.value), tmp_path / "scanned.pdf", "encrypted", "qpdf --decrypt")


def test_a_50_mb_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    with open(tmp_path / "export.txt", "wb") as fh:
        fh.truncate(50_000_000)  # sparse: the size is checked before any byte is read
    with pytest.raises(InvalidInput) as raised:
        read_sources(tmp_path)
    says(str(raised.value), tmp_path / "export.txt", "50.0 MB", "--max-file-mb")
    (source,), _, _ = read_sources(tmp_path, max_mb=60)
    assert source.size == 50_000_000


def test_personal_details_are_counted_and_masked() -> None:
    text = ("Call (555) 123-4567 or +1 555 123 4567, mail jo.doe@fema.gov, see https://fema.gov/a?b=c@d and "
            "@FEMA_Region4. Flood on 2023-04-15; 1,341,986 labels; FM 1960 road; meet @ noon.")
    assert find_pii(text) == {"phone": 2, "email": 1, "url": 1, "handle": 1}
    assert redact(text) == ("Call [PHONE] or [PHONE], mail [EMAIL], see [URL] and [HANDLE]. Flood on 2023-04-15; "
                            "1,341,986 labels; FM 1960 road; meet @ noon.")


def test_clean_joins_broken_words_and_keeps_paragraphs() -> None:
    assert clean("Disas-\nter  response\x00 plan\r\n\r\n\r\nSecond   para-\ngraph.\n") == (
        "Disaster response plan\n\nSecond paragraph.")


@pytest.fixture(scope="module")
def count_tokens():
    """MiniLM's tokenizer file, which truncates at 128 tokens: the counter counts past it."""
    return token_counter(Tokenizer.from_file(str(bundled_model_path() / "tokenizer.json")))


def test_documents_become_deduplicated_passages_under_the_token_limit(count_tokens) -> None:
    long_plan = "\n\n".join(f"Section {n}. " + "Evacuation routes follow the levee road to the shelter. " * 12
                            for n in range(6))
    resent = REPORT.replace("Hurricane Delta situation report.", "Hurricane Delta situation report (resent).")
    texts = [SourceText("a/plan.txt", long_plan, "document", "a"),
             SourceText("a/sitrep.txt", REPORT, "document", "a"),
             SourceText("b/sitrep-copy.txt", "  " + REPORT.upper() + "\n", "document", "b"),
             SourceText("b/sitrep-resent.txt", resent, "document", "b"),
             SourceText("b/blank.txt", " \n\x00\n", "document", "b"),
             SourceText("c/t.jsonl#1", "Levee breach near Main St. " * 40, "row", "c")]
    passages, dropped = make_passages(texts, count_tokens)
    assert {(d.source, d.reason, d.duplicate_of) for d in dropped} == {
        ("b/sitrep-copy.txt", "exact-duplicate", "a/sitrep.txt"),
        ("b/sitrep-resent.txt", "near-duplicate", "a/sitrep.txt"),
        ("b/blank.txt", "empty", None)}
    plan = [p for p in passages if p.source == "a/plan.txt"]
    assert len(plan) > 1 and all(count_tokens(p.text) < MAX_TOKENS for p in plan)
    assert " ".join(p.text for p in plan).split() == clean(long_plan).split()  # nothing lost between chunks
    assert sum(count_tokens(p.text) for p in plan) > 128
    (tweet,) = [p for p in passages if p.kind == "row"]
    assert tweet.text == clean(texts[-1].text) and count_tokens(tweet.text) > MAX_TOKENS  # a row stays whole
    assert all(p.id == passage_id(p.text) for p in passages)
    again, _ = make_passages(texts, count_tokens)
    assert again == passages


def test_near_duplicate_passages_are_found_on_unit_vectors() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(6, 32)).astype(np.float32)
    vectors[4] = vectors[1] + 0.05 * rng.normal(size=32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    assert near_duplicate_passages(vectors) == {4: 1}
    assert near_duplicate_passages(vectors[:1]) == {}

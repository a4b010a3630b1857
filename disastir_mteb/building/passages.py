"""Documents to passages, as the DisastIR corpus was made: cleaned, deduplicated, cut into chunks of the pool's tokens.

Stage 2 of a build. Exact copies go first, then near-duplicate documents (MinHash LSH over word shingles: a report
sent twice with a new date line), then each document is cut into chunks under the token limit of the pool's
tokenizer, at paragraph and sentence boundaries where it can be; a row (a tweet) stays whole. Near-duplicate
passages at cosine > 0.9 need an encoder, so they are found later, on the pool's vectors
(:func:`near_duplicate_passages`). Every dropped text keeps the reason and the text it duplicates, for the report.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from disastir_mteb.building.sources import Kind, SourceText
from disastir_mteb.util.install_hint import require_extra

__all__ = ["MAX_TOKENS", "NEAR_DUPLICATE_COSINE", "NEAR_DUPLICATE_JACCARD", "Dropped", "Passage", "clean",
           "make_passages", "near_duplicate_passages", "passage_id"]

#: Passages stay under this many tokens of the pool's tokenizer (DisastIR: chunks < 256 tokens).
MAX_TOKENS = 256
#: Estimated Jaccard similarity of word 5-shingles above which a document is a near copy of an earlier one.
NEAR_DUPLICATE_JACCARD = 0.8
#: Cosine above which a passage is a near copy of an earlier one (DisastIR's step 5).
NEAR_DUPLICATE_COSINE = 0.9
_SHINGLE = 5
_PERMUTATIONS = 128
_SEED = 1


@dataclass(frozen=True)
class Passage:
    """A corpus passage with the source it was cut from."""

    id: str
    text: str
    source: str
    category: str | None
    kind: Kind


@dataclass(frozen=True)
class Dropped:
    """A text left out of the corpus, why (``empty``, ``exact-duplicate``, ``near-duplicate``), and of what."""

    source: str
    reason: str
    duplicate_of: str | None = None


def clean(text: str) -> str:
    """``text`` as a passage holds it: NFC, no control characters, spaces collapsed, paragraphs kept for the chunker.

    A word broken at a line's end, as PDF text extraction leaves it, is joined.
    """
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = "".join(c for c in text if c in "\n\t" or unicodedata.category(c)[0] != "C")
    text = re.sub(r"(\w)-\n(\w)", r"\1\2", text)  # "disas-\nter", as PDF text extraction leaves it
    paragraphs = (re.sub(r"\s+", " ", paragraph).strip() for paragraph in re.split(r"\n\s*\n", text))
    return "\n\n".join(paragraph for paragraph in paragraphs if paragraph)


def passage_id(text: str) -> str:
    """A passage's id from its text alone, so a rebuild gives the same ids in any order."""
    return "b" + hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def make_passages(texts: Sequence[SourceText], count_tokens: Callable[[str], int], *,
                  max_tokens: int = MAX_TOKENS,
                  jaccard: float = NEAR_DUPLICATE_JACCARD) -> tuple[list[Passage], list[Dropped]]:
    """The corpus's passages from ``texts`` (in their order), and what was dropped and why.

    ``count_tokens`` counts a text's tokens as the pool's tokenizer does
    (:func:`~disastir_mteb.util.tokens.token_counter`).
    """
    kept, dropped = _deduplicated([(text, clean(text.text)) for text in texts], jaccard)
    require_extra("semchunk", extra="build", needed_by="Cutting documents into passages")
    import semchunk

    chunk = semchunk.chunkerify(count_tokens, chunk_size=max_tokens - 1)
    passages, seen = [], {}
    for text, cleaned in kept:
        pieces = [cleaned] if text.kind == "row" else chunk(cleaned)
        for piece in pieces:
            piece = piece.strip()
            if not piece:
                continue
            key = passage_id(piece)
            if key in seen:  # a boilerplate paragraph (a header, a disclaimer) cut from several documents
                dropped.append(Dropped(text.source, "exact-duplicate", seen[key]))
                continue
            seen[key] = text.source
            passages.append(Passage(key, piece, text.source, text.category, text.kind))
    return passages, dropped


def _deduplicated(texts: list[tuple[SourceText, str]],
                  jaccard: float) -> tuple[list[tuple[SourceText, str]], list[Dropped]]:
    require_extra("datasketch", extra="build", needed_by="Finding near-duplicate documents")
    from datasketch import MinHash, MinHashLSH

    kept, dropped, exact = [], [], {}
    lsh = MinHashLSH(threshold=jaccard, num_perm=_PERMUTATIONS)
    for text, cleaned in texts:
        if not cleaned:
            dropped.append(Dropped(text.source, "empty"))
            continue
        key = hashlib.sha256(" ".join(cleaned.casefold().split()).encode("utf-8")).hexdigest()
        if key in exact:
            dropped.append(Dropped(text.source, "exact-duplicate", exact[key]))
            continue
        exact[key] = text.source
        if text.kind == "document":
            words = cleaned.casefold().split()
            shingles = {" ".join(words[i:i + _SHINGLE]) for i in range(max(1, len(words) - _SHINGLE + 1))}
            signature = MinHash(num_perm=_PERMUTATIONS, seed=_SEED)
            signature.update_batch([shingle.encode("utf-8") for shingle in sorted(shingles)])
            earlier = lsh.query(signature)
            if earlier:
                dropped.append(Dropped(text.source, "near-duplicate", min(earlier)))
                continue
            lsh.insert(text.source, signature)
        kept.append((text, cleaned))
    return kept, dropped


def near_duplicate_passages(vectors: np.ndarray, *, cosine: float = NEAR_DUPLICATE_COSINE) -> dict[int, int]:
    """Row -> the earlier row it nearly copies (cosine above ``cosine``), for unit-length ``vectors`` in corpus order.

    An exact search over USearch's index: a pair is compared once, and the earlier passage is the one kept.
    """
    from usearch.index import search

    count = len(vectors)
    if count < 2:
        return {}
    matches = search(vectors, vectors, min(count, 11), metric="cos", exact=True)
    copies: dict[int, int] = {}
    for row in range(count):
        for key, distance in zip(matches.keys[row], matches.distances[row], strict=True):
            if key < row and 1.0 - float(distance) > cosine and key not in copies:
                copies[row] = int(key)
                break
    return copies

"""An independent re-implementation of the DisastIR authors' NDCG@10, working on TEXTS.

Written from the formula in DMRetriever ``eva/evaluation/metrics.py`` (zero-fill variant):
gain 2^g - 1, discount log2(rank + 1), ideal DCG from all judged grades of the query, 0 when the
ideal is 0; queries without judgements are skipped; the task score is the mean over queries.
It shares no code with the plugin, so agreement with mteb's ndcg_at_10 is evidence of parity.
"""

from __future__ import annotations

import json
import math
from pathlib import Path


def _dcg(grades: list[int]) -> float:
    return sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(grades))


def authors_ndcg_at_10(query_file: Path, qrels_file: Path, corpus_file: Path,
                       ranked_ids: dict[str, list[str]]) -> float:
    """Mean zero-fill NDCG@10 of ranked corpus ids per query id, judged through text-keyed qrels."""
    queries = {r["query_id"]: r["user_query"].strip() for r in json.loads(query_file.read_text())}
    corpus = {}
    for line in corpus_file.read_text().splitlines():
        row = json.loads(line)
        corpus[str(row["corpus_id"])] = row["text"].strip()
    qrels: dict[str, dict[str, int]] = {}
    for row in json.loads(qrels_file.read_text()):
        qrels.setdefault(row["user_query"].strip(), {})[row["passage"].strip()] = row["score"]
    total, counted = 0.0, 0
    for query_id, text in queries.items():
        judged = qrels.get(text, {})
        if not judged:
            continue
        retrieved = [judged.get(corpus[doc_id], 0) for doc_id in ranked_ids.get(query_id, [])[:10]]
        ideal = _dcg(sorted(judged.values(), reverse=True)[:10])
        total += _dcg(retrieved) / ideal if ideal else 0.0
        counted += 1
    return total / counted

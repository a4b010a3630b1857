"""An independent re-implementation of the DisastIR authors' metrics@10, working on TEXTS.

Written from DMRetriever ``eva/evaluation/metrics.py``: gain 2^g - 1, discount log2(rank + 1), ideal DCG
from all judged grades of the query, 0 when the ideal is 0; RR from the first retrieved passage graded
above 0; recall over the passages judged above 0; queries without judgements are skipped; the task score
is the mean over queries. Zero-fill: an unjudged passage has grade 0; ignore-list: unjudged passages are
taken out of the top 10. It shares no code with the plugin, so agreement with mteb's ``ndcg_at_10`` and
with the plugin's :mod:`disastir_mteb.scoring.authors` is evidence of parity.
"""

from __future__ import annotations

import json
import math
from pathlib import Path


def _dcg(grades: list[int]) -> float:
    return sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(grades))


def _read(query_file: Path, qrels_file: Path, corpus_file: Path) -> tuple[dict, dict, dict]:
    """(query id -> text, corpus id -> text, query text -> {passage text: grade}), texts stripped."""
    queries = {r["query_id"]: r["user_query"].strip() for r in json.loads(query_file.read_text())}
    corpus = {}
    for line in corpus_file.read_text().splitlines():
        row = json.loads(line)
        corpus[str(row["corpus_id"])] = row["text"].strip()
    qrels: dict[str, dict[str, int]] = {}
    for row in json.loads(qrels_file.read_text()):
        qrels.setdefault(row["user_query"].strip(), {})[row["passage"].strip()] = row["score"]
    return queries, corpus, qrels


def authors_ndcg_at_10(query_file: Path, qrels_file: Path, corpus_file: Path,
                       ranked_ids: dict[str, list[str]]) -> float:
    """Mean zero-fill NDCG@10 of ranked corpus ids per query id, judged through text-keyed qrels."""
    queries, corpus, qrels = _read(query_file, qrels_file, corpus_file)
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


def authors_metrics_at_10(query_file: Path, qrels_file: Path, corpus_file: Path,
                          ranked_ids: dict[str, list[str]]) -> dict[str, float]:
    """Every metric the authors report for one task: ``{zero,ignore}_{ndcg,rr,recall}`` means and ``unannotated``."""
    queries, corpus, qrels = _read(query_file, qrels_file, corpus_file)
    sums = dict.fromkeys(["zero_ndcg", "zero_rr", "zero_recall", "ignore_ndcg", "ignore_rr", "ignore_recall"], 0.0)
    counted = pairs = unannotated = 0
    for query_id, text in queries.items():
        passages = [corpus[doc_id] for doc_id in ranked_ids.get(query_id, [])[:10]]
        pairs += len(passages)
        judged = qrels.get(text, {})
        if not judged:
            continue
        unannotated += sum(1 for p in passages if p not in judged)
        ideal = _dcg(sorted(judged.values(), reverse=True)[:10])
        relevant_total = sum(1 for g in judged.values() if g > 0)
        for name, grades in (("zero", [judged.get(p, 0) for p in passages]),
                             ("ignore", [judged[p] for p in passages if p in judged])):
            sums[f"{name}_ndcg"] += _dcg(grades) / ideal if ideal else 0.0
            ranks = [rank for rank, g in enumerate(grades, start=1) if g > 0]
            sums[f"{name}_rr"] += 1 / ranks[0] if ranks else 0.0
            sums[f"{name}_recall"] += len(ranks) / relevant_total if relevant_total else 0.0
        counted += 1
    return {**{key: value / counted for key, value in sums.items()}, "unannotated": unannotated / pairs}

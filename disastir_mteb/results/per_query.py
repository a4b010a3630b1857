"""Per-query NDCG@10 and top-10 rankings, kept beside mteb's result files for paired tests and top-10 overlap.

The file is ``disastir_per_query/<Task>_per_query.json`` in the result set's folder: mteb's loaders read
``*/*/*.json`` and ``*/*/experiments/*/*.json`` only, so it never passes for a result. Each top 10 is stored in
the order it is scored (:func:`~disastir_mteb.scoring.authors.ranking`), so re-scoring a stored list gives the
stored number.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from disastir_mteb.data.data_cache import source_digest
from disastir_mteb.data.layout import find_task_files
from disastir_mteb.scoring.authors import TOP_K, ranking, score_run
from disastir_mteb.util.atomic import write_json_atomic
from disastir_mteb.util.digest import short_digest
from disastir_mteb.util.errors import InvalidInput, MissingInput
from disastir_mteb.vocabulary.metadata import MAIN_SCORE_KEY
from disastir_mteb.vocabulary.taxonomy import Split, get_spec, is_task_name

__all__ = ["DIGEST_KEY", "FOLDER", "PerQuery", "ScoreTop10", "data_digests", "ndcg_by_id",
           "per_query_file", "per_query_path", "read_per_query", "score_queries", "with_data_digest", "write_per_query"]

#: NDCG@10 of every judged query from its ranked passage ids: ``{query id: [doc id, ...]} -> {query id: NDCG@10}``.
ScoreTop10 = Callable[[Mapping[str, Sequence[str]]], Mapping[str, float]]

FOLDER = "disastir_per_query"
_FORMAT = 1
#: The key of a data record (``DataSource.record``) holding the content digest of the files its task read.
DIGEST_KEY = "digest"


@dataclass(frozen=True)
class PerQuery:
    """One task's per-query NDCG@10 and top 10s, with the records of how they were made (None in older files)."""

    task_name: str
    ndcg_at_10: Mapping[str, float]
    top10: Mapping[str, list[str]]
    data: Mapping[str, object] | None = None
    encoding: Mapping[str, object] | None = None
    provenance: Mapping[str, object] | None = None

    @property
    def mean(self) -> float:
        """Mean NDCG@10 over the queries (the task's ``ndcg_at_10``)."""
        return sum(self.ndcg_at_10.values()) / len(self.ndcg_at_10) if self.ndcg_at_10 else float("nan")


def score_queries(task_name: str, results: Mapping[str, Mapping[str, float]], score: ScoreTop10) -> PerQuery:
    """Each query's top 10 of ``results`` ({qid: {doc: similarity}}) and its NDCG@10 as ``score`` gives it."""
    top10 = {query_id: ranking(similarities, TOP_K) for query_id, similarities in results.items()}
    scores = score(top10)
    return PerQuery(task_name, {query_id: float(value) for query_id, value in scores.items()},
                    {query_id: top10.get(query_id, []) for query_id in scores})


def ndcg_by_id(qrels: Mapping[str, Mapping[str, int]]) -> ScoreTop10:
    """NDCG@10 of top-10 lists against id-keyed ``qrels``, as ``trec_eval``'s ``ndcg_cut_10`` (mteb's) gives it."""
    judged = {query_id: {doc: max(value, 0) for doc, value in docs.items()} for query_id, docs in qrels.items() if docs}

    def score(top10: Mapping[str, Sequence[str]]) -> dict[str, float]:
        run = {query_id: ranked for query_id, ranked in top10.items() if query_id in judged}
        return {query_id: scores.ndcg_zero_fill
                for query_id, scores in score_run(run, judged, TOP_K, gain=float).per_query.items()}

    return score


def per_query_file(result_set_folder: str | Path, task_name: str) -> Path:
    """Where a result set's per-query file of ``task_name`` lives."""
    return Path(result_set_folder) / FOLDER / f"{task_name}_per_query.json"


def per_query_path(task_result_path: str | Path) -> Path:
    """Where the per-query file of the mteb result file ``task_result_path`` lives."""
    path = Path(task_result_path)
    return per_query_file(path.parent, path.stem)


def data_digests(folder: str | Path, task_names: Sequence[str]) -> dict[str, str | None]:
    """Each full-set or built task's digest of the files it reads in ``folder`` (corpus, queries, qrels); else None.

    The bytes, not the folder's name: a name survives an edited qrels file or another folder moved into its place.
    """
    digests: dict[str, str | None] = dict.fromkeys(task_names)
    try:
        files = find_task_files(folder)
    except (OSError, ValueError):
        return digests
    for name in task_names:
        if not is_task_name(name) or get_spec(name).split is not Split.full:
            continue
        try:
            query, qrels = files.for_task(get_spec(name))
            parts = [source_digest(path) for path in (files.corpus, query, qrels)]
        except (OSError, ValueError):  # a file gone, or a built benchmark's task asked of another folder
            continue
        digests[name] = short_digest(json.dumps(parts).encode("utf-8"))
    return digests


def with_data_digest(data: Mapping[str, object], task_name: str) -> dict[str, object]:
    """A task's data record with :data:`DIGEST_KEY` for a local folder (the Hub's revision pins its bytes already)."""
    record = dict(data)
    source = record.get("source")
    if isinstance(source, str) and not source.startswith("hf:"):
        digest = data_digests(source, [task_name])[task_name]
        if digest is not None:
            record[DIGEST_KEY] = digest
    return record


def write_per_query(path: str | Path, record: PerQuery, *, settings: Mapping[str, object] | None = None,
                    data: Mapping[str, object] | None = None, provenance: Mapping[str, object] | None = None) -> Path:
    """Write ``record`` atomically; ``settings``, ``data`` and ``provenance`` default to the record's own.

    ``settings`` (how the vectors were computed) is kept here because mteb's result file has no place for it.
    """
    data = data if data is not None else record.data
    settings = settings if settings is not None else record.encoding
    provenance = provenance if provenance is not None else record.provenance
    content: dict[str, object] = {"format": _FORMAT, "task_name": record.task_name, "metric": MAIN_SCORE_KEY}
    if settings:
        content["encoding"] = dict(settings)
    if data:
        content["data"] = dict(data)
    if provenance:
        content["provenance"] = dict(provenance)
    content["queries"] = {qid: {MAIN_SCORE_KEY: score, "top10": record.top10.get(qid, [])}
                          for qid, score in record.ndcg_at_10.items()}
    write_json_atomic(Path(path), content)
    return Path(path)


def read_per_query(path: str | Path) -> PerQuery:
    """Read a file written by :func:`write_per_query`.

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: the file is not a per-query record of this format.
    """
    path = Path(path)
    if not path.is_file():
        raise MissingInput(f"No per-query scores at {path}: rerun the task with disastir-mteb run "
                           "(plain `mteb run` does not write them).")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        queries = data["queries"]
        used, encoding, provenance = data.get("data"), data.get("encoding"), data.get("provenance")
        return PerQuery(str(data["task_name"]), {q: float(v[MAIN_SCORE_KEY]) for q, v in queries.items()},
                        {q: [str(d) for d in v["top10"]] for q, v in queries.items()},
                        dict(used) if isinstance(used, dict) else None,
                        dict(encoding) if isinstance(encoding, dict) else None,
                        dict(provenance) if isinstance(provenance, dict) else None)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise InvalidInput(f"{path} is not a per-query score file ({type(error).__name__}: {error}).") from None

"""Per-query NDCG@10 and top-10 rankings, kept beside mteb's result files.

mteb writes a task's mean scores only. A paired test between two models and the overlap of an
ANN run with an exact one both need each query's score and ranking, so the runner writes one
small file per task next to mteb's ``<Task>.json``:
``<revision folder>[/experiments/<name>]/disastir_per_query/<Task>_per_query.json`` (named like
mteb's ``<Task>_predictions.json``). mteb's result loaders read ``*/*/*.json`` and
``*/*/experiments/*/*.json`` only, and the stem is not a task name, so they never pass for results.

Each query's top 10 is its run ranked as it is scored (:func:`~disastir_mteb.scoring.authors.ranking`: similarity,
then passage id, both descending, as ``trec_eval`` and mteb rank ties), so the stored list is the scored list. A
DisastIR task scores it (:meth:`~disastir_mteb.tasks.retrieval.AbsTaskDisastIR.ndcg_at_10_per_query`: the task's
gain, keyed by text as the authors key it), so the mean is the task's ``ndcg_at_10``; any other retrieval task's
per-query NDCG@10 is the same computation on ids with the qrels' values as gains (:func:`ndcg_by_id`), which is
``trec_eval``'s ``ndcg_cut_10``, mteb's own.
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
from disastir_mteb.vocabulary.taxonomy import ALL_TASK_NAMES, Split, get_spec

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
    """One task's per-query record.

    Attributes:
        task_name: the mteb task name.
        ndcg_at_10: query id -> NDCG@10 (fraction), for every scored query.
        top10: query id -> the ids of the 10 best passages, best first.
        data: which data the scores come from (:meth:`~disastir_mteb.data.source.DataSource.record`, with the
            digest of the task's files); None in files written before it was recorded.
        encoding: how the vectors were computed (batch size, ``model_dtype``, device, token limit; see
            :func:`write_per_query`); None when not recorded.
        provenance: everything the scores depend on (:meth:`~disastir_mteb.vocabulary.provenance.TaskProvenance.record`:
            model, settings, data and corpus digests, gain, and their digest); None when not recorded.
    """

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
    """Each query's top 10 of ``results`` ({qid: {doc: similarity}}) and its NDCG@10 as ``score`` gives it.

    Args:
        task_name: the mteb task name.
        results: the task's run, as mteb scores it.
        score: NDCG@10 per judged query from the top-10 lists; a DisastIR task's ``ndcg_at_10_per_query``, or
            :func:`ndcg_by_id` of the qrels for any other retrieval task.

    Returns:
        The record of every query ``score`` scores, each with the top 10 it was scored on (empty without a run).
    """
    top10 = {query_id: ranking(similarities, TOP_K) for query_id, similarities in results.items()}
    scores = score(top10)
    return PerQuery(task_name, {query_id: float(value) for query_id, value in scores.items()},
                    {query_id: top10.get(query_id, []) for query_id in scores})


def ndcg_by_id(qrels: Mapping[str, Mapping[str, int]]) -> ScoreTop10:
    """NDCG@10 of top-10 lists against id-keyed ``qrels``, their values as gains: mteb's NDCG@10 for any task.

    The package's one NDCG (:func:`~disastir_mteb.scoring.authors.score_run`) with ``trec_eval``'s ``ndcg_cut_10``
    conventions, which mteb scores with: the gain is the qrels' value as it is (a negative one counts 0), and
    queries without judgements, or without a list, are left out.
    """
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
    """Each full-set task's content digest of the files it reads in ``folder``: corpus, query file, qrels file.

    What "the same data" means for a result: a folder's name and generator marker survive an edited qrels file, a
    regenerated sample of another seed copied over it, or another folder moved into its place; the bytes do not.
    Each file's digest is :func:`~disastir_mteb.data.data_cache.source_digest` (xxh3-128 of every byte, once per
    process while the file is unchanged: a run whose data cache keyed the task's join on these files hashes
    nothing again); a task's digest joins its three.

    Args:
        folder: a folder in the published layout.
        task_names: full-set task names (another name gets None: a DisastIR-Test or DevLite task also reads a
            DevLite folder, which its per-query record does not name).

    Returns:
        Task name -> its digest, or None where the folder holds no files for it, cannot be read, or is no
        published layout.
    """
    digests: dict[str, str | None] = dict.fromkeys(task_names)
    try:
        files = find_task_files(folder)
    except (OSError, ValueError):
        return digests
    for name in task_names:
        if name not in ALL_TASK_NAMES or get_spec(name).split is not Split.full:
            continue
        try:
            query, qrels = files.for_task(get_spec(name))
            parts = [source_digest(path) for path in (files.corpus, query, qrels)]
        except OSError:
            continue
        digests[name] = short_digest(json.dumps(parts).encode("utf-8"))
    return digests


def with_data_digest(data: Mapping[str, object], task_name: str) -> dict[str, object]:
    """A task's data record: ``data`` (``DataSource.record``) with :data:`DIGEST_KEY` for a local folder's task.

    The digest (:func:`data_digests`) lets a later command find the folder a run read and check that it still
    holds the same files (:mod:`~disastir_mteb.results.data_used`). The Hub's data needs none (its revision pins
    the bytes), nor a task :func:`data_digests` gives none.
    """
    record = dict(data)
    source = record.get("source")
    if isinstance(source, str) and not source.startswith("hf:"):
        digest = data_digests(source, [task_name])[task_name]
        if digest is not None:
            record[DIGEST_KEY] = digest
    return record


def write_per_query(path: str | Path, record: PerQuery, *, settings: Mapping[str, object] | None = None,
                    data: Mapping[str, object] | None = None, provenance: Mapping[str, object] | None = None) -> Path:
    """Write ``record`` atomically (a killed run never leaves half a file).

    ``settings`` (how the vectors were computed: batch size, model dtype, device, token limit; default
    ``record.encoding``) is kept beside the scores under ``"encoding"``: mteb's result file has no place for it, and the
    batch size, unlike the precision, does not get its own results folder. ``data`` (which data was
    read; default ``record.data``) goes under ``"data"``, so reports can say when scores come from synthetic data;
    ``provenance`` (everything the scores depend on; default ``record.provenance``) under ``"provenance"``.
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

"""Per-query NDCG@10 and top-10 rankings, kept beside mteb's result files.

mteb writes a task's mean scores only. A paired test between two models and the overlap of an
ANN run with an exact one both need each query's score and ranking, so the runner writes one
small file per task next to mteb's ``<Task>.json``:
``<revision folder>[/experiments/<name>]/disastir_per_query/<Task>_per_query.json`` (named like
mteb's ``<Task>_predictions.json``). mteb's result loaders read ``*/*/*.json`` and
``*/*/experiments/*/*.json`` only, and the stem is not a task name, so they never pass for results.

Scores come from ``pytrec_eval`` on the same run and qrels mteb scores (the task's gains, i.e.
exponential by default), so their mean is the task's ``ndcg_at_10``.
"""

from __future__ import annotations

import heapq
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from disastir_mteb.util.atomic import write_json_atomic

__all__ = ["FOLDER", "PerQuery", "data_provenance", "per_query_file", "per_query_path", "read_per_query",
           "score_queries", "write_per_query"]

FOLDER = "disastir_per_query"
_FORMAT = 1


@dataclass(frozen=True)
class PerQuery:
    """One task's per-query record.

    Attributes:
        task_name: the mteb task name.
        ndcg_at_10: query id -> NDCG@10 (fraction), for every scored query.
        top10: query id -> the ids of the 10 best passages, best first.
        data: which data the scores come from (see :func:`data_provenance`); None in files written
            before it was recorded.
        encoding: how the vectors were computed (batch size, ``model_dtype``, device, token limit; see
            :func:`write_per_query`); None when not recorded.
    """

    task_name: str
    ndcg_at_10: Mapping[str, float]
    top10: Mapping[str, list[str]]
    data: Mapping[str, object] | None = None
    encoding: Mapping[str, object] | None = None

    @property
    def mean(self) -> float:
        """Mean NDCG@10 over the queries (the task's ``ndcg_at_10``)."""
        return sum(self.ndcg_at_10.values()) / len(self.ndcg_at_10) if self.ndcg_at_10 else float("nan")


def score_queries(task_name: str, results: Mapping[str, Mapping[str, float]],
                  qrels: Mapping[str, Mapping[str, int]]) -> PerQuery:
    """NDCG@10 of each query of ``results`` ({qid: {doc: score}}) against ``qrels``, as mteb computes it.

    Queries without judgements are left out, as mteb leaves them out. Only each query's head reaches
    pytrec_eval (:func:`_head`: the 10 best and whatever ties the 10th), a tenth of a top-100 run: NDCG@10
    and the top 10 read nothing below it, so both are the same to the bit as from the whole run.
    """
    import pytrec_eval

    judged = {qid: dict(docs) for qid, docs in qrels.items() if docs}
    run = {qid: _head(docs, 10) for qid, docs in results.items() if qid in judged}
    scores = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10"}).evaluate(run)
    top10 = {qid: [doc for doc, _ in sorted(docs.items(), key=lambda item: -item[1])[:10]] for qid, docs in run.items()}
    return PerQuery(task_name, {qid: float(values["ndcg_cut_10"]) for qid, values in scores.items()}, top10)


def _head(docs: Mapping[str, float], depth: int) -> dict[str, float]:
    """``docs`` ({doc: similarity}) from the best down to the ``depth``-th, with every doc tied with it, in their order.

    Every doc left out is strictly below the ``depth``-th similarity, so however trec_eval orders ties,
    what it puts in the first ``depth`` places is among these. Whole when shorter, or when a similarity
    is NaN (no order to trust).
    """
    values = [float(value) for value in docs.values()]
    if len(values) > depth:
        floor = heapq.nlargest(depth, values)[-1]
        if floor == floor and not any(value != value for value in values):  # no NaN
            return {doc: value for doc, value in zip(docs, values, strict=True) if value >= floor}
    return dict(zip(docs, values, strict=True))


def per_query_file(result_set_folder: str | Path, task_name: str) -> Path:
    """Where a result set's per-query file of ``task_name`` lives."""
    return Path(result_set_folder) / FOLDER / f"{task_name}_per_query.json"


def per_query_path(task_result_path: str | Path) -> Path:
    """Where the per-query file of the mteb result file ``task_result_path`` lives."""
    path = Path(task_result_path)
    return per_query_file(path.parent, path.stem)


def data_provenance() -> dict[str, object]:
    """Which data the tasks read now: ``DISASTIR_DATA_DIR``, else the pinned Hub revision.

    mteb's result file names the dataset revision the task declares, not the folder actually read,
    so a score on the generated sample would look like a DisastIR score. ``synthetic`` is true when
    the folder carries the generator's marker (:data:`disastir_mteb.data.layout.MARKER`).

    Returns:
        ``{"source": folder or "hf:<repo>@<revision>", "synthetic": bool}``, plus ``"generator"``
        (the marker's content) for a generated folder, and ``"extra_judgements"`` (the folder) when the tasks
        read extra judgements (:mod:`disastir_mteb.data.extra_qrels`; absent otherwise).
    """
    from disastir_mteb.data.extra_qrels import EXTRA_QRELS_ENV
    from disastir_mteb.data.layout import read_marker
    from disastir_mteb.vocabulary.metadata import DATASET_REPO, DATASET_REVISION

    folder = os.environ.get("DISASTIR_DATA_DIR")
    record: dict[str, object] = {"source": f"hf:{DATASET_REPO}@{DATASET_REVISION}", "synthetic": False}
    if folder:
        marker = read_marker(folder)
        record = {"source": str(Path(folder).expanduser().resolve()),
                  "synthetic": bool(marker and marker.get("synthetic", True))}
        if marker:
            record["generator"] = marker
    extra = os.environ.get(EXTRA_QRELS_ENV, "").strip()
    if extra:
        record["extra_judgements"] = str(Path(extra).expanduser().resolve())
    return record


def write_per_query(path: str | Path, record: PerQuery, *, settings: Mapping[str, object] | None = None,
                    data: Mapping[str, object] | None = None) -> Path:
    """Write ``record`` atomically (a killed run never leaves half a file).

    ``settings`` (how the vectors were computed: batch size, model dtype, device, token limit; default
    ``record.encoding``) is kept beside the scores under ``"encoding"``: mteb's result file has no place for it, and the
    batch size, unlike the precision, does not get its own results folder. ``data`` (which data was
    read, :func:`data_provenance`; default ``record.data``) goes under ``"data"``, so reports can say
    when scores come from synthetic data.
    """
    data = data if data is not None else record.data
    settings = settings if settings is not None else record.encoding
    content: dict[str, object] = {"format": _FORMAT, "task_name": record.task_name, "metric": "ndcg_at_10"}
    if settings:
        content["encoding"] = dict(settings)
    if data:
        content["data"] = dict(data)
    content["queries"] = {qid: {"ndcg_at_10": score, "top10": record.top10.get(qid, [])}
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
        raise FileNotFoundError(f"No per-query scores at {path}: rerun the task with disastir-mteb run "
                                "(plain `mteb run` does not write them).")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        queries = data["queries"]
        provenance, encoding = data.get("data"), data.get("encoding")
        return PerQuery(str(data["task_name"]), {q: float(v["ndcg_at_10"]) for q, v in queries.items()},
                        {q: [str(d) for d in v["top10"]] for q, v in queries.items()},
                        dict(provenance) if isinstance(provenance, dict) else None,
                        dict(encoding) if isinstance(encoding, dict) else None)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{path} is not a per-query score file ({type(error).__name__}: {error}).") from None

"""Is a result file's score possible? Ranges, finiteness, and agreement with the per-query file beside it.

A DisastIR score reaches people through one door: :func:`~disastir_mteb.results.result_sets.load_result_set`,
which ``report``, ``compare``, the leaderboard (:mod:`~disastir_mteb.leaderboard.rows`) and ``submit`` all
read through. It reads each task file with :func:`read_task_record` and refuses, with one sentence, a set holding
a score that no run can produce (:func:`refuse_impossible_scores`), so an edited or damaged file is never shown
as 750.00 or submitted as ready for a pull request.

What is checked, per task file (``scores["test"][0]``):

- every metric of a known kind lies in its range (:func:`~disastir_mteb.results.metrics.metric_range`, the
  metric vocabulary): mteb's retrieval metrics, the plugin's and ``main_score`` are fractions in [0, 1], and
  finite; mteb's abstention metrics (``nauc_*``) are at most 1 or NaN, with no fixed lower bound, so only
  values above 1 or infinite are refused. Other numbers (an mteb metric of a later release) make no claim;
- ``main_score`` equals ``ndcg_at_10``, the DisastIR tasks' main score, within :data:`TOLERANCE`;
- with the per-query file ``disastir-mteb run`` writes beside it (:mod:`~disastir_mteb.results.per_query`),
  the mean of its queries' NDCG@10 equals ``ndcg_at_10`` within :data:`TOLERANCE`: both come from
  ``pytrec_eval``'s ``ndcg_cut_10`` on the same run and qrels, and mteb stores the mean rounded to 5
  decimals (``round(..., 5)`` in mteb's ``retrieval_metrics``), which moves it by at most 5e-6; summing up to
  9,600 per-query values in float64 adds less than 1e-12. 1e-5 is twice the rounding bound, and a tenth of
  the smallest change a report can show (0.01 at x100 is 1e-4), so any edit a reader could see is caught.

Not caught: a file edited consistently within its ranges (``ndcg_at_10`` and ``main_score`` alike) that has no
per-query file (written by plain ``mteb run``): nothing beside it says what it should hold.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from disastir_mteb.results.metrics import metric_range
from disastir_mteb.results.per_query import PerQuery

__all__ = ["TOLERANCE", "impossible_score", "read_task_record", "refuse_impossible_scores"]

#: How far ``main_score`` and the per-query mean may lie from ``ndcg_at_10`` (fractions; see the module docstring).
TOLERANCE = 1e-5

_SHOWN = 3  # offending metrics named per file; the rest are counted


def _describe(low: float, high: float, nan: bool) -> str:
    if low == -math.inf:
        return f"at most {high:g}{' or NaN' if nan else ''}"
    return f"[{low:g}, {high:g}]"


def _out_of_range(name: str, value: object) -> str | None:
    """``"ndcg_at_10 is 7.5 (valid: [0, 1])"`` for an impossible value, else None."""
    bounds = metric_range(name)
    if bounds is None:
        return None
    low, high, nan = bounds
    valid = _describe(low, high, nan)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{name} is {value!r}, not a number (valid: {valid})"
    if math.isnan(value):
        return None if nan else f"{name} is NaN (valid: {valid})"
    if not low <= value <= high:
        return f"{name} is {value!r} (valid: {valid})"
    return None


def impossible_score(path: Path, record: Mapping[str, Any], *, per_query: PerQuery | None = None,
                     per_query_path: Path | None = None) -> str | None:
    """What is impossible in one task file's score block (a clause naming the file), or None when nothing is.

    Args:
        path: the task file (named in the clause).
        record: its ``scores["test"][0]`` block (:func:`read_task_record`).
        per_query: the per-query record beside the file, None without a readable one.
        per_query_path: where ``per_query`` was read from (named in the sentence).
    """
    wrong = [text for name, value in record.items() if (text := _out_of_range(name, value))]
    if wrong:
        shown = "; ".join(wrong[:_SHOWN]) + (f"; and {len(wrong) - _SHOWN} more" if len(wrong) > _SHOWN else "")
        return f"{path} holds an impossible score: {shown}"
    ndcg = record.get("ndcg_at_10")
    if not isinstance(ndcg, int | float) or isinstance(ndcg, bool):
        return None
    main = record.get("main_score")
    if isinstance(main, int | float) and abs(main - ndcg) > TOLERANCE:
        return (f"{path} holds main_score {main!r} but ndcg_at_10 {ndcg!r}, and DisastIR's main score is "
                f"ndcg_at_10 (they must agree within {TOLERANCE:g})")
    if per_query is not None and per_query.ndcg_at_10 and abs(per_query.mean - ndcg) > TOLERANCE:
        return (f"{path} holds ndcg_at_10 {ndcg!r}, but the mean NDCG@10 of the {len(per_query.ndcg_at_10)} "
                f"queries in {per_query_path or 'its per-query file'} is {per_query.mean:.6f} (they must agree "
                f"within {TOLERANCE:g}, mteb's rounding)")
    return None


def refuse_impossible_scores(records: Mapping[Path, Mapping[str, Any]], *, model: str,
                             per_query: Mapping[Path, tuple[Path, PerQuery]]) -> None:
    """Raise one sentence for the first task file with an impossible score, counting the others.

    Args:
        records: task file -> its score block.
        model: the model name, for the command that reruns a task.
        per_query: task file -> (per-query file, its record), for the files that have a readable one.

    Raises:
        ValueError: a score is out of its range, not finite, or disagrees with ``ndcg_at_10`` or the per-query mean.
    """
    problems: list[tuple[Path, str]] = []
    for path, record in records.items():
        where, found = per_query.get(path, (None, None))
        if problem := impossible_score(path, record, per_query=found, per_query_path=where):
            problems.append((path, problem))
    if problems:
        first, others = problems[0][1], [path for path, _ in problems[1:]]
        more = f" ({len(others)} more file(s) of this set too: {', '.join(p.name for p in others)})" if others else ""
        tasks = " ".join(path.stem for path, _ in problems)
        raise ValueError(f"{first}{more}; the file was edited or damaged: rerun the task{'s' if others else ''} "
                         f"(disastir-mteb run -m {model} -t {tasks} --overwrite, with the run's other options).")


def read_task_record(path: Path) -> dict[str, Any]:
    """The test score block of a task file, with ``dataset_revision`` and a float ``main_score``.

    Raises:
        ValueError: not an mteb result file with a test score.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        block = dict(data["scores"]["test"][0])
        return {**block, "main_score": float(block["main_score"]), "dataset_revision": data.get("dataset_revision")}
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise ValueError(f"{path} is not an mteb result file with a test score ({type(error).__name__}: "
                         f"{error}).") from None

"""Does a result file agree with itself? Its name, splits, ranges, and the per-query file beside it.

A DisastIR score reaches people through one door: :func:`~disastir_mteb.results.result_sets.load_result_set`,
which ``report``, ``compare``, the leaderboard (:mod:`~disastir_mteb.leaderboard.rows`) and ``submit`` all
read through. It reads each task file with :func:`read_task_file`, asks :func:`file_problem` what in it
contradicts itself or its per-query file, compares the files with each other
(:mod:`~disastir_mteb.results.set_provenance`: one model, setting, data and gain), has the per-query top 10s
re-scored against their data (:mod:`~disastir_mteb.results.rescoring`), and refuses, with one sentence, a set
holding anything found (:func:`refuse_contradictions`): an edited, copied or damaged file is never shown as 750.00,
under another task's name, or submitted as ready for a pull request.

What is checked, per task file, without the data:

- its ``task_name`` is its file name: a file copied or renamed under another task's name is refused;
- it holds exactly the task's splits and subsets (:data:`TASK_SPLITS`, :data:`TASK_SUBSETS`), one entry each:
  an extra split (``"dev"``), a second ``test``/``default`` entry or a subset of another task is refused, so that
  no reader picks one entry and no submission carries the others;
- every metric of a known kind lies in its range (:func:`~disastir_mteb.results.metrics.metric_range`, the
  metric vocabulary): mteb's retrieval metrics, the plugin's and ``main_score`` are fractions in [0, 1], and
  finite; mteb's abstention metrics (``nauc_*``) are at most 1 or NaN, with no fixed lower bound, so only
  values above 1 or infinite are refused. Other numbers (an mteb metric of a later release) make no claim;
  ``disastir_gain``, where recorded, is a gain the plugin knows;
- ``main_score`` equals ``ndcg_at_10``, the DisastIR tasks' main score, within :data:`TOLERANCE`; so does the
  variant of the recorded gain (``ndcg_at_10_exponential_gain`` with ``disastir_gain: exponential``), which the
  task scores again beside mteb's (:meth:`~disastir_mteb.tasks.retrieval.AbsTaskDisastIR.task_specific_scores`,
  stored to 6 decimals): an edit of the main score alone is caught without a per-query file;
- with the per-query file ``disastir-mteb run`` writes beside it (:mod:`~disastir_mteb.results.per_query`):
  its ``task_name`` is the task's; every per-query NDCG@10 is finite and at least 0 (not at most 1: a query
  whose top 10 holds two copies of a judged text scores above 1, as the authors' text-keyed code counts it; see
  :mod:`disastir_mteb.scoring.authors`); every top 10 holds at most 10
  passages, each once; the data it records is the data the task file records (``disastir_data``); and the
  mean of its queries' NDCG@10 equals ``ndcg_at_10`` within :data:`TOLERANCE`: both come from the task's one
  scoring of the same top 10s (:meth:`~disastir_mteb.tasks.retrieval.AbsTaskDisastIR.ndcg_at_10_per_query`,
  equal to ``pytrec_eval``'s ``ndcg_cut_10`` where no judged text has two ids), and mteb stores the mean rounded to 5
  decimals (``round(..., 5)`` in mteb's ``retrieval_metrics``), which moves it by at most 5e-6; summing up to
  9,600 per-query values in float64 adds less than 1e-12. 1e-5 is twice the rounding bound, and a tenth of
  the smallest change a report can show (0.01 at x100 is 1e-4), so any edit a reader could see is caught.

Not caught here: a file edited consistently within its ranges (``ndcg_at_10``, ``main_score`` and the gain's
variant alike) that has no per-query file (written by plain ``mteb run``): nothing beside it says what it should
hold. A per-query file edited consistently with its task file is caught only by re-scoring its top 10s, when the
data is at hand.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from disastir_mteb.data.published import GAINS
from disastir_mteb.results.metrics import metric_range
from disastir_mteb.results.per_query import PerQuery
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.metadata import DATASET, MAIN_SCORE_KEY
from disastir_mteb.vocabulary.task_record import DATA_KEY, EXTRA_JUDGEMENTS, GAIN_KEY, is_extended, local_data
from disastir_mteb.vocabulary.taxonomy import Split, get_spec

__all__ = ["TASK_SPLITS", "TASK_SUBSETS", "TOLERANCE", "file_problem", "impossible_score", "per_query_data",
           "read_task_file", "read_task_record", "refuse_contradictions", "task_record_of"]

#: How far ``main_score`` and the per-query mean may lie from ``ndcg_at_10`` (fractions; see the module docstring).
TOLERANCE = 1e-5
#: The splits every DisastIR task is scored on (``task_metadata/dataset.json``'s ``eval_splits``).
TASK_SPLITS: tuple[str, ...] = tuple(DATASET["eval_splits"])
#: The subsets of every split: mteb names the one subset of a monolingual task ``default``.
TASK_SUBSETS: tuple[str, ...] = ("default",)

_SHOWN = 3  # offending metrics named per file; the rest are counted
_TOP_K = 10  # the per-query files keep each query's top 10


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
    gain = record.get(GAIN_KEY)
    if gain is not None and gain not in GAINS:
        wrong.append(f"{GAIN_KEY} is {gain!r} (valid: {', '.join(GAINS)})")
    if wrong:
        shown = "; ".join(wrong[:_SHOWN]) + (f"; and {len(wrong) - _SHOWN} more" if len(wrong) > _SHOWN else "")
        return f"{path} holds an impossible score: {shown}"
    ndcg = record.get(MAIN_SCORE_KEY)
    if not isinstance(ndcg, int | float) or isinstance(ndcg, bool):
        return None
    main = record.get("main_score")
    if isinstance(main, int | float) and abs(main - ndcg) > TOLERANCE:
        return (f"{path} holds main_score {main!r} but {MAIN_SCORE_KEY} {ndcg!r}, and DisastIR's main score is "
                f"{MAIN_SCORE_KEY} (they must agree within {TOLERANCE:g})")
    if per_query is not None and per_query.ndcg_at_10 and abs(per_query.mean - ndcg) > TOLERANCE:
        return (f"{path} holds {MAIN_SCORE_KEY} {ndcg!r}, but the mean NDCG@10 of the {len(per_query.ndcg_at_10)} "
                f"queries in {per_query_path or 'its per-query file'} is {per_query.mean:.6f} (they must agree "
                f"within {TOLERANCE:g}, mteb's rounding)")
    variant = record.get(f"{MAIN_SCORE_KEY}_{gain}_gain") if gain in GAINS else None
    if isinstance(variant, int | float) and not isinstance(variant, bool) and abs(variant - ndcg) > TOLERANCE:
        return (f"{path} holds {MAIN_SCORE_KEY} {ndcg!r} but {MAIN_SCORE_KEY}_{gain}_gain {variant!r}, and its gain "
                f"is {gain} ({GAIN_KEY}): they are one number (they must agree within {TOLERANCE:g}, mteb's rounding)")
    return None


def _layout_problem(path: Path, content: Mapping[str, Any]) -> str | None:
    """What in the file's name, splits and subsets contradicts the task it names; None when nothing does."""
    task = content.get("task_name")
    if not isinstance(task, str):
        return f"{path} names no task (task_name is {task!r}); mteb writes the task's name there"
    if task != path.stem:
        return (f"{path} holds the results of {task!r} (its task_name), not of {path.stem} as its name says: a task "
                "file copied or renamed")
    scores = content.get("scores")
    if not isinstance(scores, dict):
        return f"{path} holds no scores object (scores is {type(scores).__name__})"
    extra = sorted(str(split) for split in scores if split not in TASK_SPLITS)
    if extra:
        held = ", ".join(f"{split!r}" for split in extra)
        return (f"{path} holds scores for split{'s' if len(extra) > 1 else ''} {held}, which {task} does not have "
                f"(its split{'s' if len(TASK_SPLITS) > 1 else ''}: {', '.join(TASK_SPLITS)})")
    for split in TASK_SPLITS:
        entries = scores.get(split)
        if not isinstance(entries, list) or not entries:
            return f"{path} holds no scores for split {split!r}, the split {task} is scored on"
        if not all(isinstance(entry, dict) for entry in entries):
            return f"{path} holds a scores[{split!r}] entry that is not an object"
        subsets = Counter(entry.get("hf_subset") for entry in entries)
        for subset, count in subsets.items():
            if subset not in TASK_SUBSETS:
                return (f"{path} holds scores for subset {subset!r} of split {split!r}, which {task} does not have "
                        f"(its subset: {', '.join(TASK_SUBSETS)})")
            if count > 1:
                mains = " and ".join(repr(entry.get("main_score")) for entry in entries
                                     if entry.get("hf_subset") == subset)
                return (f"{path} holds {count} entries for split {split!r}, subset {subset!r} (main_score {mains}); a "
                        "task is scored once per split and subset")
        missing = [subset for subset in TASK_SUBSETS if subset not in subsets]
        if missing:
            return f"{path} holds no entry for subset {missing[0]!r} of split {split!r}"
    return None


def per_query_data(data: Mapping[str, Any] | None) -> str | None:
    """The ``disastir_data`` string a per-query file's ``data`` record stands for, without extra judgements; or None.

    ``hf:<repo>@<revision>`` as recorded, else ``local folder <name>`` with the generator's marker
    (:func:`~disastir_mteb.vocabulary.task_record.local_data`): what the task file of the same run records,
    up to ``; extra judgements: ...`` (the per-query record keeps their folder under ``extra_judgements``).
    """
    if data is None or not isinstance(data.get("source"), str):
        return None
    source = str(data["source"])
    if source.startswith("hf:"):
        return source
    generator = data.get("generator")
    if isinstance(generator, dict):
        return local_data(source, generator)
    return local_data(source, {"synthetic": True} if data.get("synthetic") else None)


def _data_problem(path: Path, record: Mapping[str, Any], per_query: PerQuery, where: Path) -> str | None:
    """The task file and its per-query file record different data (full-set tasks; None when either is silent)."""
    recorded, ours = record.get(DATA_KEY), per_query_data(per_query.data)
    if not isinstance(recorded, str) or ours is None or get_spec(path.stem).split is not Split.full:
        return None  # a Test or DevLite task's string names two folders; the per-query record one
    extra = (per_query.data or {}).get("extra_judgements")
    if recorded.split(f"; {EXTRA_JUDGEMENTS}: ")[0] == ours and is_extended(recorded) == bool(extra):
        return None
    said = ours + (f" with the extra judgements of {extra}" if extra else "")
    return (f"{where} records data {said!r}, but {path} records {recorded!r} ({DATA_KEY}): the two files come from "
            "different runs")


def _per_query_problem(path: Path, per_query: PerQuery, where: Path) -> str | None:
    """What in a per-query file contradicts the task file it lies beside, or is impossible in any run."""
    if per_query.task_name != path.stem:
        return (f"{where} holds the per-query scores of {per_query.task_name!r}, not of {path.stem} beside which it "
                "lies: a per-query file copied or renamed")
    wrong = [(qid, value) for qid, value in per_query.ndcg_at_10.items() if not 0.0 <= value < math.inf]
    if wrong:
        return (f"{where} holds an impossible NDCG@10 for {len(wrong)} quer{'y' if len(wrong) == 1 else 'ies'} "
                f"(first: query {wrong[0][0]!r}: {wrong[0][1]!r}; valid: a finite number, at least 0)")
    long = [(qid, len(docs)) for qid, docs in per_query.top10.items() if len(docs) > _TOP_K]
    if long:
        return (f"{where} holds {long[0][1]} passages in the top 10 of query {long[0][0]!r} "
                f"({len(long)} such quer{'y' if len(long) == 1 else 'ies'})")
    twice = [(qid, doc) for qid, docs in per_query.top10.items() for doc, n in Counter(docs).items() if n > 1]
    if twice:
        return (f"{where} lists passage {twice[0][1]!r} twice in the top 10 of query {twice[0][0]!r} ({len(twice)} "
                "repeated passage(s) in all); a ranking holds each passage once")
    return None


def file_problem(path: Path, content: Mapping[str, Any], *, per_query: PerQuery | None = None,
                 per_query_path: Path | None = None) -> str | None:
    """The first thing in a task file that contradicts itself or its per-query file (a clause naming the file).

    What needs no data (the module docstring's list); re-scoring against the data is
    :mod:`~disastir_mteb.results.rescoring`'s.

    Args:
        path: the task file.
        content: the file as read (:func:`read_task_file`).
        per_query: the per-query record beside it, None without a readable one.
        per_query_path: where ``per_query`` was read from.
    """
    if problem := _layout_problem(path, content):
        return problem
    record = task_record_of(path, content)
    where = per_query_path or path
    if per_query is not None and (problem := _per_query_problem(path, per_query, where)):
        return problem
    if problem := impossible_score(path, record, per_query=per_query, per_query_path=per_query_path):
        return problem
    return _data_problem(path, record, per_query, where) if per_query is not None else None


def refuse_contradictions(problems: Sequence[tuple[Path, str]], *, model: str) -> None:
    """Raise one sentence for the first task file found wrong, counting and naming the others; nothing if none.

    Args:
        problems: (task file, the clause saying what is wrong with it), in the order found.
        model: the model name, for the command that reruns the tasks.

    Raises:
        ValueError: ``problems`` is not empty.
    """
    if not problems:
        return
    first, others = problems[0][1], list(dict.fromkeys(path for path, _ in problems[1:] if path != problems[0][0]))
    more = f" ({len(others)} more file(s) of this set too: {', '.join(p.name for p in others)})" if others else ""
    tasks = " ".join(dict.fromkeys(path.stem for path, _ in problems))
    raise InvalidInput(f"{first}{more}; the file was edited or damaged: rerun the task{'s' if others else ''} "
                       f"(disastir-mteb run -m {model} -t {tasks} --overwrite, with the run's other options).")


def read_task_file(path: Path) -> dict[str, Any]:
    """A task file as mteb wrote it: one JSON object.

    Raises:
        ValueError: not JSON, or not an object (the sentence names the file).
    """
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError alike
        raise InvalidInput(f"{path} is not an mteb result file with a test score ({type(error).__name__}: "
                           f"{error}).") from None
    if not isinstance(content, dict):
        raise InvalidInput(f"{path} is not an mteb result file with a test score (a JSON {type(content).__name__}, "
                           "not an object).")
    return content


def task_record_of(path: Path, content: Mapping[str, Any]) -> dict[str, Any]:
    """The test score block of a read task file, with ``dataset_revision`` and a float ``main_score``.

    Raises:
        ValueError: the file has no test score block with a numeric ``main_score``.
    """
    try:
        block = dict(content["scores"]["test"][0])
        return {**block, "main_score": float(block["main_score"]),
                "dataset_revision": content.get("dataset_revision")}
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise InvalidInput(f"{path} is not an mteb result file with a test score ({type(error).__name__}: "
                           f"{error}).") from None


def read_task_record(path: Path) -> dict[str, Any]:
    """The test score block of a task file, with ``dataset_revision`` and a float ``main_score``.

    Raises:
        ValueError: not an mteb result file with a test score.
    """
    return task_record_of(path, read_task_file(path))

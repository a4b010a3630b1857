"""Does a result file agree with itself? Its name, splits, ranges, and the per-query file beside it.

Every reader of result files goes through :func:`~disastir_mteb.results.result_sets.load_result_set`, which asks
:func:`file_problem` about each task file and refuses a set holding anything found (:func:`refuse_contradictions`):
an edited, copied or damaged file is never shown as 750.00, under another task's name, or submitted. Not caught
here: a file edited consistently within its ranges with no per-query file beside it; nothing says what it should
hold.
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

#: How far ``main_score`` and the per-query mean may lie from ``ndcg_at_10``: twice mteb's rounding of its means to 5
#: decimals, and a tenth of the smallest change a report shows (0.01 at x100), so any edit a reader could see is caught.
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

    A value out of its range (:func:`~disastir_mteb.results.metrics.metric_range`), or ``main_score``, the recorded
    gain's NDCG@10 variant or the per-query mean unlike ``ndcg_at_10``: so an edit of the main score alone is caught.
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
    """The ``disastir_data`` string a per-query file's ``data`` record stands for, without extra judgements; or None."""
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

    Without the data: its ``task_name`` is its file name; it holds exactly the task's splits and subsets, one entry
    each, so no reader picks one entry and no submission carries the others; its scores are possible
    (:func:`impossible_score`). The per-query file names the same task and data, and holds finite NDCG@10s of at
    least 0 (not at most 1: two copies of a judged text in a top 10 score above 1, as the authors count them) and
    top 10s of at most 10 passages, each once.
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
    """Raise one sentence for the first (task file, what is wrong) of ``problems``, with the command to rerun.

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

"""Where a result set's numbers come from: plugin version, data, gain, instructions, search, precision.

:func:`provenance_of` reads each fact from the most direct record a run leaves (the task file's own, the
experiment settings, the per-query files, then what older task files still tell); what none says is "not
recorded", never guessed. A plain run's instructions are what mteb does: it hands the task's prompt only to
instruction-aware models, so ``model_meta.json``'s ``use_instructions`` decides what the set says. A model's own
query prefix (e5's ``"query: "``) is its input format, not an instruction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from disastir_mteb.results.describe import describe_search
from disastir_mteb.results.result_sets import ResultSet
from disastir_mteb.results.score_checks import per_query_data
from disastir_mteb.vocabulary import instructions
from disastir_mteb.vocabulary.settings import (
    INSTRUCTED_PASSAGES,
    INSTRUCTIONS_KEY,
    PASSAGES_KEY,
    PRECISION_KEY,
    TEMPLATE_KEY,
)
from disastir_mteb.vocabulary.task_record import DATA_KEY, GAIN_KEY, VERSION_KEY, hub_data
from disastir_mteb.vocabulary.taxonomy import Split

__all__ = ["MODEL_OWN", "NOT_RECORDED", "PLAIN_INSTRUCTIONS", "PRECISION_NAMES", "Provenance", "TaskProvenance",
           "provenance_of", "recorded_data"]

NOT_RECORDED = "not recorded"
#: The dtype names of per-query ``encoding`` records -> the ``--precision`` names (``disastir_precision``).
PRECISION_NAMES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
#: A set run with ``model_prompt="leave"`` (:func:`~disastir_mteb.models.adapter.with_instructions`).
MODEL_OWN = "model's own"
#: A set without instruction settings, by its ``model_meta.json``'s ``use_instructions``.
PLAIN_INSTRUCTIONS = {
    True: "model's own (plain run: mteb passes the task prompt)",
    False: "none (plain run)",
    None: "model's own, if any (plain run)",
}
# mteb stores main_score rounded to 5 decimals and the gain variants to 6.
_SAME_SCORE = 1e-5


@dataclass(frozen=True)
class TaskProvenance:
    """What one task of a set records (None: nothing)."""

    task: str
    plugin_version: str | None
    dataset: str | None
    gain: str | None
    gain_inferred: bool
    precision: str | None


@dataclass(frozen=True)
class Provenance:
    """The six facts behind a result set's scores (None: not recorded); values joined where its tasks disagree."""

    plugin_version: str | None
    dataset: str | None
    synthetic: bool | None
    gain: str | None
    instructions: str
    search: str
    precision: str | None
    gain_inferred: bool = False
    tasks: tuple[TaskProvenance, ...] = ()

    def fields(self) -> list[tuple[str, str]]:
        """(label, readable value) in a fixed order: plugin version, data, gain, instructions, search, precision."""
        gain = self.gain
        if gain is not None and self.gain_inferred:
            inferred = sum(1 for task in self.tasks if task.gain_inferred)
            gain += (" (inferred from the scores)" if inferred == len(self.tasks)
                     else f" (inferred from the scores for {inferred} of {len(self.tasks)} tasks)")
        return [("Plugin version", self.plugin_version or NOT_RECORDED), ("Data", self.dataset or NOT_RECORDED),
                ("Gain", gain or NOT_RECORDED), ("Instructions", self.instructions), ("Search", self.search),
                ("Precision", self.precision or NOT_RECORDED)]

    def one_line(self) -> str:
        """``plugin version: 0.1.0; data: hf:DMIR01/DisastIR@...; gain: exponential; ...``."""
        return "; ".join(f"{label.lower()}: {value}" for label, value in self.fields())

    def conflicts(self) -> list[str]:
        """One sentence per fact the tasks disagree on: ``Plugin version: 0.1.0 in 1 task (...); 0.1.1 in 47 tasks``."""
        found = []
        for label, name in (("Plugin version", "plugin_version"), ("Data", "dataset"), ("Gain", "gain"),
                            ("Precision", "precision")):
            holders: dict[str, list[str]] = {}
            for task in self.tasks:
                holders.setdefault(getattr(task, name) or NOT_RECORDED, []).append(task.task)
            if len(holders) > 1:
                parts = [f"{value} in {len(tasks)} task{'s' if len(tasks) > 1 else ''}"
                         + (f" ({', '.join(tasks)})" if len(tasks) <= 3 else "")
                         for value, tasks in sorted(holders.items(), key=lambda item: _order(item[0]))]
                found.append(f"{label}: {'; '.join(parts)}")
        return found


def _order(value: str) -> tuple[bool, str]:
    """Sort key: recorded values first (alphabetically), "not recorded" last."""
    return (value == NOT_RECORDED, value)


def _joined(values: Sequence[str | None]) -> str | None:
    """The distinct values, comma-joined (``not recorded`` last when only some tasks lack one); None if none."""
    if all(value is None for value in values):
        return None
    return ", ".join(sorted({value or NOT_RECORDED for value in values}, key=_order))


def _instructions(experiment: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    """What was put before the queries, from the experiment settings (or what a plain run does)."""
    name = experiment.get(INSTRUCTIONS_KEY)
    if name is None:
        declared = meta.get("use_instructions")
        return PLAIN_INSTRUCTIONS[declared if isinstance(declared, bool) else None]
    name = str(name)
    if name == instructions.MODEL_OWN:  # with_instructions(model_prompt="leave"): the model adds the task's prompt
        return MODEL_OWN
    text = "none" if name == "none" else (
        f"{name} (template {experiment.get(TEMPLATE_KEY, instructions.default_template_name(name))})")
    if experiment.get(PASSAGES_KEY) == INSTRUCTED_PASSAGES and name != "none":
        text += ", also on passages"
    return text


def recorded_data(result_set: ResultSet, task: str) -> str | None:
    """The data one task of a set was scored on, as its files record it; None when they do not.

    Never the revision a task merely declares: the run may have read a ``DISASTIR_DATA_DIR`` instead.
    """
    return _dataset(result_set.task_record(task), result_set.task_data(task), declared=False)


def _dataset(record: Mapping[str, Any], per_query: Mapping[str, Any] | None, *, declared: bool = True) -> str | None:
    """The task's data string: its own record, else its per-query record, else (``declared``) the revision declared."""
    data = record.get(DATA_KEY)
    if isinstance(data, str):
        return data
    if (from_per_query := per_query_data(per_query)) is not None:
        return from_per_query
    revision = record.get("dataset_revision")
    if declared and isinstance(revision, str) and revision:
        from disastir_mteb.vocabulary.metadata import DATASET_REPO

        return f"{hub_data(DATASET_REPO, revision).removeprefix('hf:')} (declared by the task)"
    return None


def _gain(record: Mapping[str, Any]) -> tuple[str | None, bool]:
    """(gain, inferred): the recorded gain, else the variant the main score equals (and the other does not)."""
    gain = record.get(GAIN_KEY)
    if isinstance(gain, str):
        return gain, False
    main = record.get("main_score")
    variants = {name: float(value) for name in ("exponential", "linear")
                if isinstance(value := record.get(f"ndcg_at_10_{name}_gain"), (int, float))}
    if not isinstance(main, (int, float)) or len(variants) < 2:
        return None, False
    matching = [name for name, value in variants.items() if math.isclose(main, value, abs_tol=_SAME_SCORE)]
    return (matching[0], True) if len(matching) == 1 else (None, False)


def _precision(experiment: Mapping[str, Any], encoding: Mapping[str, Any] | None) -> str | None:
    if PRECISION_KEY in experiment:
        return str(experiment[PRECISION_KEY])
    dtype = (encoding or {}).get("model_dtype")
    return PRECISION_NAMES.get(str(dtype), str(dtype)) if dtype else None


def provenance_of(result_set: ResultSet) -> Provenance:
    """The provenance of ``result_set``, read from its task files, settings and per-query files."""
    tasks = []
    for task in sorted(result_set.scores):
        record = result_set.task_record(task)
        gain, inferred = _gain(record)
        version = record.get(VERSION_KEY)
        tasks.append(TaskProvenance(
            task=result_set.file_task(task), plugin_version=version if isinstance(version, str) else None,
            dataset=_dataset(record, result_set.task_data(task), declared=result_set.split is Split.full),
            gain=gain, gain_inferred=inferred,
            precision=_precision(result_set.experiment, result_set.task_encoding(task))))
    return Provenance(
        plugin_version=_joined([t.plugin_version for t in tasks]), dataset=_joined([t.dataset for t in tasks]),
        synthetic=result_set.synthetic, gain=_joined([t.gain for t in tasks]),
        instructions=_instructions(result_set.experiment, result_set.meta),
        search=describe_search(result_set.search), precision=_joined([t.precision for t in tasks]),
        gain_inferred=any(t.gain_inferred for t in tasks), tasks=tuple(tasks))

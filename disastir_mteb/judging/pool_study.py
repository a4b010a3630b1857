"""Does the judge recover the ranking? The leave-one-run-out pool study of Zobel (1998) and Buckley et al. (2007).

Each run is scored (a) on the published judgements, (b) with its unique judged pairs hidden, (c) with those holes
judged; Kendall's tau-b of (b) and (c) against (a) across runs is how UMBRELA and TREC 2024 RAG accept a judge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disastir_mteb.data.published import shared_texts
from disastir_mteb.judging.calibration import kendall_tau
from disastir_mteb.judging.completed import load_added
from disastir_mteb.judging.holes import TaskTexts, load_task_texts
from disastir_mteb.judging.protocol import PROMPT_VERSION
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.results.report_format import Paragraph, Table, render_text
from disastir_mteb.results.result_sets import ResultSet
from disastir_mteb.scoring.authors import TOP_K, key_by_text, score_run
from disastir_mteb.util.atomic import write_json_atomic
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import Intent

if TYPE_CHECKING:
    from disastir_mteb.judging.settings import JudgeSettings

__all__ = ["MIN_RUNS", "RunStudy", "Study", "run_study"]

#: Runs a study needs: with two, each run's unique pairs are the other's blind spot, and tau says little.
MIN_RUNS = 3


@dataclass(frozen=True)
class _Task:
    """One task of the study, keyed by text: each run's top 10 and the published grades."""

    texts: TaskTexts
    tops: list[dict[str, list[str]]]  # per run: query id -> keyed top 10
    grades: dict[str, dict[str, float]]  # query id -> {keyed passage id: published grade}


@dataclass(frozen=True)
class RunStudy:
    """One run's (a) official, (b) holes and (c) judged NDCG@10 (means over the study's tasks) and unique pairs."""

    label: str
    official: float
    holes: float
    judged: float
    unique: int
    filled: int

    @property
    def drop(self) -> float:
        """The pool-bias drop, (a) - (b)."""
        return self.official - self.holes

    @property
    def recovered(self) -> float | None:
        """The share of the drop the judge recovered, ((c) - (b)) / ((a) - (b)); None where nothing dropped."""
        return (self.judged - self.holes) / self.drop if abs(self.drop) > 1e-12 else None

    def record(self) -> dict[str, Any]:
        """As JSON."""
        return {"run": self.label, "official": self.official, "holes": self.holes, "judged": self.judged,
                "drop": self.drop, "recovered": self.recovered, "unique_pairs": self.unique, "filled": self.filled}


@dataclass(frozen=True)
class Study:
    """The study over all runs: each run's scores, and Kendall's tau-b across runs of (b) and (c) against (a)."""

    runs: tuple[RunStudy, ...]
    tasks: tuple[str, ...]
    judge_model: str
    grade: str
    tau_holes: float | None
    tau_judged: float | None

    def record(self) -> dict[str, Any]:
        """As JSON (``--json FILE``)."""
        return {"judge_model": self.judge_model, "grade": self.grade, "tasks": list(self.tasks),
                "tau_holes": self.tau_holes, "tau_judged": self.tau_judged, "runs": [r.record() for r in self.runs]}

    def to_text(self) -> str:
        """The table ``judge-study`` prints."""
        def shown(value: float | None, scale: float = 100.0, digits: int = 2) -> str:
            return "–" if value is None else f"{value * scale:.{digits}f}"

        rows = [[r.label, shown(r.official), shown(r.holes), shown(r.judged), shown(r.drop),
                 shown(r.recovered, 100.0, 0) + (" %" if r.recovered is not None else ""), f"{r.unique:,}",
                 f"{r.filled:,}"] for r in self.runs]
        return render_text([
            Paragraph(f"Pool study (leave one run out) of {len(self.runs)} runs over {len(self.tasks)} task(s), judge "
                      f"{self.judge_model} ({self.grade} grades). NDCG@10 x100, the mean over the tasks: (a) on the "
                      "published judgements; (b) with the judged pairs only this run has in its top 10 hidden; (c) "
                      "with those holes judged. Recovered: the share of the drop (a) - (b) that (c) wins back."),
            Table(["run", "(a) official", "(b) holes", "(c) judged", "drop", "recovered", "unique pairs", "judged"],
                  rows),
            Paragraph(f"Kendall's tau-b across runs against (a): (b) holes {shown(self.tau_holes, 1.0, 3)}, (c) judged "
                      f"{shown(self.tau_judged, 1.0, 3)} (1: the official ranking recovered)."),
        ])


def _study_tasks(result_sets: Sequence[ResultSet], tasks: Sequence[str] | None) -> list[str]:
    held = [{task for task in s.scores if s.has_per_query(task)} for s in result_sets]
    common = set.intersection(*held)
    if tasks:
        common &= set(tasks)
    if not common:
        raise InvalidInput("The result sets share no task with per-query rankings (written by disastir-mteb run)"
                           + (f" among --tasks {' '.join(tasks)}" if tasks else "") + "; a study compares runs on "
                           "the same tasks.")
    return sorted(common)


def _load(result_sets: Sequence[ResultSet], task: str, data_dir: str | Path | None) -> _Task:
    texts = load_task_texts(task, data_dir)
    shared = shared_texts(texts.grades, texts.first_copy)
    tops, grades = [], {}
    for result_set in result_sets:
        top = {query: list(ranked[:TOP_K]) for query, ranked in result_set.per_query(task).top10.items()}
        keyed_top, grades = key_by_text(top, texts.grades, shared)
        tops.append(keyed_top)
    return _Task(texts, tops, grades)


def _unique(task: _Task) -> list[set[tuple[str, str]]]:
    """Per run, the judged (query id, keyed passage id) pairs in its top 10 and in no other run's."""
    seen: Counter[tuple[str, str]] = Counter()
    for top in task.tops:
        seen.update({(query, doc) for query, ranked in top.items() for doc in ranked})
    return [{(query, doc) for query, ranked in top.items() for doc in set(ranked)
             if seen[query, doc] == 1 and doc in task.grades.get(query, {})} for top in task.tops]


def _text_pair(task: _Task, query: str, doc: str) -> tuple[Intent, str, str]:
    return task.texts.intent, task.texts.queries[query].strip(), task.texts.passages[doc].strip()


def _ndcg(task: _Task, run: int, grades: Mapping[str, Mapping[str, float]]) -> float:
    return score_run(task.tops[run], grades, TOP_K).ndcg_zero_fill


def run_study(result_sets: Sequence[ResultSet], *, store: JudgementStore, settings: JudgeSettings,
              data_dir: str | Path | None = None, grade: str = "hard",
              go_ahead: Callable[[str, int], bool] = lambda text, requests: True, say: Callable[[str], None] = print,
              json_path: str | Path | None = None) -> Study | None:
    """Run the leave-one-run-out study: find each run's unique pairs, judge them (store reused), score, print.

    ``grade`` is ``hard`` or ``expected``; ``go_ahead`` sees the plan first; ``json_path`` also gets the study as JSON.
    None when the plan was not sent.

    Raises:
        ValueError: fewer than :data:`MIN_RUNS` runs, no shared task with rankings, or no ``--base-url``.
    """
    if len(result_sets) < MIN_RUNS:
        raise InvalidInput(f"A pool study needs at least {MIN_RUNS} result sets (runs) on the same data; "
                           f"{len(result_sets)} given.")
    if not settings.base_urls:
        raise InvalidInput("judge-study asks a server: give --base-url.")
    names = _study_tasks(result_sets, settings.tasks)
    tasks = [_load(result_sets, name, data_dir) for name in names]
    by_task = [_unique(task) for task in tasks]
    unique = [[per_run[run] for per_run in by_task] for run in range(len(result_sets))]
    found = {_text_pair(task, query, doc) for per_task in unique for task, hidden in zip(tasks, per_task, strict=True)
             for query, doc in hidden}
    wanted = sorted(found, key=lambda key: (key[0].value, key[1], key[2]))
    pairs = [Pair(intent, query, passage, settings.judge_model) for intent, query, passage in wanted]
    if not settings.judge_planned(pairs, store, what="Pool study", go_ahead=go_ahead, say=say):
        return None
    given = load_added(store, judge_model=settings.judge_model, prompt_version=PROMPT_VERSION, grade=grade).grades
    runs = []
    for run, result_set in enumerate(result_sets):
        scores: dict[str, list[float]] = {"official": [], "holes": [], "judged": []}
        filled = 0
        for task, hidden in zip(tasks, unique[run], strict=True):
            holes = {query: {doc: g for doc, g in judged.items() if (query, doc) not in hidden}
                     for query, judged in task.grades.items()}
            judged = {query: dict(docs) for query, docs in holes.items()}
            for query, doc in hidden:
                if (value := given.get(_text_pair(task, query, doc))) is not None:
                    judged[query][doc] = float(value)
                    filled += 1
            scores["official"].append(_ndcg(task, run, task.grades))
            scores["holes"].append(_ndcg(task, run, holes))
            scores["judged"].append(_ndcg(task, run, judged))
        means = {name: sum(values) / len(values) for name, values in scores.items()}
        runs.append(RunStudy(result_set.display_label, means["official"], means["holes"], means["judged"],
                             sum(len(hidden) for hidden in unique[run]), filled))
    official = [r.official for r in runs]
    study = Study(tuple(runs), tuple(names), settings.judge_model, grade,
                  kendall_tau(official, [r.holes for r in runs]), kendall_tau(official, [r.judged for r in runs]))
    say(study.to_text())
    if json_path is not None:
        write_json_atomic(Path(json_path), study.record())
        say(f"Wrote the study to {json_path}.")
    return study


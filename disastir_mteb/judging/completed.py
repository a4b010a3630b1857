"""Pool-completed scores: the authors' metrics on the published judgements plus a judge's, where none was published.

An estimate for one study, shown beside the official zero-fill NDCG@10 and never in its place: nothing here writes
a result file.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from disastir_mteb.data.published import shared_texts
from disastir_mteb.judging.holes import TaskTexts, load_task_texts
from disastir_mteb.judging.store import JudgementStore
from disastir_mteb.results.completed_view import CompletedView
from disastir_mteb.results.result_sets import ResultSet
from disastir_mteb.scoring.authors import TOP_K, RunScores, key_by_text, score_run
from disastir_mteb.util.errors import InvalidInput, MissingInput
from disastir_mteb.vocabulary.taxonomy import Intent

logger = logging.getLogger(__name__)

__all__ = ["AddedJudgements", "CompletedScores", "CompletedTask", "Judge", "MergedGrades", "completed_scores",
           "completed_views", "load_added", "merge_grades"]

#: A judge: (judge model, prompt version).
Judge = tuple[str, str]


@dataclass(frozen=True)
class AddedJudgements:
    """The graded judgements chosen from a store, by (intent, stripped query text, stripped passage text).

    ``grade`` says which grade each judgement adds (``hard`` or ``expected``); ``hard_fallbacks`` counts those without
    grade probabilities, taken at their hard grade.
    """

    grades: Mapping[tuple[Intent, str, str], float]
    judges: Mapping[tuple[Intent, str, str], Judge]
    store: str
    judge_model: str | None = None
    prompt_version: str | None = None
    grade: str = "hard"
    hard_fallbacks: int = 0

    def describe_grade(self) -> str:
        """How the added grades were taken, for the report."""
        if self.grade == "hard":
            return "hard grades (the methods' vote, as the authors grade)"
        fallback = (f"; {self.hard_fallbacks:,} judgement(s) without grade probabilities at their hard grade"
                    if self.hard_fallbacks else "")
        return f"expected grades (from the judge's grade probabilities{fallback})"

    def by_query(self, intent: Intent) -> dict[str, dict[str, tuple[float, Judge]]]:
        """One intent's judgements as query text -> {passage text: (grade, judge)}."""
        found: dict[str, dict[str, tuple[float, Judge]]] = defaultdict(dict)
        for key, grade in self.grades.items():
            if key[0] is intent:
                found[key[1]][key[2]] = (grade, self.judges[key])
        return found


def load_added(store: JudgementStore, *, judge_model: str | None = None,
               prompt_version: str | None = None, grade: str = "hard") -> AddedJudgements:
    """The store's graded judgements, optionally of one judge model and prompt version.

    ``grade`` is ``hard`` (the methods' vote) or ``expected`` (``--completed-grade``).

    Raises:
        ValueError: the chosen judgements hold two grades for one pair (two judges): a completed score comes from one
            judge, and choosing silently would mix them.
    """
    if grade not in ("hard", "expected"):
        raise InvalidInput(f"--completed-grade {grade!r}: choose hard (the methods' vote) or expected (the expected "
                           "grade of the judge's grade probabilities).")
    grades: dict[tuple[Intent, str, str], float] = {}
    judges: dict[tuple[Intent, str, str], Judge] = {}
    clashes: Counter[tuple[Judge, Judge]] = Counter()
    fallbacks = 0
    for judgement in store.judgements(judge_model=judge_model, prompt_version=prompt_version):
        if judgement.grade is None:
            continue
        key = (judgement.intent, judgement.query.strip(), judgement.passage.strip())
        judge = (judgement.judge_model, judgement.prompt_version)
        if key in judges and judges[key] != judge:
            clashes[tuple(sorted((judges[key], judge)))] += 1  # type: ignore[arg-type]
            continue
        if grade == "expected" and judgement.expected is not None:
            grades[key] = float(judgement.expected)
        else:
            fallbacks += grade == "expected"
            grades[key] = float(judgement.grade)
        judges[key] = judge
    if clashes:
        shown = sorted({_judge_name(judge) for pair in clashes for judge in pair})
        raise InvalidInput(f"{store.path} holds judgements of {sum(clashes.values()):,} pair(s) by more than one judge "
                           f"({'; '.join(shown)}); pick one with --judge-model (and --prompt-version) so that each "
                           "completed score comes from one judge.")
    return AddedJudgements(grades, judges, str(store.path), judge_model, prompt_version, grade, fallbacks)


def _judge_name(judge: Judge) -> str:
    return f"{judge[0]} (prompt version {judge[1]})"


@dataclass(frozen=True)
class MergedGrades:
    """One task's published grades with the added judgements merged in.

    ``added`` maps (query id, corpus id) to the judge of each added grade; ``not_used`` counts added judgements that met
    a published grade (the published wins).
    """

    grades: Mapping[str, Mapping[str, float]]
    added: Mapping[tuple[str, str], Judge]
    not_used: int = 0

    def judges(self) -> Counter[Judge]:
        """How many grades each judge added to the task."""
        return Counter(self.added.values())


class _TextIndex:
    """Stripped text -> ids, built once per corpus mapping (the shared corpus is one object for every task)."""

    def __init__(self) -> None:
        self._held: tuple[Mapping[str, str], dict[str, list[str]]] | None = None

    def of(self, texts: Mapping[str, str]) -> dict[str, list[str]]:
        if self._held is None or self._held[0] is not texts:
            index: dict[str, list[str]] = defaultdict(list)
            for doc_id, text in texts.items():
                index[text.strip()].append(doc_id)
            self._held = (texts, dict(index))
        return self._held[1]


_PASSAGE_INDEX = _TextIndex()


def merge_grades(texts: TaskTexts, added: AddedJudgements) -> MergedGrades:
    """The task's published grades plus the added judgements of its intent, where none was published.

    Added judgements are keyed by stripped text, so every copy of a judged query or passage earns the grade. Only
    queries with published judgements take added ones (the others are not scored, here or by the task).
    """
    grades = {query_id: dict(judged) for query_id, judged in texts.grades.items()}
    by_query = added.by_query(texts.intent)
    if not by_query:
        return MergedGrades(grades, {})
    query_ids: dict[str, list[str]] = defaultdict(list)
    for query_id in grades:
        query_ids[texts.queries[query_id].strip()].append(query_id)
    passages = _PASSAGE_INDEX.of(texts.passages)
    merged: dict[tuple[str, str], Judge] = {}
    not_used = 0
    for query, judged in by_query.items():
        for query_id in query_ids.get(query, ()):
            target = grades[query_id]
            for passage, (grade, judge) in judged.items():
                for doc_id in passages.get(passage, ()):
                    if doc_id in target:  # published: never overridden
                        not_used += 1
                        continue
                    target[doc_id] = grade
                    merged[(query_id, doc_id)] = judge
    return MergedGrades(grades, merged, not_used)


@dataclass(frozen=True)
class CompletedTask:
    """One task of a result set, scored on the published and on the merged judgements.

    ``published`` gives the official NDCG@10 again (to mteb's rounding); ``added`` counts the grades added to the task
    (every query), ``filled`` this run's top-10 hits graded by them.
    """

    task: str
    official: float
    published: RunScores
    completed: RunScores
    added: int
    filled: int
    judges: Mapping[Judge, int]

    @property
    def completed_ndcg(self) -> float:
        """The completed NDCG@10; the official score itself where the store added nothing to the task.

        The recomputation from the stored top 10 agrees only to mteb's 6 decimals, which a two-decimal table could show
        as a change.
        """
        return self.completed.ndcg_zero_fill if self.added else self.official


@dataclass(frozen=True)
class CompletedScores:
    """One result set's completed scores, task by task; ``without_rankings``: its tasks with nothing to complete."""

    result_set: ResultSet
    tasks: Mapping[str, CompletedTask]
    store: str
    without_rankings: tuple[str, ...] = ()
    judges: Mapping[Judge, int] = field(default_factory=dict)
    grade: str = "hard grades (the methods' vote, as the authors grade)"

    def view(self, agreement: Mapping[Judge, str] | None = None) -> CompletedView:
        """The plain numbers the report and compare show, with the agreement line of each judge that added grades."""
        judges = [f"{model}, prompt version {version}: {count:,} judgement(s), {self.grade}"
                  for (model, version), count in sorted(self.judges.items())]
        notes = [agreement[judge] for judge in sorted(self.judges) if agreement and judge in agreement]
        return CompletedView(
            folder=self.result_set.folder, label=self.result_set.display_label,
            official={name: t.official for name, t in self.tasks.items()},
            completed={name: t.completed_ndcg for name, t in self.tasks.items()},
            unjudged_before={name: t.published.unjudged_share for name, t in self.tasks.items()},
            unjudged_after={name: t.completed.unjudged_share for name, t in self.tasks.items()},
            added={name: t.added for name, t in self.tasks.items()}, judges=judges, store=self.store,
            without_rankings=self.without_rankings, agreement=notes)


def completed_scores(result_sets: Sequence[ResultSet], added: AddedJudgements, data_dir: str | Path | None = None,
                     *, tasks: Iterable[str] | None = None) -> list[CompletedScores]:
    """Each result set's tasks scored on the published judgements and on the merged ones.

    Raises:
        ValueError: a ranking names a query the data does not hold (the runs read other data).
    """
    wanted = set(tasks) if tasks is not None else None
    merged_by_task: dict[str, MergedGrades] = {}
    found = []
    for result_set in result_sets:
        scored: dict[str, CompletedTask] = {}
        missing: list[str] = []
        judges: Counter[Judge] = Counter()
        for task in sorted(result_set.scores):
            if wanted is not None and task not in wanted:
                continue
            if not result_set.has_per_query(task):
                missing.append(task)
                continue
            texts = load_task_texts(task, data_dir)
            if task not in merged_by_task:
                merged_by_task[task] = merge_grades(texts, added)
            merged = merged_by_task[task]
            top = {query_id: list(ranked[:TOP_K]) for query_id, ranked in result_set.per_query(task).top10.items()}
            unknown = [query_id for query_id in top if query_id not in texts.queries]
            if unknown:
                raise InvalidInput(f"{result_set.folder}: {task} ranks query {unknown[0]!r}, which the data does not "
                                   "hold; score with the data the run read (--data).")
            filled = sum(1 for query_id, ranked in top.items() for doc_id in ranked
                         if (query_id, doc_id) in merged.added)
            task_judges = merged.judges()
            judges.update(task_judges)
            scored[task] = CompletedTask(
                task=task, official=result_set.scores[task], published=_by_text(top, texts.grades, texts),
                completed=_by_text(top, merged.grades, texts), added=len(merged.added), filled=filled,
                judges=dict(task_judges))
        found.append(CompletedScores(result_set, scored, added.store, tuple(missing), dict(judges),
                                     added.describe_grade()))
        logger.info("%s: %d task(s) completed with %d added judgement(s).", result_set.display_label, len(scored),
                    sum(t.added for t in scored.values()))
    return found


def _by_text(top: Mapping[str, Sequence[str]], grades: Mapping[str, Mapping[str, float]],
             texts: TaskTexts) -> RunScores:
    """The authors' metrics of ``top`` against ``grades``, keyed by text as the task keys its official score."""
    keyed_top, keyed_grades = key_by_text(top, grades, shared_texts(grades, texts.first_copy))
    return score_run(keyed_top, keyed_grades, TOP_K)


def completed_views(store_path: str | Path, result_sets: Sequence[ResultSet], *, judge_model: str | None = None,
                    prompt_version: str | None = None, grade: str = "hard",
                    data_of: Callable[[list[ResultSet]], Path | None]) -> dict[Path, CompletedView]:
    """``report``/``compare --judgements STORE``: each full-set result set's completed scores, as plain numbers.

    Each judge's stored agreement goes beside its scores; ``data_of`` gives the data folder the full-set runs read.

    Raises:
        FileNotFoundError: no judgement store at ``store_path``.
        ValueError: no set of the full query set, or no graded judgement (of that judge model and prompt version).
    """
    from disastir_mteb.judging.agreement import agreement_note

    if not Path(store_path).is_file():
        raise MissingInput(f"--judgements {store_path}: no such judgement store; judge the runs first "
                           "(disastir-mteb judge RESULTS --model M --base-url URL --store FILE).")
    full = [s for s in result_sets if s.is_disastir]
    if not full:
        raise InvalidInput("--judgements completes result sets of the full query set (DisastIR-<Intent>-<Category>); "
                           "these folders hold none.")
    with JudgementStore(store_path) as store:
        added = load_added(store, judge_model=judge_model, prompt_version=prompt_version, grade=grade)
        agreement = {judge: agreement_note(store.agreement(*judge), judge_model=judge[0], prompt_version=judge[1])
                     for judge in set(added.judges.values())}
    if not added.grades:
        which = " ".join(f"of {name} {value}" for name, value in (("judge model", judge_model),
                                                                   ("prompt version", prompt_version)) if value)
        raise InvalidInput(f"{store_path} holds no graded judgement{' ' + which if which else ''}; judge the "
                           "runs first (disastir-mteb judge), or check --judge-model and --prompt-version.")
    return {found.result_set.folder: found.view(agreement) for found in completed_scores(full, added, data_of(full))}

"""The holes of the pool: top-10 passages of a result set that the published judgements never saw.

A hole is judged by text, as the published judgements are keyed, so one judgement fills it wherever the same texts
meet again (another run, a copy of the passage under another id).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from disastir_mteb.data.layout import find_task_files
from disastir_mteb.data.published import load_task
from disastir_mteb.data.reading import load_corpus
from disastir_mteb.data.source import DataSource
from disastir_mteb.results.result_sets import ResultSet, collect_result_sets
from disastir_mteb.util.errors import InvalidInput, MissingInput
from disastir_mteb.vocabulary.taxonomy import Intent, Split, get_spec

logger = logging.getLogger(__name__)

__all__ = ["Hole", "Holes", "TaskTexts", "find_holes", "load_task_texts", "rankings_held", "result_sets_of"]

#: The depth the authors score and pool at.
DEPTH = 10


@dataclass(frozen=True)
class TaskTexts:
    """One task's texts and published grades by id, as the holes, completed scores and agreement check read them.

    Every copy of a judged text carries its grade; ``first_copy`` maps each corpus id whose text another id also holds
    to the first such id, which scoring by text needs.
    """

    task: str
    intent: Intent
    queries: Mapping[str, str]
    passages: Mapping[str, str]
    grades: Mapping[str, Mapping[str, int]]
    first_copy: Mapping[str, str]


@cache
def _passages(corpus_path: str, size: int, mtime: int) -> Mapping[str, str]:
    dataset = load_corpus(corpus_path).dataset
    return dict(zip(dataset["id"], dataset["text"], strict=True))


@cache
def _task_texts(task: str, data_dir: str) -> TaskTexts:
    spec = get_spec(task)
    files = find_task_files(data_dir)
    data = load_task(spec, files, log=logger)
    stat = files.corpus.stat()
    return TaskTexts(task, spec.intent, dict(zip(data.queries["id"], data.queries["text"], strict=True)),
                     _passages(str(files.corpus), stat.st_size, stat.st_mtime_ns), data.grades,
                     load_corpus(files.corpus).first_copy)


def load_task_texts(task: str, data_dir: str | Path | None = None) -> TaskTexts:
    """One full-set task's texts and grades, read once per process and task (the corpus once for all tasks).

    Raises:
        ValueError: not a task of the full query set (judging reads the full set's data), or bad data.
        FileNotFoundError: no data there.
    """
    spec = get_spec(task)
    if spec.split is not Split.full:
        raise InvalidInput(f"{task} is a {spec.split.value} task; judging reads result sets of the full query set "
                           "(DisastIR-<Intent>-<Category>), whose queries hold every published judgement.")
    folder = Path(data_dir) if data_dir is not None else DataSource.from_environment().main_folder()
    return _task_texts(task, str(Path(folder).resolve()))


@dataclass(frozen=True)
class Hole:
    """One retrieved, unjudged (query, passage) pair, by text and by where it was found."""

    task: str
    intent: Intent
    query_id: str
    doc_id: str
    query: str
    passage: str


@dataclass
class Holes:
    """What :func:`find_holes` found: the distinct holes by text, in the order first met, and the hits counted."""

    pairs: list[Hole] = field(default_factory=list)
    retrieved: int = 0
    unjudged: int = 0
    result_sets: list[str] = field(default_factory=list)
    without_rankings: list[str] = field(default_factory=list)

    @property
    def unjudged_share(self) -> float:
        """Unjudged hits / hits (the authors' ``unannotated_ratio``)."""
        return self.unjudged / self.retrieved if self.retrieved else 0.0


def result_sets_of(paths: Iterable[str | Path]) -> list[ResultSet]:
    """The full-set result sets at or under each path (a folder at any level), each once.

    Raises:
        FileNotFoundError: a path does not exist or holds no DisastIR result set of the full query set.
    """
    found: dict[Path, ResultSet] = {}
    for path in paths:
        sets = [s for s in collect_result_sets(path) if s.is_disastir]  # a built benchmark's are not judged
        if not sets:
            raise MissingInput(f"{path} holds no DisastIR result set of the full query set (DisastIR-*.json); "
                               "run a model first (disastir-mteb run -m MODEL).")
        for result_set in sets:
            found.setdefault(result_set.folder.resolve(), result_set)
    return list(found.values())


def rankings_held(result_sets: Sequence[ResultSet], tasks: Iterable[str] | None = None) -> tuple[int, list[str]]:
    """(tasks of the sets considered, ``folder: task`` of those without per-query rankings), only ``tasks`` if given.

    Plain ``mteb run`` writes no per-query file; with none at all the judge says there is nothing to judge rather
    than "nothing to ask".
    """
    wanted = set(tasks) if tasks is not None else None
    considered, missing = 0, []
    for result_set in result_sets:
        for task in sorted(result_set.scores):
            if wanted is None or task in wanted:
                considered += 1
                if not result_set.has_per_query(task):
                    missing.append(f"{result_set.folder}: {task}")
    return considered, missing


def find_holes(result_sets: Sequence[ResultSet], data_dir: str | Path | None = None, *,
               tasks: Iterable[str] | None = None, depth: int = DEPTH) -> Holes:
    """Every unjudged pair in the top ``depth`` of the result sets' per-query rankings, each distinct text pair once.

    Raises:
        ValueError: a ranking names a query or passage the data does not hold (the runs read other data).
    """
    wanted = set(tasks) if tasks is not None else None
    holes = Holes()
    seen: set[tuple[Intent, str, str]] = set()
    for result_set in result_sets:
        holes.result_sets.append(result_set.label)
        for task in sorted(result_set.scores):
            if wanted is not None and task not in wanted:
                continue
            if not result_set.has_per_query(task):
                holes.without_rankings.append(f"{result_set.folder}: {task}")
                continue
            texts = load_task_texts(task, data_dir)
            for query_id, ranked in result_set.per_query(task).top10.items():
                judged = texts.grades.get(query_id)
                if judged is None:
                    continue  # a query without judgements is not scored (the authors skip it too)
                query = texts.queries.get(query_id)
                if query is None:
                    raise InvalidInput(f"{result_set.folder}: {task} ranks query {query_id!r}, which the data does not "
                                       "hold; judge with the data the run read (--data).")
                for doc_id in ranked[:depth]:
                    holes.retrieved += 1
                    if doc_id in judged:
                        continue
                    holes.unjudged += 1
                    passage = texts.passages.get(doc_id)
                    if passage is None:
                        raise InvalidInput(f"{result_set.folder}: {task} ranks passage {doc_id!r}, which the corpus "
                                           "does not hold; judge with the data the run read (--data).")
                    key = (texts.intent, query.strip(), passage.strip())
                    if key not in seen:
                        seen.add(key)
                        holes.pairs.append(Hole(task, texts.intent, query_id, doc_id, key[1], key[2]))
    return holes

"""DisastIR-DevLite and DisastIR-Test tasks -> mteb split data, with the joins, gains and reports of the full set.

DMRetriever splits each task's 200 queries into DevLite (10, over a pooled corpus of its own) and Test (the other
190, over the full corpus). Ids are the main dataset's for the same stripped text, so runs on either split and on
the full set compare per query and per passage; derived ids start with ``devlite-`` and never meet a main id.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from disastir_mteb.data.devlite_layout import (
    PASSAGE_ID_FIELDS,
    PASSAGE_TEXT_FIELDS,
    SplitFiles,
    find_split_files,
)
from disastir_mteb.data.layout import TaskFiles
from disastir_mteb.data.published import Gain, LoadReport, TaskData, join_task, read_queries
from disastir_mteb.data.reading import Corpus, field_value, load_corpus, read_rows, text_digest
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import Split, TaskSpec

logger = logging.getLogger(__name__)

__all__ = ["QuerySplit", "cached_split_files", "devlite_query_ids", "load_devlite_corpus", "load_devlite_task",
           "load_split_task", "load_test_task", "split_queries"]


def _hash(text: str) -> str:
    return hashlib.blake2b(text.strip().encode("utf-8"), digest_size=8).hexdigest()


def _unique(candidate: str, used: set[str]) -> str:
    """``candidate``, or ``candidate-2``, ``-3`` ... when taken; recorded in ``used``."""
    name, n = candidate, 1
    while name in used:
        n += 1
        name = f"{candidate}-{n}"
    used.add(name)
    return name


@cache
def cached_split_files(folder: Path) -> SplitFiles:
    """Find and place the DevLite files of ``folder`` once per process (``.cache_clear()`` to rescan)."""
    return find_split_files(folder)


_DEVLITE_CORPUS_CACHE: dict[tuple[str, int, int, str], Corpus] = {}


def load_devlite_corpus(path: str | Path, main: Corpus) -> Corpus:
    """Read a pooled corpus file once per process, each passage taking the main corpus id of the same stripped text.

    The k-th copy of a repeated text takes the k-th id; a text absent from ``main`` gets ``devlite-<its own id>``, or
    ``devlite-p-<hash of the text>``.

    Raises:
        ValueError: the file is not JSON, holds no passages, or a row has no text field.
    """
    from datasets import Dataset

    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns, str(main.path))
    if key in _DEVLITE_CORPUS_CACHE:
        return _DEVLITE_CORPUS_CACHE[key]
    ids: list[str] = []
    texts: list[str] = []
    used: set[str] = set()
    copies: dict[bytes, int] = defaultdict(int)
    ids_by_text: dict[bytes, list[str]] = defaultdict(list)
    for where, record in read_rows(path):
        text = str(field_value(record, PASSAGE_TEXT_FIELDS, path=path, where=where, text=True)).strip()
        own = field_value(record, PASSAGE_ID_FIELDS, path=path, where=where, text=False)
        digest = text_digest(text)
        main_ids = main.ids_for(text)
        copy = copies[digest]
        copies[digest] += 1
        if copy < len(main_ids):
            doc_id = _unique(main_ids[copy], used)
        else:
            doc_id = _unique(f"devlite-{own}" if own else f"devlite-p-{_hash(text)}", used)
        ids.append(doc_id)
        texts.append(text)
        ids_by_text[digest].append(doc_id)
    corpus = Corpus(path=path, dataset=Dataset.from_dict({"id": ids, "text": texts}), ids_by_text=dict(ids_by_text),
                    duplicate_texts=len(ids) - len(ids_by_text))
    reused = sum(1 for doc_id in ids if not doc_id.startswith("devlite-"))
    logger.info("Loaded DisastIR-DevLite corpus %s: %d passages, %d with the id of the same text in %s.",
                path, len(ids), reused, main.path.name)
    _DEVLITE_CORPUS_CACHE.clear()  # one pooled corpus in memory at a time
    _DEVLITE_CORPUS_CACHE[key] = corpus
    return corpus


def devlite_query_ids(spec: TaskSpec, files: SplitFiles, main_queries: dict[str, str]) -> dict[str, str]:
    """{query id: text} of a task's DevLite queries, ids from ``main_queries`` {id: text} by stripped text.

    A text absent from the main queries gets ``devlite-<its own id>``, or ``devlite-q-<Intent>-<Category>-<hash>``.
    """
    main_by_text: dict[str, list[str]] = defaultdict(list)
    for query_id, text in main_queries.items():
        main_by_text[text.strip()].append(query_id)
    used: set[str] = set()
    copies: dict[str, int] = defaultdict(int)
    queries: dict[str, str] = {}
    for query in files.devlite_queries.get(spec.base, ()):
        text = query.text.strip()
        main_ids, copy = main_by_text.get(text, []), copies[text]
        copies[text] += 1
        if copy < len(main_ids):
            query_id = _unique(main_ids[copy], used)
        else:
            own = f"devlite-{query.query_id}" if query.query_id else None
            query_id = _unique(own or f"devlite-q-{spec.intent.value}-{spec.category.value}-{_hash(text)}", used)
        queries[query_id] = query.text
    return queries


@dataclass(frozen=True)
class QuerySplit:
    """One task's main queries split by DevLite: the Test part {id: text}, and what did not add up."""

    test: dict[str, str]
    devlite_texts: frozenset[str]
    devlite_not_in_main: int


def split_queries(spec: TaskSpec, files: SplitFiles, main_queries: dict[str, str]) -> QuerySplit:
    """The Test queries of a task: ``main_queries`` without the task's DevLite queries (by stripped text)."""
    devlite = frozenset(query.text.strip() for query in files.devlite_queries.get(spec.base, ()))
    main_texts = {text.strip() for text in main_queries.values()}
    test = {query_id: text for query_id, text in main_queries.items() if text.strip() not in devlite}
    return QuerySplit(test=test, devlite_texts=devlite, devlite_not_in_main=len(devlite - main_texts))


def _cross_check(spec: TaskSpec, files: SplitFiles, derived: dict[str, str], log: logging.Logger) -> None:
    """Compare the derived Test queries with the folder's own Test query file, if any: one warning when they differ."""
    given = files.test_queries.get(spec.base)
    if given is None:
        return
    given_texts = {query.text.strip() for query in given}
    derived_texts = {text.strip() for text in derived.values()}
    if given_texts != derived_texts:
        log.warning("%s: the derived Test queries (%d) differ from %s (%d): %d only derived, %d only in the file; "
                    "using the derived set.", spec.name, len(derived_texts), given[0].source.name, len(given_texts),
                    len(derived_texts - given_texts), len(given_texts - derived_texts))


def load_test_task(spec: TaskSpec, files: SplitFiles, main: TaskFiles, *, gain: Gain = "exponential",
                   log: logging.Logger | None = None, keep: bool = True) -> TaskData:
    """A DisastIR-Test task, derived: the main queries minus DevLite's (by text), the full corpus, the main qrels.

    The folder's own Test query files, if any, are only a cross-check (one warning with counts where they differ).

    Raises:
        FileNotFoundError: the main dataset has no file for the task.
        ValueError: as :func:`disastir_mteb.data.published.load_task`.
    """
    log = log or logger
    query_path, qrels_path = main.for_task(spec.base)
    parts = split_queries(spec, files, read_queries(spec.base, query_path))
    if parts.devlite_not_in_main:
        log.warning("%s: %d DevLite quer(y/ies) of the task are not among the %s queries of %s; Test keeps them all.",
                    spec.name, parts.devlite_not_in_main, spec.base.name, query_path.name)
    _cross_check(spec, files, parts.test, log)
    report = LoadReport(task=spec.name, query_file=f"{query_path} without the DevLite queries",
                        qrels_file=str(qrels_path))
    return join_task(spec, parts.test, qrels_path, load_corpus(main.corpus, keep=keep), report=report, gain=gain,
                     log=log, query_source=f"{query_path.name} without the DevLite queries",
                     corpus_source=main.corpus.name, other_queries=parts.devlite_texts)


def load_devlite_task(spec: TaskSpec, files: SplitFiles, main: TaskFiles, *, gain: Gain = "exponential",
                      log: logging.Logger | None = None, keep: bool = True) -> TaskData:
    """A DisastIR-DevLite task: its queries, the pooled corpus, ``qrels_with_added/`` or else the main qrels.

    Judgements of passages outside the pool are dropped and counted: a search of the pool can never return them.

    Raises:
        FileNotFoundError: the main dataset has no file for the task.
        ValueError: as :func:`disastir_mteb.data.published.load_task`, or a malformed pooled corpus.
    """
    query_path, main_qrels = main.for_task(spec.base)
    main_queries = read_queries(spec.base, query_path)
    full = load_corpus(main.corpus, keep=keep)
    pooled = load_devlite_corpus(files.corpus, full)
    queries = devlite_query_ids(spec, files, main_queries)
    devlite_texts = {text.strip() for text in queries.values()}
    others = frozenset(text.strip() for text in main_queries.values()) - devlite_texts
    qrels_path = files.qrels.get(spec.base, main_qrels)
    given = files.devlite_queries.get(spec.base, ())
    source = given[0].source.name if given else "the DevLite queries"
    report = LoadReport(task=spec.name, query_file=str(given[0].source if given else files.root),
                        qrels_file=str(qrels_path))
    return join_task(spec, queries, qrels_path, pooled, report=report, gain=gain, log=log, query_source=source,
                     corpus_source=files.corpus.name, other_queries=others, outside=full)


def load_split_task(spec: TaskSpec, files: SplitFiles, main: TaskFiles, *, gain: Gain = "exponential",
                    log: logging.Logger | None = None, keep: bool = True) -> TaskData:
    """:func:`load_test_task` or :func:`load_devlite_task`, by ``spec.split`` (``keep``: the data cache on).

    Raises:
        ValueError: ``spec`` is a full-set task (those load through :func:`disastir_mteb.data.published.load_task`).
    """
    if spec.split is Split.test:
        return load_test_task(spec, files, main, gain=gain, log=log, keep=keep)
    if spec.split is Split.devlite:
        return load_devlite_task(spec, files, main, gain=gain, log=log, keep=keep)
    raise InvalidInput(f"{spec.name} is a full-set task; load it with disastir_mteb.data.published.load_task.")

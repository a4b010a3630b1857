"""Finding the DisastIR-DevLite layout: the folder, and each task's DevLite queries, Test queries, qrels and corpus.

The layout is not published, so two are accepted, their parts possibly mixed: **eval-code**, what DMRetriever's
evaluation code reads (``test_query_eva/``, ``test_query_test/``, ``qrels_with_added/``, ``corpus/``), and
**card**, an earlier dataset card's (``DisastIR_devlite_query.json`` and its siblings, each row naming its task).
File names go through the main loader's alias table; one error names every file, row or task left unplaced.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from disastir_mteb.data.layout import MARKER
from disastir_mteb.data.reading import check_query_texts, field_value, read_rows
from disastir_mteb.util.errors import InvalidInput, MissingInput
from disastir_mteb.vocabulary.taxonomy import (
    SPLIT_LABELS,
    TASK_SPECS,
    Split,
    TaskSpec,
    parse_category,
    parse_intent,
    parse_task_file,
    task_name,
)

logger = logging.getLogger(__name__)

__all__ = ["CATEGORY_FIELDS", "DEVLITE_DIR_ENV", "INTENT_FIELDS", "LAYOUTS", "PASSAGE_ID_FIELDS", "PASSAGE_TEXT_FIELDS",
           "QUERY_ID_FIELDS", "QUERY_TEXT_FIELDS", "SplitFiles", "SplitLayout", "SplitQuery", "find_split_files",
           "resolve_devlite_dir"]

DEVLITE_DIR_ENV = "DISASTIR_DEVLITE_DIR"
SplitLayout = Literal["eval-code", "card"]
LAYOUTS: tuple[SplitLayout, ...] = ("eval-code", "card")

#: Row fields, first present non-null one wins.
INTENT_FIELDS = ("intent", "task", "query_type", "task_type")
CATEGORY_FIELDS = ("category", "event", "disaster_type", "event_type")
QUERY_TEXT_FIELDS = ("user_query", "query", "text")
QUERY_ID_FIELDS = ("query_id", "id", "_id")
PASSAGE_TEXT_FIELDS = ("text", "passage", "contents")
PASSAGE_ID_FIELDS = ("corpus_id", "id", "_id")

_JSON_SUFFIXES = (".json", ".jsonl")
_DEVLITE_DIR, _TEST_DIR, _QRELS_DIR, _CORPUS_DIR = "test_query_eva", "test_query_test", "qrels_with_added", "corpus"
_CARD_DEVLITE, _CARD_TEST, _CARD_CORPUS = "disastir_devlite_query", "disastir_test_query", "disastir_devlite_passage"
_EVAL_CORPUS, _FULL_CORPUS = "ordered_corpus_eva", "ordered_corpus_full"
_QUIET = ("readme", "license", "licence")  # files a Hub repository carries: neither data nor strays
_EXPECTED = ("expected the eval-code layout (test_query_eva/{Intent}_{event}.json, corpus/ordered_corpus_eva.json, "
             "optional test_query_test/ and qrels_with_added/{Intent}_{event}_qrels.json) or the card layout "
             "(DisastIR_devlite_query.json rows naming intent and category, DisastIR_devlite_passage.json)")


def resolve_devlite_dir(repo: str, revision: str) -> Path:
    """The Hub snapshot of DisastIR-DevLite, without the full corpus it never reads (a local folder: ``DataSource``).

    Raises:
        FileNotFoundError: the data is neither cached nor downloadable.
    """
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        snapshot = huggingface_hub.snapshot_download(
            repo_id=repo, repo_type="dataset", revision=revision,
            allow_patterns=["*.json", "*.jsonl", "README.md"],  # fnmatch: '*' spans folders too
            ignore_patterns=[f"*{_FULL_CORPUS}.json", f"*{_FULL_CORPUS}.jsonl"],
        )
    except LocalEntryNotFoundError:
        raise MissingInput(
            f"DisastIR-DevLite data {repo}@{revision} is not in the Hugging Face cache and the Hub cannot be reached "
            f"(offline?); set {DEVLITE_DIR_ENV} to a local copy (disastir-mteb run: --devlite DIR) or download it once "
            f"online; `disastir-mteb sample --out DIR --devlite eval-code` writes synthetic data with a DevLite folder "
            f"to try the tools with."
        ) from None
    return Path(snapshot)


@dataclass(frozen=True)
class SplitQuery:
    """One query row of a DevLite or Test file: its text as written, its own id if any, and where it was read."""

    text: str
    query_id: str | None
    source: Path


@dataclass(frozen=True)
class SplitFiles:
    """Where each part of a DevLite folder lives; queries by full-set spec (``TaskSpec.base``), already read."""

    root: Path
    layout: SplitLayout
    corpus: Path
    devlite_queries: dict[TaskSpec, tuple[SplitQuery, ...]]
    test_queries: dict[TaskSpec, tuple[SplitQuery, ...]] = field(default_factory=dict)
    qrels: dict[TaskSpec, Path] = field(default_factory=dict)
    full_corpus: Path | None = None


class _Finder:
    """Collects what a DevLite folder holds, then judges it once (so one error names every problem)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.queries: dict[Split, dict[TaskSpec, list[SplitQuery]]] = {Split.devlite: {}, Split.test: {}}
        self.owner: dict[tuple[Split, TaskSpec], str] = {}
        self.seen: set[Split] = set()
        self.qrels: dict[TaskSpec, Path] | None = None
        self.corpus: list[Path] = []
        self.full_corpus: Path | None = None
        self.layout: set[SplitLayout] = set()
        self.unplaced: list[str] = []  # JSON files that name no part or task
        self.bad_rows: list[str] = []  # card-layout query rows that name no task
        self.strays: list[str] = []

    def name(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def claim(self, split: Split, spec: TaskSpec, source: str) -> None:
        if (split, spec) in self.owner and self.owner[split, spec] != source:
            raise InvalidInput(f"{self.root}: both {self.owner[split, spec]!r} and {source!r} give the "
                               f"{SPLIT_LABELS[split]} queries of task {task_name(spec.intent, spec.category, split)}; "
                               "remove one of them.")
        self.owner[split, spec] = source

    def task_folder(self, folder: Path, split: Split | None) -> None:
        """``test_query_eva/``, ``test_query_test/`` (split given) or ``qrels_with_added/`` (None): files by name."""
        placed: dict[TaskSpec, Path] = {}
        for path in sorted(p for p in folder.iterdir() if not p.name.startswith(".")):
            if not path.is_file() or path.suffix not in _JSON_SUFFIXES:
                self.strays.append(self.name(path))
                continue
            try:
                spec = parse_task_file(path.stem)
            except ValueError:
                self.unplaced.append(self.name(path))
                continue
            if spec in placed:
                raise InvalidInput(f"{self.root}: both {self.name(placed[spec])!r} and {self.name(path)!r} map to task "
                                   f"{spec.name}; remove one of them.")
            placed[spec] = path
            if split is not None:
                self.claim(split, spec, self.name(path))
                self.queries[split][spec] = self.query_rows(path, read_rows(path))
        if split is None:
            self.qrels = placed
        else:
            self.seen.add(split)

    def query_rows(self, path: Path, rows: list[tuple[str, object]]) -> list[SplitQuery]:
        """The queries of ``rows`` of one file, refused when one has a blank text (as the main queries are)."""
        queries = [(where, self.query(path, where, record)) for where, record in rows]
        check_query_texts(path, [(where, query.query_id, query.text) for where, query in queries],
                          field="query text")
        return [query for _, query in queries]

    def query(self, path: Path, where: str, record: object) -> SplitQuery:
        text = field_value(record, QUERY_TEXT_FIELDS, path=path, where=where, text=True)
        own = field_value(record, QUERY_ID_FIELDS, path=path, where=where, text=False)
        return SplitQuery(text=str(text), query_id=own, source=path)

    def card_file(self, path: Path, split: Split) -> None:
        """``DisastIR_devlite_query.json`` / ``DisastIR_test_query.json``: each row names its task."""
        self.seen.add(split)
        bad: list[str] = []
        placed: list[tuple[str, TaskSpec, object]] = []
        for where, record in read_rows(path):
            spec = _row_task(record)
            if spec is None:
                bad.append(where)
                continue
            placed.append((where, spec, record))
        queries = self.query_rows(path, [(where, record) for where, _, record in placed])
        for (_, spec, _), query in zip(placed, queries, strict=True):
            self.claim(split, spec, self.name(path))
            self.queries[split].setdefault(spec, []).append(query)
        if bad:
            self.bad_rows.append(f"{len(bad)} row(s) of {self.name(path)} ({', '.join(bad[:3])}"
                                 f"{', ...' if len(bad) > 3 else ''}) naming no task in {list(INTENT_FIELDS)} "
                                 f"and {list(CATEGORY_FIELDS)}")

    def scan(self) -> None:
        for entry in sorted(p for p in self.root.iterdir() if not p.name.startswith(".") and p.name != MARKER):
            key = entry.stem.casefold() if entry.is_file() else entry.name.casefold()
            if entry.is_dir():
                if key in (_DEVLITE_DIR, _TEST_DIR, _QRELS_DIR):
                    if key == _DEVLITE_DIR:
                        self.layout.add("eval-code")
                    self.task_folder(entry, {_DEVLITE_DIR: Split.devlite, _TEST_DIR: Split.test}.get(key))
                elif key == _CORPUS_DIR:
                    for path in sorted(p for p in entry.iterdir() if not p.name.startswith(".")):
                        self.top_file(path, path.stem.casefold())
                else:
                    self.strays.append(f"{entry.name}/")
            else:
                self.top_file(entry, key)

    def top_file(self, path: Path, key: str) -> None:
        if not path.is_file() or path.suffix not in _JSON_SUFFIXES:
            if not key.startswith(_QUIET):
                self.strays.append(self.name(path))
        elif key in (_CARD_DEVLITE, _CARD_TEST):
            if key == _CARD_DEVLITE:
                self.layout.add("card")
            self.card_file(path, Split.devlite if key == _CARD_DEVLITE else Split.test)
        elif key in (_EVAL_CORPUS, _CARD_CORPUS):
            self.corpus.append(path)
        elif key == _FULL_CORPUS:
            self.full_corpus = path
        else:
            self.unplaced.append(self.name(path))

    def result(self) -> SplitFiles:
        problems = []
        missing = {split: [spec for spec in TASK_SPECS if spec not in self.queries[split]] for split in self.seen}
        if Split.devlite not in self.seen:
            missing[Split.devlite] = list(TASK_SPECS)
        problems += [f"{_listed(specs, split)} have no {SPLIT_LABELS[split]} queries"
                     for split, specs in missing.items() if specs]
        if self.qrels is not None and (absent := [s for s in TASK_SPECS if s not in self.qrels]):
            problems.append(f"{_listed(absent, Split.devlite)} have no file in {_QRELS_DIR}/")
        if len(self.corpus) != 1:
            problems.append("no pooled corpus" if not self.corpus else
                            f"{len(self.corpus)} pooled corpora ({', '.join(self.name(p) for p in self.corpus)})")
        if len(self.layout) > 1:
            problems.append("DevLite queries in both layouts (test_query_eva/ and DisastIR_devlite_query.json)")
        if problems or self.bad_rows:  # one sentence: what could not be placed, then what is missing
            unplaced = self.unplaced + self.bad_rows
            placed = [f"could not place {', '.join(unplaced)}"] if unplaced else []
            raise InvalidInput(f"DisastIR-DevLite folder {self.root}: {'; '.join(placed + problems)}; {_EXPECTED}.")
        if self.unplaced:  # all parts complete: a stray JSON file is only a warning, as in the main layout
            logger.warning("%s: ignoring %d JSON file(s) that are no DevLite file (%s).", self.root,
                           len(self.unplaced), ", ".join(self.unplaced[:5]))
        if self.strays:
            logger.warning("%s: ignoring %d file(s) that are no DevLite JSON file (%s).", self.root, len(self.strays),
                           ", ".join(self.strays[:5]) + (", ..." if len(self.strays) > 5 else ""))
        (layout,) = self.layout
        return SplitFiles(
            root=self.root, layout=layout, corpus=self.corpus[0],
            devlite_queries={s: tuple(q) for s, q in self.queries[Split.devlite].items()},
            test_queries={s: tuple(q) for s, q in self.queries[Split.test].items()},
            qrels=self.qrels or {}, full_corpus=self.full_corpus)


def _listed(specs: list[TaskSpec], split: Split) -> str:
    """``2 task(s) (DisastIR-DevLite-QA-Bio, ...)``: the first six by name."""
    names = [task_name(s.intent, s.category, split) for s in specs]
    return f"{len(names)} task(s) ({', '.join(names[:6])}{', ...' if len(names) > 6 else ''})"


def _row_task(record: object) -> TaskSpec | None:
    """The task a card-layout query row names (intent and category, or one field naming the task), or None."""
    if not isinstance(record, dict):
        return None
    intent = next((str(record[k]) for k in INTENT_FIELDS if record.get(k) is not None), None)
    category = next((str(record[k]) for k in CATEGORY_FIELDS if record.get(k) is not None), "")
    if intent is None:
        return None
    try:
        return TaskSpec(parse_intent(intent), parse_category(category))
    except ValueError:
        pass
    try:  # one field naming the whole task: 'QA_Biological', 'DisastIR-QA-Bio'
        return parse_task_file(intent.removeprefix("DisastIR-").removeprefix("DisastIR_"))
    except ValueError:
        return None


def find_split_files(root: str | Path) -> SplitFiles:
    """Scan a DevLite folder (either layout) and place every file, or every query row, on one of the 48 tasks.

    Raises:
        FileNotFoundError: ``root`` is no folder.
        ValueError: one sentence naming what could not be placed and which tasks lack files; or two files for one
            task; or a malformed query file.
    """
    root = Path(root)
    if not root.is_dir():
        raise MissingInput(f"{root} is not a DisastIR-DevLite folder; {_EXPECTED}.")
    finder = _Finder(root)
    finder.scan()
    return finder.result()

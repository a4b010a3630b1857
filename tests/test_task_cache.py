"""The data cache: every task read back equals its join field for field, and nothing changed is ever served stale.

Each test points ``DISASTIR_CACHE_DIR`` at a folder of its own and compares what the cache serves with the join
itself (:func:`disastir_mteb.data.published.load_task` with the cache off and the corpus read again from its file):
the queries, the corpus (ids, texts, ``datasets`` fingerprint, one object for all tasks), the gains handed to
mteb, the raw grades, the ids sharing a judged text and the whole load report. Joins are counted by wrapping
``published.join_task``; a second process proves it reads every task with the join and the corpus reader refused.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow
import pytest
from sentences import says

from conftest import read_only, write_layout
from disastir_mteb.data import data_cache, published
from disastir_mteb.data.data_cache import FOLDER, TASK_CACHE_ENV
from disastir_mteb.data.devlite import load_split_task
from disastir_mteb.data.devlite_layout import find_split_files
from disastir_mteb.data.extra_qrels import extra_qrels_file
from disastir_mteb.data.layout import find_task_files
from disastir_mteb.data.published import TaskData, load_task
from disastir_mteb.data.reading import forget_corpus
from disastir_mteb.data.source import DataSource
from disastir_mteb.data.task_cache import load_cached_task
from disastir_mteb.runner.data_source import data_source
from disastir_mteb.sample.devlite import devlite_sample_dir
from disastir_mteb.vocabulary.taxonomy import TASK_SPECS, get_spec

QA_BIO = get_spec("DisastIR-QA-Bio")
QRELS = "qrels/QA_Biological_qrels.json"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A data cache of the test's own (``DISASTIR_CACHE_DIR``), on; no corpus held before or after."""
    monkeypatch.setenv("DISASTIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(TASK_CACHE_ENV, raising=False)
    forget_corpus()
    yield tmp_path / "cache"
    forget_corpus()


@pytest.fixture
def joins(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the tasks joined (``published.join_task`` called), in order."""
    joined: list[str] = []
    join = published.join_task

    def counted(spec: Any, *args: Any, **kwargs: Any) -> TaskData:
        joined.append(spec.name)
        return join(spec, *args, **kwargs)

    monkeypatch.setattr(published, "join_task", counted)
    return joined


def _fields(data: TaskData) -> dict[str, Any]:
    """Everything a task hands mteb and the scorers, orders included."""
    return {
        "queries": (data.queries.to_dict(), data.queries.features, data.queries._fingerprint),
        "corpus": (data.corpus["id"][:], data.corpus["text"][:], data.corpus.features, data.corpus._fingerprint),
        "relevant_docs": [(query, list(docs.items())) for query, docs in data.relevant_docs.items()],
        "grades": [(query, list(docs.items())) for query, docs in data.grades.items()],
        "same_text": list(data.same_text.items()),
        "report": dataclasses.asdict(data.report),
    }


def _joined(spec: Any, root: Path, monkeypatch: pytest.MonkeyPatch, **options: Any) -> TaskData:
    """The task as the join gives it, with the cache off and the corpus read from its file."""
    forget_corpus()
    data = load_task(spec, find_task_files(root), keep=False, **options)
    forget_corpus()
    return data


def _load_all(root: Path, **options: Any) -> list[TaskData]:
    files = find_task_files(root)
    return [load_cached_task(spec, files, **options) for spec in TASK_SPECS]


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / FOLDER).rglob("*.checked") if p.parent.name != "corpus")


# ----------------------------------------------------------------------------- equal to the join


@pytest.mark.parametrize("gain", ["exponential", "linear"])
def test_the_cached_load_equals_the_join_on_the_sample(gain: str, sample_data: Path, cache: Path,
                                                       joins: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    cold = _load_all(sample_data, gain="exponential")
    assert len(joins) == 48 and len(_entries(cache)) == 48
    forget_corpus()  # read the corpus back from its entry too
    warm = _load_all(sample_data, gain=gain)  # one entry serves either gain
    assert len(joins) == 48, "a task was joined again"
    assert all(data.corpus is warm[0].corpus for data in warm), "not one shared corpus object"
    assert warm[0].corpus is not cold[0].corpus
    for spec, data in zip(TASK_SPECS, warm, strict=True):
        assert _fields(data) == _fields(_joined(spec, sample_data, monkeypatch, gain=gain)), spec.name


def _hand_made(root: Path) -> Path:
    """One task with every irregularity the join counts: duplicate and padded texts, repeated and conflicting rows,
    a duplicate query text, a query without judgements, unmatched query and passage rows."""
    corpus = {"d1": "Floods spread cholera.", "d1b": "  Floods spread cholera.\n", "d2": "Boil water.",
              "d3": "Mosquitoes breed in standing water.", "d4": "Boil water.", "d5": "Shelters open at noon."}
    queries = [{"query_id": "q1", "user_query": "How do floods spread disease?"},
               {"query_id": "q2", "user_query": " What breeds mosquitoes? "},
               {"query_id": "q3", "user_query": "How do floods spread disease?"},
               {"query_id": "q4", "user_query": "Nobody judged this one."}]
    rows = [("How do floods spread disease?", "Floods spread cholera.", 3),
            ("How do floods spread disease?", "Boil water.", 1),
            ("How do floods spread disease?", "Boil water.", 2),
            ("How do floods spread disease?", "Boil water.", 2),
            ("What breeds mosquitoes?", "Mosquitoes breed in standing water.", 2),
            ("What breeds mosquitoes?", "Shelters open at noon.", 0),
            ("What breeds mosquitoes?", "A passage no corpus holds.", 1),
            ("A query no file holds.", "Boil water.", 1)]
    return write_layout(root, corpus, {"QA_Biological": (
        queries, [{"user_query": q, "passage": p, "score": s} for q, p, s in rows])})


def test_duplicate_texts_and_conflicting_rows_come_back_as_joined(tmp_path: Path, cache: Path, joins: list[str],
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    root = _hand_made(tmp_path / "data")
    logged = []
    for _ in range(2):  # joined and kept, then read back
        caplog.clear()
        forget_corpus()
        with caplog.at_level(logging.INFO):
            data = load_cached_task(QA_BIO, find_task_files(root))
        logged.append([(r.name, r.levelno, r.getMessage()) for r in caplog.records
                       if r.name.startswith("disastir_mteb.data.") and "task cache" not in r.getMessage().lower()])
    assert joins == ["DisastIR-QA-Bio"]
    assert logged[0] == logged[1], "the read-back task logs otherwise than the join"
    warnings = [message for _, level, message in logged[1] if level == logging.WARNING]
    assert len(warnings) == 1 and "1 pair(s) graded differently" in warnings[0] and "kept 2" in warnings[0]
    report = data.report
    assert (report.duplicate_query_texts, report.repeated_pairs, report.conflicting_pairs,
            report.queries_without_judgements, report.unmatched_query_rows, report.unmatched_passage_rows,
            report.duplicate_judged_texts, report.duplicate_judged_ids) == (1, 8, 1, 1, 1, 1, 2, 4)
    assert data.same_text == {"d1": "d1", "d1b": "d1", "d2": "d2", "d4": "d2"}
    assert data.grades["q1"] == data.grades["q3"] == {"d1": 3, "d1b": 3, "d2": 2, "d4": 2}
    assert _fields(data) == _fields(_joined(QA_BIO, root, monkeypatch))


def test_a_second_process_reads_every_task_without_a_join(sample_data: Path, cache: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _load_all(sample_data)
    child = """if True:
        import json, sys
        import pyarrow.json
        from disastir_mteb.data import data_cache, published

        def refused(*args, **kwargs):
            raise AssertionError("this process read a data file it should have found in the cache")

        published.join_task = refused  # every task's join
        pyarrow.json.read_json = refused  # the corpus's JSON
        import disastir_mteb

        tasks = disastir_mteb.get_tasks()
        for task in tasks:
            task.load_data()
        split = [task.dataset["default"]["test"] for task in tasks]
        assert all(s["corpus"] is split[0]["corpus"] for s in split)
        json.dump({task.metadata.name: {"queries": s["queries"].to_dict(), "relevant_docs": s["relevant_docs"],
                                        "grades": task.grades(),
                                        "report": task.load_report.summary(), "corpus": s["corpus"]["id"][:]}
                   for task, s in zip(tasks, split)}, sys.stdout)
    """
    environment = {**os.environ, "DISASTIR_DATA_DIR": str(sample_data), "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", child], env=environment, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    served = json.loads(done.stdout)
    for spec in TASK_SPECS:
        joined = _joined(spec, sample_data, monkeypatch)
        assert served[spec.name] == {"queries": joined.queries.to_dict(), "relevant_docs": joined.relevant_docs,
                                     "grades": joined.grades,
                                     "report": joined.report.summary(), "corpus": joined.corpus["id"][:]}, spec.name


# ----------------------------------------------------------------------------- changed data is never stale


def _bump_a_grade(path: Path) -> tuple[str, str, int]:
    """Raise a grade below 2 by one in the file's text (one digit for another: the same size); the new judgement."""
    text = path.read_text(encoding="utf-8")
    rows = json.loads(text)
    pairs = Counter((row["user_query"], row["passage"]) for row in rows)
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if not line.startswith("{"):
            continue
        row = json.loads(line.rstrip(","))
        old = f'"score": {row["score"]}'
        if row["score"] < 2 and pairs[(row["user_query"], row["passage"])] == 1 and line.count(old) == 1:
            lines[number] = line.replace(old, f'"score": {row["score"] + 1}')
            path.write_text("\n".join(lines), encoding="utf-8")
            return row["user_query"], row["passage"], row["score"] + 1
    raise AssertionError(f"{path} has no grade to raise")


def _same_size_and_time(path: Path, change: Any) -> Any:
    """``change(path)`` with the file's size checked unchanged and its times put back (``os.utime``)."""
    before = path.stat()
    result = change(path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    return result


def _grade_of(data: TaskData, query: str, passage: str) -> set[int]:
    query_ids = [q for q, text in zip(data.queries["id"], data.queries["text"], strict=True) if text == query.strip()]
    passages = {doc: text for doc, text in zip(data.corpus["id"], data.corpus["text"], strict=True)}
    return {grade for q in query_ids for doc, grade in data.grades[q].items() if passages[doc] == passage.strip()}


@pytest.mark.parametrize("how", ["rewritten in place, time put back", "cp -p of an edited copy",
                                 "replaced by a renamed file, time put back"])
def test_a_grade_changed_behind_equal_size_and_time_is_read_anew(how: str, sample_data: Path, tmp_path: Path,
                                                                 cache: Path, joins: list[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "data"
    shutil.copytree(sample_data, root)  # copy2: every time kept
    assert load_cached_task(QA_BIO, find_task_files(root)).report.qrels_rows  # kept in the cache
    target = root / QRELS
    if how == "rewritten in place, time put back":
        query, passage, grade = _same_size_and_time(target, _bump_a_grade)
    elif how == "cp -p of an edited copy":
        edited = tmp_path / "edited"
        shutil.copytree(root, edited)
        query, passage, grade = _same_size_and_time(edited / QRELS, _bump_a_grade)
        inode = target.stat().st_ino
        shutil.copy2(edited / QRELS, target)  # cp -p: same inode, the copy's bytes and times
        assert target.stat().st_ino == inode and target.stat().st_mtime_ns == (edited / QRELS).stat().st_mtime_ns
    else:
        staged = tmp_path / "staged.json"
        shutil.copy2(target, staged)
        query, passage, grade = _same_size_and_time(staged, _bump_a_grade)
        os.replace(staged, target)  # rsync's way: a new file renamed over the old one
    data = load_cached_task(QA_BIO, find_task_files(root))
    assert joins == ["DisastIR-QA-Bio", "DisastIR-QA-Bio"]
    assert _grade_of(data, query, passage) == {grade}
    assert _fields(data) == _fields(_joined(QA_BIO, root, monkeypatch))


def test_a_passage_changed_in_the_corpus_is_read_anew(sample_data: Path, tmp_path: Path, cache: Path,
                                                      joins: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "data"
    shutil.copytree(sample_data, root)
    before = load_cached_task(QA_BIO, find_task_files(root))
    judged = next(iter(before.grades.values()))
    doc = next(iter(judged))
    old = dict(zip(before.corpus["id"], before.corpus["text"], strict=True))[doc]
    new = old[:-1] + ("X" if old[-1] != "X" else "Y")

    def edit(path: Path) -> None:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        lines = [line.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1]) if json.loads(line)["corpus_id"] == doc
                 else line for line in lines]
        path.write_text("".join(lines), encoding="utf-8")

    _same_size_and_time(root / "corpus.jsonl", edit)
    after = load_cached_task(QA_BIO, find_task_files(root))
    assert dict(zip(after.corpus["id"], after.corpus["text"], strict=True))[doc] == new
    assert after.corpus._fingerprint != before.corpus._fingerprint
    assert after.report.unmatched_passage_rows > before.report.unmatched_passage_rows  # its judgements lost it
    assert joins == ["DisastIR-QA-Bio", "DisastIR-QA-Bio"]
    assert _fields(after) == _fields(_joined(QA_BIO, root, monkeypatch))


def test_files_removed_or_added_are_seen_as_without_a_cache(sample_data: Path, tmp_path: Path, cache: Path,
                                                            joins: list[str]) -> None:
    root = tmp_path / "data"
    shutil.copytree(sample_data, root)
    load_cached_task(QA_BIO, find_task_files(root))
    query = root / "query" / "QA_Biological.json"
    moved = query.rename(tmp_path / "QA_Biological.json")
    with pytest.raises(FileNotFoundError) as missing:
        load_cached_task(QA_BIO, find_task_files(root))
    says(str(missing.value), root, "no query file", "DisastIR-QA-Bio", "1 of 48 tasks")
    moved.rename(query)
    shutil.copy2(root / QRELS, root / "qrels" / "QA_Bio_qrels.json")  # a second file for the task
    with pytest.raises(ValueError) as refused:
        load_cached_task(QA_BIO, find_task_files(root))
    says(str(refused.value), root / "qrels", "'QA_Bio_qrels.json'", "'QA_Biological_qrels.json'", "DisastIR-QA-Bio",
         "remove one")
    (root / "qrels" / "QA_Bio_qrels.json").unlink()
    assert load_cached_task(QA_BIO, find_task_files(root)).report.qrels_rows
    assert joins == ["DisastIR-QA-Bio"]  # the folder as it was: read back


def test_a_blank_query_is_refused_at_every_load_and_no_entry_of_it_is_kept(sample_data: Path, tmp_path: Path,
                                                                           cache: Path, joins: list[str]) -> None:
    """Refused before a join is kept, so no entry of a file with a blank query exists for the cache to serve."""
    root = tmp_path / "data"
    shutil.copytree(sample_data, root)
    load_cached_task(QA_BIO, find_task_files(root))
    kept = _entries(cache)
    query = root / "query" / "QA_Biological.json"

    def blank_the_fourth(path: Path) -> None:  # its text becomes spaces, byte for byte: the same size
        text = path.read_text(encoding="utf-8")
        old = json.dumps(json.loads(text)[3]["user_query"], ensure_ascii=False)[1:-1]
        assert text.count(old) == 1
        path.write_text(text.replace(old, " " * len(old.encode("utf-8"))), encoding="utf-8")

    _same_size_and_time(query, blank_the_fourth)
    for _ in range(2):  # the first load keeps nothing, so the second finds nothing to serve
        with pytest.raises(ValueError) as refused:
            load_cached_task(QA_BIO, find_task_files(root))
        says(str(refused.value), f"{query}:", "row 3", "(query_id 'QA-Bio-q004')", "blank user_query")
    assert _entries(cache) == kept and joins == ["DisastIR-QA-Bio"]


def test_another_folder_with_the_same_bytes_shares_the_entries(sample_data: Path, tmp_path: Path, cache: Path,
                                                               joins: list[str], monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    _load_all(sample_data)
    copy = tmp_path / "elsewhere"
    shutil.copytree(sample_data, copy)
    forget_corpus()
    served = _load_all(copy)
    assert len(joins) == 48
    assert served[0].report.query_file == str(copy / "query" / "QA_Biological.json")  # names this folder's files
    assert served[0].report.qrels_file == str(copy / QRELS)
    assert _fields(served[0]) == _fields(_joined(QA_BIO, copy, monkeypatch))


# ----------------------------------------------------------------------------- a damaged or unwritable cache


def _zero_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2:len(data) // 2 + 64] = bytes(64)
    path.write_bytes(bytes(data))


def _cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def test_damaged_entries_are_one_warning_each_and_rebuilt(sample_data: Path, cache: Path, joins: list[str],
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    _load_all(sample_data)
    entries = _entries(cache)
    (corpus_entry,) = (cache / FOLDER / "corpus").iterdir()
    damaged = {entries[0]: _zero_middle, entries[1]: _cut_in_half, entries[2]: lambda p: p.write_bytes(b""),
               entries[3]: lambda p: p.write_bytes(entries[4].read_bytes()),  # another task's entry
               corpus_entry: _zero_middle}
    for path, damage in damaged.items():
        damage(path)
    deleted = entries[10::2]
    for path in deleted:
        path.unlink()
    forget_corpus()
    joins.clear()
    with caplog.at_level(logging.WARNING):
        served = _load_all(sample_data)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == len(damaged), warnings
    for path in damaged:
        (warning,) = [w for w in warnings if str(path) in w]
        says(warning, f"Task cache file {path}", "cannot be used", "rebuilding it from the data files")
    (corpus_warning,) = [w for w in warnings if "(the corpus)" in w]
    says(corpus_warning, "(the corpus)", "fail their checksum", "rebuilding it from the data files")
    assert any("shorter than a checked file's trailer" in w for w in warnings)
    assert any("does not end in the checked-file mark" in w for w in warnings)
    assert any("it holds another entry, key" in w for w in warnings)
    assert len(joins) == 4 + len(deleted)
    for spec, data in zip(TASK_SPECS, served, strict=True):
        assert _fields(data) == _fields(_joined(spec, sample_data, monkeypatch)), spec.name
    caplog.clear()
    forget_corpus()
    joins.clear()
    with caplog.at_level(logging.WARNING):
        _load_all(sample_data)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING] and not joins  # rebuilt entries verify


@pytest.mark.parametrize("how", ["path under a file", "read-only folder"])
def test_an_unwritable_cache_loads_as_without_it_after_one_warning(how: str, sample_data: Path, tmp_path: Path,
                                                                   joins: list[str], monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    if how == "path under a file":
        (tmp_path / "file").write_text("not a folder")
        root = tmp_path / "file" / "cache"
    else:
        root = tmp_path / "cache"
        root.mkdir()
    monkeypatch.setenv("DISASTIR_CACHE_DIR", str(root))
    monkeypatch.delenv(TASK_CACHE_ENV, raising=False)
    forget_corpus()
    with read_only(root) if how == "read-only folder" else nullcontext(), caplog.at_level(logging.WARNING):
        served = _load_all(sample_data)
    forget_corpus()
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    says(warning, f"Task cache {root / FOLDER}", "cannot be written",
         "read and joined from the data files at every run")
    assert len(joins) == 48
    for spec, data in zip(TASK_SPECS, served, strict=True):
        assert _fields(data) == _fields(_joined(spec, sample_data, monkeypatch)), spec.name


def test_a_read_only_cache_filled_earlier_serves_without_a_word(sample_data: Path, cache: Path, joins: list[str],
                                                                caplog: pytest.LogCaptureFixture) -> None:
    _load_all(sample_data)
    forget_corpus()
    joins.clear()
    with read_only(cache), caplog.at_level(logging.WARNING):
        _load_all(sample_data)
    assert not joins and not [r for r in caplog.records if r.levelno >= logging.WARNING]


# ----------------------------------------------------------------------------- off, and the tasks it does not keep


def test_the_cache_off_joins_and_writes_nothing(sample_data: Path, cache: Path, joins: list[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    assert not data_source(sample_data, keep_joins=False).keep_joins  # --no-cache, cache_dir=False: nothing kept
    assert data_source(sample_data).keep_joins  # --cache-dir moves the embeddings, not the tasks of a data folder
    monkeypatch.setenv(TASK_CACHE_ENV, "0")  # the environment's switch, read once into the tasks' data source
    keep = DataSource.from_environment().keep_joins
    assert not keep
    _load_all(sample_data, keep=keep)
    _load_all(sample_data, keep=keep)
    assert len(joins) == 96 and not cache.exists()


def test_extra_judgements_are_joined_at_every_load(sample_data: Path, tmp_path: Path, cache: Path,
                                                   joins: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    extra = tmp_path / "added"
    extra.mkdir()
    (extra / "QA_Biological_qrels.json").write_text(json.dumps(
        [{"user_query": text, "passage": passage, "score": 1} for text, passage in
         _unjudged_pair(sample_data)]), encoding="utf-8")
    path = extra_qrels_file(extra, QA_BIO)
    joins.clear()
    load_cached_task(QA_BIO, find_task_files(sample_data))  # kept in the cache
    with_extra = load_cached_task(QA_BIO, find_task_files(sample_data), extra=path)
    assert joins == ["DisastIR-QA-Bio", "DisastIR-QA-Bio"]
    assert with_extra.report.extra is not None and with_extra.report.extra.added == 1  # a text held once
    assert _fields(with_extra) == _fields(_joined(QA_BIO, sample_data, monkeypatch, extra=path))
    assert len(_entries(cache)) == 1  # nothing kept for it


def _unjudged_pair(root: Path) -> list[tuple[str, str]]:
    """One (query text, passage text) of QA-Bio that the published qrels leave without a grade, the text held once."""
    data = load_task(QA_BIO, find_task_files(root))
    query_id = next(iter(data.grades))
    text = dict(zip(data.queries["id"], data.queries["text"], strict=True))[query_id]
    texts = data.corpus["text"][:]
    passage = next(t for d, t in zip(data.corpus["id"], texts, strict=True)
                   if d not in data.grades[query_id] and texts.count(t) == 1)
    return [(text, passage)]


def test_split_tasks_are_refused_here_and_load_as_before(sample_data: Path, cache_dir: Path, cache: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError) as refused:
        load_cached_task(get_spec("DisastIR-Test-QA-Bio"), find_task_files(sample_data))
    says(str(refused.value), "DisastIR-Test-QA-Bio", "not a full-set task",
         "disastir_mteb.data.devlite.load_split_task")
    split_files = find_split_files(devlite_sample_dir("small", cache_dir=cache_dir))
    main = find_task_files(sample_data)
    specs = [get_spec(name) for name in ("DisastIR-Test-QA-Bio", "DisastIR-DevLite-QA-Bio", "DisastIR-Test-STS-Geo")]
    load_cached_task(QA_BIO, main)  # the corpus kept
    forget_corpus()
    served = [load_split_task(spec, split_files, main) for spec in specs]  # the corpus from its entry, index built
    assert served[0].corpus is served[2].corpus
    forget_corpus()
    joined = [load_split_task(spec, split_files, main, keep=False) for spec in specs]
    for spec, data, expected in zip(specs, served, joined, strict=True):
        assert _fields(data) == _fields(expected), spec.name


def test_the_key_names_the_code_and_the_libraries_and_a_file_is_hashed_once_a_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "joining.py"

    def module(text: str) -> ModuleType:
        source.write_text(text, encoding="utf-8")
        made = ModuleType("joining")
        made.__file__ = str(source)
        return made

    keep = data_cache.code_digest(module("POLICY = 'keep'\n"))
    assert data_cache.code_digest(module("POLICY = 'strip'\n")) != keep  # a changed join never reads an old entry
    assert data_cache.code_digest(module("POLICY = 'keep'\n")) == keep
    monkeypatch.setattr(pyarrow, "__version__", "0.0.0")
    assert data_cache.code_digest(module("POLICY = 'keep'\n")) != keep  # nor one of another pyarrow
    frozen = ModuleType("frozen")
    frozen.__file__ = str(tmp_path / "no-such-source.py")
    assert len(data_cache.code_digest(frozen)) == 32  # named by the package's version, not a traceback
    hashed: list[object] = []
    digest = data_cache.file_digest
    monkeypatch.setattr(data_cache, "file_digest", lambda path: hashed.append(path) or digest(path))
    data = tmp_path / "data.json"
    data.write_text("[1]", encoding="utf-8")
    first = data_cache.source_digest(data)
    assert data_cache.source_digest(data) == first and len(hashed) == 1
    _same_size_and_time(data, lambda path: path.write_text("[2]", encoding="utf-8"))
    assert data_cache.source_digest(data) != first and len(hashed) == 2  # its change time moved: hashed again


def test_a_run_without_a_cache_keeps_no_tasks_and_one_with_another_store_keeps_them_per_data_folder(
        sample_data: Path, tmp_path: Path, cache: Path, joins: list[str]) -> None:
    """``--no-cache`` (``cache_dir=False``) persists nothing, the joined tasks included; ``--cache-dir`` moves the
    embeddings only: the tasks are kept per data folder under ``DISASTIR_CACHE_DIR``, shared by every model."""
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.runner.run import evaluate

    tasks = ["DisastIR-QA-Bio", "DisastIR-FC-Geo"]
    evaluate(HashingEncoder(), tasks, data=sample_data, cache_dir=False, output_folder=tmp_path / "a",
             show_progress=False)
    assert not (cache / FOLDER).exists() and joins == tasks
    evaluate(HashingEncoder(), tasks, data=sample_data, cache_dir=tmp_path / "store", output_folder=tmp_path / "b",
             show_progress=False)
    assert (cache / FOLDER).is_dir() and not (tmp_path / "store" / FOLDER).exists() and joins == tasks * 2
    forget_corpus()
    evaluate(HashingEncoder(dim=64), tasks, data=sample_data, cache_dir=tmp_path / "other",
             output_folder=tmp_path / "c", show_progress=False)
    assert joins == tasks * 2  # another model, another store: the tasks come from the cache

"""Fault injection: damage a copy of the generated sample and load it the way a user does.

Every bad input must end in one sentence naming the file (and the row or line where there is one),
raised as ``ValueError`` or ``FileNotFoundError`` without a chained pyarrow/json traceback; inputs
that are only unusual (a BOM, a stray file, a known misspelling) must load exactly like the clean
copy. Each error case runs twice: through ``find_task_files``/``load_task``, and through the mteb
task's ``load_data()`` with ``DISASTIR_DATA_DIR`` pointed at the damaged folder.
"""

from __future__ import annotations

import json
import logging
import math
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from sentences import says

import disastir_mteb
from disastir_mteb import cli
from disastir_mteb.data.extra_qrels import EXTRA_QRELS_ENV
from disastir_mteb.data.layout import find_task_files
from disastir_mteb.data.published import TaskData, load_task
from disastir_mteb.data.reading import load_corpus
from disastir_mteb.util.errors import DisastirError
from disastir_mteb.vocabulary.taxonomy import get_spec

QUERY, QRELS, CORPUS = "query/QA_Biological.json", "qrels/QA_Biological_qrels.json", "corpus.jsonl"
Damage = Callable[[Path], object]  # may return the {line}, {offset} that the expected message names


# ----------------------------------------------------------------------------- damage


def _rows(root: Path, rel: str) -> list[dict[str, Any]]:
    return json.loads((root / rel).read_text(encoding="utf-8"))


def _write(root: Path, rel: str, data: object) -> None:
    (root / rel).write_text(json.dumps(data), encoding="utf-8")


def _corpus_lines(root: Path, edit: Callable[[list[str]], list[str]]) -> None:
    path = root / CORPUS
    path.write_text("".join(edit(path.read_text(encoding="utf-8").splitlines(keepends=True))), encoding="utf-8")


def _edit_row(rel: str, row: int, edit: Callable[[dict[str, Any]], dict[str, Any]]) -> Damage:
    def damage(root: Path) -> None:
        rows = _rows(root, rel)
        rows[row] = edit(rows[row])
        _write(root, rel, rows)
    return damage


def _set_score(score: object) -> Damage:
    return _edit_row(QRELS, 5, lambda row: {**row, "score": score})


def _bad_utf8(rel: str, at: int) -> Damage:
    """Insert 0xFF 0xFE (never valid UTF-8) at byte ``at``; report where a user would look."""
    def damage(root: Path) -> dict[str, object]:
        raw = (root / rel).read_bytes()
        (root / rel).write_bytes(raw[:at] + b"\xff\xfe" + raw[at:])
        return {"offset": at, "line": raw.count(b"\n", 0, at) + 1}
    return damage


def _truncate_corpus(root: Path) -> dict[str, object]:
    raw = (root / CORPUS).read_bytes()
    (root / CORPUS).write_bytes(raw[:-40])  # the last line loses its end, as a cut-off download does
    return {"line": raw.count(b"\n")}


def _unjudge_all_passages(root: Path) -> None:
    _write(root, QRELS, [{**row, "passage": "not in the corpus: " + row["passage"]} for row in _rows(root, QRELS)])


def _query_dict(indent: int | None) -> Damage:
    def damage(root: Path) -> None:
        by_id = {row["query_id"]: row["user_query"] for row in _rows(root, QUERY)}
        (root / QUERY).write_text(json.dumps(by_id, indent=indent), encoding="utf-8")
    return damage


class Fault(NamedTuple):
    """One injected fault and the sentence it must end in (a regex; ``{root}`` is the damaged folder)."""

    id: str
    damage: Damage
    match: str
    error: type[Exception] = ValueError
    task: str = "DisastIR-QA-Bio"


_Q, _R, _C = (re.escape(rel) for rel in (QUERY, QRELS, CORPUS))
ERRORS = [
    # the data folder
    Fault("missing-folder", shutil.rmtree, r"{root}'? is not a folder", FileNotFoundError),
    Fault("empty-folder", lambda r: [shutil.rmtree(r), r.mkdir()],
          r"{root}: missing 'corpus.jsonl', 'query', 'qrels'; a DisastIR data folder holds", FileNotFoundError),
    Fault("task-file-missing", lambda r: (r / QRELS).unlink(),
          r"{root}: no qrels file for task DisastIR-QA-Bio; 1 of 48 tasks lack a file \(DisastIR-QA-Bio\); "
          rf"expected {_R}\.$", FileNotFoundError),
    Fault("misspelt-beyond-aliases", lambda r: (r / "query/FactCheck_Biological.json").rename(
        r / "query/FactChek_Biological.json"),
        r"{root}/query: 1 file\(s\) name no DisastIR task \(FactChek_Biological.json\); expected "
        r"'\{{intent\}}_\{{category\}}.json', and 1 task\(s\) have no file: DisastIR-FC-Bio\.$"),
    # corpus.jsonl
    Fault("corpus-truncated-last-line", _truncate_corpus,
          r"{root}/" + _C + r": line {line} is not valid JSON at column \d+ \(Unterminated string"),
    Fault("corpus-non-json-line", lambda r: _corpus_lines(r, lambda lines: [*lines[:700], "oops\n", *lines[700:]]),
          r"{root}/" + _C + r": line 701 is not valid JSON at column 1 \(Expecting value\)\.$"),
    Fault("corpus-json-array", lambda r: _corpus_lines(r, lambda lines: ["[\n", ",\n".join(
        x.rstrip("\n") for x in lines), "\n]\n"]), r"{root}/" + _C + r" is a JSON array, not JSON lines"),
    Fault("corpus-row-lacks-text", lambda r: _corpus_lines(r, lambda lines: [*lines[:10], '{"corpus_id": "dx"}\n',
                                                                           *lines[10:]]),
          r"{root}/" + _C + r": line 11 lacks \['text'\]"),
    Fault("corpus-duplicate-id", lambda r: _corpus_lines(r, lambda lines: [
        *lines, json.dumps({"corpus_id": "d000007", "text": "Another passage."}) + "\n"]),
        r"{root}/" + _C + r": 1 duplicate corpus_id value\(s\), the first 'd000007' on lines 8 and 1501; "
        r"ids must be unique\.$"),
    Fault("corpus-0-bytes", lambda r: (r / CORPUS).write_bytes(b""), r"{root}/" + _C + r" is empty \(0 bytes\)"),
    Fault("corpus-invalid-utf8", _bad_utf8(CORPUS, 50_000),
          r"{root}/" + _C + r": not valid UTF-8 at byte offset {offset} \(line {line}\); re-save the file as UTF-8\.$"),
    # query files
    Fault("query-dict-not-list", _query_dict(None),
          r"{root}/" + _Q + r": one JSON object with keys \['QA-Bio-q001', .*not rows; expected a JSON array"),
    Fault("query-dict-pretty-printed", _query_dict(2),
          r"{root}/" + _Q + r": one JSON object with keys \['QA-Bio-q001', .*not rows; expected a JSON array"),
    Fault("query-row-lacks-key", _edit_row(QUERY, 3, lambda row: {"query_id": row["query_id"], "query": "?"}),
          r"{root}/" + _Q + r": row 3 lacks \['user_query'\] \(has \['query', 'query_id'\]\)"),
    Fault("query-row-null-text", _edit_row(QUERY, 3, lambda row: {**row, "user_query": None}),
          r"{root}/" + _Q + r": row 3 has null \['user_query'\]"),
    Fault("query-rows-not-objects", lambda r: _write(r, QUERY, ["How do floods start?"]),
          r"{root}/" + _Q + r": row 0 is a JSON str, not an object with keys \['query_id', 'user_query'\]"),
    Fault("query-file-0-bytes", lambda r: (r / QUERY).write_bytes(b""),
          r"{root}/" + _Q + r" holds no rows \(0 bytes\)"),
    Fault("query-file-empty-list", lambda r: _write(r, QUERY, []), r"{root}/" + _Q + r" holds no rows;"),
    Fault("query-invalid-utf8", _bad_utf8(QUERY, 200),
          r"{root}/" + _Q + r": not valid UTF-8 at byte offset {offset} \(line {line}\)"),
    Fault("query-blank-text", _edit_row(QUERY, 3, lambda row: {**row, "user_query": " \t\n "}),
          r"{root}/" + _Q + r": row 3 \(query_id 'QA-Bio-q004'\) has a blank user_query \(' \\t\\n '\); a query needs "
          r"words to be searched with: write its text, or delete the row\.$"),
    Fault("query-empty-texts", lambda r: _write(r, QUERY, [{**row, "user_query": ""} if number in (2, 5, 6) else row
                                                          for number, row in enumerate(_rows(r, QUERY))]),
          r"{root}/" + _Q + r": row 2 \(query_id 'QA-Bio-q003'\) has a blank user_query \(''\), and so do 2 more "
          r"row\(s\) \(row 5, row 6\); a query needs words to be searched with"),
    # qrels files
    Fault("qrels-row-lacks-score", _edit_row(QRELS, 5, lambda row: {k: v for k, v in row.items() if k != "score"}),
          r"{root}/" + _R + r": row 5 lacks \['score'\]"),
    Fault("qrels-file-empty-list", lambda r: _write(r, QRELS, []), r"{root}/" + _R + r" holds no rows;"),
    Fault("grade-7", _set_score(7), r"{root}/" + _R + r": row 5 has score 7; task DisastIR-QA-Bio grades are "
          r"integers 0\.\.3\.$"),
    Fault("grade-minus-1", _set_score(-1), r"{root}/" + _R + r": row 5 has score -1; task DisastIR-QA-Bio grades"),
    Fault("grade-string-high", _set_score("high"), r"{root}/" + _R + r": row 5 has score 'high'; task DisastIR-QA-Bio"),
    Fault("grade-7-on-sts", _edit_row("qrels/STS_Biological_qrels.json", 0, lambda row: {**row, "score": 7}),
          r"{root}/qrels/STS_Biological_qrels\.json: row 0 has score 7; task DisastIR-STS-Bio grades are integers "
          r"0\.\.5\.$", task="DisastIR-STS-Bio"),
    Fault("qrels-every-passage-unknown", _unjudge_all_passages,
          r"Task DisastIR-QA-Bio has no usable judgements: {root}/" + _R + r" has 112 rows, of which 0 name no query "
          r"of QA_Biological\.json \(8 queries\) and 112 name no passage of corpus\.jsonl"),
    Fault("qrels-invalid-utf8", _bad_utf8(QRELS, 3000),
          r"{root}/" + _R + r": not valid UTF-8 at byte offset {offset} \(line {line}\)"),
]


# ----------------------------------------------------------------------------- loading


@pytest.fixture
def damaged(tmp_path: Path, sample_data: Path) -> Path:
    """A private copy of the generated sample in the published layout, free to damage."""
    return Path(shutil.copytree(sample_data, tmp_path / "data"))


def _load(root: Path, name: str, via: str, use_data: Callable[[Path], None]) -> Any:
    """``TaskData`` from the loader itself, or a loaded mteb task, as a user gets one with ``load_data()``."""
    if via == "loader":
        return load_task(get_spec(name), find_task_files(root))
    use_data(root)
    spec = get_spec(name)
    (task,) = disastir_mteb.get_tasks([spec.intent.value], [spec.category.value])
    task.load_data()
    return task


def _split(loaded: object) -> tuple[list[str], list[str], dict[str, dict[str, int]], int]:
    """Query ids, query texts, gains and corpus size, from either loading path."""
    if isinstance(loaded, TaskData):
        queries, relevant, corpus = loaded.queries, loaded.relevant_docs, loaded.corpus
    else:
        split = loaded.dataset["default"]["test"]
        queries, relevant, corpus = split["queries"], split["relevant_docs"], split["corpus"]
    return list(queries["id"]), list(queries["text"]), relevant, len(corpus)


@pytest.mark.parametrize("via", ["loader", "mteb"])
@pytest.mark.parametrize("fault", ERRORS, ids=[f.id for f in ERRORS])
def test_fault_ends_in_one_sentence_naming_the_file(fault: Fault, via: str, damaged: Path, use_data: Any) -> None:
    where = fault.damage(damaged)
    where = where if isinstance(where, dict) else {}
    pattern = fault.match.format(root=re.escape(str(damaged)), **where)
    with pytest.raises(Exception) as caught:
        _load(damaged, fault.task, via, use_data)
    error = caught.value
    # the project's own error, of the kind the fault is (not a raw UnicodeDecodeError, ArrowInvalid, ...)
    assert isinstance(error, DisastirError) and isinstance(error, fault.error), f"{type(error).__name__}: {error}"
    message = str(error)
    assert re.search(pattern, message), f"\n{message}\n!~ {pattern}"
    assert "\n" not in message and message.endswith(".")
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__), "chained traceback"


# ----------------------------------------------------------------------------- faults that must still load


def _same_as_clean(loaded: object, sample_data: Path, name: str) -> None:
    clean = load_task(get_spec(name), find_task_files(sample_data))
    assert _split(loaded) == _split(clean)


@pytest.mark.parametrize("via", ["loader", "mteb"])
@pytest.mark.parametrize("rel", [QUERY, QRELS, CORPUS])
def test_utf8_bom_loads_like_the_clean_file(rel: str, via: str, damaged: Path, sample_data: Path,
                                            use_data: Any) -> None:
    (damaged / rel).write_bytes(b"\xef\xbb\xbf" + (damaged / rel).read_bytes())
    loaded = _load(damaged, "DisastIR-QA-Bio", via, use_data)
    _same_as_clean(loaded, sample_data, "DisastIR-QA-Bio")
    assert "d000000" in load_corpus(damaged / CORPUS).dataset["id"]  # the BOM is not glued to the first id


@pytest.mark.parametrize(("query_name", "name"), [("Factcheck_bio", "DisastIR-FC-Bio"),
                                                  ("QA-biological", "DisastIR-QA-Bio")])
def test_misspelt_names_the_alias_table_accepts_load_that_task(query_name: str, name: str, damaged: Path,
                                                               sample_data: Path, use_data: Any) -> None:
    published = "FactCheck_Biological" if "FC" in name else "QA_Biological"
    (damaged / "query" / f"{published}.json").rename(damaged / "query" / f"{query_name}.json")
    (damaged / "qrels" / f"{published}_qrels.json").rename(damaged / "qrels" / f"{query_name}_qrels.json")
    files = find_task_files(damaged)
    assert files.queries[get_spec(name)].name == f"{query_name}.json"
    _same_as_clean(_load(damaged, name, "mteb", use_data), sample_data, name)


def test_unknown_extra_files_are_named_in_a_warning_and_skipped(damaged: Path, sample_data: Path, use_data: Any,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    _write(damaged, "query/notes.json", {"author": "me"})
    (damaged / "qrels" / "README.txt").write_text("my notes", encoding="utf-8")
    (damaged / "query" / ".DS_Store").write_bytes(b"\0")  # hidden files are nobody's business
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.data.layout"):
        loaded = _load(damaged, "DisastIR-QA-Bio", "mteb", use_data)
    _same_as_clean(loaded, sample_data, "DisastIR-QA-Bio")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"{damaged / 'query'}: ignoring 1 file(s)" in w and "(notes.json)" in w for w in warnings), warnings
    assert any(f"{damaged / 'qrels'}: ignoring 1 file(s)" in w and "(README.txt)" in w for w in warnings), warnings
    assert not any(".DS_Store" in w for w in warnings)


def test_a_missing_task_file_fails_only_that_task(damaged: Path, sample_data: Path, use_data: Any) -> None:
    (damaged / QRELS).unlink()
    _same_as_clean(_load(damaged, "DisastIR-FC-Bio", "mteb", use_data), sample_data, "DisastIR-FC-Bio")


def test_qrels_naming_unknown_passages_or_queries_are_dropped_and_counted(
        damaged: Path, use_data: Any, caplog: pytest.LogCaptureFixture) -> None:
    rows = _rows(damaged, QRELS)
    rows[0] = {**rows[0], "passage": "A passage nobody wrote."}
    rows[1] = {**rows[1], "user_query": "A query nobody asked?"}
    rows[2] = {**rows[2], "passage": "Another passage nobody wrote."}
    _write(damaged, QRELS, rows)
    with caplog.at_level(logging.WARNING, logger="disastir_mteb.data.published"):
        task = _load(damaged, "DisastIR-QA-Bio", "mteb", use_data)
    report = task.load_report
    assert (report.qrels_rows, report.unmatched_passage_rows, report.unmatched_query_rows) == (112, 2, 1)
    assert report.judgements == 109 and not report.clean
    assert sum(len(docs) for docs in task.dataset["default"]["test"]["relevant_docs"].values()) == 109
    warning = next(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert warning.startswith("DisastIR-QA-Bio: 8/8 queries, 109 judgements from 112 qrels rows; unmatched rows: "
                              "1 query text, 2 passage text")
    assert "'A passage nobody wrote.'" in warning


def test_one_text_under_two_ids_gives_both_the_grade(damaged: Path, use_data: Any) -> None:
    """The documented policy: the authors retrieve by text, so every copy of a judged text earns its gain.

    The text is counted once where the authors count it once: in the ideal DCG (and Recall's denominator), as the
    load report's ``duplicate_judged_texts`` says.
    """
    judged = _rows(damaged, QRELS)[0]
    _corpus_lines(damaged, lambda lines: [*lines, json.dumps({"corpus_id": "dcopy", "text": judged["passage"]}) + "\n"])
    task = _load(damaged, "DisastIR-QA-Bio", "mteb", use_data)
    assert load_corpus(damaged / CORPUS).duplicate_texts == 1
    (original,) = [doc for doc in load_corpus(damaged / CORPUS).ids_for(judged["passage"]) if doc != "dcopy"]
    query_id = next(q for q, docs in task.grades().items() if original in docs)
    assert task.grades()[query_id]["dcopy"] == task.grades()[query_id][original] == judged["score"]
    copies = sum(row["passage"] == judged["passage"] for row in _rows(damaged, QRELS))
    assert task.load_report.clean and task.load_report.judgements == 112 + copies
    report = task.load_report
    assert (report.duplicate_judged_texts, report.duplicate_judged_ids) == (1, 2)
    assert report.summary().endswith("; 1 judged text(s) held by 2 corpus ids, each text scored once as the authors "
                                     "key by text")
    # the text once in the ideal: either copy alone scores as if the other were not in the corpus at all
    alone = {doc: grade for doc, grade in task.grades()[query_id].items() if doc != "dcopy"}
    gains = sorted(((1 << g) - 1 for g in alone.values()), reverse=True)[:10]
    ideal = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(gains))
    expected = ((1 << judged["score"]) - 1) / ideal
    assert task.ndcg_at_10_per_query({query_id: [original]})[query_id] == pytest.approx(expected, abs=1e-15)
    assert task.ndcg_at_10_per_query({query_id: ["dcopy"]})[query_id] == pytest.approx(expected, abs=1e-15)


def test_published_pairs_graded_differently_keep_the_last_row_and_are_counted(
        damaged: Path, use_data: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The authors' dict keeps a pair's last grade; the load report says how many pairs conflicted, and the grades."""
    rows = _rows(damaged, QRELS)
    first, second = rows[0], rows[1]
    other = (first["score"] + 1) % 4
    _write(damaged, QRELS, [*rows, {**first, "score": other}, dict(second)])  # a conflict, and a mere repeat
    with caplog.at_level(logging.WARNING, logger="mteb.disastir"):
        task = _load(damaged, "DisastIR-QA-Bio", "mteb", use_data)
    report = task.load_report
    assert (report.qrels_rows, report.repeated_pairs, report.conflicting_pairs) == (114, 2, 1)
    (doc_id,) = load_corpus(damaged / CORPUS).ids_for(first["passage"])
    query_id = next(q for q, docs in task.grades().items() if doc_id in docs)
    assert task.grades()[query_id][doc_id] == other  # the last row's grade
    example = (f"query {first['user_query'][:60]!r}, passage {first['passage'][:60]!r}: graded {first['score']}, "
               f"then {other}; kept {other}")
    assert report.conflict_examples == [example]
    warning = next(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert warning.endswith(f"; 1 pair(s) graded differently by their repeated rows, each keeping its last row's "
                            f"grade as the authors' code does (e.g. {example})")


def _unjudged_pair(sample: Path) -> tuple[str, str]:
    """A query of QA-Bio and a corpus passage it has no published judgement for."""
    rows = _rows(sample, QRELS)
    query = rows[0]["user_query"]
    judged = {row["passage"] for row in rows if row["user_query"] == query}
    with (sample / CORPUS).open(encoding="utf-8") as lines:
        passage = next(text for line in lines if (text := json.loads(line)["text"]) not in judged)
    return query, passage


def test_extra_judgements_grading_one_pair_differently_twice_are_refused(
        tmp_path: Path, sample_data: Path, use_data: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Row order must not pick a score (the issue's 89.18 instead of 92.32): one sentence, file and first pair."""
    use_data(sample_data)  # the command line sets these for its process: restored after the test
    monkeypatch.setenv(EXTRA_QRELS_ENV, "")
    query, passage = _unjudged_pair(sample_data)
    published = _rows(sample_data, QRELS)[0]
    folder = tmp_path / "extra"
    folder.mkdir()
    path = folder / "QA_Biological_qrels.json"
    _write(folder, path.name, [
        {**published, "score": (published["score"] + 1) % 4},  # a published pair: never read, so exempt
        {"user_query": query, "passage": passage, "score": 1},
        {"user_query": query, "passage": passage, "score": 1},  # merely repeated: fine
        {"user_query": f" {query}", "passage": f"{passage} ", "score": 3}])  # the same pair, once stripped
    spec = get_spec("DisastIR-QA-Bio")
    with pytest.raises(ValueError) as caught:
        load_task(spec, find_task_files(sample_data), extra=path)
    expected = says(str(caught.value), path, "1 (query, passage) pair(s)", repr(query[:60]), repr(passage[:60]),
                    "1 in row 1", "3 in row 3", "one row per pair")  # the file, the pair, both rows, what to do
    assert cli.main(["run", "-m", "bundled", "-t", "DisastIR-QA-Bio", "--data", str(sample_data),
                     "--extra-judgements", str(folder), "--output-folder", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip().endswith(f"disastir-mteb run: {expected}")
    assert not list((tmp_path / "out").rglob("*.json"))  # nothing written

    _write(folder, path.name, _rows(folder, path.name)[:3])  # only the published pair conflicts: read
    data = load_task(spec, find_task_files(sample_data), extra=path)
    assert data.report.extra is not None and (data.report.extra.added, data.report.extra.published) == (1, 1)

"""Tests of the synthetic dataset generator (small and tiny scales; full scale via the pure count planner)."""

from __future__ import annotations

import csv
import filecmp
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from importlib.resources import files
from pathlib import Path

import pytest

from disastir_mteb.sample import generator as sample
from disastir_mteb.sample.generator import sample_dir, write_sample
from disastir_mteb.sample.plan import plan_grade_counts
from disastir_mteb.sample.scale import FULL, SMALL, SampleScale
from disastir_mteb.vocabulary.taxonomy import (
    CATEGORIES,
    MAX_GRADE,
    TASK_SPECS,
    Category,
    Intent,
    parse_task_file,
    task_file_stem,
)

RESOURCES = files("disastir_mteb") / "resources"
REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"
TINY = SampleScale("tiny", n_passages=400, queries_per_task=2, judged_per_query=6, passage_words=20)


def _csv(name: str) -> list[dict[str, str]]:
    with (RESOURCES / "published" / name).open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


TABLE14 = {(r["intent"], r["category"]): [int(r[f"rel{g}"]) for g in range(6)]
           for r in _csv("disastir_paper_table14_qrels_by_grade.csv")}
TABLE1 = {r["category"]: r for r in _csv("disastir_paper_table1_labelled_pairs.csv")}


def _load(root: Path) -> tuple[list[dict], dict[str, list[dict]], dict[str, list[dict]]]:
    corpus = [json.loads(line) for line in (root / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in (root / "query").glob("*.json")}
    qrels = {p.stem[: -len("_qrels")]: json.loads(p.read_text(encoding="utf-8"))
             for p in (root / "qrels").glob("*_qrels.json")}
    return corpus, queries, qrels


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sample(tmp_path_factory.mktemp("s") / "small", scale="small", seed=0)


def test_event_types_assigned_once() -> None:
    grouped = json.loads((RESOURCES / "event_types.json").read_text(encoding="utf-8"))
    assert list(grouped) == [c.value for c in CATEGORIES]
    names = [name for events in grouped.values() for name in events]
    assert len(names) == len(set(names)) == 301
    assert all(len(events) >= 1 for events in grouped.values())
    assert sum(len(events) >= 3 for events in grouped.values()) >= 7
    ref = REFERENCE / "disaster_event_types.json"
    if ref.is_file():
        reference = json.loads(ref.read_text(encoding="utf-8"))
        assert set(names) == set(reference)
        assert all(reference[n] == d for events in grouped.values() for n, d in events.items())


def test_published_tables_shipped_verbatim() -> None:
    shipped = sorted(p.name for p in (RESOURCES / "published").iterdir() if p.name.endswith(".csv"))
    assert len(shipped) == 8
    ref = REFERENCE / "published_results"
    if ref.is_dir():
        assert shipped == sorted(p.name for p in ref.glob("*.csv"))
        for name in shipped:
            assert (RESOURCES / "published" / name).read_bytes() == (ref / name).read_bytes()


def test_layout_and_file_names(small: Path) -> None:
    corpus, queries, qrels = _load(small)
    assert len(corpus) == SMALL.n_passages
    stems = sorted(task_file_stem(s.intent, s.category) for s in TASK_SPECS)
    assert sorted(queries) == sorted(qrels) == stems
    assert {parse_task_file(stem) for stem in queries} == set(TASK_SPECS)
    assert {parse_task_file(f"{stem}_qrels") for stem in qrels} == set(TASK_SPECS)
    assert task_file_stem(Intent.FC, Category.Bio) == "FactCheck_Biological"
    assert task_file_stem(Intent.QA, Category.MH) == "QA_Meteorological_Hydrological"
    assert sum(f.stat().st_size for f in small.rglob("*") if f.is_file()) < 3_000_000


def test_qrels_point_at_queries_and_corpus(small: Path) -> None:
    corpus, queries, qrels = _load(small)
    texts = [c["text"] for c in corpus]
    assert len(set(texts)) == len(texts), "passage texts must be unique"
    assert len({c["corpus_id"] for c in corpus}) == len(corpus)
    all_ids = [q["query_id"] for qs in queries.values() for q in qs]
    assert len(all_ids) == len(set(all_ids))
    text_set = set(texts)
    for stem, rows in qrels.items():
        intent = parse_task_file(stem).intent
        qtexts = [q["user_query"] for q in queries[stem]]
        assert len(qtexts) == SMALL.queries_per_task == len(set(qtexts))
        per_query: dict[str, list[int]] = defaultdict(list)
        for row in rows:
            assert set(row) == {"user_query", "passage", "score"}
            assert row["user_query"] in qtexts and row["passage"] in text_set
            assert isinstance(row["score"], int) and 0 <= row["score"] <= MAX_GRADE[intent]
            per_query[row["user_query"]].append(row["score"])
        for q in qtexts:
            assert len(per_query[q]) == SMALL.judged_per_query
            assert max(per_query[q]) >= 1
        assert len({(r["user_query"], r["passage"]) for r in rows}) == len(rows)


def test_grade_proportions_follow_table14(small: Path) -> None:
    _, _, qrels = _load(small)
    for stem, rows in qrels.items():
        spec = parse_task_file(stem)
        paper = TABLE14[(spec.intent.value, spec.category.value)][: MAX_GRADE[spec.intent] + 1]
        got = Counter(r["score"] for r in rows)
        for grade, count in enumerate(paper):
            assert abs(got[grade] / len(rows) - count / sum(paper)) < 0.03, (stem, grade)


def test_deterministic(tmp_path: Path, small: Path) -> None:
    again = write_sample(tmp_path / "again", scale="small", seed=0)
    cmp = filecmp.dircmp(small, again)
    assert not cmp.diff_files and not cmp.left_only and not cmp.right_only
    for sub in ("query", "qrels"):
        names = sorted(p.name for p in (small / sub).iterdir())
        _, mismatch, errors = filecmp.cmpfiles(small / sub, again / sub, names, shallow=False)
        assert not mismatch and not errors
    assert (small / "corpus.jsonl").read_bytes() == (again / "corpus.jsonl").read_bytes()
    other = write_sample(tmp_path / "other", scale="small", seed=1)
    assert (other / "corpus.jsonl").read_bytes() != (small / "corpus.jsonl").read_bytes()


def test_refuses_non_empty_target_and_overwrites(tmp_path: Path) -> None:
    out = tmp_path / "data"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="data"):
        write_sample(out, scale=TINY)
    assert write_sample(out, scale=TINY, overwrite=True) == out.absolute()
    assert not (out / "keep.txt").exists() and (out / "corpus.jsonl").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["data"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (write_sample(empty, scale=TINY) / "corpus.jsonl").is_file()


def test_failure_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> int:
        raise RuntimeError("disk full")

    monkeypatch.setattr(sample, "_write_files", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        write_sample(tmp_path / "out", scale=TINY)
    assert list(tmp_path.iterdir()) == []


def test_tiny_custom_scale(tmp_path: Path) -> None:
    progress: list[str] = []
    out = write_sample(tmp_path / "tiny", scale=TINY, seed=3, progress=progress.append)
    corpus, queries, qrels = _load(out)
    assert len(corpus) == TINY.n_passages and progress
    for stem, rows in qrels.items():
        per_query = Counter(r["user_query"] for r in rows)
        assert len(per_query) == 2 and all(1 <= n <= TINY.judged_per_query for n in per_query.values())
        assert {q["user_query"] for q in queries[stem]} == set(per_query)
    with pytest.raises(ValueError, match="n_passages"):
        write_sample(tmp_path / "bad", scale=SampleScale("bad", 10, 2, 6, 20))


def test_sample_dir_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = sample_dir("small", cache_dir=tmp_path)
    assert first.name == f"sample-small-seed0-v{sample.GENERATOR_VERSION}" and first.parent == tmp_path
    stamp = (first / "corpus.jsonl").stat().st_mtime_ns

    def fail(*args: object, **kwargs: object) -> Path:
        raise AssertionError("regenerated")

    monkeypatch.setattr(sample, "write_sample", fail)
    assert sample_dir("small", cache_dir=tmp_path) == first
    assert (first / "corpus.jsonl").stat().st_mtime_ns == stamp
    monkeypatch.setenv("DISASTIR_CACHE_DIR", str(tmp_path))
    assert sample_dir("small") == first
    monkeypatch.delenv("DISASTIR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    target = tmp_path / "xdg" / "disastir_mteb" / first.name
    target.mkdir(parents=True)
    (target / "corpus.jsonl").write_text("")
    assert sample_dir("small") == target


def test_sample_dir_lost_race(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / f"sample-small-seed0-v{sample.GENERATOR_VERSION}"

    def other_process_won(out: Path, **kwargs: object) -> Path:
        Path(out).mkdir()
        (Path(out) / "corpus.jsonl").write_text("")
        raise FileExistsError(f"{out} exists")

    monkeypatch.setattr(sample, "write_sample", other_process_won)
    assert sample_dir("small", cache_dir=tmp_path) == target


@pytest.mark.parametrize("spec", TASK_SPECS, ids=lambda s: s.name)
def test_full_scale_grade_counts_match_paper(spec) -> None:
    rows = plan_grade_counts(spec.intent, spec.category, FULL)
    paper = TABLE14[(spec.intent.value, spec.category.value)]
    assert len(rows) == 200
    assert [sum(col) for col in zip(*rows, strict=True)] == paper[: MAX_GRADE[spec.intent] + 1]
    assert sum(map(sum, rows)) == int(TABLE1[spec.category.value][f"{spec.intent.value}_pairs"])
    assert all(sum(r[1:]) >= 1 for r in rows)
    assert len({sum(r) for r in rows}) > 20, "judged counts should vary across queries"
    assert plan_grade_counts(spec.intent, spec.category, FULL) == rows


def test_some_queries_lack_a_top_grade() -> None:
    rows = plan_grade_counts(Intent.NLI, Category.Geo, FULL)
    assert 0 < sum(1 for r in rows if r[-1] == 0) < 200


def test_scaled_paper_counts() -> None:
    scale = SampleScale("quarter", n_passages=60_000, queries_per_task=50, judged_per_query=None,
                        passage_words=50)
    rows = plan_grade_counts(Intent.QA, Category.Bio, scale)
    paper = TABLE14[("QA", "Bio")][:4]
    totals = [sum(col) for col in zip(*rows, strict=True)]
    assert len(rows) == 50 and abs(sum(totals) - sum(paper) / 4) <= 1
    assert all(abs(t - p / 4) <= 1 for t, p in zip(totals, paper, strict=True))


def test_main_prints_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sample.main(["--scale", "small", "--out", str(tmp_path / "cli"), "--seed", "2"]) == 0
    line = capsys.readouterr().out.strip()
    assert "1500 passages" in line and "384 queries" in line and "judged pairs" in line
    with pytest.raises(SystemExit):
        sample.main(["--scale", "small", "--out", str(tmp_path / "cli")])
    assert os.path.isdir(tmp_path / "cli")


def test_the_generator_runs_as_a_module() -> None:
    """``python -m disastir_mteb.sample`` (the README's way without the console script) is the ``sample`` command."""
    done = subprocess.run([sys.executable, "-m", "disastir_mteb.sample", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "--scale" in done.stdout, done.stderr

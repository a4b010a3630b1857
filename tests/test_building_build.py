"""A whole build from a folder of documents in four category folders, through a loopback writer and a loopback judge
(real HTTP, the authors' prompts), with model-free retrievers: stages, counts, the layout, resume, the plan's prompt."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from generator_servers import counting, cutting_off, overlap_judge, writer
from judge_servers import JudgeServer, constrained
from sentences import says
from small_disk import grow, tmpfs

from disastir_mteb.building.build import BuildSettings, run_build
from disastir_mteb.data.layout import MARKER, find_task_files
from disastir_mteb.vocabulary.taxonomy import Intent

TOPICS = {
    "Flood": ["levee", "river", "gauge", "sandbag", "evacuation", "shelter", "crest", "barge"],
    "Earthquake": ["aftershock", "fault", "magnitude", "rubble", "bridge", "retrofit", "epicenter", "tremor"],
    "Wildfire": ["containment", "ember", "smoke", "firebreak", "canyon", "retardant", "evacuation", "ridge"],
    "Pandemic": ["vaccine", "quarantine", "clinic", "testing", "outbreak", "ventilator", "masks", "cases"],
}


class Hashing:
    """Model-free retrievers for the build: hashed word counts, exact cosine top 10 (the runner's stand-in here)."""

    def __init__(self) -> None:
        self.pooled: list[Path] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = np.zeros((len(texts), 1024), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                rows[row, zlib.crc32(word.encode()) % 1024] += 1
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)

    def pool(self, layout: Path) -> dict[str, list[str]]:
        self.pooled.append(layout)
        corpus = [json.loads(line) for line in (layout / "corpus.jsonl").read_text().splitlines()]
        vectors = self.embed([row["text"] for row in corpus])
        pooled = {}
        for path in find_task_files(layout).queries.values():
            for query in json.loads(path.read_text()):
                scores = vectors @ self.embed([query["user_query"]])[0]
                pooled[query["query_id"]] = [corpus[i]["corpus_id"] for i in np.argsort(-scores, kind="stable")[:10]]
        return pooled

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """Two dozen documents in four category folders, a CSV of tweets, and one copy of a report."""
    root = tmp_path / "docs"
    for folder, words in TOPICS.items():
        (root / folder).mkdir(parents=True)
        for n in range(6):
            sentences = [f"Report {n} of the {folder.lower()} desk: the {words[(n + i) % 8]} team logged "
                         f"{words[(n + 2 * i) % 8]} work at site {n * 10 + i} near {words[(i + 3) % 8]} road."
                         for i in range(12)]
            (root / folder / f"report-{n}.txt").write_text(" ".join(sentences))
    (root / "Flood" / "tweets.csv").write_text("text\n" + "".join(
        f"\"levee {w} update {n}: crews at the river crest\"\n" for n, w in enumerate(TOPICS["Flood"][:4])))
    (root / "Flood" / "copy-of-report-0.txt").write_text((root / "Flood" / "report-0.txt").read_text())
    return root


def _settings(docs: Path, out: Path, writer_url: str, judge_url: str, **changes) -> BuildSettings:
    values = dict(docs=docs, out=out, name="MyOrg", model="writer", base_urls=(writer_url,), judge_model="judge",
                  judge_urls=(judge_url,), pool_models=("hashing",), intents=(Intent.QA, Intent.FC),
                  queries_per_task=2, seed=3, yes=True, concurrency=2)
    values.update(changes)
    return BuildSettings(**values)


def _bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_folder_becomes_a_benchmark_and_a_rerun_asks_nothing_and_writes_the_same_bytes(docs: Path, tmp_path: Path,
                                                                                          capsys) -> None:
    asked: list[dict] = []
    said: list[str] = []
    with JudgeServer(counting(writer(), asked.append), model="writer") as generation, \
            JudgeServer(counting(constrained(overlap_judge()), asked.append), model="judge") as judge:
        settings = _settings(docs, tmp_path / "bench", generation.base_url, judge.base_url)
        out = run_build(settings, Hashing(), say=said.append, confirm=lambda plan, requests: False)
        first = _bytes(out)
        requests = len(asked)
        bars = capsys.readouterr().err  # each stage of requests has its bar, each drawn as lines where no terminal is
        assert all(re.search(rf"\[{stage}\] {kind} requests: 100%", bars) for stage, kind in
                   (("queries", "need"), ("queries", "query"), ("judge", "judge"))), bars[-2000:]
        assert run_build(settings, Hashing(), say=said.append, confirm=lambda plan, requests: False) == out
    assert len(asked) == requests and _bytes(out) == first
    stages = [line.split("]")[0] + "]" for line in said[:9]]
    assert stages[0] == "[ingest]" and "[write]" in said[-1]
    marker = json.loads((out / MARKER).read_text())
    assert marker["kind"] == "built" and marker["name"] == "MyOrg" and marker["synthetic"] is True
    assert len(marker["sources"]) == 26 and {s["path"] for s in marker["sources"]} >= {"Flood/tweets.csv"}
    assert marker["tasks"] == sorted(f"MyOrg-{i}-{c}" for i in ("QA", "FC") for c in ("Bio", "Env", "Geo", "MH"))
    files = find_task_files(out)
    assert len(files.queries) == len(files.qrels) == 8
    report = json.loads((out / "report.json").read_text())
    assert report["stages"]["passages"]["exact-duplicate"] >= 1  # the copied report
    assert report["stages"]["ingest"]["sources"] == 26
    for task in report["tasks"].values():
        assert task["queries"] == 2 and task["shortfall"] == 0 and task["pairs"] >= 2
        assert task["generated_share_of_top_grade"] is not None
    cost = report["cost"]
    assert cost["requests"] == requests and cost["prompt_tokens"] == 100 * requests and cost["dollars"] is None
    text = (out / "report.md").read_text()
    assert "not comparable" in text and "| MyOrg-FC-Bio | 2 | 0 |" in text and f"| {requests:,} |" in text
    qrels = json.loads(next(iter(files.qrels.values())).read_text())
    assert all(isinstance(row["score"], int | float) for row in qrels)


def test_until_stops_after_a_stage_and_sends_nothing_before_queries(docs: Path, tmp_path: Path) -> None:
    said: list[str] = []
    settings = _settings(docs, tmp_path / "bench", "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1",
                         until="categories")
    assert run_build(settings, Hashing(), say=said.append, confirm=lambda plan, requests: True) is None
    assert [line.split("]")[0] for line in said] == ["[ingest", "[passages", "[categories"]
    assert not (tmp_path / "bench").exists() and not settings.store_path.exists()


def test_categories_by_event_type_use_the_passages_vectors_once(docs: Path, tmp_path: Path) -> None:
    """``--categories events``: the passages are embedded once, for deduplication and categories alike."""
    said: list[str] = []

    class Counting(Hashing):
        def __init__(self) -> None:
            super().__init__()
            self.embedded: list[int] = []

        def embed(self, texts: list[str]) -> np.ndarray:
            self.embedded.append(len(texts))
            return super().embed(texts)

    encoders = Counting()
    settings = _settings(docs, tmp_path / "bench", "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1",
                         categories="events", until="categories")
    assert run_build(settings, encoders, say=said.append, confirm=lambda plan, requests: True) is None
    passages = int(re.search(r"\[passages\] passages (\d+)", said[1])[1])
    # the chunks once (their near-duplicates among them), then the 301 event types: never the passages a second time
    assert len(encoders.embedded) == 2 and encoders.embedded[0] >= passages and encoders.embedded[1] == 301
    says(said[2], "[categories]")


def test_a_large_plan_is_asked_before_anything_is_sent(docs: Path, tmp_path: Path) -> None:
    asked: list[dict] = []
    plans: list[str] = []
    counts: list[int] = []
    with JudgeServer(counting(writer(), asked.append)) as server:
        settings = _settings(docs, tmp_path / "bench", server.base_url, server.base_url, yes=False,
                             queries_per_task=200)

        def refuse(plan: str, requests: int) -> bool:
            plans.append(plan)
            counts.append(requests)
            return False

        with pytest.raises(ValueError) as raised:
            run_build(settings, Hashing(), say=lambda line: None, confirm=refuse)
    says(str(raised.value), "--yes")
    assert asked == [] and len(plans) == 1
    says(plans[0], "writer", "judge", re.compile(r"\d[\d,]* query request\(s\)"))
    assert counts == [_planned_requests(plans[0])] and counts[0] > settings.confirm_above


def _planned_requests(plan: str) -> int:
    """The requests a printed plan counts: information needs, queries and judge requests."""
    found = re.search(r"([\d,]+) information-need (?:and summary )?and ([\d,]+) query request\(s\).* ([\d,]+) "
                      r"judge request", plan)
    return sum(int(n.replace(",", "")) for n in found.groups())


def test_without_a_terminal_a_large_plan_stops_with_the_plans_own_count(docs: Path, tmp_path: Path, capsys,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from disastir_mteb.cli import main

    monkeypatch.setenv("CI", "true")
    code = main(["build", str(docs), "--out", str(tmp_path / "bench"), "--name", "MyOrg", "--model", "writer",
                 "--base-url", "http://127.0.0.1:9/v1", "--queries-per-task", "200", "--quiet"])
    captured = capsys.readouterr()
    plan = next(line for line in captured.out.splitlines() if line.startswith("Plan: "))
    assert code == 2
    says(captured.err.strip().splitlines()[-1], f"{_planned_requests(plan):,}", "--confirm-above", "2,000", "--yes")


def test_the_runner_pools_each_model_exact_and_ann_and_the_benchmark_runs_as_mteb_tasks(
        docs: Path, tmp_path: Path, capsys, tiny_model: Path) -> None:
    """The command end to end: the runner's hashing encoder pools; two models then run it with disastir-mteb run."""
    from disastir_mteb.cli import main

    with JudgeServer(writer(), model="writer") as generation, \
            JudgeServer(constrained(overlap_judge()), model="judge") as judge:
        code = main(["build", str(docs), "--out", str(tmp_path / "bench"), "--name", "MyOrg", "--model", "writer",
                     "--base-url", generation.base_url, "--judge-model", "judge", "--judge-base-url", judge.base_url,
                     "--intents", "QA,STS", "--queries-per-task", "2", "--yes", "--quiet",
                     "--pool-models", "disastir-mteb/hashing-encoder"])
    assert code == 0
    out = capsys.readouterr().out
    pool = next(line for line in out.splitlines() if line.startswith("[pool]"))
    says(pool, "models 1", "queries 24")  # 2 x 1.5 planned per task, 8 tasks
    assert int(re.search(r"pairs ([\d,]+)", pool)[1].replace(",", "")) >= 24 * 10
    tasks = sorted(f"MyOrg-{i}-{c}" for i in ("QA", "STS") for c in ("Bio", "Env", "Geo", "MH"))
    for model in ("disastir-mteb/hashing-encoder", str(tiny_model)):
        code = main(["run", "-m", model, "--data", str(tmp_path / "bench"), "--output-folder",
                     str(tmp_path / "results"), "--quiet"])
        assert code == 0
    for model_folder in (tmp_path / "results" / "results").iterdir():
        scored = sorted(p.stem for p in model_folder.rglob("MyOrg-*.json") if "per_query" not in p.stem)
        assert scored == tasks, model_folder.name
    assert len(list((tmp_path / "results" / "results").iterdir())) == 2


def _sts_build(docs: Path, out: Path, writer_url: str, judge_url: str, *more: str) -> list[str]:
    """``disastir-mteb build`` of two STS queries a task (one judge request a pair), with ``more`` options."""
    return ["build", str(docs), "--out", str(out), "--name", "MyOrg", "--model", "writer", "--base-url", writer_url,
            "--judge-model", "judge", "--judge-base-url", judge_url, "--intents", "STS", "--queries-per-task", "2",
            "--yes", "--quiet", *more]


def test_killed_mid_generation_and_mid_judging_a_rerun_asks_nothing_twice_and_writes_the_same_bytes(
        docs: Path, tmp_path: Path) -> None:
    """kill -9 while a query is being written, then while a pair is being judged: the third run finishes the build;
    no answer received before a kill is asked for again, and the files equal an uninterrupted build's."""
    import os
    import signal
    import subprocess
    import sys

    asked: list[str] = []
    child: list[subprocess.Popen] = []
    kill_at = {"You have been assigned": 5, "judge": 40}
    seen = {"You have been assigned": 0, "judge": 0}

    def killing(respond, kind):
        def answer(request: dict) -> tuple[int, str, bytes]:
            asked.append(json.dumps(request["messages"], sort_keys=True))
            if kind == "judge" or request["messages"][0]["content"].startswith(kind):
                seen[kind] += 1
                if seen[kind] == kill_at[kind] and child and child[-1].poll() is None:
                    os.kill(child[-1].pid, signal.SIGKILL)
            return respond(request)
        return answer

    with JudgeServer(killing(writer(), "You have been assigned"), model="writer") as generation, \
            JudgeServer(killing(constrained(overlap_judge()), "judge"), model="judge") as judge:
        def argv(out: Path) -> list[str]:
            return _sts_build(docs, out, generation.base_url, judge.base_url, "--concurrency", "1")

        killed_runs = []
        for _ in range(2):
            before = len(asked)
            child.append(subprocess.Popen([sys.executable, "-c", "import sys; from disastir_mteb.cli import main; "
                                           "sys.exit(main(sys.argv[1:]))", *argv(tmp_path / "bench")],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            assert child[-1].wait(300) == -signal.SIGKILL
            killed_runs.append(asked[before:])
        assert seen["judge"] >= kill_at["judge"] and not (tmp_path / "bench").exists()
        before = len(asked)
        from disastir_mteb.cli import main

        assert main(argv(tmp_path / "bench")) == 0
        resumed = asked[before:]
        answered_before = set(killed_runs[0][:-1]) | set(killed_runs[1][:-1])  # the last of each was cut off
        assert not answered_before & set(resumed)
        assert not set(killed_runs[0][:-1]) & set(killed_runs[1])
        assert main([*argv(tmp_path / "uninterrupted"), "--store", str(tmp_path / "other.sqlite")]) == 0
    assert _bytes(tmp_path / "bench") == _bytes(tmp_path / "uninterrupted")


def test_a_task_the_writer_fails_is_kept_in_the_report_with_its_shortfall(docs: Path, tmp_path: Path) -> None:
    """Fact-checking answers are cut off every time: the FC tasks are empty, said per task, never a silent zero."""
    cut_off_claims = cutting_off("You have been assigned a fact-checking", '{"claim": "Levee')
    said: list[str] = []
    with JudgeServer(cut_off_claims, model="writer") as generation, \
            JudgeServer(constrained(overlap_judge()), model="judge") as judge:
        out = run_build(_settings(docs, tmp_path / "bench", generation.base_url, judge.base_url), Hashing(),
                        say=said.append, confirm=lambda plan, requests: True)
    report = json.loads((out / "report.json").read_text())
    assert report["stages"]["filters"]["unanswered"] == 12 and report["stages"]["filters"]["kept"] == 12
    fc = {name: task for name, task in report["tasks"].items() if "-FC-" in name}
    assert len(fc) == 4 and all(task["queries"] == 0 and task["shortfall"] == 2 for task in fc.values())
    says(next(line for line in said if "MyOrg-FC-Bio" in line), "0 of 2", "shortfall 2")
    assert len(find_task_files(out).queries) == 4  # the QA tasks alone have files
    assert "| MyOrg-FC-Bio | 0 | 2 | 0 |" in (out / "report.md").read_text()


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 256 KiB tmpfs for the build store, and how to grow it. Skipped where mounting is not permitted."""
    with tmpfs(tmp_path / "small", "256k") as mount:
        yield mount, lambda: grow(mount, "64m")


def test_a_disk_filling_up_mid_build_is_one_sentence_and_the_rerun_after_freeing_space_finishes_it(
        docs: Path, tmp_path: Path, small_disk, capsys) -> None:
    from disastir_mteb.cli import main

    mount, grow = small_disk
    with JudgeServer(writer(), model="writer") as generation, \
            JudgeServer(constrained(overlap_judge()), model="judge") as judge:
        def argv(out: Path, store: Path) -> list[str]:
            return _sts_build(docs, out, generation.base_url, judge.base_url, "--store", str(store))

        assert main(argv(tmp_path / "bench", mount / "b.sqlite")) == 2
        error = capsys.readouterr().err.strip().splitlines()[-1]
        # the store or, beside it, the pool's provisional layout: whichever the disk filled under, named
        says(error, re.compile(re.escape(str(mount / "b.sqlite")) + r"(\.pool)?\b"), "again")
        assert re.search(r"full|No space left", error) and not (tmp_path / "bench").exists()
        grow()
        assert main(argv(tmp_path / "bench", mount / "b.sqlite")) == 0
        assert main(argv(tmp_path / "uninterrupted", tmp_path / "other.sqlite")) == 0
    assert _bytes(tmp_path / "bench") == _bytes(tmp_path / "uninterrupted")


def test_anchor_queries_are_pooled_and_judged_alike_and_written_beside_the_benchmark(docs: Path,
                                                                                     tmp_path: Path) -> None:
    """DisastIR's expert-query check: the organisation's questions, each with its passage, become a second benchmark."""
    flood = (docs / "Flood" / "report-1.txt").read_text().split(". ")[2] + "."
    anchors = tmp_path / "anchors.jsonl"
    anchors.write_text("".join(json.dumps(row) + "\n" for row in [
        {"query": "Which sandbag crews worked near the river gauge?", "passage": flood, "category": "Flood"},
        {"query": "Where was the firebreak cut above the canyon?", "passage": "Crews cut a firebreak above the "
         "canyon as embers flew over the ridge.", "category": "Wildfire"},
        {"query": "Is the retrofit of the bridge finished?", "passage": "The bridge retrofit after the tremor is "
         "finished.", "category": "Earthquake", "intent": "FC"}]))
    said: list[str] = []
    with JudgeServer(writer(), model="writer") as generation, \
            JudgeServer(constrained(overlap_judge()), model="judge") as judge:
        settings = _settings(docs, tmp_path / "bench", generation.base_url, judge.base_url, anchors=anchors)
        run_build(settings, Hashing(), say=said.append, confirm=lambda plan, requests: True)
    anchor = tmp_path / "bench-anchor"
    marker = json.loads((anchor / MARKER).read_text())
    assert marker["name"] == "MyOrg-Anchor" and marker["anchor_of"] == "MyOrg"
    assert marker["tasks"] == ["MyOrg-Anchor-FC-Geo", "MyOrg-Anchor-QA-Env", "MyOrg-Anchor-QA-MH"]
    queries = [row for path in find_task_files(anchor).queries.values() for row in json.loads(path.read_text())]
    assert sorted(q["query_id"] for q in queries) == ["anchor-FC-Geo-q001", "anchor-QA-Env-q001", "anchor-QA-MH-q001"]
    qrels = [row for path in find_task_files(anchor).qrels.values() for row in json.loads(path.read_text())]
    assert {row["user_query"] for row in qrels} == {q["user_query"] for q in queries}
    assert len(qrels) >= 3 * 10  # each pooled: the top 10 of the pool, and its own passage
    says(said[-1], anchor, "build-study", "--reference")
    assert "anchor" not in json.dumps(json.loads((tmp_path / "bench" / MARKER).read_text())["tasks"])
    with pytest.raises(ValueError) as raised:
        from disastir_mteb.building.anchors import read_anchors

        (tmp_path / "bad.jsonl").write_text('{"query": "Where?"}\n')
        read_anchors(tmp_path / "bad.jsonl")
    says(str(raised.value), tmp_path / "bad.jsonl", "line 1", "passage")


def test_a_build_whose_every_query_is_dropped_says_where_the_answers_are(docs: Path, tmp_path: Path) -> None:
    """A model that cuts every query off (as SmolLM2-135M did on llama.cpp): one sentence, before any pooling."""
    cut_off = cutting_off("You have been assigned", '{"user_query": "Which levee')
    with JudgeServer(cut_off, model="writer") as generation:
        settings = _settings(docs, tmp_path / "bench", generation.base_url, generation.base_url)
        hashing = Hashing()
        with pytest.raises(ValueError) as raised:
            run_build(settings, hashing, say=lambda line: None, confirm=lambda plan, requests: True)
    says(str(raised.value), settings.store_path, "unanswered", "--no-quality-control")
    assert hashing.pooled == [] and not (tmp_path / "bench").exists()


def test_qadoc_queries_are_written_from_each_documents_summary_which_the_corpus_holds(docs: Path,
                                                                                       tmp_path: Path) -> None:
    asked: list[dict] = []
    said: list[str] = []
    with JudgeServer(counting(writer(), asked.append), model="writer") as generation, \
            JudgeServer(constrained(overlap_judge()), model="judge") as judge:
        settings = _settings(docs, tmp_path / "bench", generation.base_url, judge.base_url, intents=(Intent.QAdoc,))
        out = run_build(settings, Hashing(), say=said.append, confirm=lambda plan, requests: True)
    summaries = [r for r in asked if r["messages"][0]["content"].startswith("Summarize")]
    plan = next(line for line in said if line.startswith("Plan: "))
    says(plan, "information-need and summary")
    needs = [r for r in asked if r["messages"][0]["content"].startswith("Brainstorm")]
    assert summaries and int(re.search(r"([\d,]+) information-need", plan)[1]) == len(summaries) + len(needs)
    corpus = (out / "corpus.jsonl").read_text()
    assert corpus.count('"text": "Summary: ') == len(summaries)
    assert sorted(json.loads((out / MARKER).read_text())["tasks"]) == [
        f"MyOrg-QAdoc-{c}" for c in ("Bio", "Env", "Geo", "MH")]


def test_anchor_queries_are_read_from_csv_as_from_jsonl(tmp_path: Path) -> None:
    from disastir_mteb.building.anchors import AnchorQuery, read_anchors
    from disastir_mteb.vocabulary.taxonomy import Category

    (tmp_path / "anchors.csv").write_text('query,passage,intent,category\n"Where did the levee fail?","The levee '
                                          'failed at mile 12.",,Flood\n"Is the bridge safe?","It is.",FC,Geo\n')
    assert read_anchors(tmp_path / "anchors.csv") == [
        AnchorQuery("Where did the levee fail?", "The levee failed at mile 12.", Intent.QA, Category.MH),
        AnchorQuery("Is the bridge safe?", "It is.", Intent.FC, Category.Geo)]
    (tmp_path / "bad.csv").write_text("query,passage\n,The levee failed.\n")
    with pytest.raises(ValueError) as raised:
        read_anchors(tmp_path / "bad.csv")
    says(str(raised.value), tmp_path / "bad.csv", "row 2", "passage")


def _answer(requests: Path, output: Path, urls: dict[int, str], *, fail: int | None = None) -> list[str]:
    """Answer a request file as the Batch API would, each line through the loopback server its key's length names
    (24 digits: the writer, 32: the judge); line ``fail`` failed at the Batch API. The custom_ids, in order."""
    import openai

    clients = {size: openai.OpenAI(base_url=url, api_key="unused", max_retries=0) for size, url in urls.items()}
    lines, ids = [], []
    for number, line in enumerate(requests.read_text().splitlines()):
        record = json.loads(line)
        assert (record["method"], record["url"]) == ("POST", "/v1/chat/completions")
        ids.append(record["custom_id"])
        if number == fail:
            lines.append(json.dumps({"custom_id": record["custom_id"], "response": None,
                                     "error": {"code": "server_error", "message": "x"}}))
            continue
        body = clients[len(record["custom_id"].split(":")[0])].chat.completions.create(**record["body"]).model_dump()
        lines.append(json.dumps({"id": f"batch_req_{number}", "custom_id": record["custom_id"],
                                 "response": {"status_code": 200, "request_id": str(number), "body": body},
                                 "error": None}))
    output.write_text("\n".join(lines) + "\n")
    return ids


def test_a_build_through_batch_api_files_writes_the_bytes_a_build_through_servers_writes(docs: Path,
                                                                                       tmp_path: Path) -> None:
    """``--batch-requests``/``--batch-results``: a round per stage of requests (the judge's protocol takes two); a line
    the Batch API failed is asked in the next file, an output file read twice adds nothing."""
    with JudgeServer(writer(), model="writer") as generation, \
            JudgeServer(constrained(overlap_judge()), model="judge") as judge:
        online = run_build(_settings(docs, tmp_path / "online", generation.base_url, judge.base_url, progress=False,
                                     intents=(Intent.QA,)), Hashing(), say=lambda line: None,
                           confirm=lambda plan, requests: False)
        requests, results, said, rounds, first_ids = tmp_path / "requests.jsonl", None, [], [], []
        while True:
            settings = _settings(docs, tmp_path / "batch", "", "", base_urls=(), judge_urls=(), intents=(Intent.QA,),
                                 batch_requests=requests, batch_results=results)
            out = run_build(settings, Hashing(), say=said.append, confirm=lambda plan, requests: False)
            if out is not None:
                break
            written = requests.read_bytes()
            if results is not None:  # the same output file again: nothing new is read, the same round is written
                assert run_build(settings, Hashing(), say=said.append, confirm=lambda plan, requests: False) is None
                assert requests.read_bytes() == written
            says(said[-1], f"{len(written.splitlines()):,} request(s) written to", requests, "--batch-results")
            rounds.append(said[-1].split("]")[0][1:])
            results = tmp_path / f"output-{len(rounds)}.jsonl"
            ids = _answer(requests, results, {24: generation.base_url, 32: judge.base_url},
                          fail=0 if len(rounds) == 1 else None)
            if len(rounds) == 2:
                assert ids == first_ids[:1]  # the line that failed, alone, asked again
            first_ids = first_ids or ids
    assert rounds == ["need", "need", "query", "judge", "judge"]
    assert _bytes(out) == _bytes(online)


def test_batch_files_of_another_build_or_model_are_one_sentence_each(docs: Path, tmp_path: Path, capsys) -> None:
    from disastir_mteb.cli import main

    requests = tmp_path / "requests.jsonl"
    settings = _settings(docs, tmp_path / "bench", "", "", base_urls=(), judge_urls=(), batch_requests=requests)
    assert run_build(settings, Hashing(), say=lambda line: None, confirm=lambda plan, n: False) is None
    first = json.loads(requests.read_text().splitlines()[0])

    def output(custom_id: str, model: str) -> Path:
        body = {"id": "c", "object": "chat.completion", "created": 0, "model": model, "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop"}]}
        path = tmp_path / f"{model}.jsonl"
        path.write_text(json.dumps({"custom_id": custom_id, "response": {"status_code": 200, "body": body},
                                    "error": None}) + "\n")
        return path

    for path, facts in ((output("ab" * 12 + ":need", "writer"), ("none of its 1 result line", "another build")),
                        (output(first["custom_id"], "other"), ("line 1", "'other'", "'writer'", "--model"))):
        with pytest.raises(ValueError) as raised:
            run_build(BuildSettings(**{**settings.__dict__, "batch_results": path}), Hashing(),
                      say=lambda line: None, confirm=lambda plan, n: False)
        says(str(raised.value), path, *facts)
    base = ["build", str(docs), "--out", str(tmp_path / "b2"), "--name", "MyOrg", "--model", "writer", "--quiet"]
    for extra, facts in (([], ("--base-url", "--batch-requests FILE")),
                         (["--batch-results", str(requests)], ("--batch-results needs --batch-requests",))):
        assert main(base + extra) == 2
        says(capsys.readouterr().err.strip().splitlines()[-1], *facts)

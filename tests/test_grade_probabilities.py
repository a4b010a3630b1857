"""Grade probabilities (DIRAS "Tok") read from real HTTP answers that carry logprobs as OpenAI, vLLM and llama.cpp
write them; their calibration in ``--agreement``; a server's learned format kept for the next job.

The servers are ``tests/judge_servers.py``'s, on loopback, answering through the real ``openai`` client. A server
whose grade token puts ``c`` on the true grade and the rest evenly on the others gives every pair a distribution
that can be worked out by hand, so the stored expected grade, P(relevant) and the calibration figures are checked
against numbers computed here independently of the module.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest
from judge_servers import JUDGE_MODEL as MODEL
from judge_servers import (
    JudgeServer,
    confident,
    constrained,
    refuses_logprobs,
    refuses_schema,
    token_logprobs,
    true_grade,
    with_logprobs,
)
from loopback import grade_judge

from disastir_mteb.endpoints.pool import EndpointPool
from disastir_mteb.judging.calibration import auroc, brier_score, expected_calibration_error, kendall_tau
from disastir_mteb.judging.grade_probabilities import answer_distribution
from disastir_mteb.judging.job import judge_pairs
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.vocabulary.taxonomy import MAX_GRADE, Intent


def _pairs(intent: Intent, n: int) -> tuple[list[Pair], dict[tuple[str, str], int]]:
    pairs, grades = [], {}
    for number in range(n):
        query, passage = f"{intent.value} question {number} on the levee", f"Passage {number}: the levee held."
        pairs.append(Pair(intent, query, passage, MODEL))
        grades[query, passage] = true_grade(query, passage, MAX_GRADE[intent])
    return pairs, grades


def _answer(content: str, probabilities: dict[object, float], *, merged: bool = False) -> dict[str, object]:
    return {"choices": [{"message": {"content": content}, "logprobs": token_logprobs(content, probabilities,
                                                                                  merged=merged)}]}


@pytest.mark.parametrize("merged", [False, True], ids=["grade a token of its own", "space joined to the grade"])
def test_the_distribution_is_read_at_the_grade_token(merged: bool) -> None:
    spread = {0: 0.1, 1: 0.2, 2: 0.6, 3: 0.1}
    found = answer_distribution(_answer('{"final_score": 2}', spread, merged=merged), "final_score", (0, 1, 2, 3))
    assert found == pytest.approx(spread)
    yes = answer_distribution(_answer('{"has_answer": "Yes"}', {"Yes": 0.3, "No": 0.1}, merged=merged), "has_answer",
                              ("Yes", "No"))
    assert yes == pytest.approx({"Yes": 0.75, "No": 0.25})  # normalised over the allowed values


def test_answers_without_logprobs_or_without_a_grade_among_them_have_none() -> None:
    assert answer_distribution({"choices": [{"message": {"content": '{"final_score": 2}'}}]}, "final_score",
                               (0, 1, 2, 3)) is None
    assert answer_distribution(_answer('{"final_score": 2}', {"x": 1.0}), "final_score", (0, 1, 2, 3)) is None
    assert answer_distribution(_answer('{"final_score": 2}', {7: 1.0}), "final_score", (0, 1, 2, 3)) is None
    # a key named inside another value is not the answer's key: the reader looks for the asked key only
    assert answer_distribution(_answer('{"final_score": 2}', {2: 1.0}), "relevance_score", (2, 3)) is None


def test_a_job_stores_each_pairs_expected_grade_and_probability_of_relevance(tmp_path: Path) -> None:
    """STS (one method, 0-5): the pair's distribution is its one answer's, c on the true grade, the rest even."""
    pairs, grades = _pairs(Intent.STS, 12)
    c = 0.7
    with JudgeServer(with_logprobs(grade_judge(grades), confident(c))) as server, \
            JudgementStore(tmp_path / "j.sqlite") as store:
        judge_pairs(pairs, store, EndpointPool([server.base_url], concurrency=2), judge_model=MODEL)
        assert all(request["logprobs"] is True and request["top_logprobs"] >= 6 for request in server.requests)
        judged = {(j.query, j.passage): j for j in store.judgements()}
    for key, grade in grades.items():
        rest = [g for g in range(6) if g != grade]
        expected = c * grade + (1 - c) / 5 * sum(rest)
        relevant = (c if grade > 0 else 0.0) + (1 - c) / 5 * sum(1 for g in rest if g > 0)
        assert judged[key].grade == grade
        assert judged[key].expected == pytest.approx(expected, abs=1e-5)
        assert judged[key].p_relevant == pytest.approx(relevant, abs=1e-5)


def test_the_methods_distributions_are_averaged_for_a_pair_of_three_methods(tmp_path: Path) -> None:
    """QA: zero-shot and multi over 0-3, the chain of thought's final step within its branch (2-3 or 0-1)."""
    pairs, grades = _pairs(Intent.QA, 6)
    c = 0.8
    with JudgeServer(with_logprobs(grade_judge(grades), confident(c))) as server, \
            JudgementStore(tmp_path / "j.sqlite") as store:
        judge_pairs(pairs, store, EndpointPool([server.base_url], concurrency=4), judge_model=MODEL)
        judged = {(j.query, j.passage): j for j in store.judgements()}
    for key, grade in grades.items():
        full = {g: c if g == grade else (1 - c) / 3 for g in range(4)}
        branch = (2, 3) if grade >= 2 else (0, 1)
        cot = {g: (c if g == grade else 1 - c) if g in branch else 0.0 for g in range(4)}
        mixed = {g: (2 * full[g] + cot[g]) / 3 for g in range(4)}
        assert judged[key].expected == pytest.approx(sum(g * p for g, p in mixed.items()), abs=1e-5)
        assert judged[key].p_relevant == pytest.approx(1 - mixed[0], abs=1e-5)


def test_a_server_without_logprobs_gives_hard_grades_as_before(tmp_path: Path) -> None:
    pairs, grades = _pairs(Intent.STS, 4)
    with JudgeServer(constrained(grade_judge(grades))) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        summary = judge_pairs(pairs, store, EndpointPool([server.base_url], concurrency=2), judge_model=MODEL)
        judged = list(store.judgements())
    assert summary.judged == 4 and {(j.grade is not None, j.expected, j.p_relevant) for j in judged} == {
        (True, None, None)}


def test_a_server_refusing_logprobs_is_asked_without_them_and_says_so_once(tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    pairs, grades = _pairs(Intent.STS, 5)
    with JudgeServer(refuses_logprobs(grade_judge(grades))) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        summary = judge_pairs(pairs, store, EndpointPool([server.base_url], concurrency=1), judge_model=MODEL)
        asked = [bool(request.get("logprobs")) for request in server.requests]
        got = {(j.query, j.passage): j.grade for j in store.judgements()}
    assert asked == [True] + [False] * 5 and summary.judged == 5
    assert got == {key: float(grade) for key, grade in grades.items()}
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1 and "refused logprobs" in said[0] and server.base_url in said[0]


def test_the_next_job_starts_in_the_format_the_last_one_learned(tmp_path: Path) -> None:
    """Job 1 learns that the server refuses json_schema; job 2, same server and judge model, starts in json_object:
    no request wasted on re-learning it (before: each job asked json_schema first again)."""
    first, grades = _pairs(Intent.STS, 3)
    second = [Pair(Intent.STS, f"another question {n}", f"another passage {n}", MODEL) for n in range(3)]
    grades |= {(p.query, p.passage): 1 for p in second}
    with JudgeServer(refuses_schema(grade_judge(grades))) as server, JudgementStore(tmp_path / "j.sqlite") as store:
        judge_pairs(first, store, EndpointPool([server.base_url], concurrency=1), judge_model=MODEL)
        assert server.formats() == ["json_schema", "json_object", "json_object", "json_object"]
        assert store.learned_format(server.base_url, MODEL) == ("json_object", True)
        judge_pairs(second, store, EndpointPool([server.base_url], concurrency=1), judge_model=MODEL)
        assert server.formats()[4:] == ["json_object"] * 3
        assert store.learned_format(server.base_url, "another-model") is None  # per judge model


def test_calibration_measures_agree_with_hand_computed_values() -> None:
    probabilities, labels = [0.95, 0.8, 0.65, 0.3, 0.2, 0.05], [True, True, False, True, False, False]
    bins = {9: [(0.95, 1)], 8: [(0.8, 1)], 6: [(0.65, 0)], 3: [(0.3, 1)], 2: [(0.2, 0)], 0: [(0.05, 0)]}
    hand_ece = sum(len(b) / 6 * abs(sum(p for p, _ in b) / len(b) - sum(y for _, y in b) / len(b))
                   for b in bins.values())
    assert expected_calibration_error(probabilities, labels) == pytest.approx(hand_ece)
    assert brier_score(probabilities, labels) == pytest.approx(
        sum((p - y) ** 2 for p, y in zip(probabilities, labels, strict=True)) / 6)
    pairs = [(p, q) for p, y in zip(probabilities, labels, strict=True) if y
             for q, z in zip(probabilities, labels, strict=True) if not z]
    assert auroc(probabilities, labels) == pytest.approx(sum(p > q for p, q in pairs) / len(pairs))
    assert auroc([0.5, 0.5], [True, False]) == 0.5 and auroc([0.1], [True]) is None
    assert kendall_tau([1, 1, 2, 3], [1, 2, 2, 3]) == pytest.approx(4 / math.sqrt(5 * 5))
    assert kendall_tau([1, 1], [2, 3]) is None


def test_agreement_prints_the_calibration_and_stores_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through the CLI: ``judge --agreement`` on the sample, a server whose grade token is confident at 0.9: ECE,
    Brier and AUROC of P(relevant), and the expected grade's tau beside the hard grade's, printed and stored."""
    from disastir_mteb import cli
    from disastir_mteb.judging.agreement import pick_agreement_pairs
    from disastir_mteb.sample.generator import sample_dir

    data = sample_dir("small")
    picked = pick_agreement_pairs(24, ["DisastIR-STS-Geo"], data)
    grades = {(p.query, p.passage): p.published for p in picked}
    runs = tmp_path / "runs"
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.runner.run import evaluate

    evaluate(HashingEncoder(), ["DisastIR-STS-Geo"], cache_dir=False, output_folder=runs, show_progress=False,
             data=data)
    from disastir_mteb.judging.holes import load_task_texts

    texts = load_task_texts("DisastIR-STS-Geo", data)  # the holes the job fills afterwards are graded 0
    judge = grade_judge(grades, default=lambda query, passage: 0, queries=texts.queries.values(),
                        passages=texts.passages.values())
    with JudgeServer(with_logprobs(judge, confident(0.9))) as server:
        code = cli.main(["judge", str(runs), "--model", MODEL, "--base-url", server.base_url, "--store",
                         str(tmp_path / "j.sqlite"), "--agreement", "24", "--yes", "--quiet", "-t", "DisastIR-STS-Geo",
                         "--data", str(data)])
    printed = capsys.readouterr().out
    assert code in (0, 1)
    assert "Grade probabilities" in printed and "ECE" in printed and "AUROC" in printed
    with JudgementStore(tmp_path / "j.sqlite") as store:
        stored = store.agreement(MODEL, "disastir-appendix-c/1")
    assert stored is not None and stored.calibration is not None
    assert stored.calibration["pairs"] == 24 and stored.calibration["auroc"] == pytest.approx(1.0)
    # every hard grade is the published one: P(relevant) is 0.9 + 0.02 * 4 for a relevant pair, 0.1 for the others
    labels = [grades[k] > 0 for k in grades]
    p = [0.98 if y else 0.1 for y in labels]
    assert stored.calibration["brier"] == pytest.approx(brier_score(p, labels), abs=1e-6)
    assert stored.calibration["ece"] == pytest.approx(expected_calibration_error(p, labels), abs=1e-6)
    assert json.dumps(stored.calibration)  # plain JSON


@pytest.fixture(scope="module")
def runs(hashing_runs: object) -> Path:
    return hashing_runs("DisastIR-STS-Geo")  # type: ignore[operator]


def test_completed_scores_take_the_expected_grade_when_asked_and_say_so(runs: Path, holes: list, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from judge_servers import judge_of

    from disastir_mteb import cli

    store = tmp_path / "j.sqlite"
    with JudgeServer(with_logprobs(judge_of(holes), confident(0.5))) as server:
        assert cli.main(["judge", str(runs), "--model", MODEL, "--base-url", server.base_url, "--store", str(store),
                         "--yes", "--quiet", "-t", "DisastIR-STS-Geo"]) == 0
    capsys.readouterr()
    shown = {}
    for grade in ("hard", "expected"):
        assert cli.main(["report", str(runs), "--judgements", str(store), "--completed-grade", grade]) == 0
        shown[grade] = capsys.readouterr().out
    assert "hard grades (the methods' vote" in shown["hard"]
    assert "expected grades (from the judge's grade probabilities)" in shown["expected"]
    line = {grade: next(row for row in text.splitlines() if row.startswith("DisastIR-STS-Geo  "))
            for grade, text in shown.items()}
    assert line["hard"] != line["expected"]  # half the mass off the hard grade moves the completed NDCG@10

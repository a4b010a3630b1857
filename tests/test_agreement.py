"""``judge --agreement``: stratified published pairs, judged through the real job and client, and Cohen's kappa.

Kappa is checked on hand-computed cases (the arithmetic written out) and against scikit-learn where it is installed;
the agreement pairs go through :func:`~disastir_mteb.judging.job.judge_pairs` to a real loopback chat server
through the ``openai`` client, whose judge answers the published grade: kappa 1.0.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from loopback import LoopbackServer, grade_judge
from sentences import says

from disastir_mteb.endpoints.pool import EndpointPool
from disastir_mteb.judging.agreement import (
    KAPPA_FLOOR,
    PAPER_KAPPA,
    UNREADABLE_LIMIT,
    AgreementPair,
    agreement_note,
    agreement_of,
    cohen_kappa,
    pick_agreement_pairs,
    run_agreement,
    shortfall,
    spread,
)
from disastir_mteb.judging.completed import load_added, merge_grades
from disastir_mteb.judging.holes import load_task_texts
from disastir_mteb.judging.job import Price, judge_pairs
from disastir_mteb.judging.protocol import PROMPT_VERSION
from disastir_mteb.judging.settings import JudgeSettings
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.vocabulary.taxonomy import INTENTS, TASK_NAMES, Intent, get_spec

MODEL = "agreement-judge"
TASKS = ["DisastIR-QA-Bio", "DisastIR-QA-Chem", "DisastIR-STS-Geo", "DisastIR-FC-Soc"]


@pytest.fixture
def data(sample_data: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DISASTIR_DATA_DIR", str(sample_data))
    return sample_data


def test_kappa_of_hand_computed_cases() -> None:
    # binary, 10 items: a says yes 6 times, b 5 times; both yes 4, both no 3 -> observed agreement 7/10
    a = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    b = [1, 1, 1, 1, 0, 0, 1, 0, 0, 0]
    chance = (6 / 10) * (5 / 10) + (4 / 10) * (5 / 10)  # 0.5
    assert cohen_kappa(a, b, labels=[0, 1]) == pytest.approx((7 / 10 - chance) / (1 - chance))  # 0.4
    # quadratic weights on 0-3, 4 items: disagreements (0,1) and (3,1) weigh 1/9 and 4/9
    a, b = [0, 1, 2, 3], [1, 1, 2, 1]
    observed = (1 / 9 + 4 / 9) / 4
    rows, columns = [1, 1, 1, 1], [0, 3, 1, 0]  # a's and b's label counts
    expected = sum((i - j) ** 2 / 9 * rows[i] * columns[j] for i in range(4) for j in range(4)) / 16
    assert cohen_kappa(a, b, labels=[0, 1, 2, 3], weights="quadratic") == pytest.approx(1 - observed / expected)
    assert cohen_kappa([2, 0, 3], [2, 0, 3], labels=[0, 1, 2, 3], weights="quadratic") == 1.0
    assert cohen_kappa([1, 1], [1, 1], labels=[0, 1]) is None  # one label only: chance agreement is 1, undefined
    assert cohen_kappa([], [], labels=[0, 1]) is None
    assert cohen_kappa([0, 1], [1, 0], labels=[0, 1]) == -1.0
    with pytest.raises(ValueError, match=r"label 3 and 2 items"):
        cohen_kappa([0, 1, 1], [0, 1], labels=[0, 1])
    with pytest.raises(ValueError) as refused:
        cohen_kappa([4], [0], labels=[0, 1, 2, 3])
    says(str(refused.value), "4", "[0, 1, 2, 3]")


def test_kappa_equals_scikit_learns() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    draw = random.Random(7)
    for _ in range(100):
        n = draw.randint(2, 40)
        a = [draw.randint(0, 5) for _ in range(n)]
        b = [min(5, max(0, x + draw.choice([-1, 0, 0, 1, 2]))) for x in a]
        for weights in (None, "quadratic"):
            ours = cohen_kappa(a, b, labels=list(range(6)), weights=weights)
            if ours is not None:
                assert ours == pytest.approx(metrics.cohen_kappa_score(a, b, labels=list(range(6)), weights=weights),
                                             abs=1e-12)


def test_spread_is_as_even_as_the_capacities_allow() -> None:
    assert spread(12, [5, 5, 5]) == [4, 4, 4]
    assert spread(12, [1, 10, 10]) == [1, 6, 5]  # the full one's rest goes to the others, the remainder first
    assert spread(50, [3, 4]) == [3, 4]  # more asked than there is: all of it
    assert spread(0, [3, 4]) == [0, 0]


def test_pairs_are_stratified_by_intent_and_grade_and_seeded(data: Path) -> None:
    picked = pick_agreement_pairs(40, TASKS, seed=3)
    assert len(picked) == 40
    assert Counter(p.intent for p in picked) == {Intent.QA: 14, Intent.FC: 13, Intent.STS: 13}  # 40 over 3 intents
    for intent in (Intent.QA, Intent.FC, Intent.STS):
        available = Counter()
        for task in TASKS:
            texts = load_task_texts(task, data)
            if texts.intent is intent:
                available.update(g for judged in texts.grades.values() for g in judged.values())
        grades = sorted(available)
        share = sum(p.intent is intent for p in picked)
        assert [sum(p.intent is intent and p.published == g for p in picked) for g in grades] == \
            spread(share, [available[g] for g in grades])
    for pair in picked:  # each pair carries its published grade, by text
        texts = load_task_texts(pair.task, data)
        ids = [q for q in texts.grades if texts.queries[q].strip() == pair.query]
        assert any(texts.passages[d].strip() == pair.passage and g == pair.published
                   for q in ids for d, g in texts.grades[q].items())
    assert len({(p.intent, p.query, p.passage) for p in picked}) == 40
    assert pick_agreement_pairs(40, TASKS, seed=3) == picked
    assert pick_agreement_pairs(40, TASKS, seed=4) != picked
    with pytest.raises(ValueError) as refused:
        pick_agreement_pairs(0, TASKS)
    says(str(refused.value), "--agreement 0", "at least one pair")


def test_a_judge_that_answers_the_published_grade_agrees_perfectly(data: Path, tmp_path: Path) -> None:
    picked = pick_agreement_pairs(60, TASKS, seed=0)
    truth = {(p.query, p.passage): p.published for p in picked}
    pairs = [Pair(p.intent, p.query, p.passage, MODEL) for p in picked]
    with JudgementStore(tmp_path / "store.sqlite") as store, LoopbackServer(answer=grade_judge(truth)) as server:
        summary = judge_pairs(pairs, store, EndpointPool([server.base_url], concurrency=4), judge_model=MODEL)
        assert summary.judged == 60 and summary.failed == 0
        agreement = agreement_of(picked, store, judge_model=MODEL)
        assert {i: (a.binary, a.weighted) for i, a in agreement.intents.items()} == {
            Intent.QA: (1.0, 1.0), Intent.STS: (1.0, 1.0), Intent.FC: (1.0, 1.0)}
        assert agreement.mean("binary") == agreement.mean("weighted") == 1.0 and agreement.ungraded == 0
        text = agreement.to_text()
        assert "Mean over intents" in text and f"{PAPER_KAPPA:.2f}" in text and "relevant = grade > 0" in text
        # these judgements have published grades: the completed scores never use them
        added = load_added(store)
        assert len(added.grades) == 60
        for task in TASKS:
            texts = load_task_texts(task, data)
            merged = merge_grades(texts, added)
            assert merged.grades == texts.grades and not merged.added and merged.not_used > 0


def test_weighted_kappa_rounds_a_mean_vote_half_up_and_binary_reads_it_as_relevant(tmp_path: Path) -> None:
    pairs = [AgreementPair("DisastIR-QA-Bio", Intent.QA, f"q{i}", "p", grade) for i, grade in enumerate([0, 1, 2, 3])]
    votes = [0.33, 1.5, 2.49, 2.5]  # relevant: all four; rounded half up: 0, 2, 2, 3
    with JudgementStore(tmp_path / "store.sqlite") as store:
        keyed = [Pair(p.intent, p.query, p.passage, MODEL) for p in pairs]
        store.add_pairs(keyed)
        for pair, vote in zip(keyed, votes, strict=True):
            store.record_judgement(pair.key, vote, {})
        agreement = agreement_of(pairs, store, judge_model=MODEL)
    qa = agreement.intents[Intent.QA]
    assert qa.binary == cohen_kappa([False, True, True, True], [True, True, True, True], labels=[False, True])
    assert qa.weighted == cohen_kappa([0, 1, 2, 3], [0, 2, 2, 3], labels=[0, 1, 2, 3], weights="quadratic")
    assert qa.binary == 0.0 and 0 < qa.weighted < 1


def test_run_agreement_plans_asks_and_prints_the_table(data: Path, tmp_path: Path) -> None:
    picked = pick_agreement_pairs(12, [t for t in TASK_NAMES if get_spec(t).intent in (Intent.NLI, Intent.QAdoc)])
    truth = {(p.query, p.passage): p.published for p in picked}
    said: list[str] = []
    asked: list[int] = []

    def go_ahead(text: str, requests: int) -> bool:
        asked.append(requests)
        return True

    results = SimpleNamespace(scores={t: 0.5 for t in TASK_NAMES if get_spec(t).intent in (Intent.NLI,
                                                                                            Intent.QAdoc)})
    with JudgementStore(tmp_path / "store.sqlite") as store, LoopbackServer(answer=grade_judge(truth)) as server:
        settings = JudgeSettings(MODEL, (server.base_url,), api_key_env="DISASTIR_TEST_NO_KEY", concurrency=4,
                                  timeout=30.0, price=Price.parse("0.15,0.60"))
        agreement = run_agreement([results], 12, store=store, settings=settings, go_ahead=go_ahead,  # type: ignore[list-item]
                                  say=said.append)
        assert agreement is not None and set(agreement.intents) == {Intent.QAdoc, Intent.NLI}
        assert asked == [12 * 10]  # every pair: the three methods, ten requests (STS would be one)
        assert said[0].startswith("Agreement check: 12 pair(s) to judge") and "$" in said[0]
        assert said[-1] == agreement.to_text() and agreement.mean("binary") == 1.0
        said.clear()
        again = run_agreement([results], 12, store=store, settings=settings, go_ahead=go_ahead, say=said.append)  # type: ignore[list-item]
        assert asked == [120] and again == agreement  # all in the store: nothing asked, the same table
        settings = dataclasses.replace(settings, base_urls=())
        with pytest.raises(ValueError) as refused:
            run_agreement([results], 12, store=store, settings=settings, go_ahead=go_ahead)  # type: ignore[list-item]
        says(str(refused.value), "--agreement", "--base-url")


def test_every_intent_can_be_sampled_from_all_48_tasks(data: Path) -> None:
    picked = pick_agreement_pairs(60, seed=1)
    assert Counter(p.intent for p in picked) == dict.fromkeys(INTENTS, 10)


def test_the_band_is_kappa_0_4_and_a_tenth_unreadable() -> None:
    assert (KAPPA_FLOOR, UNREADABLE_LIMIT) == (0.4, 0.1)
    assert shortfall(0.4, asked=60, ungraded=6) == []  # at the floor, a tenth exactly: within
    assert shortfall(0.8, asked=60, ungraded=6) == [] and shortfall(0.39, asked=60, ungraded=0) == [
        "binary kappa 0.390, below 0.4"]
    assert shortfall(0.9, asked=60, ungraded=7) == ["7 of 60 pairs (12 %) without a readable answer, more than a tenth"]
    assert shortfall(None, asked=60, ungraded=60) == [
        "no kappa could be computed (no pair graded, or one label for every pair)",
        "60 of 60 pairs (100 %) without a readable answer, more than a tenth"]


def test_a_judge_leaving_more_than_a_tenth_unreadable_is_warned_and_the_measurement_is_stored(
        data: Path, tmp_path: Path) -> None:
    """A judge that answers prose for 3 of 12 pairs: kappa 1.0 on the other 9, and still not fit to fill holes."""
    picked = pick_agreement_pairs(12, ["DisastIR-STS-Geo"], seed=0)
    good = grade_judge({(p.query, p.passage): p.published for p in picked})
    prose = [(p.query, p.passage) for p in picked[::4]]  # one pair of three grades: both labels stay

    def answer(request: dict) -> str:
        text = request["messages"][-1]["content"]
        if any(query in text and passage in text for query, passage in prose):
            return "Based on the provided passage, yes."
        return good(request)

    said: list[str] = []
    with JudgementStore(tmp_path / "store.sqlite") as store, LoopbackServer(answer=answer) as server:
        settings = JudgeSettings(MODEL, (server.base_url,), api_key_env="DISASTIR_TEST_NO_KEY", concurrency=4,
                                  timeout=30.0, tasks=("DisastIR-STS-Geo",))
        agreement = run_agreement([], 12, store=store, settings=settings, go_ahead=lambda *_: True, say=said.append)
        stored = store.agreement(MODEL, PROMPT_VERSION)
    assert agreement is not None and agreement.ungraded == 3 and agreement.mean("binary") == 1.0
    assert said[-1] == agreement.warning()
    says(said[-1], MODEL, PROMPT_VERSION, "3 of 12 pairs", "25 %", "0.4", "a tenth", "0.77", "should not fill holes",
         "stronger judge model")
    assert said[-2] == agreement.to_text()
    assert stored is not None and (stored.asked, stored.ungraded, stored.binary) == (12, 3, 1.0)
    assert stored.intents == {"STS": {"pairs": 9, "binary": 1.0, "weighted": 1.0}}
    says(agreement_note(stored, judge_model=MODEL, prompt_version=PROMPT_VERSION), "Warning:", MODEL, PROMPT_VERSION,
         "binary kappa 1.000", "(weighted 1.000)", "9 of 12 pair(s)", "below the band", "3 of 12 pairs", "25 %")


def test_a_judge_within_the_band_gets_no_warning_and_the_latest_measurement_is_read(data: Path,
                                                                                    tmp_path: Path) -> None:
    picked = pick_agreement_pairs(12, ["DisastIR-STS-Geo"], seed=0)
    said: list[str] = []
    with JudgementStore(tmp_path / "store.sqlite") as store:
        assert store.agreement(MODEL, PROMPT_VERSION) is None
        store.record_agreement(MODEL, PROMPT_VERSION, asked=10, ungraded=5, binary=0.1, weighted=0.1, intents={})
        with LoopbackServer(answer=grade_judge({(p.query, p.passage): p.published for p in picked})) as server:
            settings = JudgeSettings(MODEL, (server.base_url,), api_key_env="DISASTIR_TEST_NO_KEY", concurrency=4,
                                  timeout=30.0, tasks=("DisastIR-STS-Geo",))
            agreement = run_agreement([], 12, store=store, settings=settings, go_ahead=lambda *_: True, say=said.append)
        assert agreement is not None and agreement.warning() is None and said[-1] == agreement.to_text()
        latest = store.agreement(MODEL, PROMPT_VERSION)
        assert latest is not None and (latest.asked, latest.ungraded, latest.binary) == (12, 0, 1.0)
        assert store.agreement("another-judge", PROMPT_VERSION) is None


def test_the_judge_commands_options_are_one_settings_value_for_the_holes_and_the_agreement() -> None:
    from disastir_mteb.cli import build_parser

    options = build_parser().parse_args(["judge", "results", "--model", "qwen", "--base-url", "http://a:1/v1",
                                         "--base-url", "http://b:2/v1", "--concurrency", "3", "--timeout", "9",
                                         "--price", "0.15,0.60", "-t", "DisastIR-QA-Bio", "--confirm-above", "5",
                                         "--yes"])
    settings = JudgeSettings.from_options(options)
    assert settings == JudgeSettings("qwen", ("http://a:1/v1", "http://b:2/v1"), concurrency=3, timeout=9.0,
                                     price=Price.parse("0.15,0.60"), tasks=("DisastIR-QA-Bio",), confirm_above=5,
                                     yes=True)
    pool = settings.pool()
    assert [server.url for server in pool.servers] == ["http://a:1/v1", "http://b:2/v1"] and pool.workers == 6

"""A build's categories, its query plan, the two stages through a loopback writer, and the cheap filters."""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import replace

import numpy as np
import pytest
from generator_servers import counting, writer
from judge_servers import JudgeServer
from sentences import says

from disastir_mteb.building.categories import categories_by_events, categories_by_folder, folder_category
from disastir_mteb.building.filters import filter_queries
from disastir_mteb.building.generation import generate
from disastir_mteb.building.passages import Passage, passage_id
from disastir_mteb.building.prompts import GeneratedQuery
from disastir_mteb.building.queries import OVERSAMPLE, WrittenQuery, plan_queries, write_queries
from disastir_mteb.building.store import BuildStore
from disastir_mteb.endpoints.pool import EndpointPool
from disastir_mteb.vocabulary.taxonomy import Category, Intent


def _passage(text: str, folder: str | None = "Flood") -> Passage:
    return Passage(passage_id(text), text, f"{folder}/doc.txt", folder, "document")


@pytest.mark.parametrize(("folder", "category"), [("Bio", Category.Bio), ("meteorological & hydrological", Category.MH),
                                                  ("Earthquake", Category.Geo), ("flash flood", Category.MH),
                                                  ("Flood", Category.MH), ("Wildfire", Category.Env)])
def test_a_folder_named_after_a_category_or_event_type_gives_it(folder: str, category: Category) -> None:
    assert folder_category(folder) == category


def test_a_folder_naming_neither_is_one_sentence_with_the_ways_out() -> None:
    with pytest.raises(ValueError) as raised:
        folder_category("Hurricane season")
    says(str(raised.value), "'Hurricane season'", "Geo", "MH", "--categories events", "--categories one:<category>")
    with pytest.raises(ValueError) as raised:
        categories_by_folder([_passage("x", None)])
    says(str(raised.value), "None/doc.txt", "--categories events")
    assert categories_by_folder([_passage("x", None)], one=Category.Tech) == [Category.Tech]


def test_the_nearest_event_type_gives_a_passages_category() -> None:
    def embed(texts: list[str]) -> np.ndarray:  # words hashed into 512 buckets: a model-free encoder
        rows = np.zeros((len(texts), 512), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                rows[row, zlib.crc32(word.encode()) % 512] += 1
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)

    passages = [_passage("Ground shaking from the earthquake damaged buildings; aftershocks and liquefaction came."),
                _passage("Swarms of migratory locust insects consume the vegetation at alarming rates.")]
    assert categories_by_events(embed([p.text for p in passages]), embed) == [Category.Geo, Category.Bio]


def _corpus() -> tuple[list[Passage], list[Category]]:
    passages = [_passage(f"Levee {n} near Vicksburg failed; {n} homes flooded along the Yazoo river in ward {n}.")
                for n in range(5)] + [_passage(f"Crews cut fire line {n} above the canyon as red flag winds rose.",
                                               "Wildfire") for n in range(2)]
    return passages, categories_by_folder(passages)


def test_the_plan_is_drawn_once_from_its_seed() -> None:
    passages, categories = _corpus()
    plan = plan_queries(passages, categories, intents=[Intent.QA, Intent.NLI], per_task=4, seed=7)
    tasks = {(p.intent, p.category) for p in plan}
    assert tasks == {(i, c) for i in (Intent.QA, Intent.NLI) for c in (Category.MH, Category.Env)}
    per_task = math.ceil(4 * OVERSAMPLE)
    assert all(sum(1 for p in plan if (p.intent, p.category) == task) == per_task for task in tasks)
    mh_qa = [p.seed for p in plan if (p.intent, p.category) == (Intent.QA, Category.MH)]
    assert len(set(mh_qa[:5])) == 5  # no seed twice while the category has enough
    assert plan == plan_queries(passages, categories, intents=[Intent.QA, Intent.NLI], per_task=4, seed=7)
    assert plan != plan_queries(passages, categories, intents=[Intent.QA, Intent.NLI], per_task=4, seed=8)
    summaries = [_passage("Summary: the Vicksburg levee report.")]
    qadoc = plan_queries(passages, categories, intents=[Intent.QAdoc], per_task=2, seed=7, summaries=summaries,
                         summary_categories=[Category.MH])
    assert {p.seed for p in qadoc} == set(summaries) and len(qadoc) == 3


def test_queries_are_written_in_two_stages_and_a_rerun_asks_nothing(tmp_path) -> None:
    passages, categories = _corpus()
    plan = plan_queries(passages, categories, intents=[Intent.QA, Intent.STS], per_task=2, seed=1)
    seen: list[dict] = []
    with JudgeServer(counting(writer(), seen.append)) as server, BuildStore(tmp_path / "b.sqlite") as store:
        def send(asks, read, progress):  # a pool of its own for each stage, as the build sends
            return generate(asks, store, EndpointPool([server.base_url], concurrency=2), model="m", read=read,
                            progress=progress)

        written, summaries = write_queries(plan, store, send, model="m")
        needs = {(p.intent, p.seed.text) for p in plan}
        assert summaries["need"].sent == len(needs) and summaries["query"].sent == len(plan) == len(seen) - len(needs)
        assert all(w.written is not None and w.need is not None and w.need.startswith("Given a question about")
                   for w in written)
        sts = next(w for w in written if w.plan.intent is Intent.STS)
        assert sts.written.passage.startswith("A note on")
        sts_asked = [r for r in seen if r["messages"][0]["content"].startswith("You have been assigned a similar")]
        assert len(sts_asked) == sum(1 for p in plan if p.intent is Intent.STS)
        assert all(r["response_format"]["json_schema"]["schema"]["required"] == ["query", "positive"]
                   for r in sts_asked)
        again, summaries = write_queries(plan, store, send, model="m")
        assert again == written and summaries["query"].sent == summaries["need"].sent == 0


def test_cheap_filters_give_every_drop_its_reason() -> None:
    seed = _passage("The levee near Vicksburg failed at dawn and the Yazoo river flooded ward four.")
    plan = plan_queries([seed], [Category.MH], intents=[Intent.QA], per_task=1, seed=1)[0]

    def written(query: str | None, passage: str = "Another text.", logprob: float | None = None) -> WrittenQuery:
        return WrittenQuery(plan, "need", GeneratedQuery(query, passage) if query is not None else None, logprob)

    queries = [written("Why did the Vicksburg levee fail?"), written(None), written("Levee?"),
               written("word " * 301), written("the Yazoo river flooded ward four"),
               written("Why did the Vicksburg levee fail ?"),
               written("When did crews arrive at ward four?", logprob=-3.2),
               written("Which shelters opened near Vicksburg?", logprob=-0.4)]
    verdicts, drops = filter_queries(queries, min_logprob=-2.0)
    assert [v.dropped for v in verdicts] == [None, "unanswered", "too-short", "too-long", "copied", "duplicate",
                                             "low-logprob", None]
    assert drops == {"unanswered": 1, "too-short": 1, "too-long": 1, "copied": 1, "duplicate": 1, "low-logprob": 1}
    assert filter_queries([replace(queries[6])])[0][0].dropped is None  # no floor: logprobs only reported

"""Queries for every intent and category, written in the authors' two stages from seed passages of that category.

The plan is drawn up front from one seed (which passage seeds each query, the slots of its prompt), so a resumed
build asks exactly what the first run asked. Each task plans more queries than it needs, since the filters and the
quality control drop some; the first ones kept, in plan order, are the task's. QAdoc's seeds are the documents'
summaries, which the corpus holds in the documents' stead.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from disastir_mteb.building.generation import GenerationSummary, Send
from disastir_mteb.building.passages import Passage
from disastir_mteb.building.prompts import (
    Ask,
    GeneratedQuery,
    need_ask,
    query_ask,
    read_needs,
    read_query,
    read_summary,
    sample_slots,
    summary_ask,
)
from disastir_mteb.building.store import BuildStore
from disastir_mteb.vocabulary.taxonomy import Category, Intent

__all__ = ["OVERSAMPLE", "PlannedQuery", "WrittenQuery", "plan_queries", "summary_asks", "write_queries"]

#: Queries planned per query wanted: enough for the filters' and the quality control's usual drops.
OVERSAMPLE = 1.5


@dataclass(frozen=True)
class PlannedQuery:
    """One query to write: its task, its place in the task's plan, its seed passage and its prompt's slots."""

    intent: Intent
    category: Category
    index: int
    seed: Passage
    slots: Mapping[str, str]
    draw: int  # which of the seed's information needs it is written for (modulo their number)
    anchor: bool = False  # written by the organisation (``--anchor-queries``), not by the model


@dataclass(frozen=True)
class WrittenQuery:
    """A planned query as the generation model wrote it (None where no readable answer came)."""

    plan: PlannedQuery
    need: str | None
    written: GeneratedQuery | None
    logprob: float | None


def plan_queries(passages: Sequence[Passage], categories: Sequence[Category], *, intents: Sequence[Intent],
                 per_task: int, seed: int, summaries: Sequence[Passage] = (),
                 summary_categories: Sequence[Category] = ()) -> list[PlannedQuery]:
    """The plan: for each intent and each category with passages, ``per_task`` x :data:`OVERSAMPLE` queries.

    Seeds are drawn without repetition while the category has passages enough, then again from the start.
    """
    planned = []
    by_category: dict[Category, list[Passage]] = {}
    for passage, category in zip(passages, categories, strict=True):
        by_category.setdefault(category, []).append(passage)
    summaries_by: dict[Category, list[Passage]] = {}
    for passage, category in zip(summaries, summary_categories, strict=True):
        summaries_by.setdefault(category, []).append(passage)
    wanted = math.ceil(per_task * OVERSAMPLE)
    for intent in intents:
        pool = summaries_by if intent is Intent.QAdoc else by_category
        for category in sorted(pool, key=lambda c: list(Category).index(c)):
            rng = random.Random(f"{seed}-{intent.value}-{category.value}")
            seeds: list[Passage] = []
            while len(seeds) < wanted:
                seeds += rng.sample(pool[category], len(pool[category]))
            planned += [PlannedQuery(intent, category, index, passage, sample_slots(intent, rng),
                                     rng.randrange(1 << 30)) for index, passage in enumerate(seeds[:wanted])]
    return planned


def summary_asks(model: str, documents: Sequence[str]) -> list[Ask]:
    """QAdoc's summary requests, one per document text."""
    return [summary_ask(model, document) for document in documents]


def _read(intent_of: Mapping[str, Intent]) -> Callable[[Ask, str | None], Any]:
    def read(ask: Ask, text: str | None) -> Any:
        if ask.stage == "need":
            return read_needs(text)
        if ask.stage == "summary":
            return read_summary(text)
        written = read_query(intent_of[ask.key], text)
        return {"query": written.query, "passage": written.passage}

    return read


def write_queries(plan: Sequence[PlannedQuery], store: BuildStore, send: Send, *, model: str,
                  progress: Callable[[str, int, int], None] | None = None,
                  ) -> tuple[list[WrittenQuery], dict[str, GenerationSummary]]:
    """Stage 1 for every (intent, seed) of the plan, then stage 2 for every planned query; ``store`` is ``send``'s.

    ``progress(stage, done, total)`` is called as answers come.
    """
    needs_asked = {(p.intent, p.seed.text): need_ask(model, p.intent, p.seed.text) for p in plan}
    summaries: dict[str, GenerationSummary] = {}
    needs, summaries["need"] = _stage("need", list(needs_asked.values()), send, {}, progress)
    chosen: list[tuple[PlannedQuery, str | None, Ask | None]] = []
    for planned in plan:
        listed = needs.get(needs_asked[planned.intent, planned.seed.text].key)
        if not listed:
            chosen.append((planned, None, None))
            continue
        need = listed[planned.draw % len(listed)]
        chosen.append((planned, need, query_ask(model, planned.intent, planned.seed.text, need, planned.slots,
                                                planned.index)))
    asks = [ask for _, _, ask in chosen if ask is not None]
    intent_of = {ask.key: planned.intent for planned, _, ask in chosen if ask is not None}
    answers, summaries["query"] = _stage("query", asks, send, intent_of, progress)
    logprobs = {key: stored.logprob for key, stored in store.answers(answers).items()}
    written = []
    for planned, need, ask in chosen:
        value = answers.get(ask.key) if ask is not None else None
        written.append(WrittenQuery(planned, need, GeneratedQuery(value["query"], value["passage"]) if value else None,
                                    logprobs.get(ask.key) if ask is not None else None))
    return written, summaries


def _stage(stage: str, asks: list[Ask], send: Send, intent_of: Mapping[str, Intent],
           progress: Callable[[str, int, int], None] | None) -> tuple[dict[str, Any], GenerationSummary]:
    done = 0

    def step(count: int) -> None:
        nonlocal done
        done += count
        if progress is not None:
            progress(stage, done, len(asks))

    return send(asks, _read(intent_of), step)

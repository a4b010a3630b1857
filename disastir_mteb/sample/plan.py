"""What the synthetic sample holds: per-query grade counts after Table 14, query cells and texts, judgements.

Each query targets a globally unique cell (event, aspect, place); each grade it is judged at is filled
with passages at that grade's level (``LEVELS``), reused from other queries first and written anew
(:class:`~disastir_mteb.sample.text.PassageBuilder`) when none is left.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from disastir_mteb.sample.text import (
    ACTORS,
    ASPECTS,
    LEVELS,
    PLACES,
    QUERY_TEMPLATES,
    STYLE_OF,
    STYLES,
    PassageBuilder,
    resource,
)
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import CATEGORIES, MAX_GRADE, TASK_SPECS, Category, Intent

if TYPE_CHECKING:
    from disastir_mteb.sample.scale import SampleScale

__all__ = ["PlannedTask", "generate", "plan_grade_counts"]

_PAPER_QUERIES = 200


def _table14() -> dict[tuple[str, str], list[int]]:
    """Grade counts per (intent, category) from the shipped Table 14, so full scale matches the paper."""
    with resource("published", "disastir_paper_table14_qrels_by_grade.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return {(r["intent"], r["category"]): [int(r[f"rel{g}"]) for g in range(6)] for r in rows}


def _apportion(total: int, weights: Sequence[float]) -> list[int]:
    """Largest-remainder split of ``total`` by ``weights``; exact when the quotas are already integers."""
    wsum = float(sum(weights))
    quotas = [total * w / wsum for w in weights]
    out = [math.floor(q) for q in quotas]
    order = sorted(range(len(quotas)), key=lambda i: (out[i] - quotas[i], i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def plan_grade_counts(
    intent: Intent, category: Category, scale: SampleScale, seed: int = 0
) -> list[list[int]]:
    """Per-query judged counts by grade (rows = queries): task totals follow Table 14 (or its proportions).

    Full-paper counts vary per query (gamma-weighted sizes, shuffled labels) while every query keeps >= 1
    passage of grade >= 1; rare top grades leave some queries without a top-grade passage, as in the paper.
    """
    rng = random.Random(f"counts-{seed}-{intent.value}-{category.value}")
    row = _table14()[(intent.value, category.value)][: MAX_GRADE[intent] + 1]
    n_q = scale.queries_per_task
    if scale.judged_per_query is None:
        totals = _apportion(round(sum(row) * n_q / _PAPER_QUERIES), row)
        sizes = _apportion(sum(totals), [rng.gammavariate(6.0, 1.0) for _ in range(n_q)])
    else:
        totals = _apportion(n_q * scale.judged_per_query, row)
        sizes = [scale.judged_per_query] * n_q
    if sum(totals[1:]) < n_q:  # tiny scales: guarantee one relevant passage per query
        move = min(totals[0], n_q - sum(totals[1:]))
        totals[0], totals[1] = totals[0] - move, totals[1] + move
    for i in range(n_q):  # no empty query
        if sizes[i] == 0:
            j = max(range(n_q), key=lambda k: sizes[k])
            sizes[i], sizes[j] = 1, sizes[j] - 1
    labels = [g for g, t in enumerate(totals) for _ in range(t)]
    rng.shuffle(labels)
    rows, start = [], 0
    for s in sizes:
        rows.append(labels[start: start + s])
        start += s
    for r in rows:  # swap a grade-0 label for a positive one from a query that has several
        if not any(r):
            donor = next(d for d in rows if sum(1 for g in d if g) > 1)
            k = next(k for k, g in enumerate(donor) if g)
            r[0], donor[k] = donor[k], r[0]
    return [[sum(1 for g in r if g == grade) for grade in range(len(row))] for r in rows]


@dataclass
class PlannedTask:
    """One task's planned queries: their cells (event, aspect, place, actor), grade counts and judged pairs."""

    intent: Intent
    category: Category
    queries: list[str]
    cells: list[tuple[int, int, int, int]]
    actors: list[int]
    counts: list[list[int]]
    judged: list[list[tuple[int, int]]]


def _plan_queries(b: PassageBuilder, scale: SampleScale, seed: int) -> list[PlannedTask]:
    """Give every query a globally unique cell; few active events per category at small scales share pools."""
    rng, n_q = b.rng, scale.queries_per_task
    n_active = [min(len(ev), max(2, math.ceil(len(ev) and 6 * n_q / 12))) for ev in b.cat_events]
    active = [rng.sample(ev, k) for ev, k in zip(b.cat_events, n_active, strict=True)]
    tasks = []
    for spec in TASK_SPECS:
        ci = CATEGORIES.index(spec.category)
        counts = plan_grade_counts(spec.intent, spec.category, scale, seed)
        task = PlannedTask(spec.intent, spec.category, [], [], [], counts, [])
        offset, seen = rng.randrange(n_active[ci]), set()
        for i in range(n_q):
            e = active[ci][(offset + i) % n_active[ci]]
            a, p = rng.randrange(len(ASPECTS)), rng.randrange(len(PLACES))
            while (e, a, p) in b.cells:
                a, p = rng.randrange(len(ASPECTS)), rng.randrange(len(PLACES))
            b.cells.add((e, a, p))
            actor = rng.randrange(len(ACTORS))
            text = rng.choice(QUERY_TEMPLATES[spec.intent]).format(**b.slots(e, a, p, actor))
            while text in seen:
                text = rng.choice(QUERY_TEMPLATES[spec.intent]).format(**b.slots(e, a, p, actor))
            seen.add(text)
            task.queries.append(text)
            task.cells.append((e, a, p, ci))
            task.actors.append(actor)
            task.judged.append([])
        tasks.append(task)
    return tasks


def _judge(b: PassageBuilder, task: PlannedTask, qi: int, grade: int, need: int) -> int:
    """Judge ``need`` passages at ``grade`` for one query, reusing shared ones first; return the gap."""
    q, levels = task.cells[qi], LEVELS["sts" if task.intent is Intent.STS else "std"]
    picked: list[int] = []
    if grade == 0:
        picked = b.pick("lex", q, round(0.15 * need), set())
    level = levels[grade]
    if level != "cell":
        picked += b.pick(level, q, need - len(picked), set(picked))
    own = STYLE_OF[task.intent]
    for _ in range(need - len(picked)):
        style = own if level == "cell" or b.rng.random() < 0.5 else b.rng.choice(STYLES)
        pid = b.make(level, q, style, task.actors[qi])
        if pid is not None:
            picked.append(pid)
    task.judged[qi].extend((pid, grade) for pid in picked)
    return need - len(picked)


def generate(
    scale: SampleScale, seed: int, progress: Callable[[str], None]
) -> tuple[PassageBuilder, list[PlannedTask], int]:
    """Build queries, corpus and judgements in memory (texts once; qrels are (pid, grade) pairs)."""
    if scale.n_passages < 2 * len(TASK_SPECS) * scale.queries_per_task:
        raise InvalidInput(f"Scale {scale.name!r} needs n_passages >= 2 x the number of queries.")
    b = PassageBuilder(scale, seed)
    tasks = _plan_queries(b, scale, seed)
    progress(f"planned {sum(len(t.queries) for t in tasks)} queries")
    b.budget = scale.n_passages - scale.n_passages // 10  # keep room for unjudged distractors
    short = 0
    for first in (True, False):  # each query's best positive grade first, so every query gets one
        for task in tasks:
            for qi, row in enumerate(task.counts):
                top = max(g for g in range(len(row)) if row[g] or g == 0)
                for g in range(len(row) - 1, 0, -1):
                    if row[g] and (g == top) == first:
                        short += _judge(b, task, qi, g, row[g])
    progress(f"relevant passages: {len(b.texts)}")
    b.budget = scale.n_passages
    while len(b.texts) < scale.n_passages:
        ci = len(b.texts) % len(CATEGORIES)
        e, a = b.rng.choice(b.cat_events[ci]), b.rng.randrange(len(ASPECTS))
        b.add(e, a, b.free_place(e, a), b.rng.choice(STYLES))
    progress(f"corpus complete: {len(b.texts)} passages")
    shuffle = random.Random(f"pairs-{seed}").shuffle  # qrels order must not reveal grades
    for task in tasks:
        for qi, row in enumerate(task.counts):
            short += _judge(b, task, qi, 0, row[0])
            shuffle(task.judged[qi])
    return b, tasks, short

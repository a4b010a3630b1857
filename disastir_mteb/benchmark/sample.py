"""Synthetic DisastIR-shaped dataset generator, so the loader, tasks and CLI can run without the real data.

The output has the published layout (``corpus.jsonl``, ``query/<File>.json``, ``qrels/<File>_qrels.json``).
Each query targets a cell (event, aspect, place); grades follow how much of the cell a passage shares
(intent grade -> level in ``_LEVELS``), so an embedding model ranks clearly above random but not perfectly.
Query ids are ``<Intent>-<Category>-qNNN`` (e.g. ``FC-Bio-q007``), unique across all files; corpus ids are
``dNNNNNN`` in a shuffled order, so ids leak nothing about relevance.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import re
import shutil
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from disastir_mteb.benchmark.taxonomy import (
    CATEGORIES,
    MAX_GRADE,
    TASK_SPECS,
    Category,
    Intent,
    task_file_stem,
)

__all__ = ["FULL", "GENERATOR_VERSION", "MARKER", "SCALES", "SMALL", "SampleScale", "main", "plan_grade_counts",
           "read_marker", "sample_dir", "task_file_stem", "write_sample"]

#: Bump whenever the bytes written for a given scale and seed change (invalidates ``sample_dir`` caches).
#: 2: the provenance marker (:data:`MARKER`) is written beside the data.
GENERATOR_VERSION = 2

#: The provenance file at the top of a generated folder. Results computed on it say "synthetic"
#: (the runner records it per task); the data loader scans ``query/`` and ``qrels/`` only, so it never
#: mistakes the marker for a task file.
MARKER = "DISASTIR_SAMPLE.json"


@dataclass(frozen=True)
class SampleScale:
    """How big a synthetic dataset is; ``judged_per_query=None`` means the paper's per-task counts."""

    name: str
    n_passages: int
    queries_per_task: int
    judged_per_query: int | None
    passage_words: int


# Small: 48 x 8 queries x 14 judged pairs stays < 3 MB (qrels repeat passage texts) and builds in < 0.2 s.
SMALL = SampleScale("small", n_passages=1500, queries_per_task=8, judged_per_query=14, passage_words=32)
FULL = SampleScale("full", n_passages=239_704, queries_per_task=200, judged_per_query=None, passage_words=120)
SCALES: dict[str, SampleScale] = {"small": SMALL, "full": FULL}
_PAPER_QUERIES = 200

# Vocabularies: aspect -> (label, keyword phrases); places; (actor, @handle); time phrases.
_ASPECTS = [
    ("evacuation", "evacuation orders|emergency shelters|displaced families|relocation of residents|"
     "evacuation routes"),
    ("health effects", "respiratory illness|hospital admissions|injuries and infections|mental health strain|"
     "disease outbreaks"),
    ("early warning signs", "early warning alerts|sensor readings|precursor signals|forecast bulletins|"
     "warning sirens"),
    ("recovery and reconstruction", "reconstruction funding|rebuilding of homes|livelihood recovery|"
     "restoration programmes|debris clearance"),
    ("infrastructure damage", "damaged bridges|collapsed roads|power line failures|broken water mains|"
     "disrupted rail links"),
    ("economic losses", "crop losses|insurance claims|business closures|lost tourism revenue|"
     "rising food prices"),
    ("emergency response", "search and rescue teams|field hospitals|relief convoys|rapid response units|"
     "emergency operations centres"),
    ("preparedness", "preparedness drills|stockpiled supplies|contingency plans|community training|"
     "building codes"),
    ("environmental impact", "contaminated rivers|habitat destruction|soil contamination|wildlife deaths|"
     "polluted groundwater"),
    ("casualties", "fatalities|missing persons|mass casualty triage|death toll figures|injured survivors"),
    ("public communication", "public advisories|misinformation|press briefings|hotline calls|"
     "text message alerts"),
    ("risk assessment", "hazard maps|vulnerability surveys|exposure estimates|risk models|"
     "monitoring stations"),
]
_ASPECTS = [(label, kws.split("|")) for label, kws in _ASPECTS]
_PLACES = ("Manila|Dhaka|Jakarta|Lagos|Nairobi|Lima|Quito|Kathmandu|Karachi|Chennai|Osaka|Valparaiso|"
           "Port-au-Prince|Beira|Kampala|Accra|Hanoi|Cebu|Sendai|Christchurch|Naples|Izmir|Tbilisi|Almaty|"
           "Ulaanbaatar|Houston|New Orleans|Winnipeg|Oaxaca|Recife|Cape Town|Mombasa|Colombo|Yangon|Suva|"
           "Darwin|Rotterdam|Marseille|Bergen|Reykjavik").split("|")
_ACTORS = [tuple(a.split("=")) for a in (
    "the Red Cross=@RedCross|the World Health Organization=@WHO|the national disaster agency=@NDMA_alerts|"
    "local health officials=@CityHealthDept|the civil protection service=@CivilProtection|"
    "the fire and rescue service=@FireRescue|the meteorological office=@MetOffice|UN OCHA=@UNOCHA|"
    "the environment ministry=@EnvMinistry|municipal engineers=@CityWorks|the geological survey=@GeoSurvey|"
    "Doctors Without Borders=@MSF|the coast guard=@CoastGuard|the grid operator=@GridOperator|"
    "a university research team=@UniRiskLab|community volunteers=@VolunteerNet").split("|")]
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December".split("|")
_TIMES = ["in {m} {y}", "in early {y}", "in late {y}", "during {m} {y}", "over the summer of {y}",
          "last week", "in the winter of {y}", "since {m} {y}"]

# Passage styles: one per intent (the style of its top-grade passages); the first three are long.
_STYLE_OF = {Intent.QA: "passage", Intent.QAdoc: "doc", Intent.FC: "evidence", Intent.Twitter: "tweet",
             Intent.NLI: "hypothesis", Intent.STS: "paraphrase"}
_STYLES = list(_STYLE_OF.values())
_LONG = {"passage", "doc", "evidence"}
_CORE = {
    "passage": ["{Actor} reported {k1} in {place} {time} as the {ev} affected about {n} people.",
                "The {ev} in {place} {time} brought {k1} and {k2} to the attention of {actor}.",
                "In {place}, {actor} focused on {label} after the {ev} {time}."],
    "doc": ["This report summarises {label} following the {ev} in {place} {time}.",
            "This document reviews {k1} and {k2} during the {ev} that struck {place} {time}.",
            "Summary: an assessment by {actor} of {label} after the {ev} in {place} {time}."],
    "evidence": ["According to {actor}, the {ev} in {place} {time} resulted in {k1} affecting {n} residents.",
                 "Records compiled by {actor} show that {k1} followed the {ev} in {place} {time}.",
                 "Evidence from {place} indicates that the {ev} {time} did lead to {k1}."],
    "tweet": ["{k1} in {place} right now after the #{tag}, {handle} says {n} people affected",
              "#{tag} update from {place}: {k1}, {k2}. Stay safe! {handle} #{ptag}",
              "{handle}: {label} underway in #{ptag} following the {ev}. #{tag}"],
    "hypothesis": ["The {ev} in {place} caused {k1}.", "{place} experienced {k1} because of the {ev}.",
                   "There was {k1} in {place} after the {ev}."],
    "paraphrase": ["During the {ev} in {place}, {k1} became a major concern.",
                   "{K1} was a central problem in {place} when the {ev} happened.",
                   "People in {place} faced {k1} as the {ev} unfolded {time}."],
}
_FILL = ["{Actor} noted that {k1} remained a priority in {place}.",
         "Further {k1} was documented across {d} districts.",
         "{K2} was linked to the {ev} by {actor}.", "Teams recorded {k1} and {k2} over {d} days.",
         "Residents described {k1} as the most pressing issue {time}.", "{desc}",
         "Officials expect updated figures on {k2} {time}.",
         "About {n} households were covered by the survey.",
         "The situation was reviewed at a regional coordination meeting.", "{desc}"]
_QUERY = {
    Intent.QA: ["What is known about {label} after the {ev} in {place}?",
                "How did {actor} handle {k1} during the {ev} in {place}?",
                "What {k1} occurred in {place} because of the {ev}?"],
    Intent.QAdoc: ["Which report documents {label} after the {ev} in {place}, and what did it find?",
                   "Is there an assessment summarising {k1} during the {ev} in {place}?"],
    Intent.Twitter: ["Find tweets mentioning {handle}, {place} and the {ev} about {label}.",
                     "Tweets about #{tag} in {place} that mention {handle} and {k1}"],
    Intent.FC: ["Claim: the {ev} in {place} {time} led to {k1} for about {n} people.",
                "Claim: {actor} denied any {k1} in {place} after the {ev}.",
                "Claim: there were no {k1} in {place} during the {ev}."],
    Intent.NLI: ["{Actor} confirmed that the {ev} in {place} {time} resulted in {k1} and {k2}.",
                 "After the {ev} struck {place} {time}, {actor} documented {k1} affecting {n} households."],
    Intent.STS: ["{K1} became a major concern in {place} during the {ev}.",
                 "The {ev} in {place} led to {k1}."],
}
# What a passage shares with the query's cell (event e, aspect a, place p, category c), indexed by grade.
# 0..3: other event of c (15% of grade 0: other category, same place) / e, other a / e+a, other p / e+a+p.
# STS 0..5: other event and aspect / other event, same a / e, other a+p / e+p, other a / e+a, other p / cell.
_LEVELS = {"std": ("c", "e", "ea", "cell"), "sts": ("c_na", "ca", "e_np", "ep", "ea", "cell")}
_TAG_RE = re.compile(r"\s*\((?:human|animal|animal/plant|human and animal|animal and human|human, animal)\)")


def _resource(*parts: str):
    """A shipped resource, read through importlib.resources so it also works from a wheel or zip."""
    node = files("disastir_mteb") / "resources"
    for part in parts:
        node = node / part
    return node


def _table14() -> dict[tuple[str, str], list[int]]:
    """Grade counts per (intent, category) from the shipped Table 14, so full scale matches the paper."""
    with _resource("published", "disastir_paper_table14_qrels_by_grade.csv").open(encoding="utf-8") as fh:
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


class _Builder:
    """Holds the growing corpus with attribute indexes so relevance levels can be looked up without O(n^2)."""

    def __init__(self, scale: SampleScale, seed: int) -> None:
        self.rng = random.Random(f"text-{seed}")
        self.words = scale.passage_words
        raw = json.loads(_resource("event_types.json").read_text(encoding="utf-8"))
        # (category index, surface name, hashtag, description sentences)
        self.events: list[tuple[int, str, str, list[str]]] = []
        self.cat_events: list[list[int]] = []
        for ci, cat in enumerate(CATEGORIES):
            self.cat_events.append([])
            for name, desc in raw[cat.value].items():
                surface = _TAG_RE.sub("", name).strip()
                words = re.findall(r"[A-Za-z0-9]+", surface.split(" (")[0])
                tag = "".join(w[:1].upper() + w[1:] for w in words)
                self.cat_events[ci].append(len(self.events))
                self.events.append((ci, surface, tag[:24], re.split(r"(?<=\.)\s+", desc.strip())))
        self.texts: list[str] = []
        self.seen: set[str] = set()
        self.E, self.A, self.P = array("i"), array("i"), array("i")
        self.by_e: dict[int, list[int]] = {}
        self.by_ea: dict[tuple[int, int], list[int]] = {}
        self.by_c: dict[int, list[int]] = {}
        self.by_ca: dict[tuple[int, int], list[int]] = {}
        self.by_p: dict[int, list[int]] = {}
        self.cells: set[tuple[int, int, int]] = set()
        self.budget = scale.n_passages

    def slots(self, e: int, a: int, p: int, actor: int | None = None) -> dict[str, object]:
        rng = self.rng
        _, name, tag, desc = self.events[e]
        k1, k2 = rng.sample(_ASPECTS[a][1], 2)
        act, handle = _ACTORS[rng.randrange(len(_ACTORS)) if actor is None else actor]
        year = rng.randrange(1995, 2025)
        when = rng.choice(_TIMES).format(m=rng.choice(_MONTHS), y=year)
        place = _PLACES[p]
        return {"ev": name, "tag": tag, "place": place, "ptag": place.replace(" ", "").replace("-", ""),
                "label": _ASPECTS[a][0], "k1": k1, "k2": k2, "K1": k1[:1].upper() + k1[1:],
                "K2": k2[:1].upper() + k2[1:],
                "actor": act, "Actor": act[:1].upper() + act[1:], "handle": handle, "time": when,
                "n": rng.randrange(12, 90_000), "d": rng.randrange(2, 60), "desc": rng.choice(desc)}

    def add(self, e: int, a: int, p: int, style: str, actor: int | None = None) -> int | None:
        """Create one unique passage for (e, a, p) in ``style``; None once the corpus budget is spent."""
        if len(self.texts) >= self.budget:
            return None
        rng = self.rng
        for attempt in range(60):
            s = self.slots(e, a, p, actor)
            if rng.random() < 0.2 and style in _LONG:  # refer to the hazard by its description only
                s["ev"] = "event"
                parts = [s["desc"], rng.choice(_CORE[style]).format(**s)]
            else:
                parts = [rng.choice(_CORE[style]).format(**s)]
            target = self.words * (rng.uniform(1.0, 1.8) if style in _LONG else rng.uniform(0.3, 0.6))
            count = len(parts[0].split())
            while count < target:
                s = self.slots(e, a, p, actor) if rng.random() < 0.5 else s
                sentence = rng.choice(_FILL).format(**s)
                parts.append(sentence)
                count += len(sentence.split())
            text = " ".join(parts) if attempt < 50 else f"{' '.join(parts)} (ref {len(self.texts)})"
            if text not in self.seen:
                break
        pid = len(self.texts)
        self.texts.append(text)
        self.seen.add(text)
        c = self.events[e][0]
        self.E.append(e), self.A.append(a), self.P.append(p)
        indexes = ((self.by_e, e), (self.by_ea, (e, a)), (self.by_c, c), (self.by_ca, (c, a)), (self.by_p, p))
        for index, key in indexes:
            index.setdefault(key, []).append(pid)
        return pid

    def free_place(self, e: int, a: int, avoid: int = -1) -> int:
        """A place that makes (e, a, place) no query's cell, so no unjudged perfect match exists."""
        for _ in range(100):
            p = self.rng.randrange(len(_PLACES))
            if p != avoid and (e, a, p) not in self.cells:
                return p
        return (avoid + 1) % len(_PLACES)

    def make(self, level: str, q: tuple[int, int, int, int], style: str, actor: int) -> int | None:
        """Create a new passage that sits exactly at ``level`` relative to query cell ``q``."""
        e, a, p, c = q
        rng = self.rng
        if level == "cell":
            return self.add(e, a, p, style, actor)
        other_a = rng.choice([x for x in range(len(_ASPECTS)) if x != a])
        if level == "ea":
            return self.add(e, a, self.free_place(e, a, p), style)
        if level == "ep":
            free = [x for x in range(len(_ASPECTS)) if x != a and (e, x, p) not in self.cells]
            return self.add(e, rng.choice(free), p, style) if free else None
        if level in ("e", "e_np"):
            return self.add(e, other_a, self.free_place(e, other_a, p), style)
        others = [x for x in self.cat_events[c] if x != e] or [e]
        e2 = rng.choice(others)
        if e2 == e:
            return None
        a2 = a if level == "ca" else (other_a if level == "c_na" else rng.randrange(len(_ASPECTS)))
        return self.add(e2, a2, self.free_place(e2, a2), style)

    def matches(self, level: str, q: tuple[int, int, int, int], pid: int) -> bool:
        e, a, p, _ = q
        pe, pa, pp = self.E[pid], self.A[pid], self.P[pid]
        same_e = pe == e
        return {"cell": same_e and pa == a and pp == p, "ea": same_e and pa == a and pp != p,
                "ep": same_e and pa != a and pp == p, "e": same_e and pa != a,
                "e_np": same_e and pa != a and pp != p, "ca": not same_e and pa == a,
                "c": not same_e, "c_na": not same_e and pa != a, "lex": self.events[pe][0] != q[3]}[level]

    def pick(self, level: str, q: tuple[int, int, int, int], need: int, taken: set[int]) -> list[int]:
        """Sample ``need`` existing passages at ``level`` (rejection sampling, then a full scan)."""
        e, a, p, c = q
        pool = {"cell": self.by_ea, "ea": self.by_ea, "ca": self.by_ca, "c": self.by_c, "c_na": self.by_c,
                "lex": self.by_p}.get(level, self.by_e)
        key = {"cell": (e, a), "ea": (e, a), "ca": (c, a), "c": c, "c_na": c, "lex": p}.get(level, e)
        pool = pool.get(key, [])
        out: list[int] = []
        if need <= 0 or not pool:
            return out
        for _ in range(8 * need if len(pool) > 4 * need else 0):
            pid = pool[self.rng.randrange(len(pool))]
            if pid not in taken and self.matches(level, q, pid):
                taken.add(pid)
                out.append(pid)
                if len(out) == need:
                    return out
        rest = [pid for pid in pool if pid not in taken and self.matches(level, q, pid)]
        for pid in self.rng.sample(rest, min(need - len(out), len(rest))):
            taken.add(pid)
            out.append(pid)
        return out


@dataclass
class _Task:
    intent: Intent
    category: Category
    queries: list[str]
    cells: list[tuple[int, int, int, int]]
    actors: list[int]
    counts: list[list[int]]
    judged: list[list[tuple[int, int]]]


def _plan_queries(b: _Builder, scale: SampleScale, seed: int) -> list[_Task]:
    """Give every query a globally unique cell; few active events per category at small scales share pools."""
    rng, n_q = b.rng, scale.queries_per_task
    n_active = [min(len(ev), max(2, math.ceil(len(ev) and 6 * n_q / 12))) for ev in b.cat_events]
    active = [rng.sample(ev, k) for ev, k in zip(b.cat_events, n_active, strict=True)]
    tasks = []
    for spec in TASK_SPECS:
        ci = CATEGORIES.index(spec.category)
        counts = plan_grade_counts(spec.intent, spec.category, scale, seed)
        task = _Task(spec.intent, spec.category, [], [], [], counts, [])
        offset, seen = rng.randrange(n_active[ci]), set()
        for i in range(n_q):
            e = active[ci][(offset + i) % n_active[ci]]
            a, p = rng.randrange(len(_ASPECTS)), rng.randrange(len(_PLACES))
            while (e, a, p) in b.cells:
                a, p = rng.randrange(len(_ASPECTS)), rng.randrange(len(_PLACES))
            b.cells.add((e, a, p))
            actor = rng.randrange(len(_ACTORS))
            text = rng.choice(_QUERY[spec.intent]).format(**b.slots(e, a, p, actor))
            while text in seen:
                text = rng.choice(_QUERY[spec.intent]).format(**b.slots(e, a, p, actor))
            seen.add(text)
            task.queries.append(text)
            task.cells.append((e, a, p, ci))
            task.actors.append(actor)
            task.judged.append([])
        tasks.append(task)
    return tasks


def _judge(b: _Builder, task: _Task, qi: int, grade: int, need: int) -> int:
    """Judge ``need`` passages at ``grade`` for one query, reusing shared ones first; return the gap."""
    q, levels = task.cells[qi], _LEVELS["sts" if task.intent is Intent.STS else "std"]
    picked: list[int] = []
    if grade == 0:
        picked = b.pick("lex", q, round(0.15 * need), set())
    level = levels[grade]
    if level != "cell":
        picked += b.pick(level, q, need - len(picked), set(picked))
    own = _STYLE_OF[task.intent]
    for _ in range(need - len(picked)):
        style = own if level == "cell" or b.rng.random() < 0.5 else b.rng.choice(_STYLES)
        pid = b.make(level, q, style, task.actors[qi])
        if pid is not None:
            picked.append(pid)
    task.judged[qi].extend((pid, grade) for pid in picked)
    return need - len(picked)


def _generate(
    scale: SampleScale, seed: int, progress: Callable[[str], None]
) -> tuple[_Builder, list[_Task], int]:
    """Build queries, corpus and judgements in memory (texts once; qrels are (pid, grade) pairs)."""
    if scale.n_passages < 2 * len(TASK_SPECS) * scale.queries_per_task:
        raise ValueError(f"Scale {scale.name!r} needs n_passages >= 2 x the number of queries.")
    b = _Builder(scale, seed)
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
        e, a = b.rng.choice(b.cat_events[ci]), b.rng.randrange(len(_ASPECTS))
        b.add(e, a, b.free_place(e, a), b.rng.choice(_STYLES))
    progress(f"corpus complete: {len(b.texts)} passages")
    shuffle = random.Random(f"pairs-{seed}").shuffle  # qrels order must not reveal grades
    for task in tasks:
        for qi, row in enumerate(task.counts):
            short += _judge(b, task, qi, 0, row[0])
            shuffle(task.judged[qi])
    return b, tasks, short


def _write_files(
    root: Path, b: _Builder, tasks: list[_Task], seed: int, progress: Callable[[str], None]
) -> int:
    """Write the published layout under ``root``; qrels are streamed query by query. Returns judged pairs."""
    order = list(range(len(b.texts)))
    random.Random(f"order-{seed}").shuffle(order)
    as_json = [json.dumps(t, ensure_ascii=False) for t in b.texts]
    with open(root / "corpus.jsonl", "w", encoding="utf-8", newline="\n") as fh:
        for rank, pid in enumerate(order):
            fh.write(f'{{"corpus_id": "d{rank:06d}", "text": {as_json[pid]}}}\n')
    (root / "query").mkdir()
    (root / "qrels").mkdir()
    pairs = 0
    for task in tasks:
        stem = task_file_stem(task.intent, task.category)
        prefix = f"{task.intent.value}-{task.category.value}-q"
        rows = [json.dumps({"query_id": f"{prefix}{i + 1:03d}", "user_query": q}, ensure_ascii=False)
                for i, q in enumerate(task.queries)]
        (root / "query" / f"{stem}.json").write_text("[\n" + ",\n".join(rows) + "\n]\n", encoding="utf-8")
        with open(root / "qrels" / f"{stem}_qrels.json", "w", encoding="utf-8", newline="\n") as fh:
            fh.write("[")
            first = True
            for query, judged in zip(task.queries, task.judged, strict=True):
                qj = json.dumps(query, ensure_ascii=False)
                for pid, g in judged:
                    head = "\n" if first else ",\n"
                    fh.write(f'{head}{{"user_query": {qj}, "passage": {as_json[pid]}, "score": {g}}}')
                    first = False
                pairs += len(judged)
            fh.write("\n]\n")
        progress(f"wrote {stem}")
    return pairs


def _write_marker(root: Path, scale: SampleScale, seed: int) -> None:
    """Say in the folder itself that it is synthetic, so results on it can say so (no timestamp: reproducible)."""
    marker = {"synthetic": True, "generator": "disastir_mteb.sample", "generator_version": GENERATOR_VERSION,
              "scale": scale.name, "seed": seed, "n_passages": scale.n_passages,
              "queries_per_task": scale.queries_per_task}
    (root / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")


def read_marker(folder: str | Path) -> dict[str, object] | None:
    """The provenance marker of a generated folder, or None when there is none (or it is unreadable).

    An unreadable marker still means the folder came from this generator: it counts as synthetic.
    """
    path = Path(folder).expanduser() / MARKER
    if not path.is_file():
        return None
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"synthetic": True}
    return marker if isinstance(marker, dict) else {"synthetic": True}


def _write_sample(out_dir: str | Path, scale: str | SampleScale, seed: int, overwrite: bool,
                  progress: Callable[[str], None] | None) -> tuple[Path, dict[str, int]]:
    out = Path(out_dir).expanduser().absolute()
    sc = SCALES[scale] if isinstance(scale, str) else scale
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"Refusing to write the DisastIR sample: {out} exists and is not empty.")
    say = progress or (lambda _msg: None)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        b, tasks, short = _generate(sc, seed, say)
        pairs = _write_files(tmp, b, tasks, seed, say)
        _write_marker(tmp, sc, seed)
        stats = {"passages": len(b.texts), "queries": sum(len(t.queries) for t in tasks), "pairs": pairs,
                 "shortfall": short}
        del b, tasks
        if out.exists() and any(out.iterdir()):
            if not overwrite:
                raise FileExistsError(f"Refusing to replace {out}: another process created it meanwhile.")
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            try:
                if out.exists():
                    out.rmdir()
                os.replace(tmp, out)
            except OSError as exc:  # another process renamed its copy into place first
                raise FileExistsError(f"Refusing to replace {out}: another process wrote it first.") from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out, stats


def write_sample(
    out_dir: str | Path,
    *,
    scale: str | SampleScale = "small",
    seed: int = 0,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Write a synthetic dataset in the published layout to ``out_dir`` (atomically) and return its path.

    Raises:
        FileExistsError: ``out_dir`` exists, is not empty and ``overwrite`` is False.
    """
    return _write_sample(out_dir, scale, seed, overwrite, progress)[0]


def sample_dir(scale: str = "small", *, cache_dir: str | Path | None = None, seed: int = 0) -> Path:
    """A cached synthetic dataset folder, generated on first use; concurrent callers share one copy."""
    if cache_dir is None:
        from disastir_mteb.util.cache_dir import cache_root

        cache_dir = cache_root()
    target = Path(cache_dir).expanduser() / f"sample-{scale}-seed{seed}-v{GENERATOR_VERSION}"
    if (target / "corpus.jsonl").is_file():
        return target
    try:
        return write_sample(target, scale=scale, seed=seed, overwrite=False)
    except FileExistsError:
        if (target / "corpus.jsonl").is_file():  # lost the race: the winner's copy is complete
            return target
        raise


def main(argv: list[str] | None = None) -> int:
    """``python -m disastir_mteb.benchmark.sample --scale small|full --out DIR [--seed N] [--overwrite]``."""
    parser = argparse.ArgumentParser(prog="python -m disastir_mteb.benchmark.sample", description="Synthetic DisastIR.")
    parser.add_argument("--scale", choices=sorted(SCALES), default="small")
    parser.add_argument("--out", required=True, help="target folder (absent or empty)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        out, st = _write_sample(args.out, args.scale, args.seed, args.overwrite, None)
    except FileExistsError as exc:
        parser.exit(2, f"error: {exc}\n")
    print(f"{out}: {st['passages']} passages, {st['queries']} queries, {st['pairs']} judged pairs "
          f"in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The synthetic sample's words: vocabularies, sentence templates, and the builder that writes passages.

Each passage is written for an (event, aspect, place) and a style; the builder indexes passages by those
attributes, so a passage at a given relevance level to a query's cell (``LEVELS``) is found or made
without comparing every pair. Used by :mod:`disastir_mteb.sample.plan`.
"""

from __future__ import annotations

import json
import random
import re
from array import array
from importlib.resources import files
from typing import TYPE_CHECKING

from disastir_mteb.vocabulary.taxonomy import CATEGORIES, Intent

if TYPE_CHECKING:
    from disastir_mteb.sample.scale import SampleScale

__all__ = ["ACTORS", "ASPECTS", "LEVELS", "PLACES", "QUERY_TEMPLATES", "STYLES", "STYLE_OF", "PassageBuilder",
           "resource"]

# Vocabularies: aspect -> (label, keyword phrases); places; (actor, @handle); time phrases.
ASPECTS = [
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
ASPECTS = [(label, kws.split("|")) for label, kws in ASPECTS]
PLACES = ("Manila|Dhaka|Jakarta|Lagos|Nairobi|Lima|Quito|Kathmandu|Karachi|Chennai|Osaka|Valparaiso|"
           "Port-au-Prince|Beira|Kampala|Accra|Hanoi|Cebu|Sendai|Christchurch|Naples|Izmir|Tbilisi|Almaty|"
           "Ulaanbaatar|Houston|New Orleans|Winnipeg|Oaxaca|Recife|Cape Town|Mombasa|Colombo|Yangon|Suva|"
           "Darwin|Rotterdam|Marseille|Bergen|Reykjavik").split("|")
ACTORS = [tuple(a.split("=")) for a in (
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
STYLE_OF = {Intent.QA: "passage", Intent.QAdoc: "doc", Intent.FC: "evidence", Intent.Twitter: "tweet",
             Intent.NLI: "hypothesis", Intent.STS: "paraphrase"}
STYLES = list(STYLE_OF.values())
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
QUERY_TEMPLATES = {
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
LEVELS = {"std": ("c", "e", "ea", "cell"), "sts": ("c_na", "ca", "e_np", "ep", "ea", "cell")}
_TAG_RE = re.compile(r"\s*\((?:human|animal|animal/plant|human and animal|animal and human|human, animal)\)")


def resource(*parts: str):
    """A shipped resource, read through importlib.resources so it also works from a wheel or zip."""
    node = files("disastir_mteb") / "resources"
    for part in parts:
        node = node / part
    return node


class PassageBuilder:
    """Holds the growing corpus with attribute indexes so relevance levels can be looked up without O(n^2)."""

    def __init__(self, scale: SampleScale, seed: int) -> None:
        self.rng = random.Random(f"text-{seed}")
        self.words = scale.passage_words
        raw = json.loads(resource("event_types.json").read_text(encoding="utf-8"))
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
        """The words that fill a sentence template for event ``e``, aspect ``a``, place ``p`` (and an actor)."""
        rng = self.rng
        _, name, tag, desc = self.events[e]
        k1, k2 = rng.sample(ASPECTS[a][1], 2)
        act, handle = ACTORS[rng.randrange(len(ACTORS)) if actor is None else actor]
        year = rng.randrange(1995, 2025)
        when = rng.choice(_TIMES).format(m=rng.choice(_MONTHS), y=year)
        place = PLACES[p]
        return {"ev": name, "tag": tag, "place": place, "ptag": place.replace(" ", "").replace("-", ""),
                "label": ASPECTS[a][0], "k1": k1, "k2": k2, "K1": k1[:1].upper() + k1[1:],
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
            p = self.rng.randrange(len(PLACES))
            if p != avoid and (e, a, p) not in self.cells:
                return p
        return (avoid + 1) % len(PLACES)

    def make(self, level: str, q: tuple[int, int, int, int], style: str, actor: int) -> int | None:
        """Create a new passage that sits exactly at ``level`` relative to query cell ``q``."""
        e, a, p, c = q
        rng = self.rng
        if level == "cell":
            return self.add(e, a, p, style, actor)
        other_a = rng.choice([x for x in range(len(ASPECTS)) if x != a])
        if level == "ea":
            return self.add(e, a, self.free_place(e, a, p), style)
        if level == "ep":
            free = [x for x in range(len(ASPECTS)) if x != a and (e, x, p) not in self.cells]
            return self.add(e, rng.choice(free), p, style) if free else None
        if level in ("e", "e_np"):
            return self.add(e, other_a, self.free_place(e, other_a, p), style)
        others = [x for x in self.cat_events[c] if x != e] or [e]
        e2 = rng.choice(others)
        if e2 == e:
            return None
        a2 = a if level == "ca" else (other_a if level == "c_na" else rng.randrange(len(ASPECTS)))
        return self.add(e2, a2, self.free_place(e2, a2), style)

    def matches(self, level: str, q: tuple[int, int, int, int], pid: int) -> bool:
        """Whether passage ``pid`` shares with query cell ``q`` what relevance ``level`` asks for."""
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

"""A whole build, stage by stage: documents in, a benchmark in DisastIR's layout and its report out.

Stages run in order, each printing its counts; ``until`` stops after one. Every answer a server gives is in the build
store, so the same command after a kill resumes where it stopped and writes the same bytes. Models are reached only
through the :class:`Encoders` the caller gives (the runner's, at the top of the package): this folder never runs a
retriever itself.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from disastir_mteb.building.anchors import read_anchors
from disastir_mteb.building.batch import BatchFiles, BatchPending
from disastir_mteb.building.categories import categories_by_events, categories_by_folder
from disastir_mteb.building.filters import filter_queries
from disastir_mteb.building.generation import GenerationSummary, Reader, Send, generate
from disastir_mteb.building.layout import BuiltQuery, write_layout
from disastir_mteb.building.passages import (
    Dropped,
    Passage,
    clean,
    make_passages,
    near_duplicate_passages,
    passage_id,
)
from disastir_mteb.building.pii import find_pii, redact
from disastir_mteb.building.prompts import PROMPT_VERSION, Ask, GeneratedQuery, read_summary
from disastir_mteb.building.quality import JudgedQuery, quality_control
from disastir_mteb.building.queries import PlannedQuery, WrittenQuery, plan_queries, summary_asks, write_queries
from disastir_mteb.building.report import render_report
from disastir_mteb.building.sources import MAX_SOURCE_MB, Source, SourceText, read_sources
from disastir_mteb.building.stages import CONCURRENCY, STAGES
from disastir_mteb.building.store import BuildStore
from disastir_mteb.endpoints.pool import DEFAULT_KEY_ENV, DEFAULT_TIMEOUT, EndpointPool
from disastir_mteb.judging.job import CHARS_PER_TOKEN, JobPlan, Price, judge_pairs, plan_job
from disastir_mteb.judging.protocol import PROMPT_VERSION as JUDGE_PROMPT_VERSION
from disastir_mteb.judging.protocol import requests_per_pair
from disastir_mteb.judging.store import JudgementStore, Pair
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.util.progress import progress_bar
from disastir_mteb.vocabulary.taxonomy import Category, Intent, parse_category

__all__ = ["BuildSettings", "Encoders", "run_build"]

#: Passages per pool member and search kind, as DisastIR pooled (the top 10).
POOL_DEPTH = 10


class Encoders(Protocol):
    """What a build needs of retrievers, given by the caller (the runner's models)."""

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``, one row each (near-duplicate passages, event-type categories)."""

    def pool(self, layout: Path) -> dict[str, list[str]]:
        """Query id -> passage ids: the union of the top 10 of every pool model, exact and ANN, on ``layout``."""

    def count_tokens(self, text: str) -> int:
        """A text's tokens as the pool's tokenizer counts them (chunks stay under 256)."""


@dataclass(frozen=True)
class BuildSettings:
    """Everything a build's output depends on, and how it reaches its servers."""

    docs: Path
    out: Path
    name: str
    model: str
    base_urls: tuple[str, ...]
    judge_model: str
    judge_urls: tuple[str, ...]
    pool_models: tuple[str, ...]
    intents: tuple[Intent, ...]
    queries_per_task: int = 50
    categories: str = "folder"
    seed: int = 0
    licence: str | None = None
    redact: bool = False
    price: Price | None = None
    until: str = "write"
    yes: bool = False
    quality: bool = True
    min_logprob: float | None = None
    max_file_mb: float = MAX_SOURCE_MB
    anchors: Path | None = None
    concurrency: int = CONCURRENCY
    timeout: float = DEFAULT_TIMEOUT
    api_key_env: str = DEFAULT_KEY_ENV
    confirm_above: int = 2000
    store: Path | None = None
    progress: bool = True
    batch_requests: Path | None = None  # ask through Batch API files (written here) instead of servers
    batch_results: Path | None = None  # the last round's output file, read into the store first

    @property
    def bars(self) -> bool:
        """Whether requests are counted on progress bars: shown, and sent to servers (a batch round answers at once)."""
        return self.progress and self.batch_requests is None

    @property
    def store_path(self) -> Path:
        """The build store: ``--store``, or ``<out>.build.sqlite`` beside the benchmark."""
        return self.store if self.store is not None else self.out.with_name(self.out.name + ".build.sqlite")


@dataclass
class BuildReport:
    """Counts per stage and per drop reason, grades per task, cost: what ``report.json`` holds."""

    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)


def _say(say: Callable[[str], None], stage: str, counts: Mapping[str, Any]) -> None:
    shown = ", ".join(f"{key.replace('_', ' ')} {value:,}" if isinstance(value, int) and not isinstance(value, bool)
                      else f"{key.replace('_', ' ')}: {'yes' if value is True else 'no' if value is False else value}"
                      for key, value in counts.items())
    say(f"[{stage}] {shown}")


def run_build(settings: BuildSettings, encoders: Encoders, *, say: Callable[[str], None],
              confirm: Callable[[str, int], bool]) -> Path | None:
    """Run the stages up to ``settings.until``; the benchmark's folder once written (None when stopped before).

    ``confirm(plan, requests)`` is asked when the plan's requests are above ``settings.confirm_above`` and
    ``settings.yes`` is False. Through Batch API files, a round's request file written is a stop too (said).

    Raises:
        ValueError: bad input (one sentence naming the file or option), or the plan not confirmed.
        EndpointError: a server fault retrying cannot mend (every answer received is kept).
    """
    try:
        return _stages(settings, encoders, say=say, confirm=confirm)
    except BatchPending as pending:
        say(str(pending))
        return None


def _stages(settings: BuildSettings, encoders: Encoders, *, say: Callable[[str], None],
            confirm: Callable[[str, int], bool]) -> Path | None:
    report = BuildReport()
    stop = STAGES.index(settings.until)

    sources, texts, skipped = read_sources(settings.docs, licence=settings.licence, max_mb=settings.max_file_mb)
    pii = Counter()
    for text in texts:
        pii.update(find_pii(text.text))
    if settings.redact:
        texts = [SourceText(t.source, redact(t.text), t.kind, t.category) for t in texts]
    report.stages["ingest"] = {"sources": len(sources), "texts": len(texts), "skipped_files": sum(skipped.values()),
                               "personal_details": sum(pii.values()), **{f"pii_{k}": v for k, v in sorted(pii.items())},
                               "redacted": settings.redact}
    _say(say, "ingest", report.stages["ingest"])
    if stop == 0:
        return None

    passages, dropped = make_passages(texts, encoders.count_tokens)
    vectors = encoders.embed([p.text for p in passages]) if passages else np.zeros((0, 1), dtype=np.float32)
    copies = near_duplicate_passages(vectors)
    dropped += [Dropped(passages[row].source, "near-duplicate-passage", passages[kept].source)
                for row, kept in sorted(copies.items())]
    passages = [p for row, p in enumerate(passages) if row not in copies]
    if not passages:
        raise InvalidInput(f"{settings.docs} holds no text left after cleaning and deduplication; add documents.")
    report.stages["passages"] = {"passages": len(passages), **Counter(d.reason for d in dropped)}
    _say(say, "passages", report.stages["passages"])
    if stop == 1:
        return None

    kept_rows = [row for row in range(len(vectors)) if row not in copies]
    categories = _categories(settings, passages, vectors[kept_rows], encoders)
    report.stages["categories"] = {c.value: n for c, n in sorted(Counter(categories).items())}
    _say(say, "categories", report.stages["categories"])
    if stop == 2:
        return None

    seeded = _seeded_documents(texts, passages, categories) if Intent.QAdoc in settings.intents else []
    # the plan as it is when every summary is readable (an upper bound), printed and confirmed before any request
    stand_ins = [Passage(passage_id(document.text), document.text, document.source, document.category, "document")
                 for document, _ in seeded]
    _confirm(settings, plan_queries(passages, categories, intents=settings.intents,
                                    per_task=settings.queries_per_task, seed=settings.seed, summaries=stand_ins,
                                    summary_categories=[category for _, category in seeded]),
             len(seeded), say, confirm)
    summaries: list[Passage] = []
    summary_categories: list[Category] = []
    batch = BatchFiles(settings.batch_requests, settings.batch_results) if settings.batch_requests else None
    with BuildStore(settings.store_path) as store:
        send = _sender(settings, store, batch)
        if seeded:
            summaries, summary_categories = _summaries(settings, send, seeded)
        plan = plan_queries(passages, categories, intents=settings.intents, per_task=settings.queries_per_task,
                            seed=settings.seed, summaries=summaries, summary_categories=summary_categories)
        with _Bars(settings.bars) as bars:
            written, _ = write_queries(plan, store, send, model=settings.model, progress=bars.advance)
        counts = store.counts()
    report.stages["queries"] = {"planned": len(plan), "written": sum(w.written is not None for w in written),
                                **{f"{stage}_requests": c["tries"] for stage, c in sorted(counts.items())},
                                "prompt_tokens": sum(c["prompt_tokens"] for c in counts.values()),
                                "completion_tokens": sum(c["completion_tokens"] for c in counts.values())}
    _say(say, "queries", report.stages["queries"])
    if stop == 3:
        return None

    verdicts, drops = filter_queries(written, min_logprob=settings.min_logprob)
    kept = [v.query for v in verdicts if v.dropped is None]
    report.stages["filters"] = {"kept": len(kept), **drops}
    _say(say, "filters", report.stages["filters"])
    if stop == 4:
        return None

    anchors = _anchors(settings)
    if anchors:
        report.stages["filters"]["anchor_queries"] = len(anchors)
    if not kept and not anchors:
        raise _nothing_kept(settings, report)
    corpus = _corpus(passages, summaries, kept + anchors)
    ids = {_query_id(q.plan): q for q in kept + anchors}
    provisional = settings.store_path.with_name(settings.store_path.name + ".pool")
    write_layout(provisional, list(corpus.items()), _provisional_tasks(kept + anchors, corpus),
                 {"name": settings.name, "provisional": True})
    pooled = encoders.pool(provisional)
    report.stages["pool"] = {"models": len(settings.pool_models), "queries": len(pooled),
                             "pairs": sum(len(v) for v in pooled.values())}
    _say(say, "pool", report.stages["pool"])
    if stop == 5:
        return None

    by_text = {text: pid for pid, text in corpus.items()}
    pairs = {}
    for query in ids.values():
        for text in _pair_texts(query, pooled, corpus):
            pair = Pair(query.plan.intent, query.written.query, text, settings.judge_model)
            pairs[pair.key] = pair
    with JudgementStore(settings.store_path) as judge_store:
        job = plan_job(list(pairs.values()), judge_store)
        say(f"[judge] {job.describe(settings.price)}")
        if batch is not None:
            batch.judge(list(pairs.values()), judge_store, judge_model=settings.judge_model)
        else:
            with _Bars(settings.bars) as bars:
                judge_pairs(list(pairs.values()), judge_store, _pool(settings.judge_urls, settings),
                            judge_model=settings.judge_model, progress=bars.counter("judge", job.to_judge))
        grades = {(j.query, j.passage): j.grade for j in judge_store.judgements(judge_model=settings.judge_model,
                                                                                 prompt_version=JUDGE_PROMPT_VERSION)}
        stored = judge_store.counts()  # what the store holds, so a resumed build reports as an uninterrupted one
        judge_tokens = judge_store.tokens()
    graded = sum(grades.get((pair.query, pair.passage)) is not None for pair in pairs.values())
    report.stages["judge"] = {"pairs": len(pairs), "judged": graded, "failed": len(pairs) - graded,
                              "requests": stored["answers"], "unreadable": stored["unparseable"]
                              + stored["out_of_range"]}
    _say(say, "judge", report.stages["judge"])
    if stop == 6:
        return None

    judged = [JudgedQuery(q.plan.intent, q.plan.seed.text, q.written.passage,
                          {text: grades.get((q.written.query, text)) for text in _pair_texts(q, pooled, corpus)})
              for q in ids.values()]
    qc, qc_drops = quality_control(judged, enabled=settings.quality)
    qc = [None if query.plan.anchor else verdict for query, verdict in zip(ids.values(), qc, strict=True)]
    qc_drops = Counter(verdict for verdict in qc if verdict is not None)  # the organisation's questions all stay
    report.stages["quality"] = {"kept": qc.count(None), **qc_drops, "enabled": settings.quality}
    _say(say, "quality", report.stages["quality"])
    if stop == 7:
        return None

    tasks = _final_tasks(settings, list(ids.values()), judged, qc, by_text, anchor=False)
    planned = sorted({(p.intent, p.category) for p in plan}, key=lambda task: (task[0].value, task[1].value))
    for intent, category in planned:  # every planned task, a task left empty included: never a silent zero
        name = f"{settings.name}-{intent.value}-{category.value}"
        report.tasks[name] = _task_report(settings, tasks.get((intent, category), []), kept)
        if report.tasks[name]["shortfall"]:
            say(f"[write] {name}: {report.tasks[name]['queries']} of {settings.queries_per_task} queries kept "
                f"(shortfall {report.tasks[name]['shortfall']}; the drops per reason are in the report)")
    if not tasks:
        raise _nothing_kept(settings, report)
    marker = _marker(settings, sources, tasks)
    write_layout(settings.out, list(corpus.items()), tasks, marker)
    tokens = (report.stages["queries"]["prompt_tokens"] + judge_tokens[0],
              report.stages["queries"]["completion_tokens"] + judge_tokens[1])
    requests = report.stages["judge"]["requests"] + sum(value for key, value in report.stages["queries"].items()
                                                        if key.endswith("_requests"))
    price = settings.price
    cost = {"requests": requests, "prompt_tokens": tokens[0], "completion_tokens": tokens[1],
            "dollars": None if price is None else round((tokens[0] * price.input + tokens[1] * price.output) / 1e6, 4)}
    content = {"stages": report.stages, "tasks": report.tasks, "cost": cost}
    (settings.out / "report.json").write_text(json.dumps(content, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    (settings.out / "report.md").write_text(render_report(settings.name, content), encoding="utf-8")
    shutil.rmtree(provisional, ignore_errors=True)  # the pool's layout: made again from the store when needed
    say(f"[write] {settings.out}: {len(tasks)} task(s), {sum(len(q) for q in tasks.values())} queries, "
        f"{len(corpus)} passages")
    if anchors:
        anchor_tasks = _final_tasks(settings, list(ids.values()), judged, qc, by_text, anchor=True)
        anchor_out = settings.out.with_name(settings.out.name + "-anchor")
        write_layout(anchor_out, list(corpus.items()), anchor_tasks,
                     {**_marker(settings, sources, anchor_tasks, name=f"{settings.name}-Anchor"),
                      "anchor_of": settings.name})
        say(f"[write] {anchor_out}: the {len(anchors)} anchor queries, pooled and judged alike, in "
            f"{len(anchor_tasks)} task(s): compare with disastir-mteb build-study --reference {anchor_out} --built "
            f"{settings.out} --models ...")
    return settings.out


class _Bars:
    """One progress bar per stage of requests, made when the stage's first answer comes (none when not ``shown``)."""

    def __init__(self, shown: bool) -> None:
        self.shown = shown
        self.bars: dict[str, Any] = {}

    def __enter__(self) -> _Bars:
        return self

    def __exit__(self, *exc: object) -> None:
        for bar in self.bars.values():
            bar.close()

    def advance(self, stage: str, done: int, total: int) -> None:
        """``done`` of ``total`` requests of ``stage`` answered (or found in the store)."""
        if not self.shown:
            return
        if stage not in self.bars:
            self.bars[stage] = progress_bar(total=total, desc=f"[{_STAGE_OF.get(stage, stage)}] {stage} requests",
                                            unit="req")
        bar = self.bars[stage]
        bar.update(done - bar.n)

    def counter(self, stage: str, total: int) -> Callable[[int], None]:
        """A callback advancing ``stage``'s bar by its argument."""
        done = 0

        def step(count: int) -> None:
            nonlocal done
            done += count
            self.advance(stage, done, total)

        return step


#: The build stage each stage of requests belongs to, for its bar's label.
_STAGE_OF = {"summary": "queries", "need": "queries", "query": "queries", "judge": "judge"}


def _nothing_kept(settings: BuildSettings, report: BuildReport) -> InvalidInput:
    """The one sentence for a build whose every query was dropped: where they went, where the answers are."""
    drops = "; ".join(f"{stage}: {report.stages[stage]}" for stage in ("filters", "quality") if stage in report.stages)
    return InvalidInput(f"No query was kept for any task ({drops}), so no benchmark was written; every answer is kept "
                        f"in {settings.store_path}: check the generation model's answers there (a model too small to "
                        "follow the prompts writes unreadable or cut-off answers), or pass --no-quality-control.")


def _pool(urls: Sequence[str], settings: BuildSettings) -> EndpointPool[Any, Any]:
    return EndpointPool(list(urls), concurrency=settings.concurrency, key_env=settings.api_key_env,
                        timeout=settings.timeout)


def _categories(settings: BuildSettings, passages: list[Passage], vectors: np.ndarray,
                encoders: Encoders) -> list[Category]:
    """Each passage's category as ``--categories`` says; ``vectors`` are the passages' own (no second encoding)."""
    choice = settings.categories
    if choice == "folder":
        return categories_by_folder(passages)
    if choice == "events":
        return categories_by_events(vectors, encoders.embed)
    if choice.startswith("one:"):
        return categories_by_folder(passages, one=parse_category(choice.removeprefix("one:")))
    raise InvalidInput(f"--categories {choice!r}: expected folder, events or one:<category> (one:MH, say).")


def _seeded_documents(texts: Sequence[SourceText], passages: list[Passage],
                      categories: list[Category]) -> list[tuple[SourceText, Category]]:
    """The documents QAdoc's summaries are written for (those with a passage left), each with its passages' category.

    A document whose passages fell in several categories takes the one most of them have.
    """
    of_source: dict[str, Counter[Category]] = {}
    for passage, category in zip(passages, categories, strict=True):
        of_source.setdefault(passage.source, Counter())[category] += 1
    return [(text, of_source[text.source].most_common(1)[0][0]) for text in texts
            if text.kind == "document" and text.source in of_source]


def _sender(settings: BuildSettings, store: BuildStore, batch: BatchFiles | None) -> Send:
    """How the generation model is asked: its servers, a pool per stage, or Batch API files (``--batch-requests``)."""
    def send(asks: Sequence[Ask], read: Reader, progress: Callable[[int], None] | None,
             ) -> tuple[dict[str, Any], GenerationSummary]:
        if batch is not None:
            return batch.generate(asks, store, model=settings.model, read=read, progress=progress)
        return generate(asks, store, _pool(settings.base_urls, settings), model=settings.model, read=read,
                        progress=progress)

    return send


def _summaries(settings: BuildSettings, send: Send, seeded: list[tuple[SourceText, Category]],
               ) -> tuple[list[Passage], list[Category]]:
    """QAdoc's seeds: the readable summaries of ``seeded``, with their documents' categories."""
    asks = summary_asks(settings.model, [document.text for document, _ in seeded])
    with _Bars(settings.bars) as bars:
        values, _ = send(asks, lambda ask, text: read_summary(text), bars.counter("summary", len(asks)))
    made, made_categories = [], []
    for (document, category), ask in zip(seeded, asks, strict=True):
        if ask.key in values:
            text = values[ask.key]
            made.append(Passage(passage_id(text), text, document.source, document.category, "document"))
            made_categories.append(category)
    return made, made_categories


def _confirm(settings: BuildSettings, plan: Sequence[PlannedQuery], summaries: int, say: Callable[[str], None],
             confirm: Callable[[str, int], bool]) -> None:
    """Print what generating and judging will cost before anything is sent; ask above the thresholds."""
    needs = len({(p.intent, p.seed.text) for p in plan}) + summaries  # a summary is one more writer request
    pairs = len(plan) * (POOL_DEPTH * max(1, len(settings.pool_models)) + 2)
    judge = sum(requests_per_pair(p.intent) for p in plan) * (POOL_DEPTH * max(1, len(settings.pool_models)) + 2)
    prompt = sum(len(p.seed.text) for p in plan) * 2 // CHARS_PER_TOKEN
    plan_text = (f"Plan: {needs:,} information-need{' and summary' if summaries else ''} and {len(plan):,} query "
                 f"request(s) to {settings.model} (about "
                 f"{prompt:,} prompt tokens), then about {pairs:,} pairs and {judge:,} judge request(s) to "
                 f"{settings.judge_model} (estimated from a pool of {len(settings.pool_models)} model(s))")
    requests = needs + len(plan) + judge
    cost = JobPlan(pairs, 0, pairs, requests, prompt + judge * 300, (needs + len(plan)) * 300
                   + judge * 12).cost(settings.price)
    say(plan_text + (f"; about ${cost:,.2f}." if cost is not None else "; give --price IN,OUT for a cost."))
    if requests > settings.confirm_above and not settings.yes and not confirm(plan_text, requests):
        raise InvalidInput("The build was not confirmed; nothing was sent. Pass --yes to build without asking.")


def _query_id(plan: PlannedQuery) -> str:
    return f"{'anchor-' if plan.anchor else ''}{plan.intent.value}-{plan.category.value}-q{plan.index + 1:03d}"


def _anchors(settings: BuildSettings) -> list[WrittenQuery]:
    """The organisation's questions as written queries: their passage is their seed, no passage is generated."""
    if settings.anchors is None:
        return []
    one = parse_category(settings.categories.removeprefix("one:")) if settings.categories.startswith("one:") \
        else None
    written, counts = [], Counter()
    for anchor in read_anchors(settings.anchors, one=one):
        index = counts[anchor.intent, anchor.category]
        counts[anchor.intent, anchor.category] += 1
        seed = Passage(passage_id(clean(anchor.passage)), clean(anchor.passage), str(settings.anchors),
                       anchor.category.value, "document")
        written.append(WrittenQuery(PlannedQuery(anchor.intent, anchor.category, index, seed, {}, 0, anchor=True),
                                    None, GeneratedQuery(anchor.query, None), None))
    return written


def _corpus(passages: list[Passage], summaries: list[Passage], kept: Sequence[Any]) -> dict[str, str]:
    """Passage id -> text: the documents' passages, QAdoc's summaries, then the passages written with the queries."""
    corpus = {p.id: p.text for p in passages}
    corpus.update((p.id, p.text) for p in summaries)
    known = set(corpus.values())
    for query in kept:
        if query.plan.anchor and query.plan.seed.text not in known:
            corpus[query.plan.seed.id] = query.plan.seed.text
            known.add(query.plan.seed.text)
        if query.written.passage and query.written.passage not in known:
            corpus["g" + passage_id(query.written.passage)[1:]] = query.written.passage
            known.add(query.written.passage)
    return corpus


def _provisional_tasks(kept: Sequence[Any], corpus: Mapping[str, str]) -> dict[tuple[Intent, Category],
                                                                               list[BuiltQuery]]:
    """The kept queries with their own passages as stand-in judgements (the loader keeps only judged queries)."""
    tasks: dict[tuple[Intent, Category], list[BuiltQuery]] = {}
    for query in kept:
        tasks.setdefault((query.plan.intent, query.plan.category), []).append(
            BuiltQuery(_query_id(query.plan), query.written.query, [(text, 1) for text in _own_passages(query)]))
    return tasks


def _own_passages(query: WrittenQuery) -> list[str]:
    """A query's seed passage and, where one was written with it, its generated passage."""
    return [query.plan.seed.text] + ([query.written.passage] if query.written.passage else [])


def _pair_texts(query: WrittenQuery, pooled: Mapping[str, list[str]], corpus: Mapping[str, str]) -> list[str]:
    """The passages a query is judged against: its own, then the pool's, each once."""
    return list(dict.fromkeys(_own_passages(query) + [corpus[pid] for pid in pooled.get(_query_id(query.plan), [])]))


def _final_tasks(settings: BuildSettings, queries: list[Any], judged: list[JudgedQuery], qc: list[str | None],
                 by_text: Mapping[str, str], *, anchor: bool) -> dict[tuple[Intent, Category], list[BuiltQuery]]:
    """Per task, the first ``queries_per_task`` queries kept, in plan order, with their graded pairs.

    ``anchor``: the organisation's questions instead, every one of them.
    """
    tasks: dict[tuple[Intent, Category], list[BuiltQuery]] = {}
    for query, grades, verdict in zip(queries, judged, qc, strict=True):
        if query.plan.anchor is not anchor:
            continue
        task = tasks.setdefault((query.plan.intent, query.plan.category), [])
        if verdict is not None or (not anchor and len(task) >= settings.queries_per_task):
            continue
        pairs = [(text, grade) for text, grade in grades.grades.items() if grade is not None and text in by_text]
        task.append(BuiltQuery(_query_id(query.plan), query.written.query, pairs))
    return {task: queries for task, queries in tasks.items() if queries}


def _task_report(settings: BuildSettings, queries: list[BuiltQuery], kept: Sequence[Any]) -> dict[str, Any]:
    """A task's line of the report: queries (and the shortfall), pairs, grades, generated share of the top grade."""
    top = max(grade for q in queries for _, grade in q.judged) if any(q.judged for q in queries) else None
    generated = {q.written.passage for q in kept if q.written.passage}
    top_pairs = [(text, grade) for q in queries for text, grade in q.judged if grade == top]
    lengths = [len(q.text.split()) for q in queries]
    return {"queries": len(queries), "shortfall": max(0, settings.queries_per_task - len(queries)),
            "pairs": sum(len(q.judged) for q in queries),
            "grades": dict(sorted(Counter(str(math.floor(g)) for q in queries for _, g in q.judged).items())),
            "generated_share_of_top_grade": round(sum(t in generated for t, _ in top_pairs) / len(top_pairs), 4)
            if top_pairs else None,
            "query_words_mean": round(statistics.fmean(lengths), 2) if lengths else None,
            "query_words_median": statistics.median(lengths) if lengths else None}


def _marker(settings: BuildSettings, sources: list[Source], tasks: Mapping[tuple[Intent, Category], Any], *,
            name: str | None = None) -> dict[str, Any]:
    name = name or settings.name
    return {"name": name, "seed": settings.seed, "query_prompts": PROMPT_VERSION,
            "judge_prompts": JUDGE_PROMPT_VERSION, "generator_model": settings.model,
            "judge_model": settings.judge_model, "pool_models": list(settings.pool_models),
            "queries_per_task": settings.queries_per_task, "quality_control": settings.quality,
            "tasks": sorted(f"{name}-{i.value}-{c.value}" for i, c in tasks),
            "sources": [{"path": s.path, "sha256": s.digest, "licence": s.licence} for s in sources]}


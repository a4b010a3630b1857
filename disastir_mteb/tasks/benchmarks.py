"""The DisastIR benchmarks as mteb ``Benchmark`` values: ``DisastIR``, one per intent, ``DisastIR-Test``, ``-DevLite``.

The three 48-task benchmarks are grouped by intent and by category, as the authors average (queries -> task ->
categories per intent -> intents).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from disastir_mteb.tasks.retrieval import get_tasks
from disastir_mteb.vocabulary.metadata import CITATION, DATASET, DEVLITE, INTENTS_METADATA
from disastir_mteb.vocabulary.taxonomy import (
    BENCHMARK_NAMES,
    CATEGORY_FULL_NAMES,
    Category,
    Intent,
    Split,
    benchmark_name,
    intent_benchmark_name,
)

if TYPE_CHECKING:
    from mteb import Benchmark

__all__ = ["benchmarks"]


def _aggregations(split: Split) -> tuple[Any, ...]:
    """Mean over tasks, and the Intent and Category groupings (the authors' averages) of one split's 48 tasks."""
    from mteb.benchmarks.benchmark import BenchmarkAggregation, CustomGroup, CustomGrouping

    by_intent = CustomGrouping(name="Intent", groups=tuple(
        CustomGroup(label=i.value, tasks=tuple(get_tasks(intents=[i], split=split))) for i in Intent))
    by_category = CustomGrouping(name="Category", groups=tuple(
        CustomGroup(label=CATEGORY_FULL_NAMES[c], tasks=tuple(get_tasks(categories=[c], split=split)))
        for c in Category))
    return (BenchmarkAggregation.MEAN_TASK, by_intent, by_category)


@cache
def benchmarks() -> tuple[Benchmark, ...]:
    """``DisastIR`` (all 48, grouped by intent and by category), one per intent, ``DisastIR-Test``, ``-DevLite``."""
    from mteb import Benchmark

    description = ("DisastIR: 48 disaster-management retrieval tasks (6 search intents x 8 UNDRR disaster "
                   f"categories) over one shared corpus of {DATASET['corpus_size']:,} passages, scored with the "
                   "authors' exponential-gain NDCG@10; the overall score is the mean of the 6 intent means.")
    full = Benchmark(
        name="DisastIR",
        display_name="DisastIR (disaster management)",
        tasks=tuple(get_tasks()),
        description=description,
        reference=DATASET["reference"],
        citation=CITATION,
        aggregations=_aggregations(Split.full),
    )
    per_intent = tuple(
        Benchmark(
            name=intent_benchmark_name(intent),
            tasks=tuple(get_tasks([intent])),
            description=f"The 8 DisastIR {INTENTS_METADATA[intent.value]['title']} tasks, one per disaster category.",
            reference=DATASET["reference"],
            citation=CITATION,
        )
        for intent in Intent
    )
    which = {Split.test: f"the {DEVLITE['test_queries']:,} queries outside DevLite over the full corpus of "
                         f"{DATASET['corpus_size']:,} passages (DMRetriever's test set)",
             Split.devlite: f"{DEVLITE['devlite_queries']} queries ({DEVLITE['devlite_queries_per_task']} per task) "
                            f"over a pooled corpus of {DEVLITE['devlite_corpus_size']:,} passages (DMRetriever's "
                            "development set)"}
    splits = tuple(
        Benchmark(
            name=benchmark_name(split),
            display_name=f"{benchmark_name(split)} (disaster management, DMRetriever split)",
            tasks=tuple(get_tasks(split=split)),
            description=(f"{benchmark_name(split)}: the 48 DisastIR tasks on {which[split]}; exponential-gain "
                         "NDCG@10, overall score the mean of the 6 intent means."),
            reference=DEVLITE["reference"],
            citation=CITATION,
            aggregations=_aggregations(split),
        )
        for split in (Split.test, Split.devlite)
    )
    built = (full, *per_intent, *splits)
    if tuple(benchmark.name for benchmark in built) != BENCHMARK_NAMES:  # pragma: no cover - one list of names
        raise RuntimeError(f"The benchmarks built {[b.name for b in built]} are not BENCHMARK_NAMES.")
    return built

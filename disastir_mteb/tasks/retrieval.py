"""The 48 DisastIR tasks (and their DisastIR-Test and DevLite versions) as mteb ``AbsTaskRetrieval`` classes.

Every fact about the tasks lives as data in ``task_metadata/``; :func:`make_task_class` makes a validated
``TaskMetadata`` and a class bound into this module, so ``repr``, pickling and ``grep`` behave as for hand-written
classes. No class has its own ``load_data``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from functools import cache, partial
from pathlib import Path
from typing import Any

from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.languages import check_language_code
from mteb.timing import TimingStack
from pydantic import PrivateAttr

from disastir_mteb.data.data_cache import source_digest
from disastir_mteb.data.devlite import cached_split_files, load_split_task
from disastir_mteb.data.extra_qrels import describe_judges, extra_qrels_file
from disastir_mteb.data.published import (
    GAINS,
    Gain,
    LoadReport,
    TaskFiles,
    default_gain,
    find_task_files,
    grade_to_gain,
)
from disastir_mteb.data.source import DataSource
from disastir_mteb.data.task_cache import load_cached_task
from disastir_mteb.scoring.authors import TOP_K, RunScores, key_by_text, ranking, score_run
from disastir_mteb.util.digest import short_digest
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.metadata import (
    CATEGORIES_METADATA,
    CITATION,
    DATASET,
    DATASET_REPO,
    DATASET_REVISION,
    DEVLITE,
    DEVLITE_REPO,
    DEVLITE_REVISION,
    INTENTS_METADATA,
    K_VALUES,
    MAIN_SCORE_KEY,
    metadata_dir,
)
from disastir_mteb.vocabulary.provenance import RunProvenance, TaskProvenance
from disastir_mteb.vocabulary.task_record import extended_data, task_record
from disastir_mteb.vocabulary.taxonomy import (
    SPLIT_LABELS,
    SPLIT_TASK_SPECS,
    TASK_SPECS,
    Category,
    Intent,
    Split,
    TaskSpec,
    parse_category,
    parse_intent,
)

logger = logging.getLogger(__name__)
#: Load reports and scores of the tasks, under mteb's logger: `mteb run -v 2` (its default) shows them, `-v 1` not.
mteb_logger = logging.getLogger("mteb.disastir")

__all__ = [
    "ALL_TASK_CLASSES",
    "SPLIT_TASK_CLASSES",
    "TASK_CLASSES",
    "AbsTaskDisastIR",
    "DisastIRTaskMetadata",
    "forget_data_files",
    "get_tasks",
    "make_task_class",
]


class DisastIRTaskMetadata(TaskMetadata):
    """mteb's ``TaskMetadata`` with descriptive statistics read from this package, not mteb's folder."""

    _stats_path: Path | None = PrivateAttr(default=None)

    @property
    def descriptive_stat_path(self) -> Path:
        """``task_metadata/descriptive_stats/<task>.json`` (paper figures until recomputed on real data)."""
        if self._stats_path is not None:
            return self._stats_path
        return metadata_dir() / "descriptive_stats" / f"{self.name}.json"

    def with_statistics_at(self, path: Path) -> DisastIRTaskMetadata:
        """A copy whose statistics file is ``path``: where mteb's public ``calculate_descriptive_statistics`` writes."""
        copy = self.model_copy()
        copy._stats_path = Path(path)
        return copy


def _description(spec: TaskSpec) -> str:
    intent, category = INTENTS_METADATA[spec.intent.value], CATEGORIES_METADATA[spec.category.value]
    what = (f"{intent['title']}, {category['full_name']} disasters ({category['examples']}). "
            f"{intent['description']} {intent['relevance']}")
    if spec.split is Split.full:
        return (
            f"DisastIR {what} One of 48 DisastIR tasks (6 search intents x 8 "
            f"disaster categories) searching one shared corpus of {DATASET['corpus_size']:,} disaster-management "
            "passages; NDCG@10 uses the authors' exponential gain 2^grade - 1."
        )
    if spec.split is Split.test:
        which = (f"DisastIR-Test query set (DMRetriever): the {DEVLITE['test_queries_per_task']} queries of "
                 f"{spec.base.name} outside DisastIR-DevLite ({DEVLITE['test_queries']:,} in all), searching the full "
                 f"shared corpus of {DATASET['corpus_size']:,} passages")
    else:
        which = (f"DisastIR-DevLite query set (DMRetriever's development set): {DEVLITE['devlite_queries_per_task']} "
                 f"of the {DATASET['queries_per_task']} queries of {spec.base.name} ({DEVLITE['devlite_queries']} "
                 f"in all), searching DevLite's pooled corpus of {DEVLITE['devlite_corpus_size']:,} passages; its "
                 "scores are not comparable with the full task's")
    return f"DisastIR-{SPLIT_LABELS[spec.split]} {what} The {which}; NDCG@10 uses the exponential gain 2^grade - 1."


def _built_description(spec: TaskSpec) -> str:
    intent, category = INTENTS_METADATA[spec.intent.value], CATEGORIES_METADATA[spec.category.value]
    return (f"{spec.built}: a built benchmark, not DisastIR's data: an organisation's documents turned into DisastIR's "
            f"layout by disastir-mteb build, its queries and judgements generated. {intent['title']}, "
            f"{category['full_name']} disasters. {intent['description']} {intent['relevance']} Scored as DisastIR "
            "scores: the same metrics and per-intent instruction, NDCG@10 with the exponential gain 2^grade - 1.")


#: The dataset path a built benchmark's tasks name: a local folder, never a dataset on the Hub.
BUILT_DATASET_PATH = "local/disastir-mteb-built/{name}"


def build_metadata(spec: TaskSpec, *, revision: str | None = None) -> DisastIRTaskMetadata:
    """The complete, validated ``TaskMetadata`` of one task; ``revision``: a built task's (its folder's marker digest).

    A built task (``spec.built``) names no reference and a local dataset path; the rest is DisastIR's scoring.
    """
    intent = INTENTS_METADATA[spec.intent.value]
    full, devlite = spec.split is Split.full, spec.split is Split.devlite
    built = spec.built is not None
    split_only: dict[str, Any] = {} if full else {"adapted_from": [spec.base.name]}  # full: unset (pinned metadata)
    if built:
        dataset = {"path": BUILT_DATASET_PATH.format(name=spec.built), "revision": revision or "unknown"}
    elif devlite:
        dataset = {"path": DEVLITE_REPO, "revision": DEVLITE_REVISION}
    else:
        dataset = {"path": DATASET_REPO, "revision": DATASET_REVISION}
    metadata = DisastIRTaskMetadata(
        name=spec.name,
        description=_built_description(spec) if built else _description(spec),
        reference=None if built else DATASET["reference"] if full else DEVLITE["reference"],
        dataset=dataset,
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=list(DATASET["eval_splits"]),
        eval_langs=list(DATASET["eval_langs"]),
        main_score=MAIN_SCORE_KEY,
        date=None if built else tuple(DATASET["date"]),
        domains=list(intent["domains"]),
        task_subtypes=list(intent["task_subtypes"]),
        license="not specified" if built else DATASET["license"],
        annotations_creators=DATASET["annotations_creators"],
        dialect=list(DATASET["dialect"]),
        sample_creation="created" if built else DATASET["sample_creation"],
        bibtex_citation=CITATION,
        prompt={"query": intent["instruction"]},
        **split_only,
    )
    for code in metadata.eval_langs:  # what mteb's own check of a TaskMetadata asks, which construction skips
        check_language_code(code)
    return metadata


@cache
def _task_files(folder: Path) -> TaskFiles:
    """Find and place the data files of ``folder`` once per process."""
    return find_task_files(folder)


def forget_data_files() -> None:
    """Find the data files afresh at the next load: after a data folder's files were replaced in place.

    The lookup walks the folder, so it is done once per process and folder.
    """
    _task_files.cache_clear()


#: mteb stores its mean NDCG and recall rounded to 5 decimals (``parse_metrics_from_scores``); a text-keyed number
#: stored under the same key is rounded alike, so the file reads the same however the key was computed.
_MTEB_DECIMALS = 5


class AbsTaskDisastIR(AbsTaskRetrieval):
    """Base of the DisastIR tasks: loads the published layout, scores like the authors.

    Args:
        gain: ``"exponential"`` (the default, or ``DISASTIR_GAIN``): qrels values 2^grade - 1, so ``ndcg_at_10`` is
            the authors' NDCG@10; ``"linear"``: the raw grades. Both variants are always reported by name too.
        data: the data folders to read; None: those the environment names when the task loads (what ``mteb run``,
            which builds tasks itself, gets).
        **kwargs: passed to ``AbsTaskRetrieval``.
    """

    spec: TaskSpec
    #: A built task's folder (``disastir-mteb build``'s output), read when no data is given; None for DisastIR's.
    built_folder: Path | None = None
    k_values = K_VALUES
    load_report: LoadReport | None = None
    data_source: str | None = None
    data_digest: str | None = None
    corpus_digest: str | None = None

    def __init__(self, gain: Gain | None = None, data: DataSource | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gain: Gain = gain if gain is not None else default_gain()
        if self.gain not in GAINS:
            raise InvalidInput(f"Unknown gain {self.gain!r}; expected one of {list(GAINS)}.")
        self.data = data
        self._run: RunProvenance | None = None  # the provenance of the model evaluating it now (evaluate)
        self._grades: dict[str, dict[str, dict[str, int]]] = {}
        self._same_text: dict[str, dict[str, str]] = {}

    def grades(self, split: str = "test") -> dict[str, dict[str, int]]:
        """The raw judgement grades {query id: {passage id: grade}} of a loaded split (the qrels hold gains).

        Raises:
            ValueError: the task's data is not loaded.
        """
        if split not in self._grades:
            raise InvalidInput(f"{self.metadata.name}: no grades for split {split!r}; call load_data() first.")
        return self._grades[split]

    def ndcg_at_10_per_query(self, top10: Mapping[str, Sequence[str]], split: str = "test") -> dict[str, float]:
        """NDCG@10 of every judged query from its ranked passage ids (best first), as the main score counts it.

        The one way a stored top 10 is scored against this task's data: the task's gain, keyed by text, unjudged
        passages gaining 0, a judged query without a list scoring 0. The mean is the task's ``ndcg_at_10``.

        Raises:
            ValueError: the task's data is not loaded.
        """
        return {query_id: scores.ndcg_zero_fill
                for query_id, scores in self._authors_run(top10, split, self.gain).per_query.items()}

    def _authors_run(self, top10: Mapping[str, Sequence[str]], split: str, gain: Gain) -> RunScores:
        """The authors' metrics of ranked passage ids against a loaded split, keyed by text: one computation for all."""
        grades = self.grades(split)
        top, judged = key_by_text({query_id: top10.get(query_id, ()) for query_id in grades}, grades,
                                  self._same_text.get(split, {}))
        return score_run(top, judged, TOP_K, gain=partial(grade_to_gain, gain=gain))

    def load_data(self, num_proc: int | None = None, *, timer: TimingStack | None = None, **kwargs: Any) -> None:
        """Load this task's queries and judgements and the shared corpus (read once per process).

        From :attr:`data`, else the folders the environment names, read now. A full-set task's join comes from the data
        cache where it can; extra judgements are read only when the source names them, and are then recorded.
        """
        if self.data_loaded:
            return
        timer = timer or TimingStack()
        source = self.data if self.data is not None else self._environment_source()
        described = source.describe()
        with timer("Data loading", log_message=f"Loading dataset {self.metadata.name}..."):
            files = _task_files(source.main_folder())
            if self.spec.split is Split.full:
                extra_dir = source.extra_judgements
                extra = extra_qrels_file(extra_dir, self.spec) if extra_dir is not None else None
                data = load_cached_task(self.spec, files, gain=self.gain, log=mteb_logger, extra=extra,
                                        keep=source.keep_joins)
                if extra_dir is not None:  # labelled, so these scores never pass for official ones
                    added = data.report.extra.added if data.report.extra is not None else 0
                    described = extended_data(described, extra_dir, added, describe_judges(extra_dir))
                corpus = [files.corpus]
                read = [*corpus, *files.for_task(self.spec), *([extra] if extra is not None else [])]
            else:
                split_files = cached_split_files(source.devlite_folder())
                data = load_split_task(self.spec, split_files, files, gain=self.gain, log=mteb_logger,
                                       keep=source.keep_joins)
                devlite = source.describe_devlite()
                judged = "" if self.spec.base in split_files.qrels else f" with the judgements of {described}"
                described = (f"{described} without the DevLite queries of {devlite}" if self.spec.split is Split.test
                             else devlite + judged)
                corpus = [files.corpus] if self.spec.split is Split.test else [split_files.corpus, files.corpus]
                given = [*split_files.devlite_queries.get(self.spec.base, ()),
                         *split_files.test_queries.get(self.spec.base, ())]
                read = [*corpus, *files.for_task(self.spec.base), *(q.source for q in given),
                        *([split_files.qrels[self.spec.base]] if self.spec.base in split_files.qrels else [])]
        split = self.metadata.eval_splits[0]
        self.dataset = {"default": {split: RetrievalSplitData(
            corpus=data.corpus, queries=data.queries, relevant_docs=data.relevant_docs, top_ranked=None,
        )}}
        self._grades = {split: data.grades}
        self._same_text = {split: data.same_text}
        self.load_report = data.report
        self.data_source = described
        self.corpus_digest = _digest_of(corpus)
        self.data_digest = _digest_of(read)
        self.data_loaded = True

    def _environment_source(self) -> DataSource:
        """The data the environment names; a built task's own folder in place of ``DISASTIR_DATA_DIR``."""
        source = DataSource.from_environment()
        if self.built_folder is None:
            return source
        return DataSource(folder=self.built_folder, keep_joins=source.keep_joins)

    def provenance(self, run: RunProvenance | None) -> TaskProvenance:
        """Everything this loaded task's numbers depend on, with ``run`` (the model and settings searching it).

        Raises:
            ValueError: the task's data is not loaded.
        """
        if not self.data_loaded:
            raise InvalidInput(f"{self.metadata.name}: its provenance names the data it read; call load_data() first.")
        return TaskProvenance(run, data_digest=self.data_digest, corpus_digest=self.corpus_digest, gain=self.gain)

    def evaluate(self, model: Any, split: str = "test", subsets_to_run: list[str] | None = None,
                 **kwargs: Any) -> Mapping[str, dict[str, Any]]:
        """Run mteb's evaluation, then log one line with the score (``mteb run`` prints none of its own).

        A search model that states its provenance (``model.provenance``, as the runner's does) has it recorded.
        """
        run = getattr(model, "provenance", None)
        self._run = run if isinstance(run, RunProvenance) else None
        try:
            scores = super().evaluate(model, split, subsets_to_run, **kwargs)
        finally:
            self._run = None
        for subset, values in scores.items():
            report = self.load_report
            queries = f" over {report.queries_kept} queries" if report is not None else ""
            subset_name = "" if subset == "default" else f" [{subset}]"
            mteb_logger.info("%s%s: ndcg@10 %.2f%s (main score; x100)", self.metadata.name, subset_name,
                             100 * values.get(MAIN_SCORE_KEY, float("nan")), queries)
        return scores

    def task_specific_scores(
        self,
        scores: dict[str, dict[str, float]],
        qrels: dict[str, dict[str, int]],
        results: dict[str, dict[str, float]],
        hf_split: str,
        hf_subset: str,
    ) -> dict[str, Any]:
        """The authors' metrics, keyed by text as theirs (both NDCG@10 gains by name too), and the task's record.

        On the raw grades, each top 10 ranked as mteb ranks it: ``ndcg_at_10_exponential_gain`` and ``_linear_gain``,
        ``unjudged_at_10`` (the authors' ``unannotated_ratio``) and the ``*_unjudged_removed`` variants. Where a judged
        text of the split is held by several ids, mteb would count it once per id in the ideal DCG and Recall's
        denominator, so the text-keyed numbers replace mteb's ``ndcg_at_10``, ``mrr_at_10`` and ``recall_at_10``
        (rounded as mteb rounds them); elsewhere mteb's equal the authors' query for query and stand. mteb's other
        metrics stay keyed by id: the authors define none at other cut-offs, and re-deriving them would make a second
        scorer.
        """
        del qrels  # the grades of the same pairs (load_data) are read instead: they are what the authors key by text
        top10 = {query_id: ranking(similarities, TOP_K) for query_id, similarities in results.items()}
        runs = {name: self._authors_run(top10, hf_split, name) for name in GAINS}
        authors = runs["exponential"]  # NDCG aside, every metric reads grades, not gains
        extra: dict[str, Any] = {f"ndcg_at_{TOP_K}_{name}_gain": runs[name].ndcg_zero_fill for name in GAINS}
        extra[f"unjudged_at_{TOP_K}"] = authors.unjudged_share
        extra[f"ndcg_at_{TOP_K}_unjudged_removed"] = authors.ndcg_unjudged_removed
        extra[f"mrr_at_{TOP_K}_unjudged_removed"] = authors.mrr_unjudged_removed
        extra[f"recall_at_{TOP_K}_unjudged_removed"] = authors.recall_unjudged_removed
        if self._same_text.get(hf_split):  # a judged text under several ids: mteb's id-keyed numbers differ
            extra[f"ndcg_at_{TOP_K}"] = round(runs[self.gain].ndcg_zero_fill, _MTEB_DECIMALS)
            extra[f"mrr_at_{TOP_K}"] = authors.mrr_zero_fill
            extra[f"recall_at_{TOP_K}"] = round(authors.recall_zero_fill, _MTEB_DECIMALS)
        return {**extra, **task_record(gain=self.gain, data=self.data_source or ""),
                **self.provenance(self._run).entries()}


def _digest_of(paths: Sequence[Path]) -> str:
    """One digest of the files' contents, in order (each file hashed once per process while unchanged)."""
    return short_digest(json.dumps([source_digest(path) for path in paths]).encode("utf-8"))


def make_task_class(spec: TaskSpec, *, folder: Path | None = None, revision: str | None = None,
                    module: str = __name__) -> type[AbsTaskDisastIR]:
    """One task class from its spec: the only way task classes are made.

    A built task's (``spec.built``) reads ``folder`` unless given data, its metadata names ``revision``; ``module`` is
    the module whose globals the caller binds it into.
    """
    cls = type(spec.class_name, (AbsTaskDisastIR,), {
        "metadata": build_metadata(spec, revision=revision),
        "spec": spec,
        "built_folder": folder,
        "__module__": module,
        "__qualname__": spec.class_name,
        "__doc__": f"Task {spec.name} of the built benchmark {spec.built}." if spec.built else
        f"DisastIR task {spec.name}.",
    })
    return cls


TASK_CLASSES: dict[str, type[AbsTaskDisastIR]] = {spec.name: make_task_class(spec) for spec in TASK_SPECS}
#: split -> its 48 task classes by name (the full split's are TASK_CLASSES).
SPLIT_TASK_CLASSES: dict[Split, dict[str, type[AbsTaskDisastIR]]] = {
    split: TASK_CLASSES if split is Split.full else {spec.name: make_task_class(spec) for spec in specs}
    for split, specs in SPLIT_TASK_SPECS.items()}
#: All 144 task classes, full ones first (what registration puts into mteb).
ALL_TASK_CLASSES: dict[str, type[AbsTaskDisastIR]] = {
    name: cls for classes in SPLIT_TASK_CLASSES.values() for name, cls in classes.items()}
globals().update({cls.__name__: cls for cls in ALL_TASK_CLASSES.values()})


def get_tasks(
    intents: Iterable[str | Intent] | None = None,
    categories: Iterable[str | Category] | None = None,
    *,
    gain: Gain | None = None,
    split: Split | str = Split.full,
    data: DataSource | None = None,
) -> list[AbsTaskDisastIR]:
    """Instances of the chosen tasks (all when None), in the paper's order (intent-major).

    Intents and categories take any accepted spelling (``'FactCheck'``, ``'TW'``, ``'chemical'``); ``split`` is
    ``full`` (the 48 DisastIR tasks), ``test`` or ``devlite``.

    Examples:
        >>> [t.metadata.name for t in get_tasks(["FC"], ["Bio", "chemical"])]
        ['DisastIR-FC-Bio', 'DisastIR-FC-Chem']
    """
    wanted_intents = {parse_intent(str(i.value if isinstance(i, Intent) else i)) for i in intents} if intents else None
    wanted_categories = ({parse_category(str(c.value if isinstance(c, Category) else c)) for c in categories}
                         if categories else None)
    classes = SPLIT_TASK_CLASSES[Split(split)]
    return [
        classes[spec.name](gain=gain, data=data)
        for spec in SPLIT_TASK_SPECS[Split(split)]
        if (wanted_intents is None or spec.intent in wanted_intents)
        and (wanted_categories is None or spec.category in wanted_categories)
    ]


"""``disastir_mteb.evaluate``: a model x DisastIR tasks -> mteb results, one corpus encoding for all.

Each task goes through ``mteb.evaluate`` (scores and result files are mteb's); the search is a
:class:`~disastir_mteb.search.shared_corpus.SharedCorpusSearch`, which encodes and indexes each corpus once. Tasks
run grouped by corpus, each group's queries searched in one pass, then scored on every core.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from disastir_mteb.endpoints.pool import DEFAULT_EMBEDDING_CONCURRENCY, DEFAULT_KEY_ENV
from disastir_mteb.models.loading import ModelLoadError
from disastir_mteb.runner.data_source import with_sample_devlite
from disastir_mteb.runner.run_request import EmbeddingServersOptions, import_libraries, prepare_run
from disastir_mteb.runner.task_selection import corpus_groups, resolve_tasks
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.util.timings import Phase, Timings, clock, run_clock
from disastir_mteb.vocabulary.run_settings import RunSettings, Search
from disastir_mteb.vocabulary.settings import DEFAULT_BATCH_SIZE, DEFAULT_OUTPUT_FOLDER, EXACT
from disastir_mteb.vocabulary.task_record import SYNTHETIC_NOTICE
from disastir_mteb.vocabulary.taxonomy import Split, is_task_name

if TYPE_CHECKING:
    from mteb import AbsTask
    from mteb.results import ModelResult, TaskResult

    from disastir_mteb.data.source import DataSource
    from disastir_mteb.models.embedding_servers import EmbeddingServers
    from disastir_mteb.runner.evaluation_result import EvaluationResult
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch
    from disastir_mteb.vocabulary.instructions import InstructionConfig

logger = logging.getLogger(__name__)


__all__ = ["EmbeddingServersOptions", "Evaluation", "ModelLoadError", "RunSettings", "build_search", "evaluate",
           "import_libraries", "resolve_tasks", "result_folder", "run_evaluation", "run_tasks", "serve_model"]


def build_search(model: Any, settings: RunSettings | None = None) -> SharedCorpusSearch:
    """The search model the runner evaluates: model -> instructions -> store -> ``SharedCorpusSearch``.

    ``model`` as :func:`evaluate`'s; a ready search model is returned as it is.
    """
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch
    from disastir_mteb.search.store import EmbeddingStore

    if isinstance(model, SharedCorpusSearch):  # ready: it holds its own settings and store
        return model
    settings = settings or RunSettings()
    store = None if settings.cache_dir is False else EmbeddingStore(settings.cache_dir)
    # a model object goes to the search model as it is: its precision is applied (to a copy) before any wrapper
    return SharedCorpusSearch(model, settings, store=store)


def evaluate(
    model: Any,
    tasks: Iterable[str | AbsTask] | str | None = None,
    *,
    split: Split | str | None = None,
    search: Search = "exact",
    ann_preset: str | None = None,
    ann_params: Mapping[str, Any] | None = None,
    instructions: str | Mapping[str, str] | InstructionConfig | None = None,
    template: str | None = None,
    instruct_passages: bool = False,
    cache_dir: str | Path | Literal[False] | None = None,
    output_folder: str | Path | None = DEFAULT_OUTPUT_FOLDER,
    overwrite: bool = False,
    show_progress: bool = True,
    on_task_done: Callable[[TaskResult, float], None] | None = None,
    batch_size: int | None = None,
    precision: str | None = None,
    data: str | Path | None = None,
    devlite: str | Path | None = None,
    extra_judgements: str | Path | None = None,
    embeddings_url: str | Sequence[str] | None = None,
    embeddings_revision: str | None = None,
    embeddings_concurrency: int = DEFAULT_EMBEDDING_CONCURRENCY,
    api_key_env: str = DEFAULT_KEY_ENV,
    timings: Callable[[Timings], None] | None = None,
    model_revision: str | None = None,
) -> EvaluationResult:
    """Evaluate a model on DisastIR tasks (the 48 of the full set by default) with one encoding per corpus.

    Args:
        model: an mteb encoder, a SentenceTransformer, a callable ``list[str] -> array``, a model name for
            ``mteb.get_model``, ``"bundled"``, or a ready search model (:func:`build_search`).
        tasks: task names (any case) or mteb task objects; any mteb retrieval task works. With a built benchmark's
            folder as ``data``, its task names (``MyOrg-QA-MH``), and None for all of them.
        split: ``full``, ``test`` (DisastIR-Test, same corpus) or ``devlite`` (its own corpus); None: names as given.
        search: ``"exact"`` or ``"ann"`` (USearch HNSW, built once for all tasks).
        ann_preset: ``paper`` (default), ``exact``, ``f16``, ``i8``, ``b1``; refused with exact search.
        ann_params: overrides of single ANN parameters, e.g. ``{"expansion_search": 128}``.
        instructions: None (the model as it is), ``"disastir"``, ``"dmretriever"``, ``"none"`` or {intent: instruction}.
        template: the instruction template (default: the set's published one).
        instruct_passages: also put the instruction before passages.
        cache_dir: where embeddings persist (default ``DISASTIR_CACHE_DIR``); ``False`` keeps them in memory.
        output_folder: the results folder (mteb's layout); None: mteb's cache.
        overwrite: rerun tasks that already have results there.
        show_progress: progress bars and the run's closing line on stderr.
        on_task_done: called with each task's result and its wall time, as tasks finish.
        batch_size: texts per forward pass.
        precision: ``fp32``, ``fp16`` or ``bf16``: a cast copy of the model encodes, its results filed apart.
        data: as ``run --data``: a folder in the published layout (a built benchmark's too), ``"sample"``, or None
            (``DISASTIR_DATA_DIR``, else the Hub).
        devlite: a DisastIR-DevLite folder (default ``DISASTIR_DEVLITE_DIR``).
        extra_judgements: a ``qrels_with_added`` folder whose grades fill the full set's missing qrels; such scores
            are labelled not official.
        embeddings_url: OpenAI-compatible embedding servers that serve ``model``.
        embeddings_revision: pin the served model's revision (default: a digest of what the servers report).
        embeddings_concurrency: requests in flight per embedding server.
        api_key_env: the environment variable holding the servers' key.
        timings: called once, at the end, with where the run's wall time went.
        model_revision: the revision to file results under; without it, a model with no weights to read is
            identified by this call only.

    Returns:
        mteb's ``ModelResult``, as an :class:`~disastir_mteb.runner.evaluation_result.EvaluationResult` with the
        result set's ``folder`` and the run's ``summary``.

    Raises:
        ValueError: an unknown or contradictory setting, or a ready search model whose search differs from ``search``.
        FileNotFoundError: ``data``, ``devlite`` or ``extra_judgements`` is not a folder.
    """
    with run_clock():
        settings = RunSettings.from_options(search=search, ann_preset=ann_preset, ann_params=ann_params,
                                            instructions=instructions, template=template,
                                            instruct_passages=instruct_passages, batch_size=batch_size,
                                            precision=precision, cache_dir=cache_dir, progress=show_progress,
                                            model_revision=model_revision)
        if embeddings_revision and not embeddings_url:
            raise InvalidInput("embeddings_revision pins a served model: pass it with embeddings_url.")
        served = None if not embeddings_url else EmbeddingServersOptions(
            embeddings_url, revision=embeddings_revision, concurrency=embeddings_concurrency, key_env=api_key_env)
        names, source = prepare_run(model, tasks, split=split, data=data, devlite=devlite,
                                    extra_judgements=extra_judgements, keep_joins=cache_dir is not False,
                                    served=served, say=logger.warning)
        tasks = names.tasks
        if not isinstance(model, str):
            from disastir_mteb.models.adapter import require_encoder
            from disastir_mteb.search.shared_corpus import SharedCorpusSearch

            if not isinstance(model, SharedCorpusSearch):
                require_encoder(model, "evaluate()")  # before anything is copied or wrapped: the sentence names it
        evaluation = run_evaluation(model, tasks, split=split, settings=settings, data=source, served=served,
                                    output_folder=output_folder, overwrite=overwrite, show_progress=show_progress,
                                    on_task_done=on_task_done, ready_keywords=(instructions is not None
                                                                               or precision is not None
                                                                               or batch_size is not None
                                                                               or model_revision is not None,
                                                                               search))
    if timings is not None:
        timings(evaluation.timings)
    from disastir_mteb.runner.evaluation_result import EvaluationResult  # imports mteb: here, not at the top

    summary = " ".join(evaluation.summary(brief=True))
    logger.info(summary)
    if show_progress and not logger.isEnabledFor(logging.INFO):  # the line a user sees without configuring logging
        from tqdm.auto import tqdm

        tqdm.write(summary, file=sys.stderr)
    return EvaluationResult.of(evaluation.result, folder=evaluation.folder.resolve(), summary=summary)


@dataclass(frozen=True)
class Evaluation:
    """What one run did: mteb's result, the search model that computed it, the folder, the timings."""

    result: ModelResult
    searcher: SharedCorpusSearch
    folder: Path
    data: DataSource
    timings: Timings
    servers: str | None = None

    def summary(self, *, brief: bool = False) -> list[str]:
        """What the run did, as ``run``, ``demo`` and ``evaluate()`` say it; unless ``brief``, also how it encoded."""
        searcher = self.searcher
        loaded = f", {searcher.index_loads} loaded from the cache" if searcher.index_loads else ""
        identity = searcher.identity
        filed = ("" if identity.pinned else " (the model has no revision of its own: its results are filed under the "
                 f"fingerprint of {'this call' if not identity.reusable else 'what it is'})")
        lines = [f"{len(self.result.task_results)} task result(s) in {self.folder.resolve()}{filed}; "
                 f"{searcher.passages_encoded} passages and {searcher.queries_encoded} queries encoded; search: "
                 f"{searcher.describe_search()}, {searcher.index_builds} index build(s){loaded}."]
        if not brief:
            lines.append(f"Passages: {searcher.describe_encoding()}.")
            if self.servers is not None:
                lines.append(f"Servers: {self.servers}.")
        if self.data.record()["synthetic"]:
            lines.append(SYNTHETIC_NOTICE)
        return lines


def run_evaluation(
    model: Any,
    tasks: Iterable[str | AbsTask] | str | None = None,
    *,
    benchmarks: Iterable[str] | None = None,
    split: Split | str | None = None,
    settings: RunSettings,
    data: DataSource,
    served: EmbeddingServersOptions | None = None,
    output_folder: str | Path | None = None,
    overwrite: bool = False,
    show_progress: bool = True,
    on_task_done: Callable[[TaskResult, float], None] | None = None,
    ready_keywords: tuple[bool, str] = (False, EXACT),
) -> Evaluation:
    """The one orchestration of a run, for :func:`evaluate` and ``disastir-mteb run`` alike.

    ``ready_keywords``: whether :func:`evaluate` was given settings of its own, checked against a ready search model.

    Raises:
        ValueError: as :func:`evaluate`.
    """
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch

    with run_clock() as running:
        with clock(Phase.tasks):
            tasks_to_run = resolve_tasks(tasks, benchmarks, split=split, data=data)  # before a model loads
            data = with_sample_devlite(data, [task.metadata.name for task in tasks_to_run])
            tasks_to_run = resolve_tasks(tasks_to_run, split=split, data=data)
        if isinstance(model, SharedCorpusSearch):  # it carries its own settings: the keywords may only name them
            keywords, search = ready_keywords
            if keywords:
                raise InvalidInput("Pass instructions, precision, batch_size and model_revision to SharedCorpusSearch "
                                   "(or to build_search), not to evaluate() together with a ready search model.")
            if search != EXACT and model.ann != settings.ann:
                raise InvalidInput(f"The search model searches {model.describe_search()}, but evaluate() was asked "
                                   f"for search={search!r}; build it with the same setting or leave search at its "
                                   "default.")
        servers = None
        try:
            with clock(Phase.model):
                if served is not None:
                    servers = model = serve_model(model, served.urls, revision=served.revision,
                                                  batch_size=settings.batch_size or DEFAULT_BATCH_SIZE,
                                                  concurrency=served.concurrency, key_env=served.key_env)
                searcher = build_search(model, settings)
            result = run_tasks(searcher, tasks_to_run, output_folder=output_folder, overwrite=overwrite,
                               show_progress=show_progress, on_task_done=on_task_done)
            said = servers.describe() if servers is not None else None
        finally:
            if servers is not None:  # its event loop thread and connections, also when the run stops with an error
                servers.close()
        folder = result_folder(searcher, result.task_results[0].task_name, output_folder)
        spent = running.timings(passages_encoded=searcher.passages_encoded, queries_encoded=searcher.queries_encoded,
                                device=_encoding_device(searcher))
    return Evaluation(result, searcher, folder, data, spent, said)


def serve_model(model: Any, urls: str | Sequence[str], *, revision: str | None = None,
                batch_size: int = DEFAULT_BATCH_SIZE, concurrency: int = DEFAULT_EMBEDDING_CONCURRENCY,
                key_env: str = DEFAULT_KEY_ENV) -> EmbeddingServers:
    """The model ``model`` names, encoded on the embedding servers at ``urls``.

    Raises:
        ValueError: ``model`` is not a name.
        EndpointError: a server cannot be reached or does not serve it.
    """
    from disastir_mteb.models.embedding_servers import EmbeddingServers

    if not isinstance(model, str):
        raise InvalidInput("With embedding servers the model is the served model's name as the servers know it "
                           f"(e.g. 'Qwen/Qwen3-Embedding-8B'), not a {type(model).__name__} object.")
    return EmbeddingServers(model, urls, revision=revision, batch_size=batch_size, concurrency=concurrency,
                            key_env=key_env)


def run_tasks(
    searcher: SharedCorpusSearch,
    tasks: Sequence[AbsTask],
    *,
    output_folder: str | Path | None = None,
    overwrite: bool = False,
    show_progress: bool = True,
    on_task_done: Callable[[TaskResult, float], None] | None = None,
) -> ModelResult:
    """Evaluate resolved ``tasks`` with one encoding per corpus; arguments as in :func:`evaluate`."""
    with run_clock():
        with clock(Phase.startup):  # the libraries the tasks are scored with (imported already on the command line)
            from disastir_mteb.runner.result_cache import atomic_result_cache
            from disastir_mteb.runner.scoring_patch import faster_scoring
            from disastir_mteb.runner.task_pool import evaluate_tasks
            from disastir_mteb.search.prefetch import answered_by_prefetch, forget_prefetched, prefetch, query_count
            from disastir_mteb.util.progress import progress_bar

        with clock(Phase.tasks):
            groups = corpus_groups(tasks)
            task_list = [task for group in groups for task in group]
        encode_kwargs: dict[str, Any] = {"batch_size": searcher.batch_size or DEFAULT_BATCH_SIZE}
        if not show_progress:
            encode_kwargs["show_progress_bar"] = False  # what mteb.evaluate sets when it builds encode_kwargs itself
        with clock(Phase.writing):
            cache = atomic_result_cache(output_folder)  # mteb's layout; each file lands whole or not at all
            _check_inside(cache, task_list, searcher)
        with clock(Phase.model):
            # a search model run before is probed again (its model may have changed); per-query files need each
            # task's search results kept
            identity = searcher.start_run(keep_rankings=True)
        if not identity.pinned and task_list:
            logger.info("%s has no name and revision of its own: it is identified by %s (fingerprint %s), and its "
                        "results are filed under %s.", identity.name, identity.detail, identity.fingerprint[:16],
                        Path(cache.get_task_result_path(task_list[0].metadata.name, searcher.mteb_model_meta)).parent)
        preloaded = {task.metadata.name for task in task_list if task.data_loaded}
        task_results: list[TaskResult] = []
        result: ModelResult | None = None
        with _datasets_bars_off(), faster_scoring():  # datasets' "Map" bars would print over ours
            said: set[str] = set()  # the changes said in this run: each once, not once per task
            checked: dict[str, bool] = {}  # loaded tasks whose stored result was checked here, before any fork
            run = functools.partial(_run_task, searcher=searcher, cache=cache, encode_kwargs=encode_kwargs,
                                    overwrite=overwrite, said=said, checked=checked)
            answered = functools.partial(answered_by_prefetch, searcher)  # such tasks are scored on every core
            if len(groups[0]) > 1:
                prefetch(searcher, groups[0], encode_kwargs=encode_kwargs)  # one pass over the corpus for all queries
            bar = progress_bar(total=len(task_list), desc="Evaluating tasks", unit=" tasks",
                               disable=not show_progress or len(task_list) < 2)
            for number, group in enumerate(groups):
                if number and len(group) > 1:  # a corpus after the first (DevLite's): its group's pass when reached
                    prefetch(searcher, group, encode_kwargs=encode_kwargs)
                with clock(Phase.writing):  # result files read back
                    checked.update({task.metadata.name: _stale(searcher, task, cache, said)
                                    for task in group if task.data_loaded and not overwrite})
                started = time.perf_counter()
                for task, result, seconds in evaluate_tasks(group, run, parallel=answered, queries=query_count):
                    forget_prefetched(searcher, task)
                    task_results.extend(result.task_results)
                    if task.metadata.name not in preloaded:
                        with clock(Phase.tasks):
                            task.unload_data()  # frees its queries and qrels; the shared corpus stays with the loader
                    for task_result in result.task_results if on_task_done is not None else ():
                        on_task_done(task_result, seconds)  # type: ignore[misc]
                    bar.update()
                logger.info("%d task(s) scored and written in %.1f s after the search.", len(group),
                            time.perf_counter() - started)
            bar.close()
        logger.info("%d task(s), %s: %d index build(s), %d loaded from cache, %d passages and %d queries encoded.",
                    len(task_list), searcher.describe_search(), searcher.index_builds, searcher.index_loads,
                    searcher.passages_encoded, searcher.queries_encoded)
        logger.info("Passages: %s.", searcher.describe_encoding())
    if result is None:
        raise InvalidInput("No tasks to evaluate.")
    return result.model_copy(update={"task_results": task_results})


def _encoding_device(searcher: SharedCorpusSearch) -> str:
    """Where the search model's model encodes: its device, the servers' addresses, or ``cpu`` (no torch weights)."""
    return str(searcher.encoding_settings().get("device") or "cpu")


def result_folder(searcher: SharedCorpusSearch, task_name: str, output_folder: str | Path | None = None) -> Path:
    """Where mteb files ``task_name``'s result for this search model (plus ``experiments/<settings>`` where set)."""
    from disastir_mteb.runner.result_cache import atomic_result_cache

    return Path(atomic_result_cache(output_folder).get_task_result_path(task_name, searcher.mteb_model_meta)).parent


def _check_inside(cache: Any, tasks: Sequence[AbsTask], searcher: SharedCorpusSearch) -> None:
    """Refuse a model name or revision that would put result files outside the output folder (``../..``)."""
    if not tasks:
        return
    root = Path(cache.cache_path).resolve()
    path = Path(cache.get_task_result_path(tasks[0].metadata.name, searcher.mteb_model_meta)).resolve()
    if not path.is_relative_to(root):
        meta = searcher.mteb_model_meta
        raise InvalidInput(f"Model {getattr(meta, 'name', '?')!r} revision {getattr(meta, 'revision', '?')!r} "
                           f"would write its results to {path}, outside {root}; fix the model's name or revision.")


@contextlib.contextmanager
def _datasets_bars_off() -> Iterator[None]:
    """Silence the ``datasets`` library's bars for the duration (restored after, if they were on)."""
    from datasets.utils import logging as datasets_logging

    was_on = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            datasets_logging.enable_progress_bar()


def _run_task(task: AbsTask, *, searcher: SharedCorpusSearch, cache: Any, encode_kwargs: Mapping[str, Any],
              overwrite: bool, said: set[str], checked: Mapping[str, bool]) -> ModelResult:
    """One task through ``mteb.evaluate``, then its per-query file; runs here or in a forked worker.

    A stored result is reused only when it records this task's provenance; ``checked`` is filled before any fork, so a
    change is said once.
    """
    import mteb

    if not task.data_loaded:
        with clock(Phase.tasks):
            task.load_data()  # kept through mteb.evaluate, so the per-query scores can read the qrels
    with clock(Phase.writing):  # result files read back
        name = task.metadata.name
        rerun = (overwrite or _lacks_per_query(searcher, task, cache)
                 or (checked[name] if name in checked else _stale(searcher, task, cache, said)))
    with clock(Phase.scoring):  # mteb's save_to_cache marks its files as writing, a search not answered as search
        result = mteb.evaluate(searcher, task, cache=cache, show_progress_bar=False,  # the runner's bar is the one
                               encode_kwargs=dict(encode_kwargs),  # type: ignore[arg-type]
                               overwrite_strategy="always" if rerun else "only-missing")
    _write_per_query(searcher, task, cache)
    return result


def _write_per_query(searcher: SharedCorpusSearch, task: AbsTask, cache: Any) -> None:
    """Score the task's last search per query; write it with the encoding, data and provenance beside mteb's result."""
    from disastir_mteb.results.per_query import (
        ndcg_by_id,
        per_query_path,
        score_queries,
        with_data_digest,
        write_per_query,
    )
    from disastir_mteb.tasks.retrieval import AbsTaskDisastIR

    splits, subsets = list(task.metadata.eval_splits), list(task.hf_subsets)
    found = [searcher.take_ranking(task.metadata.name, split, subset) for split in splits for subset in subsets]
    dataset = getattr(task, "dataset", None) or {}
    if len(found) != 1 or found[0] is None or _split_missing(dataset, subsets[0], splits[0]):
        return  # results came from mteb's cache, the data was unloaded, or several splits (one file per task)
    ours = isinstance(task, AbsTaskDisastIR)
    score = (functools.partial(task.ndcg_at_10_per_query, split=splits[0]) if ours
             else ndcg_by_id(dataset[subsets[0]][splits[0]]["relevant_docs"]))  # a DisastIR task scores by text
    with clock(Phase.scoring):
        record = score_queries(task.metadata.name, found[0], score)
    data = with_data_digest(task.data.record(), task.metadata.name) if ours and task.data is not None else None
    with clock(Phase.writing):
        write_per_query(per_query_path(cache.get_task_result_path(task.metadata.name, searcher.mteb_model_meta)),
                        record, settings=searcher.encoding_settings(), data=data,
                        provenance=task.provenance(searcher.provenance).record() if ours else None)


def _lacks_per_query(searcher: SharedCorpusSearch, task: AbsTask, cache: Any) -> bool:
    """Whether mteb holds the task's result but not its per-query file (a run killed between the two writes)."""
    from disastir_mteb.results.per_query import per_query_path, read_per_query
    from disastir_mteb.util.atomic import set_aside

    name = task.metadata.name
    if not is_task_name(name):
        return False
    result_path = cache.get_task_result_path(name, searcher.mteb_model_meta)
    per_query = per_query_path(result_path)
    if not result_path.is_file():
        return False
    if per_query.is_file():
        try:
            read_per_query(per_query)
            return False
        except ValueError as error:  # its message names the file and what is wrong with it
            moved = set_aside(per_query)
            logger.warning("%s; moved it to %s beside it and evaluating %s again.", str(error).rstrip("."),
                           moved.name, name)
    cache.load_task_result(name, searcher.mteb_model_meta)  # an unreadable result file is set aside as well
    return True


def _stale(searcher: SharedCorpusSearch, task: AbsTask, cache: Any, said: set[str]) -> bool:
    """Whether mteb's stored result was computed from other inputs than this run's (said once per kind, in ``said``)."""
    from disastir_mteb.results.score_checks import read_task_record
    from disastir_mteb.tasks.retrieval import AbsTaskDisastIR
    from disastir_mteb.vocabulary.provenance import PROVENANCE_KEY, differences
    from disastir_mteb.vocabulary.task_record import DATA_KEY

    if not isinstance(task, AbsTaskDisastIR):
        return False
    path = cache.get_task_result_path(task.metadata.name, searcher.mteb_model_meta)
    if not path.is_file():
        return False
    try:
        record = read_task_record(path)
    except (OSError, ValueError):
        return False  # mteb reads it next, and sets an unreadable file aside
    now = task.provenance(searcher.provenance).entries()
    if record.get(PROVENANCE_KEY) == now[PROVENANCE_KEY]:
        return False
    changed = [change for change in differences(record, now) if not change.startswith("data files")]
    kinds = "; ".join(changed or ["data files"])
    detail = "; ".join(differences(record, now)) or "its provenance digest differs"
    if record.get(DATA_KEY) != task.data_source:
        detail += f"; data {record.get(DATA_KEY)!r} there, {task.data_source!r} now"
    if kinds in said:
        logger.info("%s: the result in %s was computed from other inputs (%s): evaluating it again.",
                    task.metadata.name, path, detail)
        return True
    said.add(kinds)
    logger.warning("%s: the result in %s was computed from other inputs than this run's (%s): evaluating it again "
                   "and replacing it (and so every other task whose result differs the same way, without a word).",
                   task.metadata.name, path, detail)
    return True


def _split_missing(dataset: Any, subset: str, split: str) -> bool:
    """Whether a task's loaded ``dataset`` lacks ``subset``/``split``."""
    return subset not in dataset or split not in dataset[subset]

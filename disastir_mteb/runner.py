"""``disastir_mteb.evaluate``: a model x DisastIR tasks -> mteb results, through mteb's own evaluation.

The runner resolves the model (a name for ``mteb.get_model``, ``"bundled"`` for the packaged
MiniLM, or any model object), optionally wraps it with :func:`~disastir_mteb.adapter.with_instructions`,
and evaluates the chosen tasks with ``mteb.evaluate``, so results are the same files mteb writes.
Passage embeddings are shared across tasks in memory (:class:`~disastir_mteb.memo.CorpusMemo`): one
corpus encoding per run. A persistent, resumable embedding store and a shared exact index are the
next step (issue 4); ANN search is issue 5.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from disastir_mteb.taxonomy import TASK_NAMES, get_spec

if TYPE_CHECKING:
    from mteb import AbsTask
    from mteb.results import ModelResult

    from disastir_mteb.instructions import InstructionConfig

logger = logging.getLogger(__name__)

__all__ = ["evaluate", "load_model", "resolve_tasks"]

Search = Literal["exact", "ann"]


def load_model(model: Any, *, device: str | None = None) -> Any:
    """A model object from a name (``mteb.get_model``), ``"bundled"`` (packaged MiniLM) or an object."""
    if not isinstance(model, str):
        return model
    if model == "bundled":
        from disastir_mteb.bundled import load_bundled_model

        return load_bundled_model(device=device)
    import mteb

    return mteb.get_model(model, device=device) if device else mteb.get_model(model)


def resolve_tasks(tasks: Iterable[str | AbsTask] | str | None = None,
                  benchmarks: Iterable[str] | None = None) -> list[AbsTask]:
    """Task objects from names, task objects and/or benchmark names; all 48 when nothing is given.

    Raises:
        KeyError: an unknown task or benchmark name (with the closest valid names).
    """
    import mteb

    chosen: list[AbsTask] = []
    for benchmark in benchmarks or ():
        chosen.extend(mteb.get_benchmark(benchmark).tasks)
    for task in [tasks] if isinstance(tasks, str) else (tasks or ()):
        if isinstance(task, str):
            if task.startswith("DisastIR-"):
                get_spec(task)  # the plugin's own message for a mistyped DisastIR name
            chosen.append(mteb.get_task(task))
        else:
            chosen.append(task)
    if not chosen:
        chosen = [mteb.get_task(name) for name in TASK_NAMES]
    unique: dict[str, AbsTask] = {}
    for task in chosen:
        unique.setdefault(task.metadata.name, task)
    return list(unique.values())


def evaluate(
    model: Any,
    tasks: Iterable[str | AbsTask] | str | None = None,
    *,
    search: Search = "exact",
    ann_preset: str = "paper",
    instructions: str | Mapping[str, str] | InstructionConfig | None = None,
    template: str | None = None,
    instruct_passages: bool = False,
    cache_dir: str | Path | None = None,
    output_folder: str | Path | None = None,
    overwrite: bool = False,
    show_progress: bool = True,
) -> ModelResult:
    """Evaluate a model on DisastIR tasks (all 48 by default) with one corpus encoding.

    Args:
        model: an mteb encoder, a SentenceTransformer, a callable ``list[str] -> array``, a model
            name for ``mteb.get_model``, or ``"bundled"``.
        tasks: task names or mteb task objects (any mteb task works; DisastIR ones share the corpus).
        search: ``"exact"``; ``"ann"`` is not available yet.
        ann_preset: reserved for ANN search.
        instructions: None (the model as it is), ``"disastir"``, ``"dmretriever"``, ``"none"`` or a
            mapping {intent: instruction}; see :func:`~disastir_mteb.adapter.with_instructions`.
        template: the instruction template (default: the set's published one).
        instruct_passages: also put the instruction before passages.
        cache_dir: reserved for the persistent embedding store (``DISASTIR_CACHE_DIR``).
        output_folder: mteb results folder; default mteb's own cache (``MTEB_CACHE``).
        overwrite: rerun tasks that already have results there.
        show_progress: progress bars.

    Returns:
        mteb's ``ModelResult`` for the evaluated tasks.

    Raises:
        NotImplementedError: ``search="ann"``.
        ValueError: an unknown ``search`` value.
    """
    import mteb

    from disastir_mteb.adapter import with_instructions
    from disastir_mteb.memo import CorpusMemo

    if search == "ann":
        raise NotImplementedError(f"search='ann' (preset {ann_preset!r}) is not available yet: USearch ANN search "
                                  "is planned (issue 5); use search='exact'.")
    if search != "exact":
        raise ValueError(f"Unknown search {search!r}; expected 'exact' or 'ann'.")
    del cache_dir  # the in-memory memo needs no cache folder yet
    task_list = resolve_tasks(tasks)
    encoder = load_model(model)
    if instructions is not None:
        encoder = with_instructions(encoder, instructions, template, passages=instruct_passages)
    if not instruct_passages:
        encoder = CorpusMemo(encoder)  # passages are task-independent: encode the shared corpus once
    cache = mteb.ResultCache(Path(output_folder)) if output_folder is not None else mteb.ResultCache()
    return mteb.evaluate(encoder, task_list, cache=cache, overwrite_strategy="always" if overwrite else "only-missing",
                         show_progress_bar=show_progress)

"""What a run checks and sets up before it starts, once for ``disastir-mteb run`` and :func:`evaluate`.

Imports no mteb or torch at import time, so a misspelled name is answered before those load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disastir_mteb.data.source import DataSource
from disastir_mteb.endpoints.pool import DEFAULT_EMBEDDING_CONCURRENCY, DEFAULT_KEY_ENV
from disastir_mteb.runner.data_source import data_source, needs_hub
from disastir_mteb.runner.task_selection import Names, built_names, canonical_names, selected_task_names
from disastir_mteb.util.hub import offline_if_unreachable
from disastir_mteb.util.timings import Phase, clock

if TYPE_CHECKING:
    from mteb import AbsTask

    from disastir_mteb.vocabulary.taxonomy import Split

__all__ = ["EmbeddingServersOptions", "import_libraries", "prepare_run"]


@dataclass(frozen=True)
class EmbeddingServersOptions:
    """Where a served model is encoded (``--embeddings-url`` and its options): see :func:`serve_model`."""

    urls: str | Sequence[str]
    revision: str | None = None
    concurrency: int = DEFAULT_EMBEDDING_CONCURRENCY
    key_env: str = DEFAULT_KEY_ENV


def import_libraries() -> None:
    """Import what every run uses (mteb, torch, sentence-transformers), so their seconds count as ``startup``."""
    import sentence_transformers  # noqa: F401
    import torch  # noqa: F401

    from disastir_mteb.search import shared_corpus  # noqa: F401


def prepare_run(model: Any, tasks: Iterable[str | AbsTask] | str | None, benchmarks: Iterable[str] | None = None, *,
                split: Split | str | None, data: str | Path | None, devlite: str | Path | None,
                extra_judgements: str | Path | None, keep_joins: bool, served: EmbeddingServersOptions | None,
                as_options: bool = False, say: Callable[[str], None] = print) -> tuple[Names, DataSource]:
    """What ``run`` and :func:`evaluate` check and set up before a run: names, data folders, served model, Hub, imports.

    ``as_options``: errors name the command line's options; ``say``: how the Hub probe speaks.

    Raises:
        KeyError: an unknown task or benchmark name.
        ValueError: a task of another query set than ``split``; ``served`` pinning a revision without a URL.
        FileNotFoundError: ``data``, ``devlite`` or ``extra_judgements`` is not a folder.
    """
    built = built_names(DataSource(folder=Path(data).expanduser())) if _local(data) else None
    known = selected_task_names(tasks, benchmarks, split=split, built=built)  # None: only mteb can tell
    with clock(Phase.startup):  # a name not DisastIR's imports mteb to be checked, still before any work
        names = canonical_names(tasks, benchmarks, built=built)
    with clock(Phase.tasks):  # the folders checked (and the sample written) before the imports too
        source = data_source(data, devlite, task_names=known or (), as_options=as_options,
                             extra_judgements=extra_judgements, keep_joins=keep_joins)
    with clock(Phase.startup):
        offline_if_unreachable(needs_hub(model, source, served=served is not None), say=say)
        import_libraries()
    return names, source


def _local(data: str | Path | None) -> bool:
    """Whether ``data`` names a folder that is there (a built benchmark's is known by its marker)."""
    return data is not None and str(data) != "sample" and Path(data).expanduser().is_dir()

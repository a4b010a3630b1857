"""What the BEIR and mteb exports share: the tasks, loaded as mteb loads them, and the export folder.

Reading through the task objects makes an export what the tasks score. The folder is staged and renamed into
place, and only an empty folder or an earlier export (its README carries :data:`EXPORT_MARKER`) is replaced.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from disastir_mteb.util.atomic import staged_folder
from disastir_mteb.util.errors import ExistingOutput, InvalidInput, NotAFolder
from disastir_mteb.vocabulary.taxonomy import TASK_NAMES, Split, canonical_task_name, get_spec

if TYPE_CHECKING:
    from datasets import Dataset
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData

    from disastir_mteb.data.published import Gain
    from disastir_mteb.data.source import DataSource
    from disastir_mteb.tasks.retrieval import AbsTaskDisastIR

__all__ = ["EXPORT_MARKER", "check_corpus", "describe_source", "export_data", "export_task_names", "load_for_export",
           "staged_export"]

# The flat-layout module name, kept: folders exported before the package was layered are still recognised.
EXPORT_MARKER = "<!-- written by disastir_mteb.export -->"


def export_task_names(tasks: Iterable[str] | None) -> list[str]:
    """Validated task names (given in any case) in the given order, without repeats; all 48 when None."""
    if tasks is None:
        return list(TASK_NAMES)
    names = list(dict.fromkeys(canonical_task_name(name) for name in ([tasks] if isinstance(tasks, str) else tasks)))
    for name in names:
        if get_spec(name).split is not Split.full:  # get_spec: KeyError with close matches for an unknown name
            raise InvalidInput(f"{name} is a DisastIR-Test/DevLite task; export writes the 48 full DisastIR tasks only "
                               f"(e.g. {get_spec(name).base.name}).")
    if not names:
        raise InvalidInput("No DisastIR tasks to export: pass task names, or None for all 48.")
    return names


def load_for_export(name: str, gain: Gain | None, data: DataSource) -> tuple[AbsTaskDisastIR, RetrievalSplitData]:
    """One task loaded from ``data`` exactly as mteb loads it, and its evaluation split."""
    from disastir_mteb.tasks.retrieval import TASK_CLASSES

    task = TASK_CLASSES[name](gain=gain, data=data)
    task.load_data()
    return task, task.dataset["default"][task.metadata.eval_splits[0]]


def export_data(data: DataSource | None) -> DataSource:
    """The data an export reads: ``data``, else the folders the environment names (read once, here)."""
    from disastir_mteb.data.source import DataSource

    return data if data is not None else DataSource.from_environment()


def describe_source(data: DataSource) -> str:
    """Where the exported data came from, for the README."""
    from disastir_mteb.vocabulary.metadata import DATASET_REPO, DATASET_REVISION

    return f"the local folder {data.folder}" if data.folder else f"{DATASET_REPO} at revision {DATASET_REVISION}"


def check_corpus(shared: Dataset, corpus: Dataset, name: str) -> None:
    """Every task must see the one corpus written once (reading.py caches it per process)."""
    if corpus is not shared and len(corpus) != len(shared):
        raise InvalidInput(f"Task {name} loaded a corpus of {len(corpus)} passages, not the {len(shared)} already "
                           "exported; the data folder changed during the export, so rerun it.")


def _refuse(out: Path, overwrite: bool) -> None:
    """Raise unless ``out`` is absent, empty, or (with ``overwrite``) an earlier export."""
    if out.exists() and not out.is_dir():
        raise NotAFolder(f"Cannot export to {out}: it is a file, not a folder.")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not overwrite:
        raise ExistingOutput(f"Refusing to export to {out}: it exists and is not empty; pass overwrite=True "
                             "(--overwrite) to replace an earlier export.")
    readme = out / "README.md"
    if not (readme.is_file() and EXPORT_MARKER in readme.read_text(encoding="utf-8", errors="replace")):
        raise ExistingOutput(f"Refusing to overwrite {out}: it is not a DisastIR export (no README.md written "
                             "by disastir_mteb.exports), so choose a new or empty folder.")


def staged_export(out: Path, overwrite: bool) -> AbstractContextManager[Path]:
    """A staging folder that becomes ``out`` on success; ``out`` is checked again before the swap."""
    _refuse(out, overwrite)
    return staged_folder(out, lambda out: _refuse(out, overwrite))

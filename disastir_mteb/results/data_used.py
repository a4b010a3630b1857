"""Which data folder a command reads for result sets: the one their runs read, remembered and checked.

A folder the user chose wins; else the folder every per-query file records, if it still holds the files the runs
read (by digest). Sets that record different data are refused, never scored against data they were not computed
on; without any record, the Hub. The rules, for users: docs/judge.md ("Commands remember the run's data").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from disastir_mteb.data.layout import read_marker
from disastir_mteb.results.per_query import DIGEST_KEY, data_digests
from disastir_mteb.results.provenance import recorded_data
from disastir_mteb.results.result_sets import ResultSet
from disastir_mteb.results.score_checks import per_query_data
from disastir_mteb.util.errors import InvalidInput, MissingInput
from disastir_mteb.vocabulary.metadata import DATASET_REPO, DATASET_REVISION
from disastir_mteb.vocabulary.task_record import hub_data, local_data
from disastir_mteb.vocabulary.taxonomy import Split

__all__ = ["DataChoice", "choose_data"]


@dataclass(frozen=True)
class DataChoice:
    """The data folder a command reads (None: the Hub's pinned revision), and one line saying which and why."""

    folder: Path | None
    line: str


@dataclass(frozen=True)
class _Recorded:
    """One task of one set and the data record of its per-query file."""

    result_set: ResultSet
    task: str
    record: Mapping[str, Any]

    @property
    def source(self) -> str:
        return str(self.record["source"])


def _recorded(result_sets: Sequence[ResultSet], tasks: Iterable[str] | None) -> list[_Recorded]:
    """Every (full-set) task's data record that names its source, in the sets' order."""
    wanted = set(tasks) if tasks is not None else None
    found = []
    for result_set in result_sets:
        if result_set.split is not Split.full:
            continue
        for task in sorted(result_set.scores):
            if wanted is not None and task not in wanted:
                continue
            record = result_set.task_data(task)
            if record is not None and isinstance(record.get("source"), str):
                found.append(_Recorded(result_set, task, record))
    return found


def _named(result_sets: Sequence[ResultSet], tasks: Iterable[str] | None) -> list[str]:
    """The data the task files name, each once: a folder by its last component only, so it cannot be found again."""
    wanted = set(tasks) if tasks is not None else None
    names = [recorded_data(result_set, task) for result_set in result_sets if result_set.split is Split.full
             for task in sorted(result_set.scores) if wanted is None or task in wanted]
    return list(dict.fromkeys(name for name in names if name is not None))


def _shown(source: str) -> str:
    """A recorded source as people read it: the folder, or ``the Hub's DMIR01/DisastIR@<revision>``."""
    return f"the Hub's {source.removeprefix('hf:')}" if source.startswith("hf:") else source


def _more(names: Sequence[str]) -> str:
    """``DisastIR-QA-Bio`` or ``DisastIR-QA-Bio and 3 more``."""
    return names[0] + (f" and {len(names) - 1} more" if len(names) > 1 else "")


def _changed(folder: Path, recorded: Sequence[_Recorded], *, by_name: bool) -> list[_Recorded]:
    """The records whose task files in ``folder`` are not those they record: by digest, else by name if ``by_name``."""
    local = [r for r in recorded if not r.source.startswith("hf:")]
    digests = data_digests(folder, sorted({r.task for r in local if isinstance(r.record.get(DIGEST_KEY), str)}))
    now = local_data(folder, read_marker(folder))
    return [r for r in local if (digests[r.task] != r.record[DIGEST_KEY] if isinstance(r.record.get(DIGEST_KEY), str)
                                 else by_name and per_query_data(r.record) != now)]


def choose_data(result_sets: Sequence[ResultSet], *, chosen: str | Path | None = None, chosen_as: str | None = None,
                tasks: Iterable[str] | None = None) -> DataChoice:
    """The data folder to read for ``result_sets``: ``chosen``, else the one their runs read, checked.

    ``chosen_as`` is how the user named the folder (``--data /data/B``), for the messages.

    Raises:
        FileNotFoundError: the recorded folder is not on this machine.
        ValueError: the sets record different data, the recorded folder or the chosen one holds other files than
            the runs read, or the runs read another Hub revision than this version reads.
    """
    recorded = _recorded(result_sets, tasks)
    if chosen is not None:
        folder = Path(chosen).expanduser().resolve()
        named = chosen_as or str(chosen)
        if not recorded:
            names = _named(result_sets, tasks)
            said = (f"the task files name {'; '.join(names)}, not where it lies: not checked" if names
                    else "the result files record no data to check it against")
            return DataChoice(folder, f"data: {folder} ({named}; {said}).")
        if changed := _changed(folder, recorded, by_name=False):
            raise InvalidInput(f"{named} does not hold the data the runs read: the files of "
                               f"{_more(sorted({r.task for r in changed}))} there are not those the runs read in "
                               f"{', '.join(sorted({r.source for r in changed}))}; pass the folder the runs read, or "
                               "rerun them on this one.")
        checked = [r for r in recorded if isinstance(r.record.get(DIGEST_KEY), str)]
        said = (f"its files are those the runs read in {', '.join(sorted({r.source for r in checked}))}" if checked
                else "the result files record no digest of their data to check it against")
        return DataChoice(folder, f"data: {folder} ({named}; {said}).")
    by_source: dict[str, list[_Recorded]] = {}
    for record in recorded:
        by_source.setdefault(record.source, []).append(record)
    if not by_source:
        local = [name for name in _named(result_sets, tasks) if not name.startswith("hf:")]
        if local:
            raise InvalidInput(f"The runs read {'; '.join(local)} (their task files name it, not where it lies: they "
                               "have no per-query files, which record the folder); pass --data with that folder.")
        return DataChoice(None, f"data: {_shown(hub_data(DATASET_REPO, DATASET_REVISION))} (no --data, and the "
                                "result files do not record another).")
    if len(by_source) > 1:
        parts = []
        for source, records in sorted(by_source.items()):
            sets = list(dict.fromkeys(str(r.result_set.folder) for r in records))
            parts.append(f"{_shown(source)} ({_more([r.task for r in records])} of {_more(sets)})")
        raise InvalidInput(f"The result sets read different data: {'; '.join(parts)}; one command reads one data "
                           "folder, "
                           "so give the result sets of one folder at a time (or --data with a folder holding the files "
                           "they all read).")
    [(source, records)] = by_source.items()
    if source.startswith("hf:"):
        if source != hub_data(DATASET_REPO, DATASET_REVISION):
            raise InvalidInput(f"The runs read {_shown(source)}, but this version of disastir-mteb reads "
                               f"{DATASET_REPO}@{DATASET_REVISION}; pass --data with a folder holding the data of that "
                               "revision.")
        return DataChoice(None, f"data: {_shown(source)}, what the runs read (recorded in their result files).")
    folder = Path(source)
    if not folder.is_dir():
        raise MissingInput(f"The runs read data folder {source} (recorded in their result files), which is not "
                           "on this machine any more; pass --data with a folder holding the same files.")
    if changed := _changed(folder, records, by_name=True):
        raise InvalidInput(f"The runs read data folder {source} (recorded in their result files), but it no longer "
                           f"holds the files they were scored on ({_more(sorted({r.task for r in changed}))} changed "
                           "since); "
                           "pass --data with a folder holding the data the runs read, or rerun them on this one.")
    checked = ("its files checked unchanged" if all(isinstance(r.record.get(DIGEST_KEY), str) for r in records)
               else "checked by its name, as files written before the digest allow")
    return DataChoice(folder, f"data: {folder}, the folder the runs read (recorded in their result files; {checked}; "
                              "--data overrides).")

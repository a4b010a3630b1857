"""Which data the tasks read, as one value passed to them: never through the process environment.

A run chooses its data once (``disastir-mteb run --data``, ``evaluate(data=)``) and hands the
:class:`DataSource` to every task it builds; a task that was given none (``mteb run -t DisastIR-QA-Bio``, which
builds the tasks itself) reads the environment when it loads, once (:meth:`DataSource.from_environment`):
``DISASTIR_DATA_DIR`` (the published layout; unset: the Hub), ``DISASTIR_DEVLITE_DIR`` (DisastIR-Test and DevLite),
``DISASTIR_EXTRA_QRELS_DIR`` (extra judgements, only when asked) and ``DISASTIR_TASK_CACHE=0`` (joins not kept).
No module of the package writes any of them.

What a task records of its data comes from here too: :meth:`DataSource.describe` (``disastir_data`` in its result
file) and :meth:`DataSource.record` (the per-query file's ``data``); what it read, byte for byte, is the content
digest the task computes of the files themselves (:mod:`disastir_mteb.tasks.retrieval`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from disastir_mteb.data.data_cache import TASK_CACHE_ENV
from disastir_mteb.data.devlite_layout import DEVLITE_DIR_ENV, resolve_devlite_dir
from disastir_mteb.data.extra_qrels import EXTRA_QRELS_ENV
from disastir_mteb.data.layout import DATA_DIR_ENV, RUN_DATA_OPTION, describe_data, read_marker, resolve_data_dir
from disastir_mteb.util.errors import MissingInput
from disastir_mteb.vocabulary.metadata import DATASET_REPO, DATASET_REVISION, DEVLITE_REPO, DEVLITE_REVISION

__all__ = ["DataSource"]

_OFF = ("0", "off", "false", "no")


@dataclass(frozen=True)
class DataSource:
    """The data folders a task reads, resolved and checked.

    Attributes:
        folder: a folder in the published layout (``corpus.jsonl``, ``query/``, ``qrels/``); None: the Hub's
            ``DMIR01/DisastIR`` at the pinned revision.
        devlite: a DisastIR-DevLite folder for DisastIR-Test and DevLite tasks; None: the Hub's.
        extra_judgements: a ``qrels_with_added`` folder whose grades the full set's tasks add where the published
            judgements have none (their scores are then labelled as not official); None: the published ones alone.
        keep_joins: keep each task's join in the data cache (:mod:`disastir_mteb.data.data_cache`); False reads
            and joins the files at every load and writes nothing (``--no-cache``, ``DISASTIR_TASK_CACHE=0``).
        data_option: how the reader names a data folder (the command's own ``--data DIR``), said when the Hub's
            data is missing; not part of equality.
    """

    folder: Path | None = None
    devlite: Path | None = None
    extra_judgements: Path | None = None
    keep_joins: bool = True
    data_option: str = field(default=RUN_DATA_OPTION, compare=False)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> DataSource:
        """The data the environment names, read once: what a task built by mteb itself reads.

        Raises:
            FileNotFoundError: a variable names no folder (one sentence naming the variable and what to set).
        """
        environ = os.environ if environ is None else environ

        def folder(name: str, what: str) -> Path | None:
            value = environ.get(name, "").strip()
            if not value:
                return None
            path = Path(value).expanduser()
            if not path.is_dir():
                raise MissingInput(f"{name}={value!r} is not a folder; point it at {what}.")
            return path.resolve()

        return cls(
            folder=folder(DATA_DIR_ENV, "a folder holding corpus.jsonl, query/ and qrels/ (the published DisastIR "
                                        "layout)"),
            devlite=folder(DEVLITE_DIR_ENV, "a copy of DisastIR-DevLite (e.g. one written by `disastir-mteb sample "
                                            "--devlite eval-code`)"),
            extra_judgements=folder(EXTRA_QRELS_ENV, "a qrels_with_added folder ({Intent}_{event}_qrels.json files), "
                                                     "e.g. one written by the judge's export"),
            keep_joins=environ.get(TASK_CACHE_ENV, "").strip().lower() not in _OFF,
        )

    def main_folder(self) -> Path:
        """The folder holding the published layout: :attr:`folder`, or the Hub snapshot (downloaded if needed).

        Raises:
            FileNotFoundError: the Hub's data is neither cached nor downloadable (one sentence saying what to pass).
        """
        if self.folder is not None:
            return self.folder
        return resolve_data_dir(DATASET_REPO, DATASET_REVISION, data_option=self.data_option)

    def devlite_folder(self) -> Path:
        """The DevLite folder: :attr:`devlite`, or the Hub snapshot (downloaded if needed).

        Raises:
            FileNotFoundError: the Hub's DevLite data is neither cached nor downloadable.
        """
        return self.devlite if self.devlite is not None else resolve_devlite_dir(DEVLITE_REPO, DEVLITE_REVISION)

    def describe(self) -> str:
        """``hf:DMIR01/DisastIR@<revision>`` or ``local folder <name> [(synthetic sample, ...)]``: ``disastir_data``."""
        return describe_data(self.folder, repo=DATASET_REPO, revision=DATASET_REVISION)

    def describe_devlite(self) -> str:
        """The data string of the DevLite folder (the Hub's ``repo@revision`` when None)."""
        return describe_data(self.devlite, repo=DEVLITE_REPO, revision=DEVLITE_REVISION)

    def record(self) -> dict[str, object]:
        """Which data the tasks read, for the per-query file's ``data`` record.

        ``{"source": folder or "hf:<repo>@<revision>", "synthetic": bool}``, plus ``"generator"`` (the marker's
        content) for a generated folder, and ``"extra_judgements"`` (the folder) when the tasks read extra ones.
        """
        record: dict[str, object] = {"source": f"hf:{DATASET_REPO}@{DATASET_REVISION}", "synthetic": False}
        if self.folder is not None:
            marker = read_marker(self.folder)
            record = {"source": str(self.folder), "synthetic": bool(marker and marker.get("synthetic", True))}
            if marker:
                record["generator"] = marker
        if self.extra_judgements is not None:
            record["extra_judgements"] = str(self.extra_judgements)
        return record

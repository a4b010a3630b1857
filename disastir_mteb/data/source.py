"""Which data the tasks read, as one value passed to them: never through the process environment.

A run hands its :class:`DataSource` to every task it builds; a task built by mteb itself (``mteb run -t ...``)
reads the environment once, when it loads. No module of the package writes those variables.
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
    """The data folders a task reads, resolved and checked; None means the Hub's, at the pinned revision.

    ``extra_judgements`` names a ``qrels_with_added`` folder whose grades the full set's tasks add where none was
    published (their scores then labelled as not official); ``keep_joins`` False reads and joins the files at every
    load and writes nothing (``--no-cache``); ``data_option`` is how the reader names a data folder (the command's
    own ``--data DIR``), said when the Hub's data is missing, and not part of equality.
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
        """Which data the tasks read, for the per-query file's ``data`` record (synthetic or not, extra judgements)."""
        record: dict[str, object] = {"source": f"hf:{DATASET_REPO}@{DATASET_REVISION}", "synthetic": False}
        if self.folder is not None:
            marker = read_marker(self.folder)
            record = {"source": str(self.folder), "synthetic": bool(marker and marker.get("synthetic", True))}
            if marker:
                record["generator"] = marker
        if self.extra_judgements is not None:
            record["extra_judgements"] = str(self.extra_judgements)
        return record

"""Which data a run's tasks read: a folder in the published layout, the synthetic sample, or the Hub.

One meaning for ``run --data``, ``export --data`` and ``evaluate(data=)``; the process environment is never set.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path

from disastir_mteb.data.devlite_layout import DEVLITE_DIR_ENV
from disastir_mteb.data.extra_qrels import EXTRA_QRELS_ENV
from disastir_mteb.data.layout import DATA_DIR_ENV
from disastir_mteb.data.source import DataSource
from disastir_mteb.util.errors import MissingInput
from disastir_mteb.vocabulary.settings import BUILT_IN_MODELS
from disastir_mteb.vocabulary.taxonomy import ALL_TASK_NAMES, Split, get_spec

__all__ = ["data_source", "needs_hub", "with_sample_devlite"]


def data_source(data: str | Path | None, devlite: str | Path | None = None, *, task_names: Iterable[str] = (),
                as_options: bool = False, extra_judgements: str | Path | None = None,
                keep_joins: bool = True) -> DataSource:
    """The data folders ``data``, ``devlite`` and ``extra_judgements`` name, checked; the environment's for the rest.

    ``as_options`` names the command line's options in errors; ``keep_joins=False`` (``--no-cache``) writes nothing
    to the data cache.

    Raises:
        FileNotFoundError: a folder given or named by the environment is not a folder.
    """
    def folder(given: str | Path, option: str, what: str) -> Path:
        path = Path(given).expanduser().resolve()
        if not path.is_dir():
            named = f"--{option} {given}" if as_options else f"{option}={str(given)!r}"
            raise MissingInput(f"{named}: {'not a folder' if path.exists() else 'no such folder'}; pass {what}.")
        return path

    chosen: dict[str, Path] = {}
    if extra_judgements is not None:
        chosen["extra_judgements"] = folder(extra_judgements, "extra-judgements" if as_options else "extra_judgements",
                                            "a qrels_with_added folder ({Intent}_{event}_qrels.json files)")
    if devlite is not None:
        chosen["devlite"] = folder(devlite, "devlite", "a DisastIR-DevLite folder (e.g. one written by "
                                                       "`disastir-mteb sample --devlite eval-code`)")
    if data is not None and str(data) != "sample":
        chosen["folder"] = folder(data, "data", "a folder in the published DisastIR layout (corpus.jsonl, query/, "
                                                "qrels/) or 'sample'")
    elif data is not None:
        from disastir_mteb.sample.generator import sample_dir

        chosen["folder"] = sample_dir("small").resolve()
    given = {DATA_DIR_ENV: "folder", DEVLITE_DIR_ENV: "devlite", EXTRA_QRELS_ENV: "extra_judgements"}
    unread = {name: value for name, value in os.environ.items() if given.get(name) not in chosen}
    source = dataclasses.replace(DataSource.from_environment(unread), **chosen)
    if as_options:  # where the Hub's data is missing, the command's own option is named
        source = dataclasses.replace(source, data_option="--data DIR")
    if not keep_joins:
        source = dataclasses.replace(source, keep_joins=False)
    return with_sample_devlite(source, task_names)


def with_sample_devlite(source: DataSource, task_names: Iterable[str]) -> DataSource:
    """``source`` of the sample, with the sample's own DevLite folder where a Test or DevLite task needs one."""
    from disastir_mteb.sample.generator import sample_path

    if source.devlite is not None or source.folder != sample_path("small").resolve():
        return source
    if not any(name in ALL_TASK_NAMES and get_spec(name).split is not Split.full for name in task_names):
        return source
    from disastir_mteb.sample.devlite import devlite_sample_dir

    return dataclasses.replace(source, devlite=devlite_sample_dir("small"))


def needs_hub(model: object, data: DataSource, *, served: bool = False) -> bool:
    """Whether a run would fetch its model or its data from the Hugging Face Hub (whose reachability is then probed)."""
    here = served or not isinstance(model, str) or model in BUILT_IN_MODELS or Path(model).exists()
    return not (here and data.folder is not None)

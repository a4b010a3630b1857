"""Which data the tasks read: a folder in the published layout, the synthetic sample, or the Hub.

The tasks read ``DISASTIR_DATA_DIR`` (and ``DISASTIR_DEVLITE_DIR`` for DisastIR-Test and DevLite) when
they load, and the Hub when it is unset, so choosing data is setting those variables; extra judgements, only
when asked (``--extra-judgements``, ``evaluate(extra_judgements=)``), are ``DISASTIR_EXTRA_QRELS_DIR``.
:func:`data_folders` turns a choice (``disastir-mteb run --data``, ``export --data``,
``disastir_mteb.evaluate(data=)``) into them, one meaning for all three; the command line sets them for
its whole process, ``evaluate`` only while it runs (:func:`use_environment`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from disastir_mteb.data.devlite_layout import DEVLITE_DIR_ENV
from disastir_mteb.data.extra_qrels import EXTRA_QRELS_ENV
from disastir_mteb.data.layout import DATA_DIR_ENV
from disastir_mteb.vocabulary.taxonomy import ALL_TASK_NAMES, Split, get_spec

__all__ = ["data_folders", "use_environment"]


def data_folders(data: str | Path | None, devlite: str | Path | None = None, *, task_names: Iterable[str] = (),
                 as_options: bool = False, extra_judgements: str | Path | None = None) -> dict[str, str]:
    """The environment variables that point the tasks at ``data``, ``devlite`` and ``extra_judgements``, checked.

    Args:
        data: a folder in the published layout (``corpus.jsonl``, ``query/``, ``qrels/``), ``"sample"``
            for the small synthetic sample (generated once into the cache folder; its scores are not
            DisastIR results), or None (leave the choice to ``DISASTIR_DATA_DIR``, else the Hub).
        devlite: a DisastIR-DevLite folder (either published layout), or None. With ``data="sample"``
            and a DisastIR-Test or DevLite task among ``task_names``, the sample's own DevLite folder,
            unless ``DISASTIR_DEVLITE_DIR`` names one already.
        task_names: the tasks to be run (only whether one of them needs DevLite data matters).
        as_options: name the command line's ``--data``/``--devlite`` in errors (else ``data=``/``devlite=``).
        extra_judgements: a ``qrels_with_added`` folder whose judgements the full set's tasks add to the published
            ones (:mod:`disastir_mteb.data.extra_qrels`: never overriding a published grade, integer grades only,
            and the scores labelled as not official), or None (none: the default).

    Returns:
        Variable -> value for what was given; empty for ``data=None, devlite=None`` (and no ``extra_judgements``).

    Raises:
        FileNotFoundError: ``data``, ``devlite`` or ``extra_judgements`` is not a folder (one sentence naming it as
            typed).
    """
    def folder(given: str | Path, option: str, what: str) -> str:
        path = Path(given).expanduser().resolve()
        if not path.is_dir():
            named = f"--{option} {given}" if as_options else f"{option}={str(given)!r}"
            raise FileNotFoundError(f"{named}: {'not a folder' if path.exists() else 'no such folder'}; pass {what}.")
        return str(path)

    chosen: dict[str, str] = {}
    if extra_judgements is not None:
        chosen[EXTRA_QRELS_ENV] = folder(extra_judgements, "extra-judgements" if as_options else "extra_judgements",
                                         "a qrels_with_added folder ({Intent}_{event}_qrels.json files)")
    if devlite is not None:
        chosen[DEVLITE_DIR_ENV] = folder(devlite, "devlite", "a DisastIR-DevLite folder (e.g. one written by "
                                                             "`disastir-mteb sample --devlite eval-code`)")
    if data is None:
        return chosen
    if str(data) != "sample":
        chosen[DATA_DIR_ENV] = folder(data, "data", "a folder in the published DisastIR layout (corpus.jsonl, "
                                                    "query/, qrels/) or 'sample'")
        return chosen
    from disastir_mteb.sample.generator import sample_dir

    chosen[DATA_DIR_ENV] = str(sample_dir("small"))
    needs_devlite = any(name in ALL_TASK_NAMES and get_spec(name).split is not Split.full for name in task_names)
    if needs_devlite and DEVLITE_DIR_ENV not in chosen and not os.environ.get(DEVLITE_DIR_ENV):
        from disastir_mteb.sample.devlite import devlite_sample_dir

        chosen[DEVLITE_DIR_ENV] = str(devlite_sample_dir("small"))
    return chosen


@contextlib.contextmanager
def use_environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration, then restore each as it was (unset if it was unset)."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

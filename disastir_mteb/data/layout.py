"""Finding the published DisastIR layout: the data folder, and each task's query and qrels file in it.

Every file of ``query/`` and ``qrels/`` is placed on one of the 48 tasks through the alias table of the taxonomy. A
built benchmark (its marker says ``"kind": "built"`` and its ``name``) is a folder in the same layout holding only
some of them: its tasks are those with files, named after it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from disastir_mteb.util.errors import InvalidInput, MissingInput
from disastir_mteb.vocabulary.task_record import BUILT_KIND, hub_data, local_data
from disastir_mteb.vocabulary.taxonomy import (
    TASK_SPECS,
    BuiltNames,
    TaskSpec,
    check_built_name,
    parse_task_file,
    task_file_stem,
)

logger = logging.getLogger(__name__)

__all__ = ["BUILT_KIND", "DATA_DIR_ENV", "MARKER", "RUN_DATA_OPTION", "TaskFiles", "built_name", "describe_data",
           "find_task_files", "read_marker", "resolve_data_dir"]

#: The provenance file at the top of a generated folder. Results computed on it say "synthetic"
#: (the runner records it per task); the data loader scans ``query/`` and ``qrels/`` only, so it never
#: mistakes the marker for a task file.
MARKER = "DISASTIR_SAMPLE.json"

DATA_DIR_ENV = "DISASTIR_DATA_DIR"
#: How a data folder is named instead, for a reader of ``mteb run``'s traceback (a command names its own ``--data``).
RUN_DATA_OPTION = "disastir-mteb run: --data DIR"
_JSON_SUFFIXES = (".json", ".jsonl")


def resolve_data_dir(repo: str, revision: str, *, data_option: str = RUN_DATA_OPTION) -> Path:
    """The Hub snapshot of the published layout, through ``huggingface_hub`` (``HF_HUB_OFFLINE``, ``HF_HOME`` hold).

    ``data_option`` is how the reader names a data folder instead, said in the error.

    Raises:
        FileNotFoundError: the data is neither cached nor downloadable (one sentence saying what to pass instead).
    """
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        snapshot = huggingface_hub.snapshot_download(
            repo_id=repo,
            repo_type="dataset",
            revision=revision,
            allow_patterns=["corpus.jsonl", "corpus/*", "query/*", "qrels/*", "README.md"],
        )
    except LocalEntryNotFoundError:
        # The last line of mteb run's traceback, which says what to set: a built-in's short name reads better there
        # than the project's class (disastir-mteb run says the sentence alone: an OSError, caught as one).
        raise FileNotFoundError(
            f"DisastIR data {repo}@{revision} is not in the Hugging Face cache and the Hub cannot be reached "
            f"(offline?); set {DATA_DIR_ENV} to a folder in the published layout ({data_option}) or "
            f"download it once online; `disastir-mteb sample --out DIR` writes synthetic data in that layout to try "
            f"the tools with (its scores are not DisastIR results)."
        ) from None
    return Path(snapshot)


@dataclass(frozen=True)
class TaskFiles:
    """Where each part of the published layout lives inside one data folder."""

    root: Path
    corpus: Path
    queries: dict[TaskSpec, Path]
    qrels: dict[TaskSpec, Path]
    #: The built benchmark's name when the folder is one (then its tasks are only those with files); else None.
    built: str | None = None

    @property
    def built_names(self) -> BuiltNames | None:
        """A built benchmark's name and task names; None for a DisastIR folder."""
        return None if self.built is None else BuiltNames(self.built, tuple(s.name for s in self.built_specs))

    @property
    def built_specs(self) -> tuple[TaskSpec, ...]:
        """A built benchmark's tasks (``MyOrg-QA-MH``, ...), those with files, in the paper's order; () if not built."""
        if self.built is None:
            return ()
        return tuple(TaskSpec(s.intent, s.category, built=self.built) for s in TASK_SPECS if s in self.queries)

    def for_task(self, spec: TaskSpec) -> tuple[Path, Path]:
        """The (query file, qrels file) of one task (of a built one: by its intent and category).

        Raises:
            FileNotFoundError: the folder has no query or no qrels file for this task.
        """
        own = spec.base if spec.built is not None else spec
        missing = [kind for kind, files in (("query", self.queries), ("qrels", self.qrels)) if own not in files]
        if spec.built != self.built:
            holds = f"the built benchmark {self.built}" if self.built is not None else "DisastIR's layout, no built one"
            raise InvalidInput(f"{self.root} holds {holds}: task {spec.name} cannot read it; run "
                               f"{'its tasks' if self.built is not None else spec.name + ' with --data its folder'}.")
        if missing and self.built is not None:
            raise MissingInput(f"{self.root}: the built benchmark {self.built} has no task {spec.name}; its tasks are "
                               f"{', '.join(s.name for s in self.built_specs)}.")
        if missing:
            stem = task_file_stem(spec.intent, spec.category)
            expected = " and ".join(f"query/{stem}.json" if kind == "query" else f"qrels/{stem}_qrels.json"
                                    for kind in missing)
            absent = sorted(s.name for s in TASK_SPECS if s not in self.queries or s not in self.qrels)
            raise MissingInput(
                f"{self.root}: no {' and no '.join(missing)} file for task {spec.name}; "
                f"{len(absent)} of 48 tasks lack a file ({', '.join(absent[:6])}{', ...' if len(absent) > 6 else ''}); "
                f"expected {expected}."
            )
        return self.queries[own], self.qrels[own]


def _place_files(folder: Path, *, built: bool = False) -> dict[TaskSpec, Path]:
    """Place each JSON file of ``query/`` or ``qrels/`` on its task.

    A file that names no task is an error while some task has no file (it is probably that task's
    file, misspelt); once all 48 tasks have theirs, stray files are only a warning naming them. A built
    benchmark holds only some tasks, so a JSON file of it that names no task is always an error.
    """
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    placed: dict[TaskSpec, Path] = {}
    unplaced: list[str] = []
    for path in files:
        try:
            spec = parse_task_file(path.stem) if path.suffix in _JSON_SUFFIXES else None
        except ValueError:
            spec = None
        if spec is None:
            unplaced.append(path.name)
            continue
        if spec in placed:
            raise InvalidInput(f"{folder}: both {placed[spec].name!r} and {path.name!r} map to task {spec.name}; "
                               "remove one of them.")
        placed[spec] = path
    absent = sorted(s.name for s in TASK_SPECS if s not in placed)
    unplaced_json = [name for name in unplaced if name.endswith(_JSON_SUFFIXES)]
    if unplaced_json and built:
        raise InvalidInput(f"{folder}: {len(unplaced_json)} file(s) name no DisastIR intent and category "
                           f"({', '.join(unplaced_json[:5])}{', ...' if len(unplaced_json) > 5 else ''}); expected "
                           "'{intent}_{category}.json' as task_file_stem spells them, e.g. 'QA_Biological.json'.")
    if unplaced_json and absent:
        raise InvalidInput(
            f"{folder}: {len(unplaced_json)} file(s) name no DisastIR task ({', '.join(unplaced_json[:5])}"
            f"{', ...' if len(unplaced_json) > 5 else ''}); expected '{{intent}}_{{category}}.json', and "
            f"{len(absent)} task(s) have no file{': ' + ', '.join(absent[:6]) if absent else ''}."
        )
    if unplaced:
        logger.warning("%s: ignoring %d file(s) that are no task's JSON file (%s).",
                       folder, len(unplaced), ", ".join(unplaced[:5]) + (", ..." if len(unplaced) > 5 else ""))
    return placed


def find_task_files(root: str | Path) -> TaskFiles:
    """Scan a folder in the published layout and place every file on one of the 48 tasks.

    Raises:
        FileNotFoundError: ``root`` is no folder, or ``corpus.jsonl``, ``query/`` or ``qrels/`` is missing.
        ValueError: a JSON file names no task while a task has no file, or two files name one task.
    """
    root = Path(root)
    layout = "a DisastIR data folder holds corpus.jsonl, query/ and qrels/ (the published layout)"
    if not root.is_dir():
        raise MissingInput(f"{root} is not a folder; {layout}.")
    corpus = root / "corpus.jsonl"
    missing = [f"'{p.name}'" for p in (corpus, root / "query", root / "qrels") if not p.exists()]
    if missing:
        raise MissingInput(f"{root}: missing {', '.join(missing)}; {layout}.")
    built = built_name(root)
    queries, qrels = _place_files(root / "query", built=built is not None), _place_files(root / "qrels",
                                                                                          built=built is not None)
    if built is not None:
        if unpaired := sorted({*queries} ^ {*qrels}, key=TASK_SPECS.index):
            raise InvalidInput(f"{root}: the built benchmark {built} has a query file without its qrels file or the "
                               f"reverse for {len(unpaired)} task(s) ({', '.join(s.name for s in unpaired[:6])}); a "
                               "task's two files come together.")
        if not queries:
            raise MissingInput(f"{root}: the built benchmark {built} holds no task files in query/ and qrels/.")
    return TaskFiles(root=root, corpus=corpus, queries=queries, qrels=qrels, built=built)


def built_name(folder: str | Path) -> str | None:
    """The name of the built benchmark ``folder`` holds (its marker's ``name``), or None for any other folder.

    Raises:
        ValueError: the marker says built but its name is missing or not a valid name (one sentence naming it).
    """
    marker = read_marker(folder)
    if not marker or marker.get("kind") != BUILT_KIND:
        return None
    name = marker.get("name")
    try:
        return check_built_name(name)  # type: ignore[arg-type]
    except ValueError as error:
        raise InvalidInput(f"{Path(folder) / MARKER}: {error}") from None


def read_marker(folder: str | Path) -> dict[str, object] | None:
    """The provenance marker of a generated folder, or None; an unreadable one still counts as synthetic."""
    path = Path(folder).expanduser() / MARKER
    if not path.is_file():
        return None
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"synthetic": True}
    return marker if isinstance(marker, dict) else {"synthetic": True}


def describe_data(folder: str | Path | None, *, repo: str, revision: str) -> str:
    """The data string of ``DISASTIR_DATA_DIR=folder`` (the Hub ``repo@revision`` when None or empty)."""
    if not folder:
        return hub_data(repo, revision)
    return local_data(folder, read_marker(folder))

"""The ``embeddings-benchmark/results`` repository's checks, offline: what ``submit --check`` runs.

Read from that repository's tests and workflows (facts 6b): layout ``results/<org>__<model>/<revision>/``,
``model_meta.json`` complete, file name == ``task_name``, every file loads with
``mteb.TaskResult.from_disk``, mteb versions, ``run_settings.jsonl`` coverage, file size, one revision per
task, and the model registry. Findings are :class:`Problem` s: errors fail those checks, warnings pass
them but stop the pull request (an unknown model; tasks not yet in a released mteb).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.version import InvalidVersion, Version

__all__ = ["MAX_FILE_BYTES", "MIN_MTEB_VERSION", "MODEL_META", "RUN_SETTINGS", "Problem", "validate_folders",
           "validate_submission"]

MAX_FILE_BYTES = 10 * 1024 * 1024
"""The results repository's size limit per file (10 MiB)."""
MIN_MTEB_VERSION = Version("2.14.0")
"""The oldest mteb the results repository accepts (the release that introduced ``run_settings.jsonl``)."""
MODEL_META = "model_meta.json"
RUN_SETTINGS = "run_settings.jsonl"
_PLACEHOLDER_REVISIONS = ("no_revision_available", "external")
_SHA1 = re.compile(r"[0-9a-f]{40}")

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One finding of :func:`validate_submission`.

    Attributes:
        severity: ``"error"`` (the results repository's checks fail) or ``"warning"`` (they pass, but the
            pull request will not get through as it is).
        path: the file or folder at fault.
        message: one sentence: what is wrong and what to do.
    """

    severity: Severity
    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.path}: {self.message}"


def validate_submission(folder: str | Path) -> list[Problem]:
    """Check a results folder as the ``embeddings-benchmark/results`` tests and workflows do.

    Args:
        folder: a clone of that repository (holding ``results/``) or its ``results/`` folder.

    Returns:
        Every problem found, errors (its checks fail) and warnings (they pass, the pull request still fails);
        an empty list means ready to submit.

    Raises:
        FileNotFoundError: ``folder`` does not exist or holds no ``results/`` folder.
    """
    folder = Path(folder)
    root = folder / "results" if (folder / "results").is_dir() else folder
    if not folder.is_dir() or root.name != "results":
        raise FileNotFoundError(f"No results folder at {folder}: pass the folder holding results/<org>__<model>/"
                                "<revision>/ (a clone of embeddings-benchmark/results or the out folder of submit).")
    return validate_folders(root, sorted(path for path in root.iterdir() if not path.name.startswith(".")))


def _version(value: object) -> Version | None:
    """A recorded mteb version (the lower end of a range such as ``2.12.16-2.15.4``), None if unusable."""
    if not isinstance(value, str):
        return None
    for candidate in (value, value.split("-", 1)[0]):
        try:
            return Version(candidate)
        except InvalidVersion:
            continue
    return None


def validate_folders(root: Path, model_dirs: list[Path], *, changed: set[Path] | None = None) -> list[Problem]:
    """Check the model folders ``model_dirs`` under ``root``; with ``changed``, per-file checks only on those files."""
    checker = _Checker(changed)
    for model_dir in model_dirs:
        checker.model(model_dir)
    unreleased = sorted(name for name in checker.tasks if not _released_task(name))
    if unreleased:
        shown = ", ".join(unreleased[:3]) + (", ..." if len(unreleased) > 3 else "")
        checker.add("warning", root, f"{len(unreleased)} task(s) ({shown}) are not in a released mteb (this plugin "
                    "registers them), so the results repository's PR comparison workflow, which calls mteb.get_task() "
                    "on every changed file, fails until they are upstreamed.")
    return checker.problems


def _released_task(name: str) -> bool:
    """Whether mteb itself (not a plugin) defines the task ``name``."""
    import mteb

    try:
        task = mteb.get_task(name)
    except (KeyError, ValueError):
        return False
    return type(task).__module__.split(".")[0] == "mteb"


def _expand(entry: dict[str, Any]) -> set[tuple[str, str, str]]:
    """The (task, split, subset) a run_settings.jsonl row covers (``split``/``subset`` or ``splits``/``subsets``)."""
    splits = entry["splits"] if "splits" in entry else [entry.get("split")]
    subsets = entry["subsets"] if "subsets" in entry else [entry.get("subset")]
    return {(entry.get("task"), split, subset) for split in splits or [] for subset in subsets or []
            if isinstance(split, str) and isinstance(subset, str)}


@dataclass
class _Checker:
    """The results repository's checks, collecting problems.

    Its ``make test`` checks every folder (layout, model_meta.json, file name == task_name, duplicates); its
    run-settings check loads only the files a pull request changes (``changed``; None: every file).
    """

    changed: set[Path] | None
    problems: list[Problem] = field(default_factory=list)
    tasks: set[str] = field(default_factory=set)  # tasks of the changed files that load
    known: set[str] = field(init=False)

    def __post_init__(self) -> None:
        import mteb

        self.known = {meta.name for meta in mteb.get_model_metas() if meta.name}

    def add(self, severity: Severity, path: Path, message: str) -> None:
        self.problems.append(Problem(severity, path, message))

    def model(self, folder: Path) -> None:
        if not folder.is_dir():
            self.add("error", folder, "is a file directly under results/; only <org>__<model>/<revision>/ folders "
                                      "belong there.")
            return
        revisions_of: dict[str, list[str]] = defaultdict(list)
        names = {folder.name.replace("__", "/")}
        for revision in sorted(path for path in folder.iterdir() if not path.name.startswith(".")):
            if not revision.is_dir():
                self.add("error", revision, "is a file at the revision level; the layout is "
                                            "results/<org>__<model>/<revision>/<Task>.json.")
                continue
            names.add(self.meta(revision) or "")
            for task in self.revision(revision):
                revisions_of[task].append(revision.name)
        twice = [f"{task} ({', '.join(revisions)})" for task, revisions in sorted(revisions_of.items())
                 if len(revisions) > 1]
        if twice:
            self.add("error", folder, f"{len(twice)} task(s) appear under several revisions: {'; '.join(twice[:3])}"
                                      f"{'; ...' if len(twice) > 3 else ''}; the results repository allows one "
                                      "revision per task and model, so keep one.")
        if not names & self.known:
            self.add("warning", folder, f"model {' / '.join(sorted(n for n in names if '/' in n))} is not in mteb's "
                                        "model registry (mteb.get_model_metas()), so the results repository's model "
                                        "test rejects the pull request until a ModelMeta for it is added to mteb.")

    def meta(self, folder: Path) -> str | None:
        """Check model_meta.json; the model name it holds."""
        path = folder / MODEL_META
        if not path.is_file():
            self.add("error", folder, "has no model_meta.json; mteb writes it beside the task files, so copy it from "
                                      "the run's folder.")
            return None
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            self.add("error", path, f"is not valid JSON ({error}).")
            return None
        if not isinstance(meta, dict):
            self.add("error", path, "is not a JSON object.")
            return None
        name, revision = meta.get("name"), meta.get("revision")
        if not isinstance(name, str) or "/" not in name:
            self.add("error", path, f"names the model {name!r}, which has no organisation; the results repository "
                                    "needs a name like 'org/model'.")
        elif folder.parent.name != name.replace(" ", "_").replace("/", "__"):
            self.add("error", folder.parent, f"does not match the model name {name!r} in model_meta.json; the folder "
                                             f"must be {name.replace(' ', '_').replace('/', '__')}.")
        if not isinstance(revision, str) or revision.lower() in _PLACEHOLDER_REVISIONS:
            self.add("error", path, f"has revision {revision!r}; the results repository needs the model's commit SHA "
                                    "(or a one-character API version).")
        elif not (_SHA1.fullmatch(revision) or len(revision) == 1):
            self.add("error", path, f"has revision {revision!r}, which is neither a 40-character lowercase hex commit "
                                    "SHA nor a single character.")
        elif revision != folder.name:
            self.add("error", folder, f"is named {folder.name!r} but model_meta.json has revision {revision!r}; the "
                                      "folder must be named after the revision.")
        return name if isinstance(name, str) else None

    def revision(self, folder: Path) -> list[str]:
        """Check one revision folder's files; the task names of its result files."""
        for path in sorted(folder.iterdir()):
            if path.is_dir():
                self.add("error", path, "holds runs with experiment settings (ANN search, instructions), and an "
                         "experiments/ folder fails the results repository's folder test: submit plain runs only."
                         if path.name == "experiments" else "is a subfolder of a revision folder, where the results "
                         "repository expects only <Task>.json, model_meta.json and run_settings.jsonl: remove it.")
            elif (size := path.stat().st_size) > MAX_FILE_BYTES:
                self.add("error", path, f"is {size:,} bytes ({size / 2**20:.1f} MiB); the results repository accepts "
                                        f"files up to {MAX_FILE_BYTES:,} bytes.")
        files = sorted(path for path in folder.glob("*.json") if path.name != MODEL_META)
        if not files:
            self.add("error", folder, "holds no task result file beside model_meta.json.")
        loaded: dict[Path, set[tuple[str, str, str]]] = {}
        for path in files:
            if self._task_name_matches(path) and (self.changed is None or path in self.changed):
                keys = self._task_result(path)
                if keys is not None:
                    loaded[path] = keys
                    self.tasks.add(path.stem)
        if loaded:
            self._run_settings(folder / RUN_SETTINGS, loaded)
        return [path.stem for path in files]

    def _task_name_matches(self, path: Path) -> bool:
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            self.add("error", path, f"is not valid JSON ({error}).")
            return False
        task_name = (data.get("task_name") or data.get("mteb_dataset_name")) if isinstance(data, dict) else None
        if task_name != path.stem:
            self.add("error", path, f"has task_name {task_name!r} but is named {path.name}; the results repository "
                                    "requires the file name to be <task_name>.json.")
        return task_name == path.stem

    def _task_result(self, path: Path) -> set[tuple[str, str, str]] | None:
        """Load with mteb as the repository does; the (task, split, hf_subset) scored."""
        import mteb

        try:
            result = mteb.TaskResult.from_disk(path)
        except Exception as error:  # pydantic and mteb raise many types; the repository's check catches all
            detail = re.sub(r"\s*\[type=.*?input_type=\w+\]|For further information visit \S+", "", str(error))
            self.add("error", path, f"does not load with mteb.TaskResult.from_disk ({' '.join(detail.split())[:200]}).")
            return None
        self._version(result.mteb_version, path, "mteb_version")
        keys = set()
        for split, blocks in result.scores.items():
            for block in blocks:
                keys.add((result.task_name, split, block["hf_subset"]))
                where = f"scores[{split!r}][{block['hf_subset']!r}].mteb_version"
                self._version(block.get("mteb_version"), path, where)
        return keys

    def _version(self, value: object, path: Path, where: str) -> None:
        parsed = _version(value)
        if parsed is None or parsed < MIN_MTEB_VERSION:
            self.add("error", path, f"{where} records mteb {value!r}; the results repository needs a parseable "
                                    f"version >= {MIN_MTEB_VERSION} (rerun with a current mteb).")

    def _run_settings(self, path: Path, loaded: dict[Path, set[tuple[str, str, str]]]) -> None:
        if not path.is_file():
            self.add("error", path, "is missing; mteb >= 2.14 writes it beside the task files and the results "
                                    "repository requires it, so copy it from the run's folder.")
            return
        covered: dict[tuple[str, str, str], list[object]] = defaultdict(list)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError as error:
                self.add("error", path, f"line {number} is not valid JSON ({error}).")
                continue
            if not isinstance(entry, dict):
                self.add("error", path, f"line {number} is not a JSON object.")
                continue
            both = [f"'{one}' and '{many}'" for one, many in (("split", "splits"), ("subset", "subsets"))
                    if one in entry and many in entry]
            keys = _expand(entry)
            if both:
                self.add("error", path, f"line {number} has both {' and '.join(both)}; mteb writes one or the other "
                                        "and the results repository rejects both.")
            elif not keys or not all(isinstance(task, str) and task for task, _, _ in keys):
                self.add("error", path, f"line {number} names no task with split(s) and subset(s).")
            else:
                version = entry.get("version")
                for key in keys:
                    covered[key].append(version.get("mteb") if isinstance(version, dict) else None)
        for file, keys in loaded.items():
            missing = sorted(f"{split}/{subset}" for _, split, subset in keys - set(covered))
            if missing:
                self.add("error", file, f"has no run_settings.jsonl entry for {len(missing)} split/subset(s) "
                                        f"({', '.join(missing[:5])}).")
            for key in sorted(keys & set(covered)):
                for version in covered[key]:
                    self._version(version, path, f"the entry for {'/'.join(key)} (version.mteb)")

"""The ``embeddings-benchmark/results`` repository's checks, offline: what ``submit`` and ``submit --check`` run.

An error is a check that repository runs, in its tests or its workflows, and cites it (:attr:`Problem.check`);
its exemption lists are honoured. A warning is either enforced there but fixed only by a change to mteb, or
advice it does not enforce. Warnings and the checks on changed files concern only the folders being submitted.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from disastir_mteb.submission import results_repository as repo
from disastir_mteb.submission.results_repository import EXPERIMENTS, MODEL_META, RUN_SETTINGS, Exemptions
from disastir_mteb.submission.run_settings_check import MIN_MTEB_VERSION, check_run_settings, old_version
from disastir_mteb.util.errors import MissingInput
from disastir_mteb.vocabulary.taxonomy import ALL_TASK_NAMES

__all__ = ["MIN_MTEB_VERSION", "MODEL_META", "RUN_SETTINGS", "Problem", "submitted_folders", "validate_folders",
           "validate_submission"]

_TASKS = ALL_TASK_NAMES  # DisastIR-Test and DevLite task files are DisastIR task files too

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One finding: ``check`` names the results repository's check it stands for (every error has one)."""

    severity: Severity
    path: Path
    message: str
    check: str = ""

    def __str__(self) -> str:
        return f"{self.severity}: {self.path}: {self.message}" + (f" [{self.check}]" if self.check else "")


def validate_submission(folder: str | Path) -> list[Problem]:
    """Check a clone of ``embeddings-benchmark/results`` (or its ``results/``) as its tests and workflows do.

    The folders being submitted are those holding a DisastIR task file; no error means ready to submit.

    Raises:
        FileNotFoundError: ``folder`` does not exist or holds no ``results/`` folder.
    """
    folder = Path(folder)
    root = folder / "results" if (folder / "results").is_dir() else folder
    if not folder.is_dir() or root.name != "results":
        raise MissingInput(f"No results folder at {folder}: pass the folder holding results/<org>__<model>/"
                           "<revision>/ (a clone of embeddings-benchmark/results or the out folder of submit).")
    return validate_folders(root, sorted(path for path in root.iterdir() if path.name != repo.IGNORED),
                            submitted=submitted_folders(root), exemptions=repo.read_exemptions(root.parent))


def submitted_folders(root: Path) -> set[Path]:
    """The result-set folders under ``root`` holding a DisastIR task file: what this plugin submits."""
    return {path.parent for pattern in ("*/*/*.json", f"*/*/{EXPERIMENTS}/*/*.json") for path in root.glob(pattern)
            if path.stem in _TASKS}


def validate_folders(root: Path, model_dirs: list[Path], *, submitted: set[Path], changed: set[Path] | None = None,
                     exemptions: Exemptions | None = None) -> list[Problem]:
    """Check the model folders under ``root``; warnings only for ``submitted``, ``changed`` None meaning all files."""
    checker = _Checker(root, exemptions or Exemptions(), submitted, changed)
    for model_dir in model_dirs:
        checker.model(model_dir)
    return checker.problems


@dataclass
class _Checker:
    """The results repository's checks over model folders, collecting problems."""

    root: Path
    exemptions: Exemptions
    submitted: set[Path]
    changed: set[Path] | None
    problems: list[Problem] = field(default_factory=list)
    tasks: set[str] = field(default_factory=set)  # tasks of the current model's changed files that load
    known: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self.known = repo.registered_models()

    def error(self, check: str, path: Path, message: str, *also: str) -> None:
        self.problems.append(Problem("error", path, message, "; ".join(repo.CHECKS[c] for c in (check, *also))))

    def warn(self, owner: Path, path: Path, message: str, check: str | None = None) -> None:
        """A warning about ``path``, reported only when ``owner`` is a folder being submitted."""
        if owner in self.submitted:
            self.problems.append(Problem("warning", path, message, repo.CHECKS[check] if check else ""))

    def is_changed(self, path: Path, owner: Path) -> bool:
        return owner in self.submitted and (self.changed is None or path in self.changed)

    def model(self, folder: Path) -> None:
        if not folder.is_dir():
            return  # a file directly under results/: none of that repository's tests reads it
        self.tasks = set()
        names, seen = {folder.name.replace("__", "/")}, {}
        revisions_of: dict[str, list[str]] = defaultdict(list)
        for entry in sorted(path for path in folder.iterdir() if path.name != repo.IGNORED):
            exempt = self.exemptions.without_meta(folder.name, entry.name)
            if not entry.is_dir():
                if not exempt:
                    self.error("meta", entry, "is a file at the revision level, where every entry must be a "
                                              "<revision>/ folder holding model_meta.json: remove it.")
                continue
            meta = self.revision(entry, exempt)
            names.add(meta.get("name") if meta and isinstance(meta.get("name"), str) else "")
            revision = meta.get("revision") if meta is not None else entry.name
            if isinstance(revision, (str, type(None))) and revision in seen:
                self.error("duplicate_revision", entry, f"has revision {revision!r} in model_meta.json, as "
                                                        f"{seen[revision]}/ does; keep one folder per revision.")
            seen.setdefault(revision, entry.name)
            if not entry.name.startswith("."):
                for path in entry.glob("*.json"):
                    if path.name != MODEL_META:
                        revisions_of[path.stem].append(entry.name)
        twice = [f"{task} ({', '.join(sorted(revs))})" for task, revs in sorted(revisions_of.items()) if len(revs) > 1]
        if twice and folder.name != "baseline__Human":
            self.error("duplicate_task", folder, f"{len(twice)} task(s) appear under several revisions: "
                                                 f"{'; '.join(twice[:3])}{'; ...' if len(twice) > 3 else ''}; the "
                                                 "results repository allows one revision per task and model, so keep "
                                                 "one.")
        owner = next((path for path in sorted(self.submitted) if folder in path.parents), folder)
        if not names & self.known:
            self.warn(owner, folder, f"model {' / '.join(sorted(n for n in names if '/' in n))} is not in mteb's "
                                     "model registry (mteb.get_model_metas()), so that test fails until a ModelMeta "
                                     "for it is added to mteb.", "registry")
        unreleased = sorted(name for name in self.tasks if not repo.released_task(name))
        if unreleased:
            self.warn(owner, folder, f"{len(unreleased)} task(s) ({', '.join(unreleased[:3])}"
                                     f"{', ...' if len(unreleased) > 3 else ''}) are not in a released mteb (this "
                                     "plugin registers them), so the PR comparison workflow, which calls "
                                     "mteb.get_task() on every changed file, fails until they are upstreamed.",
                      "released_task")

    def revision(self, folder: Path, exempt: bool) -> dict[str, Any] | None:
        """Check one revision folder; its model_meta.json, parsed (None: missing or unreadable)."""
        model, name = folder.parent.name, folder.name
        meta = self.meta(folder / MODEL_META, missing=None if exempt else "meta")
        if meta is not None and not exempt:
            if not isinstance(meta.get("name"), str) or "/" not in meta["name"]:
                self.error("organization", folder / MODEL_META, f"names the model {meta.get('name')!r}, which has "
                                                               "no organisation; the name must be like 'org/model'.")
            revision = meta.get("revision")
            if not self.exemptions.revision_exempt(model, name):
                if not isinstance(revision, str) or revision.lower() in repo.PLACEHOLDER_REVISIONS:
                    self.error("revision", folder / MODEL_META, f"has revision {revision!r}; the results repository "
                                                                "needs the model's commit SHA (or a one-character API "
                                                                "version).")
                elif not (repo.is_sha1(revision) or len(revision) == 1):
                    self.error("revision", folder / MODEL_META, f"has revision {revision!r}, which is neither a "
                                                                "40-character lowercase hex commit SHA nor a single "
                                                                "character.")
                if revision != name and (revision is None or name == "external"):  # else the folder test says so
                    self.error("revision_match", folder, f"is named {name!r} but model_meta.json has revision "
                                                         f"{revision!r}; the folder must be named after the revision.")
        if self.exemptions.generic(model, name):
            self.warn(folder, folder, f"passes as a legacy {name!r} folder only because {self.root.parent} has no "
                                      f"{repo.FOLDER_TEST_FILE} and {repo.METADATA_TEST_FILE} to list the exempt ones "
                                      "(clone embeddings-benchmark/results to check against them); new results "
                                      "need the model's commit SHA.")
        for path in sorted(folder.glob("*.json")):
            if path.name != MODEL_META:
                self.task_name(path, folder, enforced=True)
        for sub in sorted(path for path in folder.iterdir() if path.is_dir()):
            if sub.name == EXPERIMENTS:
                self.meta(sub / MODEL_META, missing=None)  # misplaced if there: the folder test says so
                self.orphans(sub, folder)
                for child in sorted(path for path in sub.iterdir() if path.is_dir()):
                    self.experiment(child)
            else:
                self.stray(sub, folder)
        if meta is None and exempt:
            self.orphans(folder, folder)
        self.result_files(folder)
        return meta

    def experiment(self, folder: Path) -> None:
        """Check an ``experiments/<name>/`` folder, which the folder test places by its model_meta.json."""
        self.meta(folder / MODEL_META, missing=None)
        self.orphans(folder, folder)  # no model_meta.json: only the comparison workflow fails
        for path in sorted(folder.glob("*.json")):
            if path.name != MODEL_META:
                self.task_name(path, folder, enforced=False)
        for sub in sorted(path for path in folder.iterdir() if path.is_dir()):
            self.stray(sub, folder)
        self.result_files(folder)

    def meta(self, path: Path, *, missing: str | None) -> dict[str, Any] | None:
        """Read a model_meta.json and check where the folder test expects it; ``missing``: the check if absent."""
        if not path.is_file():
            if missing:
                self.error(missing, path.parent, "has no model_meta.json; mteb writes it beside the task files, so "
                                                 "copy it from the run's folder.")
            return None
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            self.error("folder", path, f"is not valid JSON ({error}).")
            return None
        if not isinstance(meta, dict):
            self.error("folder", path, "is not a JSON object.")
            return None
        try:
            expected = repo.expected_folder(self.root, path, meta)
        except ValueError as error:
            self.error("folder", path, f"{' '.join(str(error).split())[:300]}, so the folder test cannot place it.")
            return meta
        folder = path.parent
        if expected == folder:
            return meta
        relative = expected.relative_to(self.root) if self.root in expected.parents else expected
        if EXPERIMENTS in path.relative_to(self.root).parts or folder.parent.parent != self.root:
            self.error("folder", folder, f"holds a model_meta.json that the folder test expects in "
                                         f"results/{relative}/; move the files there.")
        elif expected.parent != folder.parent:
            self.error("folder", folder.parent, f"does not match the model name {meta['name']!r} in model_meta.json; "
                                                f"the folder must be {expected.parent.name}.")
        else:
            also = () if self.exemptions.revision_exempt(folder.parent.name, folder.name) else ("revision_match",)
            self.error("folder", folder, f"is named {folder.name!r} but model_meta.json has revision "
                                         f"{meta.get('revision')!r}; the folder must be named after the revision.",
                       *also)
        return meta

    def stray(self, folder: Path, owner: Path) -> None:
        """A subfolder outside the layout (``disastir_per_query/``, ...), with every folder beneath it."""
        found = False
        for sub in (folder, *sorted(path for path in folder.rglob("*") if path.is_dir())):
            if (sub / MODEL_META).is_file():
                self.meta(sub / MODEL_META, missing=None)
            found = self.orphans(sub, owner) or found
        if not found:
            self.warn(owner, folder, "is no part of the results layout (<Task>.json, model_meta.json, "
                                     "run_settings.jsonl, experiments/<name>/); that repository's checks pass it, but "
                                     "leave it out of the pull request.")

    def orphans(self, folder: Path, owner: Path) -> bool:
        """Changed .json files with no model_meta.json beside them; whether ``folder`` holds any .json file."""
        files = [path for path in folder.glob("*.json") if path.name != MODEL_META]
        changed = [path for path in files if self.is_changed(path, owner)]
        if changed and not (folder / MODEL_META).is_file():
            self.error("comparison", folder, f"holds {len(changed)} .json file(s) with no model_meta.json beside "
                                             "them, which the PR comparison workflow opens for every changed .json "
                                             "file; leave them out or add the set's model_meta.json.")
        return bool(files)

    def task_name(self, path: Path, owner: Path, *, enforced: bool) -> None:
        """File name == ``task_name``: a test at the revision level, advice in ``experiments/``."""
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            if enforced or self.is_changed(path, owner):
                self.error("task_name" if enforced else "comparison", path, f"is not valid JSON ({error}).")
            return
        task_name = (data.get("task_name") or data.get("mteb_dataset_name")) if isinstance(data, dict) else None
        if task_name == path.stem:
            return
        message = f"has task_name {task_name!r} but is named {path.name}; the file name must be <task_name>.json"
        if enforced:
            self.error("task_name", path, message + ".")
        else:
            self.warn(owner, path, message + " (that repository tests it at the revision level only).")

    def result_files(self, folder: Path) -> None:
        """The checks on changed files of one result-set folder: size, loading, mteb versions, run settings."""
        for path in sorted(folder.iterdir()):
            if path.is_file() and self.is_changed(path, folder) and (size := path.stat().st_size) > repo.MAX_FILE_BYTES:
                self.error("size", path, f"is {size:,} bytes ({size / 2**20:.1f} MiB); the results repository "
                                         f"accepts files up to {repo.MAX_FILE_BYTES:,} bytes.")
        files = sorted(path for path in folder.glob("*.json") if path.name != MODEL_META)
        if not files and (folder / MODEL_META).is_file():
            self.warn(folder, folder, "holds no task result file beside model_meta.json (the folder test passes it, "
                                      "as model_meta.json is a .json file too).")
        loaded: dict[Path, set[tuple[str, str, str]]] = {}
        for path in files:
            if self.is_changed(path, folder) and (keys := self.task_result(path, folder)) is not None:
                loaded[path] = keys
                self.tasks.add(path.stem)
        if loaded:
            for path, message in check_run_settings(folder / RUN_SETTINGS, loaded):
                self.warn(folder, path, message)

    def task_result(self, path: Path, owner: Path) -> set[tuple[str, str, str]] | None:
        """Load with mteb as the comparison workflow does; the (task, split, hf_subset) scored."""
        import mteb

        try:
            result = mteb.TaskResult.from_disk(path)
        except Exception as error:  # pydantic and mteb raise many types; the workflow fails on any
            detail = re.sub(r"\s*\[type=.*?input_type=\w+\]|For further information visit \S+", "", str(error))
            self.error("comparison_load", path, f"does not load with mteb.TaskResult.from_disk "
                                                f"({' '.join(detail.split())[:200]}).")
            return None
        keys = set()
        for where, value in [("mteb_version", result.mteb_version), *(
                (f"scores[{split!r}][{block['hf_subset']!r}].mteb_version", block.get("mteb_version"))
                for split, blocks in result.scores.items() for block in blocks)]:
            if (message := old_version(value, where)) is not None:
                self.warn(owner, path, message)
        for split, blocks in result.scores.items():
            keys.update((result.task_name, split, block["hf_subset"]) for block in blocks)
        return keys

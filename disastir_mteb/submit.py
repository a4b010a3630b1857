"""``disastir-mteb submit``: DisastIR results -> a folder the results repository's checks accept.

The MTEB leaderboard reads ``embeddings-benchmark/results``: one ``results/<org>__<model>/<revision>/``
folder per model revision holding mteb's ``<Task>.json`` files, ``model_meta.json`` and
``run_settings.jsonl``. :func:`submit` copies plain runs (never ``experiments/<name>/`` sets such as ANN
or instruction runs, which fail that repository's folder test, and never ``disastir_per_query/``) into that
layout byte for byte, each file written atomically, and :func:`validate_submission` repeats the
repository's tests offline: layout, ``model_meta.json``, file name == ``task_name``, loading with
``mteb.TaskResult.from_disk``, mteb versions, ``run_settings.jsonl`` coverage, file size, one revision per
task, and the model registry. Task names are not looked up by those tests (``from_disk`` loads unknown
tasks), but the pull request's comparison workflow calls ``mteb.get_task()`` on every changed file, so
DisastIR results are flagged until the tasks ship in a released mteb.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.version import InvalidVersion, Version

from disastir_mteb.atomic import write_bytes_atomic
from disastir_mteb.results import ResultSet, find_result_sets, load_result_set
from disastir_mteb.taxonomy import TASK_NAMES

__all__ = ["MAX_FILE_BYTES", "MIN_MTEB_VERSION", "Problem", "SubmissionReport", "submit", "validate_submission"]

MAX_FILE_BYTES = 10 * 1024 * 1024
"""The results repository's size limit per file (10 MiB)."""
MIN_MTEB_VERSION = Version("2.14.0")
"""The oldest mteb the results repository accepts (the release that introduced ``run_settings.jsonl``)."""
MODEL_META = "model_meta.json"
RUN_SETTINGS = "run_settings.jsonl"
_PLACEHOLDER_REVISIONS = ("no_revision_available", "external")
_SHA1 = re.compile(r"[0-9a-f]{40}")
_TASKS = frozenset(TASK_NAMES)

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


@dataclass(frozen=True)
class SubmissionReport:
    """What :func:`submit` wrote and what the validation found.

    Attributes:
        folder: the ``results/`` folder written (``out/results``).
        sources: the result-set folders submitted.
        skipped: experiment result sets left out.
        written: files created or replaced.
        unchanged: files already there with the same content (or the same model's ``model_meta.json``).
        problems: :func:`validate_submission` on the submitted model folders.
    """

    folder: Path
    sources: tuple[Path, ...]
    skipped: tuple[Path, ...]
    written: tuple[Path, ...]
    unchanged: tuple[Path, ...]
    problems: tuple[Problem, ...]

    @property
    def errors(self) -> tuple[Problem, ...]:
        """The problems that fail the results repository's checks."""
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        """The problems that pass its checks but stop the pull request."""
        return tuple(p for p in self.problems if p.severity == "warning")

    @property
    def ok(self) -> bool:
        """Whether the folder passes every check (warnings aside)."""
        return not self.errors

    def to_text(self) -> str:
        """A short human summary: what was written, then errors, then warnings."""
        lines = [f"Submitted {len(self.sources)} result set(s) to {self.folder}: {len(self.written)} file(s) written, "
                 f"{len(self.unchanged)} unchanged."]
        if self.skipped:
            lines.append(f"Left out {len(self.skipped)} experiment result set(s) (experiments/ folders fail the "
                         "results repository's folder test).")
        lines += [str(problem) for problem in (*self.errors, *self.warnings)]
        lines.append(f"{len(self.errors)} error(s): fix them before opening a pull request." if self.errors else
                     "No errors: ready for a pull request to embeddings-benchmark/results.")
        return "\n".join(lines)


def submit(results: str | Path, out: str | Path, *, model: str | None = None,
           overwrite: bool = False) -> SubmissionReport:
    """Copy the plain DisastIR runs under ``results`` into ``out/results/<org>__<model>/<revision>/``, then validate.

    ``out`` is meant to be a clone of ``embeddings-benchmark/results`` (or an empty folder). Copied are the
    ``DisastIR-*.json`` task files, ``model_meta.json`` and the task's lines of ``run_settings.jsonl`` (merged
    with lines for other tasks already there); nothing else (no ``disastir_per_query/``). A ``model_meta.json``
    already there for the same model name and revision is kept. Every file is written atomically, and only
    after all conflicts have been checked.

    Args:
        results: any folder :func:`~disastir_mteb.results.find_result_sets` resolves (an mteb output folder,
            a model folder, one result set).
        out: the folder to write ``results/`` into.
        model: submit only this model (``org/name`` or ``org__name``) when ``results`` holds several.
        overwrite: replace task files (and a different ``model_meta.json``) already in ``out``.

    Returns:
        What was written, and the validation of the written model folders.

    Raises:
        FileNotFoundError: ``results`` does not exist or holds no DisastIR results.
        ValueError: no result set of ``model``, only experiment result sets, or two sets for one model revision.
        FileExistsError: files in ``out`` differ from the ones to submit and ``overwrite`` is False.
    """
    sources, skipped = _pick_result_sets(Path(results), model)
    root = Path(out) / "results"
    writes: dict[Path, bytes] = {}
    keep_meta: set[Path] = set()
    for source in sources:
        target = root / source.folder.parent.name / source.folder.name
        if any(path.parent == target for path in writes):
            raise ValueError(f"Two result sets under {results} are for {source.model} at revision {source.revision} "
                             f"({source.folder} and another): pass the one folder to submit.")
        tasks = sorted(path for path in source.folder.glob("*.json") if path.stem in _TASKS)
        writes.update({target / path.name: path.read_bytes() for path in tasks})
        meta = source.folder / MODEL_META
        if meta.is_file():
            writes[target / MODEL_META] = meta.read_bytes()
            if _same_model(target / MODEL_META, meta):
                keep_meta.add(target / MODEL_META)
        settings = _merge_run_settings(source.folder / RUN_SETTINGS, target / RUN_SETTINGS, {p.stem for p in tasks})
        if settings is not None:
            writes[target / RUN_SETTINGS] = settings
    unchanged = {path for path, data in writes.items() if path in keep_meta or (path.is_file() and
                                                                                path.read_bytes() == data)}
    conflicts = sorted(path for path in writes if path.exists() and path not in unchanged and path.name != RUN_SETTINGS)
    if conflicts and not overwrite:
        shown = ", ".join(str(path) for path in conflicts[:3])
        raise FileExistsError(f"{len(conflicts)} file(s) in {root} differ from the results to submit (first: {shown}); "
                              "pass overwrite=True (--overwrite) to replace them.")
    for path, data in writes.items():
        if path not in unchanged:
            write_bytes_atomic(path, data)
    model_dirs = sorted({path.parent.parent for path in writes})
    return SubmissionReport(folder=root, sources=tuple(s.folder for s in sources),
                            skipped=tuple(s.folder for s in skipped), written=tuple(sorted(set(writes) - unchanged)),
                            unchanged=tuple(sorted(unchanged)),
                            problems=tuple(_validate(root, model_dirs, changed=set(writes))))


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
    return _validate(root, sorted(path for path in root.iterdir() if not path.name.startswith(".")))


def _pick_result_sets(results: Path, model: str | None) -> tuple[list[ResultSet], list[ResultSet]]:
    """The plain result sets to submit and the experiment sets left out."""
    found = [load_result_set(folder) for folder in find_result_sets(results)]
    if not found:
        raise FileNotFoundError(f"{results} holds no DisastIR result files (DisastIR-*.json); run "
                                "`disastir-mteb run -m MODEL` first.")
    if model is not None:
        wanted = model.replace("__", "/")
        names = sorted({s.model for s in found})
        found = [s for s in found if s.model == wanted]
        if not found:
            close = difflib.get_close_matches(wanted, names, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"No results for model {model!r} under {results}; it holds {', '.join(names)}.{hint}")
    plain = [s for s in found if not _is_experiment(s)]
    experiments = [s for s in found if _is_experiment(s)]
    if not plain:
        labels = "; ".join(sorted({s.label for s in experiments}))
        names = " or ".join(sorted({s.model for s in experiments}))
        raise ValueError(f"{results} holds only experiment results ({labels}), which the results repository rejects "
                         f"because an experiments/ folder fails its folder test: run `disastir-mteb run -m {names}` "
                         "without --search ann and --instructions, and submit that plain run.")
    return plain, experiments


def _is_experiment(result_set: ResultSet) -> bool:
    return result_set.folder.parent.name == "experiments" or bool(result_set.experiment)


def _same_model(existing: Path, new: Path) -> bool:
    """Whether ``existing`` is a model_meta.json of the same model name and revision as ``new``."""
    try:
        old, ours = json.loads(existing.read_text(encoding="utf-8")), json.loads(new.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(old, dict) and isinstance(ours, dict) and all(old.get(k) == ours.get(k) for k in ("name",
                                                                                                        "revision"))


def _line_task(line: str) -> str | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry.get("task") if isinstance(entry, dict) else None


def _merge_run_settings(source: Path, target: Path, tasks: set[str]) -> bytes | None:
    """The source's lines for ``tasks`` after the target's lines for other tasks (lines kept verbatim)."""
    if not source.is_file():
        return None
    ours = [line for line in source.read_text(encoding="utf-8").splitlines()
            if line.strip() and _line_task(line) in tasks | {None}]
    theirs = [line for line in target.read_text(encoding="utf-8").splitlines()
              if line.strip() and _line_task(line) not in tasks] if target.is_file() else []
    return "".join(line + "\n" for line in (*theirs, *ours)).encode("utf-8")


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


def _validate(root: Path, model_dirs: list[Path], *, changed: set[Path] | None = None) -> list[Problem]:
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

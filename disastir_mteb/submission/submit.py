"""``disastir-mteb submit``: DisastIR results -> a folder the results repository's checks accept.

Each result set is filed where mteb's ``ResultCache`` files it, the model folders are validated as they will be
(on a temporary copy), and only when they pass are the files copied, byte for byte and atomically: a submission
with errors leaves ``out`` as it was. Nothing is written outside ``out``, and only DisastIR results are
submitted (not a set computed on generated data or with extra judgements, nor one whose files contradict
themselves or their data).

mteb's ``ResultCache.submit_results`` is not used: it goes over the network, commits (and may open the pull
request), and rewrites files already there; here the pull request stays the user's and a file that differs is
refused unless ``overwrite``.
"""

from __future__ import annotations

import difflib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from disastir_mteb.results.provenance import provenance_of
from disastir_mteb.results.result_sets import ResultSet, find_result_sets, load_result_sets
from disastir_mteb.submission import results_repository as repo
from disastir_mteb.submission.checks import Problem, validate_folders, validate_submission
from disastir_mteb.submission.results_repository import EXPERIMENTS, MODEL_META, RUN_SETTINGS
from disastir_mteb.util.atomic import write_bytes_atomic
from disastir_mteb.util.errors import ExistingOutput, InvalidInput, MissingInput
from disastir_mteb.vocabulary.task_record import DATA_KEY, is_extended
from disastir_mteb.vocabulary.taxonomy import ALL_TASK_NAMES

__all__ = ["Problem", "SubmissionReport", "submit", "validate_submission"]

_TASKS = ALL_TASK_NAMES  # the full set's tasks and DisastIR-Test's and DevLite's: all real mteb tasks


@dataclass(frozen=True)
class SubmissionReport:
    """What :func:`submit` wrote (nothing when there are errors) and what the validation found.

    ``notes`` has one line per set whose per-query files were not re-scored against their data, and why.
    """

    folder: Path
    sources: tuple[Path, ...]
    written: tuple[Path, ...]
    unchanged: tuple[Path, ...]
    problems: tuple[Problem, ...]
    notes: tuple[str, ...] = ()

    @property
    def errors(self) -> tuple[Problem, ...]:
        """The problems that fail the results repository's checks."""
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        """Advice, and checks that only a change to mteb makes pass (for the submitted sets only)."""
        return tuple(p for p in self.problems if p.severity == "warning")

    @property
    def ok(self) -> bool:
        """Whether the folder passes every check (warnings aside)."""
        return not self.errors

    def to_text(self) -> str:
        """A short human summary: what was written (nothing, with errors), then errors, then warnings."""
        experiments = sum(path.parent.name == EXPERIMENTS for path in self.sources)
        sets = (f"{len(self.sources)} result set(s) ({experiments} with experiment settings, filed under "
                "experiments/)")
        lines = [f"Checked {sets} for {self.folder}: nothing written." if self.errors else
                 f"Submitted {sets} to {self.folder}: {len(self.written)} file(s) written, "
                 f"{len(self.unchanged)} unchanged."]
        lines += [str(problem) for problem in (*self.errors, *self.warnings)]
        lines.append(f"{len(self.errors)} error(s): fix them and submit again; nothing was written." if self.errors else
                     "No errors: ready for a pull request to embeddings-benchmark/results.")
        return "\n".join(lines)


def submit(results: str | Path, out: str | Path, *, model: str | None = None,
           overwrite: bool = False) -> SubmissionReport:
    """Check the DisastIR result sets under ``results``, then copy them into ``out/results/`` as mteb files them.

    Copied are the task files, ``model_meta.json`` and the tasks' lines of ``run_settings.jsonl``; everything is
    checked first, and with any error nothing is written (:attr:`SubmissionReport.ok` is False).

    Args:
        results: an mteb output folder, a model folder or one result set.
        out: a clone of ``embeddings-benchmark/results`` (its exemption lists are honoured) or an empty folder.
        model: submit only this model (``org/name`` or ``org__name``) when ``results`` holds several.
        overwrite: replace task files (and a different ``model_meta.json``) already in ``out``.

    Raises:
        FileNotFoundError: ``results`` does not exist or holds no DisastIR results.
        ValueError: a result file contradicts itself or its data; a set computed on generated data or with extra
            judgements; ``out/results`` already holds the sets; no result set of ``model``; an experiment set whose
            revision folder would have no ``model_meta.json``; two sets for one target folder.
        FileExistsError: files in ``out`` differ from the ones to submit and ``overwrite`` is False.
    """
    _refuse_path_names(find_result_sets(Path(results).resolve(), split=None))  # before any file is believed
    folders = _pick_result_sets(Path(results).resolve(), model)  # every file read and checked here, once
    sources = [sets[0] for sets in folders]
    _refuse_synthetic(folders)
    _refuse_extended(folders)
    _refuse_copy_onto_itself(Path(results), Path(out), sources)
    root = Path(out) / "results"
    targets: dict[Path, ResultSet] = {}
    for source in sources:
        target = _target(root, source)
        if target in targets:
            raise InvalidInput(f"Two result sets under {results} are for {source.label} at revision {source.revision} "
                               f"({targets[target].folder} and {source.folder}): pass the one folder to submit.")
        targets[target] = source
    _refuse_lone_experiments(targets)
    writes: dict[Path, bytes] = {}
    keep_meta: set[Path] = set()
    for target, source in targets.items():
        _check_inside(Path(out), target)  # before reading the run_settings.jsonl already there
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
    for path in writes:
        _check_inside(Path(out), path)
    unchanged = {path for path, data in writes.items() if path in keep_meta or (path.is_file() and
                                                                                path.read_bytes() == data)}
    conflicts = sorted(path for path in writes if path.exists() and path not in unchanged and path.name != RUN_SETTINGS)
    if conflicts and not overwrite:
        shown = ", ".join(str(path) for path in conflicts[:3])
        raise ExistingOutput(f"{len(conflicts)} file(s) in {root} differ from the results to submit (first: {shown}); "
                             "pass overwrite=True (--overwrite) to replace them.")
    model_dirs = sorted({root / target.relative_to(root).parts[0] for target in targets})
    problems = _validate_staged(Path(out), root, model_dirs, {p: d for p, d in writes.items() if p not in unchanged},
                                submitted=set(targets), changed=set(writes))
    errors = any(problem.severity == "error" for problem in problems)
    for path, data in writes.items():
        if path not in unchanged and not errors:
            write_bytes_atomic(path, data)
    return SubmissionReport(folder=root, sources=tuple(s.folder for s in targets.values()),
                            written=() if errors else tuple(sorted(set(writes) - unchanged)),
                            unchanged=tuple(sorted(unchanged)), problems=tuple(problems),
                            notes=tuple(note for sets in folders for found in sets if (note := found.unchecked)))


def _validate_staged(out: Path, root: Path, model_dirs: list[Path], writes: dict[Path, bytes], *,
                     submitted: set[Path], changed: set[Path]) -> list[Problem]:
    """The results repository's checks on ``model_dirs`` as they will be once ``writes`` are written, on a copy.

    Checking a copy lets a submission that would fail write nothing; the problems name the paths in ``out``.
    """
    with tempfile.TemporaryDirectory(prefix="disastir-submit-") as temporary:
        stage = Path(temporary) / "results"
        stage.mkdir()
        for model_dir in model_dirs:
            if model_dir.is_dir():
                shutil.copytree(model_dir, stage / model_dir.name)
        for path, data in writes.items():
            staged = stage / path.relative_to(root)
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.write_bytes(data)

        def staged(paths: set[Path]) -> set[Path]:
            return {stage / path.relative_to(root) for path in paths}

        problems = validate_folders(stage, [stage / model_dir.name for model_dir in model_dirs],
                                    submitted=staged(submitted), changed=staged(changed),
                                    exemptions=repo.read_exemptions(out))
        return [Problem(problem.severity, root / problem.path.relative_to(stage),
                        problem.message.replace(str(stage), str(root)).replace(str(stage.parent), str(out)),
                        problem.check) for problem in problems]


def _refuse_synthetic(folders: list[list[ResultSet]]) -> None:
    """Refuse result sets computed on generated data (a built benchmark's always); sets silent on their data pass."""
    found = [result_set for sets in folders for result_set in sets]
    for refused, why in (
            ([r for r in found if r.built is not None],
             lambda first: f"its scores are of the built benchmark {first.built} ({provenance_of(first).dataset}), "
                           "not DisastIR; the results repository takes DisastIR's results only (disastir-mteb report "
                           "and compare read these)."),
            ([r for r in found if r.synthetic],
             lambda first: f"its scores were computed on generated data ({provenance_of(first).dataset}), so they "
                           "are not DisastIR results; run the model on the DisastIR data (without --data sample or a "
                           "generated DISASTIR_DATA_DIR) and submit that.")):
        if refused:
            more = f" (and {len(refused) - 1} more result set(s) here)" if len(refused) > 1 else ""
            raise InvalidInput(f"Refusing to submit {refused[0].folder}{more}: {why(refused[0])}")


def _refuse_extended(folders: list[list[ResultSet]]) -> None:
    """Refuse result sets scored with extra judgements (``run --extra-judgements``): per-study estimates."""
    for sets in folders:
        for found in sets:
            for task in sorted(found.scores):
                data = found.task_record(task).get(DATA_KEY)
                extra = (found.task_data(task) or {}).get("extra_judgements")
                if (isinstance(data, str) and is_extended(data)) or extra:
                    raise InvalidInput(f"Refusing to submit {found.folder}: {found.file_task(task)} was scored with "
                                       f"extra judgements ({data if isinstance(data, str) else extra}), a per-study "
                                       "estimate rather than an official DisastIR score; run the model without "
                                       "--extra-judgements and submit that.")


def _refuse_copy_onto_itself(results: Path, out: Path, sources: list[ResultSet]) -> None:
    """Refuse an ``out`` whose ``results/`` already holds the sets to submit (``submit results --out results``)."""
    target = (out / "results").resolve()
    inside = [source.folder for source in sources if source.folder == target or target in source.folder.parents]
    if inside:
        raise InvalidInput(f"Refusing to submit {results} into {out}: its result sets already lie in {out / 'results'} "
                           f"(first: {inside[0]}), so submit would copy the run onto itself, per-query files beside, "
                           "instead of into a clone; clone embeddings-benchmark/results into a folder of its own (git "
                           "clone https://github.com/embeddings-benchmark/results mteb-results) and pass --out "
                           "mteb-results.")


def _pick_result_sets(results: Path, model: str | None) -> list[list[ResultSet]]:
    """The result-set folders to submit, each read and checked as all its query sets, the full set's first."""
    found = [load_result_sets(folder) for folder in find_result_sets(results, split=None)]
    if not found:
        raise MissingInput(f"{results} holds no DisastIR result files (DisastIR-*.json); run "
                           "`disastir-mteb run -m MODEL` first.")
    if model is not None:
        wanted = model.replace("__", "/")
        names = sorted({sets[0].model for sets in found})
        found = [sets for sets in found if sets[0].model == wanted]
        if not found:
            close = difflib.get_close_matches(wanted, names, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise InvalidInput(f"No results for model {model!r} under {results}; it holds {', '.join(names)}.{hint}")
    return found


def _target(root: Path, source: ResultSet) -> Path:
    """Where mteb's ``ResultCache`` files ``source``, and the folder test expects it.

    An experiment whose ``model_meta.json`` does not validate keeps its folder's name: the checks report it.
    """
    folder = root / repo.model_folder_name(source.model) / source.revision
    if not _is_experiment(source):
        return folder
    try:
        meta = json.loads((source.folder / MODEL_META).read_text(encoding="utf-8"))
        name = repo.experiment_name(meta) if isinstance(meta, dict) else None
    except (OSError, ValueError):
        name = None
    if name is None or name in (".", "..") or "/" in name or "\\" in name:
        name = source.folder.name
    return folder / EXPERIMENTS / name


def _refuse_lone_experiments(targets: dict[Path, ResultSet]) -> None:
    """Refuse an experiment set whose revision folder would have no ``model_meta.json`` (only a plain run writes it)."""
    with_meta = {target for target, source in targets.items() if not _is_experiment(source)
                 and (source.folder / MODEL_META).is_file()}
    for target, source in sorted(targets.items()):
        revision = target.parent.parent
        if _is_experiment(source) and revision not in with_meta and not (revision / MODEL_META).is_file():
            raise InvalidInput(f"Refusing to submit {source.folder} alone: the results repository needs a "
                               f"model_meta.json in {revision} ({repo.CHECKS['meta']}), which only a plain run writes; "
                               f"run `disastir-mteb run -m {source.model}` without --search ann and --instructions, "
                               "and "
                               "submit both.")


def _check_inside(out: Path, path: Path) -> None:
    """Refuse ``path`` unless it stays inside ``out`` once every symbolic link on the way is followed."""
    real, home = path.resolve(), out.resolve()
    if real != home and home not in real.parents:
        raise InvalidInput(f"Refusing to write {path}: a symbolic link leads it to {real}, outside {out}; remove the "
                           "link or choose another output folder.")


def _refuse_path_names(folders: list[Path]) -> None:
    """Refuse a model name or ``task_name`` that reads as a path (it could lead a copy out of ``out``), said as such.

    This runs first, before the other checks would call such a file misfiled or copied.
    """
    for folder in folders:
        meta = _json_object(folder / MODEL_META)
        name = meta.get("name")
        if isinstance(name, str) and ("\\" in name or any(part in ("", ".", "..") for part in name.split("/"))):
            raise InvalidInput(f"Refusing to submit {folder}: its model name {name!r} (model_meta.json) reads as a "
                               "file "
                               "path ('..', '.', an empty part or '\\'); fix the model's name and rerun.")
        for path in sorted(path for path in folder.glob("DisastIR-*.json") if path.stem in _TASKS):
            task = _json_object(path).get("task_name")
            if isinstance(task, str) and ("/" in task or "\\" in task or ".." in task):
                raise InvalidInput(f"Refusing to submit {path}: its task_name {task!r} reads as a file path ('..', '/' "
                                   "or '\\'), and the results repository names files after tasks; fix the name and "
                                   "rerun the task.")


def _json_object(path: Path) -> dict[str, object]:
    """The JSON object in ``path``; {} when it is missing or not one (the checks after say so, naming it)."""
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return content if isinstance(content, dict) else {}


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
    ours = [line for line in _text_lines(source) if line.strip() and _line_task(line) in tasks | {None}]
    theirs = [line for line in _text_lines(target) if line.strip() and _line_task(line) not in tasks
              ] if target.is_file() else []
    return "".join(line + "\n" for line in (*theirs, *ours)).encode("utf-8")


def _text_lines(path: Path) -> list[str]:
    """The lines of a ``run_settings.jsonl``; a damaged one is refused naming it, not merged or copied."""
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise InvalidInput(f"{path} is damaged: it is not UTF-8 text ({error}); mteb writes one JSON line per task "
                           "run: restore it, or delete it and rerun the tasks with --overwrite.") from None



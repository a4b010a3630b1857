"""What the ``embeddings-benchmark/results`` repository enforces, and what a clone of it says.

A clone's exemption lists are read with :mod:`ast`, never imported or run; without a clone, the generic rule
holds: a ``no_revision_available`` or ``external`` revision folder is a legacy one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from disastir_mteb.results.result_sets import model_folder_name  # the folder test maps a name as mteb does
from disastir_mteb.util.errors import InvalidInput

__all__ = ["CHECKS", "EXPERIMENTS", "FOLDER_TEST_FILE", "IGNORED", "MAX_FILE_BYTES", "METADATA_TEST_FILE",
           "MODEL_META", "PLACEHOLDER_REVISIONS", "RUN_SETTINGS", "Exemptions", "expected_folder",
           "experiment_name", "is_sha1", "model_folder_name", "read_exemptions", "registered_models",
           "released_task"]

MAX_FILE_BYTES = 10 * 1024 * 1024
"""The size limit per changed file of ``.github/workflows/check_file_sizes.yml`` (10 MiB)."""
MODEL_META = "model_meta.json"
RUN_SETTINGS = "run_settings.jsonl"
EXPERIMENTS = "experiments"
IGNORED = ".DS_Store"
"""The one name the repository's tests skip in ``results/`` and in a model folder."""
PLACEHOLDER_REVISIONS = ("no_revision_available", "external")
FOLDER_TEST_FILE = "tests/test_correct_folder_structure.py"
METADATA_TEST_FILE = "tests/test_ensure_correct_metadata.py"

_COMPARISON = ".github/workflows/model-results-comparison.yaml runs scripts/create_pr_results_comment.py"
#: The results repository's checks, by the key each problem is filed under (file::function, or a workflow).
CHECKS: dict[str, str] = {
    "folder": f"{FOLDER_TEST_FILE}::test_correct_folder_structure",
    "meta": f"{METADATA_TEST_FILE}::test_model_meta_in_folders",
    "revision": f"{METADATA_TEST_FILE}::test_revision_is_specified_for_new_additions",
    "organization": f"{METADATA_TEST_FILE}::test_organization_is_specified_for_new_additions",
    "revision_match": f"{METADATA_TEST_FILE}::test_that_revision_match",
    "duplicate_revision": f"{METADATA_TEST_FILE}::test_no_duplicate_revisions",
    "task_name": "tests/test_task_name_matches_filename.py::test_task_name_matches_filename",
    "duplicate_task": "tests/test_duplicate_results.py::test_no_duplicate_task_results_exist",
    "size": ".github/workflows/check_file_sizes.yml (job check-file-size)",
    "comparison": f"{_COMPARISON}::extract_new_models_and_tasks",
    "comparison_load": f"{_COMPARISON}::create_comparison_table (ResultCache.load_results -> TaskResult.from_disk)",
    # warnings: enforced there, but only a change to mteb itself makes them pass
    "registry": "tests/test_model_implementation.py::test_all_models_are_implemented_in_mteb",
    "released_task": f"{_COMPARISON}::extract_new_models_and_tasks (mteb.get_task)",
}

Pair = tuple[str, str]


@dataclass(frozen=True)
class Exemptions:
    """The repository's legacy exemptions as (model folder, revision folder) pairs; None: no clone, the generic rule."""

    folders_without_meta: frozenset[Pair] | None = None
    revision_exceptions: frozenset[Pair] | None = None

    def without_meta(self, model: str, revision: str) -> bool:
        """Whether ``model/revision`` needs no ``model_meta.json`` (and no metadata test runs on it)."""
        if self.folders_without_meta is None:
            return revision in PLACEHOLDER_REVISIONS
        return (model, revision) in self.folders_without_meta

    def revision_exempt(self, model: str, revision: str) -> bool:
        """Whether ``model/revision`` may keep a placeholder revision, or one unlike its folder's name."""
        if self.revision_exceptions is None:
            return revision in PLACEHOLDER_REVISIONS
        return (model, revision) in self.revision_exceptions

    def generic(self, model: str, revision: str) -> bool:
        """Whether ``model/revision`` passes only by the generic rule (no clone's list was read)."""
        return ((self.folders_without_meta is None and self.without_meta(model, revision))
                or (self.revision_exceptions is None and self.revision_exempt(model, revision)))


def _pairs(path: Path, name: str) -> frozenset[Pair] | None:
    """The module-level list ``name`` of the Python file ``path`` as pairs; None if absent or not literal."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value_node = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value_node = [node.target], node.value
        else:
            continue
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            try:
                value = ast.literal_eval(value_node)
            except ValueError:  # not a literal: the generic rule
                return None
            if isinstance(value, (list, tuple, set)):
                return frozenset(tuple(pair) for pair in value if isinstance(pair, (list, tuple)) and len(pair) == 2
                                 and all(isinstance(part, str) for part in pair))
            return None
    return frozenset()  # the test file without the list: no exemption left


def read_exemptions(clone: Path) -> Exemptions:
    """The exemption lists of a clone; a list missing or not a literal falls back to the generic rule."""
    return Exemptions(_pairs(clone / FOLDER_TEST_FILE, "folders_without_meta"),
                      _pairs(clone / METADATA_TEST_FILE, "revision_exceptions"))


def is_sha1(value: str) -> bool:
    """The metadata test's ``is_sha1``: 40 lowercase hex characters."""
    return len(value) == 40 and all(c in "0123456789abcdef" for c in value)


def experiment_name(meta: dict[str, Any]) -> str | None:
    """``ModelMeta.experiment_name`` of a ``model_meta.json``, validated as the folder test does.

    Raises:
        ValueError: mteb's ``ModelMeta`` rejects the file (pydantic's ``ValidationError`` is one).
    """
    from mteb.models import ModelMeta

    return ModelMeta.model_validate({**meta, "loader": None}).experiment_name  # "to hack validation", as there


def expected_folder(root: Path, meta_file: Path, meta: dict[str, Any]) -> Path:
    """Where tests/test_correct_folder_structure.py expects ``meta_file``, a ``model_meta.json`` under ``root``.

    Raises:
        ValueError: the test itself would fail before comparing (no usable name, revision or experiment).
    """
    name, revision = meta.get("name"), meta.get("revision")
    if not isinstance(name, str):
        raise InvalidInput(f"has no model name (name is {name!r})")
    if revision is None:
        revision = meta_file.parent.name
    if meta_file.parent.name == "external":
        revision = "external"
    if not isinstance(revision, str):
        raise InvalidInput(f"has revision {revision!r}, not a string")
    folder = root / model_folder_name(name) / revision
    if EXPERIMENTS not in meta_file.relative_to(root).parts:
        return folder
    experiment = experiment_name(meta)
    if experiment is None:
        raise InvalidInput("is in an experiments/ folder but has no experiment_kwargs")
    return folder / EXPERIMENTS / experiment


def registered_models() -> set[str]:
    """The model names in mteb's registry, which tests/test_model_implementation.py requires."""
    import mteb

    return {meta.name for meta in mteb.get_model_metas() if meta.name}


def released_task(name: str) -> bool:
    """Whether mteb itself (not a plugin) defines the task ``name``, as the comparison workflow needs."""
    import mteb

    try:
        task = mteb.get_task(name)
    except (KeyError, ValueError):
        return False
    return type(task).__module__.split(".")[0] == "mteb"

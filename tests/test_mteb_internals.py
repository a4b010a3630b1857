"""The canary of every private name of another library the plugin reads, and the door's accessors.

One test pins the names of all four modules that touch them: the door (``util/mteb_internals.py``) and the
three that register into or patch mteb (``registration.py``, ``leaderboard/mteb_patch.py``,
``runner/scoring_patch.py``). ``tests/test_layers.py`` checks that no other module reads one and that each
of the four lists every one it reads, so an upgrade that moves a name fails here, naming it.
"""

from __future__ import annotations

import datasets
import mteb
import pytest

from disastir_mteb import registration
from disastir_mteb.leaderboard import mteb_patch
from disastir_mteb.runner import scoring_patch
from disastir_mteb.util import mteb_internals
from disastir_mteb.util.patching import missing_names


def test_every_private_name_the_plugin_reads_is_still_there() -> None:
    moved = {"util/mteb_internals.py": mteb_internals.missing(), "registration.py": registration.check_internals(),
             "leaderboard/mteb_patch.py": mteb_patch.missing(), "runner/scoring_patch.py": scoring_patch.missing()}
    assert not any(moved.values()), (
        f"mteb {mteb.__version__} / datasets {datasets.__version__} moved names disastir-mteb reads: "
        + "; ".join(f"{module}: {', '.join(names)}" for module, names in moved.items() if names))


def test_a_moved_name_is_named_with_its_module_and_class() -> None:
    assert missing_names({"mteb.abstasks.task_metadata": ("TaskMetadata._validate_metadata", "TaskMetadata._gone",
                                                          "Gone.name"),
                          "mteb._gone_module": ("anything",)}) == [
        "mteb.abstasks.task_metadata.TaskMetadata._gone", "mteb.abstasks.task_metadata.Gone.name", "mteb._gone_module"]


def test_search_depth_is_what_mteb_asks_the_search_for() -> None:
    task = mteb.get_task("DisastIR-QA-Bio")
    assert mteb_internals.search_depth(task) == max(task.k_values) == 100


def test_dataset_fingerprint_follows_the_content_and_is_none_for_other_values() -> None:
    dataset = datasets.Dataset.from_dict({"text": ["flood", "storm"]})
    fingerprint = mteb_internals.dataset_fingerprint(dataset)
    assert isinstance(fingerprint, str) and fingerprint
    assert mteb_internals.dataset_fingerprint(dataset) == fingerprint
    assert mteb_internals.dataset_fingerprint(dataset.map(lambda row: {"text": row["text"].upper()})) != fingerprint
    assert mteb_internals.dataset_fingerprint(["flood", "storm"]) is None


def test_flattening_is_asked_of_the_model_and_assumed_when_it_cannot_say(bundled_model: object) -> None:
    assert mteb_internals.may_flatten_inputs(bundled_model.model) is False  # MiniLM: the plain, length-ordered path
    assert mteb_internals.may_flatten_inputs(object()) is True


def test_validate_metadata_runs_mteb_checks_construction_skips() -> None:
    metadata = mteb.get_task("DisastIR-QA-Bio").metadata
    mteb_internals.validate_metadata(metadata)
    with pytest.raises(ValueError, match="xx"):
        mteb_internals.validate_metadata(metadata.model_copy(update={"eval_langs": ["xx-Latn"]}))

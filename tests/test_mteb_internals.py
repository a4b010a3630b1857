"""The canary of every private name of another library the plugin reads, the door's accessors, and the public
ways that replaced private names, checked against what the library does.

One test pins the names of all four modules that touch them: the door (``util/mteb_internals.py``) and the
three that register into or patch mteb (``registration.py``, ``leaderboard/mteb_patch.py``,
``runner/scoring_patch.py``). ``tests/test_layers.py`` checks that no other module reads one and that each
of the four lists every one it reads, so an upgrade that moves a name fails here, naming it. This file is part of
the compatibility subset (``.ci/compat_tests``), run on the oldest mteb ``pyproject.toml`` accepts and the newest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def test_the_search_depth_is_what_mteb_asks_the_search_for(sample_data: Path, use_data: object) -> None:
    """The prefetch files ``max(k_values)`` per task ahead of mteb (``search.prefetch.search_depth``): what mteb's
    retrieval evaluation then passes to ``search(top_k=...)``."""
    from disastir_mteb.models.hashing_encoder import HashingEncoder
    from disastir_mteb.search.prefetch import search_depth
    from disastir_mteb.search.shared_corpus import SharedCorpusSearch
    from disastir_mteb.vocabulary.run_settings import RunSettings

    asked: list[int] = []

    class Recording(SharedCorpusSearch):
        def search(self, queries: Any, *, top_k: int, **kwargs: Any) -> Any:
            asked.append(top_k)
            return super().search(queries, top_k=top_k, **kwargs)

    use_data(sample_data)
    task = mteb.get_task("DisastIR-QA-Bio")
    searcher = Recording(HashingEncoder(), RunSettings(progress=False), store=None)
    mteb.evaluate(searcher, task, cache=None, show_progress_bar=False)
    assert asked == [search_depth(task)] == [max(task.k_values)] == [100]


def test_dataset_fingerprint_follows_the_content_and_is_none_for_other_values() -> None:
    dataset = datasets.Dataset.from_dict({"text": ["flood", "storm"]})
    fingerprint = mteb_internals.dataset_fingerprint(dataset)
    assert isinstance(fingerprint, str) and fingerprint
    assert mteb_internals.dataset_fingerprint(dataset) == fingerprint
    assert mteb_internals.dataset_fingerprint(dataset.map(lambda row: {"text": row["text"].upper()})) != fingerprint
    assert mteb_internals.dataset_fingerprint(["flood", "storm"]) is None


def test_flattening_is_read_from_the_public_module_attribute(bundled_model: Any) -> None:
    """sentence-transformers' own answer (``_can_flatten_inputs``, where it has one), from its public attribute."""
    from disastir_mteb.search.encoding import may_flatten_inputs

    model = bundled_model.model
    assert may_flatten_inputs(model) is False  # MiniLM on CPU: the plain, length-ordered path
    own = getattr(model, "_can_flatten_inputs", None)
    if own is not None:
        assert may_flatten_inputs(model) is own()
    assert may_flatten_inputs(object()) is True  # cannot say: the model keeps its own encode


def test_task_languages_are_checked_as_mteb_checks_them() -> None:
    """The factory runs mteb's public ``check_language_code`` on each language, as ``_validate_metadata`` does."""
    from mteb.languages import check_language_code

    metadata = mteb.get_task("DisastIR-QA-Bio").metadata
    metadata._validate_metadata()  # mteb's own check, as its test suite runs it
    with pytest.raises(ValueError, match="xx"):
        check_language_code("xx-Latn")
    with pytest.raises(ValueError, match="xx"):
        metadata.model_copy(update={"eval_langs": ["xx-Latn"]})._validate_metadata()


def test_the_oldest_mteb_checked_is_the_one_pyproject_accepts() -> None:
    """The door's ``CHECKED_ON`` starts at ``pyproject.toml``'s ``mteb>=`` bound, the release ``.ci/compat`` runs."""
    import re

    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    [bound] = re.findall(r'^\s*"mteb>=([0-9][^,"]*),<3",', pyproject, flags=re.MULTILINE)
    assert bound == mteb_internals.CHECKED_ON[0]

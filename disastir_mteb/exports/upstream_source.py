"""The source text of the mteb-side DisastIR files, rendered from the plugin's own metadata and benchmark.

The text follows mteb's conventions (``ruff format`` leaves it as it is): one compact class per task, the fields the
48 share in one ``_COMMON`` dict.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from disastir_mteb.exports.mteb_dataset import mteb_subset
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import CATEGORY_FULL_NAMES, INTENTS, TASK_SPECS

if TYPE_CHECKING:
    from mteb import Benchmark
    from mteb.abstasks.task_metadata import TaskMetadata

__all__ = ["BENCHMARK_VARIABLE", "TASK_MODULE", "benchmark_source", "task_module_source"]

#: The module written into ``mteb/tasks/retrieval/eng/`` and the benchmark's name in ``benchmarks.py``.
TASK_MODULE = "disastir_retrieval"
BENCHMARK_VARIABLE = "DISASTIR"
LINE_LENGTH = 88  # ruff format's default, which mteb keeps
_PER_TASK_FIRST = ("name", "description")  # then the other fields that differ between tasks, then dataset=


def _quote(text: str) -> str:
    """A string literal as ruff format writes it: double quotes unless that needs more escapes."""
    if '"' in text and "'" not in text:
        return repr(text)
    return json.dumps(text, ensure_ascii=False)


def _literal(value: Any) -> str:
    """A one-line literal of a metadata value (strings, lists, tuples and dicts of strings)."""
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_quote(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    raise TypeError(f"No literal for {type(value).__name__} values in the upstream source.")


def _argument(key: str, value: Any, indent: int, literal: str | None = None) -> str:
    """``key=value,`` at ``indent`` spaces, split over lines the way ruff format splits it."""
    pad, text = " " * indent, literal if literal is not None else _literal(value)
    line = f"{pad}{key}={text},"
    if len(line) <= LINE_LENGTH or literal is not None or not isinstance(value, (list, tuple, dict)) or not value:
        return line
    items = ([f"{_quote(k)}: {_literal(v)}" for k, v in value.items()] if isinstance(value, dict)
             else [_literal(v) for v in value])
    opening, closing = {dict: "{}", list: "[]", tuple: "()"}[type(value)]
    inner = " " * (indent + 4)
    joined = ", ".join(items) + ("," if isinstance(value, tuple) and len(items) == 1 else "")
    if len(items) == 1 or len(inner) + len(joined) <= LINE_LENGTH:
        body = f"{inner}{joined}\n"
    else:
        body = "".join(f"{inner}{item},\n" for item in items)
    return f"{pad}{key}={opening}\n{body}{pad}{closing},"


def _fields(metadata: TaskMetadata) -> dict[str, Any]:
    """The fields the plugin sets on a task's metadata, in ``TaskMetadata``'s field order."""
    values = metadata.model_dump(mode="python")
    return {key: values[key] for key in type(metadata).model_fields if key in metadata.model_fields_set}


def _split_fields(metadatas: list[TaskMetadata]) -> tuple[list[str], dict[str, Any]]:
    """(fields that differ between tasks, {field: value} shared by all), ``dataset`` and the citation aside."""
    all_fields = [_fields(m) for m in metadatas]
    keys = [k for k in all_fields[0] if k not in {"dataset", "bibtex_citation"}]
    varying = [k for k in keys if k in _PER_TASK_FIRST or any(f[k] != all_fields[0][k] for f in all_fields)]
    varying.sort(key=lambda k: (k not in _PER_TASK_FIRST, _PER_TASK_FIRST.index(k) if k in _PER_TASK_FIRST else 0))
    return varying, {k: all_fields[0][k] for k in keys if k not in varying}


def task_module_source(metadatas: dict[str, TaskMetadata], *, dataset_path: str, revision: str | None,
                       corpus_size: int) -> str:
    """``mteb/tasks/retrieval/eng/disastir_retrieval.py``: the 48 task classes; a None revision is a TODO."""
    specs = [spec for spec in TASK_SPECS if spec.name in metadatas]
    ordered = [metadatas[spec.name] for spec in specs]
    varying, common = _split_fields(ordered)
    citations = {m.bibtex_citation.strip() for m in ordered if m.bibtex_citation}
    if len(citations) != 1:
        raise InvalidInput("The DisastIR tasks must share one citation.")
    todo = "" if revision else (
        "# TODO: placeholders until the mteb-format dataset is on the Hub. Push the folder written by\n"
        "# `disastir-mteb export --format mteb --out DIR` to this repository, then put the full\n"
        "# 40-character commit hash of that push here (`disastir-mteb upstream --revision HASH`).\n")
    lines = [
        f'"""DisastIR: disaster-management retrieval, {len(INTENTS)} search intents x {len(CATEGORY_FULL_NAMES)} '
        "disaster categories.",
        "",
        f"{len(ordered)} tasks, one per (intent, category) pair, all searching one shared corpus of "
        f"{corpus_size:,}",
        "passages. The dataset holds each task as the configs `<Intent>-<Category>-corpus`, `-queries`",
        "and `-qrels` (every corpus config points at the same file). Qrels scores are the authors'",
        "exponential gain 2^grade - 1, so `ndcg_at_10` is the NDCG@10 the DisastIR paper reports.",
        "",
        "Written by `disastir-mteb upstream` from the task metadata of the disastir-mteb plugin.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any",
        "",
        "from mteb.abstasks.retrieval import AbsTaskRetrieval",
        "from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader",
        "from mteb.abstasks.task_metadata import TaskMetadata",
        "from mteb.timing import TimingStack",
        "",
        f"{todo}_DATASET_PATH = {_quote(dataset_path)}",
        f"_DATASET_REVISION = {_quote(revision or 'TODO')}",
        "",
        f'_BIBTEX_CITATION = r"""\n{citations.pop()}\n"""',
        "",
        "_COMMON = dict(",
        *(_argument(key, value, 4) for key, value in common.items()),
        "    bibtex_citation=_BIBTEX_CITATION,",
        ")",
        "",
        "",
        "def _dataset(config: str) -> dict[str, str]:",
        '    return {"path": _DATASET_PATH, "revision": _DATASET_REVISION, "name": config}',
        "",
        "",
        "class _DisastIRRetrieval(AbsTaskRetrieval):",
        '    """Loads one DisastIR task: the configs `<name>-corpus/-queries/-qrels` of the shared dataset.',
        "",
        '    `dataset["name"]` (e.g. `QA-Bio`) is the config prefix; the data goes into the `default`',
        "    subset, as for any single-subset task.",
        '    """',
        "",
        "    def load_data(",
        "        self,",
        "        num_proc: int | None = None,",
        "        *,",
        "        timer: TimingStack | None = None,",
        "        **kwargs: Any,",
        "    ) -> None:",
        "        if self.data_loaded:",
        "            return",
        "",
        "        timer = timer or TimingStack()",
        '        self.dataset = {"default": {}}',
        "        with timer(",
        '            "Data loading", log_message=f"Loading dataset {self.metadata.name}..."',
        "        ):",
        "            for split in self.eval_splits:",
        '                self.dataset["default"][split] = RetrievalDatasetLoader(',
        '                    hf_repo=self.metadata.dataset["path"],',
        '                    revision=self.metadata.dataset["revision"],',
        "                    split=split,",
        '                    config=self.metadata.dataset["name"],',
        "                ).load(num_proc=num_proc)",
        "",
        '        with timer("Dataset transform"):',
        "            self.dataset_transform(num_proc=num_proc)",
        "        self.data_loaded = True",
    ]
    for spec, metadata in zip(specs, ordered, strict=True):
        fields = _fields(metadata)
        lines += ["", "", f"class {spec.class_name}(_DisastIRRetrieval):", "    metadata = TaskMetadata("]
        lines += [_argument(key, fields[key], 8) for key in varying]
        lines += [_argument("dataset", None, 8, f"_dataset({_quote(mteb_subset(spec.name))})"), "        **_COMMON,",
                  "    )"]
    return "\n".join(lines) + "\n"


def benchmark_source(benchmark: Benchmark, *, groupings: bool) -> str:
    """The ``DISASTIR = Benchmark(...)`` block; ``groupings=False`` (an mteb without ``CustomGrouping``) omits them."""
    categories = "".join(f"    {_quote(c.value)}: {_quote(name)},\n" for c, name in CATEGORY_FULL_NAMES.items())
    intents = ", ".join(_quote(i.value) for i in INTENTS)
    citation = (benchmark.citation or "").strip()
    grouped = "    aggregations=(BenchmarkAggregation.MEAN_TASK,),\n" if not groupings else """    aggregations=(
        BenchmarkAggregation.MEAN_TASK,
        CustomGrouping(
            name="Intent",
            groups=tuple(
                CustomGroup(label=intent, tasks=_disastir_tasks(intents=[intent]))
                for intent in _DISASTIR_INTENTS
            ),
        ),
        CustomGrouping(
            name="Category",
            groups=tuple(
                CustomGroup(label=name, tasks=_disastir_tasks(categories=[category]))
                for category, name in _DISASTIR_CATEGORIES.items()
            ),
        ),
    ),
"""
    return f'''_DISASTIR_INTENTS = ({intents})
_DISASTIR_CATEGORIES = {{
{categories}}}


def _disastir_tasks(
    intents: list[str] | None = None, categories: list[str] | None = None
) -> MTEBTasks:
    return get_tasks(
        tasks=[
            f"DisastIR-{{intent}}-{{category}}"
            for intent in intents or _DISASTIR_INTENTS
            for category in categories or _DISASTIR_CATEGORIES
        ]
    )


{BENCHMARK_VARIABLE} = Benchmark(
    name={_quote(benchmark.name)},
    display_name={_quote(benchmark.display_name or benchmark.name)},
    tasks=_disastir_tasks(),
    description={_quote(benchmark.description or "")},
    reference={_quote(str(benchmark.reference))},
    citation=r"""
{citation}
""",
{grouped})
'''

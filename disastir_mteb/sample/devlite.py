"""DisastIR-DevLite folders derived from a dataset in the published layout (usually the generated sample).

A few queries per task drawn for DevLite (never all, so Test keeps some), over a pool of their judged passages plus
random others, so the pool always holds unjudged distractors. Marked synthetic: the DevLite choice is made up.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path

from disastir_mteb.data.devlite_layout import LAYOUTS, SplitLayout
from disastir_mteb.data.layout import MARKER, find_task_files, read_marker
from disastir_mteb.data.published import read_queries
from disastir_mteb.data.reading import read_records
from disastir_mteb.sample.generator import sample_dir
from disastir_mteb.util.atomic import staged_folder
from disastir_mteb.util.errors import ExistingOutput, InvalidInput
from disastir_mteb.vocabulary.taxonomy import CATEGORY_FULL_NAMES, INTENT_FILE_KEYS, TASK_SPECS, task_file_stem

__all__ = ["DEVLITE_GENERATOR_VERSION", "POOL_SHARE", "devlite_queries_per_task", "devlite_sample_dir",
           "write_devlite_sample"]

#: Bump whenever the bytes written for a given source, layout and seed change (invalidates cached folders).
DEVLITE_GENERATOR_VERSION = 1
#: The real DevLite pool's share of the corpus.
POOL_SHARE = 9_316 / 239_704


def devlite_queries_per_task(queries: int) -> int:
    """DevLite queries drawn from a task of ``queries``: 10 of 200 as in DMRetriever, at least 2, never all."""
    return max(1, min(queries - 1, max(2, round(queries * 10 / 200))))


def _dump(rows: list[object]) -> str:
    return "[\n" + ",\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\n]\n"


def _fill(root: Path, source: Path, layout: SplitLayout, seed: int) -> dict[str, object]:
    """Write the DevLite folder's files under ``root``; returns the marker's ``devlite`` details."""
    files = find_task_files(source)
    corpus: list[tuple[str, str]] = []
    with files.corpus.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                corpus.append((str(record["corpus_id"]), str(record["text"]).strip()))
    position = {text: i for i, (_, text) in reversed(list(enumerate(corpus)))}  # first copy of each text
    devlite_rows: list[dict[str, str]] = []
    test_rows: list[dict[str, str]] = []
    judged: set[int] = set()
    for spec in TASK_SPECS:
        stem = task_file_stem(spec.intent, spec.category)
        query_path, qrels_path = files.for_task(spec)
        queries = read_queries(spec, query_path)
        rng = random.Random(f"devlite-{seed}-{spec.name}")
        chosen = set(rng.sample(sorted(queries), devlite_queries_per_task(len(queries))))
        texts = {queries[q].strip() for q in chosen}
        rows = [record for _, record in read_records(qrels_path, ("user_query", "passage", "score"))
                if str(record["user_query"]).strip() in texts]
        judged.update(position[p] for r in rows if (p := str(r["passage"]).strip()) in position)
        names = {"intent": INTENT_FILE_KEYS[spec.intent], "event": CATEGORY_FULL_NAMES[spec.category]}
        for query_id, text in queries.items():
            if query_id in chosen:
                devlite_rows.append({**names, "user_query": text})
            else:
                test_rows.append({"query_type": spec.intent.value, "category": spec.category.value,
                                  "query_id": query_id, "user_query": text})
        if layout == "eval-code":
            for folder, keep in (("test_query_eva", True), ("test_query_test", False)):
                (root / folder).mkdir(exist_ok=True)
                (root / folder / f"{stem}.json").write_text(
                    _dump([{"user_query": t} for q, t in queries.items() if (q in chosen) is keep]), encoding="utf-8")
            (root / "qrels_with_added").mkdir(exist_ok=True)
            (root / "qrels_with_added" / f"{stem}_qrels.json").write_text(_dump(rows), encoding="utf-8")
    others = sorted(set(range(len(corpus))) - judged)
    extra = min(len(others), max(round(len(corpus) * POOL_SHARE) - len(judged), math.ceil(len(judged) / 10)))
    pool = sorted(judged | set(random.Random(f"devlite-pool-{seed}").sample(others, extra)))
    if layout == "eval-code":
        (root / "corpus").mkdir()
        (root / "corpus" / "ordered_corpus_eva.json").write_text(_dump([corpus[i][1] for i in pool]), encoding="utf-8")
    else:
        (root / "DisastIR_devlite_query.json").write_text(_dump(devlite_rows), encoding="utf-8")
        (root / "DisastIR_test_query.json").write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in test_rows), encoding="utf-8")
        (root / "DisastIR_devlite_passage.json").write_text(
            _dump([{"_id": f"p{n:05d}", "contents": corpus[i][1]} for n, i in enumerate(pool, 1)]), encoding="utf-8")
    return {"layout": layout, "devlite_queries": len(devlite_rows), "test_queries": len(test_rows),
            "pooled_passages": len(pool), "judged_passages": len(judged), "source": source.name}


def write_devlite_sample(
    full_dir: str | Path,
    out_dir: str | Path,
    *,
    layout: SplitLayout = "eval-code",
    seed: int = 0,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Write a DevLite folder split from ``full_dir`` (published layout) to ``out_dir``, atomically; return its path.

    Raises:
        ValueError: ``layout`` is not one of :data:`disastir_mteb.data.devlite_layout.LAYOUTS`.
        FileExistsError: ``out_dir`` exists, is not empty and ``overwrite`` is False.
        FileNotFoundError: ``full_dir`` is not in the published layout.
    """
    if layout not in LAYOUTS:
        raise InvalidInput(f"Unknown DevLite layout {layout!r}; expected one of {list(LAYOUTS)}.")
    source, out = Path(full_dir).expanduser().absolute(), Path(out_dir).expanduser().absolute()
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise ExistingOutput(f"Refusing to write the DevLite sample: {out} exists and is not empty.")
    with staged_folder(out) as tmp:
        details = _fill(tmp, source, layout, seed)
        origin = read_marker(source) or {}
        marker = {"synthetic": True, "generator": "disastir_mteb.sample_devlite",
                  "generator_version": DEVLITE_GENERATOR_VERSION, "scale": origin.get("scale"), "seed": seed,
                  "devlite": details}
        (tmp / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
    if progress:
        progress(f"DevLite ({layout}): {details['devlite_queries']} queries, {details['pooled_passages']} passages")
    return out


def devlite_sample_dir(scale: str = "small", *, layout: SplitLayout = "eval-code", cache_dir: str | Path | None = None,
                       seed: int = 0) -> Path:
    """A cached DevLite folder beside the cached sample of :func:`~disastir_mteb.sample.generator.sample_dir`."""
    full = sample_dir(scale, cache_dir=cache_dir, seed=seed)
    target = full.parent / f"{full.name}-devlite-{layout}-v{DEVLITE_GENERATOR_VERSION}"
    if (target / MARKER).is_file():
        return target
    try:
        return write_devlite_sample(full, target, layout=layout, seed=seed)
    except (FileExistsError, OSError):
        if (target / MARKER).is_file():  # lost the race: the winner's copy is complete
            return target
        raise

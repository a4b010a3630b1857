"""Synthetic DisastIR-shaped dataset generator, so the loader, tasks and CLI can run without the real data.

The output has the published layout. Each query targets a cell (event, aspect, place) and grades follow how much of
the cell a passage shares, so an embedding model ranks clearly above random but not perfectly; corpus ids are
shuffled, so they leak nothing about relevance.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from disastir_mteb.data.layout import MARKER
from disastir_mteb.sample.plan import generate
from disastir_mteb.sample.scale import SCALES, SampleScale
from disastir_mteb.util.atomic import staged_folder
from disastir_mteb.util.errors import ExistingOutput
from disastir_mteb.vocabulary.taxonomy import task_file_stem

if TYPE_CHECKING:
    from disastir_mteb.sample.plan import PlannedTask
    from disastir_mteb.sample.text import PassageBuilder

__all__ = ["GENERATOR_VERSION", "main", "sample_dir", "sample_path", "write_sample"]

#: Bump whenever the bytes written for a given scale and seed change (invalidates ``sample_dir`` caches).
GENERATOR_VERSION = 2

def _write_files(
    root: Path, b: PassageBuilder, tasks: list[PlannedTask], seed: int, progress: Callable[[str], None]
) -> int:
    """Write the published layout under ``root``; qrels are streamed query by query. Returns judged pairs."""
    order = list(range(len(b.texts)))
    random.Random(f"order-{seed}").shuffle(order)
    as_json = [json.dumps(t, ensure_ascii=False) for t in b.texts]
    with open(root / "corpus.jsonl", "w", encoding="utf-8", newline="\n") as fh:
        for rank, pid in enumerate(order):
            fh.write(f'{{"corpus_id": "d{rank:06d}", "text": {as_json[pid]}}}\n')
    (root / "query").mkdir()
    (root / "qrels").mkdir()
    pairs = 0
    for task in tasks:
        stem = task_file_stem(task.intent, task.category)
        prefix = f"{task.intent.value}-{task.category.value}-q"
        rows = [json.dumps({"query_id": f"{prefix}{i + 1:03d}", "user_query": q}, ensure_ascii=False)
                for i, q in enumerate(task.queries)]
        (root / "query" / f"{stem}.json").write_text("[\n" + ",\n".join(rows) + "\n]\n", encoding="utf-8")
        with open(root / "qrels" / f"{stem}_qrels.json", "w", encoding="utf-8", newline="\n") as fh:
            fh.write("[")
            first = True
            for query, judged in zip(task.queries, task.judged, strict=True):
                qj = json.dumps(query, ensure_ascii=False)
                for pid, g in judged:
                    head = "\n" if first else ",\n"
                    fh.write(f'{head}{{"user_query": {qj}, "passage": {as_json[pid]}, "score": {g}}}')
                    first = False
                pairs += len(judged)
            fh.write("\n]\n")
        progress(f"wrote {stem}")
    return pairs


def _write_marker(root: Path, scale: SampleScale, seed: int) -> None:
    """Say in the folder itself that it is synthetic, so results on it can say so (no timestamp: reproducible)."""
    marker = {"synthetic": True, "generator": "disastir_mteb.sample", "generator_version": GENERATOR_VERSION,
              "scale": scale.name, "seed": seed, "n_passages": scale.n_passages,
              "queries_per_task": scale.queries_per_task}
    (root / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")


def _write_sample(out_dir: str | Path, scale: str | SampleScale, seed: int, overwrite: bool,
                  progress: Callable[[str], None] | None) -> tuple[Path, dict[str, int]]:
    out = Path(out_dir).expanduser().absolute()
    sc = SCALES[scale] if isinstance(scale, str) else scale
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise ExistingOutput(f"Refusing to write the DisastIR sample: {out} exists and is not empty.")
    say = progress or (lambda _msg: None)

    def still_free(out: Path) -> None:
        if out.exists() and any(out.iterdir()) and not overwrite:
            raise ExistingOutput(f"Refusing to replace {out}: another process created it meanwhile.")

    with staged_folder(out, still_free) as tmp:
        b, tasks, short = generate(sc, seed, say)
        pairs = _write_files(tmp, b, tasks, seed, say)
        _write_marker(tmp, sc, seed)
        stats = {"passages": len(b.texts), "queries": sum(len(t.queries) for t in tasks), "pairs": pairs,
                 "shortfall": short}
        del b, tasks
    return out, stats


def write_sample(
    out_dir: str | Path,
    *,
    scale: str | SampleScale = "small",
    seed: int = 0,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Write a synthetic dataset in the published layout to ``out_dir`` (atomically) and return its path.

    Raises:
        FileExistsError: ``out_dir`` exists, is not empty and ``overwrite`` is False.
    """
    return _write_sample(out_dir, scale, seed, overwrite, progress)[0]


def sample_path(scale: str = "small", *, cache_dir: str | Path | None = None, seed: int = 0) -> Path:
    """Where :func:`sample_dir` keeps the sample of ``scale`` and ``seed`` (nothing is generated)."""
    if cache_dir is None:
        from disastir_mteb.util.cache_dir import cache_root

        cache_dir = cache_root()
    return Path(cache_dir).expanduser() / f"sample-{scale}-seed{seed}-v{GENERATOR_VERSION}"


def sample_dir(scale: str = "small", *, cache_dir: str | Path | None = None, seed: int = 0) -> Path:
    """A cached synthetic dataset folder, generated on first use; concurrent callers share one copy."""
    target = sample_path(scale, cache_dir=cache_dir, seed=seed)
    if (target / "corpus.jsonl").is_file():
        return target
    try:
        return write_sample(target, scale=scale, seed=seed, overwrite=False)
    except FileExistsError:
        if (target / "corpus.jsonl").is_file():  # lost the race: the winner's copy is complete
            return target
        raise


def main(argv: list[str] | None = None) -> int:
    """``python -m disastir_mteb.sample.generator --scale small|full --out DIR [--seed N] [--overwrite]``."""
    parser = argparse.ArgumentParser(prog="python -m disastir_mteb.sample.generator", description="Synthetic DisastIR.")
    parser.add_argument("--scale", choices=sorted(SCALES), default="small")
    parser.add_argument("--out", required=True, help="target folder (absent or empty)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        out, st = _write_sample(args.out, args.scale, args.seed, args.overwrite, None)
    except FileExistsError as exc:
        parser.exit(2, f"error: {exc}\n")
    print(f"{out}: {st['passages']} passages, {st['queries']} queries, {st['pairs']} judged pairs "
          f"in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Do two source trees of disastir-mteb write the same files? A check for refactors that must change nothing.

Runs one scenario with each tree's package first on ``PYTHONPATH`` (same interpreter, each with
its own empty cache): the demo (48 tasks, bundled MiniLM, small sample), an ANN run with the
DisastIR instructions on one thread (a multi-threaded HNSW build is not deterministic), and both
exports (no ``submit``: it refuses results computed on generated data, as these are). Then it
compares every file the two runs wrote, by name and by content, where run-time fields (durations,
dates, the pid in an embedding-store entry's ``.lock``) are left out, ``model_meta.json``'s lists
are compared as sets (mteb writes some from a Python set, in hash order) and ``run_settings.jsonl``'s
rows as a set (tasks scored in parallel add theirs as they finish).

    git worktree add /tmp/before <older revision>
    python benchmarks/same_outputs.py --before /tmp/before --work /tmp/same-outputs

Offline; about 3 minutes per tree on 2 CPU cores. Exits 1 when any file differs.

``--identity-changed`` leaves out the fingerprint a per-query file records of the model
(``encoding.model_fingerprint``), for a change to how models are identified. ``--new-fields`` names JSON keys the
newer tree adds (for issue 36: the provenance entries of task files and the
``provenance`` record of per-query files); they are left out where the older file lacks them, and only there. The
embedding cache's entries are named by digests of their keys, which a change to the model identification changes:
its files are compared by content under names with their digests left out (the same vectors, the same graph).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Fields whose values are times or dates: they differ between any two runs.
VOLATILE = frozenset({"evaluation_time", "date", "created", "kg_co2_emissions", "start", "end"})

SCENARIO: list[list[str]] = [
    ["demo", "--output-folder", "out", "--report", "report", "--quiet"],
    ["run", "-m", "bundled", "--data", "sample", "--search", "ann", "--ann-threads", "1", "--instructions",
     "disastir", "-t", "DisastIR-QA-Bio", "DisastIR-FC-Geo", "--output-folder", "out", "--quiet"],
    ["export", "--format", "beir", "--out", "beir", "--data", "sample", "-t", "DisastIR-QA-Bio", "--quiet"],
    ["export", "--format", "mteb", "--out", "mteb", "--data", "sample", "-t", "DisastIR-QA-Bio", "--quiet"],
]


def run_scenario(tree: Path, folder: Path) -> None:
    """Run :data:`SCENARIO` with ``tree``'s package, writing into ``folder`` (cache included)."""
    folder.mkdir(parents=True, exist_ok=False)
    env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "DISASTIR_CACHE_DIR": str(folder / "cache"),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    for argv in SCENARIO:
        done = subprocess.run([sys.executable, "-m", "disastir_mteb.cli", *argv], cwd=folder, env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{tree}: disastir-mteb {' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
        print(f"{tree.name}: disastir-mteb {argv[0]} done", flush=True)


#: JSON keys the newer tree may add (``--new-fields``): left out of a file whose counterpart lacks them.
NEW_FIELDS: set[str] = set()
#: JSON keys naming how the model was identified (``--identity-changed``): a change to the identification (issue 36's
#: probe on both sides, issue 50's content digests) gives every model another fingerprint, which says nothing about
#: what was computed; with it the digests of the provenance that holds the fingerprint (``disastir_provenance``, the
#: per-query ``provenance.digest``) and what the fingerprint was read from (``provenance.model.content``).
IDENTITY_FIELDS = frozenset({"model_fingerprint", "fingerprint", "disastir_model", "disastir_provenance"})
#: The same, as (parent key, key) where the key alone also names other things (``data.digest`` is compared).
IDENTITY_PATHS = frozenset({("provenance", "digest"), ("model", "content")})
IGNORED: set[str] = set()
IGNORED_PATHS: set[tuple[str, str]] = set()


def _normalised(value: Any, root: str, as_sets: bool, other: Any = None, parent: str = "") -> Any:
    if isinstance(value, dict):
        known = other if isinstance(other, dict) else {}
        return {k: _normalised(v, root, as_sets, known.get(k), k) for k, v in value.items()
                if k not in VOLATILE and k not in IGNORED and (parent, k) not in IGNORED_PATHS
                and (k not in NEW_FIELDS or k in known)}
    if isinstance(value, list):
        pairs = other if isinstance(other, list) and len(other) == len(value) else [None] * len(value)
        items = [_normalised(v, root, as_sets, o, parent) for v, o in zip(value, pairs, strict=True)]
        return sorted(items) if as_sets and all(isinstance(v, str) for v in items) else items
    return value.replace(root, "<root>") if isinstance(value, str) else value


def _comparable(path: Path, root: Path, other: Path | None = None) -> Any:
    """The file's bytes, or for JSON and text its content with run-time fields and the run folder left out.

    ``other``: the same file of the other run, whose JSON keys decide which :data:`NEW_FIELDS` are compared.
    """
    if path.name == ".lock":  # an embedding-store entry's lock: it holds the pid of the run that took it
        return "a lock file"
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
    if path.suffix == ".json":
        counterpart = json.loads(other.read_text(encoding="utf-8")) if other is not None and other.is_file() else None
        return _normalised(json.loads(text), str(root), as_sets=path.name == "model_meta.json", other=counterpart)
    if path.suffix == ".jsonl":
        rows = [_normalised(json.loads(line), str(root), False) for line in text.splitlines() if line.strip()]
        # run_settings.jsonl: mteb keys its rows by task and appends new tasks as they finish; with tasks scored
        # in parallel (task_pool.py) that order is the order they finished, so the rows are compared as a set
        return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True)) if path.name == "run_settings.jsonl" \
            else rows
    return text.replace(str(root), "<root>")


#: Caches of the inputs, not outputs: the joined tasks kept per data folder (issue 30) are compared by the tests
#: (tests/test_task_cache.py: equal to the join field for field), and a tree older than the cache writes none.
INPUT_CACHES = ("cache/task-data",)


#: Where the embedding cache keeps what a run computed, in folders named by digests of their keys.
KEYED_CACHES = ("cache/corpus/", "cache/queries/", "cache/usearch/")
#: The model identification's records: how a model is told apart, not what it computed.
IDENTITY_RECORDS = ("cache/probes/", "cache/contents/", "cache/model-content/")
_DIGEST = re.compile(r"[0-9a-f]{12,64}")  # the ANN index folders name the fingerprint by its first 12


def _keyed(side: Path) -> list[tuple[str, Any]]:
    """The keyed caches' files as (name with digests left out, comparable content), sorted."""
    files = [p for p in side.rglob("*") if p.is_file() and p.relative_to(side).as_posix().startswith(KEYED_CACHES)]
    found = []
    for path in files:
        if path.suffix == ".json":  # an index's sidecar names its key: the graph's bytes and checksum are compared
            continue
        found.append((_DIGEST.sub("<digest>", path.relative_to(side).as_posix()), _comparable(path, side)))
    return sorted(found, key=lambda item: (item[0], repr(item[1])[:200]))


def compare(before: Path, after: Path) -> list[str]:
    """The differences between two scenario folders, one line each (:data:`INPUT_CACHES` left out)."""
    skipped = INPUT_CACHES + KEYED_CACHES + IDENTITY_RECORDS
    names = [{p.relative_to(side) for p in side.rglob("*")
              if p.is_file() and not p.relative_to(side).as_posix().startswith(skipped)}
             for side in (before, after)]
    problems = [f"only in before: {p}" for p in sorted(names[0] - names[1])]
    problems += [f"only in after: {p}" for p in sorted(names[1] - names[0])]
    common = sorted(names[0] & names[1])
    problems += [f"differs: {p}" for p in common
                 if _comparable(before / p, before, after / p) != _comparable(after / p, after, before / p)]
    keyed = [_keyed(before), _keyed(after)]
    if [name for name, _ in keyed[0]] != [name for name, _ in keyed[1]]:
        problems.append(f"the embedding caches hold other files: {len(keyed[0])} before, {len(keyed[1])} after")
    else:
        problems += [f"differs: {name} (embedding cache)" for (name, a), (_, b) in zip(*keyed, strict=True) if a != b]
    print(f"{len(common)} files and {len(keyed[1])} cache files in both runs; {len(problems)} difference(s)")
    return problems


def main() -> int:
    """Run the scenario with both trees and compare; 1 when anything differs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="source tree (a checkout) of the older code")
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1],
                        help="source tree of the newer code (default: this checkout)")
    parser.add_argument("--work", type=Path, required=True, help="an absent folder for both runs")
    parser.add_argument("--new-fields", nargs="*", default=[],
                        help="JSON keys the newer tree adds, compared only where the older file has them too")
    parser.add_argument("--identity-changed", action="store_true",
                        help="the newer tree identifies models otherwise: leave their fingerprints out "
                             f"({', '.join(sorted(IDENTITY_FIELDS))}; the cache's names are compared without digests)")
    args = parser.parse_args()
    NEW_FIELDS.update(args.new_fields)
    if args.identity_changed:
        IGNORED.update(IDENTITY_FIELDS)
        IGNORED_PATHS.update(IDENTITY_PATHS)
    run_scenario(args.before, args.work / "before")
    run_scenario(args.after, args.work / "after")
    problems = compare(args.work / "before", args.work / "after")
    print("\n".join(problems) or "Same files, same contents (run-time fields aside).")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

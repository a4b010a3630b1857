"""Advice the results repository does not enforce (it takes any mteb 2.x): mteb versions, ``run_settings.jsonl``."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

__all__ = ["MIN_MTEB_VERSION", "check_run_settings", "old_version"]

MIN_MTEB_VERSION = Version("2.14.0")
"""The first mteb to write ``run_settings.jsonl``."""

Key = tuple[str, str, str]  # (task, split, hf_subset)


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


def old_version(value: object, where: str) -> str | None:
    """The warning for an mteb version older than 2.14 (or unreadable) recorded at ``where``; None if recent."""
    parsed = _version(value)
    if parsed is not None and parsed >= MIN_MTEB_VERSION:
        return None
    return (f"{where} records mteb {value!r}, not a version >= {MIN_MTEB_VERSION}; the results repository accepts "
            "it, but a rerun with a current mteb also records the run's settings (run_settings.jsonl).")


def _expand(entry: dict[str, Any]) -> set[Key]:
    """The (task, split, subset) a run_settings.jsonl row covers (``split``/``subset`` or ``splits``/``subsets``)."""
    splits = entry["splits"] if "splits" in entry else [entry.get("split")]
    subsets = entry["subsets"] if "subsets" in entry else [entry.get("subset")]
    return {(entry.get("task"), split, subset) for split in splits or [] for subset in subsets or []  # type: ignore[misc]
            if isinstance(split, str) and isinstance(subset, str)}


def check_run_settings(path: Path, loaded: dict[Path, set[Key]]) -> list[tuple[Path, str]]:
    """Warnings (file, message) for the ``run_settings.jsonl`` beside ``loaded``: task file -> what it scores."""
    if not path.is_file():
        return [(path, "is missing; the results repository does not require it, but mteb >= 2.14 writes it beside "
                       "the task files to record how they were made, so copy it from the run's folder.")]
    found: list[tuple[Path, str]] = []
    covered: dict[Key, list[object]] = defaultdict(list)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as error:
            found.append((path, f"line {number} is not valid JSON ({error})."))
            continue
        if not isinstance(entry, dict):
            found.append((path, f"line {number} is not a JSON object."))
            continue
        both = [f"'{one}' and '{many}'" for one, many in (("split", "splits"), ("subset", "subsets"))
                if one in entry and many in entry]
        keys = _expand(entry)
        if both:
            found.append((path, f"line {number} has both {' and '.join(both)}; mteb writes one or the other."))
        elif not keys or not all(isinstance(task, str) and task for task, _, _ in keys):
            found.append((path, f"line {number} names no task with split(s) and subset(s)."))
        else:
            version = entry.get("version")
            for key in keys:
                covered[key].append(version.get("mteb") if isinstance(version, dict) else None)
    for file, keys in loaded.items():
        missing = sorted(f"{split}/{subset}" for _, split, subset in keys - set(covered))
        if missing:
            found.append((file, f"has no run_settings.jsonl entry for {len(missing)} split/subset(s) "
                                f"({', '.join(missing[:5])})."))
        for key in sorted(keys & set(covered)):
            for version in covered[key]:
                if (message := old_version(version, f"the entry for {'/'.join(key)} (version.mteb)")) is not None:
                    found.append((path, message))
    return found

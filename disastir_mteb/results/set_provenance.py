"""A result set is one provenance: its files agree on the model, the settings, the data and the gain.

A set's files are written one task at a time, and nothing stops a folder from holding another run's (a file copied
from another model's set, an ``--instructions`` run's files copied over a plain run's, a task rerun with another
gain). :func:`provenance_problem` finds the file that records something else than its siblings or the set's
``model_meta.json``. Each field is compared among the files that record it only: an older file makes no claim.
Not compared: the digests of each task's data files and the plugin version, which differ by design.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from disastir_mteb.results.per_query import PerQuery
from disastir_mteb.results.score_checks import per_query_data
from disastir_mteb.vocabulary.ann_params import ANN_PREFIX
from disastir_mteb.vocabulary.provenance import (
    CORPUS_DIGEST_KEY,
    DATA_DIGEST_KEY,
    MODEL_KEY,
    PROVENANCE_KEY,
    SETTINGS_KEY,
    parse_settings,
)
from disastir_mteb.vocabulary.settings import (
    EXACT,
    INSTRUCTED_PASSAGES,
    INSTRUCTIONS_KEY,
    PASSAGES_KEY,
    PRECISION_KEY,
    SEARCH_KEY,
    TEMPLATE_KEY,
)
from disastir_mteb.vocabulary.task_record import DATA_KEY, EXTRA_JUDGEMENTS, GAIN_KEY, is_extended
from disastir_mteb.vocabulary.taxonomy import Split, get_spec

__all__ = ["SETTINGS_COMPARED", "Recorded", "pair_problem", "provenance_problem", "recorded"]

#: The items of ``disastir_settings`` a set's files must agree on (and with ``model_meta.json``). Not the batch size:
#: it moves vectors by float rounding only, so the runner files every batch size in one folder; a cast does more.
SETTINGS_COMPARED = ("search", "instructions", "template", "passages", "precision")
#: The instruction set of a plain run (:data:`~disastir_mteb.vocabulary.instructions.INSTRUCTION_SETS`' ``none``).
_NO_INSTRUCTIONS = "none"
_SHOWN_DIGEST = 16  # hex characters of a digest said in a sentence
_SHOWN_FILES = 3  # odd files named besides the first; the rest are counted
_PER_QUERY = "its per-query file's {}"


@dataclass(frozen=True)
class Recorded:
    """One file's value of one field, as a string, and the entry it was read from (said in the sentence)."""

    value: str
    entry: str


@dataclass(frozen=True)
class _Field:
    """A field compared across a set's files: its name in sentences and what another value means."""

    key: str
    name: str
    meaning: str
    digest: bool = False


_OTHER_SETTINGS = "it was computed with other settings"
_FIELDS = (
    *(_Field(item, item, _OTHER_SETTINGS) for item in SETTINGS_COMPARED),
    _Field("model", "model fingerprint", "it was computed by another model", digest=True),
    _Field("encoding", "model fingerprint", "it was computed by another model", digest=True),
    _Field("data", "data", "it was scored on other data"),
    _Field("per-query data", "data", "it was scored on other data"),
    _Field("corpus", "corpus digest", "it searched another corpus", digest=True),
    _Field("gain", "gain", "it was scored with another gain"),
)


def _search(value: str) -> str:
    """A search setting as ``model_meta.json`` files it: ``exact`` or ``ann-<label>`` (a bare label gets the prefix)."""
    return value if value == EXACT or value.startswith(ANN_PREFIX) else ANN_PREFIX + value


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _section(per_query: PerQuery | None) -> Mapping[str, Any]:
    return per_query.provenance or {} if per_query is not None else {}


def _section_model(section: Mapping[str, Any]) -> str | None:
    model = section.get("model")
    return _text(model.get("fingerprint")) if isinstance(model, Mapping) else None


def _section_settings(section: Mapping[str, Any]) -> dict[str, str] | None:
    settings = section.get("settings")
    return {str(key): str(value) for key, value in settings.items()} if isinstance(settings, Mapping) else None


def recorded(path: Path, record: Mapping[str, Any], per_query: PerQuery | None) -> dict[str, Recorded]:
    """What one task file, with the per-query file beside it if any, records of each compared field."""
    found: dict[str, Recorded] = {}
    section = _section(per_query)

    def put(key: str, value: object, entry: str) -> None:
        if key not in found and (text := _text(value)) is not None:
            found[key] = Recorded(text, entry)

    for settings, entry in ((parse_settings(record.get(SETTINGS_KEY)), SETTINGS_KEY),
                            (_section_settings(section), _PER_QUERY.format("provenance.settings"))):
        for item in SETTINGS_COMPARED:
            value = (settings or {}).get(item)
            put(item, _search(value) if item == "search" and value else value, entry)
    put("model", record.get(MODEL_KEY), MODEL_KEY)
    put("model", _section_model(section), _PER_QUERY.format("provenance.model.fingerprint"))
    put("encoding", (per_query.encoding or {}).get("model_fingerprint") if per_query is not None else None,
        _PER_QUERY.format("encoding.model_fingerprint"))
    data = record.get(DATA_KEY)
    if isinstance(data, str) and get_spec(path.stem).split is not Split.devlite:
        put("data", data.split(f"; {EXTRA_JUDGEMENTS}: ")[0] + (f"; {EXTRA_JUDGEMENTS}" if is_extended(data) else ""),
            DATA_KEY)
    if per_query is not None and (ours := per_query_data(per_query.data)) is not None:
        extra = (per_query.data or {}).get("extra_judgements")
        put("per-query data", ours + (f" with the extra judgements of {extra}" if extra else ""),
            _PER_QUERY.format("data record"))
    put("corpus", record.get(CORPUS_DIGEST_KEY), CORPUS_DIGEST_KEY)
    put("corpus", section.get("corpus_digest"), _PER_QUERY.format("provenance.corpus_digest"))
    put("gain", record.get(GAIN_KEY), GAIN_KEY)
    put("gain", section.get("gain"), _PER_QUERY.format("provenance.gain"))
    return found


def pair_problem(path: Path, record: Mapping[str, Any], per_query: PerQuery, per_query_path: Path) -> str | None:
    """Where a task file and its per-query file's ``provenance`` section record different values (a clause), or None."""
    section = _section(per_query)
    if not section:
        return None
    ours = parse_settings(record.get(SETTINGS_KEY))
    theirs = _section_settings(section)
    pairs: list[tuple[str, str, object, object]] = [
        ("model fingerprint", MODEL_KEY, record.get(MODEL_KEY), _section_model(section)),
        ("settings", SETTINGS_KEY, ours, theirs),
        ("gain", GAIN_KEY, record.get(GAIN_KEY), section.get("gain")),
        ("data files digest", DATA_DIGEST_KEY, record.get(DATA_DIGEST_KEY), section.get("data_digest")),
        ("corpus digest", CORPUS_DIGEST_KEY, record.get(CORPUS_DIGEST_KEY), section.get("corpus_digest")),
        ("provenance digest", PROVENANCE_KEY, record.get(PROVENANCE_KEY), section.get("digest")),
    ]
    for name, key, task_value, per_query_value in pairs:
        if task_value is not None and per_query_value is not None and task_value != per_query_value:
            digest = "digest" in name or key == MODEL_KEY
            return (f"{per_query_path} records {name} {_shown(per_query_value, digest=digest)}, but {path} records "
                    f"{_shown(task_value, digest=digest)} ({key}): the two files come from different runs")
    return None


def _shown(value: object, *, digest: bool = False) -> str:
    """A value as a sentence shows it: a digest by its first 16 characters, settings as ``key=value`` pairs."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key}={item!r}" for key, item in sorted(value.items())) + "}"
    if digest and isinstance(value, str):
        return value[:_SHOWN_DIGEST] + ("…" if len(value) > _SHOWN_DIGEST else "")
    return repr(value)


def _set_setting(item: str, experiment: Mapping[str, Any]) -> str | None:
    """What the set's ``experiment_kwargs`` say of a settings item (absent keys: a plain run); None: no claim."""
    if item == "search":
        return _search(str(experiment.get(SEARCH_KEY, EXACT)))
    if item == "instructions":
        return str(experiment.get(INSTRUCTIONS_KEY, _NO_INSTRUCTIONS))
    if item == "template":
        return str(experiment[TEMPLATE_KEY]) if TEMPLATE_KEY in experiment else None
    if item == "passages":
        return str(experiment.get(PASSAGES_KEY, "not instructed"))
    return str(experiment[PRECISION_KEY]) if PRECISION_KEY in experiment else None


def _agrees(item: str, value: str, expected: str) -> bool:
    """Whether a file's settings item is what the set files it as (passages: instructed or not, however spelt)."""
    if item == "passages":
        return (value == INSTRUCTED_PASSAGES) == (expected == INSTRUCTED_PASSAGES)
    return value == expected


def _set_key(item: str) -> str:
    return {"search": SEARCH_KEY, "instructions": INSTRUCTIONS_KEY, "template": TEMPLATE_KEY,
            "passages": PASSAGES_KEY, "precision": PRECISION_KEY}[item]


def _fix(odd: Sequence[Path], model: str) -> str:
    """``remove it or rerun the task (disastir-mteb run -m ... -t ... --overwrite, ...)``."""
    several = len(odd) > 1
    tasks = " ".join(path.stem for path in odd)
    return (f"remove {'them' if several else 'it'} or rerun the task{'s' if several else ''} (disastir-mteb run -m "
            f"{model} -t {tasks} --overwrite, with the run's other options).")


def _others(odd: Sequence[Path], what: str) -> str:
    """`` (2 more files of this set too: B.json, C.json)`` for the odd files after the first; "" for one."""
    rest = list(odd[1:])
    if not rest:
        return ""
    named = ", ".join(path.name for path in rest[:_SHOWN_FILES]) + (
        f" and {len(rest) - _SHOWN_FILES} more" if len(rest) > _SHOWN_FILES else "")
    return f" ({len(rest)} more file{'s' if len(rest) > 1 else ''} of this set {what}: {named})"


def _across(field: _Field, holders: Mapping[Path, Recorded], model: str) -> str | None:
    """The sentence for files that disagree on ``field``, naming the first holding a rarer value; None if all agree."""
    counts = Counter(found.value for found in holders.values())
    if len(counts) < 2:
        return None
    first_seen = list(dict.fromkeys(found.value for found in holders.values()))
    usual = max(counts, key=lambda value: (counts[value], -first_seen.index(value)))  # a tie: the first file's value
    odd = [path for path, found in holders.items() if found.value != usual]
    first, value = odd[0], holders[odd[0]]
    others = len(holders) - 1
    siblings = ("the other file of this set records" if others == 1 else
                f"the other {others} files of this set record" if counts[usual] == others else
                f"{counts[usual]} of the other {others} files of this set record")
    return (f"{first} records {field.name} {_shown(value.value, digest=field.digest)} ({value.entry}) but {siblings} "
            f"{_shown(usual, digest=field.digest)}{_others(odd, 'differ from those too')}: {field.meaning}; "
            f"{_fix(odd, model)}")


def _against_meta(item: str, holders: Mapping[Path, Recorded], experiment: Mapping[str, Any], meta_path: Path,
                  model: str) -> str | None:
    """The sentence for files whose settings item is not what the set's ``model_meta.json`` files it as; else None."""
    expected = _set_setting(item, experiment)
    if expected is None:
        return None
    odd = [path for path, found in holders.items() if not _agrees(item, found.value, expected)]
    if not odd:
        return None
    first, found = odd[0], holders[odd[0]]
    key = _set_key(item)
    if not meta_path.is_file():
        filed = f"the set has no {meta_path.name}, so it reads as a plain run ({item} {expected!r})"
    else:
        how = (f"{key} in its experiment_kwargs" if key in experiment else
               f"no {key} in its experiment_kwargs: a plain run")
        filed = f"{meta_path} files this set as {item} {expected!r} ({how})"
    more = _others(odd, "record otherwise too")
    return (f"{first} records {item} {found.value!r} ({found.entry}) but {filed}{more}: it was computed with other "
            f"settings than the set's; {_fix(odd, model)}")


def provenance_problem(files: Mapping[Path, Mapping[str, Recorded]], *, experiment: Mapping[str, Any],
                       meta_path: Path, model: str) -> str | None:
    """The sentence refusing a set whose files (each -> what it records) disagree on a compared field, or None.

    Settings come first: a file of another setting usually records another model fingerprint too, and the setting
    says more.
    """
    for field in _FIELDS:
        holders = {path: found[field.key] for path, found in files.items() if field.key in found}
        if not holders:
            continue
        if problem := _across(field, holders, model):
            return problem
        if field.key in SETTINGS_COMPARED and (problem := _against_meta(field.key, holders, experiment, meta_path,
                                                                        model)):
            return problem
    return None

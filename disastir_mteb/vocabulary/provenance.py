"""Provenance: everything that shapes a number, as one value, recorded in every file and compared on every reuse.

A run's :class:`RunProvenance` (model, settings) and each task's data digests and gain make a
:class:`TaskProvenance`, whose digest a stored result is reused by. Every value is a string, so a reader names the
field that differs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from disastir_mteb.util.digest import short_digest

__all__ = ["CORPUS_DIGEST_KEY", "DATA_DIGEST_KEY", "MODEL_KEY", "PROVENANCE_ENTRY_KEYS", "PROVENANCE_KEY",
           "SETTINGS_KEY", "ModelProvenance", "RunProvenance", "TaskProvenance", "differences", "parse_settings"]

#: The digest of the task's whole provenance (:attr:`TaskProvenance.digest`): what a stored result is reused by.
PROVENANCE_KEY = "disastir_provenance"
#: The fingerprint of the model that computed the ranking (what it is and how it is configured to encode); absent
#: from files of plain ``mteb run``, which does not identify the model.
MODEL_KEY = "disastir_model"
#: The run's settings as one canonical JSON object (:meth:`RunProvenance.settings_text`).
SETTINGS_KEY = "disastir_settings"
#: The content digest of every data file the task read (corpus, queries, judgements, extra judgements).
DATA_DIGEST_KEY = "disastir_data_digest"
#: The content digest of the corpus the task searched: the same for every task of one data folder and query set.
CORPUS_DIGEST_KEY = "disastir_corpus_digest"
PROVENANCE_ENTRY_KEYS = (PROVENANCE_KEY, MODEL_KEY, SETTINGS_KEY, DATA_DIGEST_KEY, CORPUS_DIGEST_KEY)

#: How the fields are named in sentences.
_NAMES = {MODEL_KEY: "model fingerprint", SETTINGS_KEY: "settings", DATA_DIGEST_KEY: "data files",
          CORPUS_DIGEST_KEY: "corpus", "disastir_gain": "gain"}


@dataclass(frozen=True)
class ModelProvenance:
    """Who computed the vectors: name, revision, fingerprint (``content``: ``kind:digest``), and what servers report."""

    name: str
    revision: str | None
    fingerprint: str
    configuration: str = ""
    content: str = ""
    served: str = ""

    def record(self) -> dict[str, str | None]:
        """The model as a JSON object."""
        record: dict[str, str | None] = {"name": self.name, "revision": self.revision, "fingerprint": self.fingerprint,
                                         "configuration": self.configuration, "content": self.content}
        if self.served:
            record["served"] = self.served
        return record


@dataclass(frozen=True)
class RunProvenance:
    """What one run's rankings depend on besides the data: the model and the settings (strings)."""

    model: ModelProvenance
    settings: Mapping[str, str] = field(default_factory=dict)

    def settings_text(self) -> str:
        """The settings as one canonical JSON object (sorted keys): equal settings give equal text."""
        return json.dumps(dict(self.settings), sort_keys=True, ensure_ascii=False)

    def for_task(self, *, data_digest: str | None, corpus_digest: str | None, gain: str) -> TaskProvenance:
        """This run's provenance joined with one task's data and gain."""
        return TaskProvenance(self, data_digest=data_digest, corpus_digest=corpus_digest, gain=gain)


@dataclass(frozen=True)
class TaskProvenance:
    """Everything one task's numbers depend on; ``run`` is None under plain ``mteb run``."""

    run: RunProvenance | None
    data_digest: str | None
    corpus_digest: str | None
    gain: str

    def record(self) -> dict[str, object]:
        """The whole provenance as a JSON object, with its digest: what the per-query file keeps."""
        content: dict[str, object] = {"gain": self.gain, "data_digest": self.data_digest,
                                      "corpus_digest": self.corpus_digest}
        if self.run is not None:
            content["model"] = self.run.model.record()
            content["settings"] = dict(self.run.settings)
        return {"digest": self.digest, **content}

    @property
    def digest(self) -> str:
        """32 hex characters of every field: two results are interchangeable exactly when their digests are equal."""
        entries = {key: value for key, value in self._entries().items() if key != PROVENANCE_KEY}
        if self.run is not None:
            entries["model"] = json.dumps(self.run.model.record(), sort_keys=True)
        return short_digest(json.dumps(entries, sort_keys=True).encode("utf-8"))

    def entries(self) -> dict[str, str]:
        """The strings a task adds to its result file (:data:`PROVENANCE_ENTRY_KEYS`; unknown fields left out)."""
        return {PROVENANCE_KEY: self.digest, **self._entries()}

    def _entries(self) -> dict[str, str]:
        entries: dict[str, str] = {"disastir_gain": self.gain}
        if self.run is not None:
            entries[MODEL_KEY] = self.run.model.fingerprint
            entries[SETTINGS_KEY] = self.run.settings_text()
        if self.data_digest is not None:
            entries[DATA_DIGEST_KEY] = self.data_digest
        if self.corpus_digest is not None:
            entries[CORPUS_DIGEST_KEY] = self.corpus_digest
        return entries


def parse_settings(text: object) -> dict[str, str] | None:
    """A :data:`SETTINGS_KEY` value back as its mapping; None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return {str(key): str(item) for key, item in value.items()} if isinstance(value, dict) else None


def differences(recorded: Mapping[str, object], now: Mapping[str, object]) -> list[str]:
    """What differs between two sets of provenance entries, one phrase per field; one only ``recorded`` has is skipped.

    Examples:
        >>> differences({"disastir_gain": "linear"}, {"disastir_gain": "exponential"})
        ["gain 'linear' there, 'exponential' now"]
    """
    said: list[str] = []
    for key, value in now.items():
        if key == PROVENANCE_KEY or recorded.get(key) == value:
            continue
        name = _NAMES.get(key, key)
        there = recorded.get(key)
        if key == SETTINGS_KEY:
            old, new = parse_settings(there) or {}, parse_settings(value) or {}
            fields = [f"{name} {item} {old.get(item, 'not recorded')!r} there, {new.get(item)!r} now"
                      for item in sorted(new) if old.get(item) != new.get(item)]
            said.extend(fields or [f"{name} not recorded there"])
        elif there is None:
            said.append(f"{name} not recorded there")
        elif key in (MODEL_KEY, DATA_DIGEST_KEY, CORPUS_DIGEST_KEY):
            said.append(f"{name} {str(there)[:16]} there, {str(value)[:16]} now")
        else:
            said.append(f"{name} {there!r} there, {value!r} now")
    return said

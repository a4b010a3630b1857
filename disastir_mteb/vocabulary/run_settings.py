"""One run's settings as one value: how a model encodes and searches.

Checked once by :meth:`RunSettings.from_options` before any model loads. What a run evaluates is not here: it
changes no vector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.ann_params import DEFAULT_PRESET, AnnParams, resolve_params
from disastir_mteb.vocabulary.instructions import InstructionConfig, resolve_instructions
from disastir_mteb.vocabulary.settings import DEFAULT_BATCH_SIZE, EXACT, Precision, check_count, parse_precision

__all__ = ["ANN", "RunSettings", "Search"]

#: The approximate search mode (USearch HNSW); the other is :data:`~disastir_mteb.vocabulary.settings.EXACT`.
ANN = "ann"
Search = Literal["exact", "ann"]


@dataclass(frozen=True)
class RunSettings:
    """How one run encodes and searches.

    ``ann`` None means exact search; ``batch_size`` None leaves it to mteb; ``devices="auto"`` spreads corpus encoding
    over every GPU; ``model_revision`` also identifies a model with no weights to read.
    """

    ann: AnnParams | None = None  # a preset name is accepted and resolved
    instructions: InstructionConfig | None = None
    batch_size: int | None = None
    precision: Precision | None = None
    devices: tuple[str, ...] | str | None = "auto"
    tokenize_threads: int | None = None
    cache_dir: str | Path | Literal[False] | None = None
    progress: bool = True
    model_revision: str | None = None

    def __post_init__(self) -> None:
        """Refuse a value no run can use, in one sentence naming it (the same checks for every front)."""
        if isinstance(self.ann, str):
            object.__setattr__(self, "ann", resolve_params(self.ann))
        if isinstance(self.devices, Sequence) and not isinstance(self.devices, str):
            object.__setattr__(self, "devices", tuple(self.devices))
        check_count("batch_size", self.batch_size, 1, f"the default, {DEFAULT_BATCH_SIZE}")
        check_count("tokenize_threads", self.tokenize_threads, 0, "automatic")
        object.__setattr__(self, "precision", parse_precision(self.precision))
        if self.model_revision is not None and (not isinstance(self.model_revision, str)
                                                or not self.model_revision.strip() or "/" in self.model_revision):
            raise InvalidInput(f"model_revision={self.model_revision!r} is not a revision: give a non-empty name "
                               "without '/', e.g. a commit or 'v2'.")

    @classmethod
    def from_options(
        cls,
        *,
        search: Search | str = EXACT,
        ann_preset: str | AnnParams | None = None,
        ann_params: Mapping[str, Any] | None = None,
        instructions: str | Mapping[str, str] | InstructionConfig | None = None,
        template: str | None = None,
        instruct_passages: bool = False,
        batch_size: int | None = None,
        precision: str | None = None,
        devices: Sequence[str] | str | None = "auto",
        tokenize_threads: int | None = None,
        cache_dir: str | Path | Literal[False] | None = None,
        progress: bool = True,
        model_revision: str | None = None,
    ) -> RunSettings:
        """The settings the user-facing options name, each checked once; ANN options apply to ``search="ann"`` only.

        Raises:
            ValueError: an unknown name or value, a count out of range, or ANN options for exact search.
        """
        if search == ANN:
            ann: AnnParams | None = resolve_params(DEFAULT_PRESET if ann_preset is None else ann_preset,
                                                   **dict(ann_params or {}))
        elif search == EXACT:
            given = ([f"ann_preset={ann_preset!r}"] if ann_preset is not None else []) + (
                [f"ANN parameters {sorted(ann_params)}"] if ann_params else [])
            if given:
                raise InvalidInput(f"{' and '.join(given)} {'were' if ann_params else 'was'} given for "
                                   f"search='exact'; add search='ann', or leave {'them' if ann_params else 'it'} out.")
            ann = None
        else:
            raise InvalidInput(f"Unknown search {search!r}; expected 'exact' or 'ann'.")
        config = None if instructions is None else resolve_instructions(instructions, template,
                                                                        passages=instruct_passages)
        return cls(ann=ann, instructions=config, batch_size=batch_size, precision=precision,  # type: ignore[arg-type]
                   devices=devices, tokenize_threads=tokenize_threads, cache_dir=cache_dir,  # type: ignore[arg-type]
                   progress=progress, model_revision=model_revision)

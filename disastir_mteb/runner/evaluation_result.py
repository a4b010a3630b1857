"""What :func:`disastir_mteb.evaluate` returns; apart because it subclasses mteb's class (importing it imports mteb)."""

from __future__ import annotations

from pathlib import Path

from mteb.results import ModelResult

__all__ = ["EvaluationResult"]


class EvaluationResult(ModelResult):
    """mteb's ``ModelResult`` of the run, with the result set's ``folder`` and the run's one-line ``summary``."""

    folder: Path
    summary: str

    @classmethod
    def of(cls, result: ModelResult, *, folder: Path, summary: str) -> EvaluationResult:
        """``result`` as it is (not validated again: mteb built it), with the run's folder and summary."""
        fields = {name: getattr(result, name) for name in ModelResult.model_fields}
        return cls.model_construct(**fields, folder=folder, summary=summary)

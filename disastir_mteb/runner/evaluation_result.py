"""What :func:`disastir_mteb.evaluate` returns: mteb's ``ModelResult``, and where the run filed it.

A module of its own because it subclasses mteb's class, so importing it imports mteb (seconds): only
``evaluate`` does, when it returns.
"""

from __future__ import annotations

from pathlib import Path

from mteb.results import ModelResult

__all__ = ["EvaluationResult"]


class EvaluationResult(ModelResult):
    """mteb's ``ModelResult`` of the run (every evaluated task), with where its files are and what the run did.

    Everything mteb's class offers works on it (``task_results``, ``to_dataframe()``, ...).

    Attributes:
        folder: the run's result set, an absolute path (``<output>/results/<org>__<model>/<revision>``, plus
            ``experiments/<settings>`` for a run with settings): what ``disastir-mteb report``, ``compare``
            and ``leaderboard`` read.
        summary: the run's account in one line, as :func:`~disastir_mteb.evaluate` says it: the folder, what was
            encoded, the search, and that the numbers are not DisastIR results when the data was generated.
    """

    folder: Path
    summary: str

    @classmethod
    def of(cls, result: ModelResult, *, folder: Path, summary: str) -> EvaluationResult:
        """``result`` as it is (not validated again: mteb built it), with the run's folder and summary."""
        fields = {name: getattr(result, name) for name in ModelResult.model_fields}
        return cls.model_construct(**fields, folder=folder, summary=summary)

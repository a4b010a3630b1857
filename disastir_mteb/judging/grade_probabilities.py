"""Grade probabilities (DIRAS's "Tok"): the judge's distribution over the allowed grades, read at the grade token.

A judge answering ``{"final_score": 2}`` has put some probability on the other grades too; servers that give
``top_logprobs`` (OpenAI, vLLM, llama.cpp, also under structured outputs) say how much.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from disastir_mteb.vocabulary.taxonomy import MAX_GRADE, Intent

__all__ = ["TOP_LOGPROBS", "GradeDistribution", "answer_distribution", "pair_distribution"]

#: Alternatives asked per answer token (``top_logprobs``): more than the widest scale (0-5) has grades, so that every
#: grade can be seen; OpenAI allows at most 20.
TOP_LOGPROBS = 10


@dataclass(frozen=True)
class GradeDistribution:
    """Probabilities over every grade of a scale (they sum to 1)."""

    probabilities: Mapping[int, float]

    @property
    def expected(self) -> float:
        """The expected grade: sum of grade x probability."""
        return sum(grade * p for grade, p in self.probabilities.items())

    @property
    def p_relevant(self) -> float:
        """The probability of a grade above 0 (binary relevance)."""
        return sum(p for grade, p in self.probabilities.items() if grade > 0)

    def record(self) -> dict[str, float]:
        """As JSON: ``{"0": p0, "1": p1, ...}``."""
        return {str(grade): round(p, 6) for grade, p in sorted(self.probabilities.items())}


def _entries(answer: Any) -> list[tuple[str, list[tuple[str, float]]]]:
    """(token, its alternatives with log-probabilities) of the first choice's ``logprobs.content``; [] without."""
    try:
        content = answer["choices"][0]["logprobs"]["content"]
    except (KeyError, IndexError, TypeError):
        return []
    if not isinstance(content, list):
        return []
    entries = []
    for entry in content:
        if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
            return []
        alternatives = [(alt["token"], float(alt["logprob"])) for alt in entry.get("top_logprobs") or []
                        if isinstance(alt, dict) and isinstance(alt.get("token"), str)
                        and isinstance(alt.get("logprob"), int | float) and math.isfinite(alt["logprob"])]
        entries.append((entry["token"], alternatives))
    return entries


def _spelt(rest: str, allowed: Sequence[Any]) -> Any:
    """The allowed value a token's text spells from its start (after the shared prefix), or None."""
    if all(isinstance(value, int) for value in allowed):
        digits = re.match(r"\s*(\d+)", rest)
        if digits is None:
            return None
        number = int(digits[1])
        return number if number in allowed else None
    text = rest.lstrip().lstrip('"')
    if not text:
        return None
    candidates = [value for value in allowed if text.startswith(value) or value.startswith(text)]
    return candidates[0] if len(candidates) == 1 else None


def answer_distribution(answer: Any, key: str, allowed: Sequence[Any]) -> dict[Any, float] | None:
    """The probability of each allowed value of ``key`` at the grade token of one chat answer; None where unseen.

    The grade token holds the value's first character; each of its alternatives that spells an allowed value there adds
    its probability to that value, and the sums are normalised over the allowed values.
    """
    entries = _entries(answer)
    text = "".join(token for token, _ in entries)
    found = re.search(rf'"{re.escape(key)}"\s*:\s*"?', text)
    if found is None:
        return None
    offset, position = 0, 0
    while position < len(entries) and offset + len(entries[position][0]) <= found.end():
        offset += len(entries[position][0])
        position += 1
    if position == len(entries):
        return None
    prefix = text[offset:found.end()]  # what the grade token holds before the value (a space, a quote)
    mass: dict[Any, float] = {}
    for alternative, logprob in entries[position][1]:
        if alternative.startswith(prefix) and (value := _spelt(alternative[len(prefix):], allowed)) is not None:
            mass[value] = mass.get(value, 0.0) + math.exp(logprob)
    total = sum(mass.values())
    if total <= 0:
        return None
    return {value: mass.get(value, 0.0) / total for value in allowed}


def _over_scale(distribution: Mapping[Any, float] | None, scale: range) -> GradeDistribution | None:
    if not distribution:
        return None
    known = {int(value): float(p) for value, p in distribution.items()}
    return GradeDistribution({grade: known.get(grade, 0.0) for grade in scale})


def pair_distribution(intent: Intent, answers: Mapping[str, Any],
                      distributions: Mapping[str, Mapping[Any, float] | None]) -> GradeDistribution | None:
    """The pair's distribution over its intent's scale: the mean of its voting methods' final-step distributions.

    As the hard grade combines the methods' votes; a method without a distribution is left out. ``answers`` maps each
    step to the value read, ``distributions`` to its :func:`answer_distribution`.
    """
    scale = range(MAX_GRADE[intent] + 1)
    steps = ["zero_shot"] if intent is Intent.STS else ["zero_shot", "multi/final", "cot/final"]
    methods = [found for step in steps if answers.get(step) is not None
               and (found := _over_scale(distributions.get(step), scale)) is not None]
    if not methods:
        return None
    return GradeDistribution({grade: sum(m.probabilities[grade] for m in methods) / len(methods) for grade in scale})

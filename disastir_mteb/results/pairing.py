"""Which result sets ``compare`` sets side by side: pairs of runs on one query set, never a set with itself.

``disastir-mteb compare A B`` (or one folder: its exact runs against its ANN runs) hands each side's sets of
one query set (full, DisastIR-Test or DisastIR-DevLite) to :func:`pair_sets`, which pairs them by these rules,
in order:

1. sets of the same model and settings (two runs of one setting: two result roots, two revisions, two
   plugin versions), one with one, the same revision first;
2. then sets of the same model and settings but the search (exact against ANN, the paper's Table 3): an
   exact run against each of its ANN runs;
3. when neither pairs anything and one side holds a single set, that set against each set of the other
   side (a revision folder holding exact and ANN runs against an instructions experiment).

A set on both sides (a revision folder against one of its own experiments) is never paired with itself;
sets left without a pair are listed (:attr:`Pairing.unpaired`), never silently dropped.
:mod:`disastir_mteb.results.compare` compares the pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from disastir_mteb.results.result_sets import ResultSet
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.settings import SEARCH_KEY

__all__ = ["Pairing", "pair_sets"]


@dataclass(frozen=True)
class Pairing:
    """What :func:`pair_sets` pairs: (A, B) pairs, and the sets of either side left without one."""

    pairs: tuple[tuple[ResultSet, ResultSet], ...]
    unpaired: tuple[ResultSet, ...] = ()

    def unpaired_text(self) -> str:
        """One line naming the sets left without a pair ("" when none is)."""
        if not self.unpaired:
            return ""
        return ("Not paired (no set of the same model and settings, or the same but the search, on the other side): "
                + "; ".join(result.display_label for result in self.unpaired) + ".")


def _setting(result: ResultSet) -> tuple[str, str, str]:
    return result.model, repr(sorted(result.experiment.items())), result.split.value


def _setting_but_search(result: ResultSet) -> tuple[str, str, str]:
    settings = {k: v for k, v in result.experiment.items() if k != SEARCH_KEY}
    return result.model, repr(sorted(settings.items())), result.split.value


def _same(x: ResultSet, y: ResultSet) -> bool:
    return x.folder.resolve() == y.folder.resolve() and x.split is y.split


def pair_sets(first: Sequence[ResultSet], second: Sequence[ResultSet]) -> Pairing:
    """Pairs (A from ``first``, B from ``second``) on one query set, by the rules of the module docstring.

    A set on both sides (a revision folder against one of its experiments) is never paired with itself.

    Raises:
        ValueError: no pair can be formed (the sets of each side are named).
    """
    pairs: list[tuple[ResultSet, ResultSet]] = []
    used: list[ResultSet] = []

    def unused(result: ResultSet) -> bool:
        return not any(result is other for other in used)

    rules: list[tuple[Callable[[ResultSet], object], bool]] = [(_setting, False), (_setting_but_search, True)]
    for key, many in rules:  # one B per A for identical settings; an exact run against each of its ANN runs
        found = []
        for a in [x for x in first if unused(x)]:
            matches = [b for b in second if unused(b) and key(b) == key(a) and not _same(a, b)
                       and not any(b is y for _, y in found)]
            matches.sort(key=lambda b: b.revision != a.revision)  # the same revision first
            found += [(a, b) for b in (matches if many else matches[:1])]
        pairs += found
        used += [x for pair in found for x in pair]
    if not pairs and len(second) == 1:  # one set held against each set of the other side
        pairs = [(a, second[0]) for a in first if not _same(a, second[0]) and a.split is second[0].split]
    elif not pairs and len(first) == 1:
        pairs = [(first[0], b) for b in second if not _same(first[0], b) and b.split is first[0].split]
    used = [x for pair in pairs for x in pair]
    if not pairs:
        raise InvalidInput("No pair to compare: no set has one of the same model and settings (or the same but the "
                           "search) on the other side, and neither side is a single set. A holds: "
                           + "; ".join(r.display_label for r in first) + ". B holds: "
                           + "; ".join(r.display_label for r in second) + ". Pass one result set on one side.")
    unpaired: list[ResultSet] = []  # each set once, even when it is on both sides
    for x in (*first, *second):
        if not any(_same(x, y) for y in (*used, *unpaired)):
            unpaired.append(x)
    return Pairing(tuple(pairs), tuple(unpaired))

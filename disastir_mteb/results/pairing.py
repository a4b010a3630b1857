"""Which result sets ``compare`` sets side by side: pairs of runs on one query set, never a set with itself.

Sets left without a pair are listed (:attr:`Pairing.unpaired`), never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from disastir_mteb.results.metrics import MAIN_METRIC, Metric
from disastir_mteb.results.result_sets import QuerySet, ResultSet
from disastir_mteb.results.split_agreement import SplitAgreement, split_agreement
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.settings import SEARCH_KEY
from disastir_mteb.vocabulary.taxonomy import SPLITS

__all__ = ["Pairing", "Sides", "choose_sides", "pair_sets"]


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


def _setting(result: ResultSet) -> tuple[str, str, QuerySet]:
    return result.model, repr(sorted(result.experiment.items())), result.query_set


def _setting_but_search(result: ResultSet) -> tuple[str, str, QuerySet]:
    settings = {k: v for k, v in result.experiment.items() if k != SEARCH_KEY}
    return result.model, repr(sorted(settings.items())), result.query_set


def _same(x: ResultSet, y: ResultSet) -> bool:
    return x.folder.resolve() == y.folder.resolve() and x.query_set == y.query_set


def pair_sets(first: Sequence[ResultSet], second: Sequence[ResultSet]) -> Pairing:
    """Pairs (A from ``first``, B from ``second``) on one query set, by the first rule that pairs anything.

    1. the same model and settings (two result roots, revisions or plugin versions), one with one, the same
       revision first;
    2. the same model and settings but the search (the paper's Table 3): an exact run against each of its ANN runs;
    3. where one side holds a single set, that set against each set of the other side.

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
        pairs = [(a, second[0]) for a in first if not _same(a, second[0]) and a.query_set == second[0].query_set]
    elif not pairs and len(first) == 1:
        pairs = [(first[0], b) for b in second if not _same(first[0], b) and b.query_set == first[0].query_set]
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


@dataclass(frozen=True)
class Sides:
    """What ``compare`` puts side by side: two sides to pair, or, for sets on different query sets, ``agreements``.

    ``aside`` is one line naming the sets of a folder left out (or "").
    """

    first: tuple[ResultSet, ...] = ()
    second: tuple[ResultSet, ...] = ()
    agreements: tuple[SplitAgreement, ...] = ()
    aside: str = ""

    @property
    def shared(self) -> list[QuerySet]:
        """The query sets both sides hold: DisastIR's in the order of ``SPLITS``, then built benchmarks' by name."""
        held = {s.query_set for s in self.first} & {s.query_set for s in self.second}
        return _ordered(held)


def _ordered(query_sets: Iterable[QuerySet]) -> list[QuerySet]:
    """Query sets in the order of ``SPLITS``, built benchmarks' last, by name."""
    return sorted(query_sets, key=lambda key: (key[1] is not None, SPLITS.index(key[0]), key[1] or ""))


def _one_folder_sides(found: Sequence[ResultSet]) -> tuple[list[ResultSet], list[ResultSet]]:
    """What one folder compares: its exact runs against its ANN runs, else its plain runs against its experiments."""
    first, second = [s for s in found if not s.is_ann], [s for s in found if s.is_ann]
    if not second:  # no ANN run: the plain runs against the experiments (instructions, precision)
        first, second = [s for s in found if not s.experiment], [s for s in found if s.experiment]
    return first, second


def choose_sides(names: Sequence[str], read: Callable[[str], list[ResultSet]], *,
                 metric: str | Metric = MAIN_METRIC) -> Sides:
    """What one result folder or two put side by side: two folders, or one folder's exact runs against its ANN runs.

    A folder without ANN runs gives its plain runs against its experiments; sets on different query sets give the
    model rankings across them (:mod:`~disastir_mteb.results.split_agreement`).

    Raises:
        ValueError: not one folder nor two; one folder without two sides to compare.
    """
    if len(names) not in (1, 2):
        raise InvalidInput(f"compare takes one folder (exact and ANN runs inside) or two result folders, "
                           f"not {len(names)}.")
    folders = [read(name) for name in names]
    if len(folders) == 2:
        first, second = folders
        if not {s.query_set for s in first} & {s.query_set for s in second}:  # e.g. DevLite runs and full runs
            return Sides(agreements=tuple(split_agreement([*first, *second], metric=metric)))
        return Sides(tuple(first), tuple(second))
    found, aside = list(folders[0]), ""
    if len({s.query_set for s in found}) > 1:  # several query sets in one folder: rankings across them
        agreements = split_agreement(found, metric=metric, paired_only=False)
        if any(agreement.pairs for agreement in agreements):
            return Sides(agreements=tuple(agreements))
        # no model ran with the same settings on two query sets: compare within each query set instead
        comparable = {key for key in {s.query_set for s in found}
                      if all(_one_folder_sides([s for s in found if s.query_set == key]))}
        if not comparable:
            raise InvalidInput(f"{names[0]} holds runs on several query sets, but no model has runs with the same "
                               "settings on two of them, and no query set holds both sides of a comparison (exact "
                               "and ANN runs, or a plain run and experiments); pass two folders instead.")
        left = [s for s in found if s.query_set not in comparable]
        if left:
            aside = (f"Set aside: {'; '.join(s.display_label for s in left)} (no run with the same settings on "
                     "another query set, and nothing to compare it with on its own).")
        found = [s for s in found if s.query_set in comparable]
    first, second = _one_folder_sides(found)
    if not first or not second:
        raise InvalidInput(f"With one folder, compare needs exact and ANN result sets in it, or a plain run and "
                           f"experiments; {names[0]} holds {len(found)}: "
                           f"{'; '.join(s.display_label for s in found)}. Pass two folders instead.")
    return Sides(tuple(first), tuple(second), aside=aside)

"""Does a judge reproduce the published labels? Cohen's kappa on pairs that already have a published grade.

``judge --agreement N`` judges N published pairs through the same job and store as the holes; these judgements
never enter the completed scores. Binary kappa counts grade > 0 as relevant (the paper's binarisation, Section
4.2); weighted kappa puts quadratic weights on the intent's scale, a mean vote rounded half up first. A judge
outside the band (:data:`KAPPA_FLOOR`, :data:`UNREADABLE_LIMIT`) should not fill holes.
"""

from __future__ import annotations

import logging
import math
import random
import warnings
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from disastir_mteb.data.extra_qrels import round_grade
from disastir_mteb.judging.calibration import Calibration, calibration_of
from disastir_mteb.judging.holes import load_task_texts
from disastir_mteb.judging.protocol import PROMPT_VERSION
from disastir_mteb.judging.store import JudgementStore, Pair, StoredAgreement
from disastir_mteb.results.report_format import Paragraph, Table, render_text
from disastir_mteb.results.result_sets import ResultSet
from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.taxonomy import INTENTS, MAX_GRADE, TASK_NAMES, Intent

if TYPE_CHECKING:
    from disastir_mteb.judging.settings import JudgeSettings

logger = logging.getLogger(__name__)

__all__ = ["KAPPA_FLOOR", "PAPER_KAPPA", "UNREADABLE_LIMIT", "Agreement", "AgreementPair", "IntentAgreement",
           "agreement_note", "agreement_of", "cohen_kappa", "pick_agreement_pairs", "run_agreement", "shortfall",
           "spread"]

#: The DisastIR paper's average Cohen's kappa over intents, LLM (gpt-4o-mini) labels against people (Section 4.2).
PAPER_KAPPA = 0.77
#: The lowest mean binary kappa of a judge that may fill holes: below it, agreement is at most "fair".
KAPPA_FLOOR = 0.4
#: The largest share of agreement pairs a judge that may fill holes leaves without a readable answer.
UNREADABLE_LIMIT = 0.1


def shortfall(binary: float | None, *, asked: int, ungraded: int) -> list[str]:
    """Why a judge's agreement is below the band, a clause per reason ([] within it); ``binary`` None is undefined."""
    reasons = []
    if binary is None:
        reasons.append("no kappa could be computed (no pair graded, or one label for every pair)")
    elif binary < KAPPA_FLOOR:
        reasons.append(f"binary kappa {binary:.3f}, below {KAPPA_FLOOR}")
    if asked and ungraded / asked > UNREADABLE_LIMIT:
        reasons.append(f"{ungraded:,} of {asked:,} pairs ({100 * ungraded / asked:.0f} %) without a readable answer, "
                       "more than a tenth")
    return reasons


def _band() -> str:
    return f"binary kappa at least {KAPPA_FLOOR} and at most a tenth of the pairs unreadable"


def _judge_name(judge_model: str, prompt_version: str) -> str:
    return f"{judge_model} (prompt version {prompt_version})"


def agreement_note(stored: StoredAgreement | None, *, judge_model: str, prompt_version: str) -> str:
    """The line ``report --judgements`` shows beside a judge's completed scores: a warning, or its kappas."""
    name = _judge_name(judge_model, prompt_version)
    if stored is None:
        return (f"Warning: the agreement of {name} with the published grades was never measured in this store, so "
                "nothing says its labels are the pool's: measure it (disastir-mteb judge RESULTS --model "
                f"{judge_model} --base-url URL --store STORE --agreement 60) before trusting these completed scores.")

    def shown(value: float | None) -> str:
        return f"{value:.3f}" if value is not None else "undefined"

    measured = (f"binary kappa {shown(stored.binary)} (weighted {shown(stored.weighted)}) against the published "
                f"grades on {stored.asked - stored.ungraded:,} of {stored.asked:,} pair(s)")
    reasons = shortfall(stored.binary, asked=stored.asked, ungraded=stored.ungraded)
    if reasons:
        return (f"Warning: {name} agreed with the published grades at {measured}: below the band "
                f"({'; '.join(reasons)}; the band: {_band()}); this judge should not fill holes, and these "
                "completed scores say little.")
    return (f"Agreement of {name}: {measured}, within the band ({_band()}); the paper's {PAPER_KAPPA} is gpt-4o-mini "
            "against people.")


def cohen_kappa(first: Sequence[Hashable], second: Sequence[Hashable], *, labels: Sequence[Hashable],
                weights: Literal["quadratic"] | None = None) -> float | None:
    """Cohen's kappa of two raters' labels of the same items, ``1 - sum(w * O) / sum(w * E)`` (Cohen 1960, 1968).

    ``O`` and ``E`` are the observed and chance shares per label pair, ``w`` 1 off the diagonal or quadratic in the
    distance of ``labels`` (in scale order). scikit-learn computes it; None for no items, or where both raters gave
    one label to every item (undefined).

    Raises:
        ValueError: the raters label different numbers of items, or a label is not in ``labels``.
    """
    from sklearn.exceptions import UndefinedMetricWarning
    from sklearn.metrics import cohen_kappa_score

    if len(first) != len(second):
        raise InvalidInput(f"The raters label {len(first)} and {len(second)} items; kappa compares the same items.")
    unknown = sorted({repr(label) for label in (*first, *second) if label not in labels})
    if unknown:
        raise InvalidInput(f"Label(s) {', '.join(unknown)} are not among {list(labels)}.")
    if not first:
        return None
    with warnings.catch_warnings():  # one label for every item: undefined, None below rather than a warning
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        kappa = float(cohen_kappa_score(list(first), list(second), labels=list(labels), weights=weights))
    return None if math.isnan(kappa) else kappa


@dataclass(frozen=True)
class AgreementPair:
    """A published pair to judge: its task, intent, texts (stripped) and published grade."""

    task: str
    intent: Intent
    query: str
    passage: str
    published: int


def spread(total: int, capacities: Sequence[int]) -> list[int]:
    """``total`` shared as evenly as ``capacities`` allow, a full place's rest going to the others.

    Examples:
        >>> spread(10, [2, 10, 10]), spread(4, [3, 3, 3])
        ([2, 4, 4], [2, 1, 1])
    """
    given = [0] * len(capacities)
    left = total
    while left > 0:
        open_ = [i for i, cap in enumerate(capacities) if given[i] < cap]
        if not open_:
            break
        share = left // len(open_)
        if share == 0:
            for i in open_[:left]:
                given[i] += 1
            break
        for i in open_:
            take = min(share, capacities[i] - given[i])
            given[i] += take
            left -= take
    return given


def pick_agreement_pairs(n: int, tasks: Iterable[str] | None = None, data_dir: str | Path | None = None, *,
                         seed: int = 0) -> list[AgreementPair]:
    """``n`` published pairs of ``tasks`` (default: all 48), one per distinct text pair, stratified by intent and grade.

    Each intent gets an equal share and each grade an equal share of its intent's, as far as the data allows; the
    same data, tasks, ``n`` and ``seed`` give the same pairs in the same order.

    Raises:
        ValueError: ``n`` below 1, or a task that is not a full-set task.
    """
    if n < 1:
        raise InvalidInput(f"--agreement {n}: judge at least one pair.")
    names = sorted(set(tasks) if tasks is not None else set(TASK_NAMES), key=TASK_NAMES.index)
    strata: dict[Intent, dict[int, list[AgreementPair]]] = defaultdict(lambda: defaultdict(list))
    seen: set[tuple[Intent, str, str]] = set()
    for task in names:
        texts = load_task_texts(task, data_dir)
        for query_id in sorted(texts.grades):
            query = texts.queries[query_id].strip()
            for doc_id, grade in sorted(texts.grades[query_id].items()):
                key = (texts.intent, query, texts.passages[doc_id].strip())
                if key not in seen:
                    seen.add(key)
                    strata[texts.intent][grade].append(AgreementPair(task, texts.intent, key[1], key[2], grade))
    intents = [intent for intent in INTENTS if intent in strata]
    per_intent = spread(n, [sum(len(pairs) for pairs in strata[intent].values()) for intent in intents])
    picked: list[AgreementPair] = []
    for intent, share in zip(intents, per_intent, strict=True):
        grades = sorted(strata[intent])
        for grade, count in zip(grades, spread(share, [len(strata[intent][g]) for g in grades]), strict=True):
            draw = random.Random(f"{seed}:{intent.value}:{grade}")
            picked += draw.sample(strata[intent][grade], count)
    return picked


@dataclass(frozen=True)
class IntentAgreement:
    """One intent's agreement: pairs compared, binary and quadratic-weighted kappa (None when undefined)."""

    intent: Intent
    pairs: int
    binary: float | None
    weighted: float | None


@dataclass(frozen=True)
class Agreement:
    """A judge's agreement with the published grades, per intent.

    ``ungraded`` pairs (no readable answer) are left out of every kappa; ``calibration`` is None when the server gave
    no logprobs.
    """

    judge_model: str
    prompt_version: str
    intents: dict[Intent, IntentAgreement]
    asked: int
    ungraded: int
    calibration: Calibration | None = None

    def mean(self, which: Literal["binary", "weighted"]) -> float | None:
        """The mean over intents of one kappa (the intents where it is defined), as the paper averages."""
        values = [value for a in self.intents.values() if (value := getattr(a, which)) is not None]
        return sum(values) / len(values) if values else None

    def warning(self) -> str | None:
        """The plain warning ``judge --agreement`` ends with below the band (:func:`shortfall`); None within it."""
        reasons = shortfall(self.mean("binary"), asked=self.asked, ungraded=self.ungraded)
        if not reasons:
            return None
        return (f"Warning: {_judge_name(self.judge_model, self.prompt_version)} is below the band "
                f"({'; '.join(reasons)}; the band: {_band()}, the paper's judge {PAPER_KAPPA}): its labels are not "
                "the pool's, so this judge should not fill holes; completed scores from it would say little. Try a "
                "stronger judge model.")

    def store_in(self, store: JudgementStore) -> None:
        """Keep this measurement in ``store``, where ``report --judgements`` reads it (:func:`agreement_note`)."""
        store.record_agreement(
            self.judge_model, self.prompt_version, asked=self.asked, ungraded=self.ungraded,
            binary=self.mean("binary"), weighted=self.mean("weighted"),
            intents={a.intent.value: {"pairs": a.pairs, "binary": a.binary, "weighted": a.weighted}
                     for a in self.intents.values()},
            calibration=self.calibration.record() if self.calibration is not None else None)

    def to_text(self) -> str:
        """The table ``judge --agreement`` prints, with the definitions and the paper's figure beside."""
        def shown(value: float | None) -> str:
            return f"{value:.3f}" if value is not None else "–"

        rows = [[a.intent.value, f"{a.pairs:,}", shown(a.binary), shown(a.weighted)] for a in self.intents.values()]
        rows.append(["Mean over intents", f"{sum(a.pairs for a in self.intents.values()):,}",
                     shown(self.mean("binary")), shown(self.mean("weighted"))])
        rows.append(["DisastIR paper (Section 4.2)", "", f"{PAPER_KAPPA:.2f}", ""])
        ungraded = (f" {self.ungraded} pair(s) got no readable answer and are left out." if self.ungraded else "")
        return render_text([
            Paragraph(f"Agreement with the published grades: {self.asked:,} pair(s) with a published grade, "
                      f"stratified by intent and grade, judged by {self.judge_model} (prompt version "
                      f"{self.prompt_version}).{ungraded}"),
            Paragraph("Binary kappa: relevant = grade > 0 (the authors' relevance for MRR@10 and Recall@10, and the "
                      "paper's binarisation). Weighted kappa: quadratic weights on the intent's scale (0-3, STS 0-5), "
                      "a judge's mean vote rounded half up to a grade. '–': undefined (one label only)."),
            Table(["intent", "pairs", "binary kappa", "weighted kappa"], rows),
            Paragraph(f"The paper's {PAPER_KAPPA} is its mean over intents of the binary kappa of gpt-4o-mini against "
                      "people; here the reference is the published labels (gpt-4o-mini's), so a judge near them "
                      "labels the holes as the pool was labelled."),
            *self._calibration_text(shown),
        ])

    def _calibration_text(self, shown: Callable[[float | None], str]) -> list[Paragraph | Table]:
        graded = self.asked - self.ungraded
        if self.calibration is None:
            return [Paragraph(f"Grade probabilities: none of the {graded:,} graded pair(s) came with logprobs (the "
                              "server gave none), so only the hard grades above are measured.")]
        c = self.calibration
        return [
            Paragraph(f"Grade probabilities (read at the grade token, DIRAS's \"Tok\"), {c.pairs:,} of {graded:,} "
                      "graded pair(s): P(relevant) = P(grade > 0) against the published relevance; the expected grade "
                      "ranked against the published grade (Kendall's tau-b per intent, then the mean), beside the "
                      "hard grade on the same pairs."),
            Table(["measure", "value", "best"], [
                ["ECE (10 bins)", shown(c.ece), "0"], ["Brier score", shown(c.brier), "0"],
                ["AUROC", shown(c.auroc), "1"], ["tau, expected grade", shown(c.tau_expected), "1"],
                ["tau, hard grade", shown(c.tau_hard), "1"]]),
        ]


def agreement_of(pairs: Sequence[AgreementPair], store: JudgementStore, *, judge_model: str,
                 prompt_version: str = PROMPT_VERSION) -> Agreement:
    """Kappa per intent between the published grades of ``pairs`` and the store's grades by ``judge_model``."""
    judged = {(j.intent, j.query.strip(), j.passage.strip()): j
              for j in store.judgements(judge_model=judge_model, prompt_version=prompt_version)}
    by_intent: dict[Intent, list[tuple[int, float]]] = defaultdict(list)
    probabilities: list[tuple[str, int, float, float, float]] = []
    ungraded = 0
    for pair in pairs:
        judgement = judged.get((pair.intent, pair.query, pair.passage))
        if judgement is None or judgement.grade is None:
            ungraded += 1
            continue
        by_intent[pair.intent].append((pair.published, judgement.grade))
        if judgement.expected is not None and judgement.p_relevant is not None:
            probabilities.append((pair.intent.value, pair.published, judgement.grade, judgement.expected,
                                  judgement.p_relevant))
    intents = {}
    for intent in INTENTS:
        compared = by_intent.get(intent)
        if not compared:
            continue
        published = [p for p, _ in compared]
        judge = [g for _, g in compared]
        binary = cohen_kappa([p > 0 for p in published], [g > 0 for g in judge], labels=[False, True])
        weighted = cohen_kappa(published, [min(round_grade(g), MAX_GRADE[intent]) for g in judge],
                               labels=list(range(MAX_GRADE[intent] + 1)), weights="quadratic")
        intents[intent] = IntentAgreement(intent, len(compared), binary, weighted)
    return Agreement(judge_model, prompt_version, intents, len(pairs), ungraded, calibration_of(probabilities))


def run_agreement(result_sets: Sequence[ResultSet], n: int, *, store: JudgementStore, settings: JudgeSettings,
                  go_ahead: Callable[[str, int], bool], say: Callable[[str], None] = print,
                  data_dir: str | Path | None = None) -> Agreement | None:
    """``judge --agreement N``: pick N published pairs, judge them through the job, print and store the kappa table.

    The pairs come from ``settings.tasks``, else the tasks of ``result_sets``, else all 48; ``go_ahead`` sees the plan
    first. None when the plan was not sent.

    Raises:
        ValueError: no ``--base-url`` (the agreement pairs are asked online), or as :func:`pick_agreement_pairs`.
        EndpointError: as :func:`~disastir_mteb.judging.job.judge_pairs`.
    """
    if not settings.base_urls:
        raise InvalidInput("--agreement asks a server: give --base-url (the Batch API files carry the holes only).")
    tasks = settings.tasks or sorted({task for result_set in result_sets for task in result_set.scores}) or None
    picked = pick_agreement_pairs(n, tasks, data_dir, seed=settings.seed)
    pairs = [Pair(pair.intent, pair.query, pair.passage, settings.judge_model) for pair in picked]
    if not settings.judge_planned(pairs, store, what="Agreement check", go_ahead=go_ahead, say=say):
        return None
    agreement = agreement_of(picked, store, judge_model=settings.judge_model)
    agreement.store_in(store)
    say(agreement.to_text())
    if (warning := agreement.warning()) is not None:
        say(warning)
    return agreement

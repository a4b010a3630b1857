"""The DisastIR vocabulary: intents, categories, task names and the file-name alias table; imports nothing heavy."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from disastir_mteb.util.errors import InvalidInput, UnknownName

__all__ = [
    "ALL_TASK_NAMES",
    "BENCHMARK_NAMES",
    "BUILT_NAME_RULE",
    "CATEGORIES",
    "INTENTS",
    "SPLITS",
    "SPLIT_LABELS",
    "SPLIT_TASK_NAMES",
    "SPLIT_TASK_SPECS",
    "TASK_NAMES",
    "TASK_SPECS",
    "BuiltNames",
    "Category",
    "Intent",
    "Split",
    "TaskSpec",
    "benchmark_name",
    "benchmark_task_names",
    "canonical_benchmark_name",
    "canonical_task_name",
    "check_built_name",
    "closest_names",
    "get_spec",
    "intent_benchmark_name",
    "is_task_name",
    "parse_built_task_name",
    "parse_category",
    "parse_intent",
    "parse_split",
    "parse_task_file",
    "task_file_stem",
    "task_name",
]


class Intent(str, Enum):
    """The six search intents, in the paper's table order."""

    QA = "QA"
    QAdoc = "QAdoc"
    Twitter = "Twitter"
    FC = "FC"
    NLI = "NLI"
    STS = "STS"


class Category(str, Enum):
    """The eight UNDRR disaster categories, in the paper's table order."""

    Bio = "Bio"
    Chem = "Chem"
    Env = "Env"
    Extra = "Extra"
    Geo = "Geo"
    MH = "MH"
    Soc = "Soc"
    Tech = "Tech"


class Split(str, Enum):
    """Which query set (and corpus) a task uses.

    ``full``: 9,600 queries over the 239,704-passage corpus (the DisastIR paper). ``test``: DisastIR-Test, the 9,120
    outside DevLite, same corpus. ``devlite``: DisastIR-DevLite, 480 queries over a 9,316-passage corpus of its own.
    """

    full = "full"
    test = "test"
    devlite = "devlite"


INTENTS: tuple[Intent, ...] = tuple(Intent)
CATEGORIES: tuple[Category, ...] = tuple(Category)
SPLITS: tuple[Split, ...] = tuple(Split)

#: The part a split adds to task and benchmark names ("" for the full set, whose names never change).
SPLIT_LABELS: dict[Split, str] = {Split.full: "", Split.test: "Test", Split.devlite: "DevLite"}

#: Full category names as the paper writes them (Table 19 onwards).
CATEGORY_FULL_NAMES: dict[Category, str] = {
    Category.Bio: "Biological",
    Category.Chem: "Chemical",
    Category.Env: "Environmental",
    Category.Extra: "Extraterrestrial",
    Category.Geo: "Geohazard",
    Category.MH: "Meteorological & Hydrological",
    Category.Soc: "Societal",
    Category.Tech: "Technological",
}

#: Intent keys as the authors' evaluation code spells them in file names.
INTENT_FILE_KEYS: dict[Intent, str] = {
    Intent.QA: "QA",
    Intent.QAdoc: "QAdoc",
    Intent.Twitter: "Twitter",
    Intent.FC: "FactCheck",
    Intent.NLI: "NLI",
    Intent.STS: "STS",
}


def task_file_stem(intent: Intent, category: Category) -> str:
    """The published file stem, e.g. ``FactCheck_Biological`` or ``QA_Meteorological_Hydrological``."""
    return f"{INTENT_FILE_KEYS[intent]}_{CATEGORY_FULL_NAMES[category].replace(' & ', '_').replace(' ', '_')}"

#: Highest relevance grade per intent (STS is graded 0..5, the others 0..3).
MAX_GRADE: dict[Intent, int] = {intent: (5 if intent is Intent.STS else 3) for intent in Intent}


def _norm(text: str) -> str:
    """Case-fold and drop every separator, so 'Meteorological & hydrological' == 'meteorologicalhydrological'."""
    return re.sub(r"[\s_\-&]+", "", text.casefold())


# One alias table, built from the facts above: abbreviation, full name, and the intent keys
# the authors' code and Table 3 use ("FactCheck", "TW").
_INTENT_ALIASES: dict[str, Intent] = {}
for _intent in Intent:
    _INTENT_ALIASES[_norm(_intent.value)] = _intent
    _INTENT_ALIASES[_norm(INTENT_FILE_KEYS[_intent])] = _intent
_INTENT_ALIASES[_norm("TW")] = Intent.Twitter
_INTENT_ALIASES[_norm("Fact-Check")] = Intent.FC

_CATEGORY_ALIASES: dict[str, Category] = {}
for _category in Category:
    _CATEGORY_ALIASES[_norm(_category.value)] = _category
    _CATEGORY_ALIASES[_norm(CATEGORY_FULL_NAMES[_category])] = _category
_CATEGORY_ALIASES[_norm("Meteorological and Hydrological")] = Category.MH
_CATEGORY_ALIASES[_norm("Hydrometeorological")] = Category.MH
_CATEGORY_ALIASES[_norm("Geological")] = Category.Geo


def parse_split(value: Split | str) -> Split:
    """``Split.test`` from ``"test"`` (or the member itself); a ``ValueError`` lists the query sets."""
    try:
        return Split(value)
    except ValueError:
        raise InvalidInput(f"Unknown query set {value!r}; expected one of {[s.value for s in Split]}.") from None


def parse_intent(text: str) -> Intent:
    """Map any accepted spelling of an intent ('QA', 'FactCheck', 'fc', 'TW', ...); a ``ValueError`` lists them."""
    try:
        return _INTENT_ALIASES[_norm(text)]
    except KeyError:
        raise InvalidInput(
            f"Unknown DisastIR intent {text!r}; expected one of "
            f"{sorted({*(i.value for i in Intent), *INTENT_FILE_KEYS.values(), 'TW'})}."
        ) from None


def parse_category(text: str) -> Category:
    """Map any accepted spelling of a category ('Bio', 'biological', ...); a ``ValueError`` lists them."""
    try:
        return _CATEGORY_ALIASES[_norm(text)]
    except KeyError:
        raise InvalidInput(
            f"Unknown DisastIR category {text!r}; expected an abbreviation "
            f"{[c.value for c in Category]} or a full name {list(CATEGORY_FULL_NAMES.values())}."
        ) from None


def task_name(intent: Intent, category: Category, split: Split = Split.full) -> str:
    """The fixed mteb task name: ``DisastIR-QA-Bio``, ``DisastIR-Test-QA-Bio``, ``DisastIR-DevLite-QA-Bio``."""
    label = SPLIT_LABELS[split]
    return f"DisastIR-{label + '-' if label else ''}{intent.value}-{category.value}"


def benchmark_name(split: Split = Split.full) -> str:
    """The 48-task benchmark of a split: ``DisastIR``, ``DisastIR-Test``, ``DisastIR-DevLite``."""
    label = SPLIT_LABELS[split]
    return f"DisastIR-{label}" if label else "DisastIR"


def intent_benchmark_name(intent: Intent) -> str:
    """The benchmark of one intent's 8 full-set tasks: ``DisastIR-QA``, ``DisastIR-FC``, ..."""
    return f"DisastIR-{intent.value}"


#: The DisastIR benchmarks, in the order mteb's menu and the leaderboard show them.
BENCHMARK_NAMES: tuple[str, ...] = (benchmark_name(Split.full), *(intent_benchmark_name(i) for i in INTENTS),
                                    benchmark_name(Split.test), benchmark_name(Split.devlite))


#: What a built benchmark's name may be, said in the sentence refusing one that is not.
BUILT_NAME_RULE = "letters, digits and hyphens, starting with a letter, and not starting with 'DisastIR'"
_BUILT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]*")


def check_built_name(name: str) -> str:
    """``name`` if it may name a built benchmark (``MyOrg``: tasks ``MyOrg-QA-MH``, ...), else one sentence.

    A built benchmark is an organisation's documents turned into DisastIR's layout; its tasks are named after it, with
    DisastIR's intent and category codes, and never pass for DisastIR's own.

    Raises:
        ValueError: ``name`` breaks :data:`BUILT_NAME_RULE`.
    """
    if not isinstance(name, str) or not _BUILT_NAME.fullmatch(name) or name.endswith("-") or "--" in name \
            or _is_disastir(name):
        raise InvalidInput(f"{name!r} cannot name a built benchmark: a name is {BUILT_NAME_RULE} (e.g. 'MyOrg', whose "
                           "tasks are MyOrg-QA-MH, ...).")
    return name


@dataclass(frozen=True)
class TaskSpec:
    """One task: an (intent, category) pair of one split, and the names derived from it.

    ``built`` names the built benchmark the task belongs to (its tasks ``MyOrg-QA-MH``, read like the full set's from
    one folder); None for DisastIR's own.
    """

    intent: Intent
    category: Category
    split: Split = Split.full
    built: str | None = None

    @property
    def name(self) -> str:
        """The mteb task name, e.g. ``DisastIR-QA-Bio`` (full), ``DisastIR-Test-QA-Bio`` or ``MyOrg-QA-Bio`` (built)."""
        if self.built is not None:
            return f"{self.built}-{self.intent.value}-{self.category.value}"
        return task_name(self.intent, self.category, self.split)

    @property
    def class_name(self) -> str:
        """The Python class name of the generated task: ``DisastIRQABio``, ``DisastIRTestQABio``, ``My_OrgQABio``."""
        prefix = self.built.replace("-", "_") if self.built is not None else f"DisastIR{SPLIT_LABELS[self.split]}"
        return f"{prefix}{self.intent.value}{self.category.value}"

    @property
    def base(self) -> TaskSpec:
        """The same intent and category in the full set (its published file stem, instructions, grades)."""
        return TaskSpec(self.intent, self.category)


TASK_SPECS: tuple[TaskSpec, ...] = tuple(TaskSpec(i, c) for i in INTENTS for c in CATEGORIES)
TASK_NAMES: tuple[str, ...] = tuple(spec.name for spec in TASK_SPECS)
#: split -> its 48 specs (the full split's are TASK_SPECS).
SPLIT_TASK_SPECS: dict[Split, tuple[TaskSpec, ...]] = {
    split: tuple(TaskSpec(i, c, split) for i in INTENTS for c in CATEGORIES) for split in SPLITS}
SPLIT_TASK_NAMES: dict[Split, tuple[str, ...]] = {
    split: tuple(spec.name for spec in specs) for split, specs in SPLIT_TASK_SPECS.items()}
#: Every task name of every split (144).
ALL_TASK_NAMES: frozenset[str] = frozenset(name for names in SPLIT_TASK_NAMES.values() for name in names)
_SPECS_BY_NAME = {spec.name: spec for specs in SPLIT_TASK_SPECS.values() for spec in specs}

if len(TASK_SPECS) != 48 or len(_SPECS_BY_NAME) != 48 * len(SPLITS):  # pragma: no cover - table invariant
    raise RuntimeError("The DisastIR task table must hold 48 unique tasks per split.")


def closest_names(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The ``n`` names of ``known`` closest to ``name`` whatever the case (difflib), in their own spelling."""
    spelled = {candidate.casefold(): candidate for candidate in known}
    return [spelled[close] for close in difflib.get_close_matches(name.casefold(), list(spelled), n=n)]


def _unknown_task(name: str) -> UnknownName:
    """The one sentence for a DisastIR-like name that is no task: the closest names, or that it is a benchmark."""
    if name.casefold() in _BENCHMARKS_BY_FOLDED:
        benchmark = _BENCHMARKS_BY_FOLDED[name.casefold()]
        return UnknownName(f"{name!r} is a benchmark, not a task: name it as one (disastir-mteb run -b {benchmark}; "
                           f"in Python, the tasks of mteb.get_benchmark({benchmark!r})).")
    close = closest_names(name, sorted(ALL_TASK_NAMES))
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return UnknownName(f"Unknown DisastIR task {name!r}.{hint} Valid names: DisastIR-{{Intent}}-{{Category}}, and "
                       "DisastIR-Test-... / DisastIR-DevLite-... for the DMRetriever splits.")


@dataclass(frozen=True)
class BuiltNames:
    """A built benchmark's name and its tasks' names (those with files, in the paper's order): names in any case."""

    name: str
    tasks: tuple[str, ...]

    def is_benchmark(self, given: str) -> bool:
        """Whether ``given`` names this benchmark, in any case."""
        return given.casefold() == self.name.casefold()

    def task(self, given: str) -> str | None:
        """``given`` in the spelling of one of its tasks; None for a name not starting with the benchmark's.

        Raises:
            KeyError: a name starting ``NAME-`` that is none of its tasks (the closest ones named).
        """
        folded = {task.casefold(): task for task in self.tasks}
        if given.casefold() in folded:
            return folded[given.casefold()]
        if not given.casefold().startswith(f"{self.name}-".casefold()):
            return None
        close = closest_names(given, self.tasks)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UnknownName(f"Unknown task {given!r} of the built benchmark {self.name}.{hint} Its tasks: "
                          f"{', '.join(self.tasks)} (only the intents and categories that have queries).")


def parse_built_task_name(name: str) -> TaskSpec | None:
    """The spec of a built benchmark's task name as its files spell it (``MyOrg-QA-MH``); None for any other name.

    The last two parts are DisastIR's intent and category codes exactly, the rest a valid built benchmark name.
    """
    prefix, _, rest = name.rpartition("-")
    built, _, intent = prefix.rpartition("-")
    if rest not in _CATEGORY_CODES or intent not in _INTENT_CODES or not built:
        return None
    try:
        check_built_name(built)
    except ValueError:
        return None
    return TaskSpec(Intent(intent), Category(rest), built=built)


_INTENT_CODES = frozenset(intent.value for intent in Intent)
_CATEGORY_CODES = frozenset(category.value for category in Category)


def is_task_name(name: str) -> bool:
    """Whether ``name`` is a task of DisastIR (any query set) or of a built benchmark, spelled as its files are."""
    return name in ALL_TASK_NAMES or parse_built_task_name(name) is not None


def get_spec(name: str) -> TaskSpec:
    """The TaskSpec of a task name such as ``DisastIR-NLI-Soc`` or ``MyOrg-QA-MH``; a ``KeyError`` names the closest."""
    try:
        return _SPECS_BY_NAME[name]
    except KeyError:
        built = parse_built_task_name(name)
        if built is not None:
            return built
        raise _unknown_task(name) from None


_TASKS_BY_FOLDED = {name.casefold(): name for name in ALL_TASK_NAMES}
_BENCHMARKS_BY_FOLDED = {name.casefold(): name for name in BENCHMARK_NAMES}


def _is_disastir(name: str) -> bool:
    """Whether ``name`` claims to be DisastIR's (``DisastIR-...`` in any case): other names are other libraries'."""
    return name.casefold().startswith(benchmark_name().casefold())


def canonical_task_name(name: str) -> str:
    """A DisastIR task name in any case, spelled as the task is; a name not starting ``DisastIR`` is returned as is.

    Raises:
        KeyError: a ``DisastIR...`` name that is no task (with the closest task names).
    """
    if not _is_disastir(name):
        return name
    if name.casefold() not in _TASKS_BY_FOLDED:
        raise _unknown_task(name)
    return _TASKS_BY_FOLDED[name.casefold()]


def canonical_benchmark_name(name: str) -> str:
    """A DisastIR benchmark name in any case, spelled as the benchmark is; another library's name is returned as given.

    Raises:
        KeyError: a ``DisastIR...`` name that is no benchmark (with the closest ones).
    """
    if not _is_disastir(name):
        return name
    folded = name.casefold()
    if folded in _BENCHMARKS_BY_FOLDED:
        return _BENCHMARKS_BY_FOLDED[folded]
    if folded in _TASKS_BY_FOLDED:
        task = _TASKS_BY_FOLDED[folded]
        raise UnknownName(f"{name!r} is a task, not a benchmark: name it as one (disastir-mteb run -t {task}).")
    close = closest_names(name, BENCHMARK_NAMES)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UnknownName(f"Unknown DisastIR benchmark {name!r}.{hint} The DisastIR benchmarks: "
                      f"{', '.join(BENCHMARK_NAMES)}.")


def benchmark_task_names(name: str) -> tuple[str, ...]:
    """The tasks of the DisastIR benchmark ``name`` (canonical spelling), in the benchmark's order."""
    for split in SPLITS:
        if name == benchmark_name(split):
            return SPLIT_TASK_NAMES[split]
    for intent in INTENTS:
        if name == intent_benchmark_name(intent):
            return tuple(task_name(intent, category) for category in CATEGORIES)
    raise UnknownName(f"{name!r} is not a DisastIR benchmark; they are {', '.join(BENCHMARK_NAMES)}.")


_FILE_SUFFIXES = ("_qrels", "-qrels", " qrels", "qrels")


def parse_task_file(stem: str) -> TaskSpec:
    """Place a file stem such as ``FactCheck_Biological_qrels`` on one of the 48 tasks, trying every split point.

    Raises:
        ValueError: the stem names no task, or names several.
    """
    base = stem
    for suffix in _FILE_SUFFIXES:
        if base.casefold().endswith(suffix):
            base = base[: -len(suffix)]
            break
    parts = [p for p in re.split(r"[_\-\s]+", base.strip()) if p]
    found: set[TaskSpec] = set()
    for cut in range(1, len(parts)):
        try:
            intent = parse_intent("".join(parts[:cut]))
            category = parse_category(" ".join(parts[cut:]))
        except ValueError:
            continue
        found.add(TaskSpec(intent, category))
    if len(found) != 1:
        why = "names no task" if not found else f"is ambiguous ({sorted(s.name for s in found)})"
        raise InvalidInput(
            f"File name {stem!r} {why}: expected '{{intent}}_{{category}}', e.g. 'QA_Bio' or 'FactCheck_biological'."
        )
    return found.pop()

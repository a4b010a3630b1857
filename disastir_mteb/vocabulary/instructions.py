"""Per-intent instructions and the authors' two conventions, instruction sets and templates.

``disastir``: the DisastIR paper's baselines, ``Instruct: {instruction}`` and ``Query: {query}`` on two lines;
``dmretriever``: ``"{instruction}: {query}"``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from disastir_mteb.util.errors import InvalidInput
from disastir_mteb.vocabulary.metadata import INTENTS_METADATA
from disastir_mteb.vocabulary.settings import INSTRUCTED_PASSAGES, INSTRUCTIONS_KEY, PASSAGES_KEY, TEMPLATE_KEY
from disastir_mteb.vocabulary.taxonomy import INTENTS, Intent, parse_intent

__all__ = [
    "DEFAULT_TEMPLATE",
    "INSTRUCTION_SETS",
    "MODEL_OWN",
    "RAW",
    "TEMPLATES",
    "InstructionConfig",
    "default_template_name",
    "resolve_instructions",
]

#: The two published instruction sets (and ``none``), keyed by intent. ``disastir`` is read from
#: ``task_metadata/intents.json`` (the tasks' prompts); ``dmretriever``'s are DMRetriever's own, written here.
INSTRUCTION_SETS: Mapping[str, Mapping[Intent, str] | None] = MappingProxyType({
    # the benchmark's own instructions, written once in task_metadata/intents.json (they are also the task prompts)
    "disastir": MappingProxyType({intent: INTENTS_METADATA[intent.value]["instruction"] for intent in INTENTS}),
    "dmretriever": MappingProxyType({
        Intent.QA: "Given the question, retrieve most relevant passage that best answers the question",
        Intent.QAdoc: "Given the question, retrieve the most relevant document that answers the question",
        Intent.Twitter: "Given the user query, retrieve the most relevant Twitter text that meets the request",
        Intent.FC: "Given the claim, retrieve most relevant document that supports or refutes the claim",
        Intent.NLI: "Given the premise, retrieve most relevant hypothesis that is entailed by the premise",
        Intent.STS: "Given the sentence, retrieve the sentence with the same meaning",
    }),
    "none": None,
})

#: The two published templates, by short name.
TEMPLATES: Mapping[str, str] = MappingProxyType({
    "instruct-query": "Instruct: {instruction}\nQuery: {query}",
    "colon": "{instruction}: {query}",
})

#: The template each published set was used with.
DEFAULT_TEMPLATE: Mapping[str, str] = MappingProxyType({"disastir": "instruct-query", "dmretriever": "colon"})
#: The set and template names of a model that brings its own instructions (``with_instructions(model, "model")``).
MODEL_OWN = "model"
#: The template name of queries sent as they are (the ``none`` set).
RAW = "raw"


def default_template_name(name: str) -> str:
    """The template a set is used with unless another is chosen: the published one, else ``instruct-query``."""
    return {"none": RAW, MODEL_OWN: MODEL_OWN}.get(name) or DEFAULT_TEMPLATE.get(name, "instruct-query")


def _short_hash(payload: object) -> str:
    return hashlib.blake2b(json.dumps(payload, sort_keys=True).encode(), digest_size=4).hexdigest()


@dataclass(frozen=True)
class InstructionConfig:
    """Which instruction goes in front of which DisastIR query, and how.

    ``name`` is ``disastir``, ``dmretriever``, ``none`` or ``custom-<hash>``; ``passages`` also prefixes passages.
    """

    name: str
    instructions: Mapping[Intent, str] | None
    template: str
    template_name: str
    passages: bool = False

    def format(self, intent: Intent, text: str) -> str:
        """The exact string the model receives for one DisastIR query (or passage)."""
        if self.instructions is None:
            return text
        return self.template.format(instruction=self.instructions[intent], query=text)

    def experiment_kwargs(self) -> dict[str, str]:
        """What mteb records as experiment settings, so differently instructed runs never overwrite each other."""
        kwargs = {INSTRUCTIONS_KEY: self.name, TEMPLATE_KEY: self.template_name}
        if self.passages:
            kwargs[PASSAGES_KEY] = INSTRUCTED_PASSAGES
        return kwargs

    def describe(self) -> str:
        """One line for logs: set, template and where it applies."""
        where = "queries and passages" if self.passages else "queries only"
        return f"instructions={self.name}, template={self.template_name} ({self.template!r}), {where}"


def resolve_instructions(
    instructions: str | Mapping[str, str] | InstructionConfig | None = "disastir",
    template: str | None = None,
    *,
    passages: bool = False,
) -> InstructionConfig:
    """Turn user-facing choices into an :class:`InstructionConfig`.

    ``instructions``: a set name, None (raw queries), {intent: instruction} for all six intents, or a ready config;
    ``template``: a name or a format string with ``{instruction}`` and ``{query}`` (default: the set's own).

    Raises:
        ValueError: unknown set or template name, a mapping missing intents, or a format string without both fields.
    """
    if isinstance(instructions, InstructionConfig):
        return instructions
    if instructions is None:
        instructions = "none"
    if isinstance(instructions, str):
        key = instructions.strip().lower()
        if key not in INSTRUCTION_SETS:
            raise InvalidInput(f"Unknown instruction set {instructions!r}; expected one of {sorted(INSTRUCTION_SETS)} "
                               "or a mapping {intent: instruction}.")
        name, mapping = key, INSTRUCTION_SETS[key]
    else:
        parsed = {parse_intent(str(k)): str(v) for k, v in instructions.items()}
        missing = [i.value for i in INTENTS if i not in parsed]
        if missing:
            raise InvalidInput(f"Custom instructions lack intent(s) {missing}; "
                               f"give all six: {[i.value for i in INTENTS]}.")
        mapping = MappingProxyType(parsed)
        name = "custom-" + _short_hash({i.value: parsed[i] for i in INTENTS})

    if mapping is None:
        return InstructionConfig(name="none", instructions=None, template="{query}", template_name=RAW,
                                 passages=passages)
    chosen = template if template is not None else default_template_name(name)
    if chosen in TEMPLATES:
        template_name, fmt = chosen, TEMPLATES[chosen]
    else:
        if "{instruction}" not in chosen or "{query}" not in chosen:
            raise InvalidInput(f"Template {chosen!r} must contain '{{instruction}}' and '{{query}}', or be one of "
                               f"{sorted(TEMPLATES)}.")
        try:
            chosen.format(instruction="", query="")
        except (KeyError, IndexError, ValueError) as error:
            raise InvalidInput(f"Template {chosen!r} is not a valid format string ({error}).") from None
        template_name, fmt = "custom-" + _short_hash(chosen), chosen
    return InstructionConfig(name=name, instructions=mapping, template=fmt, template_name=template_name,
                             passages=passages)

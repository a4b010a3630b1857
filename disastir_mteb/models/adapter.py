"""``with_instructions``: put the right per-intent instruction in front of any embedder's DisastIR queries.

The adapter is an mteb encoder wrapping another one; for any task but DisastIR's it is transparent. A model that
applies ``TaskMetadata.prompt`` itself would receive two instructions, so ``model_prompt`` chooses whose is sent.
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from mteb.types import PromptType

from disastir_mteb.util.errors import InvalidInput, NotAnEncoder
from disastir_mteb.vocabulary.instructions import MODEL_OWN, InstructionConfig, resolve_instructions
from disastir_mteb.vocabulary.settings import INSTRUCTIONS_KEY, TEMPLATE_KEY
from disastir_mteb.vocabulary.taxonomy import TaskSpec, get_spec, is_task_name

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.types import Array, BatchedInput
    from torch.utils.data import DataLoader

logger = logging.getLogger(__name__)

__all__ = ["InstructedEncoder", "as_mteb_encoder", "require_encoder", "with_instructions"]

ModelPrompt = Literal["take-over", "leave"]
def _spec(task_metadata: TaskMetadata) -> TaskSpec | None:
    """Every query set's tasks, and a built benchmark's: DisastIR-Test-QA-Bio and MyOrg-QA-Bio get QA's instruction."""
    return get_spec(task_metadata.name) if is_task_name(task_metadata.name) else None


class _CallableEncoder(AbsEncoder):
    """A plain ``list[str] -> array`` function as an mteb encoder (cosine similarity)."""

    def __init__(self, function: Callable[[list[str]], Any], name: str | None = None) -> None:
        self.model = function
        label = name or getattr(function, "__name__", type(function).__name__)
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={
            "name": label if "/" in label else f"callable/{label}",
            "similarity_fn_name": ScoringFunction.COSINE,
            "loader": None,
        })

    def encode(self, inputs: DataLoader[BatchedInput], *, task_metadata: TaskMetadata, hf_split: str,
               hf_subset: str, prompt_type: PromptType | None = None, **kwargs: Any) -> Array:
        """Call the function on the texts and check it returned one row per text."""
        texts = [text for batch in inputs for text in batch["text"]]
        output = self.model(texts)
        if hasattr(output, "detach"):
            output = output.detach().cpu().numpy()
        array = np.asarray(output, dtype=np.float32)
        if array.ndim != 2 or array.shape[0] != len(texts):
            raise InvalidInput(f"{self.mteb_model_meta.name} returned shape {array.shape} for {len(texts)} texts; "
                               "expected (n_texts, dim).")
        return array


def as_mteb_encoder(model: Any, who: str = "with_instructions()") -> Any:
    """``model`` as mteb's ``EncoderProtocol``, the way ``mteb.evaluate`` wraps it.

    A SentenceTransformer gets mteb's own wrapper, so its ``ModelMeta`` and result folder are the ones mteb would use.

    Raises:
        TypeError: anything else (e.g. a CrossEncoder, which cannot embed a corpus), naming ``who``.
    """
    require_encoder(model, who)
    if hasattr(model, "encode") and hasattr(model, "mteb_model_meta"):
        return model
    from mteb.models import ModelMeta
    from sentence_transformers import SentenceTransformer

    if isinstance(model, ModelMeta):
        return model.load_model()
    if isinstance(model, SentenceTransformer):
        from mteb.models import SentenceTransformerEncoderWrapper

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*get_sentence_embedding_dimension", category=FutureWarning)
            return SentenceTransformerEncoderWrapper(model)
    return _CallableEncoder(model)


def require_encoder(model: Any, who: str) -> None:
    """Refuse what :func:`as_mteb_encoder` cannot wrap, naming ``who`` (the function the user called)."""
    if hasattr(model, "encode") and hasattr(model, "mteb_model_meta"):
        return
    from mteb.models import ModelMeta
    from sentence_transformers import CrossEncoder, SentenceTransformer

    if isinstance(model, (ModelMeta, SentenceTransformer)) or (callable(model) and not isinstance(model, CrossEncoder)):
        return
    raise NotAnEncoder(f"{who} takes a SentenceTransformer, an mteb encoder or a callable list[str] -> array, "
                       f"not {type(model).__name__}.")


def _applies_task_prompt(model: Any) -> bool:
    """True when the wrapped model adds ``TaskMetadata.prompt`` (as an instruction) by itself."""
    meta = getattr(model, "mteb_model_meta", None)
    return bool(getattr(meta, "use_instructions", False)) or getattr(model, "instruction_template", None) is not None


_INSTRUCTION_METHODS = ("get_task_instruction", "get_instruction", "format_instruction")
"""Where an mteb ``AbsEncoder`` builds the task instruction its own ``encode`` puts before each text."""


@functools.cache
def _without_task_instruction(cls: type) -> type:
    """``cls`` whose task instruction is empty: what ``take-over`` runs the wrapped model's ``encode`` as.

    mteb's ``AbsEncoder`` methods are overridden on a subclass made once per class, never on the model.
    """

    def get_task_instruction(self: Any, *args: Any, **kwargs: Any) -> str:
        return ""

    def get_instruction(self: Any, *args: Any, **kwargs: Any) -> str:
        return ""

    def format_instruction(self: Any, instruction: str, *args: Any, **kwargs: Any) -> str:
        return super(silenced, self).format_instruction(instruction, *args, **kwargs) if instruction else ""

    methods = {"get_task_instruction": get_task_instruction, "get_instruction": get_instruction,
               "format_instruction": format_instruction}
    silenced = type(cls.__name__, (cls,), {name: methods[name] for name in _INSTRUCTION_METHODS
                                           if hasattr(cls, name)})
    silenced.__qualname__, silenced.__module__ = cls.__qualname__, cls.__module__
    return silenced


def _task_prompt_switched_off(model: Any) -> Any:
    """A view of ``model`` that produces no task instruction; ``model`` itself is left as it is.

    The view shares the model's attribute dictionary (same weights and state, so what ``encode`` records lands on the
    model), and another caller of the model meanwhile still gets its own instruction.
    """
    view = object.__new__(_without_task_instruction(type(model)))
    own = vars(model)
    shadowing = [name for name in _INSTRUCTION_METHODS if name in own]
    if shadowing:
        own = dict(own)
        for name in shadowing:
            own[name] = _formatting_nothing_empty(own[name]) if name == "format_instruction" else _no_instruction
    object.__setattr__(view, "__dict__", own)
    return view


def _no_instruction(*args: Any, **kwargs: Any) -> str:
    return ""


def _formatting_nothing_empty(format_instruction: Callable[..., str]) -> Callable[..., str]:
    def format_nothing_empty(instruction: str, *args: Any, **kwargs: Any) -> str:
        return format_instruction(instruction, *args, **kwargs) if instruction else ""

    return format_nothing_empty


def _rewrite(inputs: DataLoader[BatchedInput], transform: Callable[[str], str]) -> DataLoader[BatchedInput]:
    """The same loader (batch size, collate function, other columns) with every text transformed."""
    from datasets import Dataset
    from torch.utils.data import DataLoader

    dataset = inputs.dataset
    if isinstance(dataset, Dataset) and "text" in dataset.column_names:
        texts = [transform(t) for t in dataset["text"]]
        others = dataset.remove_columns("text")  # no column left (plain text batches): no rows left either
        rewritten = others.add_column("text", texts) if others.column_names else Dataset.from_dict({"text": texts})
    else:
        rewritten = Dataset.from_dict({"text": [transform(t) for batch in inputs for t in batch["text"]]})
    return DataLoader(rewritten, batch_size=inputs.batch_size, collate_fn=inputs.collate_fn, shuffle=False)


class InstructedEncoder:
    """An mteb encoder that sends DisastIR queries with the configured instruction, and nothing doubled.

    Its ``mteb_model_meta`` names the instruction set and template in ``experiment_kwargs``, so mteb files each
    setting under its own experiment.

    Args:
        model: a SentenceTransformer, an mteb encoder or a callable ``list[str] -> array``.
        config: the instruction set, template and whether passages are instructed.
        model_prompt: for models that apply ``TaskMetadata.prompt`` themselves: ``"take-over"`` (switch theirs off
            on DisastIR tasks, send ours) or ``"leave"`` (send raw queries).
    """

    def __init__(self, model: object, config: InstructionConfig, *, model_prompt: ModelPrompt = "take-over") -> None:
        if model_prompt not in ("take-over", "leave"):
            raise InvalidInput(f"model_prompt must be 'take-over' or 'leave', not {model_prompt!r}.")
        self.model = as_mteb_encoder(model)
        self.config = config
        self.applies_task_prompt = _applies_task_prompt(self.model)
        self.model_prompt: ModelPrompt | None = model_prompt if self.applies_task_prompt else None
        meta = self.model.mteb_model_meta
        experiment = dict(meta.experiment_kwargs or {}) if meta is not None else {}
        experiment.update(config.experiment_kwargs())
        if self.model_prompt == "leave":
            experiment.update({INSTRUCTIONS_KEY: MODEL_OWN, TEMPLATE_KEY: MODEL_OWN})
        self.mteb_model_meta = meta.model_copy(update={"experiment_kwargs": experiment}) if meta is not None else None
        name = getattr(meta, "name", None) or type(self.model).__name__
        if self.model_prompt == "take-over":
            logger.info("%s applies TaskMetadata.prompt itself; on DisastIR tasks its own instruction is switched "
                        "off and %s is sent instead.", name, config.describe())
        elif self.model_prompt == "leave":
            logger.info("%s applies TaskMetadata.prompt itself; DisastIR queries are left to it (its template, "
                        "the disastir instruction set).", name)
        else:
            logger.info("%s: %s.", name, config.describe())

    def __getattr__(self, name: str) -> Any:
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)

    def encode(self, inputs: DataLoader[BatchedInput], *, task_metadata: TaskMetadata, hf_split: str,
               hf_subset: str, prompt_type: PromptType | None = None, **kwargs: Any) -> Array:
        """Encode with the DisastIR instruction applied to queries (and passages if configured)."""
        spec = _spec(task_metadata)
        call: Mapping[str, Any] = {"task_metadata": task_metadata, "hf_split": hf_split, "hf_subset": hf_subset,
                                   "prompt_type": prompt_type, **kwargs}
        if spec is None or self.model_prompt == "leave":
            return self.model.encode(inputs, **call)
        wanted = prompt_type == PromptType.query or (self.config.passages and prompt_type == PromptType.document)
        if wanted and self.config.instructions is not None:
            inputs = _rewrite(inputs, lambda text: self.config.format(spec.intent, text))
        if self.model_prompt == "take-over":
            return _task_prompt_switched_off(self.model).encode(inputs, **call)
        return self.model.encode(inputs, **call)


def with_instructions(
    model: Any,
    instructions: str | Mapping[str, str] | InstructionConfig | None = "disastir",
    template: str | None = None,
    *,
    passages: bool = False,
    model_prompt: ModelPrompt = "take-over",
) -> InstructedEncoder:
    """Wrap a model so every DisastIR query carries its intent's instruction, exactly.

    Args:
        model: a ``SentenceTransformer``, an mteb encoder or a callable ``list[str] -> array``.
        instructions: ``"disastir"``, ``"dmretriever"``, ``"none"``, or a mapping {intent: instruction} for all six.
        template: ``"instruct-query"``, ``"colon"`` or a format string with ``{instruction}`` and ``{query}``;
            default: the template the chosen set was published with.
        passages: also instruct passages (the authors never do).
        model_prompt: see :class:`InstructedEncoder`.

    Examples:
        >>> model = with_instructions(SentenceTransformer("intfloat/e5-small-v2"), "disastir")
        >>> mteb.evaluate(model, mteb.get_benchmark("DisastIR"))
    """
    return InstructedEncoder(model, resolve_instructions(instructions, template, passages=passages),
                             model_prompt=model_prompt)

"""The runner as a build's retrievers: the pool's top 10s, the passages' vectors, and the chunker's token counts.

DisastIR pooled the top 10 of 30 models, exact and ANN (USearch). A build does the same with its pool models on
the provisional layout through :func:`~disastir_mteb.runner.run.evaluate`, so each model encodes the corpus once
(the embedding cache) and both searches share those vectors; the union of their per-query top 10s is the pool.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from disastir_mteb.results.per_query import per_query_file, read_per_query
from disastir_mteb.util.errors import InvalidInput

__all__ = ["SEARCHES", "RunnerRetrievers", "per_query_scores"]

#: The searches each pool model runs, as DisastIR's pool did.
SEARCHES = ("exact", "ann")


class RunnerRetrievers:
    """The runner's models for a build: ``pool_models`` (names or models) pool; the first embeds and counts tokens."""

    def __init__(self, pool_models: Sequence[Any], *, results: Path, show_progress: bool = True) -> None:
        if not pool_models:
            raise InvalidInput("--pool-models names no model; name at least one (disastir-mteb/hashing-encoder is a "
                               "lexical one that needs no download).")
        self.pool_models = tuple(pool_models)
        self.results = results
        self.show_progress = show_progress
        self._model: Any = None
        self._counter: Callable[[str], int] | None = None

    def _first(self) -> Any:
        if self._model is None:
            from disastir_mteb.models.loading import load_model

            self._model = load_model(self.pool_models[0])
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts`` from the first pool model, as it encodes passages."""
        import mteb
        from mteb.types import PromptType

        from disastir_mteb.search.routing import passage_loader
        from disastir_mteb.vocabulary.taxonomy import TASK_NAMES

        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        model = self._first()
        if hasattr(model, "encode_document"):
            vectors = model.encode_document(texts, convert_to_numpy=True, show_progress_bar=False)
        else:
            metadata = mteb.get_task(TASK_NAMES[0]).metadata
            vectors = model.encode(passage_loader(texts, 64), task_metadata=metadata, hf_split="test",
                                   hf_subset="default", prompt_type=PromptType.document)
        vectors = np.asarray(vectors, dtype=np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the first pool model's tokenizer (words, for a model without one)."""
        from disastir_mteb.util.tokens import token_counter

        tokenizer = getattr(self._first(), "tokenizer", None)
        if tokenizer is None:
            return len(re.findall(r"\S+", text))
        if self._counter is None:
            self._counter = token_counter(tokenizer)
        return self._counter(text)

    def pool(self, layout: Path) -> dict[str, list[str]]:
        """Query id -> the union of every pool model's top 10, exact and ANN, in the order first met."""
        from disastir_mteb.runner.run import evaluate

        pooled: dict[str, list[str]] = {}
        for model in self.pool_models:
            for search in SEARCHES:
                result = evaluate(model, data=layout, search=search, output_folder=self.results / search,
                                  show_progress=self.show_progress)
                for task_result in result.task_results:
                    top10 = read_per_query(per_query_file(result.folder, task_result.task_name)).top10
                    for query_id, ranking in top10.items():
                        known = pooled.setdefault(query_id, [])
                        known += [pid for pid in ranking if pid not in known]
        return pooled


def per_query_scores(model: Any, data: Path, output: Path, *, tasks: Sequence[str] | None = None,
                     show_progress: bool = False) -> dict[str, float]:
    """``task/query id`` -> NDCG@10 of ``model`` on ``tasks`` (default: every task) of ``data``."""
    from disastir_mteb.runner.run import evaluate

    result = evaluate(model, list(tasks) if tasks else None, data=data, output_folder=output,
                      show_progress=show_progress)
    scores = {}
    for task_result in result.task_results:
        record = read_per_query(per_query_file(result.folder, task_result.task_name))
        scores.update((f"{task_result.task_name}/{query_id}", score) for query_id, score in record.ndcg_at_10.items())
    return scores

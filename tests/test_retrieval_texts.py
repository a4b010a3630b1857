"""The texts the search model hands the encoder are mteb's own, read as whole columns (no per-row map)."""

from __future__ import annotations

import mteb
import pytest
from datasets import Dataset
from mteb._create_dataloaders import create_dataloader
from mteb.types import PromptType

from disastir_mteb.search.routing import retrieval_texts

CORPORA = {
    "text only": {"id": ["d1", "d2", "d3"], "text": ["  Floods spread cholera. ", "Boil water\n", "x"]},
    "titles, some empty": {"id": ["d1", "d2", "d3"], "title": ["Cholera", "", "  Water "],
                           "text": [" Floods spread it. ", "Boil water", "Keep it clean  "]},
}
QUERIES = {
    "plain": {"id": ["q1", "q2"], "text": ["  How do floods spread disease? ", "What breeds mosquitoes?"]},
    "with instructions": {"id": ["q1", "q2"], "text": ["How?", "Why?"],
                          "instruction": ["Retrieve a passage.", "Retrieve a tweet."]},
    "conversations": {"id": ["q1", "q2"], "text": [[{"role": "user", "content": "Is the river rising?"},
                                                    {"role": "assistant", "content": "Yes."},
                                                    {"role": "user", "content": "Where?"}],
                                                   [{"role": "user", "content": "Any cholera cases?"}]]},
}


def _metadata() -> object:
    return mteb.get_task("DisastIR-QA-Bio").metadata


def _mtebs(dataset: Dataset, prompt_type: PromptType) -> list[str]:
    """The texts in the batches of mteb's own dataloader: what mteb's search hands an encoder."""
    loader = create_dataloader(dataset, task_metadata=_metadata(), prompt_type=prompt_type, batch_size=2)
    return [text for batch in loader for text in batch["text"]]


@pytest.mark.parametrize("case", list(CORPORA))
def test_passage_texts_are_mtebs(case: str) -> None:
    corpus = Dataset.from_dict(CORPORA[case])
    texts = retrieval_texts(corpus, PromptType.document, task_metadata=_metadata())
    assert type(texts) is list and texts == _mtebs(corpus, PromptType.document)


@pytest.mark.parametrize("case", list(QUERIES))
def test_query_texts_are_mtebs(case: str) -> None:
    queries = Dataset.from_dict(QUERIES[case])
    texts = retrieval_texts(queries, PromptType.query, task_metadata=_metadata())
    assert type(texts) is list and texts == _mtebs(queries, PromptType.query)
    if case == "conversations":
        assert texts[0] == "user: Is the river rising?; assistant: Yes.; user: Where?"


def test_a_selection_of_rows_reads_only_those_rows() -> None:
    """A ``select``ed dataset keeps its whole table underneath: the texts must be the selected rows'."""
    corpus = Dataset.from_dict(CORPORA["text only"]).select([2, 0])
    assert retrieval_texts(corpus, PromptType.document, task_metadata=_metadata()) == ["x", "Floods spread cholera."]
    assert retrieval_texts(corpus.select([]), PromptType.document, task_metadata=_metadata()) == []


def test_the_passage_loader_hands_the_model_mtebs_batches() -> None:
    """The same batches, columns and features as mteb's ``create_dataloader`` of the same passages."""
    from disastir_mteb.search.routing import passage_loader

    corpus = Dataset.from_dict(CORPORA["titles, some empty"])
    metadata = _metadata()
    texts = retrieval_texts(corpus, PromptType.document, task_metadata=metadata) * 3  # 9 passages: batches of 4, 4, 1
    theirs = create_dataloader(Dataset.from_dict({"id": [str(i) for i in range(len(texts))], "text": texts}),
                               task_metadata=metadata, prompt_type=PromptType.document, batch_size=4)
    ours = passage_loader(texts, 4)
    assert [dict(batch) for batch in ours] == [dict(batch) for batch in theirs]
    assert ours.dataset.features == theirs.dataset.features and ours.batch_size == theirs.batch_size == 4

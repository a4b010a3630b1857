"""Counting a text's tokens as a model's tokenizer cuts it, whole: what chunking under a token limit needs."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

__all__ = ["token_counter"]


def token_counter(tokenizer: Any) -> Callable[[str], int]:
    """Counts a text's tokens as ``tokenizer`` (a ``tokenizers.Tokenizer`` or a transformers one) cuts it, whole.

    A model's tokenizer file usually truncates at the model's limit (MiniLM's at 128), which would make every long
    text look short: truncation and padding are off here, on a copy.
    """
    if hasattr(tokenizer, "encode_batch"):  # tokenizers.Tokenizer
        whole = copy.deepcopy(tokenizer)
        whole.no_truncation()
        whole.no_padding()
        return lambda text: len(whole.encode(text, add_special_tokens=False).ids)
    return lambda text: len(tokenizer(text, add_special_tokens=False, truncation=False)["input_ids"])

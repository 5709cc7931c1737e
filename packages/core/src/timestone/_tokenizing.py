"""Texts through a ``tokenizers`` tokenizer, on the caller's thread when they are few.

``Tokenizer.encode_batch_fast`` hands a batch to the library's thread pool. For an
``add_facts`` call's sentences or a context's few dozen snippets, waking the pool costs
more than the work (0.24 against 0.13 ms for ten sentences, 0.73 against 0.56 for
thirty snippets, each call a few milliseconds after the last), and its threads then
spin on the cores the database needs. Larger batches go to the pool, which wins by 2
to 3 times (docs/decisions/033-a-writes-client-work.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["SERIAL_TOKENIZE_CHARS", "encode_all"]

SERIAL_TOKENIZE_CHARS = 4_000  # texts of fewer characters in all: one by one, here


def encode_all(tokenizer: Any, texts: Sequence[str]) -> list[Any]:
    """The encodings of ``texts``, in order, without special tokens."""
    if sum(map(len, texts)) < SERIAL_TOKENIZE_CHARS:
        return [tokenizer.encode(text, add_special_tokens=False) for text in texts]
    return list(tokenizer.encode_batch_fast(list(texts), add_special_tokens=False))

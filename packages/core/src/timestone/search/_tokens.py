"""Token counting for context budgets, with a real tokenizer that works offline.

The default counter is the Llama 2 BPE tokenizer (32,000 tokens) that ships
inside the ``wordllama`` wheel, the default embedder's package, read with the
``tokenizers`` library: nothing is downloaded, ever. For English text it
counts about 10 to 20 percent more tokens than the OpenAI ``cl100k``/``o200k``
encodings, so a budget it respects is respected by those models too. Any
object with ``count(text) -> int`` can replace it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .._tokenizing import encode_all

__all__ = ["LlamaTokenCounter", "TokenCounter", "default_counter"]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text as a model would."""

    def count(self, text: str) -> int: ...


class LlamaTokenCounter:
    """The Llama 2 tokenizer shipped in the ``wordllama`` wheel (offline)."""

    _lock = threading.Lock()
    _tokenizer: Any = None

    @classmethod
    def _load(cls) -> Any:
        with cls._lock:
            if cls._tokenizer is None:
                import wordllama
                from tokenizers import Tokenizer

                path = Path(wordllama.__file__).parent / "tokenizers"
                tok: Any = Tokenizer.from_file(str(path / "l2_supercat_tokenizer_config.json"))
                tok.no_truncation()
                tok.no_padding()
                cls._tokenizer = tok
            return cls._tokenizer

    @property
    def name(self) -> str:
        return "llama-2-bpe"

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._load().encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        encoded = encode_all(self._load(), texts)
        return [len(e.ids) for e in encoded]


_DEFAULT = LlamaTokenCounter()


def default_counter() -> LlamaTokenCounter:
    return _DEFAULT

"""The texts an item's vectors were embedded from, as its row keeps them (``index_texts``,
migration 0043), so that a move to another embedder embeds the same texts again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._item import index_text

__all__ = ["embedded_texts", "kept_texts"]


def kept_texts(value: Mapping[str, Any], texts: Sequence[str]) -> list[str] | None:
    """What a put keeps of ``texts``, the texts it embedded for ``value``: None for none,
    an empty list for the value's JSON alone (the value holds it), else the texts."""
    if not texts:
        return None
    if len(texts) == 1 and texts[0] == index_text(value):
        return []
    return list(texts)


def embedded_texts(value: Mapping[str, Any], kept: Sequence[str]) -> list[str]:
    """The texts a row's vectors were embedded from, in their order, from what its put
    kept (``kept_texts``, not None) and its value as read back."""
    return list(kept) if kept else [index_text(value)]

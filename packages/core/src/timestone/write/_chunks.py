"""Chunking long documents into episodes, with character offsets back into the source."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from .._characters import joined_back
from ..embedders import Embedder, check_rows, embedder_failed
from ..errors import InvalidInput, TimestoneError

if TYPE_CHECKING:
    from .._vectors import Row

__all__ = ["Chunk", "chunk_text", "late_vectors"]

_BREAKS = (re.compile(r"\n\s*\n"), re.compile(r"(?<=[.!?])\s+"), re.compile(r"\s+"))


@dataclasses.dataclass(frozen=True, slots=True)
class Chunk:
    index: int
    start: int
    end: int
    text: str


def chunk_text(content: str, *, max_chars: int = 1500, overlap: int = 0) -> list[Chunk]:
    """Split ``content`` into chunks of at most ``max_chars``, preferring paragraph, then
    sentence, then word boundaries; ``content[c.start:c.end] == c.text`` for every chunk."""
    given: object = max_chars  # as the caller passed it
    if type(given) is not int or given < 100:
        raise InvalidInput(f"max_chunk_chars must be an integer of at least 100, got {given!r:.80}")
    chunks: list[Chunk] = []
    start = 0
    n = len(content)
    while start < n:
        while start < n and content[start].isspace():
            start += 1
        if start >= n:
            break
        end = min(start + max_chars, n)
        if end < n:
            window = content[start:end]
            cut = -1
            for pattern in _BREAKS:
                found = [m.start() for m in pattern.finditer(window) if m.start() > max_chars // 3]
                if found:
                    cut = found[-1]
                    break
            # with no break at all, not inside a letter and its marks
            end = start + cut if cut > 0 else joined_back(content, start, end)
        text = content[start:end].rstrip()
        chunks.append(Chunk(index=len(chunks), start=start, end=start + len(text), text=text))
        start = max(end - overlap, start + 1) if overlap else end
    return chunks


def late_vectors(embedder: Embedder, content: str, chunks: Sequence[Chunk]) -> Row | None:
    """Late chunking: when the embedder has token-level output (``embed_spans``) and its
    ``late_chunking`` is true, the chunks' vectors pooled from one pass over the whole
    document, one row per chunk; otherwise None (each chunk is embedded alone)."""
    spans = getattr(embedder, "embed_spans", None)
    if getattr(embedder, "late_chunking", False) is not True or not callable(spans):
        return None
    embed_spans = cast(Callable[[str, Sequence[tuple[int, int]]], object], spans)
    try:
        rows = embed_spans(content, [(c.start, c.end) for c in chunks])
    except TimestoneError:
        raise
    except Exception as exc:
        raise embedder_failed(embedder, exc) from exc
    return check_rows(embedder, [c.text for c in chunks], rows)

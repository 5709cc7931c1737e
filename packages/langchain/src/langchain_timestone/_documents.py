"""Timestone records as LangChain ``Document``s: the text as content, the metadata of
``timestone.toolkit`` (the citation id, both clocks, where it came from), the same
keys a LlamaIndex node of the same search carries."""

from __future__ import annotations

from langchain_core.documents import Document

import timestone
from timestone.toolkit import (
    Found,
    Retrieved,
    entity_record,
    episode_record,
    fact_record,
    ranked_records,
)

__all__ = [
    "Results",
    "entity_document",
    "episode_document",
    "fact_document",
    "ranked_documents",
]

Results = Found  # what ``Memory.search`` returns, as far as documents need it


def _document(record: Retrieved) -> Document:
    return Document(id=record.id, page_content=record.text, metadata=record.metadata)


def fact_document(fact: timestone.Fact) -> Document:
    """A fact: its sentence as content; its citation id, ids, endpoints, both clocks,
    episodes, attributes and score."""
    return _document(fact_record(fact))


def entity_document(entity: timestone.Entity) -> Document:
    """An entity: ``name: summary`` as content."""
    return _document(entity_record(entity))


def episode_document(episode: timestone.Episode) -> Document:
    """An episode or document chunk: its verbatim content, its citation id, where it came
    from."""
    return _document(episode_record(episode))


def ranked_documents(results: Found, k: int) -> list[Document]:
    """The ``k`` best documents across the scopes of a ``SearchResults``, by score."""
    return [_document(r) for r in ranked_records(results, k)]

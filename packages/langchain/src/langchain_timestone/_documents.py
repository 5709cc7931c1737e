"""Timestone records as LangChain ``Document``s: the text as content, both clocks in metadata."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from langchain_core.documents import Document

import timestone

__all__ = [
    "Results",
    "entity_document",
    "episode_document",
    "fact_document",
    "ranked_documents",
]


class Results(Protocol):
    """What ``Memory.search`` returns, as far as documents need it."""

    @property
    def facts(self) -> Sequence[timestone.Fact]: ...
    @property
    def entities(self) -> Sequence[timestone.Entity]: ...
    @property
    def episodes(self) -> Sequence[timestone.Episode]: ...


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def fact_document(fact: timestone.Fact) -> Document:
    """A fact: its sentence as content; ids, endpoints, both clocks, episodes and score."""
    return Document(
        id=str(fact.id),
        page_content=fact.fact,
        metadata={
            "kind": "fact",
            "id": str(fact.id),
            "version_id": str(fact.version_id),
            "group_id": fact.group_id,
            "source": fact.source,
            "source_id": str(fact.source_id),
            "relation": fact.relation,
            "target": fact.target,
            "target_id": str(fact.target_id),
            "valid_at": _iso(fact.valid_at),
            "invalid_at": _iso(fact.invalid_at),
            "created_at": _iso(fact.created_at),
            "expired_at": _iso(fact.expired_at),
            "episodes": [str(e) for e in fact.episodes],
            "attributes": dict(fact.attributes),
            "score": fact.score,
        },
    )


def entity_document(entity: timestone.Entity) -> Document:
    """An entity: ``name: summary`` as content."""
    content = f"{entity.name}: {entity.summary}" if entity.summary else entity.name
    return Document(
        id=str(entity.id),
        page_content=content,
        metadata={
            "kind": "entity",
            "id": str(entity.id),
            "group_id": entity.group_id,
            "name": entity.name,
            "labels": list(entity.labels),
            "attributes": dict(entity.attributes),
            "created_at": _iso(entity.created_at),
            "expired_at": _iso(entity.expired_at),
            "score": entity.score,
        },
    )


def episode_document(episode: timestone.Episode) -> Document:
    """An episode or document chunk: its verbatim content, with where it came from."""
    return Document(
        id=str(episode.id),
        page_content=episode.content,
        metadata={
            "kind": "episode",
            "id": str(episode.id),
            "group_id": episode.group_id,
            "name": episode.name,
            "source": episode.source,
            "source_description": episode.source_description,
            "reference_time": _iso(episode.reference_time),
            "created_at": _iso(episode.created_at),
            "expired_at": _iso(episode.expired_at),
            "document_uri": episode.document_uri,
            "char_start": episode.char_start,
            "char_end": episode.char_end,
            "score": episode.score,
        },
    )


def ranked_documents(results: Results, k: int) -> list[Document]:
    """The ``k`` best documents across the scopes of a ``SearchResults``, by score."""
    docs = [
        *(fact_document(f) for f in results.facts),
        *(entity_document(e) for e in results.entities),
        *(episode_document(e) for e in results.episodes),
    ]
    order = {id(d): i for i, d in enumerate(docs)}
    docs.sort(key=lambda d: (-(d.metadata["score"] or 0.0), order[id(d)]))
    return docs[:k]

"""``TimestoneRetriever``: a LlamaIndex ``BaseRetriever`` over Timestone's hybrid search.

Facts come back as ``TextNode``s (the sentence as text, both clocks in
metadata; the world period is shown to the LLM, ids are not), entities and
episodes too when their scopes are asked for, each ``NodeWithScore`` with the
search score.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

import timestone
from timestone._groups import check_group
from timestone._time import NOW, Now, aware

__all__ = ["TimestoneRetriever", "entity_node", "episode_node", "fact_node"]

_SCOPES = frozenset({"facts", "entities", "episodes"})
_HIDDEN = ["id", "version_id", "episodes", "created_at", "expired_at", "group_id", "kind"]


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _node(ident: str, text: str, metadata: dict[str, Any]) -> TextNode:
    return TextNode(
        id_=ident,
        text=text,
        metadata=metadata,
        excluded_llm_metadata_keys=[k for k in metadata if k in _HIDDEN],
        excluded_embed_metadata_keys=list(metadata),
    )


def fact_node(fact: timestone.Fact) -> TextNode:
    return _node(
        str(fact.id),
        fact.fact,
        {
            "kind": "fact",
            "id": str(fact.id),
            "version_id": str(fact.version_id),
            "group_id": fact.group_id,
            "source": fact.source,
            "relation": fact.relation,
            "target": fact.target,
            "valid_at": _iso(fact.valid_at),
            "invalid_at": _iso(fact.invalid_at),
            "created_at": _iso(fact.created_at),
            "expired_at": _iso(fact.expired_at),
            "episodes": [str(e) for e in fact.episodes],
        },
    )


def entity_node(entity: timestone.Entity) -> TextNode:
    text = f"{entity.name}: {entity.summary}" if entity.summary else entity.name
    return _node(
        str(entity.id),
        text,
        {
            "kind": "entity",
            "id": str(entity.id),
            "group_id": entity.group_id,
            "name": entity.name,
            "labels": list(entity.labels),
            "created_at": _iso(entity.created_at),
            "expired_at": _iso(entity.expired_at),
        },
    )


def episode_node(episode: timestone.Episode) -> TextNode:
    return _node(
        str(episode.id),
        episode.content,
        {
            "kind": "episode",
            "id": str(episode.id),
            "group_id": episode.group_id,
            "name": episode.name,
            "reference_time": _iso(episode.reference_time),
            "document_uri": episode.document_uri,
            "created_at": _iso(episode.created_at),
            "expired_at": _iso(episode.expired_at),
        },
    )


class TimestoneRetriever(BaseRetriever):
    """Retrieve from a Timestone group for a LlamaIndex query engine.

    ``valid_at``: the world time facts must hold at (default: now; ``None``: every period);
    ``as_of``: what the graph held at that system time (default: now).
    """

    def __init__(
        self,
        memory: timestone.Memory | timestone.AsyncMemory,
        group_id: str,
        *,
        similarity_top_k: int = 4,
        scopes: Sequence[str] = ("facts",),
        valid_at: datetime | Now | None = NOW,
        as_of: datetime | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        given = cast(object, memory)
        if not isinstance(given, (timestone.Memory, timestone.AsyncMemory)):
            raise TypeError(
                f"TimestoneRetriever needs a timestone.Memory or AsyncMemory, got {type(given)!r}"
            )
        if similarity_top_k < 1:
            raise ValueError(f"similarity_top_k must be at least 1, got {similarity_top_k}")
        unknown = sorted(set(scopes) - _SCOPES)
        if isinstance(scopes, str) or not scopes or unknown:
            raise ValueError(f"scopes must name some of facts, entities, episodes; got {scopes!r}")
        self.memory = memory
        self.group_id = check_group(group_id)
        self.similarity_top_k = similarity_top_k
        self.scopes = tuple(scopes)
        self.valid_at = (
            valid_at if valid_at is None or valid_at is NOW else aware(valid_at, "valid_at")
        )
        self.as_of = None if as_of is None else aware(as_of, "as_of")
        super().__init__(callback_manager=callback_manager)  # pyright: ignore[reportUnknownMemberType]

    def _args(self, query: str) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "query": query,
            "limit": self.similarity_top_k,
            "scopes": self.scopes,
            "valid_at": self.valid_at,
            "as_of": self.as_of,
        }

    def _nodes(self, results: Any) -> list[NodeWithScore]:
        scored = [
            *((fact_node(f), f.score) for f in results.facts),
            *((entity_node(e), e.score) for e in results.entities),
            *((episode_node(e), e.score) for e in results.episodes),
        ]
        order = {id(n): i for i, (n, _) in enumerate(scored)}
        scored.sort(key=lambda p: (-(p[1] or 0.0), order[id(p[0])]))
        return [NodeWithScore(node=n, score=s) for n, s in scored[: self.similarity_top_k]]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        mem = self.memory
        if not isinstance(mem, timestone.Memory):
            raise TypeError(
                "this TimestoneRetriever wraps an AsyncMemory: use aretrieve/aquery, or build it "
                "on a timestone.Memory"
            )
        return self._nodes(mem.search(**self._args(query_bundle.query_str)))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        mem = self.memory
        args = self._args(query_bundle.query_str)
        if isinstance(mem, timestone.Memory):
            results = await asyncio.to_thread(lambda: mem.search(**args))
        else:
            results = await mem.search(**args)
        return self._nodes(results)

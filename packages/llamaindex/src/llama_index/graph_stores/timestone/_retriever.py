"""``TimestoneRetriever``: a LlamaIndex ``BaseRetriever`` over Timestone's hybrid search.

Facts and passages (episodes and document chunks) come back ranked together as
``TextNode``s, entities too when their scope is asked for, each ``NodeWithScore``
with the search score. A node's metadata is ``timestone.toolkit``'s, the same keys as
a LangChain ``Document`` of the same search: the citation id the tools and
``context()`` cite and the world period are shown to the LLM, ids and the system
clock are not.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

import timestone
from timestone.toolkit import (
    DEFAULT_RETRIEVER_SCOPES,
    MAX_SEARCH_LIMIT,
    NOW,
    Found,
    Now,
    Retrieved,
    check_aware,
    check_group,
    check_scopes,
    entity_record,
    episode_record,
    fact_record,
    ranked_records,
)

__all__ = ["TimestoneRetriever", "entity_node", "episode_node", "fact_node"]

# metadata a model does not read: ids, the system clock, the score (the node has it)
_HIDDEN = frozenset(
    {
        "id",
        "version_id",
        "episodes",
        "created_at",
        "expired_at",
        "group_id",
        "kind",
        "source_id",
        "target_id",
        "score",
        "char_start",
        "char_end",
    }
)


_GRAPH_EPISODE = "property graph store"  # the source_description of a graph write's episode


def _graph_write_text(content: str) -> str | None:
    """The readable text of an episode a property graph write recorded (its content is the
    write as JSON): a sentence per relation, else the names of its entities."""
    try:
        data = json.loads(content)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    written = cast(dict[str, Any], data)
    lines: list[str] = []
    for r in cast(list[dict[str, Any]], written.get("relations") or []):
        relation = str(r.get("relation", "")).lower().replace("_", " ")
        lines.append(f"{r.get('source')} {relation} {r.get('target')}.")
    if not lines:
        names = [
            str(e.get("name")) for e in cast(list[dict[str, Any]], written.get("entities") or [])
        ]
        lines = [f"{', '.join(names)}."] if names else []
    return "\n".join(lines) or None


def _node(record: Retrieved) -> TextNode:
    metadata = record.metadata
    text = record.text
    if metadata.get("kind") == "episode" and metadata.get("source_description") == _GRAPH_EPISODE:
        text = _graph_write_text(text) or text
    hidden = [  # and what is empty, but for an open period's end (still true)
        k
        for k, v in metadata.items()
        if k in _HIDDEN or (v in (None, {}, "") and k != "invalid_at")
    ]
    return TextNode(
        id_=record.id,
        text=text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=list(metadata),
    )


def fact_node(fact: timestone.Fact) -> TextNode:
    """A fact: its sentence as text; its citation id, endpoints and world period for the
    LLM, ids and the system clock in metadata too."""
    return _node(fact_record(fact))


def entity_node(entity: timestone.Entity) -> TextNode:
    """An entity: ``name: summary`` as text."""
    return _node(entity_record(entity))


def episode_node(episode: timestone.Episode) -> TextNode:
    """An episode or document chunk: its verbatim content (a property graph write's
    episode: its relations as sentences), its citation id, where it came from."""
    return _node(episode_record(episode))


class TimestoneRetriever(BaseRetriever):
    """Retrieve from a Timestone group for a LlamaIndex query engine: facts and passages
    (episodes and document chunks) ranked together; ``scopes=`` narrows or widens what
    is searched (``facts``, ``entities``, ``episodes``).

    ``valid_at``: the world time facts must hold at (default: now; ``None``: every period);
    ``as_of``: what the graph held at that system time (default: now).
    """

    def __init__(
        self,
        memory: timestone.Memory | timestone.AsyncMemory,
        group_id: str,
        *,
        similarity_top_k: int = 4,
        scopes: Sequence[str] = DEFAULT_RETRIEVER_SCOPES,
        valid_at: datetime | Now | None = NOW,
        as_of: datetime | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        given = cast(object, memory)
        if not isinstance(given, (timestone.Memory, timestone.AsyncMemory)):
            raise TypeError(
                f"TimestoneRetriever needs a timestone.Memory or AsyncMemory, got {type(given)!r}"
            )
        top_k = cast(object, similarity_top_k)
        if (
            not isinstance(top_k, int)
            or isinstance(top_k, bool)
            or not 1 <= top_k <= MAX_SEARCH_LIMIT
        ):
            raise ValueError(
                f"similarity_top_k must be an integer from 1 to {MAX_SEARCH_LIMIT}, "
                f"got {top_k!r:.80}"
            )
        self.memory = memory
        self.group_id = check_group(group_id)
        self.similarity_top_k = similarity_top_k
        self.scopes = check_scopes(scopes)
        self.valid_at = (
            valid_at if valid_at is None or valid_at is NOW else check_aware(valid_at, "valid_at")
        )
        self.as_of = None if as_of is None else check_aware(as_of, "as_of")
        super().__init__(callback_manager=callback_manager)  # pyright: ignore[reportUnknownMemberType]

    def _args(self, query: str) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "query": query,
            "limit": self.similarity_top_k,
            "scopes": self.scopes,
            "valid_at": self.valid_at,
            "as_of": self.as_of,
            # the records of structured facts are not passages: their facts are the answer
            "fact_records": False,
        }

    def _nodes(self, results: Found) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=_node(r), score=r.score)
            for r in ranked_records(results, self.similarity_top_k)
        ]

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

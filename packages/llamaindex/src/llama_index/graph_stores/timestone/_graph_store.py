"""``TimestonePropertyGraphStore``: a LlamaIndex ``PropertyGraphStore`` on Timestone's graph.

A thin mapping onto the core's property graph view (``Memory.graph_*``):

- an ``EntityNode`` is a Timestone entity: its name the entity's name, its label the
  entity's type (``"entity"`` for an untyped one), its properties the entity's attributes;
- a ``Relation`` between two entities is a Timestone fact (so ``memory.facts``, ``search``
  and ``timeline`` see it, and the date fight settles it); one with a chunk at an end is a
  link;
- a ``ChunkNode`` is a chunk: its text and properties round-trip exactly;
- node ids are entity names (resolved as Timestone resolves names), entity ids, or chunk
  ids, each within the store's group: the same id in two groups names two nodes, so one
  document loads into two tenants;
- what LlamaIndex read from one chunk is one episode, so deleting the chunk (or its
  document: ``delete_llama_nodes(ref_doc_ids=...)``, ``index.delete_ref_doc``) removes
  what only it supported (see ``_operations``).

Built on a ``timestone.Memory``, the LlamaIndex methods make blocking calls; built on a
``timestone.AsyncMemory``, their ``a*`` twins (``aget``, ``aget_triplets``,
``aupsert_nodes``, ...) await it, and the blocking ones are refused. No SQL, pools or
event loops here: every step is one memory call.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from llama_index.core.graph_stores.types import (
    TRIPLET_SOURCE_KEY,
    ChunkNode,
    LabelledNode,
    PropertyGraphStore,
    Relation,
    Triplet,
)
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.core.vector_stores.utils import node_to_metadata_dict

import timestone
from timestone import NOW
from timestone.toolkit import Now, check_aware, check_group

from . import _operations as ops
from ._operations import Call, Operation, Settings, relation_name

__all__ = ["VECTOR_SPACE", "TimestonePropertyGraphStore", "relation_name"]

VECTOR_SPACE = "llama_index"
T = TypeVar("T")


class TimestonePropertyGraphStore(PropertyGraphStore):
    """The property graph of one Timestone group, for ``PropertyGraphIndex``.

    ``memory``: a ``timestone.Memory`` (the blocking methods) or a ``timestone.AsyncMemory``
    (the ``a*`` methods); ``group_id``: the group (tenant) it reads and writes.
    ``valid_at``: the world time reads are true at (default now, ``None``: every period)
    and, when a datetime, the time written relations hold from. ``as_of``: a read-only view
    of what the graph held then. ``vector_space``: where node embeddings are kept for
    ``vector_query``.
    """

    supports_structured_queries: bool = False
    supports_vector_queries: bool = True

    def __init__(
        self,
        memory: timestone.Memory | timestone.AsyncMemory,
        group_id: str,
        *,
        valid_at: datetime | Now | None = NOW,
        as_of: datetime | None = None,
        vector_space: str = VECTOR_SPACE,
    ) -> None:
        given = cast(object, memory)
        if not isinstance(given, timestone.Memory | timestone.AsyncMemory):
            raise TypeError(
                "TimestonePropertyGraphStore needs a timestone.Memory or a "
                f"timestone.AsyncMemory, got {type(given)!r}"
            )
        self.memory = memory
        self.group_id = check_group(group_id)
        self.valid_at = (
            valid_at if valid_at is None or valid_at is NOW else check_aware(valid_at, "valid_at")
        )
        self.as_of = None if as_of is None else check_aware(as_of, "as_of")
        self.vector_space = vector_space

    @property
    def client(self) -> timestone.Memory | timestone.AsyncMemory:
        return self.memory

    def _settings(self) -> Settings:
        return Settings(valid_at=self.valid_at, as_of=self.as_of, vector_space=self.vector_space)

    def _run(self, operation: Operation[T]) -> T:
        """Run an operation with blocking memory calls."""
        memory = self.memory
        if not isinstance(memory, timestone.Memory):
            operation.close()
            raise TypeError(
                "this TimestonePropertyGraphStore is built on a timestone.AsyncMemory: call "
                "its async methods (aget, aget_triplets, aget_rel_map, aupsert_nodes, "
                "aupsert_relations, adelete, avector_query, ...), or build it on a "
                "timestone.Memory for blocking calls"
            )
        try:
            call: Call = next(operation)
            while True:
                try:
                    answer = getattr(memory, call.method)(self.group_id, **call.kwargs)
                except Exception as exc:  # into the operation, which may handle it
                    call = operation.throw(exc)
                else:
                    call = operation.send(answer)
        except StopIteration as done:
            return cast(T, done.value)

    async def _arun(self, operation: Operation[T]) -> T:
        """Run an operation with awaited memory calls (blocking ones on a ``Memory``, as
        LlamaIndex's own async defaults do)."""
        memory = self.memory
        if not isinstance(memory, timestone.AsyncMemory):
            return self._run(operation)
        try:
            call: Call = next(operation)
            while True:
                try:
                    answer = await getattr(memory, call.method)(self.group_id, **call.kwargs)
                except Exception as exc:
                    call = operation.throw(exc)
                else:
                    call = operation.send(answer)
        except StopIteration as done:
            return cast(T, done.value)

    # -- reading -----------------------------------------------------------------------

    def get(
        self, properties: dict[str, Any] | None = None, ids: list[str] | None = None
    ) -> list[LabelledNode]:
        """The nodes with these ``ids`` or holding these ``properties`` (entities and
        chunks), as the group holds them at the store's ``as_of``."""
        return self._run(ops.get(self._settings(), properties, ids))

    async def aget(
        self, properties: dict[str, Any] | None = None, ids: list[str] | None = None
    ) -> list[LabelledNode]:
        """``get``, awaited."""
        return await self._arun(ops.get(self._settings(), properties, ids))

    def get_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict[str, Any] | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        """The (source, relation, target) triplets of the facts in effect, narrowed by
        entity names, relation names, properties and ids, as ``SimplePropertyGraphStore``
        narrows them."""
        return self._run(
            ops.get_triplets(self._settings(), entity_names, relation_names, properties, ids)
        )

    async def aget_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict[str, Any] | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        """``get_triplets``, awaited."""
        return await self._arun(
            ops.get_triplets(self._settings(), entity_names, relation_names, properties, ids)
        )

    def get_rel_map(
        self,
        graph_nodes: list[LabelledNode],
        depth: int = 2,
        limit: int = 30,
        ignore_rels: list[str] | None = None,
    ) -> list[Triplet]:
        """Triplets within ``depth`` hops of the nodes, nearest first, by recursive queries
        in Timestone; relations in ``ignore_rels`` are walked through but not returned, as
        ``SimplePropertyGraphStore`` does."""
        return self._run(ops.get_rel_map(self._settings(), graph_nodes, depth, limit, ignore_rels))

    async def aget_rel_map(
        self,
        graph_nodes: list[LabelledNode],
        depth: int = 2,
        limit: int = 30,
        ignore_rels: list[str] | None = None,
    ) -> list[Triplet]:
        """``get_rel_map``, awaited."""
        return await self._arun(
            ops.get_rel_map(self._settings(), graph_nodes, depth, limit, ignore_rels)
        )

    # -- writing -----------------------------------------------------------------------

    def upsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        """Write entity nodes as entities and chunk nodes as document chunks, in the
        store's group; a node already there is updated (a new version, history kept)."""
        self._run(ops.upsert_nodes(self._settings(), nodes))

    async def aupsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        """``upsert_nodes``, awaited."""
        await self._arun(ops.upsert_nodes(self._settings(), nodes))

    async def aupsert_llama_nodes(self, llama_nodes: list[BaseNode]) -> None:
        """``upsert_llama_nodes``, awaited: each node as a ``ChunkNode``."""
        await self.aupsert_nodes(
            [
                ChunkNode(
                    text=n.get_content(metadata_mode=MetadataMode.NONE),
                    id_=n.id_,
                    properties=node_to_metadata_dict(n, remove_text=True),
                    embedding=n.embedding,
                )
                for n in llama_nodes
            ]
        )

    def upsert_relations(self, relations: list[Relation]) -> None:
        """Write relations as facts between their entities (relation names in
        ``UPPER_SNAKE_CASE``), dated by their document's ``reference_time``, else by the
        store's ``valid_at`` or the write's time."""
        self._run(ops.upsert_relations(self._settings(), relations))

    async def aupsert_relations(self, relations: list[Relation]) -> None:
        """``upsert_relations``, awaited."""
        await self._arun(ops.upsert_relations(self._settings(), relations))

    def delete(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict[str, Any] | None = None,
        ids: list[str] | None = None,
    ) -> None:
        """Retract, in system time (the graph stops holding them; an ``as_of`` store still
        reads them): with ``relation_names``, the relations of those names, narrowed by the
        other arguments as ``get_triplets`` narrows them; without, the nodes named by ``ids``
        and ``entity_names`` or holding ``properties``, with every relation at them, and,
        for a chunk, what only that chunk supported (the episodes read from it)."""
        self._run(ops.delete(self._settings(), entity_names, relation_names, properties, ids))

    async def adelete(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict[str, Any] | None = None,
        ids: list[str] | None = None,
    ) -> None:
        """``delete``, awaited."""
        await self._arun(
            ops.delete(self._settings(), entity_names, relation_names, properties, ids)
        )

    async def adelete_llama_nodes(
        self, node_ids: list[str] | None = None, ref_doc_ids: list[str] | None = None
    ) -> None:
        """``delete_llama_nodes``, awaited: the nodes read from ``node_ids``, those nodes,
        the chunks of ``ref_doc_ids`` and those ids, with what only they supported."""
        nodes: list[LabelledNode] = []
        for id_ in node_ids or []:
            nodes += await self.aget(properties={TRIPLET_SOURCE_KEY: id_})
        if node_ids:
            nodes += await self.aget(ids=node_ids)
        for id_ in ref_doc_ids or []:
            nodes += await self.aget(properties={"ref_doc_id": id_})
        if ref_doc_ids:
            nodes += await self.aget(ids=ref_doc_ids)
        await self.adelete(ids=[n.id for n in nodes])

    # -- queries -----------------------------------------------------------------------

    def structured_query(self, query: str, param_map: dict[str, Any] | None = None) -> Any:
        """Not supported: ``NotImplementedError`` naming the reads the store offers."""
        raise NotImplementedError(
            "TimestonePropertyGraphStore runs no structured (Cypher or SQL) queries: the graph "
            "is read through get, get_triplets, get_rel_map and vector_query, scoped to its group"
        )

    async def astructured_query(self, query: str, param_map: dict[str, Any] | None = None) -> Any:
        """``structured_query``, awaited: not supported either."""
        return self.structured_query(query, param_map)

    def vector_query(
        self, query: VectorStoreQuery, **kwargs: Any
    ) -> tuple[list[LabelledNode], list[float]]:
        """Entities nearest the query: ``query_embedding`` against the node embeddings this
        store kept (exact cosine; a query of another dimension is refused), else
        ``query_str`` against the entities' names with Timestone's own embedder."""
        return self._run(ops.vector_query(self._settings(), query))

    async def avector_query(
        self, query: VectorStoreQuery, **kwargs: Any
    ) -> tuple[list[LabelledNode], list[float]]:
        """``vector_query``, awaited."""
        return await self._arun(ops.vector_query(self._settings(), query))

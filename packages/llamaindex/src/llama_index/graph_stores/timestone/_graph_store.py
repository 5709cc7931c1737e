"""``TimestonePropertyGraphStore``: a LlamaIndex ``PropertyGraphStore`` on Timestone items.

Nodes and relations are stored as Timestone items of one group (namespaces
``("llama_index", "nodes")`` and ``("llama_index", "relations")``), so they are
tenant-scoped by the database, versioned (``as_of`` reads the past) and round-
trip exactly (chunk text and properties as JSON). The semantics of ``get``,
``get_triplets``, ``get_rel_map`` and ``delete`` are those of LlamaIndex's
``SimplePropertyGraphStore``; reads scan the group's graph items, so this store
suits graphs of thousands of nodes, not millions. It does not run structured
(Cypher) queries, and leaves vector search to the index's own vector store.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from llama_index.core.graph_stores.types import (
    ChunkNode,
    EntityNode,
    LabelledNode,
    PropertyGraphStore,
    Relation,
    Triplet,
)
from llama_index.core.vector_stores.types import VectorStoreQuery

import timestone
from timestone._groups import check_group

__all__ = ["TimestonePropertyGraphStore"]

NODES = ("llama_index", "nodes")
RELATIONS = ("llama_index", "relations")
_PAGE = 1000


def _node_value(node: LabelledNode) -> dict[str, Any]:
    if isinstance(node, ChunkNode):
        return {
            "kind": "chunk",
            "id": node.id,
            "text": node.text,
            "label": node.label,
            "properties": dict(node.properties),
        }
    if isinstance(node, EntityNode):
        return {
            "kind": "entity",
            "name": node.name,
            "label": node.label,
            "properties": dict(node.properties),
        }
    raise TypeError(f"TimestonePropertyGraphStore stores EntityNode and ChunkNode, got {node!r}")


def _node(value: dict[str, Any]) -> LabelledNode:
    if value["kind"] == "chunk":
        return ChunkNode(
            text=value["text"],
            id_=value["id"],
            label=value["label"],
            properties=value["properties"],
        )
    return EntityNode(name=value["name"], label=value["label"], properties=value["properties"])


def _relation_key(rel: Relation) -> str:
    return "\x1f".join((rel.source_id, rel.label, rel.target_id))


class TimestonePropertyGraphStore(PropertyGraphStore):
    """A property graph of one Timestone group, for ``PropertyGraphIndex``.

    ``memory``: a ``timestone.Memory``; ``as_of``: a read-only view of the graph as it was.
    """

    supports_structured_queries: bool = False
    supports_vector_queries: bool = False

    def __init__(
        self,
        memory: timestone.Memory,
        group_id: str,
        *,
        as_of: datetime | None = None,
    ) -> None:
        given = cast(object, memory)
        if not isinstance(given, timestone.Memory):
            raise TypeError(
                "TimestonePropertyGraphStore needs a blocking timestone.Memory (LlamaIndex "
                f"calls graph stores synchronously), got {type(given)!r}"
            )
        self.memory = memory
        self.group_id = check_group(group_id)
        self.as_of = as_of

    @property
    def client(self) -> timestone.Memory:
        return self.memory

    # -- reading -----------------------------------------------------------------------

    def _all(self, namespace: tuple[str, ...]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            page = self.memory.search_items(
                self.group_id, namespace, limit=_PAGE, offset=len(out), as_of=self.as_of
            )
            out.extend(dict(item.value) for item in page)
            if len(page) < _PAGE:
                return out

    def _nodes(self) -> dict[str, LabelledNode]:
        return {n.id: n for n in map(_node, self._all(NODES))}

    def _triplets(self) -> list[Triplet]:
        nodes = self._nodes()
        out: list[Triplet] = []
        for value in self._all(RELATIONS):
            rel = Relation(**value)
            src, dst = nodes.get(rel.source_id), nodes.get(rel.target_id)
            if src is not None and dst is not None:
                out.append((src, rel, dst))
        return out

    def get(
        self, properties: dict[str, Any] | None = None, ids: list[str] | None = None
    ) -> list[LabelledNode]:
        nodes = list(self._nodes().values())
        if properties:
            nodes = [
                n for n in nodes if any(n.properties.get(k) == v for k, v in properties.items())
            ]
        if ids:
            nodes = [n for n in nodes if n.id in ids]
        return nodes

    def get_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict[str, Any] | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        if not ids and not properties and not entity_names and not relation_names:
            return []
        triplets = self._triplets()
        if entity_names:
            triplets = [t for t in triplets if t[0].id in entity_names or t[2].id in entity_names]
        if relation_names:
            triplets = [t for t in triplets if t[1].id in relation_names]
        if properties:
            triplets = [
                t
                for t in triplets
                if any(
                    t[0].properties.get(k) == v
                    or t[1].properties.get(k) == v
                    or t[2].properties.get(k) == v
                    for k, v in properties.items()
                )
            ]
        if ids:
            triplets = [t for t in triplets if t[0].id in ids or t[2].id in ids]
        return triplets

    def get_rel_map(
        self,
        graph_nodes: list[LabelledNode],
        depth: int = 2,
        limit: int = 30,
        ignore_rels: list[str] | None = None,
    ) -> list[Triplet]:
        triplets: list[Triplet] = []
        seen: set[str] = set()
        frontier = self.get_triplets(ids=[n.id for n in graph_nodes])
        level = 0
        while frontier and level < depth:
            triplets.extend(frontier)
            frontier = self.get_triplets(entity_names=[t[2].id for t in frontier])
            frontier = [t for t in frontier if str(t) not in seen]
            seen.update(str(t) for t in frontier)
            level += 1
        ignored = set(ignore_rels or [])
        return [t for t in triplets if t[1].id not in ignored][:limit]

    # -- writing -----------------------------------------------------------------------

    def _writable(self) -> None:
        if self.as_of is not None:
            raise TypeError("this graph store reads as_of a past moment and is read-only")

    def upsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        self._writable()
        for node in nodes:
            self.memory.put_item(self.group_id, NODES, node.id, _node_value(node), index=False)

    def upsert_relations(self, relations: list[Relation]) -> None:
        self._writable()
        known = self._nodes()
        for rel in relations:
            for end in (rel.source_id, rel.target_id):
                if end not in known:
                    known[end] = EntityNode(name=end)
                    self.upsert_nodes([known[end]])
            value = {
                "label": rel.label,
                "source_id": rel.source_id,
                "target_id": rel.target_id,
                "properties": dict(rel.properties),
            }
            self.memory.put_item(self.group_id, RELATIONS, _relation_key(rel), value, index=False)

    def delete(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict[str, Any] | None = None,
        ids: list[str] | None = None,
    ) -> None:
        self._writable()
        for src, rel, dst in self.get_triplets(entity_names, relation_names, properties, ids):
            self.memory.delete_item(self.group_id, RELATIONS, _relation_key(rel))
            self.memory.delete_item(self.group_id, NODES, src.id)
            self.memory.delete_item(self.group_id, NODES, dst.id)
        for node in self.get(properties=properties, ids=ids):
            self.memory.delete_item(self.group_id, NODES, node.id)

    # -- queries this store refuses ----------------------------------------------------

    def structured_query(self, query: str, param_map: dict[str, Any] | None = None) -> Any:
        raise NotImplementedError(
            "TimestonePropertyGraphStore runs no structured (Cypher or SQL) queries: the graph "
            "is read through get, get_triplets and get_rel_map, scoped to its group"
        )

    def vector_query(
        self, query: VectorStoreQuery, **kwargs: Any
    ) -> tuple[list[LabelledNode], list[float]]:
        raise NotImplementedError(
            "TimestonePropertyGraphStore leaves vector search to the index's vector store "
            "(supports_vector_queries is False)"
        )

"""``TimestonePropertyGraphStore``: a LlamaIndex ``PropertyGraphStore`` on Timestone's graph.

A thin mapping onto the core's property graph view (``Memory.graph_*``):

- an ``EntityNode`` is a Timestone entity: its name the entity's name, its label the
  entity's type (``"entity"`` for an untyped one), its properties the entity's attributes;
- a ``Relation`` between two entities is a Timestone fact (so ``memory.facts``, ``search``
  and ``timeline`` see it, and the date fight settles it); one with a chunk at an end is a
  link;
- a ``ChunkNode`` is a chunk: its text and properties round-trip exactly;
- node ids are entity names (resolved as Timestone resolves names), entity ids, or chunk
  ids; a write naming an id that another group holds raises ``ForeignNode``.

No SQL, pools or event loops here: every call is one ``timestone.Memory`` call.
"""

from __future__ import annotations

import re
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
from timestone import NOW, EntityInput, GraphChunk, GraphEdge, GraphRelation
from timestone._groups import check_group
from timestone._models import check_list
from timestone._time import Now
from timestone.errors import InvalidInput

__all__ = ["VECTOR_SPACE", "TimestonePropertyGraphStore", "relation_name"]

VECTOR_SPACE = "llama_index"
UNTYPED = "entity"
_PAGE = 1000
_MAX_DEPTH = 10
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def _whole(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput(f"{what} must be an integer, got {value!r:.80}")
    return value


def relation_name(label: str) -> str:
    """The Timestone relation name of a LlamaIndex relation label: an identifier stays as it
    is; any other label is upper-cased with each run of other characters as ``_``
    (``"works for"`` becomes ``WORKS_FOR``)."""
    if _IDENTIFIER.fullmatch(label):
        return label
    name = re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_").upper()[:128]
    if not name:
        raise ValueError(f"relation label {label!r} has no letter or digit to name it by")
    return name if not name[0].isdigit() else ("R_" + name)[:128]


def _node(end: timestone.Entity | GraphChunk | str) -> LabelledNode:
    if isinstance(end, timestone.Entity):
        return EntityNode(
            name=end.name,
            label=end.labels[0] if end.labels else UNTYPED,
            properties=dict(end.attributes),
        )
    if isinstance(end, GraphChunk):
        return ChunkNode(
            text=end.text, id_=end.key, label=end.label, properties=dict(end.attributes)
        )
    return EntityNode(name=end)  # a link end that no node holds, as SimplePropertyGraphStore has


def _triplet(edge: GraphEdge) -> Triplet:
    source, target = _node(edge.source), _node(edge.target)
    relation = Relation(
        label=edge.relation,
        source_id=source.id,
        target_id=target.id,
        properties=dict(edge.attributes),
    )
    return (source, relation, target)


def _matches(triplet: Triplet, properties: dict[str, Any]) -> bool:
    return any(part.properties.get(k) == v for k, v in properties.items() for part in triplet)


class TimestonePropertyGraphStore(PropertyGraphStore):
    """The property graph of one Timestone group, for ``PropertyGraphIndex``.

    ``memory``: a blocking ``timestone.Memory``; ``group_id``: the group (tenant) it reads and
    writes. ``valid_at``: the world time reads are true at (default now, ``None``: every
    period) and, when a datetime, the time written relations hold from. ``as_of``: a
    read-only view of what the graph held then. ``vector_space``: where node embeddings are
    kept for ``vector_query``.
    """

    supports_structured_queries: bool = False
    supports_vector_queries: bool = True

    def __init__(
        self,
        memory: timestone.Memory,
        group_id: str,
        *,
        valid_at: datetime | Now | None = NOW,
        as_of: datetime | None = None,
        vector_space: str = VECTOR_SPACE,
    ) -> None:
        given = cast(object, memory)
        if not isinstance(given, timestone.Memory):
            raise TypeError(
                "TimestonePropertyGraphStore needs a blocking timestone.Memory (LlamaIndex "
                f"calls graph stores synchronously), got {type(given)!r}"
            )
        self.memory = memory
        self.group_id = check_group(group_id)
        self.valid_at = valid_at
        self.as_of = as_of
        self.vector_space = vector_space

    @property
    def client(self) -> timestone.Memory:
        return self.memory

    # -- reading -----------------------------------------------------------------------

    def get(
        self, properties: dict[str, Any] | None = None, ids: list[str] | None = None
    ) -> list[LabelledNode]:
        out: list[LabelledNode] = []
        offset = 0
        while True:
            page = self.memory.graph_nodes(
                self.group_id,
                ids=ids or None,
                attributes=properties or None,
                as_of=self.as_of,
                limit=_PAGE,
                offset=offset,
            )
            out.extend(_node(e) for e in page.entities)
            out.extend(_node(c) for c in page.chunks)
            if len(page.entities) < _PAGE and len(page.chunks) < _PAGE:
                return out
            offset += _PAGE

    def _edges(
        self,
        around: list[str] | None,
        *,
        depth: int = 1,
        relations: list[str] | None = None,
        skip: list[str] | None = None,
        limit: int = _PAGE,
    ) -> list[GraphEdge]:
        return self.memory.graph_edges(
            self.group_id,
            around=around,
            depth=depth,
            relations=None if relations is None else [relation_name(r) for r in relations],
            skip_relations=[relation_name(r) for r in skip or []],
            valid_at=self.valid_at,
            as_of=self.as_of,
            limit=limit,
        )

    def _matching(
        self,
        entity_names: list[str] | None,
        relation_names: list[str] | None,
        properties: dict[str, Any] | None,
        ids: list[str] | None,
    ) -> list[tuple[GraphEdge, Triplet]]:
        if not ids and not properties and not entity_names and not relation_names:
            return []
        around = entity_names or ids or None
        edges = self._edges(around, relations=relation_names or None)
        found = [(e, _triplet(e)) for e in edges]
        if entity_names and ids:  # both filters, as SimplePropertyGraphStore applies them
            found = [(e, t) for e, t in found if t[0].id in ids or t[2].id in ids]
        if properties:
            found = [(e, t) for e, t in found if _matches(t, properties)]
        return found

    def get_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict[str, Any] | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        return [t for _, t in self._matching(entity_names, relation_names, properties, ids)]

    def get_rel_map(
        self,
        graph_nodes: list[LabelledNode],
        depth: int = 2,
        limit: int = 30,
        ignore_rels: list[str] | None = None,
    ) -> list[Triplet]:
        """Triplets within ``depth`` hops of the nodes, nearest first, by one recursive query
        in Timestone; relations in ``ignore_rels`` are neither returned nor walked through."""
        nodes = check_list(graph_nodes, "graph_nodes", "LabelledNode records")
        for node in nodes:
            if not isinstance(node, LabelledNode):
                raise InvalidInput(
                    f"graph_nodes must hold LabelledNode records, got {type(node).__name__}"
                )
        depth, limit = _whole(depth, "depth"), _whole(limit, "limit")
        if not nodes or depth < 1 or limit < 1:
            return []
        edges = self._edges(
            list(dict.fromkeys(cast(LabelledNode, n).id for n in nodes)),
            depth=min(depth, _MAX_DEPTH),
            skip=ignore_rels,
            limit=min(limit, _PAGE),
        )
        return [_triplet(e) for e in edges]

    # -- writing -----------------------------------------------------------------------

    def _writable(self) -> None:
        if self.as_of is not None:
            raise TypeError("this graph store reads as_of a past moment and is read-only")

    def _valid_from(self) -> datetime | None:
        return self.valid_at if isinstance(self.valid_at, datetime) else None

    def upsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        self._writable()
        entities: list[EntityInput] = []
        chunks: list[GraphChunk] = []
        vectors: dict[str, list[float]] = {}
        for node in check_list(nodes, "nodes", "EntityNode and ChunkNode records"):
            if isinstance(node, ChunkNode):
                chunks.append(
                    GraphChunk(
                        key=node.id,
                        text=node.text,
                        label=node.label,
                        attributes=dict(node.properties),
                    )
                )
            elif isinstance(node, EntityNode):
                labels = () if node.label == UNTYPED else (node.label,)
                entities.append(EntityInput(node.name, labels, attributes=dict(node.properties)))
                if node.embedding is not None:
                    vectors[node.name] = list(node.embedding)
            else:
                raise TypeError(
                    f"TimestonePropertyGraphStore stores EntityNode and ChunkNode, got {node!r:.80}"
                )
        if not entities and not chunks:
            return
        self.memory.graph_upsert(
            self.group_id,
            entities=entities,
            chunks=chunks,
            vectors=vectors,
            vector_space=self.vector_space,
            valid_at=self._valid_from(),
        )

    def upsert_relations(self, relations: list[Relation]) -> None:
        self._writable()
        given = check_list(relations, "relations", "Relation records")
        for r in given:
            if not isinstance(r, Relation):
                raise TypeError(
                    f"TimestonePropertyGraphStore stores Relation records, got {r!r:.80}"
                )
        if not given:
            return
        self.memory.graph_upsert(
            self.group_id,
            relations=[
                GraphRelation(
                    source=r.source_id,
                    relation=relation_name(r.label),
                    target=r.target_id,
                    attributes=dict(r.properties),
                )
                for r in cast(list[Relation], given)
            ],
            valid_at=self._valid_from(),
        )

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
        and ``entity_names`` or holding ``properties``, with every relation at them."""
        self._writable()
        if relation_names:
            found = self._matching(entity_names, relation_names, properties, ids)
            if found:
                self.memory.graph_retract(self.group_id, edges=[e.id for e, _ in found])
            return
        nodes: list[object] = [
            *([] if entity_names is None else check_list(entity_names, "entity_names", "names")),
            *([] if ids is None else check_list(ids, "ids", "node ids")),
        ]
        if properties:
            nodes += [n.id for n in self.get(properties=properties)]
        if nodes:  # graph_retract checks each id
            self.memory.graph_retract(
                self.group_id, ids=cast(list[str], list(dict.fromkeys(nodes)))
            )

    # -- queries -----------------------------------------------------------------------

    def structured_query(self, query: str, param_map: dict[str, Any] | None = None) -> Any:
        raise NotImplementedError(
            "TimestonePropertyGraphStore runs no structured (Cypher or SQL) queries: the graph "
            "is read through get, get_triplets, get_rel_map and vector_query, scoped to its group"
        )

    def vector_query(
        self, query: VectorStoreQuery, **kwargs: Any
    ) -> tuple[list[LabelledNode], list[float]]:
        """Entities nearest the query: ``query_embedding`` against the node embeddings this
        store kept (exact cosine; a query of another dimension is refused), else
        ``query_str`` against the entities' names with Timestone's own embedder."""
        if query.filters is not None:
            raise NotImplementedError(
                "TimestonePropertyGraphStore.vector_query takes no metadata filters"
            )
        k = max(1, min(_whole(query.similarity_top_k, "similarity_top_k"), _PAGE))
        if query.query_embedding is not None:
            found = self.memory.graph_nearest(
                self.group_id,
                vector=query.query_embedding,
                vector_space=self.vector_space,
                limit=k,
                as_of=self.as_of,
            )
        elif query.query_str:
            found = self.memory.graph_nearest(
                self.group_id, query=query.query_str, limit=k, as_of=self.as_of
            )
        else:
            raise ValueError("vector_query needs a query_embedding or a query_str")
        return [_node(e) for e in found], [float(e.score or 0.0) for e in found]

"""The property graph view, as ``AsyncMemory`` offers it (entities, facts, chunks, links)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .._arguments import check_as_of, check_limit, check_valid_at
from .._records import (
    Entity,
    EntityInput,
    check_list,
    check_mapping,
    check_relation,
    check_text,
    entity_input,
)
from .._results import CommunityReport
from .._time import NOW, Now, aware, utcnow
from ..db._database_async import Database
from ..embedders import Embedder, aembed_vectors
from ..errors import InvalidInput
from ..items._item import check_offset, check_value
from ..write._ingest_async import Ingest
from ..write._transaction_async import begin_write
from ._communities_async import build_communities, update_communities
from ._graph_writes_async import graph_retract, upsert
from ._nodes import (
    GraphChunk,
    GraphEdge,
    GraphNodes,
    GraphRelation,
    GraphWrite,
    check_chunk,
    check_depth,
    check_node_ids,
    check_relations,
    check_space,
    check_vector,
    join_by_name,
)
from ._property_graph_async import graph_edges, graph_nearest, graph_nodes, uuid_form

__all__ = ["GraphAPI"]


class GraphAPI:
    """The property graph methods of ``AsyncMemory``: each checks its arguments and hands the
    work to ``_property_graph`` (reads) or ``_graph_writes`` (writes, retried on a conflict)."""

    _db: Database
    embedder: Embedder
    llm: Any
    _ingest: Ingest

    async def graph_upsert(
        self,
        group_id: str,
        *,
        entities: Sequence[EntityInput | Mapping[str, Any]] = (),
        chunks: Sequence[GraphChunk] = (),
        relations: Sequence[GraphRelation] = (),
        vectors: Mapping[str, Sequence[float]] | None = None,
        vector_space: str = "default",
        reference_time: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> GraphWrite:
        """Write graph nodes and edges in one transaction. ``entities`` upsert by name (an
        entity of that name, whatever its type, gets the labels and attributes, later values
        winning; two inputs of one name in one call are one entity, as if upserted one after
        the other) through one episode; ``relations`` between entities become facts true from
        ``valid_at`` (default ``reference_time``, default now), those with a chunk end links;
        ``vectors`` (entity name to vector) are kept in ``vector_space`` for
        ``graph_nearest``. Node ids are per group: another group's ids are not seen."""

        ents = [
            entity_input(e, f"entities[{i}]")
            for i, e in enumerate(check_list(entities, "entities", "EntityInput records or dicts"))
        ]
        ents = join_by_name(ents)
        for e in ents:
            check_value(e.attributes, f"attributes of node {e.name!r:.80}")
        parts = [check_chunk(c) for c in check_list(chunks, "chunks", "GraphChunk records")]
        for c in parts:
            check_value(c.attributes, f"attributes of chunk {c.key!r:.80}")
        rels: list[GraphRelation] = []
        for r in check_list(relations, "relations", "GraphRelation records"):
            if not isinstance(r, GraphRelation):
                raise InvalidInput(f"relations must be GraphRelation records, got {r!r:.80}")
            rels.append(dataclasses.replace(r, relation=check_relation(r.relation)))
            check_text(r.source, "relation source", max_chars=512)
            check_text(r.target, "relation target", max_chars=512)
            check_value(r.attributes, f"attributes of relation {r.relation!r:.80}")
        named: Mapping[str, Any] = {} if vectors is None else check_mapping(vectors, "vectors")
        given = {check_text(k, "vector entity name", max_chars=512): v for k, v in named.items()}
        vecs = {k: check_vector(v, f"vector of {k!r}") for k, v in given.items()}
        space = check_space(vector_space)
        ref = utcnow() if reference_time is None else aware(reference_time, "reference_time")
        world = ref if valid_at is None else aware(valid_at, "valid_at")
        return await upsert(
            self._db,
            self._ingest,
            group_id,
            entities=ents,
            chunks=parts,
            relations=rels,
            vectors=vecs,
            space=space,
            reference_time=ref,
            valid_at=world,
        )

    async def graph_nodes(
        self,
        group_id: str,
        *,
        ids: Sequence[str] | None = None,
        attributes: Mapping[str, Any] | None = None,
        as_of: datetime | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> GraphNodes:
        """Entities and chunks by node id (a chunk key, an entity id, or a name resolved as
        ingestion resolves it) and/or by attributes (every one equal); neither: every node.
        ``limit``/``offset`` page the entities and the chunks each."""

        wanted = None if ids is None else check_node_ids(ids, "ids")
        attrs = None if attributes is None else check_value(attributes, "attributes")
        n, skip, system = check_limit(limit), check_offset(offset), check_as_of(as_of)
        async with self._db.transaction(group_id, "reading graph nodes") as conn:
            return await graph_nodes(
                conn, group_id, ids=wanted, attributes=attrs, as_of=system, limit=n, offset=skip
            )

    async def graph_edges(
        self,
        group_id: str,
        *,
        around: Sequence[str] | None = None,
        depth: int = 1,
        relations: Sequence[str] | None = None,
        skip_relations: Sequence[str] = (),
        valid_at: datetime | Now | None = NOW,
        as_of: datetime | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[GraphEdge]:
        """Facts and links within ``depth`` hops of the nodes ``around`` names (either
        direction; nearest first; each edge once; cycles end the walk), by one recursive
        query. ``skip_relations`` are not walked; ``around=None``: every edge.

        The edges come in one order (nearest first, then by relation, source, target and
        id); ``limit``/``offset`` page it. A page shorter than ``limit`` is the last, so
        ``offset=0, limit, 2 * limit, ...`` reads every edge (as of one moment: a write
        between two pages may shift an edge from one page to the next)."""

        start = None if around is None else check_node_ids(around, "around")
        hops = check_depth(depth)
        only = None if relations is None else check_relations(relations, "relations")
        skip = check_relations(skip_relations, "skip_relations")
        world, system, n = check_valid_at(valid_at), check_as_of(as_of), check_limit(limit)
        skipped = check_offset(offset)
        async with self._db.transaction(group_id, "walking the graph") as conn:
            return await graph_edges(
                conn,
                group_id,
                around=start,
                depth=hops,
                relations=only,
                skip=skip,
                valid_at=world,
                as_of=system,
                read_time=utcnow(),
                limit=n,
                offset=skipped,
            )

    async def graph_nearest(
        self,
        group_id: str,
        *,
        vector: Sequence[float] | None = None,
        query: str | None = None,
        vector_space: str = "default",
        limit: int = 10,
        as_of: datetime | None = None,
    ) -> list[Entity]:
        """Entities by cosine similarity (``score`` set): ``vector`` against the vectors
        ``graph_upsert`` kept in ``vector_space`` (exact; another dimension is refused), or
        ``query`` text against the entities' own name embeddings (this memory's embedder)."""

        if (vector is None) == (query is None):
            raise InvalidInput("graph_nearest takes a vector or a query, one of the two")
        n, system = check_limit(limit), check_as_of(as_of)
        space: str | None = None
        if vector is not None:
            probe, space = check_vector(vector, "vector"), check_space(vector_space)
        else:
            text = check_text(query, "query", max_chars=10_000)
            probe = (await aembed_vectors(self.embedder, [text]))[0]
        async with self._db.transaction(group_id, "finding near entities") as conn:
            return await graph_nearest(conn, group_id, probe, space=space, limit=n, as_of=system)

    async def graph_retract(
        self,
        group_id: str,
        *,
        ids: Sequence[str] = (),
        edges: Sequence[uuid.UUID | str] = (),
    ) -> dict[str, int]:
        """Retract nodes by id (with every edge at them) and edges by ``GraphEdge.id`` (a
        fact id, as a UUID or its text, or a link key), in system time: current reads stop
        seeing them, ``as_of`` still does. Returns what went, per kind. Node ids are per
        group."""

        nodes = check_node_ids(ids, "ids")
        parsed: list[uuid.UUID | str] = []
        for e in check_list(edges, "edges", "edge ids"):
            if isinstance(e, uuid.UUID):
                parsed.append(e)
                continue
            text = check_text(e, "edge id", max_chars=128)
            # a fact id as text (JSON, a tool call) is the fact's; a link key is 64 hex digits
            parsed.append(uuid_form(text) or text)
        async with self._db.transaction(group_id, "retracting graph nodes") as conn:
            w = await begin_write(conn, group_id, self.embedder, exclusive=True)
            return await graph_retract(w, ids=nodes, edges=parsed)

    async def build_communities(self, group_id: str) -> CommunityReport:
        """Recompute the group's communities from its current fact graph (label propagation)."""
        return await build_communities(self._db, self.embedder, self.llm, group_id)

    async def update_communities(
        self, group_id: str, entities: Sequence[uuid.UUID] | None = None
    ) -> CommunityReport:
        """Incremental update after ingestion: re-label only the neighbourhood of ``entities``
        (default: entities whose facts changed since the last build)."""
        return await update_communities(self._db, self.embedder, self.llm, group_id, entities)

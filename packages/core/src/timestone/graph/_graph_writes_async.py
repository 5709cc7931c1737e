"""The property graph view of a group, written: upserts of nodes and edges, retraction.

Entities and the facts between them go through the memory's ``Ingest`` (its resolution
and date fight); chunks, links and vectors are items (``timestone.graph._nodes``). Node
lookup is the reading module's (``_property_graph``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg import sql

from .._names import normalize
from .._records import Entity, EntityInput, Fact, FactInput, held_entity
from ..db._database_async import Database
from ..errors import InvalidInput
from ..items._store_async import put_item
from ..write._entities_async import lock_keys, recompute_entities
from ..write._episodes_async import EpisodeInsert
from ..write._facts_async import recompute_retracted, supporting_assertions
from ..write._ingest_async import Ingest, ingest_outcome
from ..write._transaction_async import Write, begin_write, write_with_retry
from ._nodes import (
    GRAPH_CHUNKS,
    GRAPH_LINKS,
    GRAPH_VECTORS,
    GraphChunk,
    GraphRelation,
    GraphWrite,
    link_key,
)
from ._property_graph_async import (
    literal,
    read_graph_entities,
    resolve_nodes,
    uuid_form,
)

if TYPE_CHECKING:
    from .._vectors import Row

__all__ = ["graph_retract", "graph_upsert", "upsert", "write_keys"]


def write_keys(
    entities: Sequence[EntityInput],
    chunks: Sequence[GraphChunk],
    relations: Sequence[GraphRelation],
) -> list[str]:
    """The advisory lock keys of a graph write: the names it may mint, the items it puts."""
    # a relation end may be a chunk key, which is not checked as a name
    ends = (held_entity(n) for r in relations for n in (r.source, r.target))
    names = [*entities, *ends]
    items = ["item\x1f" + "\x1f".join((*GRAPH_CHUNKS, c.key)) for c in chunks]
    return [*lock_keys(names), *items, "graph-links"] if relations else [*lock_keys(names), *items]


async def _decide_by_name(w: Write, entities: Sequence[EntityInput]) -> dict[Any, uuid.UUID]:
    """Upsert by name: a typed entity input joins the current entity of its name, whatever
    that entity's type (resolution would otherwise mint one entity per type)."""
    typed = [e for e in entities if e.labels]
    if not typed:
        return {}
    cur = await w.conn.execute(
        "SELECT DISTINCT ON (norm_name) norm_name, id FROM timestone.entities"
        " WHERE group_id = %s AND expired_at IS NULL AND norm_name = ANY(%s)"
        " ORDER BY norm_name, created_at, id",
        (w.group_id, sorted({normalize(e.name) for e in typed})),
    )
    by_name = {row["norm_name"]: row["id"] for row in await cur.fetchall()}
    return {
        (normalize(e.name), e.labels[0]): by_name[normalize(e.name)]
        for e in typed
        if normalize(e.name) in by_name
    }


async def upsert(
    db: Database,
    ingest: Ingest,
    group_id: str,
    *,
    entities: Sequence[EntityInput],
    chunks: Sequence[GraphChunk],
    relations: Sequence[GraphRelation],
    vectors: Mapping[str, Sequence[float]],
    space: str,
    reference_time: datetime,
    valid_at: datetime,
) -> GraphWrite:
    """A checked graph write: its episode's text embedded first, then one transaction under
    the locks of the names and items it may write, run again when a concurrent writer won."""
    text = " ".join(
        [*(e.name for e in entities), *(f"{r.source} {r.relation} {r.target}" for r in relations)]
    )
    vector = (await ingest.vectors([text]))[text] if text.strip() else None

    async def write() -> GraphWrite:
        async with db.transaction(group_id, "writing graph nodes") as conn:
            keys = write_keys(entities, chunks, relations)
            if vectors:
                # the space's dimension is read, then written: one writer of a space at a time
                keys.append("vector-space\x1f" + space)
            w = await begin_write(conn, group_id, ingest.embedder, keys=keys)
            return await graph_upsert(
                w,
                ingest,
                entities=entities,
                chunks=chunks,
                relations=relations,
                vectors=vectors,
                space=space,
                reference_time=reference_time,
                valid_at=valid_at,
                episode_vector=vector,
            )

    return await write_with_retry(write)


async def graph_upsert(
    w: Write,
    ingest: Ingest,
    *,
    entities: Sequence[EntityInput],
    chunks: Sequence[GraphChunk],
    relations: Sequence[GraphRelation],
    vectors: Mapping[str, Sequence[float]],
    space: str,
    reference_time: datetime,
    valid_at: datetime,
    episode_vector: Row | None,
) -> GraphWrite:
    """Chunks, then entities and the facts between them (one episode), then links and
    vectors; ``ingest`` is the memory's ``Ingest`` (its resolution and date fight)."""
    # node ids are per group: an id this group does not hold names a new node here, whatever
    # another group holds under it (nor is that group's holding of it ever told)
    named = [c.key for c in chunks] + [n for r in relations for n in (r.source, r.target)]
    named += [e.name for e in entities]
    here = await resolve_nodes(w.conn, w.group_id, list(dict.fromkeys(named)), None)

    for c in chunks:
        value = {"text": c.text, "label": c.label, "attributes": dict(c.attributes)}
        await put_item(w, GRAPH_CHUNKS, c.key, value, None)
        here.chunks[c.key] = c.key

    facts_in: list[FactInput] = []

    def by_id(node_id: str) -> uuid.UUID | None:
        """The entity a node id names by its id (not by its name), if any."""
        known = here.entities.get(node_id)
        form = uuid_form(node_id)
        return known[0] if known and form is not None and known[0] == form else None

    entity_relations = [
        r for r in relations if not (r.source in here.chunks or r.target in here.chunks)
    ]
    link_in = [r for r in relations if r.source in here.chunks or r.target in here.chunks]
    id_names = await _names_of(
        w, {i for r in entity_relations for n in (r.source, r.target) if (i := by_id(n))}
    )
    for r in entity_relations:
        # a node named by its id is the stored entity, its name as held (``held_entity``)
        ends = [held_entity(id_names[i]) if (i := by_id(n)) else n for n in (r.source, r.target)]
        facts_in.append(
            FactInput(
                ends[0], r.relation, ends[1], valid_at=valid_at, attributes=dict(r.attributes)
            )
        )

    episode_id: uuid.UUID | None = None
    touched: list[Entity] = []
    facts: list[Fact] = []
    if entities or facts_in:
        prepared = ingest.prepare(facts_in, reference_time)[1] if facts_in else []
        content = json.dumps(
            {
                "entities": [
                    {"name": e.name, "labels": list(e.labels), "attributes": e.attributes}
                    for e in entities
                ],
                "relations": [
                    {
                        "source": f.source,
                        "relation": f.relation,
                        "target": f.target,
                        "attributes": f.attributes,
                    }
                    for f in facts_in
                ],
            },
            ensure_ascii=False,
            default=str,
        )
        row = EpisodeInsert(  # a record of structured facts, as add_facts writes one
            name=f"graph upsert at {reference_time.isoformat()}",
            content=content,
            source="facts",
            source_description="property graph store",
            reference_time=reference_time,
            saga=None,
            idempotency_key="graph:" + uuid.uuid4().hex,
        )
        written = await ingest._write_episode(  # pyright: ignore[reportPrivateUsage]
            w,
            row,
            episode_vector,
            prepared,
            list(entities),
            await _decide_by_name(w, entities),
        )
        episode_id = written.episode_id
        touched = await read_graph_entities(
            w.conn,
            w.group_id,
            sql.SQL("e.id = ANY({}::uuid[])").format(literal(list(written.entity_ids))),
            None,
            sql.SQL(""),
        )
        facts = (await ingest_outcome(w, written))[0]

    links = 0
    if link_in:
        link_ends = await resolve_nodes(
            w.conn, w.group_id, [n for r in link_in for n in (r.source, r.target)], None
        )
        link_ends.chunks.update(here.chunks)
        ends = [(link_ends.keys(r.source)[0], link_ends.keys(r.target)[0]) for r in link_in]
        keys = [link_key(src, r.relation, dst) for r, (src, dst) in zip(link_in, ends, strict=True)]
        cur = await w.conn.execute(
            "SELECT key, value FROM timestone.items WHERE group_id = %s AND namespace = %s"
            " AND key = ANY(%s) AND expired_at IS NULL",
            (w.group_id, list(GRAPH_LINKS), keys),
        )
        held = {
            row["key"]: dict(row["value"].get("attributes", {})) for row in await cur.fetchall()
        }
        for r, (source, target), key in zip(link_in, ends, keys, strict=True):
            merged = held.setdefault(key, {})  # a link given twice merges onto itself
            merged.update(r.attributes)
            value: dict[str, Any] = {
                "source": source,
                "relation": r.relation,
                "target": target,
                "attributes": merged,
            }
            await put_item(w, GRAPH_LINKS, key, value, None)
            links += 1

    stored = 0
    if vectors:
        stored = await _put_vectors(w, vectors, space)
    return GraphWrite(
        episode_id=episode_id,
        entities=touched,
        facts=facts,
        chunks=len(chunks),
        links=links,
        vectors=stored,
        recorded_at=w.now,
    )


async def _names_of(w: Write, ids: set[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The current names of entities, in one query."""
    if not ids:
        return {}
    cur = await w.conn.execute(
        "SELECT id, name FROM timestone.entities WHERE group_id = %s AND id = ANY(%s)"
        " AND expired_at IS NULL",
        (w.group_id, list(ids)),
    )
    return {row["id"]: row["name"] for row in await cur.fetchall()}


async def _put_vectors(w: Write, vectors: Mapping[str, Sequence[float]], space: str) -> int:
    namespace = (*GRAPH_VECTORS, space)
    cur = await w.conn.execute(
        "SELECT DISTINCT vector_dims(embedding) AS d FROM timestone.items"
        " WHERE group_id = %s AND namespace = %s AND expired_at IS NULL",
        (w.group_id, list(namespace)),
    )
    dims = {row["d"] for row in await cur.fetchall()} | {len(v) for v in vectors.values()}
    if len(dims) > 1:
        raise InvalidInput(
            f"vectors of space {space!r} would have {', '.join(map(str, sorted(dims)))} "
            "dimensions: one space holds the vectors of one embedding model"
        )
    found = await resolve_nodes(w.conn, w.group_id, list(vectors), None)
    unknown = [name for name in vectors if not found.entities.get(name)]
    if unknown:  # a misspelt name would lose its vector: the call writes nothing
        raise InvalidInput(
            f"vectors: {unknown[0]!r:.80} names no entity of this call or group"
            + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
        )
    stored = 0
    for name, vector in vectors.items():
        for ident in found.entities.get(name, []):
            await put_item(w, namespace, str(ident), {"dimension": len(vector)}, vector)
            stored += 1
    return stored


async def graph_retract(
    w: Write, *, ids: Sequence[str], edges: Sequence[uuid.UUID | str]
) -> dict[str, int]:
    """Retract nodes (with every edge at them) and edges, in system time: the graph stops
    holding them, and ``as_of`` still reads them. A fact's assertions are expired, whichever
    episode made them, and its slot recomputed, so what it had closed reopens."""
    counts = {"entities": 0, "facts": 0, "chunks": 0, "links": 0}
    found = await resolve_nodes(w.conn, w.group_id, ids, None)
    entity_ids = sorted({u for us in found.entities.values() for u in us})
    chunk_keys = sorted(found.chunks)
    fact_ids = [e for e in edges if isinstance(e, uuid.UUID)]
    link_keys = [e for e in edges if isinstance(e, str)]

    retracted: list[dict[str, Any]] = []
    mentioned: set[uuid.UUID] = set(entity_ids)
    if fact_ids:
        # the assertions behind each fact, not every one of its triple: another period of
        # the same target (Lima until 2013, Lima again from 2014) is another fact
        cur = await w.conn.execute(
            "UPDATE timestone.assertions SET expired_at = %s"
            " WHERE group_id = %s AND id = ANY(%s) AND expired_at IS NULL"
            " RETURNING source_id, relation, cardinality, valid_at",
            (w.now, w.group_id, await supporting_assertions(w, fact_ids)),
        )
        retracted += await cur.fetchall()
    if entity_ids:
        cur = await w.conn.execute(
            "UPDATE timestone.assertions SET expired_at = %s WHERE group_id = %s"
            " AND expired_at IS NULL AND (source_id = ANY(%s) OR target_id = ANY(%s))"
            " RETURNING source_id, relation, cardinality, valid_at",
            (w.now, w.group_id, entity_ids, entity_ids),
        )
        retracted += await cur.fetchall()
        await w.conn.execute(
            "UPDATE timestone.mentions SET expired_at = %s WHERE group_id = %s"
            " AND expired_at IS NULL AND entity_id = ANY(%s)",
            (w.now, w.group_id, entity_ids),
        )
        await w.conn.execute(
            "UPDATE timestone.items SET expired_at = %s WHERE group_id = %s"
            " AND namespace[1:2] = %s::text[] AND key = ANY(%s) AND expired_at IS NULL",
            (w.now, w.group_id, list(GRAPH_VECTORS), [str(i) for i in entity_ids]),
        )
    changes = await recompute_retracted(w, retracted)
    counts["facts"] = len([f for f in changes.expired if f not in changes.inserted])
    gone, _ = await recompute_entities(w, mentioned | changes.touched_entities)
    counts["entities"] = gone
    if chunk_keys:
        cur = await w.conn.execute(
            "UPDATE timestone.items SET expired_at = %s WHERE group_id = %s AND namespace = %s"
            " AND key = ANY(%s) AND expired_at IS NULL",
            (w.now, w.group_id, list(GRAPH_CHUNKS), chunk_keys),
        )
        counts["chunks"] = cur.rowcount
    node_keys = ["e:" + str(i) for i in entity_ids] + ["c:" + k for k in chunk_keys]
    cur = await w.conn.execute(
        "UPDATE timestone.items SET expired_at = %s WHERE group_id = %s AND namespace = %s"
        " AND expired_at IS NULL AND (key = ANY(%s) OR (value ->> 'source') = ANY(%s)"
        " OR (value ->> 'target') = ANY(%s))",
        (w.now, w.group_id, list(GRAPH_LINKS), link_keys, node_keys, node_keys),
    )
    counts["links"] = cur.rowcount
    return counts

"""The property graph view of a group: node lookup and the walk (writes: ``_graph_writes``).

Entities are Timestone entities and relations between them are facts, so what
a property graph store writes is what ``facts``, ``search`` and ``timeline``
read. Chunks and links (relations with a chunk at one end) are versioned items
of the namespaces ``GRAPH_CHUNKS`` and ``GRAPH_LINKS`` (see ``timestone.graph._nodes``).

Inside SQL a node is a text key: ``e:<entity id>``, ``c:<chunk key>``, or
``k:<key>`` for a link end that no node holds. The walk is one recursive query
over facts and links: a level's frontier is the set of nodes first reached at
that level, ``seen`` accumulates every node reached, so a cycle ends the walk
instead of looping, and ``depth`` bounds it. A level's new nodes are the ends of
its edges ``EXCEPT`` those seen, a hashed set difference: testing each end
against the whole ``seen`` array made a walk quadratic (9.7 s for 1,000 edges
around a company with 20,000 employees, now 0.14 s: ``bench.hostile``). And the
walk reaches no further once the nodes it reached past its start outnumber
``limit``: each was reached by an edge of its own, at a lower depth than any edge
further out, so the ``limit`` nearest edges are already among those found (and
the edges of that last level are not read).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg import sql

from .._names import fold, fuzzy_eligible, near_identical, normalize
from .._records import Entity, Fact, check_uuid
from ..db._database_async import Conn
from ..errors import InvalidInput
from ..write._entities_async import entity_from_row
from ..write._facts_async import held_clause, read_facts, valid_clause
from ._nodes import (
    GRAPH_CHUNKS,
    GRAPH_LINKS,
    GRAPH_VECTORS,
    GraphChunk,
    GraphEdge,
    GraphNodes,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "ResolvedNodes",
    "graph_edges",
    "graph_nearest",
    "graph_nodes",
    "literal",
    "read_graph_entities",
    "resolve_nodes",
    "uuid_form",
]

_MIN_TRIGRAM = 0.6


def literal(value: object) -> sql.Composable:
    return sql.Literal(value)


def _texts(values: Sequence[str]) -> sql.Composable:
    return sql.SQL("{}::text[]").format(sql.Literal(list(values)))


def uuid_form(value: str) -> uuid.UUID | None:
    try:
        return check_uuid(value, "node id")
    except InvalidInput:
        return None


# -- node ids --------------------------------------------------------------------------


class ResolvedNodes:
    """What node ids name: chunk keys and entity ids, and the ids that name nothing."""

    def __init__(self) -> None:
        self.chunks: dict[str, str] = {}
        self.entities: dict[str, list[uuid.UUID]] = {}
        self.missing: list[str] = []

    def keys(self, node_id: str) -> list[str]:
        if node_id in self.chunks:
            return ["c:" + node_id]
        if node_id in self.entities:
            return ["e:" + str(i) for i in self.entities[node_id]]
        return ["k:" + node_id]


async def resolve_nodes(
    conn: Conn, group_id: str, ids: Sequence[str], as_of: datetime | None
) -> ResolvedNodes:
    """A chunk key first, then an entity id in UUID form, then an entity name: its normalized
    form, its folded form, then (reading now) a near-identical spelling, as ingestion resolves
    names. A name names every entity of that spelling, whatever its type."""
    out = ResolvedNodes()
    if not ids:
        return out
    for key in await _chunk_keys(conn, group_id, ids, as_of):
        out.chunks[key] = key
    rest = [i for i in ids if i not in out.chunks]
    out.entities.update(await _by_id(conn, group_id, rest, as_of))
    rest = [i for i in rest if i not in out.entities]
    for column, form in (("norm_name", normalize), ("fold_name", fold)):
        wanted = {i: form(i) for i in rest if form(i)}
        if not wanted:
            break
        out.entities.update(await _by_spelling(conn, group_id, column, wanted, as_of))
        rest = [i for i in rest if i not in out.entities]
    eligible = [i for i in rest if fuzzy_eligible(i)]
    if eligible and as_of is None:
        out.entities.update(await _near_names(conn, eligible))
        rest = [i for i in rest if i not in out.entities]
    out.missing = rest
    return out


async def _chunk_keys(
    conn: Conn, group_id: str, ids: Sequence[str], as_of: datetime | None
) -> list[str]:
    cur = await conn.execute(
        sql.SQL(
            "SELECT DISTINCT i.key FROM timestone.items AS i WHERE i.group_id = {g}"
            " AND i.namespace = {ns} AND i.key = ANY({ids}) AND {held}"
        ).format(
            g=literal(group_id),
            ns=_texts(GRAPH_CHUNKS),
            ids=_texts(ids),
            held=held_clause("i", as_of),
        )
    )
    return [row["key"] for row in await cur.fetchall()]


async def _by_id(
    conn: Conn, group_id: str, ids: Sequence[str], as_of: datetime | None
) -> dict[str, list[uuid.UUID]]:
    """The node ids in UUID form that are ids of entities held at ``as_of``."""
    by_uuid = {i: u for i in ids if (u := uuid_form(i)) is not None}
    if not by_uuid:
        return {}
    cur = await conn.execute(
        sql.SQL(
            "SELECT DISTINCT e.id FROM timestone.entities AS e WHERE e.group_id = {g}"
            " AND e.id = ANY({ids}) AND {held}"
        ).format(
            g=literal(group_id),
            ids=sql.SQL("{}::uuid[]").format(literal(list(by_uuid.values()))),
            held=held_clause("e", as_of),
        )
    )
    found = {row["id"] for row in await cur.fetchall()}
    return {i: [u] for i, u in by_uuid.items() if u in found}


async def _by_spelling(
    conn: Conn, group_id: str, column: str, wanted: Mapping[str, str], as_of: datetime | None
) -> dict[str, list[uuid.UUID]]:
    """Node ids by one spelling of entity names (``column``: normalized or folded): every
    entity of that spelling, oldest first."""
    cur = await conn.execute(
        sql.SQL(
            "SELECT e.{col} AS k, e.id FROM timestone.entities AS e WHERE e.group_id = {g}"
            " AND e.{col} = ANY({ks}) AND {held} ORDER BY e.created_at, e.id"
        ).format(
            col=sql.Identifier(column),
            g=literal(group_id),
            ks=_texts(sorted(set(wanted.values()))),
            held=held_clause("e", as_of),
        )
    )
    hits: dict[str, list[uuid.UUID]] = {}
    for row in await cur.fetchall():
        if row["id"] not in hits.setdefault(row["k"], []):
            hits[row["k"]].append(row["id"])
    return {i: hits[k] for i, k in wanted.items() if k in hits}


async def _near_names(conn: Conn, names: Sequence[str]) -> dict[str, list[uuid.UUID]]:
    """Node ids by a near-identical spelling of a current entity's name (trigram candidates)."""
    cur = await conn.execute(
        "SELECT query, id, name FROM timestone.similar_entities(%s, 5, %s::real)",
        ([normalize(i) for i in names], _MIN_TRIGRAM),
    )
    rows = await cur.fetchall()
    out: dict[str, list[uuid.UUID]] = {}
    for i in names:
        for row in rows:
            if row["query"] == normalize(i) and near_identical(i, row["name"]):
                out[i] = [row["id"]]
                break
    return out


# -- reading ---------------------------------------------------------------------------


def _chunk(row: Mapping[str, Any]) -> GraphChunk:
    value = row["value"]
    return GraphChunk(
        key=row["key"],
        text=value["text"],
        label=value.get("label", "chunk"),
        attributes=dict(value.get("attributes", {})),
        created_at=row["created_at"],
    )


def _attributes_match(column: sql.Composable, attributes: Mapping[str, Any]) -> sql.Composable:
    """Every given attribute equal (JSON equality)."""
    parts = [
        sql.SQL("{} -> {} = {}::jsonb").format(column, literal(k), literal(json.dumps(v)))
        for k, v in attributes.items()
    ]
    return sql.SQL(" AND ").join(parts) if parts else sql.SQL("true")


async def read_graph_entities(
    conn: Conn, group_id: str, where: sql.Composable, as_of: datetime | None, window: sql.Composable
) -> list[Entity]:
    cur = await conn.execute(
        sql.SQL(
            "SELECT {cols} FROM timestone.entities AS e WHERE e.group_id = {g} AND {held}"
            " AND {where} ORDER BY e.created_at, e.id{window}"
        ).format(
            cols=sql.SQL(", ").join(
                sql.SQL("e.{}").format(sql.Identifier(c))
                for c in (
                    "id",
                    "group_id",
                    "name",
                    "labels",
                    "summary",
                    "attributes",
                    "created_at",
                    "expired_at",
                )
            ),
            g=literal(group_id),
            held=held_clause("e", as_of),
            where=where,
            window=window,
        )
    )
    return [entity_from_row(row) for row in await cur.fetchall()]


async def _chunks(
    conn: Conn, group_id: str, where: sql.Composable, as_of: datetime | None, window: sql.Composable
) -> list[GraphChunk]:
    cur = await conn.execute(
        sql.SQL(
            "SELECT i.key, i.value, i.created_at FROM timestone.items AS i"
            " WHERE i.group_id = {g} AND i.namespace = {ns} AND {held} AND {where}"
            " ORDER BY i.item_created_at, i.key{window}"
        ).format(
            g=literal(group_id),
            ns=_texts(GRAPH_CHUNKS),
            held=held_clause("i", as_of),
            where=where,
            window=window,
        )
    )
    return [_chunk(row) for row in await cur.fetchall()]


async def graph_nodes(
    conn: Conn,
    group_id: str,
    *,
    ids: Sequence[str] | None,
    attributes: Mapping[str, Any] | None,
    as_of: datetime | None,
    limit: int,
    offset: int,
) -> GraphNodes:
    """Entities and chunks named by ``ids`` and/or whose attributes equal ``attributes``;
    neither: every node (``limit``/``offset`` page each kind)."""
    entity_where: list[sql.Composable] = []
    chunk_where: list[sql.Composable] = []
    if ids is not None:
        found = await resolve_nodes(conn, group_id, ids, as_of)
        entity_ids = sorted({u for us in found.entities.values() for u in us})
        entity_where.append(sql.SQL("e.id = ANY({}::uuid[])").format(literal(entity_ids)))
        chunk_where.append(sql.SQL("i.key = ANY({})").format(_texts(sorted(found.chunks))))
    if attributes:
        entity_where.append(_attributes_match(sql.SQL("e.attributes"), attributes))
        chunk_where.append(_attributes_match(sql.SQL("(i.value -> 'attributes')"), attributes))
    window = sql.SQL(" LIMIT {} OFFSET {}").format(literal(limit), literal(offset))

    def both(parts: list[sql.Composable]) -> sql.Composable:
        return sql.SQL(" AND ").join(parts) if parts else sql.SQL("true")

    return GraphNodes(
        entities=await read_graph_entities(conn, group_id, both(entity_where), as_of, window),
        chunks=await _chunks(conn, group_id, both(chunk_where), as_of, window),
    )


def _edges_touching(
    group_id: str,
    frontier: sql.Composable | None,
    *,
    relations: Sequence[str] | None,
    skip: Sequence[str],
    valid_at: datetime | None,
    as_of: datetime | None,
) -> sql.Composable:
    """Facts and links with an end in ``frontier`` (a text[] of node keys; NULL: every edge)."""

    def relation_filter(column: sql.Composable) -> sql.Composable:
        parts: list[sql.Composable] = []
        if relations is not None:
            parts.append(sql.SQL("{} = ANY({})").format(column, _texts(relations)))
        if skip:
            parts.append(sql.SQL("{} <> ALL({})").format(column, _texts(skip)))
        return sql.SQL(" AND ").join(parts) if parts else sql.SQL("true")

    if frontier is None:
        fact_ends = link_ends = sql.SQL("true")
    else:
        entity_ids = sql.SQL(
            "ARRAY(SELECT substr(k, 3)::uuid FROM unnest({}) AS k WHERE k LIKE 'e:%')"
        ).format(frontier)
        fact_ends = sql.SQL("(f.source_id = ANY({ids}) OR f.target_id = ANY({ids}))").format(
            ids=entity_ids
        )
        link_ends = sql.SQL(
            "((i.value ->> 'source') = ANY({f}) OR (i.value ->> 'target') = ANY({f}))"
        ).format(f=frontier)

    def end_held(end: sql.Composable) -> sql.Composable:
        """A link end that names a chunk or an entity names one held at ``as_of``, so a page
        of the walk is not cut short by ends ``_materialize`` would drop."""
        return sql.SQL(
            "CASE left({end}, 2)"
            " WHEN 'c:' THEN EXISTS (SELECT 1 FROM timestone.items AS c WHERE c.group_id = {g}"
            " AND c.namespace = {ns} AND c.key = substr({end}, 3) AND {held_c})"
            " WHEN 'e:' THEN EXISTS (SELECT 1 FROM timestone.entities AS n"
            " WHERE n.group_id = {g} AND n.id = substr({end}, 3)::uuid AND {held_n})"
            " ELSE true END"
        ).format(
            end=end,
            g=literal(group_id),
            ns=_texts(GRAPH_CHUNKS),
            held_c=held_clause("c", as_of),
            held_n=held_clause("n", as_of),
        )

    return sql.SQL(
        "SELECT 'f:' || f.id::text AS eid, 'e:' || f.source_id::text AS src, f.relation,"
        " 'e:' || f.target_id::text AS dst, f.attributes, f.version_id"
        " FROM timestone.facts AS f"
        " WHERE f.group_id = {g} AND {held_f} AND {valid_f} AND {rel_f} AND {fact_ends}"
        " UNION ALL"
        " SELECT 'l:' || i.key, i.value ->> 'source', i.value ->> 'relation',"
        " i.value ->> 'target', coalesce(i.value -> 'attributes', '{{}}'), NULL::uuid"
        " FROM timestone.items AS i"
        " WHERE i.group_id = {g} AND i.namespace = {ns} AND {held_i} AND {rel_i} AND {link_ends}"
        " AND {src_held} AND {dst_held}"
    ).format(
        g=literal(group_id),
        held_f=held_clause("f", as_of),
        valid_f=valid_clause("f", valid_at),
        rel_f=relation_filter(sql.SQL("f.relation")),
        fact_ends=fact_ends,
        ns=_texts(GRAPH_LINKS),
        held_i=held_clause("i", as_of),
        rel_i=relation_filter(sql.SQL("(i.value ->> 'relation')")),
        link_ends=link_ends,
        src_held=end_held(sql.SQL("(i.value ->> 'source')")),
        dst_held=end_held(sql.SQL("(i.value ->> 'target')")),
    )


async def graph_edges(
    conn: Conn,
    group_id: str,
    *,
    around: Sequence[str] | None,
    depth: int,
    relations: Sequence[str] | None,
    skip: Sequence[str],
    valid_at: datetime | None,
    as_of: datetime | None,
    read_time: datetime,
    limit: int,
    offset: int = 0,
) -> list[GraphEdge]:
    """Edges within ``depth`` hops of the nodes ``around`` names, nearest first, by one
    recursive query; ``around=None``: every edge (``depth`` is then 1). ``limit`` edges
    from ``offset`` in one total order: the walk reaches as far as the ``offset + limit``
    nearest edges need (ties broken by relation, source, target, id and version)."""
    opts: dict[str, Any] = {
        "relations": relations,
        "skip": skip,
        "valid_at": valid_at,
        "as_of": as_of,
    }
    if around is None:
        query = sql.SQL(
            "SELECT e.*, 1 AS depth FROM ({edges}) AS e"
            " ORDER BY e.relation, e.src, e.dst, e.eid, e.version_id LIMIT {n} OFFSET {skip}"
        ).format(
            edges=_edges_touching(group_id, None, **opts), n=literal(limit), skip=literal(offset)
        )
    else:
        found = await resolve_nodes(conn, group_id, around, as_of)
        start = sorted({k for i in around for k in found.keys(i)})
        frontier = sql.SQL("l.frontier")
        query = sql.SQL(
            "WITH RECURSIVE lvl(depth, frontier, seen) AS ("
            "   SELECT 1, {start}, {start}"
            " UNION ALL"
            "   SELECT l.depth + 1, n.next, l.seen || n.next FROM lvl AS l"
            "   CROSS JOIN LATERAL ("
            "     SELECT coalesce(array_agg(k.key), '{{}}'::text[]) AS next FROM ("
            "       SELECT x.key"
            "       FROM ({edges}) AS e CROSS JOIN LATERAL (VALUES (e.src), (e.dst)) AS x(key)"
            "       EXCEPT SELECT unnest(l.seen)"
            "     ) AS k"
            "   ) AS n"
            "   WHERE l.depth < {depth} AND cardinality(l.seen) < {enough}"
            "   AND cardinality(n.next) > 0"
            ")"
            " SELECT * FROM ("
            "   SELECT DISTINCT ON (e.eid) e.*, l.depth"
            "   FROM lvl AS l CROSS JOIN LATERAL ({edges}) AS e"
            "   WHERE l.depth = 1 OR cardinality(l.seen) < {enough}"
            "   ORDER BY e.eid, l.depth"
            " ) AS hit ORDER BY hit.depth, hit.relation, hit.src, hit.dst, hit.eid"
            " LIMIT {n} OFFSET {skip}"
        ).format(
            start=_texts(start),
            edges=_edges_touching(group_id, frontier, **opts),
            depth=literal(depth),
            enough=literal(len(start) + offset + limit),
            n=literal(limit),
            skip=literal(offset),
        )
    cur = await conn.execute(query)
    rows = await cur.fetchall()
    return await _materialize(conn, group_id, rows, as_of, read_time)


async def _materialize(
    conn: Conn,
    group_id: str,
    rows: Sequence[Mapping[str, Any]],
    as_of: datetime | None,
    read_time: datetime,
) -> list[GraphEdge]:
    """Rows of the walk as edges whose ends are entities, chunks or bare keys."""
    ends = {k for row in rows for k in (row["src"], row["dst"])}
    entity_ids = sorted({uuid.UUID(k[2:]) for k in ends if k.startswith("e:")})
    chunk_keys = sorted({k[2:] for k in ends if k.startswith("c:")})
    nodes: dict[str, Entity | GraphChunk | str] = {}
    if entity_ids:
        for e in await read_graph_entities(
            conn,
            group_id,
            sql.SQL("e.id = ANY({}::uuid[])").format(literal(entity_ids)),
            as_of,
            sql.SQL(""),
        ):
            nodes["e:" + str(e.id)] = e
    if chunk_keys:
        for c in await _chunks(
            conn,
            group_id,
            sql.SQL("i.key = ANY({})").format(_texts(chunk_keys)),
            as_of,
            sql.SQL(""),
        ):
            nodes["c:" + c.key] = c
    version_ids = [row["version_id"] for row in rows if row["version_id"] is not None]
    facts: dict[uuid.UUID, Fact] = {}
    if version_ids:
        found = await read_facts(
            conn,
            group_id,
            valid_at=None,
            as_of=as_of,
            read_time=read_time,
            limit=None,
            version_ids=version_ids,
        )
        facts = {f.version_id: f for f in found}
    out: list[GraphEdge] = []
    for row in rows:
        src, dst = str(row["src"]), str(row["dst"])
        source = nodes[src] if src in nodes else src[2:]
        target = nodes[dst] if dst in nodes else dst[2:]
        if isinstance(source, str) and row["src"].startswith(("e:", "c:")):
            continue  # an end that is no longer held (an expired chunk of a live link)
        if isinstance(target, str) and row["dst"].startswith(("e:", "c:")):
            continue
        fact = facts.get(row["version_id"]) if row["version_id"] is not None else None
        out.append(
            GraphEdge(
                id=fact.id if fact is not None else row["eid"][2:],
                source=source,
                relation=row["relation"],
                target=target,
                attributes=dict(row["attributes"]),
                depth=int(row["depth"]),
                fact=fact,
            )
        )
    return out


async def graph_nearest(
    conn: Conn,
    group_id: str,
    vector: Sequence[float],
    *,
    space: str | None,
    limit: int,
    as_of: datetime | None,
) -> list[Entity]:
    """Entities by cosine similarity to ``vector``: over the vectors a caller stored in
    ``space`` (exact, compared only at the query's dimension), or with ``space=None`` over
    the entities' own name embeddings (the memory's embedder, HNSW-indexed)."""
    text = "[" + ",".join(repr(float(v)) for v in vector) + "]"
    cols = sql.SQL(
        "e.id, e.group_id, e.name, e.labels, e.summary, e.attributes, e.created_at, e.expired_at"
    )
    if space is None:
        query = sql.SQL(
            "SELECT {cols}, 1 - (e.name_embedding <=> {q}::vector) AS score"
            " FROM timestone.entities AS e WHERE e.group_id = {g} AND {held}"
            " AND e.name_embedding IS NOT NULL"
            " ORDER BY e.name_embedding <=> {q}::vector, e.id LIMIT {n}"
        ).format(
            cols=cols,
            q=literal(text),
            g=literal(group_id),
            held=held_clause("e", as_of),
            n=literal(limit),
        )
        cur = await conn.execute(query)
        return [entity_from_row(row) for row in await cur.fetchall()]
    namespace = [*GRAPH_VECTORS, space]
    cur = await conn.execute(
        sql.SQL(
            "SELECT DISTINCT vector_dims(i.embedding) AS d FROM timestone.items AS i"
            " WHERE i.group_id = {g} AND i.namespace = {ns} AND {held}"
        ).format(g=literal(group_id), ns=_texts(namespace), held=held_clause("i", as_of))
    )
    dims = sorted(row["d"] for row in await cur.fetchall())
    if dims and len(vector) not in dims:
        raise InvalidInput(
            f"the query vector has {len(vector)} dimensions, and the vectors of space "
            f"{space!r} have {', '.join(map(str, dims))}: query with the embedding model "
            "that wrote them"
        )
    query = sql.SQL(
        "SELECT {cols}, 1 - (i.embedding <=> {q}::vector) AS score"
        " FROM timestone.items AS i JOIN timestone.entities AS e"
        "   ON e.group_id = i.group_id AND e.id = i.key::uuid AND {held_e}"
        " WHERE i.group_id = {g} AND i.namespace = {ns} AND {held_i}"
        " AND vector_dims(i.embedding) = {d}"
        " ORDER BY i.embedding <=> {q}::vector, e.id LIMIT {n}"
    ).format(
        cols=cols,
        q=literal(text),
        held_e=held_clause("e", as_of),
        g=literal(group_id),
        ns=_texts(namespace),
        held_i=held_clause("i", as_of),
        d=literal(len(vector)),
        n=literal(limit),
    )
    cur = await conn.execute(query)
    return [entity_from_row(row) for row in await cur.fetchall()]

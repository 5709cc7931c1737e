"""The SQL of a search: one statement per scope, composed once per request shape.

Every scope's statement gathers its candidates from three or four ranked lists:

- full text through ``timestone.search_terms`` (entities, episodes,
  communities: any lexeme of the question may match, rows ranked by BM25 over the
  group's term statistics, migration 0036) or ``timestone.search_text`` (facts:
  every word matched, ``websearch_to_tsquery``; when no fact holds every word, any
  word by ``search_terms``), the SECURITY DEFINER functions
  that reach the GIN indexes under row level security (a plain ``@@`` as the
  library role would scan every row);
- vector similarity, ``ORDER BY keyed(embedding) <=> keyed(query) LIMIT k`` on
  the partial HNSW indexes (current rows; each vector keyed by its group,
  ``_vectors.keyed``, and ranked by the plain distance), with
  ``hnsw.iterative_scan`` set for the transaction so that time and type filters
  do not starve the result; the versions an as-of search reads that the
  indexes do not hold (ended since) are ranked exactly;
- a graph walk: recursive SQL from the entities named in the query (one hop)
  or from ``center`` (two hops), breadth first, duplicate-free per depth (so
  cycles end), with the time predicate inside the recursion; the facts around
  the named entities (up to ``SEED_FACTS_CAP`` each) and around the entities
  one hop out (the other ends of each named entity's ``HOP_FROM_FACTS`` facts
  most similar to the query; around ``center``, every neighbour), the
  ``HOP_FACTS_CAP`` newest in world time each, read from an index that stops
  there, so a hub costs what a leaf does, are ranked by similarity to the
  query, never by a stored weight;
- for entities, exact matches of the names in the query.

Each statement fuses its candidates itself (reciprocal rank fusion, bit for bit
``timestone.search._fusion``), orders them by the reranker and sends only the ``limit`` it
keeps, so only those rows travel and have their names looked up; MMR, which compares
candidates with each other, gets them all. How the statements are sent and read is
``search._run_async``'s.

Where each part is: the parameters, time predicates, walk, full-text and vector lists,
fusion and cut shared by every scope in ``timestone.search._ranked_lists_sql``; the facts
statement in ``timestone.search._facts_sql``; the episodes statement in
``timestone.search._episodes_sql``; the entities and communities statements, and the cache of
composed statements, here.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from psycopg import sql

from ._episodes_sql import episodes_statement
from ._facts_sql import (
    fact_vectors,
    facts_given_sql,
    facts_inline_sql,
    facts_lists_sql,
    facts_sql,
    facts_text_first_sql,
    facts_text_sql,
    top_sql,
)
from ._ranked_lists_sql import (
    RANKED_LISTS,
    by_index_sql,
    candidates_sql,
    fts_sql,
    fused_sql,
    held_clause,
    keep_of,
    kept_sql,
    only_for_sql,
    search_params,
    vec_sql,
    walk_sql,
)
from ._request import SearchRequest

__all__ = [
    "RANKED_LISTS",
    "candidates_sql",
    "communities_sql",
    "entities_sql",
    "episodes_sql",
    "fact_vectors",
    "facts_given_sql",
    "facts_inline_sql",
    "facts_lists_sql",
    "facts_sql",
    "facts_text_first_sql",
    "facts_text_sql",
    "fused_sql",
    "keep_of",
    "kept_sql",
    "search_params",
    "statement",
    "top_sql",
]

_L = sql.Literal


def _entity_filters(req: SearchRequest) -> sql.Composable:
    parts: list[sql.Composable] = [held_clause("e", req.as_of)]
    if req.labels is not None:
        parts.append(sql.SQL("e.labels && %(labels)s::text[]"))
    if req.ids is not None:
        parts.append(sql.SQL("e.id = ANY(%(ids)s::uuid[])"))
    return sql.SQL(" AND ").join(parts)


def entities_sql(req: SearchRequest, dimension: int) -> sql.Composed:
    """The entities scope. The walked entities' rows are read by key (one version of an
    id is held at a moment), not joined: a generic plan that takes the group for the
    whole table (migration 0019) hashed all of its entities for that join."""
    filters = _entity_filters(req)
    names = sql.SQL("%(names)s::text[]") if req.center is None else sql.SQL("ARRAY[]::text[]")
    return sql.SQL(
        "WITH RECURSIVE {fts}, {vec}, {walk},"
        " named AS (SELECT e.version_id, 1 AS r FROM timestone.entities AS e"
        "  WHERE e.group_id = %(g)s AND e.norm_name = ANY({names}) AND {filters}),"
        " graph AS MATERIALIZED (SELECT e.version_id,"
        "  row_number() OVER (ORDER BY w.depth, e.name_embedding <=> %(vec)s::vector, e.id) AS r"
        "  FROM walked AS w CROSS JOIN LATERAL (SELECT * FROM timestone.entities AS e"
        "   WHERE e.group_id = %(g)s AND e.id = w.entity_id AND {filters} LIMIT 1) AS e"
        "  WHERE w.depth > 0 LIMIT %(k)s),"
        " {cand},"
        " hits AS (SELECT e.id, e.group_id, e.name, e.labels, e.summary,"
        "  e.attributes::text AS attributes, e.created_at, e.expired_at,"
        "  cand.fts_rank, cand.vec_rank, cand.graph_rank, cand.named_rank, w.depth AS hops,"
        "  e.name_embedding <=> %(vec)s::vector AS distance,"
        "  {mentions} AS mentions, {fused} AS fused{embedding}"
        " FROM cand CROSS JOIN LATERAL (SELECT * FROM timestone.entities AS x"
        "  WHERE x.group_id = %(g)s AND x.version_id = cand.version_id LIMIT 1) AS e"
        " LEFT JOIN walked AS w ON w.entity_id = e.id"
        " WHERE {filters}) {kept}"
    ).format(
        fts=fts_sql("entities"),
        vec=vec_sql("entities", "e", "name_embedding", filters, req.as_of, dimension),
        walk=walk_sql(req),
        names=names,
        cand=candidates_sql("entities"),
        filters=filters,
        mentions=only_for_sql(
            req,
            "episode_mentions",
            "(SELECT count(*) FROM timestone.mentions AS m WHERE m.group_id = %(g)s"
            " AND m.entity_id = e.id AND {held_m})",
            "bigint",
            held_m=held_clause("m", req.as_of),
        ),
        embedding=sql.SQL(", e.name_embedding AS embedding") if req.embeddings else sql.SQL(""),
        fused=fused_sql("entities"),
        kept=kept_sql("id", req),
    )


def episodes_sql(req: SearchRequest, dimension: int) -> sql.Composed:
    """The episodes scope (``timestone.search._episodes_sql``: fusion led by the strong list,
    and the neighbours of a hit)."""
    return episodes_statement(req, dimension)


def communities_sql(req: SearchRequest, dimension: int) -> sql.Composed:
    parts: list[sql.Composable] = [held_clause("c", req.as_of)]
    if req.ids is not None:
        parts.append(sql.SQL("c.id = ANY(%(ids)s::uuid[])"))
    filters = sql.SQL(" AND ").join(parts)
    return sql.SQL(
        "WITH RECURSIVE {fts},"
        " vec AS MATERIALIZED (SELECT v.version_id,"
        "  row_number() OVER (ORDER BY v.d, v.version_id) AS r FROM ("
        "  SELECT c.version_id, c.name_embedding <=> %(vec)s::vector AS d"
        "  FROM timestone.communities AS c WHERE c.group_id = %(g)s AND {filters}"
        "   AND c.name_embedding IS NOT NULL AND vector_dims(c.name_embedding) = {dim}"
        "  ORDER BY {order} LIMIT %(k)s) AS v), {walk},"
        " {cand},"
        " hits AS (SELECT c.id, c.version_id, c.group_id, c.name, c.summary, c.members,"
        "  c.fact_count, c.created_at, c.expired_at, cand.fts_rank, cand.vec_rank,"
        "  CASE WHEN vector_dims(c.name_embedding) = {dim}"
        "   THEN c.name_embedding <=> %(vec)s::vector END AS distance,"
        "  (SELECT min(w.depth) FROM walked AS w WHERE w.entity_id = ANY(c.members)) AS hops,"
        "  cardinality(c.members) AS mentions, {fused} AS fused{embedding}"
        " FROM cand CROSS JOIN LATERAL (SELECT * FROM timestone.communities AS x"
        "  WHERE x.group_id = %(g)s AND x.version_id = cand.version_id LIMIT 1) AS c"
        " WHERE {filters}) {kept}"
    ).format(
        fts=fts_sql("communities"),
        cand=candidates_sql("communities"),
        filters=filters,
        dim=_L(dimension),
        # as of a moment, history rows, which the index does not hold: ranked exactly
        order=sql.SQL("2")
        if req.as_of is not None
        else by_index_sql("c", "name_embedding", dimension),
        walk=walk_sql(req),
        fused=fused_sql("communities"),
        kept=kept_sql("version_id", req),
        embedding=sql.SQL(
            ", CASE WHEN vector_dims(c.name_embedding) = {} THEN c.name_embedding END AS embedding"
        ).format(_L(dimension))
        if req.embeddings
        else sql.SQL(""),
    )


_BUILDERS: dict[str, Callable[[SearchRequest, int], sql.Composed]] = {
    "facts": facts_sql,
    "facts:text_first": lambda req, _: facts_text_first_sql(req),
    "facts:inline": facts_inline_sql,
    "facts:text": lambda req, _: facts_text_sql(req),
    "facts:lists": facts_lists_sql,
    "facts:given": lambda req, _: facts_given_sql(req),
    "entities": entities_sql,
    "episodes": episodes_sql,
    "communities": communities_sql,
}


def _shape(req: SearchRequest) -> tuple[object, ...]:
    """What the statement text of a search depends on (the values travel as parameters)."""
    return (
        req.as_of is None,
        req.valid_at is None,
        req.edge_types is None,
        req.labels is None,
        req.ids is None,
        req.center is None,
        req.embeddings,
        req.method,
        req.content_chars is None,
        req.fact_records,
    )


_STATEMENTS: dict[tuple[object, ...], tuple[bytes, tuple[str, ...]]] = {}
_PLACEHOLDER = re.compile(rb"%\((\w+)\)s")


def statement(scope: str, req: SearchRequest, dimension: int) -> tuple[bytes, tuple[str, ...]]:
    """The SQL of one scope, composed once per request shape (a few dozen exist): the
    same text on every call, so the server reuses its prepared plan, and nothing is
    composed per search. Its placeholders are numbered (``$1``...) once here, and the
    names of its parameters returned in that order: psycopg parses the placeholders of
    a statement longer than 4 kB on every call (its cache stops there), a quarter of a
    millisecond for the facts statement, so a search sends the numbered form through a
    raw cursor."""
    key = (scope, dimension, *_shape(req))
    found = _STATEMENTS.get(key)
    if found is None:
        numbers: dict[str, int] = {}  # each name's number, in order of first use

        def number(m: re.Match[bytes]) -> bytes:
            return b"$%d" % numbers.setdefault(m.group(1).decode(), len(numbers) + 1)

        text = _PLACEHOLDER.sub(number, _BUILDERS[scope](req, dimension).as_bytes(None))
        if b"%" in text:  # a binary placeholder or an escaped percent sign: not handled
            raise AssertionError(f"the {scope} statement has a placeholder left: {text!r}")
        found = _STATEMENTS[key] = (text, tuple(numbers))
    return found

"""The SQL of a search: one statement per scope, composed once per request shape.

Every scope's statement gathers its candidates from three or four ranked lists:

- full text through ``timestone.search_terms`` (entities, episodes,
  communities: any lexeme of the question may match, rows ranked by BM25 over the
  group's term statistics, migration 0036) or ``timestone.search_text`` (facts:
  every word matched, ``websearch_to_tsquery``), the SECURITY DEFINER functions
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
``timestone._fusion``), orders them by the reranker and sends only the ``limit`` it
keeps, so only those rows travel and have their names looked up; MMR, which compares
candidates with each other, gets them all. How the statements are sent and read is
``_aio._search``'s.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, LiteralString

import numpy as np
from psycopg import sql

from ._arrays import TextArray
from ._fulltext import web_query
from ._fusion import RRF_K
from ._names import normalize
from ._search_request import (
    CENTER_DEPTH,
    HOP_FACTS_CAP,
    HOP_FROM_FACTS,
    SEED_FACTS_CAP,
    TOLD,
    WALK_CAP,
    WALK_DEPTH,
    SearchRequest,
    name_ngrams,
)
from ._vectors import TOLD_SEED, keyed

if TYPE_CHECKING:
    from ._vectors import Row


__all__ = [
    "AS_OF_EXACT_BELOW",
    "AS_OF_SHARE",
    "ENDED_EXACT_BELOW",
    "EXACT_BELOW",
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
_CONFIG = {
    "facts": "english",
    "entities": "simple",
    "episodes": "english",
    "communities": "english",
}


def search_params(
    req: SearchRequest, group_id: str, vector: Row | Sequence[float] | None
) -> dict[str, Any]:
    """The parameters of every statement of ``req`` (each takes the ones it names); with
    no ``vector`` yet, ``vec`` is None until the caller sets it."""
    center_id = req.center if isinstance(req.center, uuid.UUID) else None
    center_name = normalize(req.center) if isinstance(req.center, str) else None
    return {
        "g": group_id,
        "text": web_query(req.query),
        # a numpy array goes over the wire as a vector (the pool registers pgvector): no
        # text parse per row, as a cast of a text parameter would cost in a prepared plan
        "vec": None if vector is None else np.asarray(vector, dtype=np.float32),
        "as_of": req.as_of,
        "valid_at": req.valid_at,
        "relations": TextArray(req.edge_types) if req.edge_types is not None else None,
        "labels": TextArray(req.labels) if req.labels is not None else None,
        "k": req.candidates,
        # a binary text[], dumped once for every statement that takes it (``TextArray``)
        "names": TextArray(() if req.center is not None else name_ngrams(req.query)),
        "center_id": center_id,
        "center_name": center_name,
        "depth": CENTER_DEPTH if req.center is not None else WALK_DEPTH,
        "walk_cap": WALK_CAP,
        "ids": list(req.ids) if req.ids is not None else None,
        "keep": keep_of(req),
        "exact_below": EXACT_BELOW if req.as_of is None else AS_OF_EXACT_BELOW,
        "content_chars": req.content_chars,
        # the window of world time the question names (``_question``), for episodes
        "window_from": req.window[0] if req.window is not None else None,
        "window_to": req.window[1] if req.window is not None else None,
    }


def held_clause(alias: str, as_of: datetime | None) -> sql.Composable:
    """Rows held at ``as_of`` (system time; ``None``: now), as a parameterized predicate so
    that the statement text, and so its prepared plan, is the same on every call."""
    a = sql.Identifier(alias)
    if as_of is None:
        return sql.SQL("{}.expired_at IS NULL").format(a)
    return sql.SQL(
        "{a}.created_at <= %(as_of)s::timestamptz"
        " AND ({a}.expired_at IS NULL OR {a}.expired_at > %(as_of)s::timestamptz)"
    ).format(a=a)


def valid_clause(alias: str, valid_at: datetime | None) -> sql.Composable:
    """Rows true in the world at ``valid_at``; ``None``: every period."""
    if valid_at is None:
        return sql.SQL("true")
    return sql.SQL(
        "{a}.valid_at <= %(valid_at)s::timestamptz"
        " AND ({a}.invalid_at IS NULL OR {a}.invalid_at > %(valid_at)s::timestamptz)"
    ).format(a=sql.Identifier(alias))


def _fact_filters(alias: str, req: SearchRequest) -> sql.Composable:
    a = sql.Identifier(alias)
    parts: list[sql.Composable] = []
    if req.edge_types is not None:
        parts.append(sql.SQL("{}.relation = ANY(%(relations)s::text[])").format(a))
    if req.ids is not None:
        parts.append(sql.SQL("{}.id = ANY(%(ids)s::uuid[])").format(a))
    if req.labels is not None:
        parts.append(
            sql.SQL(
                "EXISTS (SELECT 1 FROM timestone.entities AS le WHERE le.group_id = {a}.group_id"
                " AND le.id IN ({a}.source_id, {a}.target_id) AND {held}"
                " AND le.labels && %(labels)s::text[])"
            ).format(a=a, held=held_clause("le", req.as_of))
        )
    return sql.SQL(" AND ").join(parts) if parts else sql.SQL("true")


def _walk(req: SearchRequest) -> sql.Composable:
    """The seeds, the recursive walk, and ``walked(entity_id, depth)``.

    Each step looks up the facts out of and into an entity separately, in a subquery
    that ``OFFSET 0`` keeps whole, so each is an index lookup per entity reached: joined
    with one ``OR`` condition, the generic plan of a database of few groups read the
    group's facts whole (every fact, for a group estimated at half the table) at each
    step of the walk."""
    if req.center is not None:
        match = sql.SQL("(e.id = %(center_id)s::uuid OR e.norm_name = %(center_name)s::text)")
    else:
        match = sql.SQL("e.norm_name = ANY(%(names)s::text[])")
    relation = (
        sql.SQL("f.relation = ANY(%(relations)s::text[])")
        if req.edge_types is not None
        else sql.SQL("true")
    )
    return sql.SQL(
        "seeds AS (SELECT DISTINCT e.id FROM timestone.entities AS e"
        " WHERE e.group_id = %(g)s AND {held_e} AND {match}),"
        " walk(entity_id, depth) AS ("
        "  SELECT id, 0 FROM seeds"
        "  UNION"
        "  SELECT n.entity_id, w.depth + 1 FROM walk AS w CROSS JOIN LATERAL ("
        "   SELECT f.target_id AS entity_id FROM timestone.facts AS f WHERE f.group_id = %(g)s"
        "    AND f.source_id = w.entity_id AND {held_f} AND {valid_f} AND {relation}"
        "   UNION ALL"
        "   SELECT f.source_id FROM timestone.facts AS f WHERE f.group_id = %(g)s"
        "    AND f.target_id = w.entity_id AND {held_f} AND {valid_f} AND {relation}"
        "   OFFSET 0) AS n"
        "  WHERE w.depth < %(depth)s),"
        " walked AS (SELECT s.entity_id, min(s.depth) AS depth"
        "  FROM (SELECT entity_id, depth FROM walk LIMIT %(walk_cap)s) AS s GROUP BY s.entity_id)"
    ).format(
        held_e=held_clause("e", req.as_of),
        match=match,
        held_f=held_clause("f", req.as_of),
        valid_f=valid_clause("f", req.valid_at),
        relation=relation,
    )


def _fts(kind: str, *, told: bool = False) -> sql.Composable:
    """``fts``: the full-text list of ``kind`` with its score ``s``; ``told``, of the
    episodes that are not records of structured facts (``SearchRequest.fact_records``,
    migration 0031).

    Entities, episodes and communities are ranked by BM25 over the group's term
    statistics (``timestone.search_terms``, migration 0036): any lexeme of the question
    may match. Facts keep the match of every word (``timestone.search_text``): a fact
    is one short sentence, and on the 100k-fact benchmark the OR of BM25 lowered the
    answer's recall@10 from 1.00 to 0.986 (docs/decisions/017-relevance-on-conversations.md)."""
    if kind == "facts":
        return sql.SQL(
            "fts AS (SELECT t.version_id, t.rank AS s,"
            " row_number() OVER (ORDER BY t.rank DESC, t.version_id) AS r"
            " FROM timestone.search_text({kind}, websearch_to_tsquery({config}::regconfig,"
            " %(text)s), %(as_of)s::timestamptz, %(valid_at)s::timestamptz,"
            " %(relations)s::text[], %(labels)s::text[], %(k)s) AS t)"
        ).format(kind=_L(kind), config=_L(_CONFIG[kind]))
    return sql.SQL(
        "fts AS (SELECT t.version_id, t.rank AS s,"
        " row_number() OVER (ORDER BY t.rank DESC, t.version_id) AS r"
        " FROM timestone.search_terms({kind},"
        " tsvector_to_array(to_tsvector({config}::regconfig, %(text)s)),"
        " %(as_of)s::timestamptz, %(valid_at)s::timestamptz, %(relations)s::text[],"
        " %(labels)s::text[], %(k)s) AS t)"
    ).format(kind=_L("told episodes" if told else kind), config=_L(_CONFIG[kind]))


# A group with fewer current rows than this is ranked exactly, not through the HNSW index
# every group shares. The index holds each vector keyed by its group (``_vectors.keyed``),
# so a scan filtered to a group reaches that group's rows first, whatever the table's
# size; a group too small to fill a list would still send it walking the others' rows.
# Measured, the same questions both ways in turn (pace 100 to 110): in a table of 100k
# facts, a group of 300 facts 5.2 ms p50 either way, 1,000 facts 6.7 exactly and 5.4
# through the index, 1,900 facts 9.1 and 5.6, 4,700 facts 17.0 and 6.1; in a table of
# 950k, 920 facts 10.6 and 9.4, 2,600 facts 13.1 and 10.2, 5,400 facts 23.9 and 11.2,
# recall@10 of the answer 1.00 each. (With the vectors indexed as they are, a filtered
# scan walked about k / share rows, and the bound grew with the table: the square root
# of 2k times its rows, 7,549 at 950k facts.) Also the periods ending later that are
# read by key.
EXACT_BELOW = 1000
# As of a moment, the current facts created by then are ranked exactly below this many
# (``_few``). The HNSW scan, filtered to them, walks about k / share of the index's rows
# and stops at ``hnsw.max_scan_tuples``; ranked by key, they cost about their number.
# Measured on the benchmark corpora (the same 20 to 30 questions as of moments when the
# group had created 1,000 to 20,000 of its current facts, bounds of 1,000, 5,000 and
# 10,000 in turn, pace 41 to 50): at 950k facts, 1,000 to 6,000 held took 50 to 200 ms
# p50 through the index and 7 to 12 exactly; at 95k facts, 3,000 to 6,000 held took 12
# to 21 ms through the index and 5 to 11 exactly, 11,000 about the same either way.
# Past the bound, at 950k facts (30 questions, pace 42, a warm cache): 20,000 and 30,000
# held took 59 and 66 ms p50 ranked exactly against 102 and 37 through the index, so no
# higher bound serves both.
AS_OF_EXACT_BELOW = 10_000
AS_OF_SHARE = 4  # ... and from EXACT_BELOW, only if they are a fifth of today's or fewer
ENDED_EXACT_BELOW = 10_000  # versions ended after an as-of moment read by key, below this


def _ranked(parts: Sequence[sql.Composable], before: sql.Composable) -> sql.Composable:
    """``vec``: the ``k`` nearest of the union of ``parts``, numbered."""
    return sql.SQL(
        "{before} vec AS MATERIALIZED (SELECT v.version_id,"
        " row_number() OVER (ORDER BY v.d, v.version_id) AS r FROM (SELECT u.version_id, u.d"
        " FROM ({parts}) AS u ORDER BY u.d, u.version_id LIMIT %(k)s) AS v)"
    ).format(before=before, parts=sql.SQL(" UNION ALL ").join(parts))


def _bound(table: str) -> sql.Composable:
    """The exact-ranking bound of ``table``: for facts the ``exact_below`` parameter
    (``EXACT_BELOW``, or 0 for a group known to be larger, ``run_search``); for the
    others ``EXACT_BELOW``."""
    return sql.SQL("%(exact_below)s") if table == "facts" else _L(EXACT_BELOW)


# ``TOLD`` on an alias: what keeps a statement to told episodes
_TOLD: LiteralString = "{}." + TOLD


def _told(alias: str, told: bool) -> sql.Composable:
    return sql.SQL(" AND " + _TOLD).format(sql.Identifier(alias)) if told else sql.SQL("")


def _few(table: str, *, created_by: bool = False, told: bool = False) -> sql.Composable:
    """``few``: whether the group holds fewer current rows of ``table`` than its bound
    (``_bound``; an index-only count that stops there: with a bound of 0, no count).

    As of a moment (``created_by``, facts), whether to rank exactly the current rows
    created by then, the only current rows such a search may return. They are counted
    in creation order through ``facts_created`` (migration 0028) up to
    ``AS_OF_EXACT_BELOW``: fewer than ``EXACT_BELOW`` are ranked exactly; up to the
    bound, only if the rows created since are ``AS_OF_SHARE`` times as many or more (the
    filter would pass a small share of the HNSW scan's rows; that count stops there).
    ``horizon`` is when the last row counted was created: rows are only ever created
    later or expire, so from then on every moment holds as many rows and as large a
    share, and the decision not to rank exactly holds (``Database.note_horizon``).
    ``told``: the group's told episodes are counted (``episodes_told``)."""
    if not created_by:
        return sql.SQL(
            "few AS MATERIALIZED (SELECT count(*) < {n} AS yes FROM (SELECT 1"
            " FROM timestone.{t} AS p WHERE p.group_id = %(g)s AND p.expired_at IS NULL{told}"
            "{order} LIMIT {n}) AS p),"
        ).format(
            t=sql.Identifier(table),
            n=_bound(table),
            told=_told("p", told),
            # in the order of ``episodes_told``, which the count then reads: without it the
            # plan scanned the table until it met 1,000 told episodes (1.3 ms of a context
            # over 5,000 of them in the 100k-fact benchmark database)
            order=sql.SQL(" ORDER BY p.id") if told else sql.SQL(""),
        )
    return sql.SQL(
        "held AS MATERIALIZED (SELECT count(*) AS n, max(p.created_at) AS horizon"
        " FROM (SELECT p.created_at FROM timestone.{t} AS p WHERE p.group_id = %(g)s"
        " AND p.expired_at IS NULL AND p.created_at <= %(as_of)s::timestamptz"
        " ORDER BY p.created_at LIMIT {n}) AS p),"
        " since AS MATERIALIZED (SELECT count(*) AS n FROM (SELECT 1 FROM timestone.{t} AS a"
        " WHERE a.group_id = %(g)s AND a.expired_at IS NULL"
        " AND a.created_at > %(as_of)s::timestamptz"
        " LIMIT (SELECT {share} * h.n FROM held AS h)) AS a),"
        " few AS MATERIALIZED (SELECT h.n < least({n}, {small}) OR (h.n < {n}"
        " AND (SELECT s.n FROM since AS s) >= {share} * h.n) AS yes, h.horizon FROM held AS h),"
    ).format(t=sql.Identifier(table), n=_bound(table), small=_L(EXACT_BELOW), share=_L(AS_OF_SHARE))


def _every(
    table: str,
    alias: str,
    column: str,
    where: sql.Composable,
    *,
    created_by: bool = False,
    told: bool = False,
) -> sql.Composable:
    """Every current row of a small group, ranked exactly. The ids come from the group's
    current-id index (index-only, in key order, stopping at the bound), and the rows
    are then read through the same index by those keys: an array whose length the planner
    cannot see, so it never weighs a scan of the table against it. Filtering the table
    itself left the access path to the planner, whose generic plan, in a database of few
    groups (each estimated at a large share of the table), read the whole table and
    sorted it: 9 ms for the vector list of a 278-fact group among 9k facts, 1.7 ms now.
    As of a moment (``created_by``, see ``_few``), the ids are those of the current rows
    created by then, in creation order."""
    a, c, t = sql.Identifier(alias), sql.Identifier(column), sql.Identifier(table)
    ids = sql.SQL(
        " AND i.created_at <= %(as_of)s::timestamptz ORDER BY i.created_at, i.id"
        if created_by
        else " ORDER BY i.id"
    )
    return sql.SQL(
        "(SELECT {a}.version_id, {a}.{c} <=> %(vec)s::vector AS d FROM timestone.{t} AS {a}"
        " WHERE {a}.group_id = %(g)s AND {a}.expired_at IS NULL AND {a}.id = ANY(ARRAY("
        "SELECT i.id FROM timestone.{t} AS i WHERE (SELECT yes FROM few) AND i.group_id = %(g)s"
        " AND i.expired_at IS NULL{told}{ids} LIMIT {n}))"
        " AND {a}.{c} IS NOT NULL AND {where})"
    ).format(a=a, c=c, t=t, where=where, n=_bound(table), ids=ids, told=_told("i", told))


def _by_index(alias: str, column: str, dimension: int, *, seed: int = 1) -> sql.Composable:
    """The order that reads an HNSW index: the keyed distance (``_vectors.keyed``, from
    the index's ``seed``), the plain one's order within the group."""
    a = sql.Identifier(alias)
    return sql.SQL("{} <=> {}").format(
        keyed(
            sql.SQL("{}.{}").format(a, sql.Identifier(column)),
            sql.SQL("{}.group_id").format(a),
            dimension,
            seed=seed,
        ),
        keyed(sql.SQL("%(vec)s::vector"), sql.SQL("%(g)s::text"), dimension, seed=seed),
    )


def _vec(
    table: str,
    alias: str,
    column: str,
    where: sql.Composable,
    as_of: datetime | None,
    dimension: int,
    *,
    told: bool = False,
) -> sql.Composable:
    """The vector list of entities or episodes. The HNSW index spans every group: for a
    group with few rows in a large table, an index scan filtered by group walks a long
    way (to ``hnsw.max_scan_tuples``, over 100 ms at 100k rows, for a group with none)
    before it gives up, so a small group is ranked exactly instead, chosen per search by
    a one-time filter. As of a system time, history rows are read, which the index does
    not hold: the group is scanned exactly. ``told``: the group's told episodes, counted
    and ranked exactly through ``episodes_told``, or read from their own HNSW index
    (``where`` holds ``_TOLD``, and the order is keyed from ``TOLD_SEED``): filtered in
    the index of every episode, the scan of a group of many records of facts would walk
    past them all."""
    a, c = sql.Identifier(alias), sql.Identifier(column)
    nearest = sql.SQL(
        "(SELECT {a}.version_id, {a}.{c} <=> %(vec)s::vector AS d"
        " FROM timestone.{t} AS {a} WHERE {gate} {a}.group_id = %(g)s AND {a}.{c} IS NOT NULL"
        " AND {where} ORDER BY {order} LIMIT %(k)s)"
    )
    t = sql.Identifier(table)
    if as_of is not None:
        # history rows, which no index holds: the plain distance, a scan of the group
        plain = sql.SQL("{}.{} <=> %(vec)s::vector").format(a, c)
        return _ranked(
            [nearest.format(a=a, c=c, t=t, where=where, gate=sql.SQL(""), order=plain)],
            sql.SQL(""),
        )
    return _ranked(
        [
            _every(table, alias, column, where, told=told),
            nearest.format(
                a=a,
                c=c,
                t=t,
                where=where,
                gate=sql.SQL("NOT (SELECT yes FROM few) AND"),
                order=_by_index(alias, column, dimension, seed=TOLD_SEED if told else 1),
            ),
        ],
        _few(table, told=told),
    )


def fact_vectors(req: SearchRequest, filters: sql.Composable, dimension: int) -> sql.Composable:
    """The vector list of facts, ``vec``, from the index that holds what the search can see.

    Current fact versions sit in two HNSW indexes, open periods and closed ones. Every
    period true at ``valid_at`` = t is open (``valid_at <= t``) or closed after t: the
    open index serves the first; for the second, the periods that end after t are read in
    end order from ``facts_closing`` and, when there are fewer than ``EXACT_BELOW``
    (for the present: the few with an end date to come), ranked exactly; otherwise the
    closed index is searched with the period filter. Without ``valid_at`` (every period)
    both indexes are searched. A group with few facts is ranked exactly, as in ``_vec``.
    Each choice is a one-time filter on a count, so a branch not taken never runs. As of
    a system time: ``_fact_vectors_as_of``.
    """
    if req.as_of is not None:
        return _fact_vectors_as_of(req, filters, dimension)
    before, parts = _current_vectors(req, filters, dimension)
    return _ranked(parts, before)


def _current_vectors(
    req: SearchRequest, filters: sql.Composable, dimension: int
) -> tuple[sql.Composable, list[sql.Composable]]:
    """The CTEs and the branches of the vector list of current facts (``fact_vectors``)."""
    valid = valid_clause("f", req.valid_at)
    order = _by_index("f", "embedding", dimension)

    def nearest(period: sql.Composable, filters: sql.Composable) -> sql.Composable:
        return sql.SQL(
            "(SELECT f.version_id, f.embedding <=> %(vec)s::vector AS d FROM timestone.facts AS f"
            " WHERE NOT (SELECT yes FROM few) AND f.group_id = %(g)s AND f.embedding IS NOT NULL"
            " AND f.expired_at IS NULL AND {period} AND {filters}"
            " ORDER BY {order} LIMIT %(k)s)"
        ).format(period=period, filters=filters, order=order)

    created_by = req.as_of is not None
    few = _few("facts", created_by=created_by)
    every = _every(
        "facts", "f", "embedding", sql.SQL(" AND ").join([valid, filters]), created_by=created_by
    )
    if req.valid_at is None:
        parts = [
            every,
            nearest(period=sql.SQL("f.invalid_at IS NULL"), filters=filters),
            nearest(period=sql.SQL("f.invalid_at IS NOT NULL"), filters=filters),
        ]
        return few, parts
    many = sql.SQL("(SELECT count(*) FROM closing) >= {}").format(_L(EXACT_BELOW))
    parts = [
        every,
        nearest(
            period=sql.SQL("f.invalid_at IS NULL AND f.valid_at <= %(valid_at)s::timestamptz"),
            filters=filters,
        ),
        # each period by its key: a lateral lookup that its LIMIT keeps from being
        # flattened into a join the planner could answer with a scan of the table
        sql.SQL(
            "(SELECT f.version_id, f.embedding <=> %(vec)s::vector AS d FROM closing"
            " CROSS JOIN LATERAL (SELECT * FROM timestone.facts AS x WHERE x.group_id = %(g)s"
            " AND x.version_id = closing.version_id LIMIT 1) AS f"
            " WHERE NOT (SELECT yes FROM few) AND NOT {many} AND f.embedding IS NOT NULL"
            " AND f.valid_at <= %(valid_at)s::timestamptz AND {filters}"
            " ORDER BY 2 LIMIT %(k)s)"
        ).format(many=many, filters=filters),
        nearest(
            # "IS TRUE" keeps facts_closing out of this branch: it is taken when
            # many periods end later, which the closed index finds faster
            period=sql.SQL(
                "{many} AND f.invalid_at IS NOT NULL"
                " AND f.valid_at <= %(valid_at)s::timestamptz"
                " AND (f.invalid_at > %(valid_at)s::timestamptz) IS TRUE"
            ).format(many=many),
            filters=filters,
        ),
    ]
    closing = sql.SQL(
        "closing AS MATERIALIZED (SELECT c.version_id FROM timestone.facts AS c"
        " WHERE NOT (SELECT yes FROM few) AND c.group_id = %(g)s AND c.expired_at IS NULL"
        " AND c.invalid_at IS NOT NULL AND c.invalid_at > %(valid_at)s::timestamptz"
        " ORDER BY c.invalid_at LIMIT {}),"
    ).format(_L(EXACT_BELOW))
    return sql.SQL(" ").join([few, closing]), parts


def _fact_vectors_as_of(
    req: SearchRequest, filters: sql.Composable, dimension: int
) -> sql.Composable:
    """The vector list of the facts held at ``as_of``.

    A version held at a moment T (created by T, not expired by T) is current now or
    ended after T. The current ones created by T are ranked as a present search ranks
    (``_current_vectors``: a group of few facts exactly, a larger one through the HNSW
    indexes, the creation time one more filter): ``near``. If the indexes give fewer
    than ``k`` of them (a moment so early that the filter passes few of today's rows,
    and the index scan stops at ``hnsw.max_scan_tuples``; or a group that held fewer
    than ``k`` then), the current versions created by T are ranked by a scan instead,
    as every as-of search once was. The versions ended after T, which no vector index
    holds, are read in end order through ``facts_ended`` (``timestone.ended_after``,
    planned for each call) and ranked exactly (none for a moment just past); from
    ``ENDED_EXACT_BELOW`` of them, by a scan.
    """
    created = sql.SQL(" AND ").join([sql.SQL("f.created_at <= %(as_of)s::timestamptz"), filters])
    before, parts = _current_vectors(req, created, dimension)
    valid = valid_clause("f", req.valid_at)
    near = sql.SQL(
        "{before} near AS MATERIALIZED (SELECT u.version_id, u.d FROM ({parts}) AS u"
        " ORDER BY u.d, u.version_id LIMIT %(k)s),"
    ).format(before=before, parts=sql.SQL(" UNION ALL ").join(parts))
    enough = sql.SQL("((SELECT yes FROM few) OR (SELECT count(*) FROM near) >= %(k)s)")
    found = sql.SQL("(SELECT n.version_id, n.d FROM near AS n WHERE {})").format(enough)
    scan = sql.SQL(
        "(SELECT f.version_id, f.embedding <=> %(vec)s::vector AS d FROM timestone.facts AS f"
        " WHERE NOT {enough} AND f.group_id = %(g)s"
        " AND f.expired_at IS NULL AND f.embedding IS NOT NULL AND {valid} AND {created}"
        " ORDER BY 2 LIMIT %(k)s)"
    ).format(enough=enough, valid=valid, created=created)
    # each ended version by its key, as ``closing`` is read; past the bound, a scan
    few_ended = sql.SQL(
        "(SELECT e.version_id, e.d FROM ended AS e WHERE NOT {many} ORDER BY 2 LIMIT %(k)s)"
    ).format(many=_many_ended())
    many_ended = sql.SQL(
        "(SELECT f.version_id, f.embedding <=> %(vec)s::vector AS d FROM timestone.facts AS f"
        " WHERE {many} AND f.group_id = %(g)s AND f.expired_at IS NOT NULL"
        " AND f.expired_at > %(as_of)s::timestamptz AND f.embedding IS NOT NULL"
        " AND {valid} AND {created} ORDER BY 2 LIMIT %(k)s)"
    ).format(many=_many_ended(), valid=valid, created=created)
    ended = sql.SQL(
        "ended_ids AS MATERIALIZED (SELECT t.version_id FROM timestone.ended_after("
        "%(g)s, %(as_of)s::timestamptz, {n}) AS t),"
        " ended AS MATERIALIZED (SELECT f.version_id, f.source_id, f.target_id, f.valid_at,"
        " f.embedding <=> %(vec)s::vector AS d FROM ended_ids"
        " CROSS JOIN LATERAL (SELECT * FROM timestone.facts AS x WHERE x.group_id = %(g)s"
        " AND x.version_id = ended_ids.version_id LIMIT 1) AS f"
        " WHERE NOT {many} AND f.embedding IS NOT NULL AND {valid} AND {created}),"
    ).format(n=_L(ENDED_EXACT_BELOW), many=_many_ended(), valid=valid, created=created)
    return _ranked([found, scan, few_ended, many_ended], sql.SQL(" ").join([ended, near]))


def _many_ended() -> sql.Composable:
    """Whether ``ended_ids`` stopped at its bound: the versions ended after the moment
    are then read by a scan, not from ``ended``."""
    return sql.SQL("(SELECT count(*) FROM ended_ids) >= {}").format(_L(ENDED_EXACT_BELOW))


def _name_lateral(column: str, as_of: datetime | None, out: str) -> sql.Composable:
    """The endpoint's name: the current version by the partial unique index (one row, even
    for a hub entity with thousands of versions), else its latest; as of a system time,
    the version held then."""
    c, o = sql.Identifier(column), sql.Identifier(out)
    if as_of is None:
        return sql.SQL(
            " CROSS JOIN LATERAL (SELECT coalesce("
            "(SELECT e.name FROM timestone.entities AS e WHERE e.group_id = %(g)s"
            " AND e.id = f.{c} AND e.expired_at IS NULL),"
            " (SELECT e.name FROM timestone.entities AS e WHERE e.group_id = %(g)s"
            " AND e.id = f.{c} ORDER BY e.created_at DESC LIMIT 1)) AS name) AS {o}"
        ).format(c=c, o=o)
    return sql.SQL(
        " CROSS JOIN LATERAL (SELECT e.name FROM timestone.entities AS e"
        " WHERE e.group_id = %(g)s AND e.id = f.{c}"
        " AND e.created_at <= %(as_of)s::timestamptz ORDER BY e.created_at DESC LIMIT 1) AS {o}"
    ).format(c=c, o=o)


def _around(column: str, req: SearchRequest, filters: sql.Composable, cap: int) -> sql.Composable:
    """The facts at one end of the entity ``w.entity_id``, newest in world time first, with
    their distance to the query and their other end (``other``), capped: an index scan
    that stops at the cap, so a hub one hop out costs what a leaf does.

    As of a moment, the versions held then are the current ones created by it, read the
    same way (the creation time a filter, not an index condition, so that the index in
    world-time order serves), and the versions ended after it: those of ``ended``
    (``_fact_vectors_as_of``), or, past its bound, the entity's history rows."""
    c, valid = sql.Identifier(column), valid_clause("f", req.valid_at)
    o = sql.Identifier("target_id" if column == "source_id" else "source_id")
    if req.as_of is None:
        return sql.SQL(
            "(SELECT f.version_id, f.embedding <=> %(vec)s::vector AS d, f.{o} AS other"
            " FROM timestone.facts AS f WHERE f.group_id = %(g)s AND f.{c} = w.entity_id"
            " AND f.embedding IS NOT NULL AND f.expired_at IS NULL AND {valid} AND {filters}"
            " ORDER BY f.valid_at DESC LIMIT {cap})"
        ).format(c=c, o=o, valid=valid, filters=filters, cap=_L(cap))
    return sql.SQL(
        "(SELECT y.version_id, y.d, y.other FROM ("
        "(SELECT f.version_id, f.embedding <=> %(vec)s::vector AS d, f.{o} AS other, f.valid_at"
        " FROM timestone.facts AS f WHERE f.group_id = %(g)s AND f.{c} = w.entity_id"
        " AND f.embedding IS NOT NULL AND f.expired_at IS NULL"
        " AND (f.created_at <= %(as_of)s::timestamptz) IS TRUE AND {valid} AND {filters}"
        " ORDER BY f.valid_at DESC LIMIT {cap})"
        " UNION ALL (SELECT e.version_id, e.d, e.{o}, e.valid_at FROM ended AS e"
        " WHERE NOT {many} AND e.{c} = w.entity_id ORDER BY e.valid_at DESC LIMIT {cap})"
        " UNION ALL (SELECT f.version_id, f.embedding <=> %(vec)s::vector AS d, f.{o},"
        " f.valid_at FROM timestone.facts AS f WHERE {many} AND f.group_id = %(g)s"
        " AND f.{c} = w.entity_id AND f.embedding IS NOT NULL AND f.expired_at IS NOT NULL"
        " AND f.expired_at > %(as_of)s::timestamptz AND f.created_at <= %(as_of)s::timestamptz"
        " AND {valid} AND {filters} ORDER BY f.valid_at DESC LIMIT {cap})"
        ") AS y ORDER BY y.valid_at DESC LIMIT {cap})"
    ).format(c=c, o=o, valid=valid, filters=filters, cap=_L(cap), many=_many_ended())


def _around_both(req: SearchRequest, filters: sql.Composable, cap: int) -> sql.Composable:
    """The facts at both ends of ``w.entity_id`` (``_around``), ``cap`` of them at most."""
    return sql.SQL(
        "(SELECT y.version_id, y.d, y.other FROM ({source} UNION ALL {target}) AS y LIMIT {cap})"
    ).format(
        source=_around("source_id", req, filters, cap),
        target=_around("target_id", req, filters, cap),
        cap=_L(cap),
    )


RANKED_LISTS = {
    "facts": ("fts", "vec", "graph"),
    "entities": ("fts", "vec", "graph", "named"),
    "episodes": ("fts", "vec"),
    "communities": ("fts", "vec"),
}


_RANK_OF = {"fts": "fts_rank", "vec": "vec_rank", "graph": "graph_rank", "named": "named_rank"}


def candidates_sql(scope: str) -> sql.Composable:
    """``cand``: every candidate of the scope's ranked lists once, with its rank in each
    list (``fts_rank``...; NULL where it is absent). One aggregate over the lists, where
    a join per list had the generic plan loop over a list's rows for each candidate."""
    lists = RANKED_LISTS[scope]
    columns = [sql.Identifier(_RANK_OF[name]) for name in lists]
    parts = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT version_id, {} FROM {}").format(
            sql.SQL(", ").join(
                sql.SQL("r") if other == name else sql.SQL("NULL::bigint") for other in lists
            ),
            sql.Identifier(name),
        )
        for name in lists
    )
    return sql.SQL(
        "cand AS (SELECT u.version_id, {ranks} FROM ({parts}) AS u(version_id, {columns})"
        " GROUP BY u.version_id)"
    ).format(
        ranks=sql.SQL(", ").join(sql.SQL("min(u.{c}) AS {c}").format(c=c) for c in columns),
        parts=parts,
        columns=sql.SQL(", ").join(columns),
    )


def fused_sql(scope: str) -> sql.Composable:
    """Reciprocal rank fusion in SQL over ``cand`` (``candidates_sql``), bit for bit
    ``_fusion.rrf_score``: the same divisions in double precision, added in the same
    order (an absent list adds 0)."""
    return sql.SQL(" + ").join(
        sql.SQL("coalesce(1.0::float8 / ({} + cand.{}), 0)").format(
            _L(RRF_K), sql.Identifier(_RANK_OF[name])
        )
        for name in RANKED_LISTS[scope]
    )


def kept_sql(key: str, req: SearchRequest) -> sql.Composable:
    """The hits a reranker can return, cut in the database: the order of
    ``_fusion.rerank`` for the method, then ``%(keep)s`` rows, so only those travel
    and have their names looked up. MMR compares candidates with each other and
    takes every one."""
    k = sql.Identifier(key)
    order = {
        "rrf": sql.SQL("fused DESC, {}").format(k),
        "cross_encoder": sql.SQL("fused DESC, {}").format(k),
        "node_distance": sql.SQL("hops IS NULL, coalesce(hops, 0), fused DESC, {}").format(k),
        "episode_mentions": sql.SQL("coalesce(mentions, 0) DESC, fused DESC, {}").format(k),
    }.get(req.method)
    if order is None:
        return sql.SQL("SELECT * FROM hits")
    return sql.SQL("SELECT * FROM hits ORDER BY {} LIMIT %(keep)s").format(order)


def keep_of(req: SearchRequest) -> int:
    """How many fused hits a search keeps: a cross-encoder rescores all the candidates."""
    return max(req.candidates, req.limit) if req.method == "cross_encoder" else req.limit


def _facts_lists(req: SearchRequest, filters: sql.Composable, dimension: int) -> sql.Composable:
    """``vec``, the walk (``walked``) and ``graph``: every ranked list of facts but the
    full-text one."""
    return sql.SQL(
        "{vec}, {walk},"
        " seed_facts AS MATERIALIZED (SELECT DISTINCT ON (x.version_id) x.version_id, x.d,"
        "  x.other, w.entity_id AS seed FROM walked AS w CROSS JOIN LATERAL {seed} AS x"
        "  WHERE w.depth = 0 ORDER BY x.version_id),"
        " graph AS MATERIALIZED (SELECT g.version_id,"
        "  row_number() OVER (ORDER BY g.d, g.version_id) AS r FROM ("
        "  SELECT DISTINCT ON (u.version_id) u.version_id, u.d FROM ("
        "   SELECT s.version_id, s.d FROM seed_facts AS s"
        "   UNION ALL SELECT x.version_id, x.d FROM {hops} AS w CROSS JOIN LATERAL {hop} AS x)"
        "  AS u ORDER BY u.version_id) AS g ORDER BY g.d LIMIT %(k)s)"
    ).format(
        vec=fact_vectors(req, filters, dimension),
        walk=_walk(req),
        seed=_around_both(req, filters, SEED_FACTS_CAP),
        hops=_hop_entities(req),
        hop=_around_both(req, filters, HOP_FACTS_CAP),
    )


def _hop_entities(req: SearchRequest) -> sql.Composable:
    """The entities one hop out whose facts the graph list ranks (``entity_id``).

    Around the entities a question names: the other ends of each one's
    ``HOP_FROM_FACTS`` facts most similar to the question, the edges a question about
    it is likely to follow. Every neighbour costs a read of its facts, and a person's
    city or employer brings dozens that answer other questions: the benchmark's median
    question at 100k facts walked to 17 neighbours and ranked 330 of their facts with
    17 of its own. Through each named entity's three most similar facts, the top ten
    was the same for 299 of 300 questions (284 with no neighbour read at all, and
    the Graph-RAG benchmark's evidence fell from 100% to 59%). Around an explicit
    ``center``, every neighbour the walk reached: the neighbourhood is what was asked
    for."""
    if req.center is not None:
        return sql.SQL("(SELECT w.entity_id FROM walked AS w WHERE w.depth = 1)")
    return sql.SQL(
        "(SELECT DISTINCT s.other AS entity_id FROM (SELECT s.other, row_number() OVER"
        " (PARTITION BY s.seed ORDER BY s.d, s.version_id) AS n FROM seed_facts AS s) AS s"
        " WHERE s.n <= {n} AND s.other NOT IN"
        " (SELECT w.entity_id FROM walked AS w WHERE w.depth = 0))"
    ).format(n=_L(HOP_FROM_FACTS))


def _cut_early(req: SearchRequest) -> bool:
    """Whether the facts a search keeps are known from the ranks alone: reciprocal rank
    fusion (or a cross-encoder, which rescores the ones fusion kept) orders candidates
    by ``fused`` and their key, and without a filter every candidate passes ``hits``, so
    only the rows kept are read (``top_sql``)."""
    no_filter = req.edge_types is None and req.labels is None and req.ids is None
    return no_filter and req.method in ("rrf", "cross_encoder")


def top_sql(req: SearchRequest) -> sql.Composable:
    """``top``: the candidates the reranker keeps, by their ranks (``_cut_early``)."""
    if not _cut_early(req):
        return sql.SQL("")
    return sql.SQL(
        " top AS (SELECT cand.*, {fused} AS fused FROM cand"
        " ORDER BY fused DESC, cand.version_id LIMIT %(keep)s),"
    ).format(fused=fused_sql("facts"))


# Each scope reads its candidates' rows by key in a lateral lookup whose LIMIT 1 (the
# key is unique) keeps it from being flattened into a join: as a join, the generic plan of
# a database of few groups hashed every current row of the group instead.
def _facts_fused(
    req: SearchRequest, filters: sql.Composable, *, few: bool = True
) -> sql.Composable:
    """The candidates of ``fts``, ``vec`` and ``graph``, their rows and fused score, cut
    to what the reranker keeps, with the names of their endpoints; and (``few``) whether
    the group was ranked exactly, which ``run_search`` remembers."""
    embedding = sql.SQL(", f.embedding") if req.embeddings else sql.SQL("")
    return sql.SQL(
        " {cand},{top}"
        " hits AS (SELECT f.id, f.version_id, f.group_id, f.source_id, f.relation,"
        "  f.target_id, f.fact, f.valid_at, f.invalid_at, f.created_at,"
        "  f.expired_at, f.episodes, f.attributes::text AS attributes, cand.fts_rank,"
        "  cand.vec_rank, cand.graph_rank, least(ws.depth, wt.depth) AS hops,"
        "  f.embedding <=> %(vec)s::vector AS distance, cardinality(f.episodes) AS mentions,"
        "  {fused} AS fused{embedding}"
        " FROM {source} AS cand CROSS JOIN LATERAL (SELECT * FROM timestone.facts AS x"
        "  WHERE x.group_id = %(g)s AND x.version_id = cand.version_id LIMIT 1) AS f"
        " LEFT JOIN walked AS ws ON ws.entity_id = f.source_id"
        " LEFT JOIN walked AS wt ON wt.entity_id = f.target_id"
        " WHERE {filters})"
        " SELECT f.*, s.name AS source, t.name AS target{few} FROM ({kept}) AS f"
        " {source_name} {target_name}"
    ).format(
        cand=candidates_sql("facts"),
        top=top_sql(req),
        source=sql.SQL("top" if _cut_early(req) else "cand"),
        filters=filters,
        embedding=embedding,
        fused=fused_sql("facts"),
        kept=kept_sql("version_id", req),
        few=sql.SQL(", (SELECT yes FROM few) AS few{}").format(_horizon(req))
        if few
        else sql.SQL(""),
        source_name=_name_lateral("source_id", req.as_of, "s"),
        target_name=_name_lateral("target_id", req.as_of, "t"),
    )


# The full-text list of facts needs no query vector, and a search sends it first, in its own
# statement, before the query is embedded: the server ranks the text while the client
# embeds. It leaves its ids, in rank order, in a setting local to the transaction (the one
# implicit transaction of the pipeline, or the split search's), where the facts statement
# that follows reads them: nothing travels back to the client in between.
_TEXT_SETTING = "timestone.fts_ids"


def facts_text_first_sql(req: SearchRequest) -> sql.Composed:
    """The full-text list of facts into ``_TEXT_SETTING`` (read by ``facts_sql``)."""
    return sql.SQL(
        "WITH {fts} SELECT set_config({name},"
        " coalesce((SELECT array_agg(version_id ORDER BY r) FROM fts)::text, '{{}}'), true)"
    ).format(fts=_fts("facts"), name=_L(_TEXT_SETTING))


def facts_sql(req: SearchRequest, dimension: int) -> sql.Composed:
    """Every list of facts but the full-text one, which ``facts_text_first_sql`` ranked
    before it in the same transaction, fused."""
    filters = _fact_filters("f", req)
    fts = sql.SQL(
        "fts AS (SELECT u.version_id, u.r FROM unnest(current_setting({})::uuid[])"
        " WITH ORDINALITY AS u(version_id, r))"
    ).format(_L(_TEXT_SETTING))
    return sql.SQL("WITH RECURSIVE {fts}, {lists},{fused}").format(
        fts=fts, lists=_facts_lists(req, filters, dimension), fused=_facts_fused(req, filters)
    )


def facts_inline_sql(req: SearchRequest, dimension: int) -> sql.Composed:
    """``facts_sql`` with the full-text list ranked in the statement itself: on a
    distributed database, where ``facts_text_first_sql`` would leave its setting on the
    coordinator, and the facts statement, routed whole to the group's worker, would
    read it there."""
    filters = _fact_filters("f", req)
    return sql.SQL("WITH RECURSIVE {fts}, {lists},{fused}").format(
        fts=_fts("facts"),
        lists=_facts_lists(req, filters, dimension),
        fused=_facts_fused(req, filters),
    )


# A search of a large group can split the facts statement over two connections of the
# pool that share one snapshot: the full-text list on one while the other ranks the
# vector and graph lists, then fuses the three. Each list travels back as the text of an
# array (ids in rank order), which is sent back unchanged: nothing is parsed in Python.
def _ids(name: str) -> sql.Composable:
    """The ids of the ranked list ``name`` in rank order, as the text of an array
    (``{name}_ids``, the parameter ``facts_given_sql`` takes back)."""
    return sql.SQL("(SELECT array_agg(version_id ORDER BY r) FROM {})::text AS {}").format(
        sql.Identifier(name), sql.Identifier(f"{name}_ids")
    )


def _horizon(req: SearchRequest) -> sql.Composable:
    """As of a moment, the column ``horizon`` of ``few`` (``_few``) beside it."""
    return sql.SQL("" if req.as_of is None else ", (SELECT horizon FROM few) AS horizon")


def facts_text_sql(req: SearchRequest) -> sql.Composed:
    """The full-text list of facts alone: ``fts``, its ids in rank order."""
    return sql.SQL("WITH {fts} SELECT {ids}").format(fts=_fts("facts"), ids=_ids("fts"))


def facts_lists_sql(req: SearchRequest, dimension: int) -> sql.Composed:
    """The other lists of facts: ``vec`` and ``graph`` in rank order, and the walk."""
    return sql.SQL(
        "WITH RECURSIVE {lists} SELECT {vec}, {graph}, (SELECT yes FROM few) AS few{horizon},"
        " (SELECT array_agg(entity_id ORDER BY entity_id) FROM walked)::text AS walked_ids,"
        " (SELECT array_agg(depth ORDER BY entity_id) FROM walked)::text AS walked_depths"
    ).format(
        horizon=_horizon(req),
        lists=_facts_lists(req, _fact_filters("f", req), dimension),
        vec=_ids("vec"),
        graph=_ids("graph"),
    )


def facts_given_sql(req: SearchRequest) -> sql.Composed:
    """The facts statement fed the lists computed apart: the same fusion and cut."""
    ranked = sql.SQL(
        "{name} AS (SELECT u.version_id, u.r"
        " FROM unnest(%({name}_ids)s::uuid[]) WITH ORDINALITY AS u(version_id, r)),"
    )
    return sql.SQL(
        "WITH {lists} walked AS (SELECT w.entity_id, w.depth"
        " FROM unnest(%(walked_ids)s::uuid[], %(walked_depths)s::int[]) AS w(entity_id, depth)),"
        "{fused}"
    ).format(
        lists=sql.SQL(" ").join(ranked.format(name=sql.SQL(n)) for n in ("fts", "vec", "graph")),
        fused=_facts_fused(req, _fact_filters("f", req), few=False),
    )


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
        fts=_fts("entities"),
        vec=_vec("entities", "e", "name_embedding", filters, req.as_of, dimension),
        walk=_walk(req),
        names=names,
        cand=candidates_sql("entities"),
        filters=filters,
        mentions=_only_for(
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


def _only_for(
    req: SearchRequest,
    method: str,
    expression: LiteralString,
    type_name: LiteralString,
    **parts: sql.Composable,
) -> sql.Composable:
    """A reranker's signal read from the mentions (an episode's distance from the walk, an
    entity's or an episode's count of mentions), computed only for the reranker that
    orders by it, NULL for the others. Each is a subquery per hit over every mention of
    the hit: an episode of a thousand facts has some eight hundred, and ``context()``
    (60 episode candidates, reciprocal rank) spent 49 of its episodes statement's 60 ms at
    100k facts counting them for nothing."""
    if req.method != method:
        return sql.SQL("NULL::{}").format(sql.SQL(type_name))
    return sql.SQL(expression).format(**parts)


def _hop_of_mention() -> sql.Composable:
    """The depth at which the walk reached the entity of mention ``m`` (NULL: not at all),
    one hashed lookup per depth. A join of an episode's mentions with ``walked`` was
    planned from ``walked`` (an estimate of some dozens of rows), an index probe of
    mentions for each walked entity and each candidate episode: around a company of
    20,000 employees (5,000 entities walked), 200,000 probes: ``context`` 1,386 ms, now 233
    (``bench.hostile``)."""
    return sql.SQL("CASE {} END").format(
        sql.SQL(" ").join(
            sql.SQL(
                "WHEN m.entity_id IN (SELECT w.entity_id FROM walked AS w WHERE w.depth = {d})"
                " THEN {d}"
            ).format(d=sql.Literal(d))
            for d in range(max(WALK_DEPTH, CENTER_DEPTH) + 1)
        )
    )


def episodes_sql(req: SearchRequest, dimension: int) -> sql.Composed:
    """The episodes scope (``timestone._episodes_sql``: fusion led by the strong list,
    and the neighbours of a hit)."""
    from ._episodes_sql import episodes_statement

    return episodes_statement(req, dimension)


# for ``timestone._episodes_sql``, which composes the episodes statement of these parts
fts_sql = _fts
vec_sql = _vec
walk_sql = _walk
only_for_sql = _only_for
hop_of_mention_sql = _hop_of_mention


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
        fts=_fts("communities"),
        cand=candidates_sql("communities"),
        filters=filters,
        dim=_L(dimension),
        # as of a moment, history rows, which the index does not hold: ranked exactly
        order=sql.SQL("2")
        if req.as_of is not None
        else _by_index("c", "name_embedding", dimension),
        walk=_walk(req),
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

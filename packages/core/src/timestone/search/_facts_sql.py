"""The facts statement: its full-text, vector and graph lists, their fusion and cut, and
the forms a search sends it in (ranked in one statement, its full-text list first in
the same transaction, or split over two connections). The parts it shares with the
other scopes are ``timestone.search._ranked_lists_sql``'s."""

from __future__ import annotations

from datetime import datetime

from psycopg import sql

from . import _ranked_lists_sql as lists
from ._ranked_lists_sql import (
    by_index_sql,
    candidates_sql,
    every_sql,
    few_sql,
    fts_sql,
    fused_sql,
    held_clause,
    kept_sql,
    ranked_sql,
    valid_clause,
    walk_sql,
)
from ._request import HOP_FACTS_CAP, HOP_FROM_FACTS, SEED_FACTS_CAP, SearchRequest

# As of a moment long past, an entity's rows created by then are read in creation order
# when fewer than this (``_around``); otherwise, as a present search reads them.
AROUND_CREATED_BELOW = 1000

__all__ = [
    "fact_filters",
    "fact_vectors",
    "facts_given_sql",
    "facts_inline_sql",
    "facts_lists_sql",
    "facts_sql",
    "facts_text_first_sql",
    "facts_text_sql",
    "top_sql",
]

_L = sql.Literal


def fact_filters(alias: str, req: SearchRequest) -> sql.Composable:
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


def fact_vectors(req: SearchRequest, filters: sql.Composable, dimension: int) -> sql.Composable:
    """The vector list of facts, ``vec``, from the index that holds what the search can see.

    Current fact versions sit in two HNSW indexes, open periods and closed ones. Every
    period true at ``valid_at`` = t is open (``valid_at <= t``) or closed after t: the
    open index serves the first; for the second, the periods that end after t are read in
    end order from ``facts_closing`` and, when there are fewer than ``lists.EXACT_BELOW``
    (for the present: the few with an end date to come), ranked exactly; otherwise the
    closed index is searched with the period filter. Without ``valid_at`` (every period)
    both indexes are searched. A group with few facts is ranked exactly, as in ``vec_sql``.
    Each choice is a one-time filter on a count, so a branch not taken never runs. As of
    a system time: ``_fact_vectors_as_of``.
    """
    if req.as_of is not None:
        return _fact_vectors_as_of(req, filters, dimension)
    before, parts = _current_vectors(req, filters, dimension)
    return ranked_sql(parts, before)


def _current_vectors(
    req: SearchRequest, filters: sql.Composable, dimension: int
) -> tuple[sql.Composable, list[sql.Composable]]:
    """The CTEs and the branches of the vector list of current facts (``fact_vectors``)."""
    valid = valid_clause("f", req.valid_at)
    order = by_index_sql("f", "embedding", dimension)

    def nearest(period: sql.Composable, filters: sql.Composable) -> sql.Composable:
        return sql.SQL(
            "(SELECT f.version_id, f.embedding <=> %(vec)s::vector AS d FROM timestone.facts AS f"
            " WHERE NOT (SELECT yes FROM few) AND f.group_id = %(g)s AND f.embedding IS NOT NULL"
            " AND f.expired_at IS NULL AND {period} AND {filters}"
            " ORDER BY {order} LIMIT %(k)s)"
        ).format(period=period, filters=filters, order=order)

    created_by = req.as_of is not None
    few = few_sql("facts", created_by=created_by)
    every = every_sql(
        "facts", "f", "embedding", sql.SQL(" AND ").join([valid, filters]), created_by=created_by
    )
    if req.valid_at is None:
        parts = [
            every,
            nearest(period=sql.SQL("f.invalid_at IS NULL"), filters=filters),
            nearest(period=sql.SQL("f.invalid_at IS NOT NULL"), filters=filters),
        ]
        return few, parts
    many = sql.SQL("(SELECT count(*) FROM closing) >= {}").format(_L(lists.EXACT_BELOW))
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
    ).format(_L(lists.EXACT_BELOW))
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
    ``lists.ENDED_EXACT_BELOW`` of them, by a scan.
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
    ).format(n=_L(lists.ENDED_EXACT_BELOW), many=_many_ended(), valid=valid, created=created)
    return ranked_sql([found, scan, few_ended, many_ended], sql.SQL(" ").join([ended, near]))


def _many_ended() -> sql.Composable:
    """Whether ``ended_ids`` stopped at its bound: the versions ended after the moment
    are then read by a scan, not from ``ended``."""
    return sql.SQL("(SELECT count(*) FROM ended_ids) >= {}").format(_L(lists.ENDED_EXACT_BELOW))


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
    (``_fact_vectors_as_of``), or, past its bound, the entity's history rows. At a
    moment before most of the group was written (the rows created since ``AS_OF_SHARE``
    times those held then, as ``few_sql`` counts them), an entity's rows created by
    then, when fewer than ``AROUND_CREATED_BELOW``, are read in creation order instead
    (``facts_history_source`` / ``_target``) and the newest in world time kept: the
    index in world-time order would walk the rows created since, a hub's thousands."""
    c, valid = sql.Identifier(column), valid_clause("f", req.valid_at)
    o = sql.Identifier("target_id" if column == "source_id" else "source_id")
    if req.as_of is None:
        return sql.SQL(
            "(SELECT f.version_id, f.embedding <=> %(vec)s::vector AS d, f.{o} AS other"
            " FROM timestone.facts AS f WHERE f.group_id = %(g)s AND f.{c} = w.entity_id"
            " AND f.embedding IS NOT NULL AND f.expired_at IS NULL AND {valid} AND {filters}"
            " ORDER BY f.valid_at DESC LIMIT {cap})"
        ).format(c=c, o=o, valid=valid, filters=filters, cap=_L(cap))
    created = sql.SQL(
        "((SELECT s.n FROM since AS s) >= {share} * (SELECT h.n FROM held AS h)"
        " AND (SELECT count(*) FROM (SELECT 1 FROM timestone.facts AS n"
        " WHERE n.group_id = %(g)s AND n.{c} = w.entity_id"
        " AND n.created_at <= %(as_of)s::timestamptz LIMIT {below}) AS n) < {below})"
    ).format(c=c, share=_L(lists.AS_OF_SHARE), below=_L(AROUND_CREATED_BELOW))
    return sql.SQL(
        "(SELECT y.version_id, y.d, y.other FROM ("
        "(SELECT f.version_id, f.embedding <=> %(vec)s::vector AS d, f.{o} AS other, f.valid_at"
        " FROM (SELECT * FROM timestone.facts AS x WHERE {created} AND x.group_id = %(g)s"
        " AND x.{c} = w.entity_id AND x.created_at <= %(as_of)s::timestamptz"
        " ORDER BY x.created_at DESC LIMIT {below}) AS f"
        " WHERE f.embedding IS NOT NULL AND f.expired_at IS NULL AND {valid} AND {filters}"
        " ORDER BY f.valid_at DESC LIMIT {cap})"
        " UNION ALL (SELECT f.version_id, f.embedding <=> %(vec)s::vector AS d, f.{o} AS other,"
        " f.valid_at FROM timestone.facts AS f WHERE NOT {created} AND f.group_id = %(g)s"
        " AND f.{c} = w.entity_id AND f.embedding IS NOT NULL AND f.expired_at IS NULL"
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
    ).format(
        c=c,
        o=o,
        valid=valid,
        filters=filters,
        cap=_L(cap),
        many=_many_ended(),
        created=created,
        below=_L(AROUND_CREATED_BELOW),
    )


def _around_both(req: SearchRequest, filters: sql.Composable, cap: int) -> sql.Composable:
    """The facts at both ends of ``w.entity_id`` (``_around``), ``cap`` of them at most."""
    return sql.SQL(
        "(SELECT y.version_id, y.d, y.other FROM ({source} UNION ALL {target}) AS y LIMIT {cap})"
    ).format(
        source=_around("source_id", req, filters, cap),
        target=_around("target_id", req, filters, cap),
        cap=_L(cap),
    )


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
        walk=walk_sql(req),
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
        "WITH {fts} SELECT pg_catalog.set_config({name},"
        " coalesce((SELECT array_agg(version_id ORDER BY r) FROM fts)::text, '{{}}'), true)"
    ).format(fts=fts_sql("facts"), name=_L(_TEXT_SETTING))


def facts_sql(req: SearchRequest, dimension: int) -> sql.Composed:
    """Every list of facts but the full-text one, which ``facts_text_first_sql`` ranked
    before it in the same transaction, fused."""
    filters = fact_filters("f", req)
    fts = sql.SQL(
        "fts AS (SELECT u.version_id, u.r FROM unnest(pg_catalog.current_setting({})::uuid[])"
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
    filters = fact_filters("f", req)
    return sql.SQL("WITH RECURSIVE {fts}, {lists},{fused}").format(
        fts=fts_sql("facts"),
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
    """As of a moment, the column ``horizon`` of ``few`` (``few_sql``) beside it."""
    return sql.SQL("" if req.as_of is None else ", (SELECT horizon FROM few) AS horizon")


def facts_text_sql(req: SearchRequest) -> sql.Composed:
    """The full-text list of facts alone: ``fts``, its ids in rank order."""
    return sql.SQL("WITH {fts} SELECT {ids}").format(fts=fts_sql("facts"), ids=_ids("fts"))


def facts_lists_sql(req: SearchRequest, dimension: int) -> sql.Composed:
    """The other lists of facts: ``vec`` and ``graph`` in rank order, and the walk."""
    return sql.SQL(
        "WITH RECURSIVE {lists} SELECT {vec}, {graph}, (SELECT yes FROM few) AS few{horizon},"
        " (SELECT array_agg(entity_id ORDER BY entity_id) FROM walked)::text AS walked_ids,"
        " (SELECT array_agg(depth ORDER BY entity_id) FROM walked)::text AS walked_depths"
    ).format(
        horizon=_horizon(req),
        lists=_facts_lists(req, fact_filters("f", req), dimension),
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
        fused=_facts_fused(req, fact_filters("f", req), few=False),
    )

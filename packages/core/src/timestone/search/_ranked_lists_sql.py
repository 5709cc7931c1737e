"""The parts every search statement shares: its parameters, the time predicates, the
walk from the named entities, the full-text and vector lists, and the fusion and cut of
their candidates (``timestone.search._sql`` composes them into one statement per scope;
the facts statement is ``timestone.search._facts_sql``'s, the episodes one
``timestone.search._episodes_sql``'s)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, LiteralString

from psycopg import sql

from .._arrays import TextArray
from .._names import normalize
from .._vectors import TOLD_SEED, keyed
from ._fulltext import any_words, web_query
from ._fusion import RRF_K
from ._request import (
    CENTER_DEPTH,
    TOLD,
    WALK_CAP,
    WALK_DEPTH,
    SearchRequest,
    name_ngrams,
)

if TYPE_CHECKING:
    from .._vectors import Row


__all__ = [
    "AS_OF_EXACT_BELOW",
    "AS_OF_SHARE",
    "ENDED_EXACT_BELOW",
    "EXACT_BELOW",
    "FALLBACK_BELOW",
    "RANKED_LISTS",
    "bound_sql",
    "by_index_sql",
    "candidates_sql",
    "every_sql",
    "facts_fts_sql",
    "few_sql",
    "fts_sql",
    "fused_sql",
    "held_clause",
    "hop_of_mention_sql",
    "keep_of",
    "kept_sql",
    "only_for_sql",
    "ranked_sql",
    "search_params",
    "told_sql",
    "valid_clause",
    "vec_sql",
    "walk_sql",
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
    any_text, none_text = any_words(req.query)
    import numpy as np

    return {
        "g": group_id,
        "text": web_query(req.query),
        # the words any of which a fact may hold in the facts' fallback, and those it must
        # not (``facts_fts_sql``)
        "any_text": any_text,
        "none_text": none_text,
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


def walk_sql(req: SearchRequest) -> sql.Composable:
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


def fts_sql(kind: str, *, told: bool = False) -> sql.Composable:
    """``fts``: the full-text list of ``kind`` with its score ``s``; ``told``, of the
    episodes that are not records of structured facts (``SearchRequest.fact_records``,
    migration 0031).

    Entities, episodes and communities are ranked by BM25 over the group's term
    statistics (``timestone.search_terms``, migration 0036): any lexeme of the question
    may match. Facts: ``facts_fts_sql``."""
    if kind == "facts":
        return facts_fts_sql()
    return sql.SQL(
        "fts AS (SELECT t.version_id, t.rank AS s,"
        " row_number() OVER (ORDER BY t.rank DESC, t.version_id) AS r"
        " FROM timestone.search_terms({kind},"
        " tsvector_to_array(to_tsvector({config}::regconfig, %(text)s)),"
        " %(as_of)s::timestamptz, %(valid_at)s::timestamptz, %(relations)s::text[],"
        " %(labels)s::text[], %(k)s) AS t)"
    ).format(kind=_L("told episodes" if told else kind), config=_L(_CONFIG[kind]))


# The facts' full-text list falls back to any word when the match of every word finds
# fewer facts than this. At 100k facts (``bench.search``), a fallback whenever it found
# fewer than ``limit`` (10) ran on nearly every question (the answer alone matches) and
# measured recall@10 0.996 and p50 11.8 ms against 1.00 and 4.0 (decision 018).
FALLBACK_BELOW = 1


def facts_fts_sql() -> sql.Composable:
    """``fts`` of facts: the match of every word first (``timestone.search_text``), and,
    when it finds fewer than ``FALLBACK_BELOW`` facts (none), the facts that hold any
    word of the question and none it negates (``any_words``), ranked by BM25
    (``timestone.search_terms``), below every fact of the first list, up to ``%(k)s``.

    A fact is one short sentence, and its questions usually name it whole ("Where does
    Karin Tal 11 work now?"): BM25 alone, on the 100k-fact benchmark, brought in the facts
    of every other Karin and every other "11" and lowered the answer's recall@10 from
    1.00 to 0.986 (decision 017). A question that says it otherwise ("Where is Karin Tal
    11 employed?") finds nothing through the match of every word: the fallback finds the
    fact by the words it shares. The count gates the fallback once per statement (a
    one-time filter): a question the first list answers never runs it. Nor does a
    search as of a past moment: BM25 counted from the facts held then made it 100 times
    slower (docs/decisions/035-no-facts-fallback-as-of.md)."""
    return sql.SQL(
        "fts_all AS MATERIALIZED (SELECT t.version_id, t.rank"
        " FROM timestone.search_text('facts', websearch_to_tsquery('english'::regconfig,"
        " %(text)s), %(as_of)s::timestamptz, %(valid_at)s::timestamptz,"
        " %(relations)s::text[], %(labels)s::text[], %(k)s) AS t),"
        " fts_any AS MATERIALIZED (SELECT t.version_id, t.rank"
        " FROM timestone.search_terms('facts',"
        " tsvector_to_array(to_tsvector('english'::regconfig, %(any_text)s)),"
        " %(as_of)s::timestamptz, %(valid_at)s::timestamptz, %(relations)s::text[],"
        " %(labels)s::text[], %(k)s) AS t"
        " WHERE %(as_of)s::timestamptz IS NULL AND (SELECT count(*) FROM fts_all) < {below}"
        " AND (%(none_text)s::text IS NULL OR NOT EXISTS (SELECT 1 FROM timestone.facts AS x"
        " WHERE x.group_id = %(g)s AND x.version_id = t.version_id"
        " AND x.fts @@ websearch_to_tsquery('english'::regconfig, %(none_text)s::text)))),"
        " fts AS (SELECT u.version_id, u.s,"
        " row_number() OVER (ORDER BY u.tier, u.s DESC, u.version_id) AS r FROM ("
        "SELECT a.version_id, a.rank AS s, 0 AS tier FROM fts_all AS a"
        " UNION ALL SELECT b.version_id, b.rank, 1 FROM fts_any AS b"
        " WHERE b.version_id NOT IN (SELECT a.version_id FROM fts_all AS a)) AS u"
        " ORDER BY u.tier, u.s DESC, u.version_id LIMIT %(k)s)"
    ).format(below=_L(FALLBACK_BELOW))


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
# (``few_sql``). The HNSW scan, filtered to them, walks about k / share of the index's rows
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


def ranked_sql(parts: Sequence[sql.Composable], before: sql.Composable) -> sql.Composable:
    """``vec``: the ``k`` nearest of the union of ``parts``, numbered."""
    return sql.SQL(
        "{before} vec AS MATERIALIZED (SELECT v.version_id,"
        " row_number() OVER (ORDER BY v.d, v.version_id) AS r FROM (SELECT u.version_id, u.d"
        " FROM ({parts}) AS u ORDER BY u.d, u.version_id LIMIT %(k)s) AS v)"
    ).format(before=before, parts=sql.SQL(" UNION ALL ").join(parts))


def bound_sql(table: str) -> sql.Composable:
    """The exact-ranking bound of ``table``: for facts the ``exact_below`` parameter
    (``EXACT_BELOW``, or 0 for a group known to be larger, ``run_search``); for the
    others ``EXACT_BELOW``."""
    return sql.SQL("%(exact_below)s") if table == "facts" else _L(EXACT_BELOW)


# ``TOLD`` on an alias: what keeps a statement to told episodes
_TOLD: LiteralString = "{}." + TOLD


def told_sql(alias: str, told: bool) -> sql.Composable:
    return sql.SQL(" AND " + _TOLD).format(sql.Identifier(alias)) if told else sql.SQL("")


def few_sql(table: str, *, created_by: bool = False, told: bool = False) -> sql.Composable:
    """``few``: whether the group holds fewer current rows of ``table`` than its bound
    (``bound_sql``; an index-only count that stops there: with a bound of 0, no count).

    As of a moment (``created_by``, facts), whether to rank exactly the current rows
    created by then, the only current rows such a search may return. They are counted
    in creation order through ``facts_created`` (migration 0028) up to
    ``AS_OF_EXACT_BELOW``: fewer than ``EXACT_BELOW`` are ranked exactly; up to the
    bound, only if the rows created since are ``AS_OF_SHARE`` times as many or more (the
    filter would pass a small share of the HNSW scan's rows): the group's current rows,
    which its term statistics keep (``timestone.group_rows``), less those counted.
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
            n=bound_sql(table),
            told=told_sql("p", told),
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
        " since AS MATERIALIZED (SELECT timestone.group_rows({kind}) - h.n AS n FROM held AS h),"
        " few AS MATERIALIZED (SELECT h.n < least({n}, {small}) OR (h.n < {n}"
        " AND (SELECT s.n FROM since AS s) >= {share} * h.n) AS yes, h.horizon FROM held AS h),"
    ).format(
        t=sql.Identifier(table),
        kind=_L(table),
        n=bound_sql(table),
        small=_L(EXACT_BELOW),
        share=_L(AS_OF_SHARE),
    )


def every_sql(
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
    As of a moment (``created_by``, see ``few_sql``), the ids are those of the current rows
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
    ).format(a=a, c=c, t=t, where=where, n=bound_sql(table), ids=ids, told=told_sql("i", told))


def by_index_sql(alias: str, column: str, dimension: int, *, seed: int = 1) -> sql.Composable:
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


def vec_sql(
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
        return ranked_sql(
            [nearest.format(a=a, c=c, t=t, where=where, gate=sql.SQL(""), order=plain)],
            sql.SQL(""),
        )
    return ranked_sql(
        [
            every_sql(table, alias, column, where, told=told),
            nearest.format(
                a=a,
                c=c,
                t=t,
                where=where,
                gate=sql.SQL("NOT (SELECT yes FROM few) AND"),
                order=by_index_sql(alias, column, dimension, seed=TOLD_SEED if told else 1),
            ),
        ],
        few_sql(table, told=told),
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


def only_for_sql(
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


def hop_of_mention_sql() -> sql.Composable:
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

"""The episodes statement: evidence for a question among a group's episodes.

Two ranked lists, full text (BM25 over the group's term statistics,
``timestone.search_terms``) and vector similarity, are fused by their scores, not
their ranks: the text score divided by the best of the candidates (BM25 is zero
where nothing matches), the similarity read from the least to the best candidate's
(a cosine has no such zero: static word vectors put every candidate near the best,
and divided by the best alone the list would add a near constant), the text score
counted whole and the similarity ``SIMILARITY_WEIGHT`` of it. On the dev
conversations of ``bench.conversations`` the text list held more of the evidence
than the vector list (recall@10 0.58 against 0.40); reciprocal rank fusion gave the
weak list the strong one's say and fell below the text list alone (0.51).

A question that names a date ("in May 2023", ``timestone.search._question``) asks about what
was told then: a candidate told in that window adds ``WINDOW_SHARE`` to its score.

Then the neighbours of the best candidates: each of the ``NEIGHBOUR_LEADS`` best
lends ``NEIGHBOUR_SHARE`` of its score to the episode just before it and the one just
after it in the group's timeline (reference time, then id; an episode takes the
largest loan it is offered, added to its own score), when that episode is of the
same source: the same ``source``, ``source_description`` and ``saga``. A reply in a
conversation often names nothing of its subject ("Yes! I went yesterday, it was so
powerful."): the message before it does; a chunk of a document continues the one
before. The loan brings them in, below the hit that names the subject. Independent
documents (each its own title, which ``add_document`` stores as the source
description) lend each other nothing: what was stored next to a hit says nothing of
its subject (docs/decisions/025-search-by-the-shape-of-the-data.md).

Every candidate and neighbour passes the scope's filters (time, ids, told episodes).
As of a system time, the neighbours are those of the timeline held then.
"""

from __future__ import annotations

from datetime import datetime

from psycopg import sql

from ._ranked_lists_sql import (
    fts_sql,
    held_clause,
    hop_of_mention_sql,
    kept_sql,
    only_for_sql,
    vec_sql,
    walk_sql,
)
from ._request import TOLD, SearchRequest

__all__ = [
    "KNOWN_NAMES",
    "NEIGHBOUR_LEADS",
    "NEIGHBOUR_SHARE",
    "SIMILARITY_WEIGHT",
    "WINDOW_SHARE",
    "episodes_statement",
]

SIMILARITY_WEIGHT = 0.35
NEIGHBOUR_LEADS = 20
NEIGHBOUR_SHARE = 0.4
WINDOW_SHARE = 0.4

_L = sql.Literal

# The words of a question written with a capital (``_question.names_in``) that the group
# knows as names (``timestone.known_names``).
KNOWN_NAMES = sql.SQL("SELECT n AS name FROM timestone.known_names(%(names)s::text[]) AS n")


def _filters(req: SearchRequest) -> tuple[sql.Composable, bool]:
    parts: list[sql.Composable] = [held_clause("p", req.as_of)]
    if req.valid_at is not None:
        parts.append(sql.SQL("p.reference_time <= %(valid_at)s::timestamptz"))
    if req.ids is not None:
        parts.append(sql.SQL("p.id = ANY(%(ids)s::uuid[])"))
    told = not req.fact_records
    if told:
        parts.append(sql.SQL("p." + TOLD))
    return sql.SQL(" AND ").join(parts), told


def _neighbour(told: bool, before: bool, as_of: datetime | None) -> sql.Composable:
    """The episode just before (or after) the lead ``l`` in the timeline held at ``as_of``
    (now: the current ones, ``episodes_timeline``, migration 0036; as of a moment, the
    versions held then, ``episodes_timeline_history``, 0044), when it is of the lead's
    source: the same source, source description (a document's title) and saga."""
    return sql.SQL(
        "(SELECT y.version_id FROM (SELECT x.version_id, x.source, x.source_description,"
        " x.saga FROM timestone.episodes AS x WHERE x.group_id = %(g)s"
        " AND {held}{told} AND (x.reference_time, x.id) {cmp}"
        " (l.reference_time, l.id) ORDER BY x.reference_time {dir}, x.id {dir} LIMIT 1) AS y"
        " WHERE y.source = l.source AND y.source_description = l.source_description"
        " AND y.saga IS NOT DISTINCT FROM l.saga)"
    ).format(
        held=held_clause("x", as_of),
        told=sql.SQL(" AND x." + TOLD) if told else sql.SQL(""),
        cmp=sql.SQL("<" if before else ">"),
        dir=sql.SQL("DESC" if before else "ASC"),
    )


def episodes_statement(req: SearchRequest, dimension: int) -> sql.Composed:
    filters, told = _filters(req)
    return sql.SQL(
        "WITH RECURSIVE {fts}, {vec}, {walk},"
        " cand AS (SELECT u.version_id, min(u.fts_rank) AS fts_rank,"
        "  min(u.vec_rank) AS vec_rank, max(u.s) AS s FROM ("
        "  SELECT f.version_id, f.r AS fts_rank, NULL::bigint AS vec_rank, f.s FROM fts AS f"
        "  UNION ALL SELECT v.version_id, NULL::bigint, v.r, NULL::real FROM vec AS v) AS u"
        "  GROUP BY u.version_id),"
        " base AS MATERIALIZED (SELECT cand.version_id, cand.fts_rank, cand.vec_rank, cand.s,"
        "  p.id, p.reference_time, p.source, p.source_description, p.saga,"
        "  greatest(1 - (p.embedding <=> %(vec)s::vector), 0) AS sim"
        "  FROM cand CROSS JOIN LATERAL (SELECT * FROM timestone.episodes AS x"
        "   WHERE x.group_id = %(g)s AND x.version_id = cand.version_id LIMIT 1) AS p"
        "  WHERE {filters}),"
        " scored AS MATERIALIZED (SELECT b.*,"
        "  coalesce(b.s / nullif((SELECT max(m.s) FROM base AS m), 0), 0)"
        "  + {weight} * coalesce((b.sim - (SELECT min(m.sim) FROM base AS m))"
        "   / nullif((SELECT max(m.sim) - min(m.sim) FROM base AS m), 0), 0)"
        "  + {in_window} * coalesce((b.reference_time >= %(window_from)s::timestamptz"
        "   AND b.reference_time < %(window_to)s::timestamptz)::int, 0)"
        "  AS score FROM base AS b),"
        " lead AS (SELECT * FROM scored ORDER BY score DESC, version_id LIMIT {leads}),"
        " near AS (SELECT n.version_id, max({share} * l.score) AS credit FROM lead AS l"
        "  CROSS JOIN LATERAL ({before} UNION ALL {after}) AS n GROUP BY n.version_id),"
        " total AS MATERIALIZED (SELECT coalesce(s.version_id, n.version_id) AS version_id,"
        "  s.fts_rank,"
        "  s.vec_rank, coalesce(s.score, 0) + coalesce(n.credit, 0) AS fused"
        "  FROM scored AS s FULL JOIN near AS n ON n.version_id = s.version_id),"
        " hits AS (SELECT p.id, p.group_id, p.name, {content}, p.source, p.source_description,"
        "  p.reference_time, p.saga, p.idempotency_key, p.created_at, p.expired_at,"
        "  p.document_uri, p.chunk_index, p.char_start, p.char_end, p.llm_calls, p.llm_tokens,"
        "  total.fts_rank, total.vec_rank, p.embedding <=> %(vec)s::vector AS distance,"
        "  {hops} AS hops, {mentions} AS mentions, total.fused::float8 AS fused{embedding}"
        " FROM total CROSS JOIN LATERAL (SELECT * FROM timestone.episodes AS x"
        "  WHERE x.group_id = %(g)s AND x.version_id = total.version_id LIMIT 1) AS p"
        " WHERE {filters}) {kept}"
    ).format(
        fts=fts_sql("episodes", told=told),
        vec=vec_sql("episodes", "p", "embedding", filters, req.as_of, dimension, told=told),
        walk=walk_sql(req),
        filters=filters,
        weight=_L(SIMILARITY_WEIGHT),
        in_window=_L(WINDOW_SHARE),
        leads=_L(NEIGHBOUR_LEADS),
        share=_L(NEIGHBOUR_SHARE),
        before=_neighbour(told, before=True, as_of=req.as_of),
        after=_neighbour(told, before=False, as_of=req.as_of),
        hops=only_for_sql(
            req,
            "node_distance",
            "(SELECT min({hop}) FROM timestone.mentions AS m"
            " WHERE m.group_id = %(g)s AND m.episode_id = p.id AND {held_m})",
            "integer",
            hop=hop_of_mention_sql(),
            held_m=held_clause("m", req.as_of),
        ),
        mentions=only_for_sql(
            req,
            "episode_mentions",
            "(SELECT count(*) FROM timestone.mentions AS m WHERE m.group_id = %(g)s"
            " AND m.episode_id = p.id AND {held_m})",
            "bigint",
            held_m=held_clause("m", req.as_of),
        ),
        embedding=sql.SQL(", p.embedding") if req.embeddings else sql.SQL(""),
        # a prefix of a compressed value is decompressed only as far as it goes
        content=sql.SQL("p.content")
        if req.content_chars is None
        else sql.SQL("left(p.content, %(content_chars)s) AS content"),
        kept=kept_sql("id", req),
    )

"""The database's cut of fused search hits against ``_fusion.rerank``.

A search asks Postgres to gather its candidates with their ranks, order them
by the reranker and send only ``limit`` rows. Here the SQL pieces that do it
run on synthetic candidates with many ties (every candidate in one to four
small ranked lists, few hop and mention values), and the rows that come back
must be exactly the first ``limit`` of what ``rerank`` makes of every
candidate.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

from timestone.search._fusion import Candidate, rerank
from timestone.search._request import prepare_search
from timestone.search._sql import RANKED_LISTS, candidates_sql, fused_sql, kept_sql, top_sql

LISTS = RANKED_LISTS["entities"]  # the scope with the most lists: fts, vec, graph, named
COLUMNS = {"fts": "fts_rank", "vec": "vec_rank", "graph": "graph_rank", "named": "named_rank"}

candidate = st.fixed_dictionaries(
    {
        "lists": st.lists(st.sampled_from(LISTS), min_size=1, max_size=4, unique=True),
        "hops": st.none() | st.integers(0, 2),
        "mentions": st.integers(0, 3),
    }
)


def _database_cut(conn: psycopg.Connection[Any], rows: list[dict[str, Any]], req: Any) -> list[Any]:
    lists = {
        name: sql.SQL(
            "{} (version_id, r) AS (SELECT * FROM unnest({}::uuid[], {}::int8[]))"
        ).format(
            sql.Identifier(name),
            sql.Literal([r["key"] for r in rows if name in r["ranks"]]),
            sql.Literal([r["ranks"][name] for r in rows if name in r["ranks"]]),
        )
        for name in LISTS
    }
    query = sql.SQL(
        "WITH {lists}, {cand}, hits AS (SELECT c.version_id, c.hops, c.mentions,"
        " {fused} AS fused FROM unnest(%(keys)s::uuid[], %(hops)s::int[], %(mentions)s::int[])"
        " AS c(version_id, hops, mentions) JOIN cand ON cand.version_id = c.version_id) {kept}"
    ).format(
        lists=sql.SQL(", ").join(lists.values()),
        cand=candidates_sql("entities"),
        fused=fused_sql("entities"),
        kept=kept_sql("version_id", req),
    )
    cur = conn.execute(
        query,
        {
            "keys": [r["key"] for r in rows],
            "hops": [r["hops"] for r in rows],
            "mentions": [r["mentions"] for r in rows],
            "keep": req.limit,
        },
    )
    return [row[0] for row in cur.fetchall()]


@settings(max_examples=150, deadline=None)
@given(
    candidates=st.lists(candidate, min_size=1, max_size=14),
    method=st.sampled_from(["rrf", "node_distance", "episode_mentions"]),
    limit=st.integers(1, 14),
)
def test_the_database_cut_is_the_head_of_rerank(
    dsn: str, candidates: list[dict[str, Any]], method: str, limit: int
) -> None:
    rows: list[dict[str, Any]] = []
    taken: dict[str, int] = dict.fromkeys(LISTS, 0)
    for c in candidates:
        ranks: dict[str, int] = {}
        for name in c["lists"]:  # ranks are unique in a list, small, so sums tie often
            taken[name] += 1
            ranks[name] = taken[name]
        rows.append(
            {"key": uuid.uuid4(), "ranks": ranks, "hops": c["hops"], "mentions": c["mentions"]}
        )
    req = prepare_search("anything", reranker=method, limit=limit)
    with psycopg.connect(dsn) as conn:
        got = _database_cut(conn, rows, req)
    expected = rerank(
        [
            Candidate(
                r["key"],
                {COLUMNS[n]: r["ranks"][n] for n in LISTS if n in r["ranks"]},
                hops=r["hops"],
                mentions=r["mentions"],
            )
            for r in rows
        ],
        method,
        limit,
    )
    assert got == [c.key for c in expected]


FACT_LISTS = RANKED_LISTS["facts"]


@settings(max_examples=100, deadline=None)
@given(
    lists=st.lists(
        st.lists(st.sampled_from(FACT_LISTS), min_size=1, max_size=3, unique=True),
        min_size=1,
        max_size=14,
    ),
    limit=st.integers(1, 14),
)
def test_the_early_cut_of_facts_is_the_head_of_rrf(
    dsn: str, lists: list[list[str]], limit: int
) -> None:
    """A facts search fused by reciprocal rank without filters reads only the rows it
    keeps: ``top`` (ranks alone) must hold the head of ``rerank`` over every candidate."""
    taken: dict[str, int] = dict.fromkeys(FACT_LISTS, 0)
    rows: list[tuple[uuid.UUID, dict[str, int]]] = []
    for names in lists:
        ranks: dict[str, int] = {}
        for name in names:
            taken[name] += 1
            ranks[name] = taken[name]
        rows.append((uuid.uuid4(), ranks))
    req = prepare_search("anything", limit=limit)
    ranked = sql.SQL(", ").join(
        sql.SQL("{} (version_id, r) AS (SELECT * FROM unnest({}::uuid[], {}::int8[]))").format(
            sql.Identifier(name),
            sql.Literal([k for k, r in rows if name in r]),
            sql.Literal([r[name] for _, r in rows if name in r]),
        )
        for name in FACT_LISTS
    )
    query = sql.SQL("WITH {lists}, {cand},{top} x AS (SELECT 1) SELECT version_id FROM top").format(
        lists=ranked, cand=candidates_sql("facts"), top=top_sql(req)
    )
    with psycopg.connect(dsn) as conn:
        got = {row[0] for row in conn.execute(query, {"keep": limit}).fetchall()}
    expected = rerank([Candidate(k, {COLUMNS[n]: r[n] for n in r}) for k, r in rows], "rrf", limit)
    assert got == {c.key for c in expected}

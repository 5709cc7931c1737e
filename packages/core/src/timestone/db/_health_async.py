"""How well each HNSW index finds the rows it holds: a wear signal.

A healthy HNSW graph reaches every element it holds; churn (rows replaced,
purged and vacuumed) relinks the graph around removed elements, and elements it
reaches late, or never, are what a rebuild restores. ``vector_index_health``
asks each index for a sample of its own rows, each by its own vector, within its
own group, as a search reads the index (the keyed order, ``hnsw.ef_search`` 40,
iterative scans), and reports the share found among the ten nearest (the row
itself, or a row of the same vector). The benchmark databases' indexes, just
rebuilt, found 0.955 to 1.0 of the facts' rows and 0.91 to 0.97 of the entity
names' at 95k and 950k facts (``bench.reindex``; 200 rows are good to about
three points); a share that falls as the database lives says the graph has worn
and ``rebuild_vector_indexes`` will pay.

The sample is drawn by ``TABLESAMPLE BERNOULLI`` at a rate from the index's row
estimate; should that draw nothing (a small sample, or an estimate above the rows
there are), it is drawn from every row the index holds, so that an index with rows
always has a figure. The probes run as the schema owner (row level security does not
bind it) in one read-only repeatable-read transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import sql

from .._vectors import keyed
from ..errors import InvalidInput
from ..write._bulk_async import check_index_names
from ._database_async import Conn, connect_owner, wrap_db_error
from ._embedding_async import VECTOR_INDEXES

__all__ = ["HEALTH_SAMPLE", "vector_index_health"]

HEALTH_SAMPLE = 200  # rows probed per index by default
# the Bernoulli rate draws this many times the sample from the rows the index holds
_OVERSAMPLE = 3.0
_MAX_SAMPLE = 10_000
_NEAREST = 10
# a row whose vector is the probe's (a copy of the sentence in the same group) found in
# its place: the index keeps equal vectors in one element
_SAME = 1e-6


def _check_sample(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= _MAX_SAMPLE:
        raise InvalidInput(
            f"sample must be an integer from 1 to {_MAX_SAMPLE:,}, got {value!r:.80}"
        )
    return value


async def vector_index_health(
    dsn: str, *, indexes: Sequence[str] | None = None, sample: int = HEALTH_SAMPLE
) -> dict[str, float | None]:
    """For each named HNSW index (all with None), the share of ``sample`` of its rows
    that it returns among the ten nearest to their own vector; None for an index that
    holds no rows or does not exist (a bulk load under way). Needs the schema owner."""
    names = check_index_names(indexes)
    sample = _check_sample(sample)
    conn = await connect_owner(dsn)
    async with conn:
        try:
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                await conn.execute(
                    "SELECT set_config('hnsw.ef_search', '40', true),"
                    " set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                    " set_config('enable_sort', 'off', true),"
                    " set_config('enable_seqscan', 'off', true)"
                )
                return {name: await _probe(conn, name, sample) for name in names}
        except psycopg.Error as exc:
            raise wrap_db_error(exc, "probing the vector indexes") from exc


async def _probe(conn: Conn, name: str, sample: int) -> float | None:
    """One statement: the sample, and for each of its rows the index's ten nearest (a
    lateral index scan ordered by the row's own keyed vector)."""
    _, table, column, held, seed = next(spec for spec in VECTOR_INDEXES if spec.name == name)
    cur = await conn.execute(
        "SELECT greatest(i.reltuples, 0) AS held, greatest(t.reltuples, 0) AS rows,"
        " a.atttypmod AS dimension FROM pg_class AS i, pg_class AS t, pg_attribute AS a"
        " WHERE i.oid = to_regclass('timestone.' || %s) AND t.oid = to_regclass('timestone.'"
        " || %s) AND a.attrelid = t.oid AND a.attname = %s",
        (name, table, column),
    )
    row = await cur.fetchone()
    if row is None:  # no such index: a bulk load under way
        return None
    # each row of the table is drawn at a rate that gives the sample three times over from
    # the rows the index holds (so that a stale estimate still fills it); all of them
    # where the server has no estimate yet. An empty draw is made again from every row
    # the index holds: a sample of one comes back empty about one time in twenty (e^-3)
    indexed = row["held"] or row["rows"]
    percent = min(100.0, 100.0 * _OVERSAMPLE * sample / indexed) if indexed else 100.0
    t, c, dimension = sql.Identifier(table), sql.Identifier(column), int(row["dimension"])
    # the predicate's columns are unqualified: each resolves to the nearest FROM
    cur = await conn.execute(
        sql.SQL(
            "WITH b AS MATERIALIZED (SELECT version_id, group_id, {c} AS v FROM timestone.{t}"
            " TABLESAMPLE BERNOULLI (%(percent)s) WHERE {c} IS NOT NULL AND {held}"
            " ORDER BY random() LIMIT %(sample)s),"
            # the second draw runs only when the first is empty (a one-time filter)
            " s AS MATERIALIZED (SELECT * FROM b UNION ALL (SELECT version_id, group_id,"
            " {c} AS v FROM timestone.{t} WHERE {c} IS NOT NULL AND {held}"
            " AND NOT EXISTS (SELECT FROM b) ORDER BY random() LIMIT %(sample)s))"
            " SELECT count(*) AS n, count(*) FILTER (WHERE x.found) AS found FROM s"
            " CROSS JOIN LATERAL (SELECT coalesce(bool_or(f.version_id = s.version_id"
            " OR f.d <= {same}), false) AS found FROM (SELECT version_id, {c} <=> s.v AS d"
            " FROM timestone.{t} WHERE group_id = s.group_id AND {held}"
            " ORDER BY {near} <=> {query} LIMIT {k}) AS f) AS x"
        ).format(
            c=c,
            t=t,
            held=sql.SQL(held),
            same=sql.Literal(_SAME),
            near=keyed(c, sql.Identifier("group_id"), dimension, seed=seed),
            query=keyed(sql.SQL("s.v"), sql.SQL("s.group_id"), dimension, seed=seed),
            k=sql.Literal(_NEAREST),
        ),
        {"percent": percent, "sample": sample},
    )
    counted = await cur.fetchone()
    if counted is None or not counted["n"]:
        return None
    return counted["found"] / counted["n"]

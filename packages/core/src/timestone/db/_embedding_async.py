"""The embedder a database is bound to, its vector columns and their HNSW indexes, and
the move of every stored vector to another embedder."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any, LiteralString, NamedTuple

import psycopg
from psycopg import sql

from .._compat import asleep
from .._vectors import TOLD_SEED, index_opclass, keyed
from ..embedders import Embedder, aembed_vectors
from ..errors import (
    DatabaseError,
    EmbedderMismatch,
    TimestoneError,
)
from ..items._reembed_async import check_item_texts, reembed_items
from ..ontology import Ontology
from ..search._request import TOLD
from ..write._ingest_async import facts_text, prepare_facts
from ._database_async import BULK_LOCK, MIGRATE_LOCK, Conn, connect_owner, wrap_db_error
from ._index_build import build_memory_kb, need_kb, row_bytes, warn_spill

__all__ = [
    "LOADER_CHECK_INTERVAL",
    "LOAD_INDEXES",
    "REEMBED_SOURCES",
    "VECTOR_COLUMNS",
    "VECTOR_INDEXES",
    "VectorIndex",
    "bind_embedder",
    "build_load_indexes",
    "build_vector_indexes",
    "bulk_loading",
    "describe",
    "drop_load_indexes",
    "drop_vector_indexes",
    "embedded_text",
    "load_index_name",
    "reembed",
    "set_build_memory",
    "stored_embedder",
    "type_new_vectors",
    "type_vectors",
    "vector_dimensions",
]


# The columns the memory's embedder fills: typed vector(d) and HNSW-indexed by the binding.
VECTOR_COLUMNS = (
    ("episodes", "embedding"),
    ("entities", "name_embedding"),
    ("facts", "embedding"),
    ("communities", "name_embedding"),
)


class VectorIndex(NamedTuple):
    """An HNSW index: its column, keyed by group from ``seed`` (``_vectors.keyed``), for
    the rows ``held``."""

    name: str
    table: str
    column: str
    held: LiteralString
    seed: int = 1


# The HNSW indexes on them. Current rows only; facts in two, the open periods a search of
# the present reads and the closed ones history reads, so that a search of the present
# never walks past closed periods in the graph. The told episodes (not the records of
# structured facts) in one more, which ``context`` reads: on seeds of their own, so that
# no plan takes the index of every episode for it, nor this one for that.
VECTOR_INDEXES = (
    VectorIndex("episodes_embedding_hnsw", "episodes", "embedding", "expired_at IS NULL"),
    VectorIndex(
        "episodes_told_embedding_hnsw",
        "episodes",
        "embedding",
        "expired_at IS NULL AND " + TOLD,
        TOLD_SEED,
    ),
    VectorIndex("entities_name_embedding_hnsw", "entities", "name_embedding", "expired_at IS NULL"),
    VectorIndex(
        "facts_embedding_hnsw", "facts", "embedding", "expired_at IS NULL AND invalid_at IS NULL"
    ),
    VectorIndex(
        "facts_embedding_closed_hnsw",
        "facts",
        "embedding",
        "expired_at IS NULL AND invalid_at IS NOT NULL",
    ),
    VectorIndex(
        "communities_name_embedding_hnsw", "communities", "name_embedding", "expired_at IS NULL"
    ),
)


# Indexes of facts that serve reads (history, the walk, closing times, full text) and that
# no write reads: a bulk load drops them with the HNSW indexes and builds them at its end,
# where a build from the finished table costs a fraction of an insert per row. Each is
# written as the server prints it (``pg_get_indexdef``); a test holds them to the schema.
LOAD_INDEXES = (
    "CREATE INDEX facts_history_source ON timestone.facts"
    " USING btree (group_id, source_id, created_at)",
    "CREATE INDEX facts_history_target ON timestone.facts"
    " USING btree (group_id, target_id, created_at)",
    "CREATE INDEX facts_source_recent ON timestone.facts"
    " USING btree (group_id, source_id, valid_at) WHERE (expired_at IS NULL)",
    "CREATE INDEX facts_target_recent ON timestone.facts"
    " USING btree (group_id, target_id, valid_at) WHERE (expired_at IS NULL)",
    "CREATE INDEX facts_created ON timestone.facts"
    " USING btree (group_id, created_at, id) WHERE (expired_at IS NULL)",
    "CREATE INDEX facts_closing ON timestone.facts USING btree (group_id, invalid_at)"
    " INCLUDE (version_id) WHERE ((expired_at IS NULL) AND (invalid_at IS NOT NULL))",
    "CREATE INDEX facts_fts_open ON timestone.facts USING gin (fts)"
    " WITH (gin_pending_list_limit='256', fastupdate=off)"
    " WHERE ((expired_at IS NULL) AND (invalid_at IS NULL))",
    "CREATE INDEX facts_fts_closed ON timestone.facts USING gin (fts)"
    " WITH (gin_pending_list_limit='256', fastupdate=off)"
    " WHERE ((expired_at IS NULL) AND (invalid_at IS NOT NULL))",
)


async def stored_embedder(conn: Conn) -> dict[str, Any] | None:
    cur = await conn.execute("SELECT value FROM timestone.meta WHERE key = 'embedder'")
    row = await cur.fetchone()
    return dict(row["value"]) if row is not None else None


async def type_vectors(conn: Conn, dimension: int) -> None:
    await drop_vector_indexes(conn)
    for table, column in VECTOR_COLUMNS:
        await conn.execute(
            sql.SQL("ALTER TABLE timestone.{} ALTER COLUMN {} TYPE vector({}) USING NULL").format(
                sql.Identifier(table), sql.Identifier(column), sql.Literal(dimension)
            )
        )


async def type_new_vectors(conn: Conn, dimension: int) -> None:
    cur = await conn.execute(
        "SELECT c.relname AS t, a.attname AS c FROM pg_attribute AS a"
        " JOIN pg_class AS c ON c.oid = a.attrelid"
        " WHERE c.relnamespace = 'timestone'::regnamespace AND a.atttypmod = -1"
        " AND a.atttypid = 'vector'::regtype AND NOT a.attisdropped"
    )
    untyped = {(row["t"], row["c"]) for row in await cur.fetchall()}
    for table, column in VECTOR_COLUMNS:
        if (table, column) in untyped:
            await conn.execute(
                sql.SQL(
                    "ALTER TABLE timestone.{t} ALTER COLUMN {c}"
                    " TYPE vector({d}) USING {c}::vector({d})"
                ).format(
                    t=sql.Identifier(table), c=sql.Identifier(column), d=sql.Literal(dimension)
                )
            )
    if not await bulk_loading(conn):  # a bulk load builds them when it ends
        await build_load_indexes(conn)
        await build_vector_indexes(conn)


async def vector_dimensions(conn: Conn) -> dict[tuple[str, str], int]:
    """(table, column) -> dimension of each typed vector column of the schema."""
    cur = await conn.execute(
        "SELECT c.relname AS t, a.attname AS c, a.atttypmod AS d FROM pg_attribute AS a"
        " JOIN pg_class AS c ON c.oid = a.attrelid"
        " WHERE c.relnamespace = 'timestone'::regnamespace AND a.atttypmod > 0"
        " AND a.atttypid = 'vector'::regtype AND NOT a.attisdropped"
    )
    return {(row["t"], row["c"]): int(row["d"]) for row in await cur.fetchall()}


async def build_vector_indexes(conn: Conn, *, size: bool = True) -> None:
    """Build the HNSW indexes that are missing (all of them on a new binding), each on
    its column keyed by group (``_vectors.keyed``) at the column's dimension, in the
    caller's transaction. ``size``: give the build the memory its largest graph needs
    (``_bulk.set_build_memory``), for the transaction; False where the caller set it."""
    cur = await conn.execute(
        "SELECT n FROM unnest(%s::text[]) AS n WHERE to_regclass('timestone.' || n) IS NULL",
        ([name for name, *_ in VECTOR_INDEXES],),
    )
    missing = {row["n"] for row in await cur.fetchall()}
    if not missing:
        return
    if size:
        await set_build_memory(conn, sorted(missing), None, local=True)
    dimensions = await vector_dimensions(conn)
    for name, table, column, held, seed in VECTOR_INDEXES:
        if name not in missing:
            continue
        dimension = dimensions.get((table, column))
        if dimension is None:
            raise DatabaseError(
                f"timestone.{table}.{column} has no dimension: bind an embedder first"
            )
        await conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {} ON timestone.{} USING hnsw ({} {}) WHERE {}"
            ).format(
                sql.Identifier(name),
                sql.Identifier(table),
                sql.SQL("({})").format(
                    keyed(sql.Identifier(column), sql.Identifier("group_id"), dimension, seed=seed)
                ),
                index_opclass(dimension),
                sql.SQL(held),
            )
        )


def load_index_name(definition: str) -> str:
    return definition.split()[2]


async def build_load_indexes(conn: Conn) -> None:
    """Build the read indexes a bulk load dropped (those missing; one query to find them)."""
    cur = await conn.execute(
        "SELECT n FROM unnest(%s::text[]) AS n WHERE to_regclass('timestone.' || n) IS NULL",
        ([load_index_name(d) for d in LOAD_INDEXES],),
    )
    missing = {row["n"] for row in await cur.fetchall()}
    for definition in LOAD_INDEXES:
        if load_index_name(definition) in missing:
            await conn.execute(sql.SQL(definition))  # pyright: ignore[reportArgumentType]  # a constant above


async def drop_load_indexes(conn: Conn) -> None:
    for definition in LOAD_INDEXES:
        await conn.execute(
            sql.SQL("DROP INDEX IF EXISTS timestone.{}").format(
                sql.Identifier(load_index_name(definition))
            )
        )


async def drop_vector_indexes(conn: Conn) -> None:
    for name, *_ in VECTOR_INDEXES:
        await conn.execute(
            sql.SQL("DROP INDEX IF EXISTS timestone.{}").format(sql.Identifier(name))
        )


def describe(info: dict[str, Any]) -> str:
    return f"{info['name']} ({info['dimension']} dimensions)"


async def bind_embedder(dsn: str, embedder: Embedder) -> None:
    """Record the embedder in a new database and type its vector columns; refuse another one."""
    wanted = {"name": embedder.name, "dimension": embedder.dimension}
    conn = await connect_owner(dsn)
    async with conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
        try:
            stored = await stored_embedder(conn)
            if stored is None:
                async with conn.transaction():
                    await type_vectors(conn, embedder.dimension)
                    await build_vector_indexes(conn)
                    await conn.execute(
                        "INSERT INTO timestone.meta (key, value) VALUES ('embedder', %s)",
                        (json.dumps(wanted),),
                    )
            elif stored == wanted:
                # a migration may have added a vector column since the binding: type it now
                async with conn.transaction():
                    await type_new_vectors(conn, embedder.dimension)
            else:
                raise EmbedderMismatch(
                    f"this database was built with the embedder {describe(stored)}, not "
                    f"{describe(wanted)}. Open it with the embedder it was built with, or move "
                    "it to the new one with Memory.open(..., embedder=new, reembed=True) "
                    "(or memory.reembed(new)), which re-embeds every stored text"
                )
        except psycopg.Error as exc:
            raise wrap_db_error(exc, "recording the embedder") from exc
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))


# The stored vectors of the embedder and what each was embedded from: the columns a
# write read its text from (``embedded_text`` makes it again). The items' vectors move
# too (``items._reembed``).
REEMBED_SOURCES = (
    ("episodes", "embedding", ("content", "source", "reference_time")),
    ("entities", "name_embedding", ("name",)),
    ("facts", "embedding", ("fact",)),
    ("communities", "name_embedding", ("name",)),
)


def embedded_text(columns: Sequence[str], row: Mapping[str, Any]) -> str:
    """The text the write that stored ``row`` embedded, from its ``columns`` (those of
    ``REEMBED_SOURCES``): the name, the fact, or the episode's content; for a record of an
    ``add_facts`` call (source 'facts'), its facts' sentences joined as that call joined
    them, each made again by the ingestion's ``prepare`` from the stored JSON. A record
    whose JSON is of another shape keeps its content."""
    text = str(row[columns[0]])
    if row.get("source") != "facts":
        return text
    try:
        _, prepared = prepare_facts(Ontology(), json.loads(text), row["reference_time"])
    except (ValueError, TimestoneError):
        return text
    return facts_text(prepared)


async def reembed(dsn: str, embedder: Embedder, batch_size: int = 512) -> int:
    """Move every stored vector, of every group and every version, to ``embedder``: each
    embedded again from the text its write embedded (``embedded_text``), the items' from
    the texts their puts kept (``items._reembed``, which refuses first when a current
    item's are not known).

    One transaction, as the schema owner, whom row level security does not
    apply to (migration 0018). Returns the number of rows re-embedded.
    """
    wanted = {"name": embedder.name, "dimension": embedder.dimension}
    conn = await connect_owner(dsn)
    total = 0
    async with conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
        try:
            async with conn.transaction():
                await check_item_texts(conn)
                await type_vectors(conn, embedder.dimension)
                for table, column, columns in REEMBED_SOURCES:
                    ident = sql.Identifier(table)
                    cur = await conn.execute(
                        sql.SQL("SELECT group_id, version_id, {} FROM timestone.{}").format(
                            sql.SQL(", ").join(map(sql.Identifier, columns)), ident
                        )
                    )
                    rows = await cur.fetchall()
                    for start in range(0, len(rows), batch_size):
                        batch = rows[start : start + batch_size]
                        texts = [embedded_text(columns, r) for r in batch]
                        vectors = await aembed_vectors(embedder, texts)
                        async with conn.cursor() as wcur:
                            await wcur.executemany(
                                sql.SQL(
                                    "UPDATE timestone.{} SET {} = %s::vector "
                                    "WHERE group_id = %s AND version_id = %s"
                                ).format(ident, sql.Identifier(column)),
                                [
                                    (str(vec), r["group_id"], r["version_id"])
                                    for r, vec in zip(batch, vectors, strict=True)
                                ],
                            )
                        total += len(batch)
                total += await reembed_items(conn, embedder, batch_size)
                await build_vector_indexes(conn)
                await conn.execute(
                    "INSERT INTO timestone.meta (key, value) VALUES ('embedder', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    (json.dumps(wanted),),
                )
        except psycopg.Error as exc:
            raise wrap_db_error(exc, "re-embedding") from exc
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))
    return total


# How often the server session of a bulk load (or an index rebuild) checks, during a
# statement, that its client is still there: a loader that dies in its final build is
# cancelled within it, and releases ``BULK_LOCK``, instead of building on for minutes
# (and rolling back). ``bulk_loading`` waits for such a holder up to ``_LOADER_WAIT_S``.
LOADER_CHECK_INTERVAL = "1s"
_LOADER_WAIT_S = 5.0
_LOADER_POLL_S = 0.05


async def _sized_memory(conn: Conn, names: Sequence[str]) -> str:
    """``build_memory_kb`` for the named vector indexes, from the rows each would hold now
    (one scan a table, counting each index's rows) and the server's settings, as a
    setting."""
    dimensions = await vector_dimensions(conn)
    per_table: dict[str, list[sql.Composable]] = {}
    for name, table, column, held, _ in VECTOR_INDEXES:
        dimension = dimensions.get((table, column))
        if name in names and dimension is not None:
            per_table.setdefault(table, []).append(
                sql.SQL("{}::bigint * count(*) FILTER (WHERE {})").format(
                    sql.Literal(row_bytes(dimension)),
                    sql.SQL(held),
                )
            )
    counts = [
        sql.SQL("SELECT greatest({}) FROM timestone.{}").format(
            sql.SQL(", ").join(needs), sql.Identifier(table)
        )
        for table, needs in per_table.items()
    ]
    cur = await conn.execute(
        sql.SQL(
            "SELECT (SELECT coalesce(max(b), 0) FROM ({}) AS n (b)) AS need,"
            " pg_size_bytes(current_setting('maintenance_work_mem')) AS current,"
            " pg_size_bytes(current_setting('shared_buffers')) AS buffers"
        ).format(sql.SQL(" UNION ALL ").join(counts) if counts else sql.SQL("SELECT 0"))
    )
    row = await cur.fetchone()
    if row is None:  # pragma: no cover - a SELECT without FROM returns its row
        raise DatabaseError("sizing the vector index build returned no row")
    kb = build_memory_kb(
        need_kb(int(row["need"])),
        int(row["current"]) // 1024,
        int(row["buffers"]) // 1024,
    )
    return f"{math.ceil(kb / 1024)}MB"


async def bulk_loading(conn: Conn) -> bool:
    """Whether a bulk load (or an index rebuild) holds ``BULK_LOCK``.

    A loader that dies inside a statement (its final index build) holds the lock until
    its server session notices: within ``LOADER_CHECK_INTERVAL`` (the loader's
    ``client_connection_check_interval``), then the statement is cancelled and the lock
    released. A holder in a statement or a transaction is waited for, up to
    ``_LOADER_WAIT_S``; one that ends meanwhile was no load, and its indexes are built
    here. A live loader writing (its own session idle between its statements) or
    building past the bound is left to build them itself."""
    deadline = time.monotonic() + _LOADER_WAIT_S
    while True:
        cur = await conn.execute(
            "SELECT coalesce(a.state, '') AS state FROM pg_locks AS l"
            " LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND l.classid = (%(k)s::bigint >> 32)::oid"
            " AND l.objid = (%(k)s::bigint & 4294967295)::oid AND l.objsubid = 1",
            {"k": BULK_LOCK},
        )
        row = await cur.fetchone()
        if row is None:
            return False
        if row["state"] == "idle" or time.monotonic() >= deadline:
            return True
        await asleep(_LOADER_POLL_S)


async def set_build_memory(
    conn: Conn, names: Sequence[str], memory: str | None, *, local: bool
) -> None:
    """Give the builds of the named indexes ``memory`` (sized to them when None) for the
    transaction (``local``) or the session, and have a graph that outgrows it logged."""
    memory = memory if memory is not None else await _sized_memory(conn, names)
    await conn.execute("SELECT set_config('maintenance_work_mem', %s, %s)", (memory, local))
    conn.add_notice_handler(warn_spill(memory))

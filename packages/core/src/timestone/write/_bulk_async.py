"""Bulk loading: indexes built once after a load, not row by row during it.

An HNSW index grows one insert at a time at a cost of milliseconds per row
(each insert searches the graph and rewrites its neighbours' pages); built
from the finished table in memory it costs a fraction of that. ``bulk_load``
drops the HNSW indexes of the vector columns, and the indexes of facts that
only reads use (``LOAD_INDEXES``: history, the walk, closing times, full
text), lets the caller write, and builds them again on the way out, whatever
happened inside.

It acts on the whole database, every group: while it runs, vector searches are
exact scans and history reads, the walk and full-text search scan more (all
correct, slower), and the rebuild holds a lock that makes other
writers to the indexed tables wait until it is done. It is for an initial
import or a migration window, run as the schema owner (the DSN's user, like
migrations). One bulk load at a time: a session advisory lock says who has it,
and ``Memory.open`` does not rebuild the indexes while it is held. A loader
that dies mid-load releases the lock with its connection; the next
``Memory.open`` builds the missing indexes. One that dies inside a statement
(its final index build) is cancelled by the server within a second (its
session checks that its client is there, ``client_connection_check_interval``),
and an open that finds its lock still held by a session in a statement waits
a few seconds for it to end.

``rebuild_vector_indexes`` rebuilds HNSW indexes in place, for a database whose
graphs churn has worn (rows replaced, purged and vacuumed: a vacuum unlinks
dead elements and relinks their neighbours, and the graph it leaves is not the
one a build makes). ``REINDEX INDEX CONCURRENTLY`` builds each anew beside the
old one while reads and writes go on, then swaps them; it takes the same lock
as a bulk load, so the two never overlap.

pgvector builds an HNSW graph in memory while it fits in ``maintenance_work_mem`` and
builds the rest on disk, where each row costs several times as much (the open
facts' index of 30k facts: 9.7 s in memory, 28.4 s with 16 MB, which held 9,468 of
them). Every build of them sizes the setting to the largest graph it builds
(``_index_build.build_memory_kb``) unless given one, and logs a warning when a graph outgrows it:
these two calls', and those of ``Memory.open`` (an index a dead load left missing)
and of re-embedding (``_db.build_vector_indexes``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager, suppress
from typing import LiteralString, cast

import psycopg
from psycopg import sql

from ..db._database_async import BULK_LOCK, Conn, connect_owner, wrap_db_error
from ..db._embedding_async import (
    LOADER_CHECK_INTERVAL,
    VECTOR_INDEXES,
    build_load_indexes,
    build_vector_indexes,
    bulk_loading,
    drop_load_indexes,
    drop_vector_indexes,
    set_build_memory,
)
from ..db._index_build import check_memory, check_workers
from ..errors import ConflictError, DatabaseError, InvalidInput, TimestoneError

__all__ = [
    "BULK_LOCK",
    "bulk_load",
    "bulk_loading",
    "check_index_names",
    "rebuild_vector_indexes",
    "set_build_memory",
]


_VECTOR_INDEX_NAMES = tuple(name for name, *_ in VECTOR_INDEXES)
# the tables whose indexes a load drops and builds, in the order writers reach them (a
# write's episode first): locked in that order, all at once, before the first index is
# touched, so that a writer holding one is waited for, never waiting on the load in turn
_INDEXED_TABLES = tuple(
    t
    for t in ("episodes", "entities", "mentions", "assertions", "facts", "communities", "items")
    if t == "facts" or any(index.table == t for index in VECTOR_INDEXES)
)


async def _lock_tables(conn: Conn, mode: LiteralString) -> None:
    await conn.execute(
        sql.SQL("LOCK TABLE {} IN {} MODE").format(
            sql.SQL(", ").join(sql.Identifier("timestone", t) for t in _INDEXED_TABLES),
            sql.SQL(mode),
        )
    )


def check_index_names(value: object) -> tuple[str, ...]:
    """The vector indexes named (every one for None), each once, in the order given."""
    if value is None:
        return _VECTOR_INDEX_NAMES
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidInput(
            f"indexes must be a list of vector index names, got {value!r:.80}; "
            f"the vector indexes are {', '.join(_VECTOR_INDEX_NAMES)}"
        )
    names: list[str] = []
    for item in cast("Sequence[object]", value):
        if not isinstance(item, str) or item not in _VECTOR_INDEX_NAMES:
            raise InvalidInput(
                f"{item!r:.80} is not a vector index of timestone; "
                f"the vector indexes are {', '.join(_VECTOR_INDEX_NAMES)}"
            )
        if item not in names:
            names.append(item)
    if not names:
        raise InvalidInput(
            f"indexes is empty: name at least one of {', '.join(_VECTOR_INDEX_NAMES)}, "
            "or pass None for all"
        )
    return tuple(names)


def _owner_error(exc: psycopg.Error, doing: str) -> TimestoneError:
    """The error of a step that only the schema's owner may take: who it takes when the
    server refused the user, the server's reason otherwise."""
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return DatabaseError(
            f"{doing} takes the owner of the timestone schema; connect as that user: "
            f"{str(exc).strip()}"
        )
    return wrap_db_error(exc, doing)


@asynccontextmanager
async def _holding_load_lock(dsn: str, busy: str) -> AsyncGenerator[Conn]:
    """An owner's connection holding the bulk-load lock for the block; ``ConflictError``
    (``busy``) when another session has it."""
    conn = await connect_owner(dsn)
    async with conn:
        # a loader that dies in a statement is cancelled within the interval
        with suppress(psycopg.errors.InvalidParameterValue):  # a server without the check
            await conn.execute(
                "SELECT set_config('client_connection_check_interval', %s, false)",
                (LOADER_CHECK_INTERVAL,),
            )
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s) AS ok", (BULK_LOCK,))
        got = await cur.fetchone()
        if got is None or not got["ok"]:
            raise ConflictError(busy)
        try:
            yield conn
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (BULK_LOCK,))


async def _build_settings(
    conn: Conn, names: Sequence[str], memory: str | None, workers: int | None, *, local: bool
) -> None:
    await set_build_memory(conn, names, memory, local=local)
    if workers is not None:
        await conn.execute(
            "SELECT set_config('max_parallel_maintenance_workers', %s, %s)", (str(workers), local)
        )


async def rebuild_vector_indexes(
    dsn: str,
    *,
    indexes: Sequence[str] | None = None,
    maintenance_work_mem: str | None = None,
    workers: int | None = None,
) -> dict[str, float]:
    """Rebuild the named HNSW indexes (all of them with None) by ``REINDEX INDEX
    CONCURRENTLY``, one after the other; return the seconds each took, in order.

    Reads and writes go on meanwhile. A rebuild that failed leaves an invalid copy
    (``<name>_ccnew``, or ``<name>_ccold`` if it failed while dropping the old index)
    beside the index it was rebuilding; the next call drops it first.
    An index that is missing (a bulk load that died before its end) is built as
    ``Memory.open`` builds it: with any other missing one, at once, holding off writes to
    its table while it builds. Needs the schema owner, like a bulk load, and not during
    one (``ConflictError``)."""
    names = check_index_names(indexes)
    memory = check_memory(maintenance_work_mem)
    workers = check_workers(workers)
    async with _holding_load_lock(
        dsn,
        "a bulk load or another index rebuild is running on this database; wait for it to finish",
    ) as conn:
        try:
            return await _reindex(conn, names, memory, workers)
        except psycopg.Error as exc:
            raise _owner_error(exc, "rebuilding the vector indexes") from exc


async def _reindex(
    conn: Conn, names: tuple[str, ...], memory: str | None, workers: int | None
) -> dict[str, float]:
    await _build_settings(conn, names, memory, workers, local=False)
    cur = await conn.execute(
        "SELECT c.relname AS name FROM pg_class AS c"
        " JOIN pg_index AS i ON i.indexrelid = c.oid"
        " WHERE c.relnamespace = 'timestone'::regnamespace AND (c.relname = ANY(%(n)s)"
        " OR (NOT i.indisvalid AND c.relname LIKE ANY(%(left)s)))",
        {"n": list(names), "left": [f"{n}\\_cc{s}%" for n in names for s in ("new", "old")]},
    )
    found = {row["name"] for row in await cur.fetchall()}
    for leftover in sorted(n for n in found if n not in names):
        await conn.execute(
            sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS timestone.{}").format(
                sql.Identifier(leftover)
            )
        )
    took: dict[str, float] = {}
    for name in names:
        started = time.perf_counter()
        if name in found:
            await conn.execute(
                sql.SQL("REINDEX INDEX CONCURRENTLY timestone.{}").format(sql.Identifier(name))
            )
        else:
            async with conn.transaction():
                await build_vector_indexes(conn, size=False)
        took[name] = time.perf_counter() - started
    return took


@asynccontextmanager
async def bulk_load(
    dsn: str, *, maintenance_work_mem: str | None = None, workers: int | None = None
) -> AsyncGenerator[None]:
    """Drop the HNSW indexes, yield, build them again (see the module's docstring)."""
    memory = check_memory(maintenance_work_mem)
    workers = check_workers(workers)
    async with _holding_load_lock(
        dsn,
        "another bulk load or an index rebuild is running on this database; wait for it "
        "to finish (a bulk load's indexes are rebuilt when it ends)",
    ) as conn:
        try:
            async with conn.transaction():
                await _lock_tables(conn, "ACCESS EXCLUSIVE")
                await drop_vector_indexes(conn)
                await drop_load_indexes(conn)
        except psycopg.Error as exc:
            raise _owner_error(exc, "starting a bulk load (dropping the indexes)") from exc
        try:
            yield
        finally:
            await _rebuild(conn, memory, workers)


async def _rebuild(conn: Conn, memory: str | None, workers: int | None) -> None:
    try:
        async with conn.transaction():
            await _lock_tables(conn, "SHARE")
            await _build_settings(conn, _VECTOR_INDEX_NAMES, memory, workers, local=True)
            await build_load_indexes(conn)
            await build_vector_indexes(conn, size=False)
    except psycopg.Error as exc:
        raise wrap_db_error(
            exc, "rebuilding the vector indexes after a bulk load (Memory.open retries)"
        ) from exc

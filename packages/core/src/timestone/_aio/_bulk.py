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
``Memory.open`` builds the missing indexes.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import psycopg

from ..errors import ConflictError, DatabaseError, InvalidInput
from ._db import (
    BULK_LOCK,
    Conn,
    build_load_indexes,
    build_vector_indexes,
    connect_owner,
    drop_load_indexes,
    drop_vector_indexes,
    wrap_db_error,
)

__all__ = ["BULK_LOCK", "bulk_load", "check_memory_setting"]

_MEMORY = re.compile(r"[1-9][0-9]{0,6}\s*(kB|MB|GB)")


_KB = {"kB": 1, "MB": 1024, "GB": 1024**2}
_MAX_KB = 2_147_483_647  # Postgres's largest maintenance_work_mem


def check_memory_setting(value: object) -> str:
    """A Postgres memory size such as ``"1GB"`` or ``"512MB"``, within what Postgres takes
    (checked before anything is dropped, not at the rebuild after the load)."""
    found = _MEMORY.fullmatch(value.strip()) if isinstance(value, str) else None
    if found is None:
        raise InvalidInput(
            f"maintenance_work_mem must be a Postgres memory size such as '512MB' or '2GB', "
            f"got {value!r:.80}"
        )
    kb = int(found.group(0).rstrip("kMGB ")) * _KB[found.group(1)]
    if not 1024 <= kb <= _MAX_KB:
        raise InvalidInput(f"maintenance_work_mem must be from 1MB to 2047GB, got {value!r:.80}")
    return found.group(0)


def _check_workers(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 64:
        raise InvalidInput(f"workers must be an integer from 0 to 64 or None, got {value!r:.80}")
    return value


@asynccontextmanager
async def bulk_load(
    dsn: str, *, maintenance_work_mem: str = "1GB", workers: int | None = None
) -> AsyncGenerator[None]:
    """Drop the HNSW indexes, yield, build them again (see the module's docstring)."""
    memory = check_memory_setting(maintenance_work_mem)
    workers = _check_workers(workers)
    conn = await connect_owner(dsn)
    async with conn:
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s) AS ok", (BULK_LOCK,))
        got = await cur.fetchone()
        if got is None or not got["ok"]:
            raise ConflictError(
                "another bulk load is running on this database; wait for it to finish "
                "(its indexes are rebuilt when it ends)"
            )
        try:
            try:
                async with conn.transaction():
                    await drop_vector_indexes(conn)
                    await drop_load_indexes(conn)
            except psycopg.errors.InsufficientPrivilege as exc:
                raise DatabaseError(
                    "bulk_load drops and rebuilds the vector indexes, which takes the owner of "
                    f"the timestone schema; connect as that user: {str(exc).strip()}"
                ) from exc
            except psycopg.Error as exc:
                raise wrap_db_error(exc, "starting a bulk load") from exc
            try:
                yield
            finally:
                await _rebuild(conn, memory, workers)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (BULK_LOCK,))


async def _rebuild(conn: Conn, memory: str, workers: int | None) -> None:
    try:
        async with conn.transaction():
            await conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (memory,))
            if workers is not None:
                await conn.execute(
                    "SELECT set_config('max_parallel_maintenance_workers', %s, true)",
                    (str(workers),),
                )
            await build_load_indexes(conn)
            await build_vector_indexes(conn)
    except psycopg.Error as exc:
        raise wrap_db_error(
            exc, "rebuilding the vector indexes after a bulk load (Memory.open retries)"
        ) from exc

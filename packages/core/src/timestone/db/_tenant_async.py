"""Connections for the caller's own SQL, bound to one group as the library's own are.

``Memory.connection(group_id)`` lends a connection of the memory's pool inside a
transaction that runs as the library role with the group set, the way every
transaction of the library starts (``_db.TENANT_SETTINGS``): row level security then
shows that group's rows alone and refuses writes to any other, and the definer
functions (``timestone.search_text``, ``timestone.similar_entities``) answer for it.
The DSN's own user (``Memory.dsn``) owns the schema, and the policies do not bind the
owner: SQL run on a connection of its own sees every group.

Both settings are local to the transaction, so they end with the block. Whatever the
block set for the session (``SET ROLE``, ``RESET ROLE``, a setting with
``set_config(..., false)``) is not handed to the next borrower: a connection that
comes back acting as anyone but the library role, or naming a group, is closed, and
the pool opens another.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import LiteralString

import psycopg

from .._groups import check_group
from ._database_async import APP_ROLE, TENANT_SETTINGS, Conn, Database, wrap_db_error

__all__ = ["tenant_connection"]

# What a connection of the pool is between transactions: the library role (``_db``'s
# ``configure``), and no group.
_AT_REST: LiteralString = (
    "SELECT current_user = %s AND coalesce(current_setting('timestone.group_id', true), '')"
    " = '' AS clean"
)


@asynccontextmanager
async def tenant_connection(db: Database, group_id: str) -> AsyncGenerator[Conn]:
    """A pooled connection in one transaction that sees only ``group_id``; committed when
    the block ends, rolled back if it raises."""
    group = check_group(group_id)
    doing = f"lending a connection bound to group {group!r}"
    try:
        conn = await db.pool.getconn()
    except psycopg.Error as exc:  # the pool closed, or none free in its timeout
        raise wrap_db_error(exc, doing) from exc
    try:
        async with conn.transaction():
            try:
                await conn.execute(TENANT_SETTINGS, (group,))
            except psycopg.Error as exc:
                raise wrap_db_error(exc, doing) from exc
            yield conn  # errors of the caller's own SQL are psycopg's, as raised
    finally:
        await _put_back_clean(conn)
        await db.pool.putconn(conn)


async def _put_back_clean(conn: Conn) -> None:
    """Close ``conn`` (the pool replaces it) unless it is as the pool lent it."""
    if conn.closed or conn.broken:
        return
    try:
        await conn.rollback()  # a transaction the block left open on the server
        cur = await conn.execute(_AT_REST, (APP_ROLE,))
        row = await cur.fetchone()
        await conn.rollback()
        if row is not None and row["clean"]:
            return
    except psycopg.Error:
        pass
    await conn.close()

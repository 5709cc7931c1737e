"""Connections for the caller's own SQL, bound to one group as the library's own are.

``Memory.connection(group_id)`` lends a connection of the memory's pool inside a
transaction that runs as the library role with the group set, the way every
transaction of the library starts (``Database.set_group``): row level security then
shows that group's rows alone and refuses writes to any other, and the definer
functions (``timestone.search_text``, ``timestone.similar_entities``) answer for it.
The DSN's own user (``Memory.dsn``) owns the schema, and the policies do not bind the
owner: SQL run on a connection of its own sees every group.

Both settings are local to the transaction, so they end with the block. What the block
left in the session is not handed to the next borrower, who may be the library working
for another group: the session is reset (``DISCARD ALL``: temporary tables, cursors held
past the commit, settings, the role, prepared statements, advisory locks, channels
listened to), then the pool's own settings are set again (``_db.SESSION_SETTINGS``). A
connection that listened to a channel (notifications may wait in the client already),
whose Python settings were changed (row factory, cursor factories, prepared statement
thresholds), or that could not be reset, is closed, and the pool opens another.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import LiteralString

import psycopg

from .._groups import check_group
from ._database_async import SESSION_SETTINGS, Conn, Database, wrap_db_error

__all__ = ["tenant_connection"]

# Whether the session listens to no channel: notifications for one may already wait in
# the client, where a reset of the session does not reach them.
_QUIET: LiteralString = "SELECT NOT EXISTS (SELECT FROM pg_listening_channels()) AS quiet"


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
    lent = _python_settings(conn)
    try:
        async with conn.transaction():
            try:
                await db.set_group(conn, group)
            except psycopg.Error as exc:
                raise wrap_db_error(exc, doing) from exc
            yield conn  # errors of the caller's own SQL are psycopg's, as raised
    finally:
        try:
            await _put_back_clean(conn, lent)
        except BaseException:
            # interrupted while it was reset (a task cancelled then): what its session
            # holds is unknown, so it is closed, and the pool opens another
            await conn.close()
            raise
        finally:
            await db.pool.putconn(conn)


def _python_settings(conn: Conn) -> tuple[object, ...]:
    """What the library's code relies on in the connection object itself."""
    return (
        conn.row_factory,
        conn.cursor_factory,
        conn.server_cursor_factory,
        conn.prepare_threshold,
        conn.prepared_max,
    )


async def _put_back_clean(conn: Conn, lent: tuple[object, ...]) -> None:
    """Reset ``conn``'s session to the pool's, or close it (the pool replaces it)."""
    if conn.closed or conn.broken:
        return
    if _python_settings(conn) == lent:
        try:
            await conn.rollback()  # a transaction the block left open on the server
            cur = await conn.execute(_QUIET)
            row = await cur.fetchone()
            # psycopg forgets the statements it prepared when a transaction rolls back
            # (and deallocates them); it would not follow DISCARD ALL's run a second time
            await conn.rollback()
            if row is not None and row["quiet"]:
                await conn.set_autocommit(True)  # DISCARD ALL runs outside a transaction
                await conn.execute("DISCARD ALL", prepare=False)
                await conn.execute(SESSION_SETTINGS, prepare=False)
                await conn.set_autocommit(False)
                return
        except psycopg.Error:
            pass
    await conn.close()

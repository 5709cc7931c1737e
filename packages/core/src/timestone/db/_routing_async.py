"""How a statement reaches a tenant's rows on a distributed (Citus) database: the
statements that open a tenant transaction there, the connections marked as routed, the
inserts rewritten for row level security, and migrations run one statement at a time.

The database layer builds on this module, and ``_distributed`` (turning a database
distributed) builds on both; this one imports neither at run time.
"""

from __future__ import annotations

import re
import weakref
from typing import TYPE_CHECKING, Any, LiteralString, overload

from psycopg import sql

if TYPE_CHECKING:
    from ._database_async import Conn

__all__ = [
    "HIDDEN_GROUP",
    "ROUTED_GROUP",
    "citus_tenant_settings",
    "is_distributed",
    "mark_routed",
    "routed",
    "row_inserts",
    "run_script",
    "split_statements",
]

# The statements that open a tenant transaction on a distributed database, before any
# statement that reads a table: the group for the policies on the shards, then the same
# role and JIT settings as ``_db.TENANT_SETTINGS``, and custom plans: Citus routes a
# statement by the group's value, which a generic plan of a prepared statement does not
# hold (a search's statements are prepared and, on one node, planned generically).
_PROPAGATE: LiteralString = "SET LOCAL citus.propagate_set_commands TO 'local'"
# A search statement is routed whole to the group's worker, and the search functions it
# calls there (``search_text``, SECURITY DEFINER) read the group's tables again: a query
# of the shell table on the worker, which Citus runs locally on the shard beside it (the
# group's shard is on that worker, since the statement was routed there by the group).
# Citus refuses such nesting unless told; the refusal guards against a function whose
# statements read other shards, which these, filtered by the group, do not.
_NESTED: LiteralString = "SET LOCAL citus.allow_nested_distributed_execution TO on"
_ROLE_AND_JIT: LiteralString = (
    "SELECT pg_catalog.set_config('role', 'timestone_app', true),"
    " pg_catalog.set_config('jit', 'off', true),"
    " pg_catalog.set_config('plan_cache_mode', 'force_custom_plan', true)"
)


# A group's value as some single-node statements write it: kept from the planner (an
# InitPlan), so that a group its statistics have not seen is not estimated at one row.
# Citus routes a statement to a shard only by a value compared to ``group_id`` that it
# can read when it plans: on a distributed database those statements name the value.
HIDDEN_GROUP: LiteralString = "(SELECT %(g)s::text)"
ROUTED_GROUP: LiteralString = "%(g)s::text"
_ROUTED: weakref.WeakSet[Any] = weakref.WeakSet()


def mark_routed(conn: Conn) -> None:
    """Note that ``conn`` is a connection to a distributed database (``routed``)."""
    _ROUTED.add(conn)


def routed(conn: Conn) -> bool:
    """Whether ``conn``'s statements must name the group's value (``HIDDEN_GROUP``)."""
    return conn in _ROUTED


# An INSERT ... SELECT whose rows come from parameters (``unnest``) is run by Citus on the
# coordinator, and its rows sent to the shard with COPY, which PostgreSQL refuses under
# row level security ("COPY FROM not supported with row-level security"). With a
# RETURNING clause Citus sends them as an intermediate result instead, and runs an
# INSERT ... SELECT on the shard: the policies' WITH CHECK holds there as on one node.
_RETURNING: LiteralString = " RETURNING 1"


@overload
def row_inserts(conn: Conn, query: LiteralString) -> LiteralString: ...
@overload
def row_inserts(conn: Conn, query: sql.Composed) -> sql.Composed: ...
def row_inserts(conn: Conn, query: LiteralString | sql.Composed) -> LiteralString | sql.Composed:
    """``query`` (an INSERT ... SELECT without RETURNING) as ``conn``'s database runs it
    under row level security: on a distributed database, with ``RETURNING 1``."""
    if conn not in _ROUTED:
        return query
    if isinstance(query, str):
        return query + _RETURNING
    return query + sql.SQL(_RETURNING)


def citus_tenant_settings(group_id: str) -> tuple[sql.SQL | sql.Composed, ...]:
    """The statements that make a transaction see only ``group_id`` on a distributed
    database (``group_id`` already checked by ``_groups.check_group``)."""
    return (
        sql.SQL(_PROPAGATE),
        sql.SQL(_NESTED),
        sql.SQL("SET LOCAL timestone.group_id TO {}").format(sql.Literal(group_id)),
        sql.SQL(_ROLE_AND_JIT),
    )


async def is_distributed(conn: Conn) -> bool:
    """Whether ``conn``'s database is a Citus coordinator whose facts table is
    distributed (the mark ``distribute`` leaves)."""
    cur = await conn.execute(
        "SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL AS citus"
    )
    row = await cur.fetchone()
    if row is None or not row["citus"]:
        return False
    cur = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition"
        " WHERE logicalrelid = to_regclass('timestone.facts')) AS distributed"
    )
    row = await cur.fetchone()
    return row is not None and bool(row["distributed"])


# The tokens of a script that may hold a semicolon that ends no statement: comments,
# quoted strings and identifiers, dollar-quoted bodies (``$fn$ ... $fn$``).
_TOKENS = re.compile(
    r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|(\$[A-Za-z_]*\$).*?\1|;",
    re.DOTALL,
)


def split_statements(script: str) -> list[str]:
    """The statements of an SQL script (a migration file), each without its semicolon.

    On a Citus coordinator, a DDL statement on a distributed table is sent on to the
    workers with the text of the whole query it came in, and a text of several statements
    is refused there ("cannot insert multiple commands into a prepared statement"): a
    migration runs on such a database one statement at a time (``run_script``). The
    split knows the SQL the migrations use: comments, quoted strings and identifiers,
    dollar-quoted bodies (nested comments do not occur)."""
    out: list[str] = []
    start = 0
    for token in _TOKENS.finditer(script):
        if token.group(0) == ";":
            out.append(script[start : token.start()])
            start = token.end()
    out.append(script[start:])
    return [
        s.strip()
        for s in out
        if _TOKENS.sub(lambda m: "" if m.group(0)[0] in "-/" else m.group(0), s).strip()
    ]


async def run_script(conn: Conn, script: bytes, distributed: bool) -> None:
    """Run ``script`` (a migration) on ``conn``: whole, or one statement at a time on a
    ``distributed`` database (``split_statements``), in the caller's transaction."""
    if not distributed:
        await conn.execute(script)
        return
    for statement in split_statements(script.decode()):
        await conn.execute(statement.encode())

"""The distributed mode: the same schema on a Citus cluster, every tenant on one shard.

``distribute(dsn)`` turns the database of a Citus coordinator distributed, once:

- every table keyed by ``group_id`` (``GROUP_TABLES``) becomes a distributed table
  on ``group_id``, all co-located with ``episodes``: a group's rows of every table, its
  HNSW and text indexes, its walk and its date fight live on one shard of one worker,
  and a group's statements are router queries run there whole;
- ``meta`` (schema version, embedder) becomes a reference table, copied to every node;
- the library role ``timestone_app`` gets ``LOGIN``. Citus opens its connections to the
  workers as the current role, so the role the library acts as (``SET ROLE``) must be
  able to log in to the workers; it stays without ``BYPASSRLS``, and the policies bind
  it on the shards. The workers must let it in (``pg_hba.conf``; a password in
  ``pg_dist_authinfo``, or certificates: ``docs/scale.md``).

Every unique index, the primary keys and the exclusion constraint of the schema hold
``group_id`` (compared with ``=``) and there are no foreign keys, so each holds within
one shard, as Citus requires; nothing was changed to distribute them.

On a distributed database, a tenant transaction sets the group with
``SET LOCAL timestone.group_id`` after ``SET LOCAL citus.propagate_set_commands =
'local'`` (``citus_tenant_settings``): Citus sends such a setting on to the worker
connections of the transaction, where the policies read it; a ``set_config(..., true)``
stays on the coordinator, and the policies on the shards would see no group.
"""

from __future__ import annotations

import re
import weakref
from typing import Any, LiteralString, overload

import psycopg
from psycopg import sql

from ..errors import ConnectionFailed, DatabaseError, InvalidInput, MissingExtension
from ._database_async import EXTENSIONS, MIGRATE_LOCK, Conn, connect_owner, migrate, wrap_db_error
from ._distribution import Distribution

__all__ = [
    "GROUP_TABLES",
    "REFERENCE_TABLES",
    "Distribution",
    "citus_tenant_settings",
    "distribute",
    "distribution",
    "is_distributed",
    "mark_routed",
    "routed",
    "row_inserts",
    "run_script",
    "split_statements",
]

# Co-located in this order: the first is the one the others follow.
GROUP_TABLES = (
    "term_stats",  # first: the triggers of the tables after it write here
    "episodes",
    "entities",
    "mentions",
    "assertions",
    "facts",
    "purges",
    "communities",
    "llm_budgets",
    "llm_ledger",
    "items",
    "relation_cardinalities",
)
REFERENCE_TABLES = ("meta",)

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
    "SELECT set_config('role', 'timestone_app', true), set_config('jit', 'off', true),"
    " set_config('plan_cache_mode', 'force_custom_plan', true)"
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


async def _workers(conn: Conn) -> list[tuple[str, int]]:
    cur = await conn.execute(
        "SELECT nodename, nodeport FROM pg_catalog.pg_dist_node"
        " WHERE noderole = 'primary' AND isactive AND groupid <> 0 ORDER BY nodeid"
    )
    return [(str(r["nodename"]), int(r["nodeport"])) for r in await cur.fetchall()]


async def _check_cluster(conn: Conn) -> list[tuple[str, int]]:
    """The cluster's workers, each answering and holding the extensions Timestone needs;
    a clear error naming the first that does not."""
    cur = await conn.execute(
        "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'citus'"
    )
    if await cur.fetchone() is None:
        raise MissingExtension(
            "this database has no citus extension: distribute() needs the coordinator of "
            "a Citus cluster (CREATE EXTENSION citus, then citus_add_node for each worker)"
        )
    workers = await _workers(conn)
    if not workers:
        raise DatabaseError(
            "this Citus coordinator has no active workers: add them with "
            "SELECT citus_add_node(host, port) before distributing"
        )
    cur = await conn.execute(
        "SELECT nodename, nodeport, success, result FROM run_command_on_workers("
        "  'SELECT coalesce(string_agg(name, '','' ORDER BY name), '''')"
        "   FROM pg_available_extensions WHERE name = ANY(' || quote_literal(%s::text) || ')')",
        ("{" + ",".join(EXTENSIONS) + "}",),
    )
    for row in await cur.fetchall():
        where = f"{row['nodename']}:{row['nodeport']}"
        if not row["success"]:
            raise ConnectionFailed(
                f"the Citus worker {where} does not answer the coordinator: {row['result']}; "
                "start it, or remove it with citus_remove_node, then open again"
            )
        available = set(str(row["result"]).split(",")) - {""}
        missing = [name for name in EXTENSIONS if name not in available]
        if missing:
            raise MissingExtension(
                f"the Citus worker {where} lacks the extension(s) {', '.join(missing)}; "
                f"Timestone needs {', '.join(EXTENSIONS)} on the coordinator and on every "
                "worker (install pgvector on that worker's server)"
            )
    return workers


async def check_workers(dsn: str) -> None:
    """On a distributed database, refuse to open when a worker does not answer or lacks
    an extension (``_check_cluster``); elsewhere nothing."""
    conn = await connect_owner(dsn)
    async with conn:
        try:
            if await is_distributed(conn):
                await _check_cluster(conn)
        except psycopg.Error as exc:
            raise wrap_db_error(exc, "checking the Citus workers") from exc


async def distribution(conn: Conn) -> Distribution:
    """The distributed and reference tables of the schema, and their shards."""
    cur = await conn.execute(
        "SELECT count(*) FILTER (WHERE p.partmethod = 'h') AS distributed,"
        " count(*) FILTER (WHERE p.partmethod = 'n') AS reference"
        " FROM pg_catalog.pg_dist_partition AS p"
        " JOIN pg_catalog.pg_class AS c ON c.oid = p.logicalrelid"
        " WHERE c.relnamespace = 'timestone'::regnamespace"
    )
    tables = await cur.fetchone()
    cur = await conn.execute(
        "SELECT count(*) AS shards FROM pg_catalog.pg_dist_shard AS s"
        " JOIN pg_catalog.pg_dist_partition AS p USING (logicalrelid)"
        " JOIN pg_catalog.pg_class AS c ON c.oid = p.logicalrelid"
        " WHERE c.relnamespace = 'timestone'::regnamespace AND p.partmethod = 'h'"
    )
    shards = await cur.fetchone()
    assert tables is not None
    assert shards is not None
    workers = tuple(f"{host}:{port}" for host, port in await _workers(conn))
    return Distribution(
        int(tables["distributed"]), int(tables["reference"]), int(shards["shards"]), workers
    )


async def _distributed_now(conn: Conn) -> set[str]:
    cur = await conn.execute(
        "SELECT c.relname AS name FROM pg_catalog.pg_dist_partition AS p"
        " JOIN pg_catalog.pg_class AS c ON c.oid = p.logicalrelid"
        " WHERE c.relnamespace = 'timestone'::regnamespace"
    )
    return {str(r["name"]) for r in await cur.fetchall()}


async def distribute(dsn: str, *, shard_count: int | None = None) -> Distribution:
    """Make the Timestone schema of a Citus coordinator's database distributed; idempotent.

    Checks that every worker answers and has the extensions, migrates the schema, then
    distributes each group table by ``group_id`` (co-located), makes ``meta`` a
    reference table and lets the library role log in. Rows already there move to the
    shards. ``shard_count``: shards per table (None: the cluster's
    ``citus.shard_count``, 32 by default); more shards than workers lets tenants be
    spread again when workers are added. Run it as the schema's owner (the DSN's user),
    before or after the first ``Memory.open``; opened afterwards, a memory acts on the
    cluster (``Memory.open`` finds the mark itself).
    """
    if shard_count is not None and not (type(shard_count) is int and shard_count >= 1):
        raise InvalidInput(f"shard_count must be a positive integer, got {shard_count!r}")
    conn = await connect_owner(dsn)
    async with conn:
        try:
            await _check_cluster(conn)
        except psycopg.Error as exc:
            raise wrap_db_error(exc, "checking the Citus cluster") from exc
    await migrate(dsn)
    conn = await connect_owner(dsn)
    async with conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
        # the term statistics' triggers (0036) write only the co-located shard of their
        # row's group, which is what Citus asks of a trigger on a distributed table
        await conn.execute("SET citus.enable_unsafe_triggers = on")
        try:
            done = await _distributed_now(conn)
            for table in REFERENCE_TABLES:
                if table not in done:
                    await conn.execute("SELECT create_reference_table(%s)", (f"timestone.{table}",))
            first = GROUP_TABLES[0]
            for table in GROUP_TABLES:
                if table in done:
                    continue
                args: dict[str, Any] = {"t": f"timestone.{table}"}
                if table == first:
                    args["with"] = "none"  # a colocation group of its own
                    args["n"] = shard_count
                    await conn.execute(
                        "SELECT create_distributed_table(%(t)s, 'group_id', 'hash',"
                        " colocate_with => %(with)s,"
                        " shard_count => coalesce(%(n)s::int,"
                        "   current_setting('citus.shard_count')::int))",
                        args,
                    )
                else:
                    args["with"] = f"timestone.{first}"
                    await conn.execute(
                        "SELECT create_distributed_table(%(t)s, 'group_id',"
                        " colocate_with => %(with)s)",
                        args,
                    )
                await conn.execute(
                    "SELECT truncate_local_data_after_distributing_table(%s)",
                    (f"timestone.{table}",),
                )
            await conn.execute("ALTER ROLE timestone_app LOGIN")
            return await distribution(conn)
        except psycopg.Error as exc:
            raise wrap_db_error(exc, "distributing the schema") from exc
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))


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

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

from typing import Any

import psycopg

from ..errors import ConnectionFailed, DatabaseError, InvalidInput, MissingExtension
from ._database_async import EXTENSIONS, MIGRATE_LOCK, Conn, connect_owner, migrate, wrap_db_error
from ._distribution import Distribution, check_dsn
from ._routing_async import (
    HIDDEN_GROUP,
    ROUTED_GROUP,
    citus_tenant_settings,
    is_distributed,
    mark_routed,
    routed,
    row_inserts,
    run_script,
    split_statements,
)

__all__ = [
    "GROUP_TABLES",
    "HIDDEN_GROUP",
    "REFERENCE_TABLES",
    "ROUTED_GROUP",
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
    check_dsn(dsn)
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

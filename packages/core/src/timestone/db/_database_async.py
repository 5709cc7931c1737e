"""The database: migrations, the embedder binding, the pool, and tenant transactions.

The pool's connections run as ``timestone_app``, a role without BYPASSRLS; a
tenant transaction sets ``timestone.group_id`` with ``set_config(..., true)``,
which the row level security policies read, and sets the role again for itself
(``TENANT_SETTINGS``), so that it holds where a pooler in transaction mode drops
the session's. Migrations and the embedder
binding run on a separate connection as the DSN's own user, the schema owner.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import json
import re
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from typing import Any, LiteralString, TypeVar

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection, sql
from psycopg.generators import send
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row
from psycopg.transaction import OutOfOrderTransactionNesting
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from .._arrays import register_arrays
from .._compat import ASpawned, asettle, aspawn
from .._groups import check_group
from .._vectors import register_vector_array
from ..errors import (
    ClockWentBack,
    ConflictError,
    ConnectionFailed,
    DatabaseError,
    EmbedderMismatch,
    InvalidInput,
    MissingExtension,
    SchemaTooNew,
    TimestoneError,
)
from ._conninfo import redact
from ._extensions import PGVECTOR_LIBRARY, dotted, pgvector_refusal
from ._functions_async import apply_functions
from ._routing_async import citus_tenant_settings, is_distributed, mark_routed, run_script
from ._sockets import widen_send_buffer

__all__ = [
    "APP_ROLE",
    "BULK_LOCK",
    "EXTENSIONS",
    "SESSION_SETTINGS",
    "Conn",
    "Database",
    "connect_owner",
    "migrate",
    "schema_version",
    "wrap_db_error",
]

APP_ROLE = "timestone_app"
# What every tenant transaction (and every search, ``_search._SETTINGS``) sets first,
# local to it: the group the row level security policies read, the library's role, and
# JIT off. The pool's connections take the role for their session as well; set again
# here, it holds where the session's is lost, as behind a pooler in transaction mode
# (PgBouncer's), which runs each transaction on whichever server connection is free.
# Without the role, the statements would run as the schema's owner, whom the policies
# do not bind. JIT: a server with it compiles a plan's expressions on every execution
# once its estimated cost passes ``jit_above_cost``; a search of a 1M-fact group is
# estimated at 250k (as of a moment, 655k, past the inlining and optimization thresholds
# too) while it reads a few hundred rows in about 10 ms, and that compile would cost tens
# to hundreds of milliseconds a search (``bench.plans``; the embedded server has no JIT).
TENANT_SETTINGS: LiteralString = (
    "SELECT pg_catalog.set_config('timestone.group_id', %s, true),"
    " pg_catalog.set_config('role', 'timestone_app', true),"
    " pg_catalog.set_config('jit', 'off', true)"
)
EXTENSIONS = ("vector", "pg_trgm", "btree_gist")
MIGRATE_LOCK = 0x7469_6D65_7374_6F6E  # "timeston"
BULK_LOCK = 0x7473_6275_6C6B  # "tsbulk": held by a bulk load for its whole length


Conn = AsyncConnection[DictRow]

_ANALYZE_FIRST = 2_000
_ANALYZE_LAST = 256_000
# Rows a process writes to one group before it asks whether the planner knows the group
# (then ten times as many each time): taken for under a tenth of that, it is analyzed.
_UNSEEN_FIRST = 1_000
_UNSEEN_STEP = 10
_UNSEEN_SHARE = 10
# Taken for at most this many rows, a group is one the statistics do not hold (a group
# they cannot tell from the average of many small ones is estimated at that average, and
# analyzing again would not change it).
_UNSEEN_ROWS = 10
_UNSEEN_EVERY_S = 60.0  # at most one such analysis a minute per process
_UNSEEN_GROUPS = 100_000  # groups counted at most
_ANALYZED = ("episodes", "entities", "mentions", "assertions", "facts")


def _migrations() -> list[tuple[int, str, bytes]]:
    found: list[tuple[int, str, bytes]] = []
    folder = importlib.resources.files("timestone") / "migrations"
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_(\w+)\.sql", entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_bytes()))
    return sorted(found)


MIGRATIONS = _migrations()
SCHEMA_VERSION = MIGRATIONS[-1][0]

_BOOTSTRAP = b"""
CREATE SCHEMA IF NOT EXISTS timestone;
CREATE TABLE IF NOT EXISTS timestone.meta (key text PRIMARY KEY, value jsonb NOT NULL);
DO $role$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'timestone_app') THEN
        CREATE ROLE timestone_app NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;  -- another database of this cluster created it first
END
$role$;
DO $grant$
BEGIN
    -- granting again takes the role's ADMIN option, which a user an administrator
    -- granted the role to (the way the error below describes) does not hold
    IF NOT pg_has_role(current_user, 'timestone_app', 'MEMBER') THEN
        GRANT timestone_app TO CURRENT_USER;
    END IF;
END
$grant$;
GRANT USAGE ON SCHEMA timestone TO timestone_app;
GRANT SELECT ON timestone.meta TO timestone_app;
ALTER TABLE timestone.meta ENABLE ROW LEVEL SECURITY;
-- the library role reads it; the owner writes it (an earlier bootstrap forced the policy
-- on the owner too, which refused every migration by a user who is not a superuser)
ALTER TABLE timestone.meta NO FORCE ROW LEVEL SECURITY;
DO $meta$
BEGIN
    CREATE POLICY readable ON timestone.meta FOR SELECT USING (true);
EXCEPTION WHEN duplicate_object THEN
    NULL;
END
$meta$;
"""


def closed_error(doing: str) -> InvalidInput:
    """The error of a call on a closed memory: a mistake of the caller's, not a lost
    connection to retry."""
    return InvalidInput(f"{doing}: this Memory is closed (close() was called on it)")


def wrap_db_error(exc: psycopg.Error, doing: str) -> TimestoneError:
    """A Timestone error for a psycopg one; raise it ``from exc``. A psycopg error raised
    while an interruption unwound (psycopg leaving a pipeline after a Ctrl-C says it
    cannot, the server busy) is not the database's: the interruption is raised again."""
    stopped = interruption(exc)
    if stopped is not None:
        raise stopped
    if isinstance(exc, PoolClosed):
        return closed_error(doing)
    if isinstance(exc, PoolTimeout):
        return ConnectionFailed(
            f"{doing}: {str(exc).strip()}: every connection of the pool was busy (open "
            "with a larger pool_size or pool_timeout), or none could be opened (the server "
            "down or refusing; the logger 'psycopg.pool' has the reasons)"
        )
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    constraint = exc.diag.constraint_name or ""
    if isinstance(exc, psycopg.errors.CheckViolation) and constraint.endswith(_HELD_IN_ORDER):
        return ClockWentBack(
            f"{doing}: the database's clock reads earlier than the start of a version this "
            f"write would close (of {exc.diag.table_name}): the server's clock went back (a "
            "step of the system clock, a failover to a server behind the one that wrote it). "
            "Nothing was written; the write succeeds once the clock passes it"
        )
    if isinstance(exc, psycopg.errors.IntegrityError):
        return ConflictError(f"{doing}: the database refused the write: {detail}")
    if isinstance(exc, psycopg.errors.TransactionRollback):  # class 40: a retry may pass
        return ConflictError(f"{doing}: a concurrent transaction won: {detail}")
    if isinstance(exc, psycopg.OperationalError) and _lost_connection(exc):
        return ConnectionFailed(f"{doing}: {detail}")
    if isinstance(exc, psycopg.errors.ProgramLimitExceeded):
        return DatabaseError(f"{doing}: the database refused it as too large: {detail}")
    if isinstance(exc, psycopg.errors.DataException) and _OTHER_DIMENSIONS.search(detail):
        return EmbedderMismatch(
            f"{doing}: {detail}: the database's vectors and this memory's embedder differ in "
            "dimension (the database was re-embedded since this memory opened, or by another "
            "embedder): open the memory again with the embedder the database uses"
        )
    return DatabaseError(f"{doing}: {detail}")


# the suffix of each versioned table's check that a version ends no earlier than it began
# (migration 0045)
_HELD_IN_ORDER = "_held_in_order"

# pgvector's words for vectors of two dimensions met in one statement
_OTHER_DIMENSIONS = re.compile(r"expected \d+ dimensions, not \d+|different vector dimensions")


# Of psycopg's OperationalError, the ones that mean the connection or the server is gone or
# refusing connections: no SQLSTATE (raised by the client), class 08, the server shutting
# down or starting, too many connections. Others (a limit exceeded, a statement timeout,
# an object in the wrong state) are errors of the statement, not of the connection.
_CONNECTION_STATES = frozenset({"57P01", "57P02", "57P03", "53300"})


def _lost_connection(exc: psycopg.Error) -> bool:
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _CONNECTION_STATES


def _half_done(exc: BaseException) -> bool:
    """Whether psycopg may have been stopped inside its own bookkeeping of a connection
    (``Database.borrowed``), or already says its count of transactions went wrong."""
    stopped = interruption(exc)
    if stopped is not None and not isinstance(stopped, asyncio.CancelledError):
        return True
    return isinstance(exc, OutOfOrderTransactionNesting)


def interruption(exc: BaseException) -> BaseException | None:
    """The interruption ``exc`` is, or was raised while handling: a Ctrl-C
    (``KeyboardInterrupt``), a cancelled task (``CancelledError``), ``SystemExit``."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if not isinstance(found, Exception | GeneratorExit):
            return found
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return None


# What the library's SQL and psycopg's reading of it rely on, whatever a server, database
# or role sets by default (each seen to break something when set otherwise): times in UTC
# (dates read back in another zone, and the calendar days a context prints), ISO dates
# (psycopg reads no other DateStyle), backslashes in string literals as written (a
# function body parsed with standard_conforming_strings off fails, or matches other
# text), row level security applied (off, every read of a policy's table fails), and
# read committed (the writes take their locks, then read, and retry on a conflict, not on
# a serialization failure). Each connection also asks for UTF-8 (``_CONNECT``): the
# library sends text arrays in UTF-8, which a server reading LATIN1 would store garbled.
# Written ``pg_catalog.set_config``: a schema of the search path cannot stand in for it.
_READ_AS_WRITTEN: LiteralString = (
    "pg_catalog.set_config('TimeZone', 'UTC', false),"
    " pg_catalog.set_config('DateStyle', 'ISO', false),"
    " pg_catalog.set_config('standard_conforming_strings', 'on', false),"
    " pg_catalog.set_config('row_security', 'on', false),"
    " pg_catalog.set_config('default_transaction_isolation', 'read committed', false)"
)
_CONNECT: dict[str, Any] = {"client_encoding": "UTF8"}


# The owner's connection runs maintenance: migrations, index builds (minutes at a million
# facts), re-embedding (Python work between statements of one transaction), ANALYZE.
# A server's ``statement_timeout`` or ``idle_in_transaction_session_timeout``, set for an
# application's short queries, would cancel it midway, and a migration cancelled is
# retried, and cancelled again, at every open; like ``pg_dump`` and ``pg_restore``, the
# maintenance session turns both off for itself. The library's own queries keep the
# server's.
_MAINTENANCE: LiteralString = (
    "SELECT pg_catalog.set_config('statement_timeout', '0', false),"
    " pg_catalog.set_config('idle_in_transaction_session_timeout', '0', false), " + _READ_AS_WRITTEN
)


async def connect_owner(dsn: str) -> AsyncConnection[DictRow]:
    try:
        conn = await AsyncConnection[DictRow].connect(
            dsn, autocommit=True, row_factory=dict_row, **_CONNECT
        )
    except psycopg.Error as exc:
        why = redact(str(exc).strip(), dsn)
        raise ConnectionFailed(f"cannot connect to {redact(dsn, dsn)}: {why}") from exc
    try:
        await conn.execute(_MAINTENANCE)
    except psycopg.Error as exc:
        await conn.close()
        why = redact(str(exc).strip(), dsn)
        raise ConnectionFailed(f"cannot set up {redact(dsn, dsn)}: {why}") from exc
    return conn


async def schema_version(conn: Conn) -> int:
    cur = await conn.execute(
        "SELECT value FROM timestone.meta WHERE key = 'schema_version'",
    )
    row = await cur.fetchone()
    return int(row["value"]) if row is not None else 0


_ITERATIVE_SETTING = "hnsw.iterative_scan"  # see ``_extensions``


async def _check_pgvector(conn: Conn) -> None:
    # a vector value loads the library, which defines its settings
    await conn.execute("SELECT '[1]'::vector")
    cur = await conn.execute(
        "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS version,"
        " current_setting(%s, true) AS iterative",
        (_ITERATIVE_SETTING,),
    )
    row = await cur.fetchone()
    assert row is not None
    refusal = pgvector_refusal(str(row["version"]), row["iterative"])
    if refusal is not None:
        raise MissingExtension(refusal)


async def _ensure_extensions(conn: Conn) -> None:
    cur = await conn.execute(
        "SELECT name FROM pg_available_extensions WHERE name = ANY(%s)", (list(EXTENSIONS),)
    )
    available = {row["name"] for row in await cur.fetchall()}
    missing = [name for name in EXTENSIONS if name not in available]
    if missing:
        raise MissingExtension(
            f"the server lacks the extension(s) {', '.join(missing)}; Timestone needs "
            f"{', '.join(EXTENSIONS)} (pgvector {dotted(PGVECTOR_LIBRARY)} or newer). "
            "Install them on the server, or open with no dsn to use the embedded Postgres"
        )
    for name in EXTENSIONS:
        try:
            await conn.execute(
                sql.SQL("CREATE EXTENSION IF NOT EXISTS {} SCHEMA public").format(
                    sql.Identifier(name)
                )
            )
        except psycopg.errors.InsufficientPrivilege as exc:
            raise MissingExtension(
                f"the extension {name} is available but not created, and this user may not "
                f"create it: ask an administrator to run CREATE EXTENSION {name}"
            ) from exc
        except psycopg.errors.UniqueViolation:
            pass  # created concurrently by another database session
    cur = await conn.execute(
        "SELECT e.extname AS name, n.nspname AS schema FROM pg_catalog.pg_extension AS e"
        " JOIN pg_catalog.pg_namespace AS n ON n.oid = e.extnamespace"
        " WHERE e.extname = ANY(%s) AND n.nspname <> 'public' ORDER BY 1",
        (list(EXTENSIONS),),
    )
    elsewhere = await cur.fetchall()
    if elsewhere:
        where = ", ".join(f"{r['name']} in the schema {r['schema']}" for r in elsewhere)
        moves = "; ".join(f"ALTER EXTENSION {r['name']} SET SCHEMA public" for r in elsewhere)
        raise MissingExtension(
            f"the extensions must be in the schema public, where Timestone's functions find "
            f"their types and operators; this database has {where}: ask an administrator "
            f"to run: {moves}"
        )
    await _check_pgvector(conn)


async def _check_server(conn: Conn) -> None:
    """A server Timestone can keep its data on: one it can write to, holding text as UTF-8
    (another encoding keeps some characters as other ones, or refuses them)."""
    cur = await conn.execute(
        "SELECT pg_catalog.current_setting('server_encoding') AS encoding,"
        " pg_catalog.current_setting('transaction_read_only') AS read_only,"
        " pg_catalog.pg_is_in_recovery() AS standby"
    )
    row = await cur.fetchone()
    assert row is not None
    if row["encoding"] != "UTF8":
        raise DatabaseError(
            f"the database's encoding is {row['encoding']}; Timestone keeps text as UTF-8: "
            "create the database WITH ENCODING 'UTF8' (the default of initdb on a UTF-8 "
            "locale) and open that one"
        )
    if row["standby"] or row["read_only"] == "on":
        what = "a standby" if row["standby"] else "read only for this user or database"
        raise DatabaseError(
            f"the server is {what} (default_transaction_read_only, or a replica): Timestone "
            "opens a database it can write to, the primary"
        )


async def migrate(dsn: str) -> int:
    """Bring the schema to this library's version under an advisory lock; idempotent."""
    conn = await connect_owner(dsn)
    async with conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
        try:
            await _check_server(conn)
            await _ensure_extensions(conn)
            # a distributed schema takes its scripts one statement at a time (run_script)
            distributed = await is_distributed(conn)
            try:
                await run_script(conn, _BOOTSTRAP, distributed)
            except psycopg.errors.InsufficientPrivilege as exc:
                raise DatabaseError(
                    f"this user may not create the role {APP_ROLE} or grant it; ask an "
                    f"administrator to run: CREATE ROLE {APP_ROLE} NOLOGIN; "
                    f"GRANT {APP_ROLE} TO <your user>"
                ) from exc
            version = await schema_version(conn)
            if version > SCHEMA_VERSION:
                raise SchemaTooNew(
                    f"the database schema is version {version}, newer than this Timestone "
                    f"(schema {SCHEMA_VERSION}); upgrade the timestone package"
                )
            for number, name, text in MIGRATIONS:
                if number <= version:
                    continue
                async with conn.transaction():
                    if distributed:
                        # a data move is of every group: every shard, on purpose, where a
                        # cluster refuses multi-shard statements to catch a tenant's; and
                        # one may turn a term trigger off for itself (0046), which Citus
                        # allows where a table's triggers are allowed (``distribute``)
                        await conn.execute(
                            "SELECT set_config('citus.multi_task_query_log_level', 'off', true),"
                            " set_config('citus.enable_unsafe_triggers', 'on', true)"
                        )
                    await run_script(conn, text, distributed)
                    await conn.execute(
                        "INSERT INTO timestone.meta (key, value) VALUES ('schema_version', %s) "
                        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                        (json.dumps(number),),
                    )
                del name
            # the functions' current definitions: the repeatable migrations (_functions)
            await apply_functions(conn, distributed, SCHEMA_VERSION)
            return max(version, SCHEMA_VERSION)
        except psycopg.Error as exc:
            raise wrap_db_error(exc, "migrating the schema") from exc
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))


# The session of a pooled connection as ``_configure`` sets it: the library role, and
# pgvector's iterative scans. Set again on a connection whose session was reset after the
# caller's own SQL (``_tenant``).
SESSION_SETTINGS: LiteralString = (
    "SELECT pg_catalog.set_config('role', 'timestone_app', false),"
    " pg_catalog.set_config('hnsw.iterative_scan', 'relaxed_order', false), " + _READ_AS_WRITTEN
)


async def _configure(conn: AsyncConnection[Any]) -> None:
    widen_send_buffer(conn.pgconn.socket)
    await register_vector_async(conn)
    register_vector_array(conn)
    register_arrays(conn)
    await conn.execute(SESSION_SETTINGS)
    await conn.commit()


_SPARE_WAIT = 0.0005  # seconds: the pool's wait cannot be zero
_ESTIMATE_TTL = 60.0  # seconds a row estimate is kept
_SMALL_KEPT = 10_000  # groups remembered as small, at most


@asynccontextmanager
async def autocommit(conn: Conn) -> AsyncGenerator[Conn]:
    """``conn`` in autocommit for a read that manages its own transaction (statements of
    one pipeline share an implicit one; an explicit ``BEGIN`` opens a longer one), put
    back as the pool lends it: a transaction left open or failed is rolled back."""
    await conn.set_autocommit(True)
    try:
        yield conn
    finally:
        if not conn.broken:  # a broken one leaves the pool; its error is the news
            if conn.info.transaction_status != TransactionStatus.IDLE:
                await conn.rollback()
            await conn.set_autocommit(False)


_Seen = TypeVar("_Seen")


def _note(seen: dict[str, _Seen], group_id: str, value: _Seen) -> None:
    """Remember ``value`` for ``group_id`` in ``seen`` (at most ``_SMALL_KEPT`` groups)."""
    if len(seen) >= _SMALL_KEPT:
        seen.clear()
    seen[group_id] = value


class Database:
    """A pool of connections acting as the library role, and tenant transactions on it."""

    def __init__(self, dsn: str, pool: AsyncConnectionPool[AsyncConnection[DictRow]]) -> None:
        self._dsn = dsn
        self._closed = False
        self.pool = pool
        self._since_analyze = 0
        self._analyze_every = _ANALYZE_FIRST
        self._analyzing: ASpawned[None] | None = None  # the ANALYZE note_writes started
        self._written: dict[str, int] = {}  # group -> facts this process wrote to it
        self._unseen_mark: dict[str, int] = {}  # group -> when to look at its estimate next
        self._unseen_at = -_UNSEEN_EVERY_S  # monotonic time of the last look
        self._facts_rows = (0.0, -_ESTIMATE_TTL)  # (rows, monotonic time read)
        self._small: dict[str, float] = {}  # group -> monotonic time it was found small
        self._large: dict[str, float] = {}  # group -> monotonic time it was found large
        # group -> (creation time of its n-th current fact, monotonic time it was read)
        self._horizons: dict[str, tuple[datetime, float]] = {}
        # a Citus coordinator's distributed schema: the group is set with SET LOCAL, which
        # reaches the workers (``_distributed``); found by ``aopen``
        self.distributed = False

    async def set_group(self, conn: Conn, group: str) -> None:
        """Make ``conn``'s transaction see only ``group`` (checked by the caller)."""
        if not self.distributed:
            await conn.execute(TENANT_SETTINGS, (group,))
            return
        mark_routed(conn)
        for statement in citus_tenant_settings(group):
            await conn.execute(statement)

    def small(self, group_id: str) -> bool:
        """Whether ``group_id`` was found to hold few facts (``note_small``) within the
        last ``_ESTIMATE_TTL`` seconds."""
        return time.monotonic() - self._small.get(group_id, -_ESTIMATE_TTL) < _ESTIMATE_TTL

    def note_small(self, group_id: str) -> None:
        _note(self._small, group_id, time.monotonic())

    def large(self, group_id: str) -> bool:
        """Whether a search found ``group_id`` to hold too many current facts to rank
        exactly (``note_large``) within the last ``_ESTIMATE_TTL`` seconds: its searches
        meanwhile go to the vector index without counting them again."""
        return time.monotonic() - self._large.get(group_id, -_ESTIMATE_TTL) < _ESTIMATE_TTL

    def note_large(self, group_id: str) -> None:
        _note(self._large, group_id, time.monotonic())

    def held_many(self, group_id: str, as_of: datetime) -> bool:
        """Whether a search found, within the last ``_ESTIMATE_TTL`` seconds, that
        ``group_id`` held as of ``as_of`` too many current facts to rank exactly: the
        last fact of the bound, in creation order (``note_horizon``), was created by then.
        Its as-of searches of such moments go to the vector index without counting."""
        found = self._horizons.get(group_id)
        if found is None or time.monotonic() - found[1] >= _ESTIMATE_TTL:
            return False
        return as_of >= found[0]

    def note_horizon(self, group_id: str, created_at: datetime) -> None:
        """Remember when the group's current fact at the as-of bound (in creation order)
        was created; facts expire, never move earlier, so later moments held as many."""
        _note(self._horizons, group_id, (created_at, time.monotonic()))

    async def facts_rows(self, conn: Conn) -> float:
        """The planner's estimate of the rows of the facts table (every group, every
        version), read on ``conn`` at most once per ``_ESTIMATE_TTL`` seconds; 0 for a
        table never analyzed."""
        rows, read = self._facts_rows
        now = time.monotonic()
        if now - read >= _ESTIMATE_TTL:
            cur = await conn.execute(
                "SELECT greatest(reltuples, 0)::float8 AS n FROM pg_class"
                " WHERE oid = 'timestone.facts'::regclass"
            )
            found = await cur.fetchone()
            rows = float(found["n"]) if found is not None else 0.0
            self._facts_rows = (rows, now)
        return rows

    async def note_writes(self, rows: int, group_id: str | None = None) -> None:
        """Keep planner statistics fresh through a bulk load, and for a new group.

        Autovacuum analyzes a table only after a minute and a share of it has changed;
        a bulk load outruns it, and plans made on the statistics of an empty table scan
        a whole group for every batch. After ``_ANALYZE_FIRST`` rows, then after twice as
        many each time, the tables writes grow are analyzed, as their owner (the DSN's
        user). Where that user may not, autovacuum is left to it.

        A group the statistics have not seen is estimated at about one row, whatever it
        holds, when they were gathered while the tables held other groups only (a second
        tenant in a large database, long before autovacuum's share of the table has
        changed). After ``_UNSEEN_FIRST`` facts written to ``group_id``, then ten times
        as many each time, the analysis reads the planner's estimate of the group's
        facts, and analyzes the tables if the planner takes the group for (nearly) empty:
        at most ``_UNSEEN_ROWS`` rows, and under a tenth of what was written. At most one
        such look a minute: a mark crossed meanwhile is looked at by a later write.

        The analysis runs beside the caller, on a connection of its own (a task, or a
        thread in the blocking twin): the write that crosses the mark returns without
        waiting for it (up to a second at a million facts), and writes go on meanwhile
        (``ANALYZE`` blocks no insert). One at a time: a mark crossed while one runs
        waits for the next write after it ends. ``close`` waits for it.
        """
        self._since_analyze += rows
        unseen: tuple[str, int] | None = None
        if group_id is not None:
            if len(self._written) >= _UNSEEN_GROUPS and group_id not in self._written:
                self._written.clear()  # bounded: counting starts over, at worst one more look
                self._unseen_mark.clear()
            written = self._written.get(group_id, 0) + rows
            self._written[group_id] = written
            due = time.monotonic() - self._unseen_at >= _UNSEEN_EVERY_S
            if due and written >= self._unseen_mark.get(group_id, _UNSEEN_FIRST):
                unseen = (group_id, written)
        if self._since_analyze < self._analyze_every and unseen is None:
            return
        if self._analyzing is not None and not self._analyzing.done():
            return  # the marks stay crossed: the next write after it ends tries again
        if unseen is not None:
            self._unseen_mark[unseen[0]] = unseen[1] * _UNSEEN_STEP
            self._unseen_at = time.monotonic()
        if self._since_analyze >= self._analyze_every:
            self._since_analyze = 0
            self._analyze_every = min(self._analyze_every * 2, _ANALYZE_LAST)
            unseen = None  # analyzed whatever the estimate
        self._analyzing = await aspawn(self._analyze, unseen)

    async def _analyze(self, unseen: tuple[str, int] | None = None) -> None:
        """Analyze the tables writes grow; with ``unseen`` (a group, the facts written to
        it), only if the planner estimates that group's facts at under a tenth of them."""
        try:
            conn = await connect_owner(self.dsn)
            async with conn:
                if unseen is not None:
                    cur = await conn.execute(
                        "EXPLAIN (FORMAT JSON) SELECT 1 FROM timestone.facts WHERE group_id = %s",
                        (unseen[0],),
                    )
                    found = await cur.fetchone()
                    estimate = float(found["QUERY PLAN"][0]["Plan"]["Plan Rows"]) if found else 0.0
                    if estimate > _UNSEEN_ROWS or estimate * _UNSEEN_SHARE >= unseen[1]:
                        return
                for table in _ANALYZED:
                    await conn.execute(
                        sql.SQL("ANALYZE timestone.{}").format(sql.Identifier(table))
                    )
        except (psycopg.Error, ConnectionFailed):
            self._analyze_every = _ANALYZE_LAST * 1000  # not allowed here: stop trying

    @classmethod
    async def aopen(
        cls, dsn: str, *, max_size: int = 8, wait: float = 30.0, prepare: bool = True
    ) -> Database:
        """``wait``: the seconds a call waits for a connection of the pool (psycopg_pool's
        ``timeout``). ``prepare``: False for connections that prepare nothing (psycopg's
        ``prepare_threshold`` None; an ``execute(..., prepare=True)`` is then not
        prepared either), for a pooler that cannot carry prepared statements."""
        kwargs: dict[str, Any] = {"row_factory": dict_row, "autocommit": False, **_CONNECT}
        if not prepare:
            kwargs["prepare_threshold"] = None
        pool = AsyncConnectionPool(
            dsn,
            min_size=1,
            max_size=max_size,
            timeout=wait,
            kwargs=kwargs,
            configure=_configure,
            open=False,
            connection_class=AsyncConnection[DictRow],
        )
        try:
            await pool.open(wait=True, timeout=30.0)
        except Exception as exc:
            await pool.close()
            raise ConnectionFailed(
                f"cannot open a connection pool to {redact(dsn, dsn)}: {redact(str(exc), dsn)}"
            ) from exc
        db = cls(dsn, pool)
        try:
            async with pool.connection() as conn, autocommit(conn):
                db.distributed = await is_distributed(conn)
        except psycopg.Error as exc:
            await pool.close()
            raise wrap_db_error(exc, "reading the distribution of the schema") from exc
        return db

    @property
    def dsn(self) -> str:
        """The DSN, for a connection of its own (the owner's maintenance); refused once
        closed, as the pool is."""
        if self._closed:
            raise closed_error("connecting")
        return self._dsn

    async def close(self) -> None:
        if self._analyzing is not None:
            await asettle(self._analyzing)  # its connection is its own, not the pool's
            self._analyzing = None
        self._closed = True
        await self.pool.close()

    @asynccontextmanager
    async def borrowed(self) -> AsyncGenerator[Conn]:
        """A connection of the pool, given back as the pool gives it unless the block
        ended in one of two ways. Interrupted where psycopg's own bookkeeping may be
        half done (a Ctrl-C lands between any two bytecodes: at a transaction's start it
        leaves psycopg counting one transaction fewer than none, and every later
        transaction on the connection fails), it is closed, and the pool opens another; a
        cancelled task is not such a case (a cancellation lands where psycopg awaits,
        its state whole, and the pool takes the connection back as from any error).
        Lost (the server restarted, a network cut), the pool's idle connections are
        checked at once, so that the next calls do not each meet one of them dead."""
        async with self.pool.connection() as conn:
            try:
                yield conn
            except BaseException as exc:
                if _half_done(exc):
                    await conn.close()
                elif isinstance(exc, psycopg.OperationalError) and conn.closed:
                    with suppress(psycopg.Error):
                        await self.pool.check()
                raise

    @asynccontextmanager
    async def spare(self) -> AsyncGenerator[Conn | None]:
        """A second connection, in autocommit, for work beside the caller's, if the pool
        has one idle now, else ``None`` at once (the pool grows, up to its size, for a
        later call): a caller holding one connection never waits for another, so callers
        that each hold one cannot starve each other."""
        stats = self.pool.get_stats()
        if stats["pool_available"] == 0 and stats["pool_size"] >= self.pool.max_size:
            yield None  # none idle, and the pool cannot grow: not even the short wait
            return
        try:
            conn = await self.pool.getconn(timeout=_SPARE_WAIT)
        except PoolTimeout:
            yield None
            return
        try:
            async with autocommit(conn):
                yield conn
        except BaseException as exc:
            if _half_done(exc):
                await conn.close()  # its state not known (``borrowed``)
            raise
        finally:
            await self.pool.putconn(conn)

    @asynccontextmanager
    async def transaction(
        self, group_id: str, doing: str, *, pipeline: bool = False, snapshot: bool = False
    ) -> AsyncGenerator[Conn]:
        """One transaction that sees only ``group_id``; psycopg errors become Timestone's.

        ``snapshot``: a read-only transaction whose statements all read one snapshot
        (``REPEATABLE READ``), for a read of many statements that must agree (an export).

        ``pipeline``: statements are sent without waiting for each other's results; one
        waits only where a result is read (and at the end, where any error surfaces, before
        the commit). A write whose inserts nothing reads back runs its Python work while the
        database runs them. Code inside must not read ``rowcount`` of a statement whose
        result it has not fetched.
        """
        group = check_group(group_id)
        try:
            async with self.borrowed() as conn, conn.transaction():
                if snapshot:
                    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                if pipeline:
                    async with conn.pipeline() as statements:
                        # queued with what follows: no round trip of its own
                        await self.set_group(conn, group)
                        try:
                            yield conn
                        except psycopg.Error:
                            # end the aborted pipeline here: leaving it aborted, psycopg
                            # would log a second error beside the one raised. What the
                            # server has not received yet is sent first: a sync only
                            # waits to read, and with more queued than the socket takes
                            # (a statement of megabytes behind the failed one) both ends
                            # would wait for each other forever.
                            with suppress(psycopg.Error):
                                await conn.wait(send(conn.pgconn))
                                await statements.sync()
                            raise
                else:
                    await self.set_group(conn, group)
                    yield conn
        except TimestoneError:
            raise
        except psycopg.Error as exc:
            raise wrap_db_error(exc, doing) from exc

"""A connection lent for the caller's own SQL (``Memory.connection``, docs/sql.md) hands
nothing of its session to the next borrower, who may be the library working for another
group: each thing a block can leave in its session is tried, blocking and async."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any, LiteralString

import psycopg
import pytest
from psycopg.rows import tuple_row

import timestone

_WHEN = datetime(2020, 1, 1, tzinfo=UTC)

# What a session holds that a block can leave behind, read on the pool's one connection.
_SESSION: LiteralString = (
    "SELECT current_user AS u, session_user AS s, pg_backend_pid() AS pid,"
    # pgvector's settings are listed once its library is loaded, which a new connection
    # has not done yet: read by name
    " (SELECT array_agg(name || '=' || setting ORDER BY name) FROM pg_settings"
    "  WHERE source = 'session' AND name NOT LIKE 'hnsw.%') AS settings,"
    " current_setting('hnsw.iterative_scan', true) AS scan,"
    " coalesce(current_setting('app.note', true), '') AS note,"
    " coalesce(current_setting('timestone.group_id', true), '') AS g,"
    " (SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()) AS temp,"
    " (SELECT count(*) FROM pg_cursors) AS cursors,"
    " (SELECT count(*) FROM pg_prepared_statements WHERE from_sql) AS prepared,"
    " (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
    "  AND pid = pg_backend_pid()) AS locks,"
    " (SELECT count(*) FROM pg_listening_channels()) AS channels"
)


# Each thing a block may leave: the statements that leave it, and whether the connection
# is kept (its session reset) or closed.
CASES: dict[str, tuple[tuple[LiteralString, ...], bool]] = {
    # temporary tables are outside row level security: the next group would read it
    "temporary table": (
        ("CREATE TEMP TABLE scratch AS SELECT fact FROM timestone.facts",),
        True,
    ),
    # a cursor held past the commit keeps the rows its group read
    "held cursor": (
        ("DECLARE held CURSOR WITH HOLD FOR SELECT fact FROM timestone.facts",),
        True,
    ),
    "statement timeout": (("SET statement_timeout = 1",), True),
    "read only": (("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",), True),
    "setting of the caller's": (
        ("SELECT set_config('app.note', 'of the first group', false)",),
        True,
    ),
    "role": (("RESET ROLE",), True),
    # the tests' server runs them as a superuser, who may act as another user
    "session authorization": (("SET SESSION AUTHORIZATION timestone_app",), True),
    "prepared statement": (("PREPARE scratch AS SELECT fact FROM timestone.facts",), True),
    "advisory lock": (("SELECT pg_advisory_lock(6841197)",), True),
    # notifications may already wait in the client: the connection goes
    "listen": (("LISTEN first_group_news",), False),
}


def _groups(mem: timestone.Memory) -> tuple[str, str]:
    a, b = "la-" + uuid.uuid4().hex[:10], "lb-" + uuid.uuid4().hex[:10]
    for g in (a, b):
        mem.add_facts(
            g,
            [timestone.FactInput("Mira", "DIRECTS", f"Winery of {g}")],
            reference_time=_WHEN,
        )
    return a, b


def _same_session(before: dict[str, Any], after: dict[str, Any], kept: bool) -> None:
    assert {k: v for k, v in after.items() if k != "pid"} == {
        k: v for k, v in before.items() if k != "pid"
    }
    assert (after["pid"] == before["pid"]) is kept


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_lent_connection_leaves_nothing_to_the_next_borrower(dsn: str, case: str) -> None:
    statements, kept = CASES[case]
    with timestone.Memory.open(dsn, pool_size=1) as mem:
        a, b = _groups(mem)
        with mem.connection(b) as conn:
            before = conn.execute(_SESSION).fetchone()
        assert before is not None
        with mem.connection(a) as conn:
            for statement in statements:
                conn.execute(statement)
        with mem.connection(b) as conn:  # the pool's one connection, or its replacement
            after = conn.execute(_SESSION).fetchone()
            if case == "temporary table":
                assert conn.execute("SELECT to_regclass('pg_temp.scratch') AS t").fetchone() == {
                    "t": None
                }
        assert after is not None
        _same_session(before, after, kept)
        # the library's own calls on that connection: a read and a write of the other group
        assert [f.target for f in mem.facts(b)] == [f"Winery of {b}"]
        mem.add_facts(b, [timestone.FactInput("Mira", "OWNS", "Cellar")], reference_time=_WHEN)
        with psycopg.connect(dsn, autocommit=True) as other:  # no lock left held
            row = other.execute("SELECT pg_try_advisory_lock(6841197) AS got").fetchone()
            assert row == (True,)
            other.execute("SELECT pg_advisory_unlock(6841197)")


@pytest.mark.parametrize("case", sorted(CASES))
async def test_an_async_lent_connection_leaves_nothing_to_the_next_borrower(
    dsn: str, case: str
) -> None:
    statements, kept = CASES[case]
    with timestone.Memory.open(dsn, pool_size=1) as seeding:
        a, b = _groups(seeding)
    amem = await timestone.AsyncMemory.open(dsn, pool_size=1)
    async with amem:
        async with amem.connection(b) as conn:
            before = await (await conn.execute(_SESSION)).fetchone()
        assert before is not None
        async with amem.connection(a) as conn:
            for statement in statements:
                await conn.execute(statement)
        async with amem.connection(b) as conn:
            after = await (await conn.execute(_SESSION)).fetchone()
        assert after is not None
        _same_session(before, after, kept)
        assert [f.target for f in await amem.facts(b)] == [f"Winery of {b}"]
        await amem.add_facts(
            b, [timestone.FactInput("Mira", "OWNS", "Cellar")], reference_time=_WHEN
        )


async def test_a_block_cancelled_while_its_connection_is_reset_gives_it_back(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task cancelled (a timeout) after its block ended, while the connection was being
    reset, does not take it away from the pool: it is closed and the pool opens another,
    clean, instead of waiting for it forever."""
    from timestone.db import _tenant_async

    with timestone.Memory.open(dsn, pool_size=1) as seeding:
        a, b = _groups(seeding)
    reset = _tenant_async._put_back_clean  # pyright: ignore[reportPrivateUsage]
    resetting = asyncio.Event()

    async def noted(conn: Any, lent: Any) -> None:
        resetting.set()
        await reset(conn, lent)

    monkeypatch.setattr(_tenant_async, "_put_back_clean", noted)
    amem = await timestone.AsyncMemory.open(dsn, pool_size=1)
    async with amem:
        async with amem.connection(b) as conn:
            before = await (await conn.execute(_SESSION)).fetchone()
        assert before is not None

        async def block() -> None:
            async with amem.connection(a) as conn:
                await conn.execute("SELECT set_config('app.note', 'of the first group', false)")

        async with asyncio.timeout(20):  # the pool's own wait is 30 s
            for _ in range(3):
                resetting.clear()
                task = asyncio.ensure_future(block())
                await resetting.wait()
                await asyncio.sleep(0)  # inside the reset's first statement
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            async with amem.connection(b) as conn:
                after = await (await conn.execute(_SESSION)).fetchone()
            assert after is not None
            _same_session(before, after, kept=False)
            assert [f.target for f in await amem.facts(b)] == [f"Winery of {b}"]


def test_a_lent_connection_whose_python_settings_changed_is_closed(dsn: str) -> None:
    """The library reads rows as dicts: a block that gives the connection another row
    factory, or another threshold for prepared statements, hands on a new connection."""
    with timestone.Memory.open(dsn, pool_size=1) as mem:
        a, b = _groups(mem)
        with mem.connection(b) as conn:
            before = conn.execute(_SESSION).fetchone()
        assert before is not None
        with mem.connection(a) as conn:
            conn.row_factory = tuple_row  # pyright: ignore[reportAttributeAccessIssue]
        assert [f.target for f in mem.facts(b)] == [f"Winery of {b}"]
        with mem.connection(a) as conn:
            conn.prepare_threshold = None
        with mem.connection(b) as conn:
            after = conn.execute(_SESSION).fetchone()
            assert conn.prepare_threshold == 5  # psycopg's default, as the pool opens them
        assert after is not None
        _same_session(before, after, kept=False)


def test_the_library_settings_hold_after_a_reset(dsn: str) -> None:
    """After the session is reset, the pool's own settings are set again: the library
    role and pgvector's iterative scans, as ``_configure`` sets them."""
    with timestone.Memory.open(dsn, pool_size=1) as mem:
        a, _ = _groups(mem)
        with mem.connection(a) as conn:
            conn.execute("SET hnsw.iterative_scan = off")
        pool = mem._db.pool  # pyright: ignore[reportPrivateUsage]
        with pool.connection() as conn:
            row = conn.execute(
                "SELECT current_user AS u, current_setting('hnsw.iterative_scan') AS scan"
            ).fetchone()
            conn.rollback()
    assert row == {"u": "timestone_app", "scan": "relaxed_order"}


def test_statements_the_library_prepared_survive_resets(dsn: str) -> None:
    """The reset drops the statements psycopg prepared on the connection; psycopg is told
    so each time, and prepares them again: blocks in a row (the statement that sets the
    group runs in each), past the five runs after which psycopg prepares a statement,
    and the library's writes and searches between them, never name one the session
    lost."""
    with timestone.Memory.open(dsn, pool_size=1) as mem:
        a, b = _groups(mem)
        for i in range(3):
            for _ in range(12):
                with mem.connection(a) as conn:
                    row = conn.execute("SELECT count(*) AS n FROM timestone.facts").fetchone()
                    assert row == {"n": i + 1}
            fact = timestone.FactInput("Mira", "VISITS", f"Town {i}")
            mem.add_facts(a, [fact], reference_time=_WHEN)
            found = mem.search(b, "Who directs the winery?", limit=1).facts
            assert [f.target for f in found] == [f"Winery of {b}"]
        for _ in range(6):  # psycopg prepares a statement at its sixth run
            mem.facts(a)
        with mem.connection(a) as conn:
            prepared = conn.execute(
                "SELECT count(*) AS n FROM pg_prepared_statements WHERE NOT from_sql"
            ).fetchone()
    assert prepared is not None
    assert prepared["n"] > 0  # prepared again since the last reset

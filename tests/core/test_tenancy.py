"""Tenancy is enforced by the database: raw SQL under the library role, not only the API."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import LiteralString

import psycopg
import pytest
from psycopg_pool import PoolTimeout
from sqlalchemy import exc as sqlalchemy_exc

import timestone
from timestone.db import _database as sync_db
from timestone.db import _database_async as aio_db
from timestone.db._database import APP_ROLE
from timestone.errors import (
    EmbedderError,
    InvalidGroup,
    InvalidInput,
    TimestoneError,
)
from timestone.search import _run as sync_search
from timestone.search._request import prepare_search
from timestone.search._run import search_hits

TABLES = ("episodes", "entities", "mentions", "assertions", "facts")


@pytest.fixture
def two_groups(memory: timestone.Memory) -> tuple[str, str]:
    a, b = "ta-" + uuid.uuid4().hex[:10], "tb-" + uuid.uuid4().hex[:10]
    for g in (a, b):
        memory.add_facts(
            g,
            [timestone.FactInput("Mira", "DIRECTS", f"Winery of {g}")],
            reference_time=datetime(2020, 1, 1, tzinfo=UTC),
        )
    return a, b


@pytest.fixture
def app_conn(
    dsn: str, memory: timestone.Memory
) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A raw connection acting as the library role, as the pool does (session-level role)."""
    del memory  # opened so that the schema and the role exist
    with psycopg.connect(dsn) as conn:
        conn.execute("SET ROLE timestone_app")
        conn.commit()
        yield conn


def _set_group(conn: psycopg.Connection[tuple[object, ...]], group: str) -> None:
    conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))


def _count(
    conn: psycopg.Connection[tuple[object, ...]], table: str, group: str | None = None
) -> int:
    from psycopg import sql

    query = sql.SQL("SELECT count(*) FROM timestone.{}").format(sql.Identifier(table))
    if group is not None:
        query = sql.SQL("{} WHERE group_id = {}").format(query, sql.Literal(group))
    row = conn.execute(query).fetchone()
    assert row is not None
    return int(str(row[0]))


def test_library_role_cannot_bypass_rls(app_conn: psycopg.Connection[tuple[object, ...]]) -> None:
    row = app_conn.execute(
        "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    assert row == ("timestone_app", False, False)
    # every table under row level security, which binds the library role: it neither owns
    # a table nor may act as its owner (to whom the policies do not apply, migration 0018)
    unbound = app_conn.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = 'timestone'::regnamespace"
        " AND relkind = 'r'"
        " AND (NOT relrowsecurity OR pg_has_role('timestone_app', relowner, 'MEMBER'))"
    ).fetchall()
    assert unbound == []


def test_pool_connections_run_as_library_role(memory: timestone.Memory, group: str) -> None:
    with memory._db.transaction(group, "checking the role") as conn:  # pyright: ignore[reportPrivateUsage]
        row = conn.execute("SELECT current_user AS u").fetchone()
    assert row is not None
    assert row["u"] == "timestone_app"


def test_no_group_reads_nothing(
    two_groups: tuple[str, str], app_conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    a, _ = two_groups
    for table in TABLES:
        assert _count(app_conn, table) == 0, table
        assert _count(app_conn, table, a) == 0, table


def test_no_group_cannot_write(app_conn: psycopg.Connection[tuple[object, ...]]) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        app_conn.execute(
            "INSERT INTO timestone.purges (group_id, episode_id, purged_at, rows_erased)"
            " VALUES ('anyone', gen_random_uuid(), now(), 0)"
        )


def test_group_a_cannot_read_b(
    two_groups: tuple[str, str], app_conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    a, b = two_groups
    _set_group(app_conn, a)
    for table in TABLES:
        assert _count(app_conn, table, a) > 0, table
        assert _count(app_conn, table, b) == 0, table
        assert _count(app_conn, table) == _count(app_conn, table, a), table


def test_group_a_cannot_write_or_change_b(
    two_groups: tuple[str, str], app_conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    a, b = two_groups
    _set_group(app_conn, a)
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        app_conn.execute(
            "INSERT INTO timestone.purges (group_id, episode_id, purged_at, rows_erased)"
            " VALUES (%s, gen_random_uuid(), now(), 0)",
            (b,),
        )
    app_conn.rollback()
    _set_group(app_conn, a)
    cur = app_conn.execute(
        "UPDATE timestone.facts SET expired_at = now() WHERE group_id = %s", (b,)
    )
    assert cur.rowcount == 0
    cur = app_conn.execute("DELETE FROM timestone.facts WHERE group_id = %s", (b,))
    assert cur.rowcount == 0


def test_rows_are_never_updated_in_place(
    two_groups: tuple[str, str], app_conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    a, _ = two_groups
    _set_group(app_conn, a)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        app_conn.execute("UPDATE timestone.facts SET fact = 'rewritten' WHERE group_id = %s", (a,))


def test_search_function_sees_only_the_group(
    two_groups: tuple[str, str], app_conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    a, b = two_groups
    rows = app_conn.execute(
        "SELECT name FROM timestone.similar_entities(%s)", (["mira"],)
    ).fetchall()
    assert rows == []  # no group set: nothing
    _set_group(app_conn, a)
    rows = app_conn.execute(
        "SELECT name FROM timestone.similar_entities(%s)", ([f"winery of {b}"],)
    ).fetchall()
    assert all(b not in str(r[0]) for r in rows)
    rows = app_conn.execute(
        "SELECT name FROM timestone.similar_entities(%s)", ([f"winery of {a}"],)
    ).fetchall()
    assert (f"Winery of {a}",) in rows


def test_api_reads_are_scoped(memory: timestone.Memory, two_groups: tuple[str, str]) -> None:
    a, b = two_groups
    assert [f.target for f in memory.facts(a)] == [f"Winery of {a}"]
    assert [f.target for f in memory.facts(b)] == [f"Winery of {b}"]
    assert memory.get_entity(a, f"Winery of {b}") is None


@pytest.mark.parametrize("bad", ["", 7, None, "has space", "x" * 129, "-lead", "a\x00b", ["g"]])
def test_bad_group_ids_are_refused(memory: timestone.Memory, bad: object) -> None:
    with pytest.raises(InvalidGroup):
        memory.facts(bad)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    with pytest.raises(InvalidGroup):
        memory.add_facts(
            bad,  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
            [timestone.FactInput("A", "R", "B")],
            reference_time=datetime(2020, 1, 1, tzinfo=UTC),
        )


@pytest.fixture
def one_connection(dsn: str, memory: timestone.Memory) -> Iterator[sync_db.Database]:
    """A pool of one connection: every search and check below uses the same session."""
    del memory
    db = sync_db.Database.open(dsn, max_size=1)
    yield db
    db.close()


def _session_state(db: sync_db.Database) -> tuple[bool, str, str, str, str]:
    with db.pool.connection() as conn:
        autocommit = conn.autocommit
        row = conn.execute(
            "SELECT coalesce(current_setting('timestone.group_id', true), '') AS g,"
            " current_setting('plan_cache_mode') AS ef, current_setting('join_collapse_limit') AS j,"
            " coalesce(current_setting('timestone.fts_ids', true), '') AS t"
        ).fetchone()
        conn.rollback()
    assert row is not None
    return autocommit, row["g"], row["ef"], row["j"], row["t"]


def test_a_search_leaves_its_connection_as_it_found_it(
    memory: timestone.Memory, two_groups: tuple[str, str], one_connection: sync_db.Database
) -> None:
    """A search runs in one implicit transaction (autocommit, one pipeline): its group and
    settings end with it, and the pooled connection goes back to transactions."""
    a, b = two_groups
    before = _session_state(one_connection)
    assert before == (False, "", "auto", "8", "")
    for g in (a, b, a):
        req = prepare_search("Who directs the winery?", scopes=("facts", "entities"))
        hits = search_hits(one_connection, memory.embedder, g, req)
        facts = {str(r["fact"]) for r in hits["facts"].rows.values()}
        assert facts == {f"Mira directs Winery of {g}."}
        assert _session_state(one_connection) == before


def test_a_failed_search_leaves_its_connection_usable(
    memory: timestone.Memory,
    two_groups: tuple[str, str],
    one_connection: sync_db.Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, _ = two_groups
    before = _session_state(one_connection)

    def failing(scope: str, req: object, dimension: int) -> tuple[bytes, tuple[str, ...]]:
        return b"SELECT 1 / (count(*) - count(*)) AS x FROM timestone.facts", ()

    req = prepare_search("Who directs the winery?", scopes=("facts", "episodes"))
    with monkeypatch.context() as patch:
        patch.setattr(sync_search, "statement", failing)
        with pytest.raises(TimestoneError, match="division by zero"):
            search_hits(one_connection, memory.embedder, a, req)
    assert _session_state(one_connection) == before
    hits = search_hits(one_connection, memory.embedder, a, req)
    assert {str(r["fact"]) for r in hits["facts"].rows.values()} == {f"Mira directs Winery of {a}."}


def test_a_search_whose_embedder_fails_leaves_its_connection_usable(
    memory: timestone.Memory,
    two_groups: tuple[str, str],
    one_connection: sync_db.Database,
) -> None:
    """The query is embedded while the full-text list is already on its way to the server,
    inside the search's pipeline: an embedder that fails there ends the search with its
    error, and the next search on the same session is whole."""
    a, _ = two_groups
    before = _session_state(one_connection)

    class Failing:
        name, dimension = memory.embedder.name, memory.embedder.dimension

        def embed(self, texts: object) -> list[list[float]]:
            raise EmbedderError("the embedding service is down")

        async def aembed(self, texts: object) -> list[list[float]]:
            raise EmbedderError("the embedding service is down")

    req = prepare_search("Who directs the winery?", scopes=("facts", "episodes"))
    with pytest.raises(EmbedderError, match="service is down"):
        search_hits(one_connection, Failing(), a, req)  # pyright: ignore[reportArgumentType]
    assert _session_state(one_connection) == before
    hits = search_hits(one_connection, memory.embedder, a, req)
    assert {str(r["fact"]) for r in hits["facts"].rows.values()} == {f"Mira directs Winery of {a}."}


@pytest.mark.parametrize("in_process", [True, False])
def test_only_an_embedder_of_this_process_embeds_on_the_search_connection(
    memory: timestone.Memory,
    two_groups: tuple[str, str],
    one_connection: sync_db.Database,
    in_process: bool,
) -> None:
    """An embedder that says it computes in this process embeds the query while the search
    holds its connection (the server ranks the full text meanwhile); any other, a service
    that may take long, is called before the connection is taken."""
    a, _ = two_groups
    held: list[bool] = []
    inner = memory.embedder

    class Probe:
        name, dimension = inner.name, inner.dimension
        in_process = False

        def embed(self, texts: list[str]) -> list[list[float]]:
            try:
                conn = one_connection.pool.getconn(timeout=0.05)
            except PoolTimeout:
                held.append(True)  # the search's: the pool has one
            else:
                one_connection.pool.putconn(conn)
                held.append(False)
            return inner.embed(texts)

        async def aembed(self, texts: list[str]) -> list[list[float]]:
            raise AssertionError("the blocking search embeds with embed")

    Probe.in_process = in_process
    req = prepare_search("Who directs the winery?")
    hits = search_hits(one_connection, Probe(), a, req)  # pyright: ignore[reportArgumentType]
    assert held == [in_process]
    assert {str(r["fact"]) for r in hits["facts"].rows.values()} == {f"Mira directs Winery of {a}."}


def test_a_search_whose_connection_dies_says_so(
    dsn: str,
    memory: timestone.Memory,
    two_groups: tuple[str, str],
    one_connection: sync_db.Database,
) -> None:
    """The server ends the pooled session before a search: the error is the server's
    (not the autocommit that could not be restored after it), and the pool replaces it."""
    a, _ = two_groups
    with one_connection.pool.connection() as conn:
        row = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()
        conn.rollback()
    assert row is not None
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (row["pid"],))
    req = prepare_search("Who directs the winery?", scopes=("facts",))
    # the server's own words, not the later failure to restore the session's autocommit
    with pytest.raises(TimestoneError, match=r"terminat|server closed the connection"):
        search_hits(one_connection, memory.embedder, a, req)
    hits = search_hits(one_connection, memory.embedder, a, req)
    assert {str(r["fact"]) for r in hits["facts"].rows.values()} == {f"Mira directs Winery of {a}."}


def _as_a_pooler_hands_it_over(db: sync_db.Database) -> None:
    """Drop the session's role and settings on the pool's one connection, as a pooler in
    transaction mode does: its next transaction runs on whichever server connection is
    free, which carries none of what this client set for its session."""
    with db.pool.connection() as conn:
        conn.execute("RESET ROLE")
        conn.execute("RESET jit")
        conn.commit()
        row = conn.execute(
            "SELECT current_user = session_user AS own, current_setting('jit') AS j"
        ).fetchone()
        conn.rollback()
    assert row == {"own": True, "j": "on"}  # the DSN's user: the schema's owner


def test_a_transaction_takes_the_library_role_itself(
    two_groups: tuple[str, str], one_connection: sync_db.Database
) -> None:
    a, _ = two_groups
    _as_a_pooler_hands_it_over(one_connection)
    with one_connection.transaction(a, "reading") as conn:
        row = conn.execute(
            "SELECT current_user AS u, current_setting('jit') AS j,"
            " (SELECT array_agg(DISTINCT group_id) FROM timestone.facts) AS groups"
        ).fetchone()
    # the policies bind the role, not the owner: no filter here, and only a's rows
    assert row == {"u": sync_db.APP_ROLE, "j": "off", "groups": [a]}
    with one_connection.pool.connection() as conn:  # the role ended with the transaction
        after = conn.execute("SELECT current_user = session_user AS own").fetchone()
        conn.rollback()
    assert after == {"own": True}


def test_a_search_takes_the_library_role_itself(
    memory: timestone.Memory,
    two_groups: tuple[str, str],
    one_connection: sync_db.Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, _ = two_groups
    _as_a_pooler_hands_it_over(one_connection)

    def reading(scope: str, req: object, dimension: int) -> tuple[bytes, tuple[str, ...]]:
        return (
            b"SELECT current_user::text AS id, current_setting('jit') AS jit,"
            b" (SELECT array_agg(DISTINCT group_id) FROM timestone.facts) AS groups",
            (),
        )

    req = prepare_search("Who directs the winery?", scopes=("facts",))
    with monkeypatch.context() as patch:
        patch.setattr(sync_search, "statement", reading)
        hits = search_hits(one_connection, memory.embedder, a, req)
    assert list(hits["facts"].rows.values()) == [
        {"id": sync_db.APP_ROLE, "jit": "off", "groups": [a]}
    ]
    req = prepare_search("Who directs the winery?", scopes=("facts", "entities"))
    found = search_hits(one_connection, memory.embedder, a, req)  # and the real statements
    assert {str(r["fact"]) for r in found["facts"].rows.values()} == {
        f"Mira directs Winery of {a}."
    }


def test_the_role_set_per_transaction_is_the_library_role() -> None:
    assert f"set_config('role', '{sync_db.APP_ROLE}', true)" in sync_db.TENANT_SETTINGS
    assert f"set_config('role', '{sync_db.APP_ROLE}', true)" in sync_search._SETTINGS  # pyright: ignore[reportPrivateUsage]


async def test_an_async_transaction_takes_the_library_role_itself(
    dsn: str, two_groups: tuple[str, str]
) -> None:
    a, _ = two_groups
    db = await aio_db.Database.aopen(dsn, max_size=1)
    try:
        async with db.pool.connection() as conn:  # as a pooler in transaction mode hands it
            await conn.execute("RESET ROLE")
            await conn.execute("RESET jit")
            await conn.commit()
        async with db.transaction(a, "reading") as conn:
            cur = await conn.execute(
                "SELECT current_user AS u, current_setting('jit') AS j,"
                " (SELECT array_agg(DISTINCT group_id) FROM timestone.facts) AS groups"
            )
            assert await cur.fetchone() == {"u": aio_db.APP_ROLE, "j": "off", "groups": [a]}
    finally:
        await db.close()


def test_a_pooled_connection_keeps_nothing_of_another_group(fresh_dsn: str) -> None:
    """After searches of two groups on one pooled connection, no setting the library role
    can read there names either group or tells its size (migration 0032: the text search
    kept the planner's statistics of every common group in session settings)."""
    alice, bob = "alice@example.com", "bob@example.com"
    with timestone.Memory.open(fresh_dsn) as mem:
        for g, size in ((alice, 3), (bob, 2)):
            mem.add_facts(
                g,
                [timestone.FactInput(f"Mira {i}", "DIRECTS", f"Winery {i}") for i in range(size)],
                reference_time=datetime(2020, 1, 1, tzinfo=UTC),
            )
        with psycopg.connect(fresh_dsn, autocommit=True) as owner:
            owner.execute("ANALYZE timestone.facts")
        db = sync_db.Database.open(fresh_dsn, max_size=1)
        try:
            req = prepare_search("Who directs the winery?", scopes=("facts", "entities"))
            for g, size in ((alice, 3), (bob, 2)):
                hits = search_hits(db, mem.embedder, g, req)
                assert len(hits["facts"].rows) == size
            with db.pool.connection() as conn:
                row = conn.execute("SELECT current_user AS u").fetchone()
                assert row == {"u": sync_db.APP_ROLE}
                listed = conn.execute(
                    "SELECT name, setting FROM pg_settings WHERE name LIKE 'timestone.%'"
                ).fetchall()
                # pg_settings leaves out settings no module defines: each name the code
                # and the migrations ever used, read one by one
                named = conn.execute(
                    "SELECT n AS name, current_setting(n, true) AS setting"
                    " FROM unnest(%s::text[]) AS n",
                    (sorted(_setting_names()),),
                ).fetchall()
                conn.rollback()
        finally:
            db.close()
    assert {"timestone.group_id", "timestone.dominant_group", "timestone.text_groups"} <= {
        r["name"] for r in named
    }
    for found in [*listed, *named]:
        # no group's id, no size, no word of its facts
        assert found["setting"] in (None, ""), found


def _setting_names() -> set[str]:
    """Every ``timestone.*`` setting named in the package's code and migrations."""
    root = Path(timestone.__file__).parent
    found: set[str] = set()
    for path in [*root.rglob("*.py"), *root.rglob("*.sql")]:
        # tables and functions too: their names are no settings, and read as NULL
        found.update(re.findall(r"timestone\.[a-z_]+", path.read_text(encoding="utf-8")))
    return found


# -- connections for the caller's own SQL (docs/sql.md) --------------------------------

_RECORD: LiteralString = (
    "INSERT INTO timestone.purges (group_id, episode_id, purged_at, rows_erased)"
    " VALUES (%s, gen_random_uuid(), now(), 0)"
)


def _at_rest(mem: timestone.Memory) -> dict[str, object] | None:
    """The session of the pool's one connection between blocks: its user, its group."""
    with mem._db.pool.connection() as conn:  # pyright: ignore[reportPrivateUsage]
        row = conn.execute(
            "SELECT current_user AS u, coalesce(current_setting('timestone.group_id', true), '')"
            " AS g, pg_backend_pid() AS pid"
        ).fetchone()
        conn.rollback()
    return row


def test_a_connection_for_own_sql_sees_and_writes_only_its_group(
    dsn: str, two_groups: tuple[str, str]
) -> None:
    a, b = two_groups
    with timestone.Memory.open(dsn, pool_size=1) as mem:
        with mem.connection(a) as conn:
            row = conn.execute(
                "SELECT current_user AS u,"
                " (SELECT array_agg(DISTINCT group_id) FROM timestone.facts) AS facts,"
                " (SELECT array_agg(DISTINCT group_id) FROM timestone.entities) AS entities,"
                " (SELECT count(*) FROM timestone.facts WHERE group_id = %s) AS other",
                (b,),
            ).fetchone()
            assert row == {"u": APP_ROLE, "facts": [a], "entities": [a], "other": 0}
            # the definer functions answer for the group too
            names = conn.execute(
                "SELECT name FROM timestone.similar_entities(%s, 5, 0.1)",
                ([f"winery of {a}", f"winery of {b}"],),
            ).fetchall()
            assert {r["name"] for r in names} == {f"Winery of {a}"}
            # what the library role may write to its own group, it may
            conn.execute(_RECORD, (a,))
            changed = conn.execute(
                "UPDATE timestone.facts SET expired_at = expired_at WHERE group_id = %s", (b,)
            )
            assert changed.rowcount == 0  # another group's rows are not there to change
        rest = _at_rest(mem)
        assert rest is not None
        assert (rest["u"], rest["g"]) == (APP_ROLE, "")  # the block's role and group ended
        with mem.connection(a) as conn:  # committed at the end of the block
            assert conn.execute("SELECT count(*) AS n FROM timestone.purges").fetchone() == {"n": 1}
        refused: list[tuple[LiteralString, tuple[str, ...]]] = [
            (_RECORD, (b,)),  # a row of another group
            ("UPDATE timestone.facts SET fact = 'rewritten' WHERE group_id = %s", (a,)),
            ("DELETE FROM timestone.meta WHERE key = %s", ("schema_version",)),
            ("ALTER TABLE timestone.facts DISABLE ROW LEVEL SECURITY", ()),
        ]
        for statement, params in refused:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                _write_in_a_block(mem, a, statement, params)
        with mem.connection(a) as conn:
            assert conn.execute("SELECT count(*) AS n FROM timestone.purges").fetchone() == {"n": 1}
        with pytest.raises(InvalidGroup), mem.connection("has space"):
            pass


def _write_in_a_block(
    mem: timestone.Memory, group: str, statement: LiteralString, params: tuple[str, ...]
) -> None:
    """A record of the group's own (rolled back with the block), then ``statement``."""
    with mem.connection(group) as conn:
        conn.execute(_RECORD, (group,))
        conn.execute(statement, params)


def test_a_connection_for_own_sql_goes_back_to_the_pool_as_it_came(
    dsn: str, two_groups: tuple[str, str]
) -> None:
    """Both settings are local to the block's transaction; a block that changed its session
    (a group or a role set for the session) does not hand them on: the session is reset
    and the pool's role set again (tests/core/test_lent_sessions.py tries the rest)."""
    a, b = two_groups
    with timestone.Memory.open(dsn, pool_size=1) as mem:
        before = _at_rest(mem)
        assert before is not None
        assert (before["u"], before["g"]) == (APP_ROLE, "")
        with mem.connection(a) as conn:
            conn.execute("SELECT 1")
        assert _at_rest(mem) == before  # the same connection, with no group, the pool's role
        with mem.connection(a) as conn:
            conn.execute("SELECT set_config('timestone.group_id', %s, false)", (b,))
            conn.execute("RESET ROLE")
        after = _at_rest(mem)
        assert after is not None
        assert (after["u"], after["g"]) == (APP_ROLE, "")
        assert after["pid"] == before["pid"]  # the same connection, its session reset
        assert [f.target for f in mem.facts(a)] == [f"Winery of {a}"]
        # an async memory's connection is bound the same way
        asyncio.run(_async_block(dsn, a))
    with (
        pytest.raises(InvalidInput, match=r"lending a connection.*this Memory is closed"),
        mem.connection(a),
    ):
        pass  # a closed memory's pool lends none


async def _async_block(dsn: str, group: str) -> None:
    amem = await timestone.AsyncMemory.open(dsn, pool_size=1)
    async with amem, amem.connection(group) as conn:
        cur = await conn.execute(
            "SELECT current_user AS u,"
            " (SELECT array_agg(DISTINCT group_id) FROM timestone.facts) AS groups"
        )
        assert await cur.fetchone() == {"u": APP_ROLE, "groups": [group]}


def test_a_sqlmodel_session_bound_to_a_group(dsn: str, two_groups: tuple[str, str]) -> None:
    """``models.group_session``: every transaction of the session sees only its group, on
    an engine whose own connections act as the schema's owner."""
    from sqlalchemy import func, text
    from sqlmodel import select

    from timestone.models import EntityRow, FactRow, engine, group_session

    a, b = two_groups
    owner = engine(dsn, pool_size=1, max_overflow=0)
    try:
        with owner.connect() as raw:  # the owner sees both groups
            found = raw.execute(
                text(
                    "SELECT count(DISTINCT group_id) FROM timestone.facts WHERE group_id IN (:a, :b)"
                ),
                {"a": a, "b": b},
            ).scalar_one()
            assert found == 2
        with group_session(owner, a) as session:
            facts = session.exec(select(FactRow).where(FactRow.expired_at.is_(None))).all()  # type: ignore[union-attr]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
            assert {(f.group_id, f.fact) for f in facts} == {(a, f"Mira directs Winery of {a}.")}
            session.commit()
            # a second transaction of the session is bound again
            names = session.exec(select(EntityRow.name).where(EntityRow.group_id == b)).all()
            assert names == []
            fact = session.exec(select(FactRow)).one()
            fact.fact = "rewritten"
            session.add(fact)
            with pytest.raises(sqlalchemy_exc.ProgrammingError, match="permission denied"):
                session.commit()
        with owner.connect() as raw:  # the engine's connection holds no role nor group
            row = raw.execute(
                text(
                    "SELECT current_user = session_user,"
                    " coalesce(current_setting('timestone.group_id', true), '')"
                )
            ).one()
            assert tuple(row) == (True, "")
            count = raw.execute(
                select(func.count()).select_from(FactRow).where(FactRow.group_id == a)  # pyright: ignore[reportArgumentType]
            ).scalar_one()
            assert count == 1  # unchanged
    finally:
        owner.dispose()
    with pytest.raises(InvalidGroup):
        group_session(owner, "")


def test_a_sqlmodel_session_in_autocommit_is_refused(dsn: str, two_groups: tuple[str, str]) -> None:
    """In autocommit the group would end with the session's first statement and the rest
    run as the owner, who sees every group: the session refuses to begin, reading nothing."""
    from sqlmodel import select

    from timestone.models import FactRow, engine, group_session

    message = "group_session needs transactions: its connection is in AUTOCOMMIT"
    owner = engine(dsn, isolation_level="AUTOCOMMIT")
    try:
        with (
            group_session(owner, two_groups[1]) as session,
            pytest.raises(InvalidInput, match=message),
        ):
            session.exec(select(FactRow.group_id)).all()
    finally:
        owner.dispose()
    owner = engine(dsn)
    try:
        with (
            group_session(owner, two_groups[1]) as session,
            pytest.raises(InvalidInput, match=message),
        ):
            session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
    finally:
        owner.dispose()

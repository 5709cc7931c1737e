"""A server, database or role whose defaults are not the embedded server's: the library
pins what its SQL and psycopg's reading of it rely on, and refuses, naming the way out,
a database it cannot keep text or writes in.

Each database here is made with the defaults a managed server or an administrator may
set (``ALTER DATABASE ... SET``), then opened, migrated and written as any other; its
reads are compared with the same writes on a database with the server's defaults.
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import timestone
from timestone import EdgeType, Ontology
from timestone.errors import DatabaseError, MissingExtension

ONE = Ontology(edge_types=[EdgeType("LIVES_IN", cardinality="one")])
GROUP = "settings"
# what a server set up elsewhere may hold as a database's defaults, each seen to break a
# read or a write when the library did not pin it
ODD_DEFAULTS = {
    "TimeZone": "America/New_York",
    "DateStyle": "SQL, DMY",
    "standard_conforming_strings": "off",
    "row_security": "off",
    "default_transaction_isolation": "serializable",
    "client_encoding": "LATIN1",
}


def _y(year: int, month: int = 1) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _database(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])


@pytest.fixture
def odd_dsn(fresh_dsn: str) -> str:
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        for name, value in ODD_DEFAULTS.items():
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                    sql.Identifier(_database(fresh_dsn)), sql.Identifier(name), sql.Literal(value)
                )
            )
    return fresh_dsn


def _history(mem: timestone.Memory) -> list[tuple[object, ...]]:
    """Writes of slots, names outside Latin-1 and a backfill, then every read of them."""
    mem.add_facts(
        GROUP,
        [{"source": "Zoë", "relation": "LIVES_IN", "target": "München"}],
        reference_time=_y(2020),
    )
    mem.add_facts(
        GROUP,
        [{"source": "Zoë", "relation": "LIVES_IN", "target": "東京"}],
        reference_time=_y(2023, 7),
    )
    mem.add_facts(
        GROUP,
        [{"source": "Zoë", "relation": "LIVES_IN", "target": "Ελλάδα"}],
        reference_time=_y(2018),
    )
    facts = mem.facts(GROUP, valid_at=None)
    found = mem.search(GROUP, "Where does Zoë live? (東京\\München)", valid_at=None)
    return [
        *((f.source, f.target, f.fact, f.valid_at, f.invalid_at) for f in facts),
        *((f.target, f.valid_at) for f in found.facts),
        *((f.target,) for f in mem.facts(GROUP, valid_at=_y(2021))),
        # the items' ids are each database's own
        (re.sub(r"\[F-\w+\]", "[F]", mem.context(GROUP, "Zoë", valid_at=None).as_prompt()),),
    ]


def test_a_databases_odd_defaults_change_no_read(odd_dsn: str, fresh_dsn: str, dsn: str) -> None:
    """Times come back in UTC (the context prints UTC days), dates parse, text keeps its
    characters, the functions with backslashes in their bodies run, row level security
    applies, and writes to one slot from many threads all land, as on a default one."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        plain = "t_plain_" + _database(fresh_dsn)[2:]
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(plain)))
    plain_dsn = make_conninfo(dsn, dbname=plain)
    try:
        with timestone.Memory.open(plain_dsn, ontology=ONE) as mem:
            expected = _history(mem)
        with timestone.Memory.open(odd_dsn, ontology=ONE) as mem:
            got = _history(mem)
            [now] = mem.facts(GROUP, source="Zoë")
            errors: list[BaseException] = []

            def move(i: int) -> None:
                try:
                    mem.add_facts(
                        GROUP,
                        [{"source": "Zoë", "relation": "LIVES_IN", "target": f"Town {i}"}],
                        reference_time=_y(2024, 1 + i),
                    )
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=move, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == []
            assert [f.target for f in mem.facts(GROUP, source="Zoë")] == ["Town 7"]
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(plain)))
    assert got == expected
    assert (now.target, now.valid_at) == ("東京", _y(2023, 7))
    offset = now.valid_at.utcoffset()
    assert offset is not None
    assert offset.total_seconds() == 0
    prompt = str(got[-1][0])
    assert "2023-07-01" in prompt
    assert "2023-06-30" not in prompt


def test_a_database_holding_text_in_another_encoding_is_refused(dsn: str) -> None:
    name = "t_ascii_" + datetime.now(UTC).strftime("%H%M%S%f")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE DATABASE {} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C'"
                " TEMPLATE template0"
            ).format(sql.Identifier(name))
        )
    try:
        with pytest.raises(DatabaseError, match="the database's encoding is SQL_ASCII"):
            timestone.Memory.open(make_conninfo(dsn, dbname=name))
        with psycopg.connect(make_conninfo(dsn, dbname=name)) as conn:
            held = conn.execute("SELECT to_regnamespace('timestone') IS NULL").fetchone()
        assert held == (True,)  # nothing written
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def test_a_read_only_database_is_refused_naming_it(fresh_dsn: str) -> None:
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(
                sql.Identifier(_database(fresh_dsn))
            )
        )
    with pytest.raises(DatabaseError, match="read only for this user or database"):
        timestone.Memory.open(fresh_dsn)


def test_extensions_in_another_schema_are_refused_with_the_statement_that_moves_them(
    fresh_dsn: str,
) -> None:
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA extensions")
        conn.execute("CREATE EXTENSION vector SCHEMA extensions")
    with pytest.raises(
        MissingExtension,
        match=r"vector in the schema extensions: .*ALTER EXTENSION vector SET SCHEMA public",
    ):
        timestone.Memory.open(fresh_dsn)
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute("ALTER EXTENSION vector SET SCHEMA public")
    timestone.Memory.open(fresh_dsn).close()


def test_a_schema_before_pg_catalog_cannot_stand_in_for_the_settings(fresh_dsn: str) -> None:
    """A search path that lists a schema before ``pg_catalog``, holding a ``set_config``
    that sets nothing and a clock of its own: the block of ``connection()`` still runs
    as the library's role and sees its group only, and a write's time is the server's."""
    timestone.Memory.open(fresh_dsn).close()  # migrated under the server's defaults
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA shadow")
        conn.execute(
            "CREATE FUNCTION shadow.set_config(text, text, boolean) RETURNS text"
            " LANGUAGE sql AS $$ SELECT ''::text $$"
        )
        conn.execute(
            "CREATE FUNCTION shadow.clock_timestamp() RETURNS timestamptz"
            " LANGUAGE sql AS $$ SELECT '2001-01-01T00:00:00Z'::timestamptz $$"
        )
        conn.execute("GRANT USAGE ON SCHEMA shadow TO PUBLIC")
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET search_path = shadow, pg_catalog, public").format(
                sql.Identifier(_database(fresh_dsn))
            )
        )
    with timestone.Memory.open(fresh_dsn, ontology=ONE) as mem:
        for group in ("a", "b"):
            mem.add_facts(
                group,
                [{"source": "Zoë", "relation": "LIVES_IN", "target": group}],
                reference_time=_y(2020),
            )
        [fact] = mem.facts("a")
        assert fact.created_at.year > 2001
        with mem.connection("a") as conn:
            row = conn.execute(
                "SELECT current_user AS who, count(DISTINCT group_id) AS groups"
                " FROM timestone.facts"
            ).fetchone()
        assert row == {"who": "timestone_app", "groups": 1}
        assert [f.target for f in mem.search("a", "Zoë").facts] == ["a"]

"""Functions that run as the schema owner trust nothing of the caller's session.

A ``SECURITY DEFINER`` function runs as the owner of the schema, to whom row level
security does not apply. If its ``search_path`` does not list ``pg_temp`` (last),
PostgreSQL searches the session's temporary schema first for tables and views, and a
session of the library role can put a temporary view named ``pg_class`` in front of
the catalog, whose column calls a function of its own: that function then runs as the
owner. Every definer function is found through ``pg_proc`` here, not from a list, so
that one added later is held to the same rules.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import LiteralString, cast

import psycopg
import pytest
from psycopg import sql

import timestone
from timestone.db._database import APP_ROLE

A, B = "alice@example.com", "bob@example.com"
PATH = "pg_catalog, public, pg_temp"

# How each definer function is called in the shadowing test, by name. A definer function
# missing here fails that test: add the calls that reach every catalog read it makes.
_SEARCH_TEXT = sql.SQL(
    "SELECT count(*) FROM timestone.search_text({}, websearch_to_tsquery('english', {}),"
    " {}, {}, NULL, NULL, 30)"
)
_NOW = datetime.now(UTC)
CALLS: dict[str, list[sql.SQL | sql.Composed]] = {
    "search_text": [
        _SEARCH_TEXT.format(kind, question, as_of, valid_at)
        for kind in ("facts", "entities", "episodes", "told episodes", "communities")
        for question in ("Mira directs", "Mira directs the winery of Alice in Lyon")
        for as_of, valid_at in ((None, _NOW), (_NOW, None), (None, None))
    ],
    "similar_entities": [
        sql.SQL("SELECT count(*) FROM timestone.similar_entities(ARRAY['mira'], 5, 0.1)")
    ],
    "search_terms": [
        sql.SQL(
            "SELECT count(*) FROM timestone.search_terms({}, ARRAY['mira', 'direct', 'winery'],"
            " {}, {}, NULL, NULL, 30)"
        ).format(kind, as_of, valid_at)
        for kind in ("facts", "entities", "episodes", "told episodes", "communities")
        for as_of, valid_at in ((None, _NOW), (_NOW, None), (None, None))
    ],
    "known_names": [
        sql.SQL("SELECT count(*) FROM timestone.known_names(ARRAY['Mira', 'Winery', 'Lyon'])")
    ],
    "group_rows": [sql.SQL("SELECT timestone.group_rows('facts')")],
}
# The term statistics' trigger functions, and note_terms that they call, run when the
# library role writes a row of a table that carries them.
_COMMUNITY = sql.SQL(
    "WITH x AS (INSERT INTO timestone.communities (group_id, id, name, members, created_at)"
    " VALUES (current_setting('timestone.group_id'), gen_random_uuid(), 'Mira directs',"
    " ARRAY[gen_random_uuid()], now()) RETURNING 1) SELECT count(*) FROM x"
)
_EPISODE = sql.SQL(
    "WITH x AS (INSERT INTO timestone.episodes (group_id, id, name, content, source,"
    " reference_time, idempotency_key, recorded_at, created_at)"
    " VALUES (current_setting('timestone.group_id'), gen_random_uuid(), 'note',"
    " 'Mira directs the winery', 'text', now(), gen_random_uuid()::text, now(), now())"
    " RETURNING 1) SELECT count(*) FROM x"
)
CALLS["count_terms"] = [_COMMUNITY]
CALLS["count_episode_terms"] = [_EPISODE]
CALLS["note_terms"] = [_COMMUNITY, _EPISODE]


@pytest.fixture(scope="module")
def two_tenants(module_dsn: str) -> str:
    """A database holding two groups named by e-mail addresses, analyzed (so that the
    planner's statistics, which the text search reads, name them)."""
    with timestone.Memory.open(module_dsn) as mem:
        for group, size in ((A, 30), (B, 20)):
            mem.add_facts(
                group,
                [
                    timestone.FactInput(f"Mira {i}", "DIRECTS", f"Winery {i} of {group}")
                    for i in range(size)
                ],
                reference_time=datetime(2020, 1, 1, tzinfo=UTC),
            )
    with psycopg.connect(module_dsn, autocommit=True) as conn:
        conn.execute("ANALYZE timestone.facts")
        conn.execute("ANALYZE timestone.entities")
        conn.execute("ANALYZE timestone.episodes")
    return module_dsn


def _definer_functions(conn: psycopg.Connection[tuple[object, ...]]) -> dict[str, list[str]]:
    """Every SECURITY DEFINER function of the database outside the system schemas, by
    name: its signature and its settings."""
    rows = conn.execute(
        "SELECT p.proname, p.oid::regprocedure::text, coalesce(p.proconfig, '{}')"
        " FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
        " WHERE p.prosecdef AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
    ).fetchall()
    found: dict[str, list[str]] = {}
    for name, signature, config in rows:
        found[str(name)] = [str(signature), *(str(c) for c in config)]  # type: ignore[union-attr]
    return found


def test_every_definer_function_lists_pg_temp_last(two_tenants: str) -> None:
    with psycopg.connect(two_tenants) as conn:
        definers = _definer_functions(conn)
        assert {"search_text", "similar_entities", "search_terms", "note_terms"} <= set(definers)
        for name, (signature, *config) in definers.items():
            paths = [c.removeprefix("search_path=") for c in config if c.startswith("search_path=")]
            assert paths == [PATH], (name, signature, config)
        # and any other function of the schema that pins a path (index_query runs as the
        # owner when search_text calls it)
        rows = conn.execute(
            "SELECT p.oid::regprocedure::text, c.setting FROM pg_proc AS p,"
            " unnest(p.proconfig) AS c(setting)"
            " WHERE p.pronamespace = 'timestone'::regnamespace"
            " AND c.setting LIKE 'search\\_path=%'"
        ).fetchall()
        assert len(rows) >= 5
        assert {str(setting) for _, setting in rows} == {f"search_path={PATH}"}, rows


def test_definer_functions_name_the_catalogs_they_read_with_their_schema(two_tenants: str) -> None:
    with psycopg.connect(two_tenants) as conn:
        catalogs = {
            str(r[0])
            for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = 'pg_catalog'::regnamespace"
                " AND relkind IN ('r', 'v')"
            ).fetchall()
        }
        sources = conn.execute(
            "SELECT p.oid::regprocedure::text, p.prosrc FROM pg_proc AS p"
            " JOIN pg_namespace AS n ON n.oid = p.pronamespace"
            " WHERE p.prosecdef AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
    assert len(sources) >= 3
    for signature, source in sources:
        for name in re.findall(r"(?<![\w.])(pg_[a-z_]+)\b(?!\s*\()", str(source)):
            assert name not in catalogs, (signature, name)


def test_no_function_of_the_schema_is_executable_by_everyone(two_tenants: str) -> None:
    """Only what the library calls is granted, to the library role by name (a migration
    that adds a function revokes ``PUBLIC``'s EXECUTE, which functions start with)."""
    query = (
        "SELECT p.oid::regprocedure::text FROM pg_proc AS p"
        " WHERE p.pronamespace = 'timestone'::regnamespace"
        " AND has_function_privilege('public', p.oid, 'EXECUTE')"
    )
    with psycopg.connect(two_tenants) as conn:
        assert conn.execute(query).fetchall() == []
        # the check sees one that does not
        conn.execute("CREATE FUNCTION timestone.later() RETURNS int LANGUAGE sql RETURN 1")
        assert conn.execute(query).fetchall() == [("timestone.later()",)]
        conn.rollback()


def test_the_library_role_cannot_create_objects_on_the_definer_path(two_tenants: str) -> None:
    """Functions and operators are looked up in ``pg_catalog`` and ``public`` (where the
    extensions live): the library role can create nothing there to put in their way."""
    with psycopg.connect(two_tenants) as conn:
        rows = conn.execute(
            "SELECT n.nspname, has_schema_privilege(%s, n.oid, 'CREATE') FROM pg_namespace AS n"
            " WHERE n.nspname IN ('pg_catalog', 'public', 'timestone') ORDER BY 1",
            (APP_ROLE,),
        ).fetchall()
    assert rows == [("pg_catalog", False), ("public", False), ("timestone", False)]


# A temporary function of the caller's that refuses to run as anyone but the library role:
# it raises with the user it ran as, so a definer function that reads a shadowing view
# fails the call with that name.
_SPY = """
CREATE FUNCTION pg_temp.spy() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF current_user <> 'timestone_app' THEN
        RAISE EXCEPTION 'a temporary object of the caller ran as %', current_user;
    END IF;
    RETURN true;
END
$$
"""


def _shadow_every_catalog(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """As the library role, a temporary view in front of every table and view of
    ``pg_catalog`` and ``public``, each calling the spy for each row it gives; returns how
    many. ``security_invoker``: the view reads the catalog as whoever reads the view."""
    conn.execute(_SPY)
    rows = conn.execute(
        "SELECT n.nspname::text, c.relname::text, array_agg(a.attname::text ORDER BY a.attnum),"
        " array_agg(CASE a.atttypid WHEN 'anyarray'::regtype THEN '::text::text[]'"
        " WHEN 'pg_statistic[]'::regtype THEN '::text' ELSE '' END ORDER BY a.attnum)"
        " FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " JOIN pg_attribute AS a ON a.attrelid = c.oid"
        " WHERE n.nspname IN ('pg_catalog', 'public')"
        " AND c.relkind IN ('r', 'v', 'm', 'f', 'p') AND a.attnum > 0 AND NOT a.attisdropped"
        " GROUP BY n.nspname, c.relname"
    ).fetchall()
    for schema, relname, column_list, cast_list in rows:
        columns = cast("list[str]", column_list)
        casts = cast("list[LiteralString]", cast_list)
        # a view cannot have a column of the pseudo-type anyarray (pg_stats' values), nor
        # of a type that holds one: text[] reads the same through the casts the functions
        # use, and text for the rest
        select = sql.SQL(", ").join(
            sql.SQL("x.{c}{cast} AS {c}").format(c=sql.Identifier(c), cast=sql.SQL(to))
            for c, to in zip(columns, casts, strict=True)
        )
        conn.execute(
            sql.SQL(
                "CREATE TEMP VIEW {v} WITH (security_invoker = true) AS"
                " SELECT {s} FROM {real} AS x WHERE pg_temp.spy()"
            ).format(
                v=sql.Identifier(str(relname)),
                s=select,
                real=sql.Identifier(str(schema), str(relname)),
            )
        )
    return len(rows)


def test_a_temporary_object_of_the_caller_never_runs_as_the_owner(two_tenants: str) -> None:
    with psycopg.connect(two_tenants, autocommit=True) as conn:
        definers = _definer_functions(conn)
        assert set(definers) <= set(CALLS), (
            f"no calls written for the definer function(s) {set(definers) - set(CALLS)}: "
            "add them to CALLS"
        )
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(APP_ROLE)))
        conn.execute("SELECT set_config('timestone.group_id', %s, false)", (A,))
        assert _shadow_every_catalog(conn) > 100
        # the shadows are in place: the caller's own unqualified reads go through them
        row = conn.execute(
            "SELECT count(*) FROM pg_class"
            " WHERE relnamespace = pg_my_temp_schema() AND relname IN ('pg_class', 'pg_stats')"
        ).fetchone()
        assert row == (2,)
        answered = 0
        for name in definers:
            for call in CALLS[name]:
                try:
                    row = conn.execute(call).fetchone()
                except psycopg.errors.RaiseException as exc:
                    pytest.fail(f"{name}: {exc} ({call})")
                assert row is not None
                answered += int(str(row[0]))
        assert answered > 0  # the calls reached the group's rows

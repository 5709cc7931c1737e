"""A schema owned by an ordinary user, as on a managed Postgres.

The embedded server connects as a superuser, which row level security never
applies to. On a managed server the DSN's user is an ordinary role that owns
the schema, and the ``SECURITY DEFINER`` functions run as that owner: if row
level security applied to the owner, the text match (``@@``) and the trigram
match (``%``) could not be index conditions (they are not leakproof).
These tests open a memory as such a user.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import timestone
from timestone import FactInput
from timestone.errors import InvalidInput

T0 = datetime(2020, 1, 1, tzinfo=UTC)
PEOPLE = 1500


@dataclass(frozen=True)
class Owned:
    dsn: str  # the ordinary owner's
    mem: timestone.Memory
    big: str  # a group of PEOPLE facts
    small: str  # a group of one fact


@pytest.fixture(scope="module")
def owned(module_dsn: str) -> Iterator[Owned]:
    role = "owner_" + uuid.uuid4().hex[:8]
    dbname = str(conninfo_to_dict(module_dsn)["dbname"])
    with psycopg.connect(module_dsn, autocommit=True) as conn:
        for ext in ("vector", "pg_trgm", "btree_gist"):
            conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(ext)))
        conn.execute(
            "DO $r$ BEGIN CREATE ROLE timestone_app NOLOGIN NOSUPERUSER NOBYPASSRLS;"
            " EXCEPTION WHEN duplicate_object THEN NULL; END $r$"
        )
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER").format(sql.Identifier(role)))
        # what an administrator runs for a user who may not create roles (README)
        conn.execute(sql.SQL("GRANT timestone_app TO {}").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(dbname), sql.Identifier(role)
            )
        )
    dsn = make_conninfo(module_dsn, user=role)
    big, small = "big-" + uuid.uuid4().hex[:8], "small-" + uuid.uuid4().hex[:8]
    try:
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            assert row.fetchone() == (False,)
        mem = timestone.Memory.open(dsn)
        try:
            facts = [
                FactInput(f"Walker {i:05d}", "WORKS_AT", f"Quarry {i % 97:03d}")
                for i in range(PEOPLE)
            ]
            for start in range(0, PEOPLE, 500):
                mem.add_facts(big, facts[start : start + 500], reference_time=T0)
            mem.add_facts(small, [FactInput("Mira", "DIRECTS", "Lighthouse")], reference_time=T0)
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("ANALYZE timestone.facts")
                conn.execute("ANALYZE timestone.entities")
            yield Owned(dsn, mem, big, small)
        finally:
            mem.close()
    finally:
        with psycopg.connect(module_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _scans(conn: psycopg.Connection[tuple[object, ...]], table: str) -> tuple[int, int]:
    """Sequential and index scans of ``table`` in this transaction so far."""
    row = conn.execute(
        "SELECT seq_scan, idx_scan FROM pg_stat_xact_all_tables WHERE relid = %s::regclass",
        (f"timestone.{table}",),
    ).fetchone()
    assert row is not None
    return int(str(row[0])), int(str(row[1]))


def test_the_owner_is_an_ordinary_user_and_owns_the_schema(owned: Owned) -> None:
    with psycopg.connect(owned.dsn) as conn:
        row = conn.execute(
            "SELECT r.rolsuper, r.rolbypassrls, n.nspowner = r.oid FROM pg_roles AS r,"
            " pg_namespace AS n WHERE r.rolname = current_user AND n.nspname = 'timestone'"
        ).fetchone()
    assert row == (False, False, True)


def test_the_text_and_trigram_functions_read_their_indexes(owned: Owned) -> None:
    with psycopg.connect(owned.dsn) as conn:
        conn.execute("SET ROLE timestone_app")
        conn.execute("SELECT set_config('timestone.group_id', %s, true)", (owned.big,))
        found = conn.execute(
            "SELECT count(*) FROM timestone.search_text('facts',"
            " websearch_to_tsquery('english', 'walker 00042'), NULL, NULL, NULL, NULL, 30)"
        ).fetchone()
        assert found == (1,)
        # no scan of the table: the open and the closed periods' text indexes
        assert _scans(conn, "facts") == (0, 2)
        names = conn.execute(
            "SELECT name FROM timestone.similar_entities(%s::text[], 5, 0.9::real)",
            (["walker 00042"],),
        ).fetchall()
        assert names == [("Walker 00042",)]
        seq, idx = _scans(conn, "entities")
        assert seq == 0
        assert idx >= 1


def test_the_library_role_still_sees_one_group(owned: Owned) -> None:
    with psycopg.connect(owned.dsn) as conn:
        conn.execute("SET ROLE timestone_app")
        assert conn.execute("SELECT count(*) FROM timestone.facts").fetchone() == (0,)
        conn.execute("SELECT set_config('timestone.group_id', %s, true)", (owned.small,))
        assert conn.execute("SELECT count(*) FROM timestone.facts").fetchone() == (1,)
    hits = owned.mem.search(owned.small, "Walker 00042 quarry", limit=10)
    assert [f.fact for f in hits.facts] == ["Mira directs Lighthouse."]
    found = owned.mem.search(owned.big, "Walker 00042", limit=3)
    assert "Walker 00042" in [f.source for f in found.facts]
    with pytest.raises(InvalidInput):
        owned.mem.search(owned.big, "", limit=3)


def test_the_owner_loads_in_bulk(owned: Owned) -> None:
    """``bulk_load`` acts as the schema owner, dropping the vector indexes and building
    them again: an ordinary owner may."""
    from timestone.db._embedding import VECTOR_INDEXES

    group = "bulk-" + uuid.uuid4().hex[:8]
    with owned.mem.bulk_load(maintenance_work_mem="64MB"):
        owned.mem.add_facts(group, [FactInput("Ada", "WROTE", "Notes")], reference_time=T0)
    with psycopg.connect(owned.dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
            " JOIN pg_am AS a ON a.oid = c.relam WHERE a.amname = 'hnsw' AND i.indisvalid"
            " AND c.relnamespace = 'timestone'::regnamespace"
        ).fetchall()
    assert {r[0] for r in rows} == {name for name, *_ in VECTOR_INDEXES}
    assert [f.fact for f in owned.mem.search(group, "Ada wrote", limit=3).facts] == [
        "Ada wrote Notes."
    ]


def test_the_owner_rebuilds_the_vector_indexes_and_no_one_else(
    owned: Owned, module_dsn: str
) -> None:
    """``REINDEX INDEX CONCURRENTLY`` as the ordinary owner; a user that only holds the
    library role is refused by a ``DatabaseError`` that says whom it takes."""
    from timestone.errors import DatabaseError
    from timestone.write._bulk import rebuild_vector_indexes

    took = owned.mem.rebuild_vector_indexes(
        indexes=["facts_embedding_hnsw"], maintenance_work_mem="64MB"
    )
    assert list(took) == ["facts_embedding_hnsw"]
    assert [f.fact for f in owned.mem.search(owned.small, "Mira directs", limit=3).facts] == [
        "Mira directs Lighthouse."
    ]
    reader = "reader_" + uuid.uuid4().hex[:8]
    with psycopg.connect(module_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(reader)))
        conn.execute(sql.SQL("GRANT timestone_app TO {}").format(sql.Identifier(reader)))
    try:
        with pytest.raises(DatabaseError, match="takes the owner of the timestone schema"):
            rebuild_vector_indexes(make_conninfo(owned.dsn, user=reader))
    finally:
        with psycopg.connect(module_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(reader)))

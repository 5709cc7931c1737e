"""The SQLModel classes mirror the migrated schema, column for column."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import psycopg
import pytest
from pgvector.sqlalchemy import Vector  # pyright: ignore[reportMissingTypeStubs]
from psycopg import sql
from sqlalchemy import BigInteger, Boolean, DateTime, Integer, Interval, Text
from sqlalchemy.dialects.postgresql import ARRAY, JSON, JSONB, TSVECTOR, UUID
from sqlalchemy.types import TypeEngine

import timestone
from timestone import models


def _udt(column_type: TypeEngine[object]) -> str:
    if isinstance(column_type, ARRAY):
        item: TypeEngine[object] = column_type.item_type  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
        return "_" + _udt(item)
    for kind, name in (
        (Vector, "vector"),
        (TSVECTOR, "tsvector"),
        (JSONB, "jsonb"),
        (JSON, "json"),
        (UUID, "uuid"),
        (BigInteger, "int8"),
        (Boolean, "bool"),
        (Interval, "interval"),
        (DateTime, "timestamptz"),
        (Integer, "int4"),
        (Text, "text"),
    ):
        if isinstance(column_type, kind):
            return name
    raise AssertionError(f"unmapped column type {column_type!r}")


def test_sqlmodel_classes_mirror_the_migrated_schema(memory: timestone.Memory, dsn: str) -> None:
    del memory  # opened so that the schema is migrated
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name, udt_name, is_nullable"
            " FROM information_schema.columns WHERE table_schema = 'timestone'"
        ).fetchall()
    in_db: dict[str, dict[str, tuple[str, bool]]] = {}
    for table, column, udt, nullable in rows:
        in_db.setdefault(table, {})[column] = (udt, nullable == "YES")

    in_models: dict[str, dict[str, tuple[str, bool]]] = {}
    for table in models.TimestoneModel.metadata.sorted_tables:
        if table.schema != "timestone":
            continue
        in_models[table.name] = {
            c.name: (_udt(c.type), bool(c.nullable) and not c.primary_key) for c in table.columns
        }
    assert set(in_models) == set(in_db)
    for table, columns in in_db.items():
        assert in_models[table] == columns, table


def test_every_gin_index_keeps_a_short_pending_list(memory: timestone.Memory, dsn: str) -> None:
    # a GIN pending list is read in full by every search until it is merged: the default
    # 4 MB made full-text lookups several times slower under steady ingestion
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, coalesce(c.reloptions, '{}') FROM pg_class AS c"
            " JOIN pg_index AS i ON i.indexrelid = c.oid"
            " JOIN pg_am AS am ON am.oid = c.relam"
            " WHERE c.relnamespace = 'timestone'::regnamespace AND am.amname = 'gin'"
            " AND NOT EXISTS (SELECT 1 FROM unnest(c.reloptions) AS o"
            "  WHERE o = 'gin_pending_list_limit=256')"
        ).fetchall()
        assert rows == []
        count = conn.execute(
            "SELECT count(*) FROM pg_class AS c JOIN pg_am AS am ON am.oid = c.relam"
            " WHERE c.relnamespace = 'timestone'::regnamespace AND am.amname = 'gin'"
        ).fetchone()
        assert count is not None
        assert count[0] >= 6  # the query does see the GIN indexes


def test_every_table_with_a_vector_index_is_vacuumed_at_one_percent_dead(
    memory: timestone.Memory, dsn: str
) -> None:
    # an HNSW index keeps a dead row version until a vacuum and every scan near it reads
    # it: after another tenant's 28,000 rows were purged from the 1M-fact benchmark
    # database (3%, below the default 20%), a 1,128-fact tenant's vector list read 6.8
    # ms at p50 against 1.3 once vacuumed (migration 0022)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT DISTINCT t.relname, coalesce(t.reloptions, '{}') FROM pg_index AS i"
            " JOIN pg_class AS c ON c.oid = i.indexrelid"
            " JOIN pg_am AS am ON am.oid = c.relam"
            " JOIN pg_class AS t ON t.oid = i.indrelid"
            " WHERE t.relnamespace = 'timestone'::regnamespace AND am.amname = 'hnsw'"
            " ORDER BY 1"
        ).fetchall()
    assert [name for name, _ in rows] == ["communities", "entities", "episodes", "facts"]
    for name, options in rows:
        assert "autovacuum_vacuum_scale_factor=0.01" in options, name
        assert "autovacuum_vacuum_threshold=1000" in options, name


# the full-text indexes a search of facts or episodes reads (migration 0021)
WRITTEN_THROUGH = ("facts_fts_open", "facts_fts_closed", "episodes_fts")


def test_the_text_indexes_searches_read_keep_no_pending_list(fresh_dsn: str) -> None:
    # every lookup reads a GIN pending list in full: a search of the 100k benchmark
    # database took 7.4 to 7.7 ms at p50 with 1,300 facts in it against 6.4 to 6.7 merged
    ontology = timestone.Ontology(edge_types=[timestone.EdgeType("WORKS_AT", cardinality="one")])
    with timestone.Memory.open(fresh_dsn, ontology=ontology) as mem:
        start = datetime(2020, 1, 1, tzinfo=UTC)
        for year in range(3):  # each year closes the job before: open and closed periods
            mem.add_facts(
                "g",
                [timestone.FactInput(f"Person {i}", "WORKS_AT", f"Firm {year}") for i in range(40)],
                reference_time=start.replace(year=2020 + year),
            )
        mem.add_document(
            "g",
            "doc://note",
            "A note on the firms and the people who work there.",
            reference_time=start,
        )
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pgstattuple")
        for name in WRITTEN_THROUGH:
            row = conn.execute(
                "SELECT (pgstatginindex(%s::regclass)).pending_tuples,"
                " (SELECT count(*) FROM timestone.facts WHERE expired_at IS NULL"
                "  AND invalid_at IS NOT NULL) AS closed, c.reloptions"
                " FROM pg_class AS c WHERE c.oid = %s::regclass",
                (f"timestone.{name}", f"timestone.{name}"),
            ).fetchone()
            assert row is not None
            pending, closed, options = row
            assert closed == 80  # the closed index was written to
            assert pending == 0, name
            assert "fastupdate=off" in options, name


def test_text_search_plans_its_query_per_call(memory: timestone.Memory, dsn: str) -> None:
    # searches run with generic plans, and that setting reaches into the function: a
    # generic plan of its query intersects the text match with every row of the group
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT proconfig FROM pg_proc"
            " WHERE oid = 'timestone.search_text(text, tsquery, timestamptz, timestamptz,"
            " text[], text[], integer)'::regprocedure"
        ).fetchone()
    assert row is not None
    assert "plan_cache_mode=force_custom_plan" in row[0]


def _version(
    conn: psycopg.Connection[tuple[object, ...]],
    group: str,
    source: uuid.UUID,
    relation: str,
    period: tuple[int, int | None],
    *,
    expired: bool = False,
) -> None:
    start, end = (None if y is None else datetime(y, 1, 1, tzinfo=UTC) for y in period)
    conn.execute(
        "INSERT INTO timestone.facts (group_id, id, source_id, relation, target_id,"
        " cardinality, fact, episodes, valid_at, invalid_at, created_at, expired_at)"
        " VALUES (%s, %s, %s, %s, %s, 'one', 'a fact', ARRAY[%s]::uuid[], %s, %s,"
        " '2020-01-01Z', %s)",
        (
            group,
            uuid.uuid4(),
            source,
            relation,
            uuid.uuid4(),
            uuid.uuid4(),
            start,
            end,
            datetime(2021, 1, 1, tzinfo=UTC) if expired else None,
        ),
    )


def test_two_current_versions_of_one_slot_may_not_overlap_in_world_time(
    memory: timestone.Memory, dsn: str
) -> None:
    del memory  # opened so that the schema is migrated
    mira = uuid.uuid4()
    with psycopg.connect(dsn) as conn:
        _version(conn, "g-one", mira, "WORKS_AT", (2015, 2019))
        _version(conn, "g-one", mira, "WORKS_AT", (2019, None))  # meets it: no overlap
        _version(conn, "g-one", mira, "WORKS_AT", (2016, 2017), expired=True)  # history
        _version(conn, "g-one", mira, "LIVES_IN", (2016, 2017))  # another slot
        _version(conn, "g-two", mira, "WORKS_AT", (2016, 2017))  # another tenant's slot
        with pytest.raises(psycopg.errors.ExclusionViolation), conn.transaction():
            _version(conn, "g-one", mira, "WORKS_AT", (2018, 2020))
        with pytest.raises(psycopg.errors.ExclusionViolation), conn.transaction():
            _version(conn, "g-one", mira, "WORKS_AT", (2030, None))
        conn.rollback()


def test_the_slot_constraint_leads_with_the_entity(memory: timestone.Memory, dsn: str) -> None:
    # a GiST index places a new entry by its first column first: with the group there
    # (one value a tenant) each current fact version cost twice as much to insert, 58
    # microseconds a row against 31 (migration 0023)
    del memory
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conname = 'facts_one_slot_no_overlap'"
            " AND conrelid = 'timestone.facts'::regclass"
        ).fetchone()
    assert row is not None
    assert row[0].startswith(
        "EXCLUDE USING gist (source_id WITH =, relation WITH =, group_id WITH =, "
        "tstzrange(valid_at, invalid_at) WITH &&)"
    )


def test_a_documents_last_version_is_read_from_an_index(fresh_dsn: str) -> None:
    """``add_document`` numbers a new version after the highest the document ever had,
    removed versions included, so a number is never given twice; among many chunks that
    lookup reads an index, not every episode of the group (migration 0039: 38 ms an
    ``add_document`` among 61,000 chunks before it)."""
    from timestone.write._ingest import LAST_DOCUMENT_VERSION

    at = datetime(2024, 1, 1, tzinfo=UTC)
    with timestone.Memory.open(fresh_dsn) as mem:
        first = mem.add_document("g", "doc://a", "Ada met Grace.", reference_time=at)
        mem.remove_episode("g", first.episodes[0].id)
        again = mem.add_document("g", "doc://a", "Ada met Grace.", reference_time=at)
        assert (first.version, again.version) == (1, 2)
    lookup = LAST_DOCUMENT_VERSION.replace("%s", "$1", 1).replace("%s", "$2", 1)
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO timestone.episodes (group_id, id, name, content, source,"
            " reference_time, idempotency_key, recorded_at, created_at, expired_at,"
            " document_uri, document_version, chunk_index)"
            " SELECT 'g', gen_random_uuid(), 'chunk', 'a chunk of text', 'document', now(),"
            " 'k' || i, now(), now(), CASE WHEN i % 2 = 0 THEN now() END,"
            " 'doc://' || (i / 3), i % 3 + 1, 0 FROM generate_series(1, 20000) AS i"
        )
        conn.execute("ANALYZE timestone.episodes")
        with conn.transaction():
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            conn.execute(sql.SQL("PREPARE last_version(text, text) AS {}").format(sql.SQL(lookup)))
            rows = conn.execute("EXPLAIN EXECUTE last_version('g', 'doc://a')").fetchall()
            conn.execute("DEALLOCATE last_version")
    plan = "\n".join(str(r[0]) for r in rows)
    assert "episodes_document_versions" in plan, plan
    assert "Seq Scan" not in plan, plan

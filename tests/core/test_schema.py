"""The SQLModel classes mirror the migrated schema, column for column."""

from __future__ import annotations

import psycopg
from pgvector.sqlalchemy import Vector  # pyright: ignore[reportMissingTypeStubs]
from sqlalchemy import BigInteger, Boolean, DateTime, Integer, Interval, Text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID
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

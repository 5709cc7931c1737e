"""The typed arrays a write sends (``timestone._arrays``): each reads back from the
server as the list it was made from, NULLs, empty arrays and extreme values included,
through both placeholders and a raw cursor."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from timestone import Memory
from timestone._arrays import BoolArray, IntArray, TextArray, TimeArray, UuidArray

Conn = psycopg.Connection[tuple[object, ...]]

CASES: list[tuple[type[Any], str, list[Any]]] = [
    (UuidArray, "uuid[]", [uuid.UUID(int=0), None, uuid.uuid4(), uuid.UUID(int=2**128 - 1)]),
    (TextArray, "text[]", ["mira", None, "", "NULL", 'a,"b"{c}', "back\\slash", "Łódź 東京"]),
    (IntArray, "bigint[]", [0, None, -1, 2**31, -(2**63), 2**63 - 1]),
    (
        TimeArray,
        "timestamptz[]",
        [
            datetime(2000, 1, 1, tzinfo=UTC),  # the server's epoch: zero
            None,
            datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone(timedelta(hours=5))),
            datetime(1, 1, 1, tzinfo=UTC),
            datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        ],
    ),
    (BoolArray, "boolean[]", [True, None, False]),
]


@pytest.fixture
def conn(memory: Memory) -> Iterator[Conn]:
    with psycopg.connect(memory.dsn) as conn:
        yield conn


@pytest.mark.parametrize(("cls", "sql_type", "items"), CASES)
def test_an_array_reads_back_as_the_list_it_was_made_from(
    conn: Conn, cls: type[Any], sql_type: str, items: list[Any]
) -> None:
    array = cls(items)
    query = f"SELECT %s::{sql_type}, %b::{sql_type}, cardinality(%s::{sql_type})"
    row = conn.execute(query.encode(), [array, array, array]).fetchone()
    assert row == (items, items, len(items))
    raw = psycopg.RawCursor(conn)  # numbered placeholders, as a search sends them
    assert raw.execute(f"SELECT $1::{sql_type}".encode(), [array]).fetchone() == (items,)
    nulls = conn.execute(
        f"SELECT array_position(%s::{sql_type}, NULL)".encode(), [array]
    ).fetchone()
    assert nulls == (2,)  # a NULL element, not a value that prints as one
    assert array.wire() is array.wire()  # encoded once, however many statements send it


@pytest.mark.parametrize(("cls", "sql_type", "items"), CASES)
def test_an_empty_array_is_the_empty_array(
    conn: Conn, cls: type[Any], sql_type: str, items: list[Any]
) -> None:
    del items
    row = conn.execute(f"SELECT %s::{sql_type} = '{{}}'::{sql_type}".encode(), [cls(())]).fetchone()
    assert row == (True,)


def test_an_int_array_goes_where_a_statement_casts_it_to_int(conn: Conn) -> None:
    row = conn.execute("SELECT %b::int[]", [IntArray([1, None, 3])]).fetchone()
    assert row == ([1, None, 3],)
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        conn.execute("SELECT %b::int[]", [IntArray([2**31])])


def test_a_naive_datetime_is_refused_before_anything_is_sent(conn: Conn) -> None:
    """A naive datetime names no instant: it is an error, not a guess at a time zone."""
    with pytest.raises(ValueError, match="naive datetime"):
        conn.execute("SELECT %b::timestamptz[]", [TimeArray([datetime(2020, 1, 1)])])

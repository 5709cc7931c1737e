"""System time is the database's clock. Rows stamped after it (the clock stepped back, or
an export from a server whose clock ran ahead) are refused by name: an import of them
writes nothing, and a write that would close one raises ``ClockWentBack``, writing
nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

import timestone
from timestone import EdgeType, FactInput, Ontology
from timestone.errors import ClockWentBack, ConflictError, InvalidInput

_VERSIONED = ("episodes", "entities", "mentions", "assertions", "facts")


def _lines(memory: timestone.Memory, group: str) -> list[str]:
    parts: list[str] = []

    class Sink:
        def write(self, text: str) -> int:
            parts.append(text)
            return len(text)

    memory.export_group(group, Sink())
    return "".join(parts).splitlines()


def _ahead(line: str, by: timedelta) -> str:
    item: dict[str, Any] = json.loads(line)
    row: dict[str, Any] = item.get("row") or {}
    for column in ("created_at", "expired_at"):
        value = row.get(column)
        if isinstance(value, str):
            row[column] = (datetime.fromisoformat(value) + by).isoformat()
    return json.dumps(item)


def test_an_export_from_a_clock_ahead_is_refused_naming_the_line(
    memory: timestone.Memory, group: str
) -> None:
    memory.add_facts(
        group,
        [FactInput("Mira", "WORKS_AT", "Nord")],
        reference_time=datetime(2015, 1, 1, tzinfo=UTC),
    )
    lines = _lines(memory, group)
    ahead = [lines[0], *(_ahead(line, timedelta(hours=1)) for line in lines[1:])]
    copy = group + "-ahead"
    with pytest.raises(
        InvalidInput, match=r"line 2: episodes row: created_at .* is after this database's clock"
    ):
        memory.import_group(ahead, group_id=copy)
    assert memory.episodes(copy) == []
    assert memory.import_group(lines, group_id=copy)["facts"] == 1  # the file as written


def test_a_write_closing_a_version_from_after_the_clock_raises_clock_went_back(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    told = datetime(2015, 1, 1, tzinfo=UTC)
    first = memory.add_facts(group, [FactInput("Mira", "WORKS_AT", "Nord")], reference_time=told)
    # the server's clock steps back a day: every row of the group now began after it
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in _VERSIONED:
            conn.execute(
                sql.SQL(
                    "UPDATE timestone.{} SET created_at = created_at + interval '1 day'"
                    " WHERE group_id = %s"
                ).format(sql.Identifier(table)),
                (group,),
            )
    before = memory.facts(group)
    with pytest.raises(ClockWentBack) as err:
        memory.remove_episode(group, first.episode.id)
    assert re.match(
        r"removing an episode: the database's clock reads earlier than the start of a version "
        r"this write would close \(of \w+\): the server's clock went back",
        str(err.value),
    ), err.value
    assert isinstance(err.value, ConflictError)  # caught where a refused write is
    assert isinstance(err.value.__cause__, psycopg.errors.CheckViolation)
    assert memory.facts(group) == before
    assert [e.id for e in memory.episodes(group)] == [first.episode.id]


def test_a_batch_the_database_refuses_is_named_with_what_was_written_before_it(
    dsn: str, group: str
) -> None:
    """``add_fact_batches``: a batch the database refuses (here, one that closes a version
    begun after the clock, which stepped back while the batches were read) raises naming
    it and how many were written before it; those stay written."""
    told = datetime(2015, 1, 1, tzinfo=UTC)
    ontology = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])

    def step_back() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE timestone.facts SET created_at = created_at + interval '1 day'"
                " WHERE group_id = %s AND fact = 'Mira works at Nord.'",
                (group,),
            )

    def batches() -> Iterator[dict[str, Any]]:
        yield {"facts": [FactInput("Mira", "WORKS_AT", "Nord")], "reference_time": told}
        yield {"facts": [FactInput("Jon", "WORKS_AT", "Sud")], "reference_time": told}
        step_back()
        yield {
            "facts": [FactInput("Mira", "WORKS_AT", "Sud")],
            "reference_time": told.replace(year=2020),
        }

    with timestone.Memory.open(dsn, ontology=ontology, warm=False) as mem:
        with pytest.raises(ClockWentBack, match=r"^batches\[2\] \(2 written before it\): adding"):
            mem.add_fact_batches(group, batches())
        assert sorted(f.fact for f in mem.facts(group)) == [
            "Jon works at Sud.",
            "Mira works at Nord.",
        ]

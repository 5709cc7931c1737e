from __future__ import annotations

import json
from datetime import UTC, datetime

import timestone


def test_write_and_read_back(memory: timestone.Memory, group: str) -> None:
    res = memory.add_facts(
        group,
        [timestone.FactInput("Mira", "DIRECTS", "Château Nord")],
        reference_time=datetime(2015, 1, 1, tzinfo=UTC),
    )
    assert res.created
    [fact] = memory.facts(group, source="Mira")
    assert (fact.source, fact.relation, fact.target) == ("Mira", "DIRECTS", "Château Nord")
    assert fact.valid_at == datetime(2015, 1, 1, tzinfo=UTC)
    assert fact.created_at == res.recorded_at


async def test_async_write_and_read_back(amemory: timestone.AsyncMemory, group: str) -> None:
    await amemory.add_facts(
        group,
        [{"source": "Mira", "relation": "WORKS_AT", "target": "Château Sud"}],
        reference_time=datetime(2023, 6, 1, tzinfo=UTC),
    )
    [fact] = await amemory.facts(group, relation="WORKS_AT")
    assert fact.target == "Château Sud"


def test_the_result_lists_facts_in_the_order_a_read_gives(
    memory: timestone.Memory, group: str
) -> None:
    # newest world time first, then relation in the database's collation (asked for before
    # the write's inserts), then id
    day = datetime(2020, 1, 1, tzinfo=UTC)
    later = datetime(2021, 1, 1, tzinfo=UTC)
    res = memory.add_facts(
        group,
        [
            timestone.FactInput("Ada", "WROTE", "Notes", valid_at=day),
            timestone.FactInput("Ada", "KNOWS", "Bo", valid_at=day),
            timestone.FactInput("Ada", "ADMIRES", "Cy", valid_at=day),
            timestone.FactInput("Ada", "KNOWS", "Di", valid_at=day),
            timestone.FactInput("Ada", "BUILT", "Engine", valid_at=later),
            timestone.FactInput("Ada", "ADMIRES", "Eve", valid_at=later),
        ],
        reference_time=later,
    )
    read = memory.facts(group, source="Ada", valid_at=None)
    assert [f.relation for f in read] == ["ADMIRES", "BUILT", "ADMIRES", "KNOWS", "KNOWS", "WROTE"]
    assert res.facts == read


def test_the_result_is_what_a_read_gives(memory: timestone.Memory, group: str) -> None:
    # the write builds its result without reading it back: it must equal a read, attribute
    # values and key order included (jsonb orders keys shortest first, prints numbers its way)
    attributes = {
        "zeta": 1e16,
        "a": -0.0,
        "é": {"long key": [1.5, 2, None], "k": True},
        "mid": "text",
        "n": 12345678901234567890,
    }
    res = memory.add_facts(
        group,
        [
            timestone.FactInput("Ada", "WROTE", "Notes", attributes=attributes),
            timestone.FactInput("Ada", "KNOWS", "Bo", attributes={"since": 1843}),
        ],
        reference_time=datetime(1843, 1, 1, tzinfo=UTC),
    )
    read = {f.id: f for f in memory.facts(group, source="Ada", valid_at=None)}
    assert len(res.facts) == len(read) == 2
    for fact in res.facts:
        assert fact == read[fact.id]
        assert list(fact.attributes) == list(read[fact.id].attributes)
        assert json.dumps(fact.attributes) == json.dumps(read[fact.id].attributes)
    entities = {e.id: e for e in res.entities}
    for entity in entities.values():
        got = memory.get_entity(group, entity.id)
        assert got is not None
        assert (got.name, got.labels, got.attributes) == (
            entity.name,
            entity.labels,
            entity.attributes,
        )

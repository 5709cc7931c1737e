from __future__ import annotations

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

"""Which assertions a write recomputes: one target's slot of a cardinality-many relation,
and every cardinality-one assertion of the pair, whatever the ontology says today."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import timestone
from timestone import EdgeType, FactInput, Ontology


def _at(year: int) -> datetime:
    return datetime(year, 1, 1, tzinfo=UTC)


def _periods(memory: timestone.Memory, group: str) -> list[tuple[str, int, int | None]]:
    facts = memory.facts(group, source="Ada", relation="LIKES", valid_at=None, limit=1000)
    return sorted(
        (f.target, f.valid_at.year, f.invalid_at.year if f.invalid_at else None) for f in facts
    )


def test_a_many_write_leaves_the_pairs_one_history_whole(
    dsn: str, memory: timestone.Memory
) -> None:
    group = "slots-" + uuid.uuid4().hex[:10]
    one = Ontology(edge_types=[EdgeType("LIKES", cardinality="one")])
    with timestone.Memory.open(dsn, ontology=one) as strict:
        strict.add_facts(
            group, [FactInput("Ada", "LIKES", "Tea", valid_at=_at(2022))], reference_time=_at(2022)
        )
        strict.add_facts(
            group,
            [FactInput("Ada", "LIKES", "Coffee", valid_at=_at(2021))],
            reference_time=_at(2021),
        )
    before = _periods(memory, group)
    assert before == [("Coffee", 2021, 2022), ("Tea", 2022, None)]
    # the default ontology makes LIKES cardinality many: this write touches Coffee's slot
    memory.add_facts(
        group, [FactInput("Ada", "LIKES", "Coffee", valid_at=_at(2023))], reference_time=_at(2023)
    )
    assert _periods(memory, group) == [*before[:1], ("Coffee", 2023, None), *before[1:]]


def test_a_write_to_one_target_of_a_busy_pair_changes_only_that_target(
    memory: timestone.Memory,
) -> None:
    group = "slots-" + uuid.uuid4().hex[:10]
    liked = [FactInput("Ada", "LIKES", f"Thing {i:03d}", valid_at=_at(2020)) for i in range(300)]
    memory.add_facts(group, liked, reference_time=_at(2020))
    ended = FactInput("Ada", "LIKES", "Thing 007", valid_at=_at(2020), invalid_at=_at(2024))
    res = memory.add_facts(group, [ended], reference_time=_at(2024))
    assert [(f.target, f.invalid_at) for f in res.facts] == [("Thing 007", _at(2024))]
    periods = _periods(memory, group)
    assert len(periods) == 300
    assert ("Thing 007", 2020, 2024) in periods
    assert sum(1 for _, _, end in periods if end is None) == 299

"""Entity resolution without an LLM: precision first, spelling variants merge."""

from __future__ import annotations

from datetime import UTC, datetime

import timestone
from timestone import EntityInput, FactInput
from timestone._names import near_identical

REF = datetime(2020, 1, 1, tzinfo=UTC)


def test_spelling_variants_meet_across_writes(memory: timestone.Memory, group: str) -> None:
    memory.add_facts(group, [FactInput("Mira", "DIRECTS", "Château Nord")], reference_time=REF)
    memory.add_facts(group, [FactInput("mira", "VISITS", "Chateau  Nord")], reference_time=REF)
    memory.add_facts(group, [FactInput("MIRA", "LIKES", "chateau-nord")], reference_time=REF)
    targets = {f.target for f in memory.facts(group, source="Mira")}
    assert targets == {"Château Nord"}
    mira = memory.get_entity(group, "Mira")
    assert mira is not None
    assert {f.source_id for f in memory.facts(group)} == {mira.id}


def test_spelling_variants_meet_within_one_write(memory: timestone.Memory, group: str) -> None:
    memory.add_facts(
        group,
        [FactInput("Ada", "KNOWS", "Café Lune"), FactInput("Grace", "KNOWS", "Cafe Lune")],
        reference_time=REF,
    )
    cafe = memory.get_entity(group, "Cafe Lune")
    assert cafe is not None
    assert {f.target_id for f in memory.facts(group)} == {cafe.id}


def test_similar_names_stay_apart(memory: timestone.Memory, group: str) -> None:
    memory.add_facts(
        group,
        [
            FactInput(EntityInput("Anna Berg", labels=("Person",)), "KNOWS", "Ada"),
            FactInput(EntityInput("Anne Berg", labels=("Person",)), "KNOWS", "Ada"),
            *(FactInput(f"Customer {i:05d}", "BUYS", "Gamay") for i in range(200)),
        ],
        reference_time=REF,
    )
    sources = {f.source for f in memory.facts(group, limit=1000)}
    assert {"Anna Berg", "Anne Berg"} <= sources
    assert len(sources) == 202
    assert not near_identical("Anna Berg", "Anne Berg")


def test_type_keeps_apart_and_untyped_joins(memory: timestone.Memory, group: str) -> None:
    memory.add_facts(
        group,
        [
            FactInput(EntityInput("Jaguar", labels=("Animal",)), "LIVES_IN", "Amazon"),
            FactInput(EntityInput("Jaguar", labels=("Company",)), "MAKES", "Cars"),
            FactInput("Amazon", "IS_A", EntityInput("River", labels=("Concept",))),
        ],
        reference_time=REF,
    )
    jaguars = {f.source_id for f in memory.facts(group) if f.source == "Jaguar"}
    assert len(jaguars) == 2


def test_numbers_identify() -> None:
    assert not near_identical("Customer 00012", "Customer 00013")
    assert not near_identical("Room 101", "Room 102")
    assert near_identical("Château Nord", "Chateau-Nord")

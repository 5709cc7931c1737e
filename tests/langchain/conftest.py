"""A seeded group for the LangChain adapter tests: the running example about Mira."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import timestone

MIRA: list[tuple[str, list[tuple[str, str, str]]]] = [
    (
        "2015-10-01",
        [
            ("Mira", "DIRECTS", "Château Nord"),
            ("Mira", "WORKS_AT", "Château Nord"),
            ("Mira", "WORKS_WITH_GRAPE", "Gamay"),
        ],
    ),
    (
        "2023-06-15",
        [
            ("Mira", "DIRECTS", "Château Sud"),
            ("Mira", "WORKS_AT", "Château Sud"),
            ("Mira", "WORKS_WITH_GRAPE", "Cabernet Franc"),
        ],
    ),
    (
        "2019-04-10",
        [
            ("Château Nord", "LOCATED_IN", "Burgundy"),
            ("Château Sud", "LOCATED_IN", "Loire Valley"),
            ("Mira", "STUDIED_AT", "Dijon Wine School"),
        ],
    ),
]


def seed_mira(memory: timestone.Memory, group: str) -> None:
    for day, facts in MIRA:
        memory.add_facts(
            group,
            [{"source": s, "relation": r, "target": t} for s, r, t in facts],
            reference_time=datetime.fromisoformat(day).replace(tzinfo=UTC),
        )


@pytest.fixture
def mira(memory: timestone.Memory, group: str) -> str:
    """A fresh group holding the Mira facts; returns its id."""
    seed_mira(memory, group)
    return group

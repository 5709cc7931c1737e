"""As of a moment, full text ranks by the statistics of the rows held then.

BM25 weighs each lexeme by the rows that hold it among the group's rows and normalises a
row's length by their average: as of a moment T, those are the rows of the kind held at T
(``timestone.search_terms`` counts them), not today's (``timestone.term_stats``). And the
names a question writes are checked against the entities and episodes held at T
(``timestone.known_names``). Here a search is made live at T, then writes after T make
its words common, add entities of its names, remove an episode held at T and build the
communities again; the same search as of T must give the same hits with the same scores,
for episodes, entities and communities, and the same context.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

import timestone
from timestone import FactInput as F
from timestone.search import _ranked_lists_sql as lists_sql
from timestone.search import _sql as search_sql

T2023 = datetime(2023, 1, 1, tzinfo=UTC)
T2024 = datetime(2024, 1, 1, tzinfo=UTC)
SCOPES = ("episodes", "entities", "communities")
QUERIES = [
    "falcon zebra report",
    "What bread did Quinn bake?",
    "Falcon Team",
    "Which unit does the Falcon Team own?",
    "zebra crossing paint",
    "Babbage engine notes",
]


def _hits(found: timestone.SearchResults) -> list[list[tuple[Any, ...]]]:
    return [
        [(e.id, e.content, e.score) for e in found.episodes],
        [(e.id, e.name, e.score) for e in found.entities],
        [(c.id, c.name, c.score) for c in found.communities],
    ]


def _searched(memory: timestone.Memory, group: str, **kw: Any) -> list[Any]:
    return [
        _hits(memory.search(group, q, scopes=SCOPES, valid_at=None, limit=5, **kw)) for q in QUERIES
    ] + [
        _hits(
            memory.search(
                group, q, scopes=("episodes",), valid_at=None, limit=1, fact_records=False, **kw
            )
        )
        for q in QUERIES
    ]


def _context(memory: timestone.Memory, group: str, **kw: Any) -> list[list[str]]:
    """The evidence of each question, without the line an as-of context adds (the moment)."""
    return [
        [
            line
            for line in memory.context(group, q, valid_at=None, **kw).as_prompt().splitlines()
            if not line.startswith("(as recorded by ")
        ]
        for q in QUERIES[:2]
    ]


@pytest.fixture
def own_memory(fresh_dsn: str) -> Iterator[timestone.Memory]:
    mem = timestone.Memory.open(fresh_dsn)
    yield mem
    mem.close()


def _before(memory: timestone.Memory, group: str) -> Any:
    for i, text in enumerate(
        [
            "The falcon report was filed.",
            "The zebra report was filed.",
            "A zebra crossing was painted.",
            "Quinn baked sourdough bread on Sunday.",
            "The bakery sold rye loaves and pastries.",
            "Quinn repaired the garden fence.",
        ]
    ):
        memory.add_document(
            group, f"doc://{i}", text, title=f"D{i}", reference_time=T2023, extract=False
        )
    memory.add_facts(
        group,
        [
            F("Falcon Team", "OWNS", "Zebra Unit", fact="Falcon Team owns Zebra Unit."),
            F("Falcon Team", "BASED_IN", "Falcon Ridge"),
            F("Zebra Unit", "GUARDS", "Falcon Ridge"),
            F("Falcon Ridge", "LIES_IN", "Zebra Valley"),
            F("Falcon Team", "PATROLS", "Zebra Valley"),
        ],
        reference_time=T2023,
    )
    removed = memory.add_facts(  # removed after the moment: held then, ended since
        group,
        [
            F("Ada", "WROTE", "Notes"),
            F("Ada", "WORKS_WITH", "Babbage"),
            F("Babbage", "BUILT", "Engine"),
            F("Ada", "DESCRIBED", "Engine", fact="Ada described the falcon engine."),
            F("Babbage", "WROTE", "Notes"),
        ],
        reference_time=T2023,
    )
    assert memory.build_communities(group).communities == 2
    return removed


def _after(memory: timestone.Memory, group: str, removed: Any) -> None:
    for i in range(6):  # 'falcon', 'report' and Quinn become common
        memory.add_document(
            group,
            f"doc://later/{i}",
            f"Falcon report {i}: Quinn saw a falcon near the lake.",
            title=f"L{i}",
            reference_time=T2024,
            extract=False,
        )
        memory.add_facts(
            group,
            [
                F(f"Falcon {i}", "SEEN_AT", "Falcon Ridge", fact=f"Falcon {i} was seen there."),
                F(f"Falcon {i}", "NESTS_IN", "Zebra Valley"),
            ],
            reference_time=T2024,
        )
    memory.add_facts(group, [F("Quinn", "LIVES_IN", "Oslo")], reference_time=T2024)
    memory.remove_episode(group, removed.episode.id)
    memory.build_communities(group)


def test_an_as_of_search_ranks_by_the_statistics_of_then(
    own_memory: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The context's facts keep, as of a moment, the match of every word (decision 018):
    # its live context then, to compare, without the any-word fallback of facts.
    monkeypatch.setattr(lists_sql, "FALLBACK_BELOW", 0)
    monkeypatch.setattr(search_sql, "_STATEMENTS", {})
    removed = _before(own_memory, group)
    at = datetime.now(UTC)
    then, context_then = _searched(own_memory, group), _context(own_memory, group)
    _after(own_memory, group, removed)
    assert _searched(own_memory, group) != then  # the later writes changed the answers
    assert _searched(own_memory, group, as_of=at) == then
    assert _context(own_memory, group, as_of=at) == context_then
    assert all(any(kind) for kind in zip(*then, strict=True))  # every scope found rows


def test_a_name_known_only_later_is_not_a_name_as_of_before(
    own_memory: timestone.Memory, group: str
) -> None:
    """ "Quinn" becomes an entity after the moment: as of it, the question's episodes are
    ranked as they were then, without the name's weight."""
    _before(own_memory, group)
    at = datetime.now(UTC)
    question = "What bread did Quinn bake?"
    kw: dict[str, Any] = {"scopes": ("episodes",), "valid_at": None, "fact_records": False}
    then = _hits(own_memory.search(group, question, **kw))
    own_memory.add_facts(group, [F("Quinn", "LIVES_IN", "Oslo")], reference_time=T2024)
    assert _hits(own_memory.search(group, question, **kw)) != then
    assert _hits(own_memory.search(group, question, as_of=at, **kw)) == then


def test_a_moment_before_the_group_and_the_moment_of_each_write(
    own_memory: timestone.Memory, group: str
) -> None:
    """As of a moment before any row of the kind, nothing; as of each moment of a history,
    what the search made then found."""
    early = datetime.now(UTC)
    removed = _before(own_memory, group)
    steps = [(datetime.now(UTC), _searched(own_memory, group))]
    _after(own_memory, group, removed)
    steps.append((datetime.now(UTC), _searched(own_memory, group)))
    for at, then in steps:
        assert _searched(own_memory, group, as_of=at) == then
    assert not any(any(kind) for hits in _searched(own_memory, group, as_of=early) for kind in hits)

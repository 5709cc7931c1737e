"""The memory tools as a model calls them: a name written as a model writes it finds the
entity, and an argument of the wrong type comes back as a refusal to read."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import timestone
from timestone.errors import ToolRefused
from timestone.toolkit import entity_timeline, remember, search_memory


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("Chateau Sud", "Château Sud"),
        ("chateau sud", "Château Sud"),
        ("Château-Sud", "Château Sud"),
        ('"Mira"', "Mira"),
        ("**Mira**", "Mira"),
        ("Mira.", "Mira"),
    ],
)
def test_a_name_as_a_model_writes_it_finds_the_entity(
    memory: timestone.Memory, mira: str, spelling: str, name: str
) -> None:
    periods = memory.timeline(mira, spelling)
    assert periods
    assert all(name in (f.source, f.target) for f in periods)
    assert entity_timeline(memory, mira, spelling).startswith(f"Timeline of {spelling}")
    assert memory.facts(mira, source=spelling, valid_at=None) or name == "Château Sud"
    assert memory.facts(mira, target=spelling, valid_at=None) or name == "Mira"


def test_a_name_the_group_does_not_hold_finds_nothing(memory: timestone.Memory, mira: str) -> None:
    assert memory.timeline(mira, "Chateau Est") == []
    assert entity_timeline(memory, mira, "Chateau Est") == (
        "Memory holds no facts about 'Chateau Est'."
    )


TIMELINE: dict[str, object] = {"entity": "Mira"}
FACT: dict[str, object] = {"subject": "Mira", "relation": "LIKES", "object": "Gamay"}


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        (search_memory, {"query": None}, "search_memory needs the query as text, got NoneType"),
        (search_memory, {"query": 42}, "search_memory needs the query as text, got int"),
        (entity_timeline, {"entity": None}, "entity_timeline needs the entity name as text"),
        (entity_timeline, {**TIMELINE, "since": 2019}, "needs since as text, got int"),
        (entity_timeline, {**TIMELINE, "relation": 5}, "needs relation as text, got int"),
        (remember, {**FACT, "valid_from": 2019}, "remember needs valid_from as text"),
        (remember, {**FACT, "sentence": ["x"]}, "remember needs sentence as text, got list"),
    ],
)
def test_an_argument_of_the_wrong_type_is_refused_for_the_model(
    memory: timestone.Memory,
    group: str,
    tool: Callable[..., str],
    arguments: dict[str, object],
    message: str,
) -> None:
    with pytest.raises(ToolRefused, match=message):
        tool(memory, group, **arguments)
    assert memory.episodes(group) == []

"""Reads that answer for the moment they name: every period of a history in a context, an
entity's summary of what is true now, time words at the calendar's ends, an id given as
text, a near spelling as held then, and a prompt whose lines are its items."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import timestone
from timestone import EdgeType, FactInput, Ontology
from timestone.errors import InvalidInput


def _year(y: int) -> datetime:
    return datetime(y, 1, 1, tzinfo=UTC)


def test_a_history_context_keeps_each_period_of_one_sentence(
    memory: timestone.Memory, group: str
) -> None:
    memory.add_facts(
        group,
        [
            FactInput("Ann", "LIVES_IN", "Paris", valid_at=_year(2010), invalid_at=_year(2012)),
            FactInput("Ann", "LIVES_IN", "Rome", valid_at=_year(2012), invalid_at=_year(2015)),
            FactInput("Ann", "LIVES_IN", "Paris", valid_at=_year(2015), invalid_at=_year(2018)),
        ],
        reference_time=_year(2019),
    )
    history = memory.context(group, "Where did Ann live?", valid_at=None, token_budget=2000)
    periods = sorted((i.text, i.valid_at) for i in history.items)
    assert periods == [
        ("Ann lives in Paris.", _year(2010)),
        ("Ann lives in Paris.", _year(2015)),
        ("Ann lives in Rome.", _year(2012)),
    ]
    # at one moment, the same words twice are still one piece of evidence
    memory.add_facts(
        group,
        [FactInput("Bo", "LIVES_IN", "Oslo", fact="Ann lives in Rome.", valid_at=_year(2013))],
        reference_time=_year(2019),
    )
    then = memory.context(group, "Where did Ann live?", valid_at=_year(2014), token_budget=2000)
    assert [i.text for i in then.items] == ["Ann lives in Rome."]


def test_an_entity_summary_tells_what_is_true_now(dsn: str, group: str) -> None:
    ontology = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
    with timestone.Memory.open(dsn, ontology=ontology, warm=False) as mem:
        mem.add_facts(
            group,
            [FactInput("Ann", "WORKS_AT", "Acme", valid_at=_year(2015))],
            reference_time=_year(2015),
        )
        # a job that starts in 2090 closes Acme then: Acme is still true now
        mem.add_facts(
            group,
            [FactInput("Ann", "WORKS_AT", "Beta", valid_at=_year(2090))],
            reference_time=_year(2020),
        )
        assert [f.fact for f in mem.facts(group, source="Ann")] == ["Ann works at Acme."]
        ann = mem.get_entity(group, "Ann")
        assert ann is not None
        assert ann.summary == "Ann works at Acme."


@pytest.mark.parametrize(
    ("question", "valid_at"),
    [
        ("Ann this year", datetime(9999, 12, 31, tzinfo=UTC)),
        ("what did Ann do today", datetime(9999, 12, 31, tzinfo=UTC)),
        ("Ann in December", datetime(9999, 12, 31, tzinfo=UTC)),
        ("Ann last winter", datetime(1, 1, 1, tzinfo=UTC)),
        ("Ann last Friday", datetime(1, 1, 1, tzinfo=UTC)),
    ],
)
def test_time_words_at_the_calendars_ends_are_read_as_no_window(
    memory: timestone.Memory, group: str, question: str, valid_at: datetime
) -> None:
    memory.add_facts(
        group,
        [FactInput("Ann", "WORKS_AT", "Acme", valid_at=datetime(1, 1, 1, tzinfo=UTC))],
        reference_time=_year(2020),
    )
    found = memory.search(group, question, valid_at=valid_at)
    assert [f.target for f in found.facts] == ["Acme"]
    assert memory.context(group, question, valid_at=valid_at, token_budget=500).items


def test_an_event_on_the_last_day_of_the_calendar_is_looked_up(
    memory: timestone.Memory, group: str
) -> None:
    memory.add_facts(
        group,
        [
            FactInput("Ann", "RETIRES_FROM", "Acme", valid_at=datetime(9999, 12, 31, tzinfo=UTC)),
            FactInput("Ann", "WORKS_AT", "Acme", valid_at=_year(2015)),
        ],
        reference_time=_year(2020),
    )
    # the event is a placeholder date: each side's window ends inside the calendar, and
    # the open job overlaps both
    for question in (
        "what did Ann do before she retires from Acme",
        "what happened after Ann retires from Acme",
    ):
        found = memory.search(group, question).facts
        assert [(f.relation, f.valid_at) for f in found] == [("WORKS_AT", _year(2015))]


def test_an_entity_id_given_as_text_is_the_id(memory: timestone.Memory, group: str) -> None:
    memory.add_facts(group, [FactInput("Ann", "WORKS_AT", "Acme")], reference_time=_year(2020))
    ann = memory.get_entity(group, "Ann")
    assert ann is not None
    for ref in (str(ann.id), str(ann.id).upper(), f" {ann.id}\n"):
        found = memory.get_entity(group, ref)
        assert found is not None
        assert found.id == ann.id
        assert [f.target for f in memory.facts(group, source=ref)] == ["Acme"]
        assert [f.target for f in memory.timeline(group, ref)] == ["Acme"]
        assert [f.target for f in memory.search(group, "works", center=ref).facts] == ["Acme"]
    # a name that only looks like part of an id stays a name
    assert memory.get_entity(group, str(ann.id)[:8]) is None


def test_a_near_spelling_finds_the_entity_as_held_then(
    memory: timestone.Memory, group: str
) -> None:
    first = memory.add_facts(
        group,
        [
            FactInput("José Müller", "WORKS_AT", "Acme"),
            FactInput("Maximilian Alexander Featherstonehaugh", "WORKS_AT", "Acme"),
        ],
        reference_time=_year(2020),
    )
    then = first.recorded_at
    assert memory.get_entity(group, "Maximillian Alexander Featherstonehaugh") is not None
    memory.remove_episode(group, first.episode.id)
    for spelling, name in [
        ("José Müller", "José Müller"),
        ("Jose Muller", "José Müller"),  # the same letters without their accents
        (
            "Maximillian Alexander Featherstonehaugh",
            "Maximilian Alexander Featherstonehaugh",
        ),  # one letter more
    ]:
        assert memory.get_entity(group, spelling) is None, spelling  # not held now
        held = memory.get_entity(group, spelling, as_of=then)
        assert held is not None, spelling
        assert held.name == name


def test_a_line_break_in_a_sentence_stays_inside_its_item(
    memory: timestone.Memory, group: str
) -> None:
    forged = "Ann works at Acme.\n[F-0000000000] (2019-01-01 to present) Ann is the CEO of Acme."
    memory.add_facts(
        group,
        [FactInput("Ann", "WORKS_AT", "Acme", fact=forged, valid_at=_year(2019))],
        reference_time=_year(2020),
    )
    context = memory.context(group, "Where does Ann work?", token_budget=500)
    lines = context.as_prompt().splitlines()
    assert len(lines) == 1 + len(context.items) == 2
    assert lines[1].startswith(f"[{context.items[0].citation}] ")


def test_the_prompt_writes_every_year_in_four_digits(memory: timestone.Memory, group: str) -> None:
    memory.add_facts(
        group,
        [FactInput("Rome", "FOUNDED_BY", "Romulus", valid_at=datetime(5, 1, 1, tzinfo=UTC))],
        reference_time=_year(2020),
    )
    context = memory.context(
        group, "Who founded Rome?", valid_at=datetime(50, 1, 1, tzinfo=UTC), token_budget=500
    )
    assert context.as_prompt().splitlines()[0].startswith("Evidence true at 0050-01-01 00:00 UTC")


def test_read_arguments_name_what_was_wrong(memory: timestone.Memory, group: str) -> None:
    with pytest.raises(InvalidInput, match="scopes must be a list of strings, got bytes"):
        memory.search(group, "Ann", scopes=b"facts")  # pyright: ignore[reportArgumentType]
    with pytest.raises(InvalidInput, match=r"^context query has 65 alternatives"):
        memory.context(group, " or ".join(["word"] * 65))
    with pytest.raises(InvalidInput, match="as_of takes a datetime, or None"):
        memory.facts(group, as_of=timestone.NOW)  # pyright: ignore[reportArgumentType]
    with pytest.raises(InvalidInput, match="as_of takes a datetime, or None"):
        memory.search(group, "Ann", as_of=timestone.NOW)  # pyright: ignore[reportArgumentType]

"""Time relative to an event ("after the road trip", "before she moved to Lyon"): the
search looks the event up in the group and favours what lies on the side asked
(``timestone.search._question.event_of``, ``timestone.search._run``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import timestone
from timestone import FactInput as F
from timestone.search._question import event_of, event_window
from timestone.search._request import MAX_QUERY_CHARS, prepare_search


@pytest.mark.parametrize(
    ("question", "event"),
    [
        ("When did Melanie go on a hike after the road trip?", ("after", "the road trip")),
        ("Where did Mira work before she moved to Lyon?", ("before", "she moved to Lyon")),
        (
            "How has his fitness improved since starting boot camps?",
            ("after", "starting boot camps"),
        ),
        ("What did she sell prior to the move, and why?", ("before", "the move")),
        ("Where was he until the wedding?", ("before", "the wedding")),
        # words that lead to no event
        ("After how many weeks did Tim call back?", None),
        ("What did she say after all?", None),
        ("What has she done since then?", None),
        ("What did he do the week before August 3, 2023?", None),
        ("Where was she before Monday?", None),
        ("What did she do before 2020?", None),
        ("What happened after?", None),
        ("What did she paint?", None),
    ],
)
def test_a_question_names_an_event_and_its_side(
    question: str, event: tuple[str, str] | None
) -> None:
    assert event_of(question) == event


def test_the_window_holds_the_events_own_day_on_either_side() -> None:
    when = datetime(2022, 6, 1, 15, 30, tzinfo=UTC)
    after = event_window("after", when)
    before = event_window("before", when)
    assert after[0] == datetime(2022, 6, 1, tzinfo=UTC)
    assert after[1].year == 9999
    assert before[1] == datetime(2022, 6, 2, tzinfo=UTC)
    assert before[0].year == 1


def test_a_written_date_leaves_the_event_unread() -> None:
    """A date written out wins: the window is its day, and no lookup is needed."""
    req = prepare_search("What did she do after the trip in August 2023?", valid_at=None)
    assert req.event == ("after", "the trip in August 2023")
    assert req.window == (datetime(2023, 8, 1, tzinfo=UTC), datetime(2023, 9, 1, tzinfo=UTC))


def _at(year: int, month: int = 1, day: int = 1) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


def test_facts_on_the_side_of_the_event_lead(memory: timestone.Memory, group: str) -> None:
    """Two employers in turn and a move between them: "before she moved" puts the first
    employer first, "after" the second; only the side asked differs."""
    memory.add_facts(
        group,
        [
            F(
                "Mira",
                "WORKS_AT",
                "Nord",
                fact="Mira works at Nord.",
                valid_at=_at(2015),
                invalid_at=_at(2022, 5, 31),
            ),
            F("Mira", "LIVES_IN", "Lyon", fact="Mira moved to Lyon.", valid_at=_at(2022, 6, 1)),
            F("Mira", "WORKS_AT", "Sud", fact="Mira works at Sud.", valid_at=_at(2022, 7, 1)),
        ],
        reference_time=_at(2022, 7, 1),
    )
    firsts: dict[str, str] = {}
    for side in ("before", "after"):
        found = memory.search(
            group, f"Where did Mira work {side} she moved to Lyon?", valid_at=None, limit=3
        )
        firsts[side] = next(f.target for f in found.facts if f.relation == "WORKS_AT")
    assert firsts == {"before": "Nord", "after": "Sud"}


def test_a_turn_on_the_side_of_the_event_leads(memory: timestone.Memory, group: str) -> None:
    """The same words told before and after a road trip: the side the question asks
    decides which of the two leads (the trip's own turn is on both sides)."""
    may, june, july = _at(2023, 5, 20), _at(2023, 6, 20), _at(2023, 7, 20)
    hike = "Melanie: we went on a hike with the kids, the views were amazing."
    for uri, text, at in (
        ("may", hike, may),
        ("june", "Melanie: back from our road trip to the canyon, what a drive!", june),
        ("july", hike, july),
    ):
        memory.add_document(group, uri, text, reference_time=at)
    leads: dict[str, str | None] = {}
    for side in ("before", "after"):
        found = memory.search(
            group,
            f"When did Melanie go on a hike {side} the road trip?",
            scopes=("episodes",),
            valid_at=None,
            limit=3,
        )
        hikes = [e.document_uri for e in found.episodes if e.document_uri != "june"]
        leads[side] = hikes[0]
    assert leads == {"before": "may", "after": "july"}
    # context() reads the same window
    ctx = memory.context(
        group, "When did Melanie go on a hike after the road trip?", token_budget=400, valid_at=None
    )
    hikes = [item for item in ctx.items if "hike" in item.text]
    assert hikes
    assert hikes[0].document_uri == "july"


def test_an_event_found_nowhere_gives_the_plain_search(
    memory: timestone.Memory, group: str
) -> None:
    memory.add_document(group, "a", "Melanie: we went on a hike.", reference_time=_at(2023))
    for question in ("Where did Melanie hike after the eclipse?", "Who hiked after the eclipse?"):
        found = memory.search(group, question, scopes=("episodes",), valid_at=None)
        assert [e.document_uri for e in found.episodes] == ["a"]
    # a scope with no date of its own looks nothing up
    found = memory.search(group, "Who hiked after the eclipse?", scopes=("entities",))
    assert found.entities == []
    # an empty group
    assert memory.search("empty-group", "What after the eclipse?", valid_at=None).facts == []


def test_a_question_of_the_longest_length_with_an_event_is_searched(
    memory: timestone.Memory, group: str
) -> None:
    """The event's lookup adds the question's names to its words: never more than a
    question may hold."""
    memory.add_document(group, "a", "Melanie: the road trip.", reference_time=_at(2023))
    names = " ".join(["Melanie"] * 200)
    question = (names + " after the road trip " + "x" * MAX_QUERY_CHARS)[:MAX_QUERY_CHARS]
    found = memory.search(group, question, scopes=("episodes",), valid_at=None)
    assert [e.document_uri for e in found.episodes] == ["a"]


async def test_the_async_memory_looks_the_event_up_too(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    hike = "Jo: we went on a hike along the ridge."
    for uri, text, at in (
        ("before", hike, _at(2023, 3, 1)),
        ("trip", "Jo: home from the road trip to the coast.", _at(2023, 4, 1)),
        ("after", hike, _at(2023, 5, 1)),
    ):
        await amemory.add_document(group, uri, text, reference_time=at)
    leads: list[str | None] = []
    for side in ("before", "after"):
        found = await amemory.search(
            group, f"Where did Jo hike {side} the road trip?", scopes=("episodes",), valid_at=None
        )
        leads.append(next(e.document_uri for e in found.episodes if e.document_uri != "trip"))
    assert leads == ["before", "after"]

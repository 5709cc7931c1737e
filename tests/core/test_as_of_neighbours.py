"""An episodes search as of a moment lends a hit's credit to its neighbours in the
timeline held then, not in today's: a turn written later between two turns of one
conversation does not take the place of the reply the search found then."""

from __future__ import annotations

from datetime import UTC, datetime

import timestone


def _day(d: int) -> datetime:
    return datetime(2023, 5, d, tzinfo=UTC)


def _scored(found: timestone.SearchResults) -> list[tuple[str, float]]:
    return [(e.content, round(e.score or 0.0, 6)) for e in found.episodes]


def test_an_as_of_search_lends_to_the_neighbours_held_then(
    memory: timestone.Memory, group: str
) -> None:
    def told(uri: str, text: str, title: str, day: int) -> None:
        memory.add_document(group, uri, text, title=title, reference_time=_day(day), extract=False)

    told("chat://1", "I adopted a greyhound called Pixel.", "Chat", 1)
    told("chat://3", "Yes! She sleeps on the sofa all day.", "Chat", 3)  # the reply
    told("chat://x", "The quarterly budget meeting moved to Tuesday.", "Minutes", 3)
    told("park://1", "A bronze dog statue stands in the park.", "Park", 4)

    def asked(as_of: datetime | None) -> timestone.SearchResults:
        return memory.search(
            group, "greyhound Pixel", scopes=("episodes",), valid_at=None, as_of=as_of, limit=2
        )

    then = asked(None)
    moment = datetime.now(UTC)
    assert [e.content for e in then.episodes] == [
        "I adopted a greyhound called Pixel.",
        "Yes! She sleeps on the sofa all day.",
    ]
    told("chat://2", "Did you see the match yesterday?", "Chat", 2)  # between the two turns
    assert _scored(asked(moment)) == _scored(then)

"""``timeline`` narrowed by relation, by a window of world time and by a limit: the same
periods as the whole timeline filtered, in the same order."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import timestone
from timestone import EdgeType, Fact, FactInput, Ontology
from timestone.errors import InvalidInput, InvalidPeriod, NaiveDatetime

T0 = datetime(2010, 1, 1, tzinfo=UTC)
ONE = Ontology(
    edge_types=[
        EdgeType("WORKS_AT", cardinality="one"),
        EdgeType("LIVES_IN", cardinality="one"),
    ]
)


def _overlaps(f: Fact, since: datetime | None, until: datetime | None) -> bool:
    return (until is None or f.valid_at < until) and (
        since is None or f.invalid_at is None or f.invalid_at > since
    )


@pytest.fixture(scope="module")
def history(dsn: str) -> Iterator[tuple[timestone.Memory, str, list[Fact]]]:
    """Mira's employers and homes over ten years (periods closed by the next one, some
    ended early), Ada's too, and Ada knowing Mira: Mira's timeline holds both relations
    as source and one as target."""
    rnd = random.Random(3)
    mem = timestone.Memory.open(dsn, ontology=ONE)
    group = "window-" + uuid.uuid4().hex[:8]
    facts: list[FactInput] = []
    for person in ("Mira", "Ada"):
        for relation, places in (("WORKS_AT", "Firm"), ("LIVES_IN", "City")):
            day = 0
            for _ in range(25):
                day += rnd.randrange(20, 200)
                start = T0 + timedelta(days=day)
                end = start + timedelta(days=rnd.randrange(5, 60)) if rnd.random() < 0.2 else None
                facts.append(
                    FactInput(
                        person,
                        relation,
                        f"{places} {rnd.randrange(6)}",
                        valid_at=start,
                        invalid_at=end,
                    )
                )
    facts.append(FactInput("Ada", "KNOWS", "Mira", valid_at=T0 + timedelta(days=400)))
    rnd.shuffle(facts)
    mem.add_facts(group, facts, reference_time=T0)
    whole = mem.timeline(group, "Mira")
    assert {f.relation for f in whole} == {"WORKS_AT", "LIVES_IN", "KNOWS"}
    yield mem, group, whole
    mem.close()


def test_windows_relations_and_limits_are_the_whole_timeline_filtered(
    history: tuple[timestone.Memory, str, list[Fact]],
) -> None:
    mem, group, whole = history
    rnd = random.Random(8)
    edges = sorted({f.valid_at for f in whole} | {f.invalid_at for f in whole if f.invalid_at})
    for draw in range(100):
        # bounds on period edges, next to them, and open
        picks = [rnd.choice(edges) + timedelta(seconds=rnd.choice([-1, 0, 0, 1])) for _ in "ab"]
        since, until = sorted(picks)
        if since == until:
            until += timedelta(days=1)
        since = None if draw % 7 == 0 else since
        until = None if draw % 5 == 0 else until
        relation = rnd.choice([None, "WORKS_AT", "LIVES_IN", "KNOWS"])
        limit = rnd.choice([None, 1, 3, 1000])
        got = mem.timeline(group, "Mira", relation=relation, since=since, until=until, limit=limit)
        expected = [
            f
            for f in whole
            if (relation is None or f.relation == relation) and _overlaps(f, since, until)
        ][:limit]
        assert [f.version_id for f in got] == [f.version_id for f in expected], (
            draw,
            since,
            until,
            relation,
            limit,
        )


def test_the_window_is_half_open_as_periods_are(
    history: tuple[timestone.Memory, str, list[Fact]],
) -> None:
    mem, group, whole = history
    period = next(f for f in whole if f.relation == "WORKS_AT" and f.invalid_at is not None)
    assert period.invalid_at is not None
    inside = period.valid_at + (period.invalid_at - period.valid_at) / 2
    got = mem.timeline(
        group, "Mira", relation="WORKS_AT", since=inside, until=inside + timedelta(seconds=1)
    )
    assert [f.version_id for f in got] == [period.version_id]
    # a period ends where its invalid_at is: a window from there on no longer holds it
    after = mem.timeline(group, "Mira", relation="WORKS_AT", since=period.invalid_at)
    assert period.version_id not in {f.version_id for f in after}
    # nor does a window that ends where it starts
    before = mem.timeline(group, "Mira", relation="WORKS_AT", until=period.valid_at)
    assert period.version_id not in {f.version_id for f in before}
    assert before == [f for f in whole if f.relation == "WORKS_AT" and f.valid_at < period.valid_at]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"since": datetime(2020, 1, 1)}, NaiveDatetime, "since"),
        ({"until": datetime(2020, 1, 1)}, NaiveDatetime, "until"),
        (
            {"since": datetime(2021, 1, 1, tzinfo=UTC), "until": datetime(2020, 1, 1, tzinfo=UTC)},
            InvalidPeriod,
            "until .* must be after since",
        ),
        (
            {"since": datetime(2021, 1, 1, tzinfo=UTC), "until": datetime(2021, 1, 1, tzinfo=UTC)},
            InvalidPeriod,
            "until .* must be after since",
        ),
        ({"limit": 0}, InvalidInput, "limit"),
        ({"limit": 1001}, InvalidInput, "limit"),
        ({"limit": True}, InvalidInput, "limit"),
        ({"relation": ""}, InvalidInput, "relation"),
        ({"relation": "R\x00"}, InvalidInput, "relation"),
        ({"relation": "R" * 129}, InvalidInput, "relation"),
    ],
)
def test_a_bad_window_is_refused_by_name(
    history: tuple[timestone.Memory, str, list[Fact]],
    kwargs: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    mem, group, _ = history
    with pytest.raises(error, match=message):
        mem.timeline(group, "Mira", **kwargs)

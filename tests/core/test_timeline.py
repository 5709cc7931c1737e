"""The date fight as a pure function, against an independent pointwise model."""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from timestone.write._date_fight import Assertion, Period, compute_slot

T0 = datetime(2000, 1, 1, tzinfo=UTC)
TARGETS = [uuid.UUID(int=i + 1) for i in range(3)]


def year(n: int) -> datetime:
    return T0 + timedelta(days=365 * n)


def make(
    target: int, valid: int, invalid: int | None = None, recorded: int = 0, episode: int = 0
) -> Assertion:
    return Assertion(
        id=uuid.uuid4(),
        episode_id=uuid.UUID(int=1000 + episode),
        recorded_at=T0 + timedelta(seconds=recorded),
        position=0,
        target_id=TARGETS[target],
        valid_at=year(valid),
        invalid_at=None if invalid is None else year(invalid),
        fact=f"target {target}",
        attributes={},
    )


def value_at(periods: list[Period], t: datetime) -> uuid.UUID | None:
    hits = [
        p.target_id
        for p in periods
        if p.valid_at <= t and (p.invalid_at is None or t < p.invalid_at)
    ]
    assert len(hits) <= 1, "two periods of one slot overlap"
    return hits[0] if hits else None


def reference_value(assertions: list[Assertion], t: datetime) -> uuid.UUID | None:
    """Independent model: the latest-starting assertion at or before t speaks for t (ties: the
    latest recording); it holds unless its own end has passed."""
    started = [a for a in assertions if a.valid_at <= t]
    if not started:
        return None
    latest = max(a.valid_at for a in started)
    speaker = max((a for a in started if a.valid_at == latest), key=lambda a: a.order)
    if speaker.invalid_at is not None and t >= speaker.invalid_at:
        return None
    return speaker.target_id


def probe_times(assertions: list[Assertion]) -> list[datetime]:
    points = {T0 - timedelta(days=1)}
    for a in assertions:
        points.update({a.valid_at, a.valid_at - timedelta(days=1), a.valid_at + timedelta(days=1)})
        if a.invalid_at is not None:
            points.update({a.invalid_at, a.invalid_at - timedelta(days=1)})
    return sorted(points)


def test_mira_with_backfill() -> None:
    nord15 = make(0, 15, recorded=1, episode=1)
    sud23 = make(1, 23, recorded=2, episode=2)
    nord19 = make(0, 19, recorded=3, episode=3)
    periods = compute_slot([nord15, sud23, nord19])
    assert [(p.target_id, p.valid_at, p.invalid_at) for p in periods] == [
        (TARGETS[0], year(15), year(23)),
        (TARGETS[1], year(23), None),
    ]
    # provenance in recording order, the first is the author and the fact's stable id
    assert periods[0].episodes == (nord15.episode_id, nord19.episode_id)
    assert periods[0].id == nord15.id


def test_correction_at_equal_valid_at_expires_the_earlier() -> None:
    wrong = make(0, 10, recorded=1)
    right = make(1, 10, recorded=2)
    [period] = compute_slot([wrong, right])
    assert period.target_id == TARGETS[1]
    assert period.id == right.id


def test_later_world_date_with_an_end_closes_an_open_period() -> None:
    opened = make(0, 15, recorded=1)
    closed = make(0, 17, invalid=23, recorded=2)
    [period] = compute_slot([opened, closed])
    assert (period.valid_at, period.invalid_at) == (year(15), year(23))


def test_gap_keeps_two_facts() -> None:
    first = make(0, 10, invalid=12)
    again = make(0, 14)
    periods = compute_slot([first, again])
    assert [(p.valid_at, p.invalid_at) for p in periods] == [(year(10), year(12)), (year(14), None)]


assertion_specs = st.lists(
    st.tuples(
        st.integers(0, 2),  # target
        st.integers(0, 12),  # valid year
        st.one_of(st.none(), st.integers(1, 6)),  # length of an explicit period
    ),
    min_size=1,
    max_size=7,
)


def _build(specs: list[tuple[int, int, int | None]]) -> list[Assertion]:
    return [
        make(t, v, None if d is None else v + d, recorded=i, episode=i)
        for i, (t, v, d) in enumerate(specs)
    ]


@settings(max_examples=300, deadline=None)
@given(assertion_specs)
def test_matches_the_pointwise_model(specs: list[tuple[int, int, int | None]]) -> None:
    assertions = _build(specs)
    periods = compute_slot(assertions)
    for t in probe_times(assertions):
        assert value_at(periods, t) == reference_value(assertions, t), t
    # maximal: neighbouring periods of one target are merged
    for a, b in itertools.pairwise(periods):
        assert not (a.target_id == b.target_id and a.invalid_at == b.valid_at)
        assert a.invalid_at is not None
        assert a.invalid_at <= b.valid_at


@settings(max_examples=200, deadline=None)
@given(assertion_specs, st.randoms(use_true_random=False))
def test_order_independent_for_distinct_valid_at(
    specs: list[tuple[int, int, int | None]], rnd: object
) -> None:
    import random

    assert isinstance(rnd, random.Random)
    distinct = list({v: (t, v, d) for t, v, d in specs}.values())
    assertions = _build(distinct)
    shuffled = [
        Assertion(
            id=a.id,
            episode_id=a.episode_id,
            recorded_at=T0 + timedelta(seconds=rank),
            position=0,
            target_id=a.target_id,
            valid_at=a.valid_at,
            invalid_at=a.invalid_at,
            fact=a.fact,
            attributes={},
        )
        for rank, a in enumerate(rnd.sample(assertions, len(assertions)))
    ]

    def shape(ps: list[Period]) -> list[tuple[object, ...]]:
        return [(p.target_id, p.valid_at, p.invalid_at, frozenset(p.episodes)) for p in ps]

    assert shape(compute_slot(assertions)) == shape(compute_slot(shuffled))


@given(
    target=st.integers(0, 2),
    valid=st.integers(0, 20),
    length=st.none() | st.integers(1, 5),
    attributes=st.dictionaries(
        st.sampled_from(["role", "since", "team"]), st.integers(), max_size=3
    ),
)
def test_a_slot_said_once_takes_the_short_way_to_the_same_period(
    target: int, valid: int, length: int | None, attributes: dict[str, int]
) -> None:
    alone = dataclasses.replace(
        make(target, valid, None if length is None else valid + length), attributes=attributes
    )
    # a list takes the one-assertion path; an iterator the general steps
    assert compute_slot([alone]) == compute_slot(iter([alone]))

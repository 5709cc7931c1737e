"""The bi-temporal core against an independent reference model, on the real database.

Properties: as-of after each episode equals the state computed from the
episodes up to it; removal equals never ingesting; rollback equals as-of;
timelines do not depend on ingestion order; re-ingestion writes nothing; over two
cardinality-one slots and a cardinality-many relation, through several removals and
the ingestion again of removed episodes, the facts held and the facts true at a world
time equal the model's.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Literal, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_rows import row_counts

import timestone
from timestone import EdgeType, FactInput, Ontology

T0 = datetime(2000, 1, 1, tzinfo=UTC)
TARGETS = ("Nord", "Sud", "Est")
Row = tuple[str, str, str, datetime, datetime | None]


def year(n: int) -> datetime:
    return T0 + timedelta(days=365 * n)


# An episode: a reference year and facts (target index, valid year, optional duration).
Spec = tuple[int, list[tuple[int, int, int | None]]]


def reference(episodes: list[Spec]) -> set[Row]:
    """Periods of the slot (Mira, DIRECTS), derived pointwise, independent of the library."""
    assertions: list[tuple[datetime, datetime | None, str, int]] = []
    for order, (_, facts) in enumerate(episodes):
        for pos, (t, v, d) in enumerate(facts):
            assertions.append(
                (year(v), None if d is None else year(v + d), TARGETS[t], order * 100 + pos)
            )

    def value(t: datetime) -> str | None:
        started = [a for a in assertions if a[0] <= t]
        if not started:
            return None
        latest = max(a[0] for a in started)
        speaker = max((a for a in started if a[0] == latest), key=lambda a: a[3])
        if speaker[1] is not None and t >= speaker[1]:
            return None
        return speaker[2]

    bounds = sorted({a[0] for a in assertions} | {a[1] for a in assertions if a[1] is not None})
    periods: list[list[object]] = []
    for i, start in enumerate(bounds):
        end = bounds[i + 1] if i + 1 < len(bounds) else None
        v = value(start)
        if v is None:
            continue
        if periods and periods[-1][0] == v and periods[-1][2] == start:
            periods[-1][2] = end
        else:
            periods.append([v, start, end])
    return {("Mira", "DIRECTS", str(v), s, e) for v, s, e in periods}  # type: ignore[misc]


def facts_of(spec: Spec) -> list[FactInput]:
    _, facts = spec
    return [
        FactInput(
            "Mira",
            "DIRECTS",
            TARGETS[t],
            valid_at=year(v),
            invalid_at=None if d is None else year(v + d),
        )
        for t, v, d in facts
    ]


def state(mem: timestone.Memory, group: str, as_of: datetime | None = None) -> set[Row]:
    return {
        (f.source, f.relation, f.target, f.valid_at, f.invalid_at)
        for f in mem.facts(group, valid_at=None, as_of=as_of, limit=1000)
    }


@pytest.fixture(scope="module")
def slot_memory(dsn: str) -> timestone.Memory:
    onto = Ontology(edge_types=[EdgeType("DIRECTS", cardinality="one")])
    return timestone.Memory.open(dsn, ontology=onto)


fact_spec = st.tuples(
    st.integers(0, 2), st.integers(0, 15), st.one_of(st.none(), st.integers(1, 5))
)
episode_specs = st.lists(
    st.tuples(st.integers(0, 30), st.lists(fact_spec, min_size=1, max_size=2)),
    min_size=1,
    max_size=5,
)


def ingest(mem: timestone.Memory, group: str, spec: Spec, n: int) -> timestone.IngestResult:
    return mem.add_facts(group, facts_of(spec), reference_time=year(spec[0]), name=f"episode {n}")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(episode_specs, st.data())
def test_as_of_removal_and_rollback_match_the_model(
    slot_memory: timestone.Memory, episodes: list[Spec], data: st.DataObject
) -> None:
    mem = slot_memory
    group = "p-" + uuid.uuid4().hex[:12]
    written = [(spec, ingest(mem, group, spec, n)) for n, spec in enumerate(episodes)]
    # an identical episode again is the same idempotency key: nothing is written for it
    kept = [spec for spec, r in written if r.created]
    results = [r for _, r in written if r.created]
    assert state(mem, group) == reference(kept)
    for i, r in enumerate(results):
        assert state(mem, group, as_of=r.recorded_at) == reference(kept[: i + 1])

    k = data.draw(st.integers(0, len(results) - 1), label="removed")
    mem.remove_episode(group, results[k].episode.id)
    without = [spec for i, spec in enumerate(kept) if i != k]
    assert state(mem, group) == reference(without)
    # history is still readable
    assert state(mem, group, as_of=results[-1].recorded_at) == reference(kept)

    j = data.draw(st.integers(0, len(results) - 1), label="rollback to")
    before = state(mem, group, as_of=results[j].recorded_at)
    report = mem.rollback(group, to=results[j].recorded_at)
    assert state(mem, group) == before == reference(kept[: j + 1])
    # the rollback itself can be rolled back
    mem.rollback(group, to=report.rolled_back_at - timedelta(microseconds=1))
    assert state(mem, group) == reference(without)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(fact_spec, min_size=1, max_size=6, unique_by=lambda f: f[1]), st.randoms())
def test_timeline_is_independent_of_ingestion_order(
    slot_memory: timestone.Memory, facts: list[tuple[int, int, int | None]], rnd: object
) -> None:
    import random

    assert isinstance(rnd, random.Random)
    episodes: list[Spec] = [(f[1], [f]) for f in facts]
    shuffled = rnd.sample(episodes, len(episodes))
    g1, g2 = "o-" + uuid.uuid4().hex[:12], "o-" + uuid.uuid4().hex[:12]
    for n, spec in enumerate(episodes):
        ingest(slot_memory, g1, spec, n)
    for n, spec in enumerate(shuffled):
        ingest(slot_memory, g2, spec, n)
    assert state(slot_memory, g1) == state(slot_memory, g2) == reference(episodes)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(episode_specs)
def test_reingestion_writes_nothing(
    slot_memory: timestone.Memory, dsn: str, episodes: list[Spec]
) -> None:
    group = "i-" + uuid.uuid4().hex[:12]
    first = [ingest(slot_memory, group, spec, n) for n, spec in enumerate(episodes)]
    counts = row_counts(dsn, group)
    again = [ingest(slot_memory, group, spec, n) for n, spec in enumerate(episodes)]
    assert all(not r.created for r in again)
    assert row_counts(dsn, group) == counts
    for a, b in zip(first, again, strict=True):
        if a.created:
            assert a.episode.id == b.episode.id
            assert b.recorded_at == a.recorded_at


# -- two cardinality-one slots and a cardinality-many relation, with removals and re-ingestion

SOURCES = ("Mira", "Ada")
RELATIONS: dict[str, Literal["one", "many"]] = {
    "DIRECTS": "one",
    "WORKS_AT": "one",
    "LIKES": "many",
}
# a fact: (source index, relation index, target index, valid year, optional duration)
Fact5 = tuple[int, int, int, int, int | None]


def slot_periods(episodes: list[list[Fact5]]) -> set[Row]:
    """Every slot's periods, derived pointwise like ``reference``, independent of the library.

    A slot is (source, relation) for a cardinality-one relation and (source, relation,
    target) for a cardinality-many one; ``episodes`` are in recording order.
    """
    slots: dict[tuple[str, ...], list[tuple[datetime, datetime | None, str, int]]] = {}
    for order, facts in enumerate(episodes):
        for pos, (s, r, t, v, d) in enumerate(facts):
            relation = list(RELATIONS)[r]
            key = (SOURCES[s], relation)
            if RELATIONS[relation] == "many":
                key = (*key, TARGETS[t])
            end = None if d is None else year(v + d)
            slots.setdefault(key, []).append((year(v), end, TARGETS[t], order * 100 + pos))
    rows: set[Row] = set()
    for (source, relation, *_), assertions in slots.items():
        rows |= {(source, relation, v, s, e) for v, s, e in _periods(assertions)}
    return rows


def _periods(
    assertions: list[tuple[datetime, datetime | None, str, int]],
) -> list[tuple[str, datetime, datetime | None]]:
    """One slot's periods from its assertions (start, end, target, recording order)."""

    def value(t: datetime) -> str | None:
        started = [a for a in assertions if a[0] <= t]
        if not started:
            return None
        latest = max(a[0] for a in started)
        speaker = max((a for a in started if a[0] == latest), key=lambda a: a[3])
        return None if speaker[1] is not None and t >= speaker[1] else speaker[2]

    bounds = sorted({a[0] for a in assertions} | {a[1] for a in assertions if a[1] is not None})
    periods: list[tuple[str, datetime, datetime | None]] = []
    for i, start in enumerate(bounds):
        end = bounds[i + 1] if i + 1 < len(bounds) else None
        v = value(start)
        if v is None:
            continue
        if periods and periods[-1][0] == v and periods[-1][2] == start:
            periods[-1] = (v, periods[-1][1], end)
        else:
            periods.append((v, start, end))
    return periods


def true_at(rows: set[Row], t: datetime) -> set[Row]:
    return {r for r in rows if r[3] <= t and (r[4] is None or t < r[4])}


@pytest.fixture(scope="module")
def slots_memory(dsn: str) -> timestone.Memory:
    onto = Ontology(edge_types=[EdgeType(name, cardinality=c) for name, c in RELATIONS.items()])
    return timestone.Memory.open(dsn, ontology=onto)


fact5 = st.tuples(
    st.integers(0, 1),
    st.integers(0, 2),
    st.integers(0, 2),
    st.integers(0, 15),
    st.one_of(st.none(), st.integers(1, 5)),
)
# an operation: add an episode, remove the live episode at an index, or ingest again the
# removed episode at an index (under its idempotency key, which its removal freed)
operation = st.one_of(
    st.tuples(st.just("add"), st.lists(fact5, min_size=1, max_size=4)),
    st.tuples(st.just("remove"), st.integers(0, 10)),
    st.tuples(st.just("again"), st.integers(0, 10)),
)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(fact5, min_size=1, max_size=4),
    st.lists(operation, min_size=3, max_size=8),
    st.lists(st.integers(0, 22), min_size=3, max_size=3),
)
def test_two_slots_and_a_many_relation_through_removals_and_reingestion(
    slots_memory: timestone.Memory,
    first: list[Fact5],
    operations: list[tuple[str, object]],
    years: list[int],
) -> None:
    mem = slots_memory
    group = "m-" + uuid.uuid4().hex[:12]
    live: list[tuple[str, list[Fact5], uuid.UUID]] = []  # (key, facts, episode id), recorded order
    removed: list[tuple[str, list[Fact5]]] = []

    def add(key: str, facts: list[Fact5]) -> None:
        inputs = [
            FactInput(
                SOURCES[s],
                list(RELATIONS)[r],
                TARGETS[t],
                valid_at=year(v),
                invalid_at=None if d is None else year(v + d),
            )
            for s, r, t, v, d in facts
        ]
        res = mem.add_facts(group, inputs, reference_time=year(20), idempotency_key=key)
        assert res.created
        live.append((key, facts, res.episode.id))

    def check() -> None:
        model = slot_periods([facts for _, facts, _ in live])
        assert state(mem, group) == model
        # on a year's first day (a bound: starts are in, ends are out) and inside it
        for t in [w for y in years for w in (year(y), year(y) + timedelta(days=100))]:
            at_t = {
                (f.source, f.relation, f.target, f.valid_at, f.invalid_at)
                for f in mem.facts(group, valid_at=t, limit=1000)
            }
            assert at_t == true_at(model, t)

    add("e0", first)
    check()
    for n, (kind, arg) in enumerate(operations, start=1):
        if kind == "add":
            add(f"e{n}", cast(list[Fact5], arg))
        elif kind == "remove" and live:
            key, facts, episode = live.pop(cast(int, arg) % len(live))
            mem.remove_episode(group, episode)
            removed.append((key, facts))
        elif kind == "again" and removed:
            key, facts = removed.pop(cast(int, arg) % len(removed))
            add(key, facts)  # a new episode: its assertions are the latest recorded
        else:
            continue
        check()

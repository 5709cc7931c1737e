"""Which assertions a write recomputes: one target's slot of a cardinality-many relation,
and every cardinality-one assertion of the pair, whatever the ontology says today."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import psycopg

import timestone
from timestone import EdgeType, FactInput, Ontology
from timestone.write._date_fight import Assertion, compute_slot


def _at(year: int) -> datetime:
    return datetime(year, 1, 1, tzinfo=UTC)


def _periods(memory: timestone.Memory, group: str) -> list[tuple[str, int, int | None]]:
    facts = memory.facts(group, source="Ada", relation="LIKES", valid_at=None, limit=1000)
    return sorted(
        (f.target, f.valid_at.year, f.invalid_at.year if f.invalid_at else None) for f in facts
    )


def test_a_many_write_leaves_the_pairs_one_history_whole(
    dsn: str, memory: timestone.Memory
) -> None:
    group = "slots-" + uuid.uuid4().hex[:10]
    one = Ontology(edge_types=[EdgeType("LIKES", cardinality="one")])
    with timestone.Memory.open(dsn, ontology=one) as strict:
        strict.add_facts(
            group, [FactInput("Ada", "LIKES", "Tea", valid_at=_at(2022))], reference_time=_at(2022)
        )
        strict.add_facts(
            group,
            [FactInput("Ada", "LIKES", "Coffee", valid_at=_at(2021))],
            reference_time=_at(2021),
        )
    before = _periods(memory, group)
    assert before == [("Coffee", 2021, 2022), ("Tea", 2022, None)]
    # the default ontology makes LIKES cardinality many: this write touches Coffee's slot
    memory.add_facts(
        group, [FactInput("Ada", "LIKES", "Coffee", valid_at=_at(2023))], reference_time=_at(2023)
    )
    assert _periods(memory, group) == [*before[:1], ("Coffee", 2023, None), *before[1:]]


def test_removal_reads_the_rows_of_the_cardinality_it_retracts(
    dsn: str, memory: timestone.Memory
) -> None:
    """A pair with cardinality-one rows (an earlier ontology's) and cardinality-many rows:
    removing an episode of either kind gives the graph that never saw it."""
    group = "slots-" + uuid.uuid4().hex[:10]
    one = Ontology(edge_types=[EdgeType("LIKES", cardinality="one")])
    with timestone.Memory.open(dsn, ontology=one) as strict:
        strict.add_facts(
            group, [FactInput("Ada", "LIKES", "Tea", valid_at=_at(2022))], reference_time=_at(2022)
        )
        later = strict.add_facts(
            group,
            [FactInput("Ada", "LIKES", "Coffee", valid_at=_at(2024))],
            reference_time=_at(2024),
        )
    before = _periods(memory, group)
    assert before == [("Coffee", 2024, None), ("Tea", 2022, 2024)]
    many = memory.add_facts(
        group, [FactInput("Ada", "LIKES", "Milk", valid_at=_at(2023))], reference_time=_at(2023)
    )
    assert _periods(memory, group) == [*before[:1], ("Milk", 2023, None), *before[1:]]
    memory.remove_episode(group, many.episode.id)
    assert _periods(memory, group) == before
    memory.remove_episode(group, later.episode.id)
    assert _periods(memory, group) == [("Tea", 2022, None)]


def test_a_write_to_one_target_of_a_busy_pair_changes_only_that_target(
    memory: timestone.Memory,
) -> None:
    group = "slots-" + uuid.uuid4().hex[:10]
    liked = [FactInput("Ada", "LIKES", f"Thing {i:03d}", valid_at=_at(2020)) for i in range(300)]
    memory.add_facts(group, liked, reference_time=_at(2020))
    ended = FactInput("Ada", "LIKES", "Thing 007", valid_at=_at(2020), invalid_at=_at(2024))
    res = memory.add_facts(group, [ended], reference_time=_at(2024))
    assert [(f.target, f.invalid_at) for f in res.facts] == [("Thing 007", _at(2024))]
    periods = _periods(memory, group)
    assert len(periods) == 300
    assert ("Thing 007", 2020, 2024) in periods
    assert sum(1 for _, _, end in periods if end is None) == 299


def _current(dsn: str, group: str) -> list[tuple[object, ...]]:
    """Mira's employers as the current versions say them."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id, target_id, valid_at, invalid_at, fact, attributes, episodes"
            " FROM timestone.facts WHERE group_id = %s AND expired_at IS NULL ORDER BY valid_at",
            (group,),
        ).fetchall()
    return [(r[0], r[1], r[2], r[3], r[4], r[5], tuple(r[6])) for r in rows]


def _fought(dsn: str, group: str) -> list[tuple[object, ...]]:
    """The date fight over every current assertion of the slot, read whole."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id, episode_id, recorded_at, position, target_id, valid_at, invalid_at,"
            " fact, attributes FROM timestone.assertions"
            " WHERE group_id = %s AND expired_at IS NULL",
            (group,),
        ).fetchall()
    periods = compute_slot([Assertion(*r) for r in rows])
    return [
        (p.id, p.target_id, p.valid_at, p.invalid_at, p.fact, dict(p.attributes), p.episodes)
        for p in periods
    ]


def _employment(
    rnd: random.Random, i: int, when: datetime, ended: float, longest: int
) -> FactInput:
    """Mira at one of three employers from ``when``, ended with odds ``ended`` within
    ``longest`` days; the sentence and attributes vary with ``i``."""
    target = rnd.choice(["Acme", "Nord", "Sud"])
    end = when + timedelta(days=rnd.randrange(1, longest)) if rnd.random() < ended else None
    return FactInput(
        "Mira",
        "WORKS_AT",
        target,
        fact=f"Mira works at {target} ({i % 3}).",
        valid_at=when,
        invalid_at=end,
        attributes={"k": i % 4, f"a{i % 2}": i},
    )


def test_a_write_after_the_end_of_a_timeline_makes_what_the_whole_fight_makes(
    dsn: str,
) -> None:
    """A write whose assertions are later than all a slot holds reads the slot from the
    start of its last period. Random histories (repeated employers, closed periods, gaps,
    corrections on the last date, a few assertions into the middle), written one call at
    a time in date order, where most writes read only that tail: after every write the
    current versions are the date fight over every assertion of the slot, read whole."""
    one = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
    rnd = random.Random(7)
    with timestone.Memory.open(dsn, ontology=one) as mem:
        for draw in range(5):
            group = f"tail-{draw}-" + uuid.uuid4().hex[:8]
            day = 0
            for i in range(40):
                if rnd.random() < 0.1:  # into the middle: the whole slot is read
                    when = _at(2000) + timedelta(days=rnd.randrange(max(1, day)), hours=1)
                else:
                    day += rnd.choice([0, 1, 1, 2, 30])  # 0: a correction on the last date
                    when = _at(2000) + timedelta(days=day)
                fact = _employment(rnd, i, when, ended=0.3, longest=40)
                mem.add_facts(group, [fact], reference_time=_at(2000))
                assert _current(dsn, group) == _fought(dsn, group), (draw, i)


def test_writes_and_removals_anywhere_in_a_timeline_make_what_the_whole_fight_makes(
    dsn: str,
) -> None:
    """A write or a removal reads a cardinality-one slot in the window around its dates.
    Random histories of few dates (so that writes land on the starts of periods, as
    corrections, and between them, next to periods of the same target that they merge
    with), written one or three assertions a call anywhere in the timeline, and removals
    of earlier episodes: after every step the current versions are the date fight over
    every assertion of the slot, read whole."""
    one = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
    rnd = random.Random(11)
    with timestone.Memory.open(dsn, ontology=one) as mem:
        for draw in range(6):
            group = f"window-{draw}-" + uuid.uuid4().hex[:8]
            episodes: list[uuid.UUID] = []
            for i in range(45):
                if episodes and rnd.random() < 0.15:
                    mem.remove_episode(group, episodes.pop(rnd.randrange(len(episodes))))
                    assert _current(dsn, group) == _fought(dsn, group), (draw, i, "removal")
                    continue
                facts = [
                    _employment(
                        rnd, i, _at(2000) + timedelta(days=rnd.randrange(60)), ended=0.2, longest=20
                    )
                    for _ in range(rnd.choice([1, 1, 1, 3]))
                ]
                res = mem.add_facts(group, facts, reference_time=_at(2000), name=f"step {i}")
                episodes.append(res.episode.id)
                assert _current(dsn, group) == _fought(dsn, group), (draw, i)


def test_graph_retractions_anywhere_in_a_timeline_make_what_the_whole_fight_makes(
    dsn: str,
) -> None:
    """The property graph store's retractions read a cardinality-one slot in the window
    around the dates they retract, as a removal does: an edge (a current fact, every
    assertion of its source, relation and target) or a target node (every assertion that
    names it), anywhere in random histories. After every step the current versions are
    the date fight over every assertion of the slot, read whole."""
    one = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
    rnd = random.Random(5)
    with timestone.Memory.open(dsn, ontology=one) as mem:
        for draw in range(5):
            group = f"retract-{draw}-" + uuid.uuid4().hex[:8]
            retracted = 0
            for i in range(40):
                current = mem.facts(group, source="Mira", valid_at=None, limit=1000)
                if current and rnd.random() < 0.2:
                    if rnd.random() < 0.75:
                        gone = rnd.choice(current)
                        counts = mem.graph_retract(group, edges=[gone.id])
                        step = f"edge {gone.target}"
                    else:
                        target = rnd.choice(sorted({f.target for f in current}))
                        counts = mem.graph_retract(group, ids=[target])
                        step = f"node {target}"
                    assert counts["facts"] >= 1, (draw, i, step)
                    retracted += 1
                    assert _current(dsn, group) == _fought(dsn, group), (draw, i, step)
                    continue
                facts = [
                    _employment(
                        rnd, i, _at(2000) + timedelta(days=rnd.randrange(60)), ended=0.2, longest=20
                    )
                    for _ in range(rnd.choice([1, 1, 1, 3]))
                ]
                mem.add_facts(group, facts, reference_time=_at(2000), name=f"step {i}")
                assert _current(dsn, group) == _fought(dsn, group), (draw, i)
            assert retracted >= 4, draw

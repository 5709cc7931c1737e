from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import timestone
from timestone import FactInput as F
from timestone.errors import InvalidGroup, InvalidInput
from timestone.graph._communities_async import MAX_ROUNDS, MIN_SUPPORT, propagate_labels
from timestone.llm import ReplayTransport, replay_llm

T2015 = datetime(2015, 1, 1, tzinfo=UTC)

WINE = [
    F("Mira", "DIRECTS", "Château Nord"),
    F("Mira", "WORKS_WITH", "Gamay"),
    F("Château Nord", "GROWS", "Gamay"),
    F("Château Nord", "LOCATED_IN", "Beaujolais"),
    F("Mira", "LIVES_IN", "Beaujolais"),
]
ENGINE = [
    F("Ada", "WROTE", "Notes"),
    F("Ada", "WORKS_WITH", "Babbage"),
    F("Babbage", "BUILT", "Engine"),
    F("Ada", "DESCRIBED", "Engine"),
    F("Babbage", "WROTE", "Notes"),
]


def test_propagation_needs_two_supporting_facts() -> None:
    triangle = [("a", "b"), ("b", "c"), ("a", "c")]
    labels = propagate_labels([*triangle, ("c", "stray")])
    assert labels["a"] == labels["b"] == labels["c"]
    assert labels["stray"] == "stray"  # one fact is not enough to join
    assert propagate_labels([("x", "y")]) == {"x": "x", "y": "y"}


def _labels_by_the_rule(edges: list[tuple[str, str]]) -> dict[str, str]:
    """Propagation and pruning as the rule states them, every community found by a pass
    over every node (quadratic): the reference the indexed pruning is checked against."""
    neighbours: dict[str, list[str]] = defaultdict(list)
    for s, t in edges:
        if s != t:
            neighbours[s].append(t)
            neighbours[t].append(s)
    label = {n: n for n in neighbours}
    order = sorted(neighbours)
    for _ in range(MAX_ROUNDS):
        changed = False
        for node in order:
            votes = Counter(label[m] for m in neighbours[node])
            tied = sorted(lab for lab, v in votes.items() if v == max(votes.values()))
            new = label[node] if label[node] in tied else tied[0]
            changed |= new != label[node]
            label[node] = new
        if not changed:
            break
    pruned = True
    while pruned:
        pruned = False
        for node in order:
            mine = label[node]
            support = sum(1 for m in neighbours[node] if m != node and label[m] == mine)
            others = [m for m in order if m != node and label[m] == mine]
            if support < MIN_SUPPORT and others:
                if mine == node:
                    for m in others:
                        label[m] = others[0]
                label[node] = node
                pruned = True
    return label


# a node leaves a community while others still carry its own label (it rejoins them)
_REJOIN = [
    ("n16", "n08"),
    ("n02", "n03"),
    ("n12", "n07"),
    ("n09", "n13"),
    ("n13", "n12"),
    ("n12", "n05"),
    ("n01", "n10"),
    ("n16", "n17"),
    ("n16", "n02"),
    ("n16", "n13"),
    ("n07", "n16"),
    ("n16", "n09"),
    ("n16", "n12"),
    ("n15", "n13"),
    ("n13", "n15"),
    ("n06", "n10"),
    ("n11", "n14"),
    ("n09", "n16"),
    ("n10", "n10"),
    ("n08", "n08"),
    ("n09", "n10"),
    ("n16", "n01"),
    ("n17", "n06"),
    ("n08", "n16"),
    ("n07", "n05"),
    ("n08", "n04"),
    ("n15", "n08"),
    ("n08", "n07"),
    ("n06", "n04"),
    ("n00", "n00"),
    ("n02", "n08"),
    ("n00", "n09"),
    ("n14", "n05"),
    ("n09", "n04"),
    ("n04", "n17"),
    ("n11", "n17"),
    ("n09", "n01"),
    ("n10", "n02"),
    ("n02", "n11"),
    ("n16", "n01"),
    ("n17", "n05"),
    ("n15", "n01"),
    ("n04", "n15"),
]


@settings(max_examples=300, deadline=None)
@example(_REJOIN)
@given(
    st.lists(
        st.tuples(st.integers(0, 14), st.integers(0, 14)).map(
            lambda e: (f"n{e[0]:02d}", f"n{e[1]:02d}")
        ),
        max_size=45,
    )
)
def test_pruning_by_community_index_equals_the_rule(edges: list[tuple[str, str]]) -> None:
    assert propagate_labels(edges) == _labels_by_the_rule(edges)


def test_build_name_summary_and_search(memory: timestone.Memory, group: str) -> None:
    memory.add_facts(group, WINE + ENGINE, reference_time=T2015)
    report = memory.build_communities(group)
    assert (report.communities, report.created, report.entities) == (2, 2, 8)
    found = memory.search(group, "Babbage engine", scopes=("communities",))
    top = found.communities[0]
    assert "Babbage" in top.name
    assert "Babbage built Engine." in top.summary
    assert top.score is not None
    assert len(top.members) == 4
    again = memory.build_communities(group)
    assert (again.created, again.expired) == (0, 0)  # nothing changed: nothing written


def test_incremental_update_equals_rebuild(memory: timestone.Memory, group: str) -> None:
    memory.add_facts(group, WINE + ENGINE, reference_time=T2015)
    memory.build_communities(group)
    before = memory.search(group, "Ada Babbage", scopes=("communities",), limit=10)
    memory.add_facts(
        group,
        [
            F("Ada", "VISITED", "Beaujolais"),
            F("Ada", "TASTED", "Gamay"),
            F("Ada", "MET", "Mira"),
            F("Ada", "WORKS_AT", "Château Nord"),
            F("Ada", "OWNS", "Château Nord"),
        ],
        reference_time=datetime(2016, 1, 1, tzinfo=UTC),
    )
    updated = memory.update_communities(group)
    assert updated.created >= 1  # Ada now has more facts into the wine community
    ada, mira = memory.get_entity(group, "Ada"), memory.get_entity(group, "Mira")
    assert ada is not None
    assert mira is not None
    after_update = memory.search(group, "Ada Babbage Mira", scopes=("communities",), limit=10)
    memory.build_communities(group)
    rebuilt = memory.search(group, "Ada Babbage Mira", scopes=("communities",), limit=10)
    assert any({ada.id, mira.id} <= set(c.members) for c in after_update.communities)
    assert sorted(sorted(map(str, c.members)) for c in after_update.communities) == sorted(
        sorted(map(str, c.members)) for c in rebuilt.communities
    )
    as_before = memory.search(
        group,
        "Ada Babbage",
        scopes=("communities",),
        limit=10,
        as_of=before.communities[0].created_at,
    )
    assert {c.version_id for c in as_before.communities} == {
        c.version_id for c in before.communities
    }


FIXTURE = Path(__file__).parent.parent / "fixtures" / "llm" / "community_names.json"


def test_llm_names_communities_in_one_batched_call(dsn: str, group: str) -> None:
    transport = ReplayTransport.from_file(FIXTURE)
    # the naming call only: the relations' cardinality is not asked (test_cardinality.py)
    llm = replay_llm(transport, backoff=0.0)
    with timestone.Memory.open(dsn, llm=llm, infer_cardinality=False) as mem:
        mem.add_facts(group, WINE + ENGINE, reference_time=T2015)
        report = mem.build_communities(group)
        assert report.created == 2
        transport.check()  # exactly one call, as scripted
        assert len(transport.requests) == 1
        prompt = json.dumps(transport.requests[0]["messages"], ensure_ascii=False)
        assert "Babbage built Engine." in prompt
        found = mem.search(group, "winery", scopes=("communities",), limit=1)
        assert found.communities[0].name == "Mira's Beaujolais winery"
        assert found.communities[0].summary.startswith("Mira directs Château Nord")
        again = mem.build_communities(group)  # nothing changed: no call, nothing written
        assert (again.created, again.expired) == (0, 0)
        assert len(transport.requests) == 1


def test_update_with_explicit_entities_and_bad_input(memory: timestone.Memory, group: str) -> None:
    empty = memory.build_communities(group)
    assert (empty.communities, empty.created) == (0, 0)
    res = memory.add_facts(group, ENGINE, reference_time=T2015)
    ada = next(e for e in res.entities if e.name == "Ada")
    report = memory.update_communities(group, [ada.id])
    assert (report.communities, report.created, report.entities) == (1, 1, 4)
    with pytest.raises(InvalidInput, match="entity ids"):
        memory.update_communities(group, ["Ada"])  # type: ignore[list-item]
    with pytest.raises(InvalidGroup):
        memory.build_communities("")


def test_removal_repairs_the_communities_it_fed(memory: timestone.Memory, group: str) -> None:
    memory.add_facts(group, WINE, reference_time=T2015)
    engine = memory.add_facts(group, ENGINE, reference_time=T2015)
    memory.build_communities(group)
    assert len(memory.search(group, "Babbage engine", scopes=("communities",)).communities) == 2
    memory.remove_episode(group, engine.episode.id)
    left = memory.search(group, "Babbage engine Mira", scopes=("communities",), limit=10)
    babbage = memory.get_entity(group, "Babbage")
    assert babbage is None
    assert len(left.communities) == 1
    assert "Babbage" not in left.communities[0].name


def _members(mem: timestone.Memory, group: str) -> list[list[str]]:
    """The group's current communities as sorted lists of member names."""
    found = mem.search(group, "community", scopes=("communities",), limit=50)
    out: list[list[str]] = []
    for community in found.communities:
        names: list[str] = []
        for member in community.members:
            entity = mem.get_entity(group, member)
            assert entity is not None
            names.append(entity.name)
        out.append(sorted(names))
    return sorted(out)


def test_auto_mode_follows_every_write(dsn: str, group: str) -> None:
    with timestone.Memory.open(dsn, communities="auto") as mem:
        mem.add_facts(group, WINE + ENGINE, reference_time=T2015)
        # no build call: the write was followed
        assert _members(mem, group) == [
            ["Ada", "Babbage", "Engine", "Notes"],
            ["Beaujolais", "Château Nord", "Gamay", "Mira"],
        ]
        joined = mem.add_facts(
            group,
            [F("Notes", "MENTIONS", "Gamay"), F("Engine", "STORED_AT", "Château Nord")],
            reference_time=datetime(2016, 1, 1, tzinfo=UTC),
        )
        followed = _members(mem, group)
        mem.build_communities(group)  # a full rebuild changes nothing the follow-up did not
        assert _members(mem, group) == followed
        mem.remove_episode(group, joined.episode.id)
        assert _members(mem, group) == [
            ["Ada", "Babbage", "Engine", "Notes"],
            ["Beaujolais", "Château Nord", "Gamay", "Mira"],
        ]
        before = datetime.now(UTC)
        mem.add_facts(
            group,
            [F("Ada", "VISITED", "Mira"), F("Ada", "MET", "Mira")],
            reference_time=datetime(2017, 1, 1, tzinfo=UTC),
        )
        mem.rollback(group, to=before)  # rollback is followed too
        assert _members(mem, group) == [
            ["Ada", "Babbage", "Engine", "Notes"],
            ["Beaujolais", "Château Nord", "Gamay", "Mira"],
        ]


def test_manual_mode_leaves_communities_to_the_caller(memory: timestone.Memory, group: str) -> None:
    assert memory.communities == "manual"
    memory.add_facts(group, ENGINE, reference_time=T2015)
    assert memory.search(group, "Ada", scopes=("communities",)).communities == []


def test_unknown_community_mode_is_refused(dsn: str) -> None:
    with pytest.raises(InvalidInput, match="communities must be one of manual, auto"):
        timestone.Memory.open(dsn, communities="sometimes")


def test_members_left_behind_are_relabelled(memory: timestone.Memory, group: str) -> None:
    core = [F("B", "KNOWS", "C"), F("C", "KNOWS", "D"), F("B", "KNOWS", "D")]
    memory.add_facts(
        group, [*core, F("A", "KNOWS", "B"), F("A", "KNOWS", "C")], reference_time=T2015
    )
    memory.build_communities(group)
    assert _members(memory, group) == [["A", "B", "C", "D"]]
    ended = datetime(2016, 1, 1, tzinfo=UTC)
    memory.add_facts(  # A's ties end: later assertions of the same targets with an end
        group,
        [
            F("A", "KNOWS", "B", valid_at=T2015, invalid_at=ended),
            F("A", "KNOWS", "C", valid_at=T2015, invalid_at=ended),
        ],
        reference_time=datetime(2017, 1, 1, tzinfo=UTC),
    )
    a = memory.get_entity(group, "A")
    assert a is not None
    memory.update_communities(group, [a.id])  # only A named: B, C and D are relabelled too
    assert _members(memory, group) == [["B", "C", "D"]]


def test_purge_erases_what_communities_derived_from_the_episode(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    memory.add_facts(group, WINE, reference_time=T2015)
    engine = memory.add_facts(group, ENGINE, reference_time=T2015)
    memory.build_communities(group)
    memory.remove_episode(group, engine.episode.id)  # history still names Babbage...
    memory.purge_episode(group, engine.episode.id)  # ...until the episode is erased
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT name || ' ' || summary || ' ' || basis FROM timestone.communities"
            " WHERE group_id = %s",
            (group,),
        ).fetchall()
    assert left  # the wine community is still there (rebuilt)
    for (text,) in left:
        for erased in ("Ada", "Babbage", "Engine", "Notes"):
            assert erased not in text
    assert _members(memory, group) == [["Beaujolais", "Château Nord", "Gamay", "Mira"]]


def _triangle(a: str, b: str) -> list[F]:
    return [F(a, "KNOWS", b), F(b, "KNOWS", a + b), F(a + b, "KNOWS", a)]


def test_an_update_after_a_rollback_catches_up_what_the_restored_build_missed(
    memory: timestone.Memory, group: str
) -> None:
    """A rollback restores the communities held at T as new versions; the facts written
    between their build and T did not shape them, and the next update still reads them
    (the build is when each community was first held as it is, not the copy's time)."""
    memory.add_facts(group, _triangle("A", "B"), reference_time=T2015)
    memory.build_communities(group)
    at = memory.add_facts(group, _triangle("C", "D"), reference_time=T2015).recorded_at
    memory.add_facts(group, _triangle("E", "F"), reference_time=T2015)
    memory.update_communities(group)  # built after T: rolled back
    assert len(_members(memory, group)) == 3
    memory.rollback(group, to=at)
    assert _members(memory, group) == [["A", "AB", "B"]]  # as held at T
    memory.update_communities(group)
    assert _members(memory, group) == [["A", "AB", "B"], ["C", "CD", "D"]]

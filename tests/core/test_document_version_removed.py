"""Removing a document's new version brings back the version it replaced: the graph is
then what it would be had the new version never been added."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from llm_rows import extraction_answer

import timestone
from timestone import EdgeType, Ontology
from timestone.llm import ReplayTransport, chat_completion, replay_llm

URI = "doc://cv"
V1 = "Mira works at Nord."
V2 = "A revised curriculum vitae, with no employer. " * 3 + "\n\n" + "It lists her languages. " * 4


def _year(y: int) -> datetime:
    return datetime(y, 1, 1, tzinfo=UTC)


NORD = {
    "source": "Mira",
    "relation": "WORKS_AT",
    "target": "Nord",
    "fact": "Mira works at Nord.",
    "valid_at": "2020-01-01T00:00:00Z",
}


@pytest.fixture
def versions(
    dsn: str, group: str
) -> Iterator[tuple[timestone.Memory, Sequence[timestone.Episode]]]:
    """Version 1 (one chunk, Mira works at Nord) replaced by version 2 (two chunks, no
    facts); yields the memory and version 2's chunks."""
    transport = ReplayTransport(
        [extraction_answer([NORD]), extraction_answer([]), extraction_answer([])]
    )
    ontology = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
    with timestone.Memory.open(
        dsn, ontology=ontology, llm=replay_llm(transport, backoff=0.0), warm=False
    ) as mem:
        mem.add_document(group, URI, V1, reference_time=_year(2020))
        second = mem.add_document(group, URI, V2, reference_time=_year(2021), max_chunk_chars=160)
        assert len(second.episodes) == 2
        assert mem.facts(group, source="Mira") == []
        yield mem, second.episodes
        transport.check()


def _current(mem: timestone.Memory, group: str) -> list[tuple[str, int]]:
    """The current chunks: their text and the year of their version."""
    return [(e.content, e.reference_time.year) for e in mem.episodes(group)]


def test_removing_every_chunk_of_the_new_version_brings_back_the_old(
    versions: tuple[timestone.Memory, Sequence[timestone.Episode]], group: str
) -> None:
    mem, chunks = versions
    mem.remove_episode(group, chunks[0].id)
    assert [y for _, y in _current(mem, group)] == [2021]  # one chunk of it still stands
    before = datetime.now(UTC)
    report = mem.remove_episode(group, chunks[1].id)
    assert _current(mem, group) == [(V1, 2020)]
    assert [(f.target, f.valid_at) for f in mem.facts(group, source="Mira")] == [
        ("Nord", _year(2020))
    ]
    assert report.facts_created == 1
    assert mem.get_entity(group, "Mira") is not None
    found = mem.search(group, "Where does Mira work?", scopes=("episodes",))
    assert [e.content for e in found.episodes] == [V1]
    # history stays: just before, the graph held the new version and no fact
    assert mem.facts(group, source="Mira", as_of=before) == []
    # the old version is a current episode again, and can be removed as any other
    [old] = mem.episodes(group)
    mem.remove_episode(group, old.id)
    assert mem.episodes(group) == []
    assert mem.facts(group, source="Mira") == []


def test_purging_the_new_version_brings_back_the_old(
    versions: tuple[timestone.Memory, Sequence[timestone.Episode]], group: str
) -> None:
    mem, chunks = versions
    for chunk in chunks:
        mem.purge_episode(group, chunk.id)
    assert _current(mem, group) == [(V1, 2020)]
    assert [f.target for f in mem.facts(group, source="Mira")] == ["Nord"]


def test_versions_come_back_one_by_one(memory: timestone.Memory, group: str) -> None:
    for year, text in [(2020, "First text."), (2021, "Second text."), (2022, "Third text.")]:
        memory.add_document(group, URI, text, reference_time=_year(year))
    for expected in (["Second text."], ["First text."], []):
        [current] = memory.episodes(group)
        memory.remove_episode(group, current.id)
        assert [e.content for e in memory.episodes(group)] == expected


def test_a_version_removed_before_the_next_was_added_stays_removed(
    memory: timestone.Memory, group: str
) -> None:
    first = memory.add_document(group, URI, "First text.", reference_time=_year(2020))
    memory.remove_episode(group, first.episodes[0].id)
    second = memory.add_document(group, URI, "Second text.", reference_time=_year(2021))
    assert second.retracted == []
    memory.remove_episode(group, second.episodes[0].id)
    assert memory.episodes(group) == []


def test_a_version_removed_again_after_a_rollback_brings_the_old_back_again(
    versions: tuple[timestone.Memory, Sequence[timestone.Episode]], group: str
) -> None:
    mem, chunks = versions
    mem.remove_episode(group, chunks[0].id)
    between = datetime.now(UTC)
    mem.remove_episode(group, chunks[1].id)
    assert _current(mem, group) == [(V1, 2020)]
    mem.rollback(group, to=between)  # the new version's second chunk held again
    assert [y for _, y in _current(mem, group)] == [2021]
    assert mem.facts(group, source="Mira") == []
    mem.remove_episode(group, chunks[1].id)
    assert _current(mem, group) == [(V1, 2020)]
    assert [f.target for f in mem.facts(group, source="Mira")] == ["Nord"]


def test_removing_a_version_brings_back_the_one_it_replaced_not_the_one_numbered_before(
    memory: timestone.Memory, group: str
) -> None:
    memory.add_document(group, URI, "First text.", reference_time=_year(2020))
    second = memory.add_document(group, URI, "Second text.", reference_time=_year(2021))
    memory.remove_episode(group, second.episodes[0].id)  # the first comes back
    third = memory.add_document(group, URI, "Third text.", reference_time=_year(2022))
    assert third.version == 3
    memory.remove_episode(group, third.episodes[0].id)  # it replaced the first
    assert [e.content for e in memory.episodes(group)] == ["First text."]


def test_purging_the_new_version_leaves_the_old_held_all_along(
    versions: tuple[timestone.Memory, Sequence[timestone.Episode]], group: str
) -> None:
    """Had the new version never been written, the old one was held from its write on:
    an as-of read of a moment the new one was held reads the old one, its fact too."""
    mem, chunks = versions
    during = datetime.now(UTC)
    mem.purge_episode(group, chunks[0].id)  # the version stands by its other chunk
    assert [e.content for e in mem.episodes(group, as_of=during)] == [chunks[1].content]
    mem.purge_episode(group, chunks[1].id)
    assert [(e.content, e.reference_time.year) for e in mem.episodes(group, as_of=during)] == [
        (V1, 2020)
    ]
    assert [f.target for f in mem.facts(group, source="Mira", as_of=during)] == ["Nord"]
    assert _current(mem, group) == [(V1, 2020)]
    assert [f.target for f in mem.facts(group, source="Mira")] == ["Nord"]


def test_purging_a_replaced_version_leaves_the_one_before_held_until_the_next(
    memory: timestone.Memory, group: str
) -> None:
    first = memory.add_document(group, URI, "First text.", reference_time=_year(2020))
    second = memory.add_document(group, URI, "Second text.", reference_time=_year(2021))
    during = datetime.now(UTC)
    third = memory.add_document(group, URI, "Third text.", reference_time=_year(2022))
    memory.purge_episode(group, second.episodes[0].id)

    def held(as_of: datetime | None) -> list[str]:
        return [e.content for e in memory.episodes(group, as_of=as_of)]

    assert held(first.recorded_at) == ["First text."]
    assert held(during) == ["First text."]
    assert held(third.recorded_at) == ["Third text."]
    assert held(None) == ["Third text."]
    # the third version retracted the first when it was written, as it would have
    memory.remove_episode(group, third.episodes[0].id)
    assert held(None) == ["First text."]


def test_purging_a_removed_version_leaves_the_old_held_all_along(
    memory: timestone.Memory, group: str
) -> None:
    memory.add_document(group, URI, "First text.", reference_time=_year(2020))
    second = memory.add_document(group, URI, "Second text.", reference_time=_year(2021))
    during = datetime.now(UTC)
    memory.remove_episode(group, second.episodes[0].id)  # the first comes back
    memory.purge_episode(group, second.episodes[0].id)
    assert [e.content for e in memory.episodes(group, as_of=during)] == ["First text."]
    assert [e.content for e in memory.episodes(group)] == ["First text."]
    found = memory.search(group, "first", scopes=("episodes",), valid_at=None, as_of=during)
    assert [e.content for e in found.episodes] == ["First text."]


def test_purging_a_version_a_rollback_held_again_leaves_the_one_before_then_too(
    memory: timestone.Memory, group: str
) -> None:
    """A rollback to a moment the purged version was held copied it: had it never been
    written, the rollback would have copied the version before it."""
    memory.add_document(group, URI, "First text.", reference_time=_year(2020))
    second = memory.add_document(group, URI, "Second text.", reference_time=_year(2021))
    while_second = datetime.now(UTC)
    memory.add_document(group, URI, "Third text.", reference_time=_year(2022))
    memory.rollback(group, to=while_second)  # the second held again
    after_rollback = datetime.now(UTC)
    memory.add_document(group, URI, "Fourth text.", reference_time=_year(2023))
    memory.purge_episode(group, second.episodes[0].id)

    def held(as_of: datetime | None) -> list[str]:
        return [e.content for e in memory.episodes(group, as_of=as_of)]

    assert held(while_second) == ["First text."]
    assert held(after_rollback) == ["First text."]
    assert held(None) == ["Fourth text."]


def _periods(
    mem: timestone.Memory, group: str, as_of: datetime | None = None
) -> list[tuple[str, int, int | None]]:
    found = mem.facts(group, source="Mira", valid_at=None, as_of=as_of)
    ends = [(f.target, f.valid_at.year, f.invalid_at.year if f.invalid_at else None) for f in found]
    assert len({f.source_id for f in found}) <= 1, found  # one Mira, not two
    return sorted(ends)


SUD = [timestone.FactInput("Mira", "WORKS_AT", "Sud", valid_at=_year(2022))]


def test_removing_the_new_version_after_a_write_named_its_entity_again(
    versions: tuple[timestone.Memory, Sequence[timestone.Episode]], group: str
) -> None:
    """The new version left Mira unmentioned (not current); a later write named her
    again, a new entity. Removing the new version brings the old one back naming that
    entity: one Mira, whose periods the date fight orders."""
    mem, chunks = versions
    added = mem.add_facts(group, SUD, reference_time=_year(2022))
    [mira] = {f.source_id for f in added.facts}
    for chunk in chunks:
        mem.remove_episode(group, chunk.id)
    assert sorted(y for _, y in _current(mem, group)) == [2020, 2022]
    assert _periods(mem, group) == [("Nord", 2020, 2022), ("Sud", 2022, None)]
    entity = mem.get_entity(group, "Mira")
    assert entity is not None
    assert entity.id == mira  # the current entity keeps its id


def test_purging_the_new_version_after_a_write_named_its_entity_again(
    versions: tuple[timestone.Memory, Sequence[timestone.Episode]], group: str, dsn: str
) -> None:
    """Purged, the new version was never written: the old one held all along, and the
    write that named Mira named the old version's Mira. Every moment reads what a group
    that never had the new version reads."""
    mem, chunks = versions
    before_v2 = chunks[0].created_at - timedelta(microseconds=1)
    v1_mira = mem.get_entity(group, "Mira", as_of=before_v2)
    assert v1_mira is not None
    mem.add_facts(group, SUD, reference_time=_year(2022))
    during = datetime.now(UTC)
    for chunk in chunks:
        mem.purge_episode(group, chunk.id)
    never = group + "-never"
    transport = ReplayTransport([extraction_answer([NORD])])
    ontology = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
    with timestone.Memory.open(
        dsn, ontology=ontology, llm=replay_llm(transport, backoff=0.0), warm=False
    ) as other:
        other.add_document(never, URI, V1, reference_time=_year(2020))
        other.add_facts(never, SUD, reference_time=_year(2022))
        expected = _periods(other, never)
    assert expected == [("Nord", 2020, 2022), ("Sud", 2022, None)]
    assert _periods(mem, group) == expected
    assert _periods(mem, group, as_of=during) == expected
    for moment in (None, during):  # the old version's Mira all along
        entity = mem.get_entity(group, "Mira", as_of=moment)
        assert entity is not None
        assert entity.id == v1_mira.id
    [held] = {f.source_id for f in mem.facts(group, source="Mira", valid_at=None, as_of=during)}
    assert held == v1_mira.id


def _est(year: int) -> dict[str, str]:
    return NORD | {
        "target": "Est",
        "fact": f"Mira works at Est from {year}.",
        "valid_at": f"{year}-01-01T00:00:00Z",
    }


def test_purging_a_version_that_made_an_entity_a_later_write_named(dsn: str, group: str) -> None:
    """Version 3 retracted version 2, whose Est it names no more: its own Est (the
    write's, made as version 2's lost its last mention) is the one a later write named.
    Purged, version 3 was never written: version 2 held until now, and that write named
    version 2's Est, so the two periods at Est are one, at every moment."""
    ontology = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
    nord = [timestone.FactInput("Mira", "WORKS_AT", "Nord", valid_at=_year(2014))]
    est = [timestone.FactInput("Mira", "WORKS_AT", "Est", valid_at=_year(2011))]
    jon = {"source": "Jon", "relation": "WORKS_AT", "target": "Est", "fact": "Jon works at Est."}
    answers = [_est(2020), _est(2012), jon, _est(2020), _est(2012)]
    transport = ReplayTransport([extraction_answer([a]) for a in answers])
    with timestone.Memory.open(
        dsn, ontology=ontology, llm=replay_llm(transport, backoff=0.0), warm=False
    ) as mem:
        moments: dict[str, datetime] = {}
        for g in (group, group + "-never"):
            mem.add_facts(g, nord, reference_time=_year(2014))
            mem.add_document(g, URI, "Mira works at Est (one).", reference_time=_year(2020))
            mem.add_document(g, URI, "Mira works at Est (two).", reference_time=_year(2021))
            third = (
                None
                if g != group
                else mem.add_document(g, URI, "Jon works at Est.", reference_time=_year(2022))
            )
            moments[g] = mem.add_facts(g, est, reference_time=_year(2023)).recorded_at
            if third is not None:
                mem.purge_episode(group, third.episodes[0].id)

        def read(g: str, as_of: datetime | None) -> list[tuple[str, int, int | None]]:
            found = mem.facts(g, source="Mira", valid_at=None, as_of=as_of)
            assert len({f.target_id for f in found if f.target == "Est"}) == 1, found
            return _periods(mem, g, as_of=as_of)

        expected = [("Est", 2011, 2014), ("Nord", 2014, None)]
        assert read(group + "-never", moments[group + "-never"]) == expected
        assert read(group, moments[group]) == expected  # at the later write's moment
        assert read(group, None) == expected
    transport.check()


@pytest.mark.parametrize("erase", ["remove", "purge"])
def test_a_typed_entity_comes_back_as_the_one_an_untyped_write_named(
    dsn: str, group: str, erase: str
) -> None:
    """The old version typed Mira a Person; the later write named her untyped, which
    resolves to a typed entity of the name: removed or purged, the new version leaves one
    Mira, a Person, whose periods the date fight orders."""
    typed = json.dumps(
        {
            "entities": [
                {"name": "Mira", "type": "Person", "attributes": []},
                {"name": "Nord", "type": "Entity", "attributes": []},
            ],
            "facts": [NORD | {"invalid_at": None, "attributes": []}],
        }
    )
    transport = ReplayTransport(
        [{"step": "extraction", "body": chat_completion(typed)}, extraction_answer([])]
    )
    ontology = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
    with timestone.Memory.open(
        dsn, ontology=ontology, llm=replay_llm(transport, backoff=0.0), warm=False
    ) as mem:
        mem.add_document(group, URI, V1, reference_time=_year(2020))
        second = mem.add_document(group, URI, "No employer.", reference_time=_year(2021))
        mem.add_facts(group, SUD, reference_time=_year(2022))
        chunk = second.episodes[0].id
        if erase == "remove":
            mem.remove_episode(group, chunk)
        else:
            mem.purge_episode(group, chunk)
        assert _periods(mem, group) == [("Nord", 2020, 2022), ("Sud", 2022, None)]
        entity = mem.get_entity(group, "Mira")
        assert entity is not None
        assert entity.labels == ("Person",)
    transport.check()


def test_purging_a_version_held_again_after_a_removal_and_a_rollback(dsn: str, group: str) -> None:
    """Version 3 removed brought version 2 back (naming the Mira a later write had made
    current), a rollback then held version 3 again; purged, version 2 was never written:
    version 1 came back instead, naming that same Mira, so at every moment one Mira's
    periods meet in the date fight, as in a group that never had version 2."""
    ontology = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])

    def at(place: str, year: int) -> dict[str, str]:
        return NORD | {"target": place, "fact": f"Mira works at {place} from {year}.",
                       "valid_at": f"{year}-01-01T00:00:00Z"}  # fmt: skip

    answers = [
        at("Nord", 2010),
        at("Est", 2010),
        at("Nord", 2012),
        at("Nord", 2010),
        at("Nord", 2012),
    ]
    transport = ReplayTransport([extraction_answer([a]) for a in answers])
    est = [timestone.FactInput("Mira", "WORKS_AT", "Est", valid_at=_year(2020))]
    with timestone.Memory.open(
        dsn, ontology=ontology, llm=replay_llm(transport, backoff=0.0), warm=False
    ) as mem:
        moments: dict[str, list[datetime]] = {}
        for g in (group, group + "-never"):
            mem.add_document(g, URI, "Mira works at Nord (one).", reference_time=_year(2020))
            second = None
            if g == group:
                second = mem.add_document(
                    g, URI, "Mira works at Est (two).", reference_time=_year(2021)
                )
            third = mem.add_document(
                g, URI, "Mira works at Nord (three).", reference_time=_year(2022)
            )
            written = mem.add_facts(g, est, reference_time=_year(2023)).recorded_at
            mem.remove_episode(g, third.episodes[0].id)
            removed = datetime.now(UTC)
            mem.rollback(g, to=written)
            if second is not None:
                mem.purge_episode(g, second.episodes[0].id)
            moments[g] = [written, removed, datetime.now(UTC)]
        for real, never in zip(moments[group], moments[group + "-never"], strict=True):
            assert _periods(mem, group, as_of=real) == _periods(mem, group + "-never", as_of=never)
        assert _periods(mem, group, as_of=moments[group][1]) == [
            ("Est", 2020, None),
            ("Nord", 2010, 2020),
        ]
    transport.check()

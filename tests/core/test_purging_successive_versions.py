"""Two purges of successive versions of a document (the later first): the history
between them must read as a group that never had either, one entity per name.

Version 1 names Mira; version 2 does not (her entity loses its last mention), so a later
write that names her makes a new Mira; version 3 follows. Had versions 2 and 3 never been
written, version 1 would have been held all along and the write would have named its
Mira: one Mira, whose periods the date fight orders, at every moment."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from llm_rows import extraction_answer
from test_document_version_removed import (
    NORD,
    URI,
    _year,  # pyright: ignore[reportPrivateUsage]
)

import timestone
from timestone import EdgeType, Ontology
from timestone.llm import ReplayTransport, replay_llm

SUD = [timestone.FactInput("Mira", "WORKS_AT", "Sud", valid_at=_year(2022))]
Period = tuple[str, int, int | None]


def _read(mem: timestone.Memory, group: str, as_of: datetime | None) -> tuple[int, list[Period]]:
    """The number of Miras held at the moment, and her periods."""
    found = mem.facts(group, source="Mira", valid_at=None, as_of=as_of)
    periods = sorted(
        (f.target, f.valid_at.year, f.invalid_at.year if f.invalid_at else None) for f in found
    )
    return len({f.source_id for f in found}), periods


@pytest.mark.parametrize(
    "erase",
    [
        "purge v3, purge v2",  # the later first, which split the entity
        "remove v3, purge v2",  # version 2 held again by the removal: the same split
        "purge v2, purge v3",
    ],
)
def test_purging_two_successive_versions_leaves_one_entity(
    dsn: str, group: str, erase: str
) -> None:
    never = group + "-never"  # never had the purged versions (a removed one it had)
    steps = [(verb, int(v[1:])) for verb, v in (step.split() for step in erase.split(", "))]
    removed = [v for verb, v in steps if verb == "remove"]
    transport = ReplayTransport(
        [
            extraction_answer([NORD]),  # the group's version 1
            extraction_answer([]),  # version 2
            extraction_answer([]),  # version 3
            extraction_answer([NORD]),  # the never-had group's version 1
        ]
        + [extraction_answer([])] * len(removed)  # its version 3, when only removed
    )
    ontology = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
    texts = {2: "A curriculum vitae with no employer.", 3: "Still no employer."}
    with timestone.Memory.open(
        dsn, ontology=ontology, llm=replay_llm(transport, backoff=0.0), warm=False
    ) as mem:
        moments: dict[str, list[datetime | None]] = {}
        chunks: dict[str, dict[int, timestone.Episode]] = {group: {}, never: {}}
        for g in (group, never):
            had = (2, 3) if g == group else removed
            first = mem.add_document(g, URI, "Mira works at Nord.", reference_time=_year(2020))
            if 2 in had:
                [chunks[g][2]] = mem.add_document(
                    g, URI, texts[2], reference_time=_year(2021)
                ).episodes
            written = mem.add_facts(g, SUD, reference_time=_year(2022)).recorded_at
            if 3 in had:
                [chunks[g][3]] = mem.add_document(
                    g, URI, texts[3], reference_time=_year(2023)
                ).episodes
            moments[g] = [first.recorded_at, written, datetime.now(UTC)]
            for verb, version in steps:
                if verb == "remove":
                    mem.remove_episode(g, chunks[g][version].id)
                elif g == group:
                    mem.purge_episode(g, chunks[g][version].id)
                moments[g].append(datetime.now(UTC))
            moments[g].append(None)  # now
        assert _read(mem, never, moments[never][1]) == (
            1,
            [("Nord", 2020, 2022), ("Sud", 2022, None)],
        )
        for mine, theirs in zip(moments[group], moments[never], strict=True):
            assert _read(mem, group, mine) == _read(mem, never, theirs), mine
        # one Mira all along: the one version 1 named
        ids = {
            e.id
            for m in moments[group]
            if (e := mem.get_entity(group, "Mira", as_of=m)) is not None
        }
        assert len(ids) == 1, ids
    transport.check()

"""Purging a document's version one of whose chunks was removed before: the version it
replaced is held wherever the purged version was, until the whole of it stopped being
held, not only until the removed chunk was.

Version 1 (Mira works at Nord) is replaced by version 2, two chunks; its second chunk is
removed, the first stands until version 3 replaces it (or until the purge, when no version
3 is written). Once both chunks of version 2 are purged, whichever first, every moment
must read as in a group that never had version 2: version 1's chunk and its fact, from
its write until version 3's (or for good)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from llm_rows import extraction_answer
from test_document_version_removed import (
    NORD,
    URI,
    V1,
    V2,
    _year,  # pyright: ignore[reportPrivateUsage]
)

import timestone
from timestone import EdgeType, Ontology
from timestone.llm import ReplayTransport, replay_llm

V3 = "A third version, with no employer either."


def _read(
    mem: timestone.Memory, group: str, as_of: datetime | None
) -> tuple[list[str], list[str], bool]:
    """The chunks held at the moment, where Mira works then, and whether she is held."""
    chunks = sorted(e.content for e in mem.episodes(group, as_of=as_of))
    works = sorted(f.target for f in mem.facts(group, source="Mira", as_of=as_of))
    return chunks, works, mem.get_entity(group, "Mira", as_of=as_of) is not None


@pytest.mark.parametrize("third", [True, False], ids=["then version 3", "version 2 current"])
@pytest.mark.parametrize("order", [(0, 1), (1, 0)], ids=["standing first", "removed first"])
def test_purging_a_version_with_a_removed_chunk_leaves_no_gap(
    dsn: str, group: str, order: tuple[int, int], third: bool
) -> None:
    never = group + "-never"
    transport = ReplayTransport(
        [
            extraction_answer([NORD]),  # version 1
            extraction_answer([]),  # version 2, its two chunks
            extraction_answer([]),
        ]
        + [extraction_answer([])] * third  # version 3
        + [extraction_answer([NORD])]  # the never-had group's version 1
        + [extraction_answer([])] * third  # its version 3
    )
    ontology = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
    with timestone.Memory.open(
        dsn, ontology=ontology, llm=replay_llm(transport, backoff=0.0), warm=False
    ) as mem:
        moments: dict[str, list[datetime | None]] = {}
        chunks: list[timestone.Episode] = []
        for g in (group, never):
            mem.add_document(g, URI, V1, reference_time=_year(2020))
            if g == group:
                second = mem.add_document(
                    g, URI, V2, reference_time=_year(2021), max_chunk_chars=160
                )
                chunks = list(second.episodes)
                assert len(chunks) == 2
                mem.remove_episode(g, chunks[1].id)
            moments[g] = [datetime.now(UTC)]  # the removal (in the never-had group: none)
            if third:
                mem.add_document(g, URI, V3, reference_time=_year(2022))
            moments[g].append(datetime.now(UTC))
        for index in order:
            mem.purge_episode(group, chunks[index].id)
        moments[group].append(None)
        moments[never].append(None)
        # right after the removal, version 1 is what a group that never had version 2 holds
        assert _read(mem, never, moments[never][0]) == ([V1], ["Nord"], True)
        for mine, theirs in zip(moments[group], moments[never], strict=True):
            assert _read(mem, group, mine) == _read(mem, never, theirs), mine
    transport.check()

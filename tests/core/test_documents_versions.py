"""When ``add_document`` writes a new version: a document is unchanged only while every
chunk of its current version is current, its extraction is skipped only for an unchanged
document (checked again in the write), and a chunk a newer version replaced says so."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from llm_rows import extraction_answer, ledger, spent, stored

import timestone
import timestone.write._documents as documents
from timestone import EdgeType, Ontology, WordLlamaEmbedder
from timestone.errors import AlreadyRemoved, ConflictError
from timestone.extract._calls import Ledger
from timestone.llm import ReplayTransport, replay_llm

URI = "doc://cv"
T = datetime(2024, 1, 1, tzinfo=UTC)
X = "Mira works at Nord."
Y = "Mira's curriculum vitae, revised, names no employer."
RIVER = "\n\n".join(
    f"Paragraph {i}: the {w} lives by the river and eats fish every day of the year."
    for i, w in enumerate(["otter", "heron", "walrus"])
)
NORD = {
    "source": "Mira",
    "relation": "WORKS_AT",
    "target": "Nord",
    "fact": "Mira works at Nord.",
    "valid_at": "2020-01-01T00:00:00Z",
}
OSLO = {
    "source": "Mira",
    "relation": "LIVES_IN",
    "target": "Oslo",
    "fact": "Mira lives in Oslo.",
    "valid_at": "2020-01-01T00:00:00Z",
}
ONTOLOGY = Ontology(
    edge_types=[EdgeType("WORKS_AT", cardinality="one"), EdgeType("LIVES_IN", cardinality="one")]
)


class _Between(WordLlamaEmbedder):
    """The default embedder, which runs ``before`` once, when it is first asked for the
    vector of ``text``: between ``add_document``'s read before extraction and its write."""

    def __init__(self) -> None:
        super().__init__()
        self.text = ""
        self.before: Callable[[], object] | None = None

    def embed_array(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.before is not None and self.text in texts:
            run, self.before = self.before, None
            run()
        return super().embed_array(texts)


@pytest.fixture
def between() -> _Between:
    return _Between()


@pytest.fixture
def model(dsn: str, between: _Between) -> Iterator[tuple[timestone.Memory, ReplayTransport]]:
    """A memory with a model whose answers the test scripts, and ``between``'s embedder."""
    transport = ReplayTransport()
    with timestone.Memory.open(
        dsn,
        ontology=ONTOLOGY,
        llm=replay_llm(transport, backoff=0.0),
        embedder=between,
        warm=False,
    ) as mem:
        yield mem, transport
    transport.check()


# -- the same content again, after another writer changed the document ----------------


def test_extraction_skipped_as_unchanged_runs_when_the_write_finds_the_document_changed(
    model: tuple[timestone.Memory, ReplayTransport], between: _Between, dsn: str, group: str
) -> None:
    mem, transport = model
    first, again = extraction_answer([NORD]), extraction_answer([NORD])
    transport.extend([first])
    assert [f.fact for f in mem.add_document(group, URI, X, reference_time=T).facts] == [X]
    transport.extend([again])
    with timestone.Memory.open(dsn, warm=False) as other:
        # another writer puts Y in after the read that found X unchanged
        between.text = X
        between.before = lambda: other.add_document(group, URI, Y, reference_time=T, extract=False)
        result = mem.add_document(group, URI, X, reference_time=T)
    assert between.before is None  # it ran
    assert (result.created, result.version, result.llm_calls) == (True, 3, 1)
    assert [f.fact for f in result.facts] == [X]
    assert [e.content for e in mem.episodes(group)] == [X]
    assert [(f.source, f.target) for f in mem.facts(group)] == [("Mira", "Nord")]
    assert ledger(dsn, group) == [
        spent("extraction", first["body"], ok=True, episode=True),
        spent("extraction", again["body"], ok=True, episode=True),
    ]
    repeat = mem.add_document(group, URI, X, reference_time=T)
    assert (repeat.created, repeat.version, repeat.llm_calls) == (False, 3, 0)


def test_a_document_that_keeps_changing_after_a_skipped_extraction_is_a_conflict(
    model: tuple[timestone.Memory, ReplayTransport],
    dsn: str,
    group: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mem, _ = model
    mem.add_document(group, URI, Y, reference_time=T, extract=False)
    before = stored(mem, dsn, group)
    reads: list[str] = []

    def always_unchanged(ingest: object, llm: object, call: documents.DocumentCall) -> Any:
        reads.append(call.uri)  # each read says the document holds X; each write finds Y
        return Ledger(), None

    monkeypatch.setattr(documents, "document_plans", always_unchanged)
    with pytest.raises(ConflictError) as refused:
        mem.add_document(group, URI, X, reference_time=T)
    assert str(refused.value) == (
        f"document 'doc://cv' of group {group!r} changed 3 times between the read that "
        "found it holding this content and the write (other writers are adding versions "
        "of it); nothing was written, try it again"
    )
    assert reads == [URI] * 3
    assert stored(mem, dsn, group) == before


# -- the same content after a chunk of it was removed ------------------------------------


def test_the_same_content_after_a_chunk_was_removed_is_a_new_version_with_every_chunk(
    memory: timestone.Memory, group: str
) -> None:
    first = memory.add_document(group, URI, RIVER, reference_time=T, max_chunk_chars=100)
    assert len(first.episodes) == 3
    memory.remove_episode(group, first.episodes[1].id)
    again = memory.add_document(group, URI, RIVER, reference_time=T, max_chunk_chars=100)
    assert (again.created, again.version) == (True, 2)
    assert again.retracted == [first.episodes[0].id, first.episodes[2].id]
    assert [e.content for e in again.episodes] == RIVER.split("\n\n")
    assert [(e.chunk_index, e.content) for e in memory.episodes(group)] == [
        (i, p) for i, p in enumerate(RIVER.split("\n\n"))
    ]
    found = memory.search(group, "heron", scopes=("episodes",)).episodes
    assert [e.content for e in found if "heron" in e.content] == [RIVER.split("\n\n")[1]]
    repeat = memory.add_document(group, URI, RIVER, reference_time=T, max_chunk_chars=100)
    assert (repeat.created, repeat.version) == (False, 2)


def test_the_same_content_after_its_last_chunk_was_removed_is_a_new_version(
    memory: timestone.Memory, group: str
) -> None:
    first = memory.add_document(group, URI, RIVER, reference_time=T, max_chunk_chars=100)
    memory.remove_episode(group, first.episodes[2].id)
    again = memory.add_document(group, URI, RIVER, reference_time=T, max_chunk_chars=100)
    assert (again.created, again.version, len(again.episodes)) == (True, 2, 3)
    assert [e.chunk_index for e in memory.episodes(group)] == [0, 1, 2]


def test_the_same_content_in_other_chunk_sizes_is_unchanged(
    memory: timestone.Memory, group: str
) -> None:
    first = memory.add_document(group, URI, RIVER, reference_time=T, max_chunk_chars=100)
    again = memory.add_document(group, URI, RIVER, reference_time=T)  # one chunk of 1,500
    assert (again.created, again.version) == (False, 1)
    assert [e.id for e in again.episodes] == [e.id for e in first.episodes]


def test_the_same_content_after_a_chunk_was_removed_is_extracted_again(
    model: tuple[timestone.Memory, ReplayTransport], dsn: str, group: str
) -> None:
    mem, transport = model
    text = "Mira works at Nord, a shipping firm in the north.\n\n" + (
        "Mira lives in Oslo, in a flat by the harbour, since the year 2020."
    )
    transport.extend([extraction_answer([NORD]), extraction_answer([OSLO])])
    first = mem.add_document(group, URI, text, reference_time=T, max_chunk_chars=100)
    assert sorted(f.target for f in first.facts) == ["Nord", "Oslo"]
    mem.remove_episode(group, first.episodes[1].id)
    assert [f.target for f in mem.facts(group)] == ["Nord"]
    transport.extend([extraction_answer([NORD]), extraction_answer([OSLO])])
    again = mem.add_document(group, URI, text, reference_time=T, max_chunk_chars=100)
    assert (again.created, again.version, again.llm_calls) == (True, 2, 2)
    assert sorted(f.target for f in mem.facts(group)) == ["Nord", "Oslo"]


# -- removing a chunk a newer version replaced ------------------------------------------


def test_removing_a_chunk_a_newer_version_replaced_says_so(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    first = memory.add_document(group, "doc://u", "The aardvark sleeps.", reference_time=T)
    second = memory.add_document(group, "doc://u", "The bee visits clover.", reference_time=T)
    before = stored(memory, dsn, group)
    chunk = first.episodes[0].id
    with pytest.raises(AlreadyRemoved) as refused:
        memory.remove_episode(group, chunk)
    assert str(refused.value) == (
        f"episode {chunk} of group {group!r} is a chunk of version 1 of document 'doc://u', "
        f"which version 2 replaced at {second.recorded_at.isoformat()}; nothing to do"
    )
    assert stored(memory, dsn, group) == before


def test_removing_a_chunk_removed_before_its_version_was_replaced_says_removed(
    memory: timestone.Memory, group: str
) -> None:
    first = memory.add_document(group, "doc://u", "The aardvark sleeps.", reference_time=T)
    report = memory.remove_episode(group, first.episodes[0].id)
    memory.add_document(group, "doc://u", "The bee visits clover.", reference_time=T)
    chunk = first.episodes[0].id
    with pytest.raises(AlreadyRemoved) as refused:
        memory.remove_episode(group, chunk)
    assert str(refused.value) == (
        f"episode {chunk} of group {group!r} was removed at "
        f"{report.removed_at.isoformat()}; nothing to do"
    )

"""A document through a PropertyGraphIndex with LlamaIndex's default extractors: its
triplets are dated by the document's time, names keep the case the text has, and the
retriever gives the write back as sentences, not as the JSON the episode holds."""

# LlamaIndex's LLM classes are loosely typed.
# pyright: reportUnknownMemberType=false, reportIncompatibleMethodOverride=false

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from llama_index.core import Document, PropertyGraphIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.graph_stores.timestone import (
    TimestonePropertyGraphStore,
    TimestoneRetriever,
    episode_node,
)

import timestone
from timestone.errors import InvalidInput


class ReadingLLM(CustomLLM):
    """Answers the triplet extractor's prompt with the ``subject | relation | object``
    lines of the chunk's text, as a model would, offline."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata()

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        said = (line.removeprefix("Text:").strip() for line in prompt.splitlines())
        lines = [line.split(" | ") for line in said if line.count(" | ") == 2]
        return CompletionResponse(text="\n".join(f"({s}, {r}, {o})" for s, r, o in lines))

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


def _index(store: TimestonePropertyGraphStore) -> PropertyGraphIndex:
    # the default extractors, with their default triplet parser
    return PropertyGraphIndex.from_existing(
        store, llm=ReadingLLM(), embed_model=MockEmbedding(embed_dim=8), use_async=False
    )


def test_a_documents_triplets_are_dated_by_the_document(
    memory: timestone.Memory, group: str
) -> None:
    memo = Document(text="Mira | directs | Château Sud", metadata={"reference_time": "2023-06-01"})
    _index(TimestonePropertyGraphStore(memory, group)).insert(memo)
    [fact] = memory.facts(group, source="Mira", valid_at=None)
    assert fact.relation == "DIRECTS"
    assert fact.valid_at == datetime(2023, 6, 1, tzinfo=UTC)
    # the date fight reads it as any dated fact: a later document closes it
    later = Document(
        text="Mira | directs | Château Nord", metadata={"reference_time": "2025-01-01"}
    )
    _index(TimestonePropertyGraphStore(memory, group)).insert(later)
    in_2024 = memory.facts(group, source="Mira", valid_at=datetime(2024, 1, 1, tzinfo=UTC))
    assert [f.target for f in in_2024] == ["Château Sud"]


def test_without_a_document_time_the_write_is_dated_now(
    memory: timestone.Memory, group: str
) -> None:
    before = datetime.now(UTC)
    _index(TimestonePropertyGraphStore(memory, group)).insert(Document(text="Mira | likes | Gamay"))
    [fact] = memory.facts(group, source="Mira")
    assert fact.valid_at is not None
    assert fact.valid_at >= before


def test_a_document_time_that_is_not_a_date_is_refused(
    memory: timestone.Memory, group: str
) -> None:
    bad = Document(text="Mira | likes | Gamay", metadata={"reference_time": "last spring"})
    with pytest.raises(InvalidInput, match=r"reference_time of .* 'last spring' is not a date"):
        _index(TimestonePropertyGraphStore(memory, group)).insert(bad)
    assert memory.facts(group, valid_at=None) == []


def test_names_keep_the_case_the_text_has(memory: timestone.Memory, group: str) -> None:
    text = "Mira | directs | Château Sud\nChâteau Sud | grows | Cabernet Franc at NASA Farm"
    _index(TimestonePropertyGraphStore(memory, group)).insert(Document(text=text))
    triples = {(f.source, f.relation, f.target) for f in memory.facts(group)}
    assert triples == {
        ("Mira", "DIRECTS", "Château Sud"),
        ("Château Sud", "GROWS", "Cabernet Franc at NASA Farm"),
    }
    entity = memory.get_entity(group, "château sud")
    assert entity is not None
    assert entity.name == "Château Sud"


def test_the_retriever_reads_a_graph_write_as_its_facts(
    memory: timestone.Memory, group: str
) -> None:
    _index(TimestonePropertyGraphStore(memory, group)).insert(
        Document(text="Mira | directs | Château Sud")
    )
    hits = TimestoneRetriever(memory, group).retrieve("Who directs Château Sud?")
    assert [h.node.get_content() for h in hits] == ["Mira directs Château Sud."]
    assert hits[0].node.metadata["kind"] == "fact"
    # the write's records (the entities read from the chunk, then their relation) are
    # records of structured facts, as add_facts writes: no passage of their own
    assert TimestoneRetriever(memory, group, scopes=("episodes",)).retrieve("Mira") == []
    records = sorted(episode_node(e).get_content() for e in memory.episodes(group))
    assert records == ["Mira directs Château Sud.", "Mira, Château Sud."]

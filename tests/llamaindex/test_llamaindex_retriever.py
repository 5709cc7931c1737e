"""The LlamaIndex TimestoneRetriever, alone and under a query engine with MockLLM."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.graph_stores.timestone import TimestoneRetriever

import timestone
from timestone.errors import InvalidGroup, InvalidInput, NaiveDatetime
from timestone.toolkit import citation_of


def test_retrieves_facts_with_both_clocks(memory: timestone.Memory, mira: str) -> None:
    hits = TimestoneRetriever(memory, mira, similarity_top_k=2).retrieve("Who directs Château Sud?")
    assert len(hits) == 2
    top = hits[0]
    assert isinstance(top.node, TextNode)
    assert top.node.text == "Mira directs Château Sud."
    assert top.score is not None
    assert top.score > 0
    meta = top.node.metadata
    assert (meta["source"], meta["relation"], meta["target"]) == ("Mira", "DIRECTS", "Château Sud")
    assert meta["valid_at"].startswith("2023-06-15")
    shown = top.node.get_content(MetadataMode.LLM)
    assert "valid_at: 2023-06-15" in shown
    assert meta["version_id"] not in shown  # ids stay out of the prompt
    assert meta["source_id"] not in shown
    assert f"citation: {meta['citation']}" in shown  # the id the model cites
    assert meta["citation"] == citation_of("fact", uuid.UUID(meta["id"]))


def test_time_parameters(memory: timestone.Memory, mira: str) -> None:
    before = datetime(2020, 1, 1, tzinfo=UTC)
    hits = TimestoneRetriever(memory, mira, similarity_top_k=10, valid_at=before).retrieve("Mira")
    texts = {h.node.get_content() for h in hits}
    assert "Mira directs Château Nord." in texts
    assert "Mira directs Château Sud." not in texts
    stamps = sorted({f.created_at for f in memory.facts(mira, valid_at=None, limit=100)})
    held = TimestoneRetriever(memory, mira, similarity_top_k=10, valid_at=None, as_of=stamps[1])
    assert all(h.node.metadata["relation"] != "LOCATED_IN" for h in held.retrieve("located"))


def test_query_engine_with_mock_llm(memory: timestone.Memory, mira: str) -> None:
    engine = RetrieverQueryEngine.from_args(
        TimestoneRetriever(memory, mira, similarity_top_k=3), llm=MockLLM()
    )
    response = engine.query("Where does Mira work?")
    assert len(response.source_nodes) == 3
    assert "Mira works at Château Sud." in [n.node.get_content() for n in response.source_nodes]


async def test_async_and_scopes(amemory: timestone.AsyncMemory, mira: str) -> None:
    retriever = TimestoneRetriever(
        amemory, mira, similarity_top_k=5, scopes=("facts", "entities", "episodes")
    )
    hits = await retriever.aretrieve("Château Sud")
    assert {h.node.metadata["kind"] for h in hits} >= {"fact", "entity"}
    with pytest.raises(TypeError, match="use aretrieve"):
        retriever.retrieve("Château Sud")


def test_bad_input(memory: timestone.Memory) -> None:
    with pytest.raises(InvalidGroup, match="group_id is empty"):
        TimestoneRetriever(memory, "")
    with pytest.raises(InvalidInput, match="unknown scope"):
        TimestoneRetriever(memory, "g", scopes=("facts", "edges"))
    with pytest.raises(InvalidInput, match="at least one"):
        TimestoneRetriever(memory, "g", scopes=())
    with pytest.raises(NaiveDatetime, match="as_of is a naive datetime"):
        TimestoneRetriever(memory, "g", as_of=datetime(2020, 1, 1))


def test_a_top_k_past_what_a_search_returns_is_refused_when_made(
    memory: timestone.Memory, mira: str
) -> None:
    """Once accepted, then every retrieval failed naming the search's ``limit``."""
    for k in (0, 1001, 5000, True):
        message = f"similarity_top_k must be an integer from 1 to 1000, got {k!r}"
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            TimestoneRetriever(memory, mira, similarity_top_k=k)
    retriever = TimestoneRetriever(memory, mira, similarity_top_k=1000)
    assert retriever.retrieve("Where does Mira work?")

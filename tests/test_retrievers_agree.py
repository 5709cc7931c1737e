"""The LangChain and LlamaIndex retrievers agree: one metadata mapping (the core's), the
same citation id the tools, ``context()`` and ``GroundedAnswer`` use, facts and passages
ranked together by default, one spelling of a relation name."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from llama_index.core.graph_stores.types import EntityNode, Relation
from llama_index.core.schema import MetadataMode
from llama_index.graph_stores.timestone import TimestonePropertyGraphStore
from llama_index.graph_stores.timestone import TimestoneRetriever as LlamaIndexRetriever
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import timestone
from langchain_timestone import TimestoneRetriever as LangChainRetriever
from pydantic_ai_timestone import GroundedAnswer, TimestoneDeps, TimestoneMemory
from timestone import toolkit

REF = datetime(2024, 3, 1, tzinfo=UTC)
HANDBOOK = (
    "Cellar handbook. The fermentation room is kept at fourteen degrees during the "
    "harvest. Barrels are topped up every Tuesday so the wine never meets the air. "
    "Visitors sign the cellar book at the north door before the tasting begins."
)


def _both(memory: timestone.Memory, group: str, query: str, **kw: Any) -> tuple[list[Any], ...]:
    k = kw.pop("k", 4)
    docs = LangChainRetriever(memory=memory, group_id=group, k=k, **kw).invoke(query)
    nodes = LlamaIndexRetriever(memory, group, similarity_top_k=k, **kw).retrieve(query)
    return docs, nodes


def test_documents_and_nodes_carry_the_same_metadata(memory: timestone.Memory, mira: str) -> None:
    memory.add_document(mira, "notes://mira", "Mira walks the Château Sud vines each dawn.",
                        reference_time=REF)  # fmt: skip
    scopes = ("facts", "entities", "episodes")
    docs, nodes = _both(memory, mira, "Château Sud", k=8, scopes=scopes)
    assert len(docs) == len(nodes) == 8
    assert {d.metadata["kind"] for d in docs} == {"fact", "entity", "episode"}
    for doc, hit in zip(docs, nodes, strict=True):
        assert doc.id == hit.node.node_id
        assert doc.page_content == hit.node.get_content(MetadataMode.NONE)
        assert doc.metadata == hit.node.metadata  # the same keys, the same values
        assert doc.metadata["score"] == hit.score
    fact = next(d for d in docs if d.metadata["kind"] == "fact").metadata
    assert {"citation", "source_id", "target_id", "attributes", "score"} <= set(fact)
    shown = next(n for n in nodes if n.node.metadata["kind"] == "fact").node
    assert f"citation: {fact['citation']}" in shown.get_content(MetadataMode.LLM)


def test_the_citation_is_the_one_context_and_the_tools_give(
    memory: timestone.Memory, mira: str
) -> None:
    docs, nodes = _both(memory, mira, "Where does Mira work?", scopes=("facts",))
    for doc, hit in zip(docs, nodes, strict=True):
        citation = doc.metadata["citation"]
        assert re.fullmatch(r"F-[0-9a-f]{10}", citation)
        assert hit.node.metadata["citation"] == citation
        assert citation == toolkit.citation_of("fact", uuid.UUID(doc.metadata["id"]))
    top = docs[0].metadata
    evidence = memory.context(mira, "Where does Mira work?")
    assert evidence.cite(top["citation"]).fact_id == uuid.UUID(top["id"])
    assert f"[{top['citation']}]" in toolkit.search_memory(memory, mira, "Where does Mira work?")


def _cites(citation: str, query: str) -> FunctionModel:
    """Search memory for ``query``, then answer citing ``citation``."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[ToolCallPart("search_memory", {"query": query})])
        args = {"answer": "from memory", "citations": [citation]}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    return FunctionModel(respond)


@pytest.mark.parametrize("kind", ["fact", "chunk"])
async def test_grounded_answer_accepts_a_retrieved_citation(
    memory: timestone.Memory, group: str, kind: str
) -> None:
    if kind == "fact":
        memory.add_facts(group, [{"source": "Mira", "relation": "WORKS_AT",
                                  "target": "Château Sud"}], reference_time=REF)  # fmt: skip
        query = "Where does Mira work?"
    else:
        memory.add_document(group, "handbook://cellar", HANDBOOK, reference_time=REF)
        query = "How warm is the fermentation room?"
    citation = (
        LangChainRetriever(memory=memory, group_id=group, k=1).invoke(query)[0].metadata["citation"]
    )
    assert citation.startswith("F-" if kind == "fact" else "E-")
    agent = Agent(
        _cites(citation, query),
        deps_type=TimestoneDeps,
        output_type=GroundedAnswer,
        capabilities=[TimestoneMemory()],
        retries=1,  # a citation the check refused would need a second try: none is given
    )
    result = await agent.run(query, deps=TimestoneDeps(memory, group))
    assert result.output.citations == [citation]
    messages = result.all_messages()
    assert sum(isinstance(m, ModelResponse) for m in messages) == 2  # search, answer
    parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
    assert not [p for p in parts if isinstance(p, RetryFeedbackPart)]  # no retry


def test_a_memory_of_one_document_answers(memory: timestone.Memory, group: str) -> None:
    result = memory.add_document(group, "handbook://cellar", HANDBOOK, reference_time=REF)
    query = "How warm is the fermentation room during the harvest?"
    docs, nodes = _both(memory, group, query)  # the defaults: k=4, facts and episodes
    assert docs
    assert nodes
    assert "fourteen degrees" in docs[0].page_content
    assert docs[0].metadata["kind"] == "episode"
    assert docs[0].metadata["document_uri"] == "handbook://cellar"
    assert docs[0].metadata["citation"].startswith("E-")
    assert nodes[0].node.metadata == docs[0].metadata
    chunk = uuid.UUID(docs[0].metadata["id"])
    assert chunk in [e.id for e in result.episodes]
    cited = memory.context(group, query).cite(docs[0].metadata["citation"])
    assert cited.document_uri == "handbook://cellar"
    only_facts = _both(memory, group, query, scopes=("facts",))
    assert only_facts == ([], [])  # a user narrows with scopes=


def test_the_records_of_structured_facts_are_no_passages(
    memory: timestone.Memory, mira: str
) -> None:
    docs, nodes = _both(memory, mira, "Mira directs Château Sud", k=10, scopes=("episodes",))
    assert docs == []
    assert nodes == []
    docs, _ = _both(memory, mira, "Mira directs Château Sud", k=10)
    assert {d.metadata["kind"] for d in docs} == {"fact"}


def test_one_spelling_of_a_relation_across_adapters(memory: timestone.Memory, group: str) -> None:
    store = TimestonePropertyGraphStore(memory, group)
    store.upsert_nodes([EntityNode(name="Mira", label="Person"),
                        EntityNode(name="Château Sud", label="Winery")])  # fmt: skip
    # SimpleLLMPathExtractor keeps a model's label as it is: "Directs", then "directs"
    store.upsert_relations([Relation(label="Directs", source_id="Mira", target_id="Château Sud")])
    store.upsert_relations([Relation(label="directs", source_id="Mira", target_id="Château Sud")])
    memory.add_facts(group, [{"source": "Mira", "relation": "DIRECTS", "target": "Château Sud"}],
                     reference_time=REF)  # fmt: skip
    facts = memory.facts(group)
    assert [(f.source, f.relation, f.target) for f in facts] == [("Mira", "DIRECTS", "Château Sud")]
    assert len(facts[0].episodes) == 3  # one fact, three episodes said it
    assert {r.label for _, r, _ in store.get_triplets(entity_names=["Mira"])} == {"DIRECTS"}
    for spelling in ("Directs", "directs", "DIRECTS"):
        assert len(memory.facts(group, relation=spelling)) == 1
        docs, _ = _both(memory, group, "Mira", scopes=("facts",))
        assert [d.metadata["relation"] for d in docs] == ["DIRECTS"]


def test_the_scopes_stand_side_by_side_by_rank_not_by_their_scores_scales(
    memory: timestone.Memory, mira: str
) -> None:
    """Episodes are scored by text (about 0 to 2), facts by a fused rank (about 0.03): by
    score alone every passage would stand before every fact. A scope's n-th record
    stands beside the other scopes' n-th."""
    memory.add_document(mira, "notes://sud", "Mira directs Château Sud and walks its vines.",
                        reference_time=REF)  # fmt: skip
    found = memory.search(mira, "Who directs Château Sud?", scopes=("facts", "episodes"))
    assert found.facts
    assert found.episodes
    assert max(e.score or 0.0 for e in found.episodes) > max(f.score or 0.0 for f in found.facts)
    docs, nodes = _both(memory, mira, "Who directs Château Sud?", k=4)
    for ranked in ([d.metadata["kind"] for d in docs], [n.node.metadata["kind"] for n in nodes]):
        assert ranked[:2] == ["fact", "episode"]

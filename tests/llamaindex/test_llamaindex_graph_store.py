"""TimestonePropertyGraphStore: the scenario the Neo4j, FalkorDB and Kuzu stores test, run
against SimplePropertyGraphStore and ours; PropertyGraphIndex on top; tenancy and history."""

# PropertyGraphStore's signatures use bare dict; the index is generic in LangChain types.
# pyright: reportUnknownMemberType=false

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from llama_index.core import Document, PropertyGraphIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.graph_stores import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import EntityNode, PropertyGraphStore, Relation
from llama_index.core.llms import MockLLM
from llama_index.core.schema import TextNode
from llama_index.graph_stores.timestone import TimestonePropertyGraphStore

import timestone


@pytest.fixture(params=["simple", "timestone"])
def store(
    request: pytest.FixtureRequest, memory: timestone.Memory, group: str
) -> Iterator[PropertyGraphStore]:
    if request.param == "simple":
        yield SimplePropertyGraphStore()
    else:
        yield TimestonePropertyGraphStore(memory, group)


def _names(triplets: Sequence[tuple[object, Relation, object]]) -> set[tuple[str, str, str]]:
    return {(r.source_id, r.label, r.target_id) for _, r, _ in triplets}


def test_the_standard_scenario(store: PropertyGraphStore) -> None:
    logan = EntityNode(label="PERSON", name="Logan", properties={"age": 28})
    llama = EntityNode(label="ORGANIZATION", name="LlamaIndex")
    works = Relation(
        label="WORKS_FOR", source_id=logan.id, target_id=llama.id, properties={"since": 2023}
    )
    store.upsert_nodes([logan, llama])
    store.upsert_relations([works])
    text = "Logan (age 28), works for LlamaIndex since 2023.\n\tExact  whitespace é ✓"
    source = TextNode(text=text, metadata={"file": "a.txt", "page": 3, "tags": ["x", "y"]})
    store.upsert_llama_nodes([source])
    store.upsert_relations(
        [
            Relation(label="MENTIONS", source_id=source.node_id, target_id=logan.id),
            Relation(label="MENTIONS", source_id=source.node_id, target_id=llama.id),
        ]
    )

    # get by ids and by properties
    got = store.get(ids=[logan.id])
    assert [(n.id, n.label, n.properties) for n in got] == [("Logan", "PERSON", {"age": 28})]
    assert [n.id for n in store.get(properties={"age": 28})] == ["Logan"]

    # rel map depth
    one = store.get_rel_map(got, depth=1)
    assert len(one) == 2
    assert _names(one) == {
        ("Logan", "WORKS_FOR", "LlamaIndex"),
        (source.node_id, "MENTIONS", "Logan"),
    }
    works_for = next(r for _, r, _ in one if r.label == "WORKS_FOR")
    assert works_for.properties == {"since": 2023}
    from_chunk = store.get_rel_map(store.get(ids=[source.node_id]), depth=2)
    assert _names(from_chunk) == {
        ("Logan", "WORKS_FOR", "LlamaIndex"),
        (source.node_id, "MENTIONS", "Logan"),
        (source.node_id, "MENTIONS", "LlamaIndex"),
    }
    assert len(store.get_rel_map(store.get(ids=[source.node_id]), depth=1)) == 2
    without = store.get_rel_map(got, depth=1, ignore_rels=["WORKS_FOR"])
    assert _names(without) == {(source.node_id, "MENTIONS", "Logan")}

    # text and properties round-trip exactly
    back = store.get_llama_nodes([source.node_id])
    assert len(back) == 1
    assert back[0].get_content() == text
    assert back[0].metadata == {"file": "a.txt", "page": 3, "tags": ["x", "y"]}

    # upsert merges by id: one node, the latest properties
    store.upsert_nodes([EntityNode(label="PERSON", name="Logan", properties={"age": 29})])
    again = store.get(ids=["Logan"])
    assert [n.properties for n in again] == [{"age": 29}]
    found = store.get_triplets(entity_names=["Logan"], relation_names=["WORKS_FOR"])
    assert _names(found) == {("Logan", "WORKS_FOR", "LlamaIndex")}

    # delete
    store.delete(ids=[logan.id])
    assert store.get(ids=[logan.id]) == []
    if isinstance(store, TimestonePropertyGraphStore):
        # SimplePropertyGraphStore raises KeyError here: its delete drops both endpoint nodes
        # of a deleted triplet while other triplets still name them
        assert store.get_triplets(entity_names=["Logan"]) == []


def test_tenancy_history_and_refusals(memory: timestone.Memory, group: str) -> None:
    store = TimestonePropertyGraphStore(memory, group)
    store.upsert_nodes([EntityNode(name="Mira", label="PERSON", properties={"role": "director"})])
    first = memory.get_item(group, ("llama_index", "nodes"), "Mira")
    assert first is not None
    store.upsert_nodes([EntityNode(name="Mira", label="PERSON", properties={"role": "owner"})])
    assert TimestonePropertyGraphStore(memory, group + "-other").get(ids=["Mira"]) == []
    past = TimestonePropertyGraphStore(memory, group, as_of=first.updated_at)
    assert [n.properties for n in past.get(ids=["Mira"])] == [{"role": "director"}]
    with pytest.raises(TypeError, match="read-only"):
        past.upsert_nodes([EntityNode(name="X")])
    with pytest.raises(NotImplementedError, match="no structured"):
        store.structured_query("MATCH (n) RETURN n")
    with pytest.raises(timestone.errors.InvalidGroup):
        TimestonePropertyGraphStore(memory, "")


def test_property_graph_index_inserts_and_answers(memory: timestone.Memory, group: str) -> None:
    store = TimestonePropertyGraphStore(memory, group)
    index = PropertyGraphIndex.from_existing(
        store, embed_model=MockEmbedding(embed_dim=8), llm=MockLLM()
    )
    index.insert(Document(text="Mira directs Château Sud. Château Sud is in the Loire Valley."))
    chunks = [n for n in store.get() if n.label == "text_chunk"]
    assert len(chunks) == 1
    engine = index.as_query_engine(llm=MockLLM(), include_text=True)
    response = engine.query("Who directs Château Sud?")
    assert str(response)
    reopened = PropertyGraphIndex.from_existing(
        TimestonePropertyGraphStore(memory, group),
        embed_model=MockEmbedding(embed_dim=8),
        llm=MockLLM(),
    )
    assert [n.id for n in reopened.property_graph_store.get() if n.label == "text_chunk"] == [
        chunks[0].id
    ]

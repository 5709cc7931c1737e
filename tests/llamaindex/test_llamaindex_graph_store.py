"""TimestonePropertyGraphStore: the scenario the Neo4j, FalkorDB and Kuzu stores test, run
against SimplePropertyGraphStore and ours; the entity and fact mapping seen from the core;
tenancy, history, vectors; PropertyGraphIndex on top."""

# PropertyGraphStore's signatures use bare dict; LlamaIndex's LLM classes are loosely typed.
# pyright: reportUnknownMemberType=false, reportIncompatibleMethodOverride=false

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from llama_index.core import Document, PropertyGraphIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.graph_stores import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import (
    ChunkNode,
    EntityNode,
    PropertyGraphStore,
    Relation,
)
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata, MockLLM
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.graph_stores.timestone import TimestonePropertyGraphStore

import timestone
from timestone.errors import InvalidGroup, InvalidInput, NaiveDatetime


def _names(triplets: Sequence[tuple[object, Relation, object]]) -> set[tuple[str, str, str]]:
    return {(r.source_id, r.label, r.target_id) for _, r, _ in triplets}


def _logan_graph(store: PropertyGraphStore) -> tuple[EntityNode, EntityNode, Relation, TextNode]:
    logan = EntityNode(label="PERSON", name="Logan", properties={"age": 28})
    llama = EntityNode(label="ORGANIZATION", name="LlamaIndex")
    works = Relation(
        label="WORKS_FOR", source_id=logan.id, target_id=llama.id, properties={"since": 2023}
    )
    store.upsert_nodes([logan, llama])
    store.upsert_relations([works])
    source = TextNode(text="Logan (age 28), works for LlamaIndex since 2023.")
    store.upsert_llama_nodes([source])
    store.upsert_relations(
        [
            Relation(label="MENTIONS", target_id=logan.id, source_id=source.node_id),
            Relation(label="MENTIONS", target_id=llama.id, source_id=source.node_id),
        ]
    )
    return logan, llama, works, source


def test_the_neo4j_falkordb_scenario(store: PropertyGraphStore) -> None:
    """test_pg_stores_neo4j / _falkordb / _kuzu, step by step (their structured_query
    step aside: neither store runs Cypher)."""
    entity1, entity2, relation, source_node = _logan_graph(store)

    kg_nodes = store.get(ids=[entity1.id])
    assert len(kg_nodes) == 1
    assert kg_nodes[0].label == "PERSON"
    assert isinstance(kg_nodes[0], EntityNode)
    assert kg_nodes[0].name == "Logan"

    kg_nodes = store.get(properties={"age": 28})
    assert len(kg_nodes) == 1
    assert kg_nodes[0].label == "PERSON"
    assert isinstance(kg_nodes[0], EntityNode)
    assert kg_nodes[0].name == "Logan"

    # the paths from Logan at depth 1: Neo4j also skips MENTIONS; both stores here keep it
    paths = store.get_rel_map(kg_nodes, depth=1)
    assert {(p[0].id, p[1].id, p[2].id) for p in paths} == {
        (entity1.id, relation.id, entity2.id),
        (source_node.node_id, "MENTIONS", entity1.id),
    }

    llama_nodes = store.get_llama_nodes([source_node.node_id])
    assert len(llama_nodes) == 1
    assert llama_nodes[0].get_content() == source_node.text

    new_node = EntityNode(
        label="PERSON", name="Logan", properties={"age": 28, "location": "Canada"}
    )
    store.upsert_nodes([new_node])
    kg_nodes = store.get(properties={"age": 28})
    assert len(kg_nodes) == 1
    assert kg_nodes[0].label == "PERSON"
    assert isinstance(kg_nodes[0], EntityNode)
    assert kg_nodes[0].name == "Logan"
    assert kg_nodes[0].properties["location"] == "Canada"

    store.delete(ids=[entity1.id, entity2.id])
    store.delete(ids=[source_node.node_id])
    assert len(store.get(ids=[entity1.id, entity2.id])) == 0
    assert len(store.get_llama_nodes([source_node.node_id])) == 0


def test_rel_map_depth_round_trip_merge_and_delete(store: PropertyGraphStore) -> None:
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
    assert len(store.get_rel_map(got, depth=2, limit=1)) == 1

    # text and properties round-trip exactly
    back = store.get_llama_nodes([source.node_id])
    assert len(back) == 1
    assert back[0].get_content() == text
    assert back[0].metadata == {"file": "a.txt", "page": 3, "tags": ["x", "y"]}
    [chunk] = [n for n in store.get(ids=[source.node_id]) if isinstance(n, ChunkNode)]
    assert chunk.text == text
    assert chunk.label == "text_chunk"

    # upsert merges by id: one node, the latest properties
    store.upsert_nodes([EntityNode(label="PERSON", name="Logan", properties={"age": 29})])
    again = store.get(ids=["Logan"])
    assert [n.properties for n in again] == [{"age": 29}]
    found = store.get_triplets(entity_names=["Logan"], relation_names=["WORKS_FOR"])
    assert _names(found) == {("Logan", "WORKS_FOR", "LlamaIndex")}
    assert _names(store.get_triplets(relation_names=["MENTIONS"])) == {
        (source.node_id, "MENTIONS", "Logan"),
        (source.node_id, "MENTIONS", "LlamaIndex"),
    }
    assert store.get_triplets() == []

    # delete
    store.delete(ids=[logan.id])
    assert store.get(ids=[logan.id]) == []
    if isinstance(store, TimestonePropertyGraphStore):
        # SimplePropertyGraphStore's delete drops both endpoint nodes of a deleted triplet,
        # and then raises KeyError here; ours retracts the node and the relations at it only
        assert store.get_triplets(entity_names=["Logan"]) == []
        assert _names(store.get_triplets(ids=[source.node_id])) == {
            (source.node_id, "MENTIONS", "LlamaIndex")
        }


def test_entities_and_relations_are_timestone_entities_and_facts(
    memory: timestone.Memory, group: str
) -> None:
    store = TimestonePropertyGraphStore(memory, group)
    store.upsert_nodes(
        [
            EntityNode(name="Mira", label="PERSON", properties={"role": "winemaker"}),
            EntityNode(name="Château Sud", label="WINERY"),
        ]
    )
    store.upsert_relations(
        [
            Relation(
                label="directs", source_id="Mira", target_id="Château Sud", properties={"n": 1}
            ),
            Relation(label="LOCATED_IN", source_id="Château Sud", target_id="Loire Valley"),
        ]
    )
    # the same graph the core reads: entities, facts, timeline, search
    mira = memory.get_entity(group, "Mira")
    assert mira is not None
    assert mira.labels == ("PERSON",)
    assert mira.attributes == {"role": "winemaker"}
    [fact] = memory.facts(group, source="Mira")
    # a label takes the normal form of relation names: "directs", "located in": DIRECTS, LOCATED_IN
    assert (fact.source, fact.relation, fact.target) == ("Mira", "DIRECTS", "Château Sud")
    assert fact.attributes == {"n": 1}
    timeline = memory.timeline(group, "Château Sud")
    assert sorted(f.relation for f in timeline) == ["DIRECTS", "LOCATED_IN"]
    hits = memory.search(group, "Mira directs Château Sud", limit=3)
    assert fact.id in [f.id for f in hits.facts]
    # names resolve as Timestone resolves them: case and accents
    assert [n.id for n in store.get(ids=["chateau sud"])] == ["Château Sud"]

    # and facts the core wrote are relations of the store
    memory.add_facts(
        group,
        [timestone.FactInput("Mira", "GROWS", "Cabernet Franc")],
        reference_time=datetime.now(UTC),
    )
    assert _names(store.get_triplets(entity_names=["Mira"])) == {
        ("Mira", "DIRECTS", "Château Sud"),
        ("Mira", "GROWS", "Cabernet Franc"),
    }
    assert _names(store.get_rel_map(store.get(ids=["Mira"]), depth=2)) == {
        ("Mira", "DIRECTS", "Château Sud"),
        ("Mira", "GROWS", "Cabernet Franc"),
        ("Château Sud", "LOCATED_IN", "Loire Valley"),
    }

    # deleting a relation retracts the fact in system time: history keeps it
    before = datetime.now(UTC)
    store.delete(entity_names=["Mira"], relation_names=["directs"])
    assert memory.facts(group, source="Mira", relation="directs") == []
    assert [f.id for f in memory.facts(group, source="Mira", as_of=before)][-1:] == [fact.id]
    assert store.get(ids=["Mira"]) != []  # the relation went, not the node
    past = TimestonePropertyGraphStore(memory, group, as_of=before)
    assert ("Mira", "DIRECTS", "Château Sud") in _names(past.get_triplets(entity_names=["Mira"]))


def test_rel_map_is_cycle_safe_and_depth_limited(memory: timestone.Memory, group: str) -> None:
    store = TimestonePropertyGraphStore(memory, group)
    ring = [f"Node {i}" for i in range(6)]
    store.upsert_relations(
        [
            Relation(label="NEXT", source_id=a, target_id=b)
            for a, b in zip(ring, ring[1:] + ring[:1], strict=True)
        ]
    )
    start = store.get(ids=["Node 0"])
    # undirected hops: depth 1 reaches the two neighbours' edges
    assert _names(store.get_rel_map(start, depth=1)) == {
        ("Node 0", "NEXT", "Node 1"),
        ("Node 5", "NEXT", "Node 0"),
    }
    assert len(store.get_rel_map(start, depth=2)) == 4
    # around the ring and back: every edge once, the walk ends
    assert len(store.get_rel_map(start, depth=10, limit=100)) == 6


def test_a_store_needs_a_group_and_a_memory(memory: timestone.Memory) -> None:
    with pytest.raises(InvalidGroup):
        TimestonePropertyGraphStore(memory, "")
    with pytest.raises(InvalidGroup):
        TimestonePropertyGraphStore(memory, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TimestonePropertyGraphStore(memory)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"timestone\.Memory or a timestone\.AsyncMemory"):
        TimestonePropertyGraphStore(SimplePropertyGraphStore(), "g")  # type: ignore[arg-type]


def test_history_time_and_refusals(memory: timestone.Memory, group: str) -> None:
    store = TimestonePropertyGraphStore(memory, group)
    store.upsert_nodes([EntityNode(name="Mira", label="PERSON", properties={"role": "director"})])
    first = datetime.now(UTC)
    store.upsert_nodes([EntityNode(name="Mira", label="PERSON", properties={"role": "owner"})])
    assert TimestonePropertyGraphStore(memory, group + "-other").get(ids=["Mira"]) == []
    past = TimestonePropertyGraphStore(memory, group, as_of=first)
    assert [n.properties for n in past.get(ids=["Mira"])] == [{"role": "director"}]
    assert [n.properties for n in store.get(ids=["Mira"])] == [{"role": "owner"}]
    with pytest.raises(TypeError, match="read-only"):
        past.upsert_nodes([EntityNode(name="X")])
    with pytest.raises(NotImplementedError, match="no structured"):
        store.structured_query("MATCH (n) RETURN n")

    # valid_at: relations written by a store with a world time hold from it
    in_2019 = TimestonePropertyGraphStore(memory, group, valid_at=datetime(2019, 1, 1, tzinfo=UTC))
    in_2019.upsert_relations([Relation(label="DIRECTS", source_id="Mira", target_id="Nord")])
    [fact] = memory.facts(group, source="Mira", valid_at=None)
    assert fact.valid_at == datetime(2019, 1, 1, tzinfo=UTC)
    in_2018 = TimestonePropertyGraphStore(memory, group, valid_at=datetime(2018, 1, 1, tzinfo=UTC))
    assert in_2018.get_triplets(entity_names=["Mira"]) == []
    assert len(in_2019.get_triplets(entity_names=["Mira"])) == 1


def test_arguments_of_the_wrong_shape_are_refused_by_name(
    memory: timestone.Memory, group: str
) -> None:
    """Each once raised Python's own TypeError or AttributeError from deep inside; now an
    InvalidInput names the argument, and nothing is written."""
    store: Any = TimestonePropertyGraphStore(memory, group)  # called as an agent may
    query: Any = VectorStoreQuery
    refused: list[tuple[Any, str]] = [
        (lambda: store.upsert_nodes(None), "nodes must be a list of EntityNode and ChunkNode"),
        (lambda: store.upsert_relations("Mira"), "relations must be a list of Relation"),
        (lambda: store.get_rel_map("Mira"), "graph_nodes must be a list of LabelledNode"),
        (lambda: store.get_rel_map(["Mira"]), "graph_nodes must hold LabelledNode records"),
        (lambda: store.get_rel_map([EntityNode(name="Mira")], depth=None), "depth must be an"),
        (lambda: store.get_rel_map([EntityNode(name="Mira")], limit="30"), "limit must be an"),
        (lambda: store.delete(ids=7), "ids must be a list of node ids, got int"),
        (lambda: store.delete(ids=0), "ids must be a list of node ids, got int"),
        (lambda: store.delete(entity_names=1.5), "entity_names must be a list of names"),
        (
            lambda: store.vector_query(query(query_str="Mira", similarity_top_k=None)),
            "similarity_top_k must be an integer, got None",
        ),
        (
            lambda: store.vector_query(query(query_embedding=0, similarity_top_k=2)),
            "must be a list of numbers, got int",
        ),
    ]
    for call, message in refused:
        with pytest.raises(InvalidInput, match=message):
            call()
    with pytest.raises(TypeError, match="stores Relation records, got 'Mira'"):
        store.upsert_relations(["Mira"])
    assert memory.stats(group)["entities"]["versions"] == 0


def test_a_string_where_a_list_goes_is_refused_naming_the_argument(
    memory: timestone.Memory, group: str
) -> None:
    """``relation_names="KNOWS"`` once read as the relations K, N, O, W and S (matching and
    deleting nothing, silently), and ``entity_names="Ada"`` was refused naming an argument
    of the core; each is refused naming the caller's argument, and nothing is retracted."""
    store: Any = TimestonePropertyGraphStore(memory, group)  # called as an agent may
    store.upsert_relations([Relation(label="KNOWS", source_id="Ada", target_id="Bo")])
    refused: list[tuple[Any, str]] = [
        (
            lambda: store.get_triplets(relation_names="KNOWS"),
            "relation_names must be a list of relation labels, got str",
        ),
        (
            lambda: store.delete(relation_names="KNOWS"),
            "relation_names must be a list of relation labels, got str",
        ),
        (
            lambda: store.delete(entity_names=["Ada"], relation_names="KNOWS"),
            "relation_names must be a list of relation labels, got str",
        ),
        (
            lambda: store.get_triplets(relation_names=[7]),
            "a relation in relation_names must be a string, got int",
        ),
        (
            lambda: store.get_triplets(entity_names="Ada"),
            "entity_names must be a list of names, got str",
        ),
        (
            lambda: store.get_triplets(entity_names=["A\x00da"]),
            "a name in entity_names contains a NUL byte, which Postgres cannot store",
        ),
        (lambda: store.get_triplets(ids="Ada"), "ids must be a list of node ids, got str"),
    ]
    for call, message in refused:
        with pytest.raises(InvalidInput) as raised:
            call()
        assert str(raised.value) == message
    assert _names(store.get_triplets(relation_names=["KNOWS"])) == {("Ada", "KNOWS", "Bo")}
    assert _names(store.get_triplets(entity_names=["Ada"])) == {("Ada", "KNOWS", "Bo")}


def test_vector_query_refuses_a_top_k_below_one(memory: timestone.Memory, group: str) -> None:
    store = TimestonePropertyGraphStore(memory, group)
    store.upsert_nodes([EntityNode(name="Mira", label="PERSON")])
    for k in (0, -3):
        with pytest.raises(InvalidInput) as raised:
            store.vector_query(VectorStoreQuery(query_str="Mira", similarity_top_k=k))
        assert str(raised.value) == f"similarity_top_k must be at least 1, got {k}"
    nodes, _ = store.vector_query(VectorStoreQuery(query_str="Mira", similarity_top_k=1))
    assert [n.id for n in nodes] == ["Mira"]


def test_a_store_refuses_a_naive_or_string_clock_when_made(memory: timestone.Memory) -> None:
    """Checked when the store is made, as its retriever does, not at its first read."""
    bad: list[tuple[dict[str, Any], str]] = [
        (
            {"valid_at": datetime(2019, 1, 1)},
            "valid_at is a naive datetime (2019-01-01T00:00:00); pass a timezone-aware one, "
            "for example datetime(..., tzinfo=UTC)",
        ),
        ({"valid_at": "2019-01-01"}, "valid_at must be a timezone-aware datetime, got str"),
        (
            {"as_of": datetime(2019, 1, 1)},
            "as_of is a naive datetime (2019-01-01T00:00:00); pass a timezone-aware one, "
            "for example datetime(..., tzinfo=UTC)",
        ),
        ({"as_of": "2019-01-01"}, "as_of must be a timezone-aware datetime, got str"),
    ]
    for settings, message in bad:
        with pytest.raises(NaiveDatetime) as raised:
            TimestonePropertyGraphStore(memory, "g", **settings)
        assert str(raised.value) == message
    for valid_at in (None, timestone.NOW, datetime(2019, 1, 1, tzinfo=UTC)):
        assert TimestonePropertyGraphStore(memory, "g", valid_at=valid_at).valid_at == valid_at


def test_vector_query(memory: timestone.Memory, group: str) -> None:
    store = TimestonePropertyGraphStore(memory, group)
    assert store.supports_vector_queries
    store.upsert_nodes(
        [
            EntityNode(name="Mira", label="PERSON", embedding=[1.0, 0.0, 0.0]),
            EntityNode(name="Château Sud", label="WINERY", embedding=[0.0, 1.0, 0.0]),
            EntityNode(name="Loire Valley", embedding=[0.0, 0.7, 0.7]),
        ]
    )
    nodes, scores = store.vector_query(
        VectorStoreQuery(query_embedding=[0.1, 1.0, 0.0], similarity_top_k=2)
    )
    assert [n.id for n in nodes] == ["Château Sud", "Loire Valley"]
    assert scores[0] > scores[1] > 0
    with pytest.raises(InvalidInput, match="3"):
        store.vector_query(VectorStoreQuery(query_embedding=[1.0] * 8, similarity_top_k=2))
    # without an embedding: the query text against Timestone's own name embeddings
    nodes, _ = store.vector_query(VectorStoreQuery(query_str="Mira", similarity_top_k=1))
    assert [n.id for n in nodes] == ["Mira"]
    store.delete(ids=["Château Sud"])
    nodes, _ = store.vector_query(
        VectorStoreQuery(query_embedding=[0.1, 1.0, 0.0], similarity_top_k=3)
    )
    assert "Château Sud" not in [n.id for n in nodes]


class ScriptedLLM(CustomLLM):
    """Answers LlamaIndex's extraction and synonym prompts as a model would, offline."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata()

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        if "synonym" in prompt.lower():
            return CompletionResponse(text="MIRA^CHATEAU SUD")
        if "triplet" in prompt.lower():
            return CompletionResponse(
                text="(Mira, directs, Château Sud)\n(Château Sud, is in, Loire Valley)"
            )
        return CompletionResponse(text="Mira directs Château Sud.")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


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


def test_the_index_builds_the_graph_memory_reads(memory: timestone.Memory, group: str) -> None:
    llm = ScriptedLLM()
    index = PropertyGraphIndex.from_existing(
        TimestonePropertyGraphStore(memory, group),
        embed_model=MockEmbedding(embed_dim=8),
        llm=llm,
    )
    document = Document(text="Mira directs Château Sud, in the Loire Valley.")
    index.insert(document)
    # SimpleLLMPathExtractor capitalizes what the model said; the names are written as the
    # document spells them
    facts = {(f.source, f.relation, f.target) for f in memory.facts(group)}
    assert facts == {("Mira", "DIRECTS", "Château Sud"), ("Château Sud", "IS_IN", "Loire Valley")}

    # both default retrievers: synonyms through get(ids) and vectors through vector_query
    retriever = index.as_retriever(include_text=False)
    texts = [n.node.get_content() for n in retriever.retrieve("Who directs Château Sud?")]
    assert "Mira -> DIRECTS -> Château Sud" in texts
    response = index.as_query_engine(llm=llm).query("Who directs Château Sud?")
    assert "Mira" in str(response)
    assert any("Château Sud" in n.node.get_content() for n in response.source_nodes)

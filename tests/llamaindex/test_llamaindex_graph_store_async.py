"""The store on an AsyncMemory: LlamaIndex's async methods await Timestone instead of
running a blocking store inside the event loop. The same calls run on the reference
(SimplePropertyGraphStore, whose async methods call its own blocking ones) and on ours,
and give the same results."""

# PropertyGraphStore's signatures use bare dict; LlamaIndex's LLM classes are loosely typed.
# pyright: reportUnknownMemberType=false, reportIncompatibleMethodOverride=false

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core import PropertyGraphIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.graph_stores import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import (
    TRIPLET_SOURCE_KEY,
    ChunkNode,
    EntityNode,
    LabelledNode,
    PropertyGraphStore,
    Relation,
)
from llama_index.core.indices.property_graph import LLMSynonymRetriever
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.core.vector_stores.utils import node_to_metadata_dict
from llama_index.graph_stores.timestone import TimestonePropertyGraphStore

import timestone
from timestone.errors import InvalidInput

Triple = tuple[str, str, str]


def _names(triplets: Sequence[tuple[object, Relation, object]]) -> set[Triple]:
    return {(r.source_id, r.label, r.target_id) for _, r, _ in triplets}


def _nodes(nodes: Sequence[LabelledNode]) -> set[tuple[str, str, str]]:
    return {(n.id, n.label, repr(sorted(n.properties.items()))) for n in nodes}


async def _scenario(store: PropertyGraphStore) -> list[object]:
    """What each async method gives, step by step."""
    chunk = TextNode(id_="notes_part_0", text="Mira directs Nord.", metadata={"page": 2})
    out: list[object] = []
    await store.aupsert_nodes(
        [
            EntityNode(name="Mira", label="PERSON", properties={"age": 41}),
            EntityNode(name="Nord", label="WINERY"),
            EntityNode(name="Loire"),
            ChunkNode(  # as upsert_llama_nodes makes it
                text=chunk.text,
                id_=chunk.node_id,
                properties=node_to_metadata_dict(chunk, remove_text=True),
            ),
        ]
    )
    await store.aupsert_relations(
        [
            Relation(label="DIRECTS", source_id="Mira", target_id="Nord", properties={"y": 1}),
            Relation(label="IN_REGION", source_id="Nord", target_id="Loire"),
            Relation(label="MENTIONS", source_id=chunk.node_id, target_id="Mira"),
        ]
    )
    out.append(_nodes(await store.aget(ids=["Mira", "Nord"])))
    out.append(_nodes(await store.aget(properties={"age": 41})))
    out.append(_names(await store.aget_triplets(entity_names=["Mira"])))
    out.append(_names(await store.aget_triplets(relation_names=["IN_REGION"])))
    mira = await store.aget(ids=["Mira"])
    out.append(_names(await store.aget_rel_map(mira, depth=2)))
    out.append(_names(await store.aget_rel_map(mira, depth=2, ignore_rels=["DIRECTS"])))
    out.append([n.get_content() for n in await store.aget_llama_nodes([chunk.node_id])])
    # last, as the reference's deletes take the nodes at each end of a relation they delete
    await store.adelete_llama_nodes(node_ids=[chunk.node_id])
    out.append(await store.aget_llama_nodes([chunk.node_id]))
    return out


async def test_the_async_methods_give_what_the_reference_gives(
    amemory: timestone.AsyncMemory,
) -> None:
    group = "t-" + uuid.uuid4().hex[:16]
    ours = TimestonePropertyGraphStore(amemory, group)
    assert await _scenario(ours) == await _scenario(SimplePropertyGraphStore())
    # ours deletes only what it is asked to
    await ours.adelete(relation_names=["IN_REGION"])
    assert _names(await ours.aget_triplets(entity_names=["Nord"])) == {("Mira", "DIRECTS", "Nord")}
    await ours.adelete(ids=["Mira"])
    assert _nodes(await ours.aget(ids=["Mira", "Nord"])) == {("Nord", "WINERY", "[]")}
    assert await amemory.facts(group) == []


async def test_on_an_async_memory_the_blocking_methods_are_refused(
    amemory: timestone.AsyncMemory,
) -> None:
    """So the async methods never go through them: each awaits the memory."""
    group = "t-" + uuid.uuid4().hex[:16]
    store = TimestonePropertyGraphStore(amemory, group)
    with pytest.raises(TypeError, match=r"built on a timestone\.AsyncMemory: call its async"):
        store.get()
    with pytest.raises(TypeError, match="AsyncMemory"):
        store.upsert_relations([Relation(label="KNOWS", source_id="Ada", target_id="Bo")])
    assert await amemory.facts(group) == []
    # calls of many stores run side by side on the one loop
    stores = [TimestonePropertyGraphStore(amemory, f"{group}-{i}") for i in range(4)]
    await asyncio.gather(
        *(
            s.aupsert_relations([Relation(label="KNOWS", source_id="Ada", target_id=f"B{i}")])
            for i, s in enumerate(stores)
        )
    )
    found = await asyncio.gather(*(s.aget_triplets(entity_names=["Ada"]) for s in stores))
    assert [_names(t) for t in found] == [{("Ada", "KNOWS", f"B{i}")} for i in range(4)]


async def test_async_vector_query_and_bad_input(amemory: timestone.AsyncMemory) -> None:
    group = "t-" + uuid.uuid4().hex[:16]
    store = TimestonePropertyGraphStore(amemory, group)
    await store.aupsert_nodes(
        [
            EntityNode(name="Mira", label="PERSON", embedding=[1.0, 0.0, 0.0]),
            EntityNode(name="Nord", label="WINERY", embedding=[0.0, 1.0, 0.0]),
        ]
    )
    nodes, scores = await store.avector_query(
        VectorStoreQuery(query_embedding=[0.1, 1.0, 0.0], similarity_top_k=1)
    )
    assert ([n.id for n in nodes], len(scores)) == (["Nord"], 1)
    with pytest.raises(InvalidInput, match="NUL"):
        await store.aupsert_relations(
            [Relation(label="KNOWS", source_id="Ada", target_id="Bo\x00")]
        )
    with pytest.raises(NotImplementedError, match="no structured"):
        await store.astructured_query("MATCH (n) RETURN n")
    assert await amemory.facts(group) == []


class SynonymLLM(CustomLLM):
    """Answers the synonym prompt of LLMSynonymRetriever, offline."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata()

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text="MIRA^NORD")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


async def test_an_index_retrieves_through_the_async_path(
    amemory: timestone.AsyncMemory,
) -> None:
    """PropertyGraphIndex's async retrieval on both stores, the same graph in each."""
    group = "t-" + uuid.uuid4().hex[:16]
    texts: dict[str, list[str]] = {}
    for kind, store in (
        ("simple", SimplePropertyGraphStore()),
        ("timestone", TimestonePropertyGraphStore(amemory, group)),
    ):
        await store.aupsert_nodes([EntityNode(name="Mira"), EntityNode(name="Nord")])
        await store.aupsert_relations(
            [
                Relation(label="DIRECTS", source_id="Mira", target_id="Nord"),
                Relation(label="IN_REGION", source_id="Nord", target_id="Loire"),
            ]
        )
        index = PropertyGraphIndex.from_existing(
            store, llm=SynonymLLM(), embed_model=MockEmbedding(embed_dim=8)
        )
        retriever = index.as_retriever(
            sub_retrievers=[LLMSynonymRetriever(store, llm=SynonymLLM(), include_text=False)],
            use_async=True,
        )
        found = await retriever.aretrieve("Who directs Nord?")
        texts[kind] = sorted(n.node.get_content() for n in found)
    assert texts["timestone"] == texts["simple"]
    assert "Mira -> DIRECTS -> Nord" in texts["timestone"]


async def test_the_default_retrievers_await_the_store(amemory: timestone.AsyncMemory) -> None:
    """The index's default sub-retrievers with their source text: vector_query, the rel
    map and the chunks, each awaited (the reference runs no vector queries, so ours alone)."""
    group = "t-" + uuid.uuid4().hex[:16]
    store = TimestonePropertyGraphStore(amemory, group)
    embed = MockEmbedding(embed_dim=8)
    chunk = TextNode(id_="notes_part_0", text="Mira directs Nord.")
    await store.aupsert_llama_nodes([chunk])
    await store.aupsert_nodes(
        [
            EntityNode(name=n, properties={TRIPLET_SOURCE_KEY: chunk.node_id}, embedding=v)
            for n, v in (("Mira", [1.0] + [0.0] * 7), ("Nord", [0.0] * 7 + [1.0]))
        ]
    )
    await store.aupsert_relations(
        [
            Relation(
                label="DIRECTS",
                source_id="Mira",
                target_id="Nord",
                properties={TRIPLET_SOURCE_KEY: chunk.node_id},
            )
        ]
    )
    index = PropertyGraphIndex.from_existing(store, llm=SynonymLLM(), embed_model=embed)
    found = await index.as_retriever(include_text=True, use_async=True).aretrieve("Mira")
    texts = [n.node.get_content() for n in found]
    assert any("Mira -> DIRECTS -> Nord" in t and chunk.text in t for t in texts), texts


async def test_async_document_load_and_delete(amemory: timestone.AsyncMemory) -> None:
    """Chunks of two documents and what was read from each; deleting one document by its
    ref_doc_id, awaited, removes what only it supported (the reference keeps its facts)."""
    group = "t-" + uuid.uuid4().hex[:16]
    ours = TimestonePropertyGraphStore(amemory, group)
    reference = SimplePropertyGraphStore()
    handbook = TextNode(id_="handbook_part_0", text="Mira directs Nord and likes Gamay.")
    memo = TextNode(id_="memo_part_0", text="Mira directs Nord, in the Loire.")
    handbook.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="handbook.txt")
    memo.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="memo.txt")
    read = {
        handbook.node_id: [("Mira", "DIRECTS", "Nord"), ("Mira", "LIKES", "Gamay")],
        memo.node_id: [("Mira", "DIRECTS", "Nord"), ("Nord", "IN_REGION", "Loire")],
    }
    relations = [
        Relation(label=r, source_id=s, target_id=t, properties={TRIPLET_SOURCE_KEY: chunk})
        for chunk, triples in read.items()
        for s, r, t in triples
    ]
    await ours.aupsert_llama_nodes([handbook, memo])
    reference.upsert_llama_nodes([handbook, memo])  # (the reference has no async twin)
    for store in (ours, reference):
        await store.aupsert_relations(relations)
    back = {
        kind: sorted(n.get_content() for n in await s.aget_llama_nodes([handbook.node_id]))
        for kind, s in (("ours", ours), ("reference", reference))
    }
    assert back["ours"] == back["reference"] == [handbook.text]

    for store in (ours, reference):
        await store.adelete_llama_nodes(ref_doc_ids=["handbook.txt"])
    for store in (ours, reference):
        assert await store.aget_llama_nodes([handbook.node_id]) == []
    assert [n.get_content() for n in await ours.aget_llama_nodes([memo.node_id])] == [memo.text]
    assert {(f.source, f.relation, f.target) for f in await amemory.facts(group)} == {
        ("Mira", "DIRECTS", "Nord"),
        ("Nord", "IN_REGION", "Loire"),
    }
    assert ("Mira", "LIKES", "Gamay") in _names(await reference.aget_triplets(ids=["Mira"]))

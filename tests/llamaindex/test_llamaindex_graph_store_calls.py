"""TimestonePropertyGraphStore, one call at a time: reads and deletes past one page of the
core's reads, a call's writes all or nothing, one node per id, dates and spellings from the
document, labels given again, filters checked. Where SimplePropertyGraphStore answers, both
stores run and answer alike."""

# PropertyGraphStore's signatures use bare dict.
# pyright: reportUnknownMemberType=false

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest
from llama_index.core.graph_stores import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import (
    TRIPLET_SOURCE_KEY,
    EntityNode,
    PropertyGraphStore,
    Relation,
)
from llama_index.core.schema import TextNode
from llama_index.graph_stores.timestone import TimestonePropertyGraphStore

import timestone
from timestone.errors import InvalidInput, NaiveDatetime


def test_reads_and_deletes_go_past_one_page(store: PropertyGraphStore) -> None:
    """More matches than one core read returns (1,000): every one is read, and deleted."""
    n = 1_010
    friends = [f"Friend {i}" for i in range(n)]
    store.upsert_nodes([EntityNode(name=name) for name in ["Hub", "X", "Y", *friends]])
    store.upsert_relations(
        [Relation(label="KNOWS", source_id="Hub", target_id=f) for f in friends]
        + [Relation(label="ZZZ", source_id="X", target_id="Y", properties={"tag": "wanted"})]
    )
    assert len(store.get_triplets(relation_names=["KNOWS"])) == n
    assert len(store.get_triplets(entity_names=["Hub"])) == n
    assert len(store.get_triplets(ids=["Hub"])) == n
    # the one match sorts after every KNOWS edge
    [(_, found, _)] = store.get_triplets(properties={"tag": "wanted"})
    assert (found.source_id, found.target_id) == ("X", "Y")
    assert len(store.get_rel_map(store.get(ids=["Hub"]), depth=1, limit=n)) == n
    store.delete(relation_names=["KNOWS"])
    if isinstance(store, SimplePropertyGraphStore):
        return  # its delete without ids or properties also drops every node, so reads fail
    assert store.get_triplets(relation_names=["KNOWS"]) == []
    assert len(store.get_triplets(relation_names=["ZZZ"])) == 1


def test_a_call_that_spans_chunks_writes_nothing_when_one_is_refused(
    memory: timestone.Memory, group: str
) -> None:
    store = TimestonePropertyGraphStore(memory, group)
    first, second = {TRIPLET_SOURCE_KEY: "chunk-1"}, {TRIPLET_SOURCE_KEY: "chunk-2"}
    with pytest.raises(InvalidInput, match=r"the target_id of relation 'KNOWS'.*control char"):
        store.upsert_relations(
            [
                Relation(label="KNOWS", source_id="Ada", target_id="Bo", properties=first),
                Relation(label="KNOWS", source_id="Cy", target_id="Dee\tX", properties=second),
            ]
        )
    assert memory.facts(group, valid_at=None) == []
    assert store.get() == []
    # a chunk id is a relation end whatever its characters
    store.upsert_llama_nodes([TextNode(id_="part\t1", text="Ada met Bo.")])
    store.upsert_relations([Relation(label="MENTIONS", source_id="part\t1", target_id="Ada")])
    assert len(store.get_triplets(ids=["part\t1"])) == 1

    store.upsert_nodes([EntityNode(name="Old", embedding=[1.0, 0.0, 0.0])])
    with pytest.raises(InvalidInput, match="would have 3, 8 dimensions"):
        store.upsert_nodes(
            [
                EntityNode(name="Cy", properties=first),
                EntityNode(name="Dee", embedding=[1.0] * 8, properties=second),
            ]
        )
    assert [n.id for n in store.get() if isinstance(n, EntityNode)] == ["Old"]


def test_one_name_under_two_labels_in_one_call_is_one_node(store: PropertyGraphStore) -> None:
    source = {TRIPLET_SOURCE_KEY: "chunk-1"}
    store.upsert_nodes(
        [
            EntityNode(name="Apple", label="ORGANIZATION", properties={**source, "a": 1}),
            EntityNode(name="Apple", label="PRODUCT", properties={**source, "b": 2}),
            EntityNode(name="iPhone", label="PRODUCT", properties=source),
        ]
    )
    store.upsert_relations(
        [Relation(label="MAKES", source_id="Apple", target_id="iPhone", properties=source)]
    )
    [apple] = store.get(ids=["Apple"])
    assert (apple.id, apple.label, apple.properties.get("b")) == ("Apple", "PRODUCT", 2)
    [(subject, _, _)] = store.get_triplets(entity_names=["Apple"])
    assert (subject.id, subject.label) == ("Apple", "PRODUCT")


def test_a_node_upserted_again_reads_with_its_new_label(store: PropertyGraphStore) -> None:
    store.upsert_nodes([EntityNode(name="Jordan", label="COUNTRY", properties={"a": 1})])
    store.upsert_nodes([EntityNode(name="Jordan", label="PERSON", properties={"a": 5})])
    [jordan] = store.get(ids=["Jordan"])
    assert (jordan.label, jordan.properties["a"]) == ("PERSON", 5)


@pytest.mark.parametrize(
    "told", [datetime(2023, 6, 1, tzinfo=UTC), date(2023, 6, 1), "2023-06-01T00:00:00+00:00"]
)
def test_a_document_time_may_be_a_datetime_or_a_date(
    memory: timestone.Memory, group: str, told: Any
) -> None:
    store = TimestonePropertyGraphStore(memory, group)
    store.upsert_nodes([EntityNode(name="Ada", properties={"reference_time": told})])
    store.upsert_relations(
        [
            Relation(
                label="KNOWS", source_id="Ada", target_id="Bo", properties={"reference_time": told}
            )
        ]
    )
    [fact] = memory.facts(group, valid_at=None)
    assert fact.valid_at == datetime(2023, 6, 1, tzinfo=UTC)
    [ada] = store.get(ids=["Ada"])
    assert ada.properties["reference_time"] == (told if isinstance(told, str) else told.isoformat())
    assert store.get(properties={"reference_time": told}) == [ada]


def test_a_naive_document_time_is_refused_and_nothing_written(
    memory: timestone.Memory, group: str
) -> None:
    store = TimestonePropertyGraphStore(memory, group)
    naive = {"reference_time": datetime(2023, 6, 1)}
    with pytest.raises(NaiveDatetime, match="reference_time"):
        store.upsert_relations(
            [
                Relation(label="KNOWS", source_id="Ada", target_id="Bo"),
                Relation(label="KNOWS", source_id="Cy", target_id="Dee", properties=naive),
            ]
        )
    assert memory.facts(group, valid_at=None) == []


def test_a_name_the_chunk_spells_as_given_keeps_that_spelling(store: PropertyGraphStore) -> None:
    text = (
        "I ate an apple at lunch. Apple makes the iPhone. The US sued Apple; us engineers shrugged."
    )
    store.upsert_llama_nodes([TextNode(id_="c1", text=text)])
    source = {TRIPLET_SOURCE_KEY: "c1"}
    store.upsert_nodes(
        [
            EntityNode(name="Apple", label="ORGANIZATION", properties=source),
            EntityNode(name="US", label="COUNTRY", properties=source),
        ]
    )
    store.upsert_relations(
        [
            Relation(label="MAKES", source_id="Apple", target_id="iPhone", properties=source),
            Relation(label="SUED", source_id="US", target_id="Apple", properties=source),
        ]
    )
    found = {(s.id, r.label, t.id) for s, r, t in store.get_triplets(relation_names=["SUED"])}
    assert found == {("US", "SUED", "Apple")}
    names = {n.id for n in store.get() if isinstance(n, EntityNode)}
    assert {"Apple", "US"} <= names
    assert not names & {"apple", "us"}


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ("since", "properties must be a dict, got str"),
        ({"a": object()}, "properties hold a value no property can have"),
        ({"a": "\x00"}, "properties contains a NUL byte"),
    ],
)
def test_a_properties_filter_is_checked_by_its_name(
    memory: timestone.Memory, group: str, properties: Any, message: str
) -> None:
    store = TimestonePropertyGraphStore(memory, group)
    store.upsert_relations([Relation(label="KNOWS", source_id="Ada", target_id="Bo")])
    calls = [
        lambda: store.get(properties=properties),
        lambda: store.get_triplets(properties=properties),
        lambda: store.get_triplets(relation_names=["KNOWS"], properties=properties),
        lambda: store.delete(relation_names=["KNOWS"], properties=properties),
        lambda: store.delete(properties=properties),
    ]
    for call in calls:
        with pytest.raises(InvalidInput, match=message):
            call()
    assert len(store.get_triplets(relation_names=["KNOWS"])) == 1

"""Relation names have one normal form, UPPER_SNAKE_CASE, wherever a name enters."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import timestone
from timestone.errors import InvalidInput
from timestone.toolkit import relation_name

REF = datetime(2024, 3, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("DIRECTS", "DIRECTS"),
        ("Directs", "DIRECTS"),
        ("directs", "DIRECTS"),
        ("WORKS_AT", "WORKS_AT"),
        ("worksAt", "WORKS_AT"),
        ("WorksAt", "WORKS_AT"),
        ("works at", "WORKS_AT"),
        ("located-in", "LOCATED_IN"),
        ("  Located  in ", "LOCATED_IN"),
        ("travaille à", "TRAVAILLE_A"),
        ("works__at_", "WORKS_AT"),
        ("hasIPv6", "HAS_IPV6"),
        ("", None),
        ("--", None),
        ("2nd_of", None),
        ("R" * 129, None),
    ],
)
def test_relation_name(label: str, name: str | None) -> None:
    assert relation_name(label) == name


def test_inputs_take_the_normal_form() -> None:
    assert timestone.FactInput("Mira", "directs", "Sud").relation == "DIRECTS"
    assert timestone.FactInput.parse(
        {"source": "Mira", "relation": "worksAt", "target": "Sud"}
    ).relation == "WORKS_AT"  # fmt: skip
    assert timestone.GraphRelation("a", "Mentions", "b").relation == "Mentions"  # until written
    edge = timestone.EdgeType("worksAt", cardinality="one")
    assert edge.name == "WORKS_AT"
    onto = timestone.Ontology(edge_types=[edge])
    assert onto.edge("works_at") is edge
    assert onto.cardinality("WorksAt") == "one"
    with pytest.raises(InvalidInput, match="two edge types are named WORKS_AT"):
        timestone.Ontology(edge_types=[edge, timestone.EdgeType("WORKS_AT")])
    for bad in ("works at", "", "_", "2ND", "R\x00"):  # an identifier, or refused
        with pytest.raises(InvalidInput, match="relation"):
            timestone.FactInput("Mira", bad, "Sud")


def test_three_spellings_are_one_relation(memory: timestone.Memory, group: str) -> None:
    for i, spelling in enumerate(("Directs", "DIRECTS", "directs")):
        memory.add_facts(
            group,
            [{"source": "Mira", "relation": spelling, "target": "Château Sud"}],
            reference_time=REF,
            idempotency_key=f"said {i}",  # the facts are equal once named alike
        )
    facts = memory.facts(group)
    assert [(f.relation, len(f.episodes)) for f in facts] == [("DIRECTS", 3)]
    for spelling in ("Directs", "DIRECTS", "directs"):
        assert memory.facts(group, relation=spelling) == facts
        assert [f.id for f in memory.timeline(group, "Mira", relation=spelling)] == [facts[0].id]
        found = memory.search(group, "Mira Château Sud", edge_types=[spelling])
        assert [f.id for f in found.facts] == [facts[0].id]
    with pytest.raises(InvalidInput, match="relation"):
        memory.facts(group, relation="directs or not")


def test_graph_writes_and_walks_take_the_normal_form(memory: timestone.Memory, group: str) -> None:
    chunk = f"{group}-c1"  # chunk keys are global
    write = memory.graph_upsert(
        group,
        chunks=[timestone.GraphChunk(chunk, "Mira directs Château Sud.")],
        relations=[
            timestone.GraphRelation("Mira", "Directs", "Château Sud"),
            timestone.GraphRelation(chunk, "mentions", "Mira"),
        ],
        valid_at=REF,
    )
    assert [f.relation for f in write.facts] == ["DIRECTS"]
    edges = memory.graph_edges(group, around=[chunk], relations=["Mentions"])
    assert [e.relation for e in edges] == ["MENTIONS"]

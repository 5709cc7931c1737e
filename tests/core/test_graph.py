"""The property graph view (Memory.graph_*): one transaction per write, the recursive walk,
retraction in system time, rollback, and node ids per group."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from typing import Literal

import pytest

import timestone
from timestone import EntityInput, GraphChunk, GraphRelation
from timestone.errors import InvalidInput


def _triples(edges: list[timestone.GraphEdge]) -> set[tuple[str, str, str]]:
    def name(end: timestone.Entity | GraphChunk | str) -> str:
        if isinstance(end, timestone.Entity):
            return end.name
        return end.key if isinstance(end, GraphChunk) else end

    return {(name(e.source), e.relation, name(e.target)) for e in edges}


def test_a_graph_write_is_one_transaction(memory: timestone.Memory, group: str) -> None:
    key = "chunk-" + uuid.uuid4().hex
    with pytest.raises(InvalidInput, match="dimensions"):  # found last, after every other write
        memory.graph_upsert(
            group,
            entities=[EntityInput("Ada", ("PERSON",))],
            chunks=[GraphChunk(key, "Ada met Bo.")],
            relations=[
                GraphRelation(key, "MENTIONS", "Ada"),
                GraphRelation("Ada", "KNOWS", "Bo", {"places": ["Lyon"]}),
            ],
            vectors={"Ada": [1.0, 0.0], "Bo": [1.0, 0.0, 0.0]},
        )
    nodes = memory.graph_nodes(group)
    assert (nodes.entities, nodes.chunks) == ([], [])
    assert memory.graph_edges(group) == []


def test_walk_retract_and_rollback(memory: timestone.Memory, group: str) -> None:
    key = "chunk-" + uuid.uuid4().hex
    memory.graph_upsert(
        group,
        entities=[EntityInput("Ada", ("PERSON",), attributes={"born": 1815})],
        chunks=[GraphChunk(key, "Ada met Bo in Lyon.", "text_chunk", {"page": 1})],
        relations=[
            GraphRelation(key, "MENTIONS", "Ada"),
            GraphRelation("Ada", "KNOWS", "Bo"),
            GraphRelation("Bo", "LIVES_IN", "Lyon"),
            GraphRelation(key, "SOURCE", "doc-1"),  # an end no node holds: a bare key
        ],
    )
    two = memory.graph_edges(group, around=[key], depth=2)
    assert _triples(two) == {
        (key, "MENTIONS", "Ada"),
        (key, "SOURCE", "doc-1"),
        ("Ada", "KNOWS", "Bo"),
    }
    assert [e.depth for e in two] == [1, 1, 2]
    assert _triples(memory.graph_edges(group, around=[key], depth=3, skip_relations=["KNOWS"])) == {
        (key, "MENTIONS", "Ada"),
        (key, "SOURCE", "doc-1"),
    }
    knows = next(e for e in two if e.relation == "KNOWS")
    assert knows.fact is not None
    assert knows.id == knows.fact.id
    assert memory.graph_nodes(group, attributes={"born": 1815}).entities[0].name == "Ada"
    assert [c.key for c in memory.graph_nodes(group, attributes={"page": 1}).chunks] == [key]

    before = datetime.now(UTC)
    gone = memory.graph_retract(group, ids=["Ada"])
    assert gone == {"entities": 1, "facts": 1, "chunks": 0, "links": 1}
    assert memory.get_entity(group, "Ada") is None
    assert _triples(memory.graph_edges(group)) == {
        ("Bo", "LIVES_IN", "Lyon"),
        (key, "SOURCE", "doc-1"),
    }
    assert len(memory.graph_edges(group, as_of=before)) == 4

    memory.rollback(group, to=before)
    assert _triples(memory.graph_edges(group, around=["Ada"])) == {
        (key, "MENTIONS", "Ada"),
        ("Ada", "KNOWS", "Bo"),
    }


def test_node_ids_are_per_group(memory: timestone.Memory) -> None:
    a, b = "ga-" + uuid.uuid4().hex[:10], "gb-" + uuid.uuid4().hex[:10]
    key = "chunk-" + uuid.uuid4().hex
    memory.graph_upsert(a, chunks=[GraphChunk(key, "text of a")])
    ada = memory.graph_upsert(a, entities=[EntityInput("Ada")]).entities[0]
    # the same chunk key in another group is another chunk; an entity id of group a names
    # nothing in group b, so b's relation makes an entity of that name there
    memory.graph_upsert(
        b,
        chunks=[GraphChunk(key, "text of b")],
        relations=[GraphRelation(key, "MENTIONS", str(ada.id))],
    )
    assert [c.text for c in memory.graph_nodes(a, ids=[key]).chunks] == ["text of a"]
    assert [c.text for c in memory.graph_nodes(b, ids=[key]).chunks] == ["text of b"]
    assert _triples(memory.graph_edges(a)) == set()
    assert _triples(memory.graph_edges(b)) == {(key, "MENTIONS", str(ada.id))}
    # retracting in b leaves a's chunk and entity
    memory.graph_retract(b, ids=[key, str(ada.id)])
    assert memory.graph_nodes(b, ids=[key]).chunks == []
    assert [c.text for c in memory.graph_nodes(a, ids=[key]).chunks] == ["text of a"]
    assert memory.get_entity(a, "Ada") is not None


def test_relation_properties_may_hold_lists_and_objects(
    memory: timestone.Memory, group: str
) -> None:
    attributes = {"places": ["Lyon", "Turin"], "how": {"x": 1}}
    memory.graph_upsert(group, relations=[GraphRelation("Ada", "KNOWS", "Bo", attributes)])
    [fact] = memory.facts(group, source="Ada", relation="KNOWS")
    assert fact.attributes == attributes
    # another fact of the same source and relation recomputes the slot group: the first
    # fact, lists and objects included, compares equal to itself and keeps its version
    memory.graph_upsert(group, relations=[GraphRelation("Ada", "KNOWS", "Cy", attributes)])
    history = memory.fact_history(group, "Ada")
    assert sorted(f.target for f in history) == ["Bo", "Cy"]
    assert {f.version_id for f in history if f.target == "Bo"} == {fact.version_id}


def _end_key(end: timestone.Entity | GraphChunk | str) -> str:
    if isinstance(end, timestone.Entity):
        return "e:" + str(end.id)
    return "c:" + end.key if isinstance(end, GraphChunk) else "k:" + end


def _walk(edges: list[tuple[str, str, str]], start: set[str], depth: int) -> dict[str, int]:
    """A breadth-first walk written apart from the query: each edge (id, end, end) at the
    first level whose frontier it touches, up to ``depth``."""
    found: dict[str, int] = {}
    frontier, seen = set(start), set(start)
    for level in range(1, depth + 1):
        reached: set[str] = set()
        for eid, a, b in edges:
            if a in frontier or b in frontier:
                found.setdefault(eid, level)
                reached |= {a, b} - seen
        if not reached:
            break
        seen |= reached
        frontier = reached
    return found


def test_the_walk_is_a_breadth_first_walk_cut_at_its_limit(
    memory: timestone.Memory, group: str
) -> None:
    """On a random graph of facts and links: the walk's depths are those of a walk
    written apart, and a walk with a limit returns the first edges of the walk without
    one. (The query stops reaching further once the nodes it reached past its start
    outnumber the limit: each was reached by an edge of its own, nearer than they are.)"""
    rnd = random.Random(3)
    names = [f"N{i}" for i in range(60)]
    chunks = [GraphChunk(f"chunk-{i}", f"text {i}") for i in range(6)]
    relations = [
        GraphRelation(rnd.choice(names), f"R{rnd.randrange(4)}", rnd.choice(names))
        for _ in range(120)
    ]
    relations += [GraphRelation(c.key, "MENTIONS", rnd.choice(names)) for c in chunks]
    relations += [GraphRelation(chunks[0].key, "SOURCE", "doc-1")]
    memory.graph_upsert(
        group, entities=[EntityInput(n) for n in names], chunks=chunks, relations=relations
    )
    every = memory.graph_edges(group, limit=1000)
    assert len(every) > 100
    edges = [
        (f"f:{e.id}" if e.fact is not None else f"l:{e.id}", _end_key(e.source), _end_key(e.target))
        for e in every
    ]
    ids = {n: memory.get_entity(group, n) for n in names}
    for name in [*rnd.sample(names, 8), "chunk-0"]:
        node = ids.get(name)
        start = "e:" + str(node.id) if node is not None else "c:" + name
        around = [str(node.id)] if node is not None else [name]
        for depth in (1, 2, 3, 5):
            whole = memory.graph_edges(group, around=around, depth=depth, limit=1000)
            got = {(f"f:{e.id}" if e.fact is not None else f"l:{e.id}"): e.depth for e in whole}
            assert got == _walk(edges, {start}, depth), (name, depth)
            assert [e.depth for e in whole] == sorted(e.depth for e in whole)
            for limit in (1, 3, 10, 40):
                cut = memory.graph_edges(group, around=around, depth=depth, limit=limit)
                assert cut == whole[:limit], (name, depth, limit)
    # a tree, where the nodes a walk reaches are exactly as many as the edges that reached
    # them: a walk that stopped one level early would come up short
    tree = group + "-tree"
    memory.graph_upsert(
        tree,
        entities=[EntityInput(f"T{i}") for i in range(63)],
        relations=[GraphRelation(f"T{(i - 1) // 2}", "CHILD", f"T{i}") for i in range(1, 63)],
    )
    root = memory.get_entity(tree, "T0")
    assert root is not None
    whole = memory.graph_edges(tree, around=[str(root.id)], depth=6, limit=1000)
    assert [e.depth for e in whole] == [1] * 2 + [2] * 4 + [3] * 8 + [4] * 16 + [5] * 32
    for limit in range(1, 63):
        cut = memory.graph_edges(tree, around=[str(root.id)], depth=6, limit=limit)
        assert cut == whole[:limit], limit


def test_a_node_id_may_name_an_entity_by_a_near_identical_spelling(
    memory: timestone.Memory, group: str
) -> None:
    memory.graph_upsert(group, entities=[EntityInput("Northwind Traders International")])
    found = memory.graph_nodes(group, ids=["Northwind Traders Internationale"])
    assert [e.name for e in found.entities] == ["Northwind Traders International"]
    # an id that is not a spelling of any name names nothing
    assert memory.graph_nodes(group, ids=["Southwind Shipping Limited"]).entities == []


def test_a_fact_id_given_as_text_retracts_the_fact(memory: timestone.Memory, group: str) -> None:
    """Ids that arrive as text (JSON, a tool call) name the fact; a link key is 64 hex
    digits, which no UUID's text is."""
    memory.graph_upsert(group, relations=[GraphRelation("Ada", "KNOWS", "Bo")])
    [edge] = memory.graph_edges(group)
    gone = memory.graph_retract(group, edges=[str(edge.id)])
    assert gone == {"entities": 0, "facts": 1, "chunks": 0, "links": 0}
    assert memory.graph_edges(group) == []


@pytest.mark.parametrize("cardinality", ["one", "many"])
def test_retracting_a_fact_leaves_another_period_of_the_same_target(
    dsn: str, group: str, cardinality: Literal["one", "many"]
) -> None:
    """Lima until 2013 and Lima again from 2014 are two facts: retracting the first by its
    id leaves the second (and the graph answers Lima now)."""

    def year(y: int) -> datetime:
        return datetime(y, 1, 1, tzinfo=UTC)

    ontology = timestone.Ontology(
        edge_types=[timestone.EdgeType("LIVES_IN", cardinality=cardinality)]
    )
    with timestone.Memory.open(dsn, ontology=ontology, warm=False) as mem:
        mem.add_facts(
            group,
            [
                timestone.FactInput(
                    "Anna", "LIVES_IN", "Lima", valid_at=year(2011), invalid_at=year(2013)
                ),
                timestone.FactInput(
                    "Anna", "LIVES_IN", "Oslo", valid_at=year(2013), invalid_at=year(2014)
                ),
                timestone.FactInput("Anna", "LIVES_IN", "Lima", valid_at=year(2014)),
            ],
            reference_time=year(2011),
        )
        periods = {
            (e.fact.target, e.fact.valid_at.year): e.id
            for e in mem.graph_edges(group, valid_at=None)
            if e.fact is not None
        }
        assert sorted(periods) == [("Lima", 2011), ("Lima", 2014), ("Oslo", 2013)]
        gone = mem.graph_retract(group, edges=[periods["Lima", 2011]])
        assert gone == {"entities": 0, "facts": 1, "chunks": 0, "links": 0}
        held = mem.facts(group, source="Anna", valid_at=None)
        assert sorted((f.target, f.valid_at.year) for f in held) == [("Lima", 2014), ("Oslo", 2013)]
        assert [f.target for f in mem.facts(group, source="Anna")] == ["Lima"]
        assert periods["Lima", 2014] in {f.id for f in held}


@pytest.mark.parametrize(
    ("vectors", "message"),
    [
        # a misspelt name would lose its vector while the rest is written
        ({"Adaa": [1.0, 0.0]}, "vectors: 'Adaa' names no entity of this call or group"),
        (
            {"Ada": [10**400, 1.0]},
            "vector of 'Ada' holds an integer of 1,329 bits, beyond what a vector's 4-byte",
        ),
        ({"Ada": [float("inf"), 1.0]}, "vector of 'Ada' holds inf, beyond what a vector's 4-byte"),
        ({"Ada": [1e300, 1.0]}, "vector of 'Ada' holds 1e\\+300, beyond what a vector's 4-byte"),
    ],
)
def test_a_vector_nobody_can_use_is_refused_and_nothing_written(
    memory: timestone.Memory, group: str, vectors: dict[str, list[float]], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        memory.graph_upsert(group, entities=[EntityInput("Ada")], vectors=vectors)
    assert memory.graph_nodes(group).entities == []


@pytest.mark.parametrize(
    ("vector", "shown"),
    [([10**400, 1.0], "an integer of 1,329 bits"), ([float("-inf"), 1.0], "-inf")],
)
def test_a_probe_vector_past_a_4_byte_float_is_refused(
    memory: timestone.Memory, group: str, vector: list[float], shown: str
) -> None:
    with pytest.raises(InvalidInput, match=f"vector holds {shown}, beyond what a vector's 4-byte"):
        memory.graph_nearest(group, vector=vector)


def test_edges_page_by_offset(memory: timestone.Memory, group: str) -> None:
    """``limit``/``offset`` page one order: the pages, read until one comes back short,
    are the whole read, flat or walked (and an offset past the end gives nothing)."""
    rnd = random.Random(7)
    names = [f"P{i}" for i in range(25)]
    chunk = GraphChunk("chunk-" + uuid.uuid4().hex, "text")
    relations = [
        GraphRelation(rnd.choice(names), f"R{rnd.randrange(3)}", rnd.choice(names))
        for _ in range(70)
    ]
    relations += [GraphRelation(chunk.key, "MENTIONS", n) for n in names[:5]]
    memory.graph_upsert(
        group, entities=[EntityInput(n) for n in names], chunks=[chunk], relations=relations
    )
    for around, depth in ((None, 1), (["P0"], 3), ([chunk.key], 2)):
        whole = memory.graph_edges(group, around=around, depth=depth, limit=1000)
        assert len(whole) > 10
        for limit in (1, 4, 7):
            pages: list[timestone.GraphEdge] = []
            while True:
                page = memory.graph_edges(
                    group, around=around, depth=depth, limit=limit, offset=len(pages)
                )
                pages += page
                if len(page) < limit:
                    break
            assert pages == whole, (around, depth, limit)
        assert memory.graph_edges(group, around=around, depth=depth, offset=len(whole)) == []
    with pytest.raises(InvalidInput, match="offset must be an integer"):
        memory.graph_edges(group, offset=-1)


def test_one_name_twice_in_a_write_is_one_entity(memory: timestone.Memory, group: str) -> None:
    """As if upserted one after the other: labels accumulate, later attributes win."""
    memory.graph_upsert(
        group,
        entities=[
            EntityInput("Apple", ("ORGANIZATION",), attributes={"a": 1}),
            EntityInput("apple", ("PRODUCT",), attributes={"a": 2, "b": 3}),
        ],
    )
    [apple] = memory.graph_nodes(group, ids=["Apple"]).entities
    assert (apple.name, apple.labels) == ("Apple", ("ORGANIZATION", "PRODUCT"))
    assert apple.attributes == {"a": 2, "b": 3}


def test_a_retracted_relation_is_no_evidence(memory: timestone.Memory, group: str) -> None:
    """A graph write records its call as an add_facts call does (a record of structured
    facts, no told episode): once its relation is retracted, context() serves no
    evidence of it."""
    memory.graph_upsert(
        group,
        entities=[EntityInput("Ada", ("PERSON",)), EntityInput("Bo", ("PERSON",))],
        relations=[GraphRelation("Ada", "KNOWS", "Bo")],
    )
    [record] = memory.episodes(group)
    assert record.source == "facts"
    [edge] = [e for e in memory.graph_edges(group) if e.relation == "KNOWS"]
    memory.graph_retract(group, edges=[edge.id])
    assert memory.facts(group) == []
    evidence = memory.context(group, "Who does Ada know?", token_budget=400)
    assert [i.text for i in evidence.items if "Bo" in i.text] == []

"""The property graph view (Memory.graph_*): one transaction per write, the recursive walk,
retraction in system time, rollback, and the cross-group id check under the library role."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import psycopg
import pytest

import timestone
from timestone import EntityInput, GraphChunk, GraphRelation
from timestone.errors import ForeignNode


def _triples(edges: list[timestone.GraphEdge]) -> set[tuple[str, str, str]]:
    def name(end: timestone.Entity | GraphChunk | str) -> str:
        if isinstance(end, timestone.Entity):
            return end.name
        return end.key if isinstance(end, GraphChunk) else end

    return {(name(e.source), e.relation, name(e.target)) for e in edges}


def test_a_graph_write_is_one_transaction(memory: timestone.Memory, group: str) -> None:
    key = "chunk-" + uuid.uuid4().hex
    elsewhere = "chunk-" + uuid.uuid4().hex
    memory.graph_upsert("other-" + uuid.uuid4().hex[:10], chunks=[GraphChunk(elsewhere, "x")])
    with pytest.raises(ForeignNode):  # the last relation names a chunk another group holds
        memory.graph_upsert(
            group,
            entities=[EntityInput("Ada", ("PERSON",))],
            chunks=[GraphChunk(key, "Ada met Bo.")],
            relations=[
                GraphRelation(key, "MENTIONS", "Ada"),
                GraphRelation("Ada", "KNOWS", "Bo", {"places": ["Lyon"]}),
                GraphRelation(elsewhere, "MENTIONS", "Bo"),
            ],
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


def test_the_id_check_answers_only_inside_a_group(dsn: str, memory: timestone.Memory) -> None:
    a, b = "ga-" + uuid.uuid4().hex[:10], "gb-" + uuid.uuid4().hex[:10]
    key = "chunk-" + uuid.uuid4().hex
    memory.graph_upsert(a, chunks=[GraphChunk(key, "text of a")])
    with pytest.raises(ForeignNode):
        memory.graph_upsert(b, chunks=[GraphChunk(key, "text of b")])
    with psycopg.connect(dsn) as conn:
        conn.execute("SET ROLE timestone_app")
        query = "SELECT f.id FROM timestone.graph_ids_elsewhere(%s::text[]) AS f(id)"
        assert conn.execute(query, ([key],)).fetchall() == []  # no group: no answer
        conn.execute("SELECT set_config('timestone.group_id', %s, true)", (a,))
        assert conn.execute(query, ([key],)).fetchall() == []  # its own
        conn.execute("SELECT set_config('timestone.group_id', %s, true)", (b,))
        assert conn.execute(query, ([key, "other"],)).fetchall() == [(key,)]


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

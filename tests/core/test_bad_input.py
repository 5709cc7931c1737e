"""Bad input gets a clear error naming what was wrong, and writes nothing."""

from __future__ import annotations

import io
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pydantic
import pytest

import timestone
from timestone import EdgeType, EntityInput, EntityType, FactInput, Ontology
from timestone._records import MAX_ATTRIBUTES_CHARS
from timestone.errors import (
    AlreadyRemoved,
    InvalidInput,
    InvalidPeriod,
    NaiveDatetime,
    NotFound,
    OntologyViolation,
)

REF = datetime(2020, 1, 1, tzinfo=UTC)


def _rows(dsn: str, group: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM timestone.episodes WHERE group_id = %(g)s)"
            " + (SELECT count(*) FROM timestone.entities WHERE group_id = %(g)s)"
            " + (SELECT count(*) FROM timestone.facts WHERE group_id = %(g)s)",
            {"g": group},
        ).fetchone()
    assert row is not None
    return int(str(row[0]))


class Role(pydantic.BaseModel):
    since: int
    title: str


@pytest.fixture(scope="module")
def closed(dsn: str) -> timestone.Memory:
    onto = Ontology(
        entity_types=[EntityType("Person", attributes=Role)],
        edge_types=[EdgeType("DIRECTS", cardinality="one", attributes=Role)],
        closed=True,
    )
    return timestone.Memory.open(dsn, ontology=onto)


BAD_FACTS: list[tuple[str, Any, type[Exception], str]] = [
    (
        "naive valid_at",
        {"source": "A", "relation": "R", "target": "B", "valid_at": datetime(2020, 1, 1)},
        NaiveDatetime,
        "naive",
    ),
    # a number, or a string of digits, is not seconds since 1970
    (
        "year as a number",
        {"source": "A", "relation": "R", "target": "B", "valid_at": 2020},
        NaiveDatetime,
        "valid_at of R fact must be a timezone-aware datetime, got int",
    ),
    (
        "seconds as a float",
        {"source": "A", "relation": "R", "target": "B", "invalid_at": 1.7e9},
        NaiveDatetime,
        "invalid_at of R fact must be a timezone-aware datetime, got float",
    ),
    (
        "year as a string",
        {"source": "A", "relation": "R", "target": "B", "valid_at": "2020"},
        InvalidPeriod,
        "valid_at of R fact: cannot read '2020' as an ISO 8601 datetime",
    ),
    (
        "naive ISO string",
        {"source": "A", "relation": "R", "target": "B", "valid_at": "2020-05-01T10:00"},
        NaiveDatetime,
        "valid_at of R fact is a naive datetime",
    ),
    (
        "end before start",
        {"source": "A", "relation": "R", "target": "B", "valid_at": REF, "invalid_at": REF},
        InvalidPeriod,
        "not after",
    ),
    (
        "empty source",
        {"source": "  ", "relation": "R", "target": "B"},
        InvalidInput,
        "entity name is empty",
    ),
    ("NUL byte", {"source": "A\x00", "relation": "R", "target": "B"}, InvalidInput, "NUL"),
    # a name nobody can see or type
    (
        "zero-width name",
        {"source": "\u200b\u2060", "relation": "R", "target": "B"},
        InvalidInput,
        r"entity name '\\u200b\\u2060' has no visible character",
    ),
    (
        "a lone combining mark",
        {"source": "A", "relation": "R", "target": {"name": "\u0301"}},
        InvalidInput,
        "has no visible character",
    ),
    (
        "control characters in a name",
        {"source": "Ann\x01", "relation": "R", "target": "B"},
        InvalidInput,
        r"entity name 'Ann\\x01' contains a control character \('\\x01' at character 3\)",
    ),
    (
        "huge name",
        {"source": "x" * 10_000, "relation": "R", "target": "B"},
        InvalidInput,
        "10,000 characters",
    ),
    (
        "bad relation",
        {"source": "A", "relation": "works at", "target": "B"},
        InvalidInput,
        "relation",
    ),
    ("not a fact", {"source": "A"}, InvalidInput, "malformed"),
    # an end given as a mapping names its bad field, not the union's first branch
    (
        "labels of a source as a string",
        {"source": {"name": "A", "labels": "Person"}, "relation": "R", "target": "B"},
        InvalidInput,
        r"source \{'name': 'A', 'labels': 'Person'\} is malformed: labels: Input should be a valid",
    ),
    (
        "summary of a target as a number",
        {"source": "A", "relation": "R", "target": {"name": "B", "summary": 5}},
        InvalidInput,
        "target .* is malformed: summary: Input should be a valid string",
    ),
    (
        "unknown field",
        {"source": "A", "relation": "R", "target": "B", "when": 1},
        InvalidInput,
        "malformed",
    ),
    (
        "NUL in sentence",
        {"source": "A", "relation": "R", "target": "B", "fact": "a\x00"},
        InvalidInput,
        "NUL",
    ),
    # a lone surrogate: half of a UTF-16 pair, as json.loads makes of a broken escape
    (
        "surrogate in a name",
        {"source": "Ann\ud83d", "relation": "R", "target": "B"},
        InvalidInput,
        r"entity name contains a lone surrogate \('\\ud83d' at character 3\)",
    ),
    (
        "surrogate in sentence",
        {"source": "A", "relation": "R", "target": "B", "fact": "a \udc00 b"},
        InvalidInput,
        "fact sentence contains a lone surrogate",
    ),
    (
        "surrogate in a summary",
        {"source": {"name": "A", "summary": "\ud800"}, "relation": "R", "target": "B"},
        InvalidInput,
        "entity summary contains a lone surrogate",
    ),
    (
        "NUL in an attribute",
        {"source": "A", "relation": "R", "target": "B", "attributes": {"k": ["x", "\x00"]}},
        InvalidInput,
        r"attributes of R\['k'\]\[1\] contains a NUL byte",
    ),
    (
        "surrogate in an attribute key",
        {"source": "A", "relation": "R", "target": "B", "attributes": {"\ud800": 1}},
        InvalidInput,
        "a key of attributes of R contains a lone surrogate",
    ),
    (
        "NaN attribute",
        {"source": "A", "relation": "R", "target": "B", "attributes": {"k": float("nan")}},
        InvalidInput,
        r"attributes of R\['k'\] is nan, which JSON cannot hold",
    ),
    (
        "datetime attribute, undeclared",
        {"source": "A", "relation": "R", "target": "B", "attributes": {"k": REF}},
        InvalidInput,
        r"attributes of R\['k'\] is a datetime, which JSON cannot hold",
    ),
    (
        "set attribute of an entity",
        {"source": {"name": "A", "attributes": {"k": {1}}}, "relation": "R", "target": "B"},
        InvalidInput,
        r"attributes of Entity 'A'\['k'\] is a set",
    ),
    (
        "integer longer than Python writes",
        {"source": "A", "relation": "R", "target": "B", "attributes": {"k": 10**5000}},
        InvalidInput,
        r"attributes of R\['k'\] is an integer of 16,610 bits, more digits than Python writes",
    ),
    (
        "nested key not a string",
        {"source": "A", "relation": "R", "target": "B", "attributes": {"k": {2: 1}}},
        InvalidInput,
        r"attributes of R\['k'\] has a key that is not a string: 2",
    ),
]


@pytest.mark.parametrize(
    ("label", "fact", "error", "message"), BAD_FACTS, ids=[b[0] for b in BAD_FACTS]
)
def test_bad_facts(
    memory: timestone.Memory,
    dsn: str,
    group: str,
    label: str,
    fact: Any,
    error: type[Exception],
    message: str,
) -> None:
    del label
    good = {"source": "Ok", "relation": "R", "target": "Fine"}
    with pytest.raises(error, match=message):
        memory.add_facts(group, [good, fact], reference_time=REF)
    assert _rows(dsn, group) == 0


def test_a_fact_given_as_a_dict_takes_its_dates_in_iso_8601(
    memory: timestone.Memory, group: str
) -> None:
    fact = {"source": "A", "relation": "R", "target": "B", "valid_at": "2019-05-01T10:00:00Z"}
    fact["invalid_at"] = "2021-01-01T00:00:00+02:00"
    memory.add_facts(group, [fact], reference_time=REF)
    (stored,) = memory.facts(group, valid_at=None)
    assert stored.valid_at == datetime(2019, 5, 1, 10, tzinfo=UTC)
    assert stored.invalid_at == datetime(2020, 12, 31, 22, tzinfo=UTC)


def test_invalid_at_before_the_defaulted_valid_at(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    with pytest.raises(InvalidPeriod, match="reference_time"):
        memory.add_facts(
            group,
            [FactInput("A", "R", "B", invalid_at=REF - timedelta(days=1))],
            reference_time=REF,
        )
    assert _rows(dsn, group) == 0


@pytest.mark.parametrize("facts", [[], "A R B", {"source": "A"}, 42])
def test_facts_must_be_a_non_empty_list(memory: timestone.Memory, group: str, facts: Any) -> None:
    with pytest.raises(InvalidInput, match="facts"):
        memory.add_facts(group, facts, reference_time=REF)


def test_naive_reference_time(memory: timestone.Memory, dsn: str, group: str) -> None:
    with pytest.raises(NaiveDatetime, match="reference_time"):
        memory.add_facts(group, [FactInput("A", "R", "B")], reference_time=datetime(2020, 1, 1))
    assert _rows(dsn, group) == 0


def test_naive_read_points(memory: timestone.Memory, group: str) -> None:
    with pytest.raises(NaiveDatetime, match="valid_at"):
        memory.facts(group, valid_at=datetime(2020, 1, 1))
    with pytest.raises(NaiveDatetime, match="as_of"):
        memory.facts(group, as_of=datetime(2020, 1, 1))
    with pytest.raises(NaiveDatetime, match="as_of"):
        memory.timeline(group, "Mira", as_of=datetime(2020, 1, 1))


# aware, and in range where they are, but not once converted to UTC
PAST_9999 = datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5)))
BEFORE_1 = datetime(1, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=5)))


@pytest.mark.parametrize("when", [PAST_9999, BEFORE_1], ids=["past 9999", "before year 1"])
def test_a_time_outside_what_utc_holds(
    memory: timestone.Memory, dsn: str, group: str, when: datetime
) -> None:
    with pytest.raises(InvalidPeriod, match=r"reference_time .* outside the years 1 to 9999"):
        memory.add_facts(group, [FactInput("A", "R", "B")], reference_time=when)
    with pytest.raises(InvalidPeriod, match=r"valid_at .* outside the years 1 to 9999"):
        memory.add_facts(group, [FactInput("A", "R", "B", valid_at=when)], reference_time=REF)
    assert _rows(dsn, group) == 0
    with pytest.raises(InvalidPeriod, match="as_of"):
        memory.facts(group, as_of=when)
    with pytest.raises(InvalidPeriod, match="valid_at"):
        memory.search(group, "A", valid_at=when)


@pytest.mark.parametrize("limit", [0, -1, 10_000, True, 2.5])
def test_limit_out_of_range(memory: timestone.Memory, group: str, limit: Any) -> None:
    with pytest.raises(InvalidInput, match="limit"):
        memory.facts(group, limit=limit)


def test_unknown_relation_under_a_closed_ontology(
    closed: timestone.Memory, dsn: str, group: str
) -> None:
    with pytest.raises(OntologyViolation, match="WORKS_AT"):
        closed.add_facts(group, [FactInput("A", "WORKS_AT", "B")], reference_time=REF)
    assert _rows(dsn, group) == 0


def test_unknown_entity_type_under_a_closed_ontology(
    closed: timestone.Memory, dsn: str, group: str
) -> None:
    fact = FactInput(
        EntityInput("A", labels=("Robot",)), "DIRECTS", "B", attributes={"since": 1, "title": "x"}
    )
    with pytest.raises(OntologyViolation, match="Robot"):
        closed.add_facts(group, [fact], reference_time=REF)
    assert _rows(dsn, group) == 0


def test_attributes_failing_their_model(closed: timestone.Memory, dsn: str, group: str) -> None:
    bad_edge = FactInput("A", "DIRECTS", "B", attributes={"since": "long ago", "title": "x"})
    with pytest.raises(OntologyViolation, match="since"):
        closed.add_facts(group, [bad_edge], reference_time=REF)
    bad_entity = FactInput(
        EntityInput("A", labels=("Person",), attributes={"since": 2001}),
        "DIRECTS",
        "B",
        attributes={"since": 1, "title": "x"},
    )
    with pytest.raises(OntologyViolation, match="title"):
        closed.add_facts(group, [bad_entity], reference_time=REF)
    assert _rows(dsn, group) == 0


def test_valid_attributes_are_stored(closed: timestone.Memory, group: str) -> None:
    res = closed.add_facts(
        group,
        [
            FactInput(
                EntityInput(
                    "Mira", labels=("Person",), attributes={"since": 2015, "title": "director"}
                ),
                "DIRECTS",
                "Nord",
                attributes={"since": 2015, "title": "director"},
            )
        ],
        reference_time=REF,
    )
    assert res.facts[0].attributes == {"since": 2015, "title": "director"}
    mira = closed.get_entity(group, "Mira")
    assert mira is not None
    assert mira.attributes == {"since": 2015, "title": "director"}


def test_removal_from_another_group_is_not_found(memory: timestone.Memory, group: str) -> None:
    res = memory.add_facts(group, [FactInput("A", "R", "B")], reference_time=REF)
    other = "x-" + uuid.uuid4().hex[:10]
    with pytest.raises(NotFound, match=other):
        memory.remove_episode(other, res.episode.id)
    assert len(memory.facts(group)) == 1


def test_an_edge_type_checks_its_endpoints_types_by_name(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    # a list given as a tuple or a list alike; a type is one of them, not a part of one
    edge = EdgeType("WORKS_AT", source_types=["Person"], target_types=("Company",))  # pyright: ignore[reportArgumentType]
    assert (edge.source_types, edge.target_types) == (("Person",), ("Company",))
    mem = timestone.Memory.open(memory.dsn, ontology=Ontology(edge_types=[edge]))
    with pytest.raises(OntologyViolation, match=r"source type 'son' is not one of \['Person'\]"):
        mem.add_facts(
            group,
            [FactInput(EntityInput("Bo", labels=("son",)), "WORKS_AT", "Acme")],
            reference_time=REF,
        )
    assert _rows(dsn, group) == 0
    mem.close()


def test_removing_twice(memory: timestone.Memory, group: str) -> None:
    res = memory.add_facts(group, [FactInput("A", "R", "B")], reference_time=REF)
    memory.remove_episode(group, res.episode.id)
    with pytest.raises(AlreadyRemoved, match="was removed"):
        memory.remove_episode(group, res.episode.id)


@pytest.mark.parametrize("bad", ["not-a-uuid", 12, None])
def test_episode_id_must_be_a_uuid(memory: timestone.Memory, group: str, bad: Any) -> None:
    with pytest.raises(InvalidInput, match="episode_id"):
        memory.remove_episode(group, bad)


def test_rollback_to_the_future(memory: timestone.Memory, dsn: str, group: str) -> None:
    memory.add_facts(group, [FactInput("A", "R", "B")], reference_time=REF)
    before = _rows(dsn, group)
    with pytest.raises(InvalidPeriod, match="future"):
        memory.rollback(group, to=datetime.now(UTC) + timedelta(hours=1))
    with pytest.raises(NaiveDatetime):
        memory.rollback(group, to=datetime(2020, 1, 1))
    assert _rows(dsn, group) == before


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: FactInput("A\x00", "R", "B"), "NUL"),
        (lambda: FactInput("A", "R", "B", valid_at=datetime(2020, 1, 1)), "naive"),
        (lambda: FactInput("A", "R", 7), "names or EntityInput"),  # type: ignore[arg-type]
        (lambda: EntityInput("A", labels="Person"), "labels"),  # type: ignore[arg-type]
        (lambda: EntityInput(""), "empty"),
        # an ontology of the wrong shape is refused where it is written, not at a write
        (
            lambda: EdgeType("WORKS_AT", source_types="Person"),  # pyright: ignore[reportArgumentType]
            "source_types of edge type WORKS_AT must be a list of entity type names, got str",
        ),
        (
            lambda: EdgeType("WORKS_AT", target_types=["Company", 5]),  # pyright: ignore[reportArgumentType]
            "an entity type name of target_types of edge type WORKS_AT must be a string",
        ),
        (
            lambda: EntityType("Robot", attributes=dict),  # pyright: ignore[reportArgumentType]
            "attributes of entity type Robot must be a pydantic model class or None, got dict",
        ),
        (
            lambda: EdgeType("R", attributes=Role(since=1, title="x")),  # type: ignore[arg-type]
            "attributes of edge type R must be a pydantic model class or None, got Role",
        ),
        (
            lambda: EntityType("P", description=5),  # pyright: ignore[reportArgumentType]
            "description of entity type P must be a string",
        ),
        (
            lambda: Ontology(entity_types={"Person": Role}),  # type: ignore[arg-type]
            "entity_types must be a list of EntityType objects, got dict",
        ),
        (
            lambda: Ontology(edge_types=["WORKS_AT"]),  # type: ignore[list-item]
            r"edge_types must be a list of EdgeType objects, got an item of type str: "
            r"write EdgeType\('WORKS_AT', ...\)",
        ),
        (
            lambda: Ontology([EntityType("Person"), EntityType("Person", attributes=Role)]),
            "two entity types are named Person: declare each type once",
        ),
        (lambda: Ontology(closed="no"), "closed must be True or False, got str"),  # type: ignore[arg-type]
    ],
)
def test_inputs_check_themselves(build: Any, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        build()


@pytest.mark.parametrize(
    ("error", "lost"),
    [
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (psycopg.errors.AdminShutdown("terminating connection"), True),
        (psycopg.errors.TooManyConnections("too many clients"), True),
        (psycopg.errors.ConnectionFailure("connection failure"), True),
        (psycopg.errors.ProgramLimitExceeded("string is too long for tsvector"), False),
        (psycopg.errors.QueryCanceled("canceling statement due to statement timeout"), False),
        (psycopg.errors.ObjectNotInPrerequisiteState("not loaded"), False),
    ],
)
def test_only_a_lost_connection_is_reported_as_one(error: psycopg.Error, lost: bool) -> None:
    """psycopg files a statement over a limit (a ``tsvector`` over 1 MB) and a statement
    timeout under ``OperationalError`` with a dropped connection: only the second is
    ``ConnectionFailed``."""
    from timestone.db._database_async import wrap_db_error

    wrapped = wrap_db_error(error, "adding facts")
    assert isinstance(wrapped, timestone.errors.ConnectionFailed) is lost
    assert isinstance(wrapped, timestone.errors.DatabaseError)
    assert str(wrapped).startswith("adding facts: ")
    if isinstance(error, psycopg.errors.ProgramLimitExceeded):
        assert "too large" in str(wrapped)
        assert "tsvector" in str(wrapped)


class Joined(pydantic.BaseModel):
    since: datetime


def test_a_declared_datetime_attribute_is_stored_as_the_model_makes_it(
    dsn: str, group: str
) -> None:
    """JSON has no datetime: undeclared, one is refused (``test_bad_facts``); declared, the
    ontology's model converts it, and that is what the fact and the episode's record of
    the call hold."""
    onto = Ontology(
        entity_types=[EntityType("Person", attributes=Role)],
        edge_types=[EdgeType("JOINED", attributes=Joined)],
    )
    with timestone.Memory.open(dsn, ontology=onto) as mem:
        since = datetime(2019, 3, 1, 9, 30, tzinfo=UTC)
        res = mem.add_facts(
            group,
            [
                FactInput(
                    EntityInput(
                        "Ann", labels=("Person",), attributes={"since": 2019, "title": "x"}
                    ),
                    "JOINED",
                    "Acme",
                    attributes={"since": since},
                )
            ],
            reference_time=REF,
        )
        assert [f.attributes for f in res.facts] == [{"since": "2019-03-01T09:30:00Z"}]
        ann = mem.get_entity(group, "Ann")
        assert ann is not None
        assert ann.attributes == {"since": 2019, "title": "x"}
        assert '"since": "2019-03-01T09:30:00+00:00"' in res.episode.content


def _json_of(chars: int) -> dict[str, str]:
    """An attributes mapping whose JSON text (``json.dumps``) is ``chars`` characters."""
    return {"k": "x" * (chars - len('{"k": ""}'))}


LIMIT = MAX_ATTRIBUTES_CHARS


OVERSIZED: list[tuple[Callable[[timestone.Memory, str], object], str]] = [
    (
        lambda m, g: m.add_facts(
            g, [FactInput("A", "R", "B", attributes=_json_of(LIMIT + 1))], reference_time=REF
        ),
        r"attributes of R is 100,001 characters of JSON; the limit is 100,000",
    ),
    (
        lambda m, g: m.add_facts(
            g,
            [FactInput(EntityInput("A", attributes=_json_of(LIMIT + 1)), "R", "B")],
            reference_time=REF,
        ),
        r"attributes of Entity 'A' is 100,001 characters of JSON",
    ),
    (
        lambda m, g: m.add_document(
            g, "u://a", "Ada met Bo.", reference_time=REF, metadata=_json_of(LIMIT + 1)
        ),
        r"document metadata is 100,001 characters of JSON; the limit is 100,000",
    ),
    (
        lambda m, g: m.graph_upsert(
            g, entities=[{"name": "Ada", "attributes": _json_of(5 * LIMIT)}]
        ),
        r"attributes of Entity 'Ada' is 500,000 characters of JSON",
    ),
]


OTHER_BAD: list[tuple[Callable[[timestone.Memory, str], object], str]] = [
    (
        lambda m, g: m.add_document(
            g,
            "u://a",
            "Ada met Bo.",
            reference_time=REF,
            extract="no",  # pyright: ignore[reportArgumentType]
        ),
        "extract must be True or False, got 'no'",
    ),
    (
        lambda m, g: m.add_document(
            g, "u://a", "Ada met Bo.", reference_time=REF, max_chunk_chars=0
        ),
        "max_chunk_chars must be an integer of at least 100, got 0",
    ),
    (
        lambda m, g: m.add_document(
            g, "u://a", "Ada met Bo.", reference_time=REF, max_chunk_chars=True
        ),
        "max_chunk_chars must be an integer of at least 100, got True",
    ),
    (
        lambda m, g: m.add_document(
            g, "u://a", "Ada met Bo.", reference_time=REF, metadata={"at": [REF]}
        ),
        r"document metadata\['at'\]\[0\] is a datetime",
    ),
    (
        lambda m, g: m.add_document(
            g, "u://a", "Ada met Bo.", reference_time=REF, metadata={"n": float("inf")}
        ),
        r"document metadata\['n'\] is inf",
    ),
    (
        lambda m, g: m.graph_upsert(g, entities=[{"name": "Ada", "attributes": {"k": {1}}}]),
        r"attributes of node 'Ada'\['k'\] is a set",
    ),
    (
        lambda m, g: m.graph_nodes(g, attributes={"k": float("nan")}),
        r"attributes\['k'\] is nan",
    ),
    (lambda m, g: m.export_group(g, 5), "out must be writable"),  # pyright: ignore[reportArgumentType]
    (
        lambda m, g: m.export_group(g, io.BytesIO()),  # pyright: ignore[reportArgumentType]
        r"out is a binary stream \(BytesIO\); the export is text: open the file with 'w'",
    ),
    (
        lambda m, g: m.add_document(g, "u://a", "Ada met Bo.", reference_time=REF, metadata="x"),  # pyright: ignore[reportArgumentType]
        r"document metadata must be a mapping \(a dict\), got str",
    ),
    (
        lambda m, g: m.graph_upsert(g, entities="Ada"),  # pyright: ignore[reportArgumentType]
        "entities must be a list of EntityInput records or dicts, got str",
    ),
    (
        lambda m, g: m.graph_upsert(g, entities=["Ada"]),  # pyright: ignore[reportArgumentType]
        r"entities\[0\] must be an EntityInput or a dict of its fields, got str: 'Ada'",
    ),
    (
        lambda m, g: m.graph_upsert(g, entities=[{"name": "Ada"}, {"name": "Bo", "group_id": "x"}]),
        r"entities\[1\] \{'name': 'Bo', 'group_id': 'x'\} is malformed: group_id: Unexpected",
    ),
    (
        lambda m, g: m.graph_upsert(g, entities=[{"name": "Ada", "entity_type": "Person"}]),
        r"entities\[0\] .* is malformed: entity_type: Unexpected keyword argument",
    ),
    (
        lambda m, g: m.graph_upsert(g, chunks=None),  # pyright: ignore[reportArgumentType]
        "chunks must be a list of GraphChunk records, got NoneType",
    ),
    (
        lambda m, g: m.graph_upsert(g, relations=5),  # pyright: ignore[reportArgumentType]
        "relations must be a list of GraphRelation records, got int",
    ),
    (
        lambda m, g: m.graph_upsert(g, entities=[{"name": "Ada"}], vectors="Ada"),  # pyright: ignore[reportArgumentType]
        r"vectors must be a mapping \(a dict\), got str",
    ),
    (
        lambda m, g: m.graph_upsert(g, entities=[{"name": "Ada"}], vectors=""),  # pyright: ignore[reportArgumentType]
        r"vectors must be a mapping \(a dict\), got str",
    ),
    (
        lambda m, g: m.graph_retract(g, edges=None),  # pyright: ignore[reportArgumentType]
        "edges must be a list of edge ids, got NoneType",
    ),
    (
        lambda m, g: m.graph_edges(g, skip_relations=None),  # pyright: ignore[reportArgumentType]
        "skip_relations must be a list of relation names, got NoneType",
    ),
    (
        lambda m, g: m.graph_edges(g, skip_relations=["\ud800"]),
        "must be an identifier",
    ),
    (
        lambda m, g: m.import_group(5, group_id=g),  # pyright: ignore[reportArgumentType]
        "lines must be an iterable of text lines",
    ),
    (
        lambda m, g: m.import_group([b'{"kind": "header"}'], group_id=g),  # pyright: ignore[reportArgumentType]
        "line 1 is bytes, not text: open the export in text mode",
    ),
    (
        lambda m, g: m.episodes(g, ids=0),  # pyright: ignore[reportArgumentType]
        "ids must be a list of episode ids, got int",
    ),
    (
        lambda m, g: m.add_facts(g, ["Ada"], reference_time=REF),  # pyright: ignore[reportArgumentType]
        "each fact must be a FactInput or a dict of its fields, got str: 'Ada'",
    ),
]


@pytest.mark.parametrize(
    ("call", "message"),
    OTHER_BAD + OVERSIZED,
    ids=[
        "extract str",
        "chunk 0",
        "chunk True",
        "metadata datetime",
        "metadata inf",
        "node set",
        "nodes NaN",
        "sink",
        "binary sink",
        "metadata str",
        "nodes str",
        "node str",
        "node unknown key",
        "node entity_type",
        "chunks None",
        "relations int",
        "vectors str",
        "vectors empty str",
        "edges None",
        "skip None",
        "skip surrogate",
        "lines int",
        "line bytes",
        "episode ids int",
        "fact str",
        # a fact or entity row carries its attributes into every version and every
        # result that holds it: over 100,000 characters of JSON are refused, whole
        "oversized fact attributes",
        "oversized entity attributes",
        "oversized document metadata",
        "oversized graph node",
    ],
)
def test_other_bad_input_names_what_was_wrong(
    memory: timestone.Memory,
    dsn: str,
    group: str,
    call: Callable[[timestone.Memory, str], object],
    message: str,
) -> None:
    with pytest.raises(InvalidInput, match=message) as caught:
        call(memory, group)
    assert len(str(caught.value)) < 400
    assert _rows(dsn, group) == 0


def test_an_integer_attribute_is_stored_up_to_what_postgres_holds(
    memory: timestone.Memory, group: str
) -> None:
    # in a process that writes integers of any length (Python's default stops at 4,300
    # digits: refused above); Postgres's numeric holds 131,072 digits before the point
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        long = 10**5000 + 7
        memory.add_facts(
            group,
            [{"source": "A", "relation": "R", "target": "B", "attributes": {"k": long}}],
            reference_time=REF,
        )
        (fact,) = memory.facts(group, source="A")
        assert fact.attributes["k"] == long
        too_long = {"source": "C", "relation": "R", "target": "D", "attributes": {"k": 10**131072}}
        with pytest.raises(InvalidInput, match="integer of 131,073 digits, more than a Postgres"):
            memory.add_facts(group, [too_long], reference_time=REF)
        assert memory.facts(group, source="C") == []
    finally:
        sys.set_int_max_str_digits(limit)


def test_an_empty_idempotency_key_is_refused(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    # taken for "no key", it would have written under the default key without a word
    facts = [{"source": "A", "relation": "R", "target": "B"}]
    with pytest.raises(InvalidInput, match="idempotency_key is empty"):
        memory.add_facts(group, facts, reference_time=REF, idempotency_key="")
    batch = {"facts": facts, "reference_time": REF, "idempotency_key": " "}
    with pytest.raises(InvalidInput, match=r"batches\[0\]: idempotency_key is empty"):
        memory.add_fact_batches(group, [batch])
    assert _rows(dsn, group) == 0


def test_an_integer_past_a_lowered_digit_limit_is_refused(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    # Python lets a process lower its limit to 640 digits: 701 digits are then refused
    # by name, not by a ValueError from the JSON encoder
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        fact = {"source": "A", "relation": "R", "target": "B", "attributes": {"k": 10**700}}
        with pytest.raises(InvalidInput, match=r"more digits than Python writes \(640\)"):
            memory.add_facts(group, [fact], reference_time=REF)
    finally:
        sys.set_int_max_str_digits(limit)
    assert _rows(dsn, group) == 0


def test_attributes_up_to_their_size_are_stored(memory: timestone.Memory, group: str) -> None:
    most = _json_of(LIMIT)
    res = memory.add_facts(
        group,
        [FactInput(EntityInput("A", attributes=most), "R", "B", attributes=most)],
        reference_time=REF,
    )
    assert res.facts[0].attributes == most
    stored = memory.get_entity(group, "A")
    assert stored is not None
    assert stored.attributes == most
    # characters as written: 99,000 of "é" are 99,000, not their 594,000 of \u escapes
    accented = {"k": "é" * 99_000}
    res = memory.add_facts(
        group, [FactInput("C", "R", "D", attributes=accented)], reference_time=REF
    )
    assert res.facts[0].attributes == accented


def test_attributes_past_their_size_once_their_model_converts_them(
    closed: timestone.Memory, dsn: str, group: str
) -> None:
    # what is measured is what would be stored: the model's output, not the input
    fact = FactInput("A", "DIRECTS", "B", attributes={"since": 1, "title": "t" * LIMIT})
    with pytest.raises(InvalidInput, match="attributes of DIRECTS is 100,0"):
        closed.add_facts(group, [fact], reference_time=REF)
    assert _rows(dsn, group) == 0


def test_attributes_nested_too_deep_are_named_briefly(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    nested: object = 1
    for _ in range(1000):
        nested = {"a": nested}
    with pytest.raises(InvalidInput, match="is nested deeper than 64 levels") as caught:
        memory.add_facts(
            group, [FactInput("A", "R", "B", attributes={"k": nested})], reference_time=REF
        )
    assert str(caught.value).startswith("attributes of R['k']['a']")
    assert len(str(caught.value)) < 200
    assert _rows(dsn, group) == 0


HUGE = "x" * 100_000


HUGE_BAD: list[tuple[Callable[[timestone.Memory, str], object], str]] = [
    (lambda m, g: m.search(g, "Ada", limit=HUGE), "limit must be an integer"),  # pyright: ignore[reportArgumentType]
    (lambda m, g: m.search(g, "Ada", scopes=[HUGE]), "unknown search scope"),
    (lambda m, g: m.search(g, "Ada", reranker=HUGE), "unknown reranker"),
    (lambda m, g: m.context(g, "Ada", token_budget=HUGE), "token_budget must be"),  # pyright: ignore[reportArgumentType]
    (lambda m, g: m.episodes(g, limit=HUGE), "limit must be an integer"),  # pyright: ignore[reportArgumentType]
    (lambda m, g: m.search_items(g, ("n",), offset=HUGE), "offset must be"),  # pyright: ignore[reportArgumentType]
    (lambda m, g: m.graph_edges(g, depth=HUGE), "depth must be"),  # pyright: ignore[reportArgumentType]
    (lambda m, g: m.add_facts(g, [HUGE], reference_time=REF), "each fact must be"),  # pyright: ignore[reportArgumentType]
]


@pytest.mark.parametrize(
    ("call", "named"),
    HUGE_BAD,
    ids=["limit", "scope", "reranker", "budget", "episodes", "offset", "depth", "fact"],
)
def test_a_huge_bad_value_is_named_not_echoed_whole(
    memory: timestone.Memory,
    dsn: str,
    group: str,
    call: Callable[[timestone.Memory, str], object],
    named: str,
) -> None:
    """An error names the parameter and shows the start of the value, not 100,000
    characters of it."""
    with pytest.raises(InvalidInput, match=named) as caught:
        call(memory, group)
    assert "xxxx" in str(caught.value)
    assert len(str(caught.value)) < 400
    assert _rows(dsn, group) == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pool_size": "8"}, "pool_size must be an integer of at least 1, got '8'"),
        ({"pool_size": 0}, "pool_size must be an integer of at least 1, got 0"),
        ({"ontology": "closed"}, "ontology must be a timestone.Ontology or None, got str"),
        ({"communities": "sometimes"}, "communities must be one of"),
        # a model's name where the model goes
        (
            {"llm": "gpt-4.1-mini"},
            r"llm must be a timestone.LLM such as OpenAICompatibleLLM\(client=..., model=...\), "
            "got str 'gpt-4.1-mini' without complete and acomplete",
        ),
        # a truthy string would re-embed every row of every group
        ({"reembed": "no"}, "reembed must be True or False, got str"),
    ],
)
def test_bad_settings_of_open_are_refused(
    fresh_dsn: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        timestone.Memory.open(fresh_dsn, **kwargs)
    with psycopg.connect(fresh_dsn) as conn:
        row = conn.execute("SELECT to_regclass('timestone.meta')").fetchone()
    assert row == (None,)  # refused before the database was touched


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        # ``open(os.environ.get("DATABASE_URL", ""))`` must not start a server of its own
        ({"dsn": ""}, "dsn must be a connection string .* or None for the embedded server, got an"),
        ({"dsn": "  "}, "got an empty string"),
        ({"dsn": 5432}, "dsn must be a connection string .*, got int"),
        ({"data_dir": 5}, "data_dir must be a path, got int"),
        ({"data_dir": "/tmp/a\x00b"}, "data_dir contains a NUL byte"),
    ],
)
def test_where_to_connect_is_checked_before_anything_starts(
    tmp_path: Any, kwargs: dict[str, Any], message: str
) -> None:
    kwargs.setdefault("data_dir", tmp_path / "data")
    with pytest.raises(InvalidInput, match=message):
        timestone.Memory.open(**kwargs)
    assert not (tmp_path / "data").exists()


def test_the_model_of_an_open_memory_is_checked_when_set(memory: timestone.Memory) -> None:
    with pytest.raises(InvalidInput, match=r"llm must be a timestone\.LLM .* got object"):
        memory.llm = object()
    assert memory.llm is None


class Founding(pydantic.BaseModel):
    founded: datetime | None = None
    # read from either key, as a model written for several sources declares it
    closed: datetime | None = pydantic.Field(
        default=None, validation_alias=pydantic.AliasChoices("closed", "closed_on")
    )
    opened: list[datetime] = pydantic.Field(default_factory=list[datetime])
    staff: int | None = None


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        (
            {"founded": "1998"},
            "attributes of Company 'Acme': founded: '1998' is a number, not a date: read as "
            "seconds since 1970 it would be 1970-01-01T00:33:18+00:00; write an ISO 8601 date "
            "such as 2019-03-01",
        ),
        (
            {"founded": 1998, "staff": "120"},
            "attributes of Company 'Acme': founded: 1998 is a number, not a date: read as "
            "seconds since 1970 it would be 1970-01-01T00:33:18+00:00; write an ISO 8601 date "
            "such as 2019-03-01",
        ),
        (
            {"closed_on": 2009},
            "attributes of Company 'Acme': closed_on: 2009 is a number, not a date: read as "
            "seconds since 1970 it would be 1970-01-01T00:33:29+00:00; write an ISO 8601 date "
            "such as 2019-03-01",
        ),
        (
            {"opened": ["2001-05-01", "1700000000"]},
            "attributes of Company 'Acme': opened.1: '1700000000' is a number, not a date: "
            "read as seconds since 1970 it would be 2023-11-14T22:13:20+00:00; write an ISO "
            "8601 date such as 2019-03-01",
        ),
    ],
)
def test_a_number_for_a_declared_date_is_refused_not_read_as_seconds_since_1970(
    dsn: str, group: str, attributes: dict[str, Any], message: str
) -> None:
    """pydantic's lax mode reads a number, or a string of digits, given for a datetime as
    seconds since 1970: the year 1998 would be stored as 1970-01-01T00:33:18Z. It is refused,
    naming the attribute, and nothing is written; the model's other conversions stand."""
    onto = Ontology(entity_types=[EntityType("Company", attributes=Founding)])
    with timestone.Memory.open(dsn, ontology=onto) as mem:
        acme = EntityInput("Acme", labels=("Company",), attributes=attributes)
        with pytest.raises(OntologyViolation) as caught:
            mem.add_facts(group, [FactInput("Ada", "WORKS_AT", acme)], reference_time=REF)
        assert str(caught.value) == message
        assert _rows(dsn, group) == 0
        good = {"founded": "1998-01-01", "staff": "120"}
        acme = EntityInput("Acme", labels=("Company",), attributes=good)
        mem.add_facts(group, [FactInput("Ada", "WORKS_AT", acme)], reference_time=REF)
        stored = mem.get_entity(group, "Acme")
        assert stored is not None
        assert stored.attributes == {"founded": "1998-01-01T00:00:00", "staff": 120}

"""Bad input gets a clear error naming what was wrong, and writes nothing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pydantic
import pytest

import timestone
from timestone import EdgeType, EntityInput, EntityType, FactInput, Ontology
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
    """psycopg files a statement over a limit (a ``tsvector`` over 1 MB, an episode too
    large to index) and a statement timeout under ``OperationalError`` with a dropped
    connection: only the second is ``ConnectionFailed``."""
    from timestone._aio._db import wrap_db_error

    wrapped = wrap_db_error(error, "adding facts")
    assert isinstance(wrapped, timestone.errors.ConnectionFailed) is lost
    assert isinstance(wrapped, timestone.errors.DatabaseError)
    assert str(wrapped).startswith("adding facts: ")
    if isinstance(error, psycopg.errors.ProgramLimitExceeded):
        assert "too large" in str(wrapped)
        assert "tsvector" in str(wrapped)

"""Writers that meet on an entity without sharing its spelling, or through the slots a new
version of a document reopens: each round races two writers, and the graph must be the
one either order gives."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, LiteralString

import psycopg

import timestone
from timestone import EdgeType, FactInput, Ontology
from timestone.llm import ReplayTransport, chat_completion, replay_llm

ROUNDS = 10
# a stored spelling, then another the resolution joins to it (one letter more)
PERSON = ("Maximilian Alexander Featherstonehaugh", "Maximillian Alexander Featherstonehaugh")
COMPANY = (
    "International Business Machines Corporation",
    "International Business Machines Corporations",
)


def _year(y: int) -> datetime:
    return datetime(y, 1, 1, tzinfo=UTC)


def _race(*writers: Callable[[], object]) -> None:
    """Run ``writers`` at once; raise the first error any of them raised."""
    barrier = threading.Barrier(len(writers))
    errors: list[BaseException] = []

    def run(write: Callable[[], object]) -> None:
        try:
            barrier.wait()
            write()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a writer is stuck"
    if errors:
        raise errors[0]


def _current(dsn: str, group: str, sql: LiteralString) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, (group,)).fetchall()


def test_two_spellings_of_stored_names_add_one_fact(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """Each writer spells both ends its own way, so no name lock is shared: the writers meet
    on the entities their names resolve to."""
    sentence = "Max knows IBM."
    spellings = [(PERSON[0], COMPANY[0]), (PERSON[1], COMPANY[1])]
    for r in range(ROUNDS):
        g = f"{group}-{r}"
        memory.add_facts(
            g, [FactInput(PERSON[0], "WORKS_AT", COMPANY[0])], reference_time=_year(2020)
        )
        _race(
            *(
                lambda person=person, company=company, g=g: memory.add_facts(
                    g,
                    [FactInput(person, "KNOWS", company, fact=sentence)],
                    reference_time=_year(2021),
                )
                for person, company in spellings
            )
        )
        knows = _current(
            dsn,
            g,
            "SELECT cardinality(episodes) FROM timestone.facts"
            " WHERE group_id = %s AND relation = 'KNOWS' AND expired_at IS NULL",
        )
        assert knows == [(2,)], f"round {r}: one fact, said by both episodes"
        names = _current(
            dsn,
            g,
            "SELECT name FROM timestone.entities"
            " WHERE group_id = %s AND expired_at IS NULL ORDER BY name",
        )
        assert names == [(COMPANY[0],), (PERSON[0],)]


def _extraction(entities: list[str], facts: list[dict[str, Any]]) -> dict[str, Any]:
    blank: dict[str, Any] = {"valid_at": None, "invalid_at": None, "attributes": []}
    reply: dict[str, Any] = {
        "entities": [{"name": n, "type": "Entity", "attributes": []} for n in entities],
        "facts": [blank | f for f in facts],
    }
    return {"step": "extraction", "body": chat_completion(json.dumps(reply))}


def test_a_new_document_version_and_a_write_on_the_slot_it_reopens(dsn: str, group: str) -> None:
    """Version 1 says Mira works at Nord from 2020; version 2 says nothing of it, while a
    write says she works at Sud from 2022: in either order, Sud alone, and Mira held."""
    transport = ReplayTransport()
    ontology = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
    with timestone.Memory.open(
        dsn, ontology=ontology, llm=replay_llm(transport, backoff=0.0), warm=False
    ) as mem:
        for r in range(ROUNDS):
            g = f"{group}-{r}"
            nord = {
                "source": "Mira",
                "relation": "WORKS_AT",
                "target": "Nord",
                "fact": "Mira works at Nord.",
            }
            transport.extend(
                [
                    _extraction(["Mira", "Nord"], [nord | {"valid_at": "2020-01-01T00:00:00Z"}]),
                    _extraction([], []),
                ]
            )
            mem.add_document(g, "doc://cv", "Mira works at Nord.", reference_time=_year(2020))
            _race(
                lambda g=g: mem.add_document(
                    g, "doc://cv", "A revised curriculum vitae.", reference_time=_year(2021)
                ),
                lambda g=g: mem.add_facts(
                    g,
                    [FactInput("Mira", "WORKS_AT", "Sud", valid_at=_year(2022))],
                    reference_time=_year(2022),
                ),
            )
            periods = [
                (f.target, f.valid_at, f.invalid_at)
                for f in mem.facts(g, source="Mira", relation="WORKS_AT", valid_at=None)
            ]
            assert periods == [("Sud", _year(2022), None)], f"round {r}"
            assert mem.get_entity(g, "Mira") is not None, f"round {r}"
        transport.check()

"""Purging an episode erases it from history: every version it shaped, not only those it
alone supported, and nothing of it comes back through a rollback."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any, LiteralString

import psycopg
import pytest
from psycopg import sql

import timestone
from timestone import EdgeType, EntityInput, FactInput, Ontology
from timestone.write import _purge as purge
from timestone.write._date_fight import compute_slot

VERSIONED = ("episodes", "entities", "mentions", "assertions", "facts", "communities", "items")
# words only the purged episode says: its sentence, an attribute value, an entity summary
SECRETS = ("zanzibar", "quokka", "marzipan")
ONTOLOGY = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])


def _year(year: int) -> datetime:
    return datetime(year, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def mem(dsn: str) -> Iterator[timestone.Memory]:
    memory = timestone.Memory.open(dsn, ontology=ONTOLOGY)
    yield memory
    memory.close()


@pytest.fixture
async def amem(dsn: str) -> AsyncIterator[timestone.AsyncMemory]:
    memory = await timestone.AsyncMemory.open(dsn, ontology=ONTOLOGY)
    yield memory
    await memory.close()


def _traces(dsn: str, group: str, episode_id: uuid.UUID) -> dict[str, int]:
    """Rows of each versioned table, history included, that hold the episode's id or one
    of its secret words anywhere (read by the owner, past row level security)."""
    found: dict[str, int] = {}
    with psycopg.connect(dsn) as conn:
        for table in VERSIONED:
            row = conn.execute(
                sql.SQL(
                    "SELECT count(*) FROM timestone.{} AS x WHERE x.group_id = %s"
                    " AND (x::text LIKE %s OR x::text ~* %s)"
                ).format(sql.Identifier(table)),
                (group, f"%{episode_id}%", "|".join(SECRETS)),
            ).fetchone()
            assert row is not None
            if row[0]:
                found[table] = row[0]
    return found


def _purge_as_before_replays(dsn: str, group: str, episode_id: uuid.UUID, recorded: bool) -> None:
    """Erase a removed episode the way a purge did before history was replayed: its rows
    and the fact versions it alone supported, leaving the versions it shared."""
    params = {"g": group, "e": episode_id}
    statements: list[LiteralString] = [
        "DELETE FROM timestone.facts WHERE group_id = %(g)s AND episodes = ARRAY[%(e)s::uuid]",
        "DELETE FROM timestone.assertions WHERE group_id = %(g)s AND episode_id = %(e)s",
        "DELETE FROM timestone.mentions WHERE group_id = %(g)s AND episode_id = %(e)s",
        "DELETE FROM timestone.episodes WHERE group_id = %(g)s AND id = %(e)s",
    ]
    if recorded:
        statements.append(
            "INSERT INTO timestone.purges (group_id, episode_id, purged_at, rows_erased)"
            " VALUES (%(g)s, %(e)s, now(), 4)"
        )
    with psycopg.connect(dsn) as conn:
        for statement in statements:
            conn.execute(statement, params)


def _secret() -> list[FactInput]:
    return [
        FactInput(
            EntityInput("Ann", summary="Ann ate marzipan."),
            "KNOWS",
            "Bob",
            fact="Ann knows Bob from Zanzibar.",
            attributes={"where": "quokka"},
        )
    ]


def _plain() -> list[FactInput]:
    return [FactInput("Ann", "KNOWS", "Bob", fact="Ann knows Bob.")]


def _shape(mem: timestone.Memory, group: str, **kw: Any) -> set[tuple[Any, ...]]:
    return {
        (f.source, f.relation, f.target, f.valid_at, f.invalid_at, f.fact, len(f.episodes))
        for f in mem.facts(group, valid_at=None, **kw)
    }


def _attributes(mem: timestone.Memory, group: str, **kw: Any) -> list[dict[str, Any]]:
    return [dict(f.attributes) for f in mem.facts(group, valid_at=None, **kw)]


def test_a_purge_erases_the_versions_the_episode_shared(
    mem: timestone.Memory, dsn: str, group: str
) -> None:
    secret = mem.add_facts(group, _secret(), reference_time=_year(2020))
    plain = mem.add_facts(group, _plain(), reference_time=_year(2021))
    fresh = group + "-fresh"
    mem.add_facts(fresh, _plain(), reference_time=_year(2021))
    mem.purge_episode(group, secret.episode.id)

    assert _traces(dsn, group, secret.episode.id) == {}
    # as of the moment both were held, the other episode's fact reads as if alone
    then = plain.recorded_at
    assert _shape(mem, group, as_of=then) == _shape(mem, fresh)
    assert _attributes(mem, group, as_of=then) == [{}]
    [fact] = mem.facts(group, valid_at=None, as_of=then)
    assert fact.episodes == (plain.episode.id,)
    found = mem.search(group, "Zanzibar", valid_at=None, as_of=then).facts
    assert [(f.fact, f.episodes) for f in found] == [("Ann knows Bob.", (plain.episode.id,))]
    ann = mem.get_entity(group, "Ann", as_of=then)
    assert ann is not None
    assert "marzipan" not in ann.summary
    assert _shape(mem, group) == _shape(mem, fresh)


def test_purging_every_episode_of_a_fact_leaves_no_version(
    mem: timestone.Memory, dsn: str, group: str
) -> None:
    first = mem.add_facts(group, _secret(), reference_time=_year(2020))
    second = mem.add_facts(group, _plain(), reference_time=_year(2021))
    mem.purge_episode(group, first.episode.id)
    mem.purge_episode(group, second.episode.id)
    with psycopg.connect(dsn) as conn:
        left = {
            table: conn.execute(
                sql.SQL("SELECT count(*) FROM timestone.{} WHERE group_id = %s").format(
                    sql.Identifier(table)
                ),
                (group,),
            ).fetchone()
            for table in VERSIONED
        }
    assert left == dict.fromkeys(VERSIONED, (0,))
    assert not mem.search(group, "Ann knows Bob", valid_at=None).facts
    assert not mem.search(group, "Ann knows Bob", valid_at=None, as_of=second.recorded_at).facts
    assert not mem.facts(group, valid_at=None, as_of=second.recorded_at)


def test_a_rollback_after_a_purge_brings_nothing_of_it_back(
    mem: timestone.Memory, dsn: str, group: str
) -> None:
    secret = mem.add_facts(group, _secret(), reference_time=_year(2020))
    plain = mem.add_facts(group, _plain(), reference_time=_year(2021))
    fresh = group + "-fresh"
    mem.add_facts(fresh, _plain(), reference_time=_year(2021))
    mem.purge_episode(group, secret.episode.id)
    mem.rollback(group, to=plain.recorded_at)

    assert _traces(dsn, group, secret.episode.id) == {}
    assert _shape(mem, group) == _shape(mem, fresh)
    assert _attributes(mem, group) == [{}]
    ann, alone = mem.get_entity(group, "Ann"), mem.get_entity(fresh, "Ann")
    assert ann is not None
    assert alone is not None
    assert (ann.name, ann.summary, ann.attributes) == (alone.name, alone.summary, alone.attributes)
    # rolled back to before anything was said: the purged episode's entities are gone too
    mem.rollback(group, to=secret.recorded_at)
    assert _shape(mem, group) == set()
    assert mem.get_entity(group, "Ann") is None


def test_an_end_date_only_the_purged_episode_gave_leaves_history(
    mem: timestone.Memory, group: str
) -> None:
    mem.add_facts(
        group,
        [FactInput("Ann", "WORKS_AT", "Acme", valid_at=_year(2010))],
        reference_time=_year(2010),
    )
    closing = mem.add_facts(
        group,
        [FactInput("Ann", "WORKS_AT", "SecretCo", valid_at=_year(2022))],
        reference_time=_year(2022),
    )
    fresh = group + "-fresh"
    mem.add_facts(
        fresh,
        [FactInput("Ann", "WORKS_AT", "Acme", valid_at=_year(2010))],
        reference_time=_year(2010),
    )
    mem.purge_episode(group, closing.episode.id)

    expected = _shape(mem, fresh)
    assert {(s[2], s[3], s[4]) for s in expected} == {("Acme", _year(2010), None)}
    assert _shape(mem, group, as_of=closing.recorded_at) == expected
    mem.rollback(group, to=closing.recorded_at)
    assert _shape(mem, group) == expected
    assert [f.target for f in mem.facts(group, source="Ann", valid_at=_year(2024))] == ["Acme"]


def test_history_after_a_purge_reads_as_if_the_episode_never_was(
    mem: timestone.Memory, group: str
) -> None:
    """At each moment a remaining episode was recorded, an as-of read equals the same read
    of a group that never ingested the purged one (which won a date in between)."""
    said = [
        [FactInput("Ann", "WORKS_AT", "Acme", valid_at=_year(2010))],
        [
            FactInput("Ann", "WORKS_AT", "SecretCo", valid_at=_year(2015), fact="Zanzibar."),
            FactInput("Ann", "KNOWS", "Bob", fact="Ann met Bob in Zanzibar."),
        ],
        [FactInput("Ann", "KNOWS", "Bob", fact="Ann knows Bob.")],
        [FactInput("Ann", "WORKS_AT", "Acme", valid_at=_year(2018))],
        [FactInput("Ann", "WORKS_AT", "Initech", valid_at=_year(2020))],
    ]
    results = [mem.add_facts(group, facts, reference_time=_year(2024)) for facts in said]
    fresh = group + "-fresh"
    alone = [
        mem.add_facts(fresh, facts, reference_time=_year(2024))
        for i, facts in enumerate(said)
        if i != 1
    ]
    mem.purge_episode(group, results[1].episode.id)
    kept = [r for i, r in enumerate(results) if i != 1]
    for mine, theirs in zip(kept, alone, strict=True):
        assert _shape(mem, group, as_of=mine.recorded_at) == _shape(
            mem, fresh, as_of=theirs.recorded_at
        )
    # what was held while the purged episode was the latest is what its predecessor left
    assert _shape(
        mem,
        group,
        as_of=results[2].recorded_at - (results[2].recorded_at - results[1].recorded_at) / 2,
    ) == _shape(mem, fresh, as_of=alone[0].recorded_at)
    assert _shape(mem, group) == _shape(mem, fresh)


def test_a_rollback_repairs_what_an_earlier_purge_left_in_history(
    mem: timestone.Memory, dsn: str, group: str
) -> None:
    """Rows an episode shaped that a purge made before history was replayed left behind
    (here erased by hand the way such a purge did) do not reach the current graph."""
    secret = mem.add_facts(group, _secret(), reference_time=_year(2020))
    plain = mem.add_facts(group, _plain(), reference_time=_year(2021))
    fresh = group + "-fresh"
    mem.add_facts(fresh, _plain(), reference_time=_year(2021))
    mem.remove_episode(group, secret.episode.id)
    _purge_as_before_replays(dsn, group, secret.episode.id, recorded=True)
    mem.rollback(group, to=plain.recorded_at)
    assert _shape(mem, group) == _shape(mem, fresh)
    assert _attributes(mem, group) == [{}]
    ann = mem.get_entity(group, "Ann")
    assert ann is not None
    assert "marzipan" not in ann.summary
    assert "Zanzibar" not in ann.summary


async def test_an_async_purge_erases_shared_versions(
    amem: timestone.AsyncMemory, dsn: str, group: str
) -> None:
    secret = await amem.add_facts(group, _secret(), reference_time=_year(2020))
    plain = await amem.add_facts(group, _plain(), reference_time=_year(2021))
    await amem.purge_episode(group, secret.episode.id)
    assert _traces(dsn, group, secret.episode.id) == {}
    held = await amem.facts(group, valid_at=None, as_of=plain.recorded_at)
    assert [(f.fact, f.episodes, dict(f.attributes)) for f in held] == [
        ("Ann knows Bob.", (plain.episode.id,), {})
    ]
    await amem.rollback(group, to=plain.recorded_at)
    assert _traces(dsn, group, secret.episode.id) == {}


def test_a_purge_replays_from_the_episodes_first_moment(
    mem: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history before the purged episode is unchanged, so it is not folded again: a
    purge of the latest of 40 periods folds its slot a few times, not once per period,
    and reads as a group that never had it."""
    said = [
        [
            FactInput(
                "Ann", "WORKS_AT", f"Firm {i % 7}", valid_at=datetime(2000 + i, 1, 1, tzinfo=UTC)
            )
        ]
        for i in range(40)
    ]
    results = [mem.add_facts(group, facts, reference_time=_year(2050)) for facts in said]
    fresh = group + "-fresh"
    alone = [mem.add_facts(fresh, facts, reference_time=_year(2050)) for facts in said[:-1]]
    folds: list[int] = []

    def counted(assertions: Any) -> Any:
        folds.append(len(assertions))
        return compute_slot(assertions)

    monkeypatch.setattr(purge, "compute_slot", counted)
    mem.purge_episode(group, results[-1].episode.id)
    assert 0 < len(folds) <= 3, folds
    assert _shape(mem, group) == _shape(mem, fresh)
    for mine, theirs in zip(results[:-1:13], alone[::13], strict=True):
        assert _shape(mem, group, as_of=mine.recorded_at) == _shape(
            mem, fresh, as_of=theirs.recorded_at
        )
    assert [f.target for f in mem.facts(group, source="Ann", valid_at=_year(2045))] == ["Firm 3"]


def test_a_purge_replays_all_history_when_what_is_stored_differs(
    mem: timestone.Memory, dsn: str, group: str
) -> None:
    """A purge of a later episode also repairs what is stored before it when that is not
    what the episodes give (here what a purge made before history was replayed left)."""
    secret = mem.add_facts(group, _secret(), reference_time=_year(2020))
    mem.add_facts(group, _plain(), reference_time=_year(2021))
    mem.add_facts(group, _plain(), reference_time=_year(2021), idempotency_key="again")
    later = mem.add_facts(
        group,
        [FactInput("Ann", "KNOWS", "Bob", fact="Ann knows Bob well.")],
        reference_time=_year(2022),
    )
    mem.remove_episode(group, secret.episode.id)
    _purge_as_before_replays(dsn, group, secret.episode.id, recorded=False)
    assert "facts" in _traces(dsn, group, secret.episode.id)
    mem.purge_episode(group, later.episode.id)
    assert _traces(dsn, group, secret.episode.id) == {}
    assert _attributes(mem, group) == [{}]

"""Row ids are time-ordered (version 7) UUIDs, minted by the library many at a time and
by the database's column defaults; citations take their random digits."""

from __future__ import annotations

import pickle
import time
import uuid
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql

import timestone
from timestone import FactInput as F
from timestone._results import citation_of
from timestone.write._ids import new_ids

# The version (bits 76 to 79) and variant (bits 62 and 63) fields.
_FIXED = (0xF000 << 64) | (0xC000 << 48)


def _millisecond(u: uuid.UUID) -> int:
    return u.int >> 80


def test_ids_drawn_together_are_version_7_uuids_in_order() -> None:
    before = time.time_ns() // 1_000_000
    ids = new_ids(10_000)
    after = time.time_ns() // 1_000_000
    assert len(ids) == 10_000
    assert len(set(ids)) == 10_000
    assert {u.version for u in ids} == {7}
    assert {u.variant for u in ids} == {uuid.RFC_4122}
    assert all(uuid.UUID(str(u)) == u and uuid.UUID(bytes=u.bytes) == u for u in ids[:100])
    assert ids == sorted(ids)  # as Postgres orders uuids too: byte by byte
    assert ids == sorted(ids, key=lambda u: u.bytes)
    assert all(before <= _millisecond(u) <= after for u in ids)
    # the 74 bits after the time but the version and variant are random: each is set in
    # about half of the ids
    for bit in range(80):
        if _FIXED >> bit & 1:
            continue
        share = sum(u.int >> bit & 1 for u in ids) / len(ids)
        assert 0.45 < share < 0.55, f"bit {bit} set in {share:.1%} of the ids"
    assert new_ids(0) == []


def test_ids_drawn_later_sort_after() -> None:
    first = new_ids(50)
    time.sleep(0.003)
    second = new_ids(50)
    assert max(first) < min(second)


def test_an_id_drawn_together_is_a_whole_uuid() -> None:
    # made without UUID's constructor: it must still hash, compare, pickle, refuse
    # assignment and carry is_safe like one made by it
    made = new_ids(1)[0]
    same = uuid.UUID(int=made.int)
    assert made == same
    assert hash(made) == hash(same)
    assert made.is_safe is same.is_safe
    assert pickle.loads(pickle.dumps(made)) == made
    assert {made: 1}[same] == 1
    assert sorted([same, made, uuid.UUID(int=0)])[0] == uuid.UUID(int=0)
    with pytest.raises(TypeError):
        made.int = 0  # pyright: ignore[reportAttributeAccessIssue]


def test_the_database_mints_version_7_ids(memory: timestone.Memory, dsn: str, group: str) -> None:
    """Every row version a write makes has a time-ordered id, the database's defaults
    (mentions, assertions, entities, episodes) as well as the library's."""
    memory.add_facts(
        group,
        [F("Mira", "WORKS_AT", "Acme"), F("Mira", "LIVES_IN", "Lyon")],
        reference_time=datetime(2024, 1, 1, tzinfo=UTC),
    )
    with psycopg.connect(dsn) as conn:
        for table in ("episodes", "entities", "mentions", "assertions", "facts"):
            rows = conn.execute(
                sql.SQL(
                    "SELECT id, version_id, created_at FROM timestone.{} WHERE group_id = %s"
                ).format(sql.Identifier(table)),
                (group,),
            ).fetchall()
            assert rows, table
            for ident, version_id, created_at in rows:
                assert (ident.version, version_id.version) == (7, 7), table
                for u in (ident, version_id):
                    minted = datetime.fromtimestamp(_millisecond(u) / 1000, UTC)
                    assert abs((minted - created_at).total_seconds()) < 60, table


def test_the_portable_default_is_a_version_7_uuid(memory: timestone.Memory, dsn: str) -> None:
    """``timestone.uuid_v7()``, the column default on a server without ``uuidv7()``
    (before Postgres 18), built from ``gen_random_uuid()`` and the clock."""
    del memory  # opened so that the schema is migrated
    with psycopg.connect(dsn) as conn:
        conn.execute("SET ROLE timestone_app")  # the role the library's writes run as
        before = time.time_ns() // 1_000_000
        ids = [
            row[0]
            for row in conn.execute(
                "SELECT timestone.uuid_v7() FROM generate_series(1, 2000)"
            ).fetchall()
        ]
        after = time.time_ns() // 1_000_000
    assert len(set(ids)) == 2000
    assert {u.version for u in ids} == {7}
    assert {u.variant for u in ids} == {uuid.RFC_4122}
    # the server's clock, on this machine: within a second of the test's
    assert all(before - 1000 <= _millisecond(u) <= after + 1000 for u in ids)
    for bit in range(74):  # gen_random_uuid's random bits below the version field
        if _FIXED >> bit & 1:
            continue
        share = sum(u.int >> bit & 1 for u in ids) / len(ids)
        assert 0.4 < share < 0.6, f"bit {bit} set in {share:.1%} of the ids"


def test_citations_take_the_random_digits_of_an_id() -> None:
    made = new_ids(1)[0]
    assert citation_of("fact", made) == "F-" + made.hex[-10:]
    assert citation_of("episode", made) == "E-" + made.hex[-10:]
    # an id minted before ids were time-ordered keeps the citation it had
    old = uuid.UUID("3f2b8c1e-9a4d-4e7f-b123-456789abcdef")
    assert citation_of("fact", old) == "F-3f2b8c1e9a"


def test_the_facts_of_one_write_have_distinct_citations(
    memory: timestone.Memory, group: str
) -> None:
    """The ids of one write share their first digits (the millisecond they were
    minted): a citation made of those would name every fact of the write alike."""
    memory.add_facts(
        group,
        [
            F(
                f"Member {i}",
                "BELONGS_TO",
                "Chess club",
                fact=f"Member {i} belongs to the chess club.",
            )
            for i in range(40)
        ],
        reference_time=datetime(2024, 1, 1, tzinfo=UTC),
    )
    context = memory.context(group, "Who belongs to the chess club?", token_budget=4000)
    facts = [item for item in context.items if item.kind == "fact"]
    assert len(facts) >= 20
    assert len({item.citation for item in facts}) == len(facts)
    for item in facts:
        assert item.fact_id is not None
        assert item.citation == "F-" + item.fact_id.hex[-10:]
        assert context.cite(item.citation) is item

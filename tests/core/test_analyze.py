"""Planner statistics through a load: the ANALYZE a write starts runs beside it.

The write that crosses an analysis mark returns without waiting for it, writes go on
while it runs, and closing the memory waits for it to end. Each case holds the lock
``ANALYZE`` needs on the first table it analyzes (inserts do not need it), so the
analysis is seen waiting while the writes go through.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql

import timestone
from timestone import FactInput
from timestone.db import _database as sync_db
from timestone.db import _database_async as aio_db

REF = datetime(2024, 1, 1, tzinfo=UTC)
MARK = 50
ANALYZED = ("episodes", "entities", "mentions", "assertions", "facts")


def _facts(n: int, prefix: str) -> list[FactInput]:
    return [FactInput(f"{prefix} {i}", "KNOWS", f"{prefix} {i + 1}") for i in range(n)]


def _autovacuum_off(owner: psycopg.Connection[tuple[object, ...]]) -> None:
    for table in ANALYZED:
        owner.execute(
            sql.SQL("ALTER TABLE timestone.{} SET (autovacuum_enabled = false)").format(
                sql.Identifier(table)
            )
        )


def _hold_analysis(owner: psycopg.Connection[tuple[object, ...]]) -> None:
    """No autovacuum in the way, and the lock ANALYZE takes on episodes held."""
    _autovacuum_off(owner)
    owner.commit()
    owner.execute("LOCK TABLE timestone.episodes IN SHARE UPDATE EXCLUSIVE MODE")


def _analysis_waits(dsn: str) -> bool:
    """Whether another session waits for the held lock on episodes (polled: the analysis
    connects and reaches it on its own time)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(300):
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE relation = 'timestone.episodes'::regclass"
                " AND mode = 'ShareUpdateExclusiveLock' AND NOT granted"
            ).fetchone()
            if row is not None and row[0] == 1:
                return True
            time.sleep(0.1)
    return False


def _analyzed(dsn: str) -> dict[str, bool]:
    """Each table: analyzed since it was made (``reltuples`` is -1 until then)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            table: bool(
                conn.execute(
                    "SELECT reltuples >= 0 FROM pg_class WHERE oid = %s::regclass",
                    (f"timestone.{table}",),
                ).fetchone()[0]  # type: ignore[index]
            )
            for table in ANALYZED
        }


def test_a_write_does_not_wait_for_the_analysis_it_starts(
    fresh_dsn: str, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sync_db, "_ANALYZE_FIRST", MARK)
    mem = timestone.Memory.open(fresh_dsn)
    closed = False
    try:
        with psycopg.connect(fresh_dsn) as owner:
            _hold_analysis(owner)
            done = threading.Event()
            errors: list[BaseException] = []

            def write() -> None:
                try:
                    mem.add_facts(group, _facts(MARK + 10, "Crossing"), reference_time=REF)
                    mem.add_facts(group, _facts(3, "Meanwhile"), reference_time=REF)
                except BaseException as exc:  # reported below
                    errors.append(exc)
                finally:
                    done.set()

            writer = threading.Thread(target=write)
            writer.start()
            assert done.wait(60), "a write waited for the analysis it started"
            writer.join()
            assert errors == []
            assert _analysis_waits(fresh_dsn)
            assert _analyzed(fresh_dsn) == dict.fromkeys(ANALYZED, False)
            assert len(mem.facts(group, valid_at=None)) == MARK + 10 + 3
            owner.rollback()  # the lock goes: the analysis runs
        mem.close()  # and closing waits for it
        closed = True
        assert _analyzed(fresh_dsn) == dict.fromkeys(ANALYZED, True)
    finally:
        if not closed:
            mem.close()


async def test_an_async_write_does_not_wait_for_the_analysis_it_starts(
    fresh_dsn: str, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aio_db, "_ANALYZE_FIRST", MARK)
    mem = await timestone.AsyncMemory.open(fresh_dsn)
    closed = False
    try:
        with psycopg.connect(fresh_dsn) as owner:
            _hold_analysis(owner)
            await asyncio.wait_for(
                mem.add_facts(group, _facts(MARK + 10, "Crossing"), reference_time=REF), 60
            )
            await asyncio.wait_for(
                mem.add_facts(group, _facts(3, "Meanwhile"), reference_time=REF), 60
            )
            assert await asyncio.to_thread(_analysis_waits, fresh_dsn)
            assert _analyzed(fresh_dsn) == dict.fromkeys(ANALYZED, False)
            owner.rollback()
        await mem.close()
        closed = True
        assert _analyzed(fresh_dsn) == dict.fromkeys(ANALYZED, True)
    finally:
        if not closed:
            await mem.close()


def _estimate(dsn: str, group: str) -> float:
    """The planner's estimate of the group's fact rows."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "EXPLAIN (FORMAT JSON) SELECT 1 FROM timestone.facts WHERE group_id = %s", (group,)
        ).fetchone()
    assert row is not None
    return float(row[0][0]["Plan"]["Plan Rows"])


def _reltuples(dsn: str) -> float:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT reltuples FROM pg_class WHERE oid = 'timestone.facts'::regclass"
        ).fetchone()
    assert row is not None
    return float(row[0])


def _statistics_of_one_group(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database whose statistics know one group ("known", 600 facts) and stay so, and
    marks that only the look at an unseen group reaches (at 200 facts)."""
    monkeypatch.setattr(sync_db, "_ANALYZE_FIRST", 10**9)  # the load marks never reached
    monkeypatch.setattr(sync_db, "_UNSEEN_FIRST", 200)
    with timestone.Memory.open(dsn) as mem:
        mem.add_facts("known", _facts(600, "Known"), reference_time=REF)
    with psycopg.connect(dsn, autocommit=True) as owner:
        _autovacuum_off(owner)
        _analyze(owner)


def _analyze(owner: psycopg.Connection[tuple[object, ...]]) -> None:
    for table in ANALYZED:
        owner.execute(sql.SQL("ANALYZE timestone.{}").format(sql.Identifier(table)))


def test_a_group_the_statistics_have_not_seen_is_analyzed_once_it_grows(
    fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Statistics gathered while the tables held one group estimate another at one row.
    A process that writes ``_UNSEEN_FIRST`` facts to such a group has the tables analyzed;
    one that writes as many to a group the planner knows does not."""
    _statistics_of_one_group(fresh_dsn, monkeypatch)
    assert _estimate(fresh_dsn, "unseen") < 10
    with timestone.Memory.open(fresh_dsn) as mem:  # closing waits for the analysis
        mem.add_facts("unseen", _facts(150, "Unseen"), reference_time=REF)
        assert _estimate(fresh_dsn, "unseen") < 10  # under the mark: nothing yet
        mem.add_facts("unseen", _facts(100, "Later"), reference_time=REF)
    assert _estimate(fresh_dsn, "unseen") > 100
    analyzed = _reltuples(fresh_dsn)
    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts("known", _facts(250, "More"), reference_time=REF)
    assert _reltuples(fresh_dsn) == analyzed  # the planner knew "known": no analysis


def test_the_facts_counted_per_group_are_bounded(
    fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived process that writes to many groups keeps at most ``_UNSEEN_GROUPS``
    counts: past that, counting starts over."""
    monkeypatch.setattr(sync_db, "_UNSEEN_GROUPS", 3)
    with timestone.Memory.open(fresh_dsn) as mem:
        counted: list[int] = []
        for i in range(7):
            mem.add_facts(f"g{i}", _facts(2, f"G{i}"), reference_time=REF)
            counted.append(len(mem._db._written))  # pyright: ignore[reportPrivateUsage]
        mem.add_facts("g6", _facts(2, "Again"), reference_time=REF)
        assert mem._db._written["g6"] == 4  # pyright: ignore[reportPrivateUsage]
    assert counted == [1, 2, 3, 1, 2, 3, 1]


def test_at_most_one_look_at_unseen_groups_a_minute(
    fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second unseen group crossing its mark within the minute waits: a later write
    after the minute has it analyzed."""
    _statistics_of_one_group(fresh_dsn, monkeypatch)
    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts("first", _facts(250, "First"), reference_time=REF)
        looked = mem._db._analyzing  # pyright: ignore[reportPrivateUsage]
        assert looked is not None
        looked.result()
        assert _estimate(fresh_dsn, "first") > 100
        mem.add_facts("second", _facts(250, "Second"), reference_time=REF)
        assert mem._db._analyzing is looked  # pyright: ignore[reportPrivateUsage]
        assert _estimate(fresh_dsn, "second") < 10
        monkeypatch.setattr(sync_db, "_UNSEEN_EVERY_S", 0.0)  # the minute has passed
        mem.add_facts("second", _facts(1, "Later"), reference_time=REF)
    assert _estimate(fresh_dsn, "second") > 100


def test_a_group_estimated_at_the_average_of_many_is_left_to_it(
    fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Among many small tenants a group the statistics do not list is estimated at their
    average; analyzing again would not change that, so a process does not."""
    monkeypatch.setattr(sync_db, "_ANALYZE_FIRST", 10**9)
    monkeypatch.setattr(sync_db, "_UNSEEN_FIRST", 200)
    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts("small-0", _facts(20, "Small"), reference_time=REF)
    with psycopg.connect(fresh_dsn, autocommit=True) as owner:
        _autovacuum_off(owner)
        columns = [
            row[0]
            for row in owner.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = 'timestone.facts'::regclass"
                " AND attnum > 0 AND NOT attisdropped AND attgenerated = ''"
                " AND attname NOT IN ('group_id', 'embedding') ORDER BY attnum"
            )
        ]
        owner.execute(  # 150 more tenants of 20 facts: too many to list one by one
            sql.SQL(
                "INSERT INTO timestone.facts (group_id, {cols}) SELECT 'small-' || n, {cols}"
                " FROM timestone.facts CROSS JOIN generate_series(1, 150) AS n"
            ).format(cols=sql.SQL(", ").join(map(sql.Identifier, columns)))
        )
        _analyze(owner)
    assert 10 < _estimate(fresh_dsn, "another") < 25
    analyzed = _reltuples(fresh_dsn)
    with timestone.Memory.open(fresh_dsn) as mem:
        # estimated at under a tenth of what was written, but at the average of many
        mem.add_facts("another", _facts(500, "Another"), reference_time=REF)
        assert 10 < _estimate(fresh_dsn, "another") < 50
    assert _reltuples(fresh_dsn) == analyzed

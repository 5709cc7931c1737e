"""Writes run in a pipeline: the inserts are sent without waiting, the reads wait for them.

A statement the database refuses late in the pipeline (after the write has gone on
without its result) must still undo the whole write and leave the connection usable.
Each case refuses one table's insert with a check constraint added for the test.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg import sql

import timestone
from timestone import FactInput
from timestone.errors import ConflictError

REF = datetime(2024, 1, 1, tzinfo=UTC)
TABLES = ("episodes", "entities", "mentions", "assertions", "facts")
POISON_NAME = "Poison Entity"
POISON_FACT = "Poison fact."
POISON_EPISODE = "poison episode"

# (table, the check that refuses the poisoned row); the statements go in this order except
# the entities, written last
REFUSALS = {
    "episodes": f"name <> '{POISON_EPISODE}'",
    "mentions": f"name <> '{POISON_NAME}'",
    "assertions": f"fact <> '{POISON_FACT}'",
    "facts": f"fact <> '{POISON_FACT}'",
    "entities": f"name <> '{POISON_NAME}'",
}


@pytest.fixture(scope="module")
def mem(module_dsn: str) -> Iterator[timestone.Memory]:
    m = timestone.Memory.open(module_dsn)
    yield m
    m.close()


def _counts(dsn: str, group: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return {
            t: conn.execute(
                sql.SQL("SELECT count(*) FROM timestone.{} WHERE group_id = %s").format(
                    sql.Identifier(t)
                ),
                (group,),
            ).fetchone()[0]  # type: ignore[index]
            for t in TABLES
        }


def _refuse(dsn: str, table: str, check: str | None) -> None:
    """Add (or with ``None`` drop) the test's check constraint on ``table``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        name = sql.Identifier(f"refuse_{table}")
        target = sql.SQL("timestone.{}").format(sql.Identifier(table))
        if check is None:
            conn.execute(sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(target, name))
        else:
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} CHECK ({}) NOT VALID").format(
                    target,
                    name,
                    sql.SQL(check),  # pyright: ignore[reportArgumentType]  # a constant above
                )
            )


@contextmanager
def _refused(dsn: str, table: str, caplog: pytest.LogCaptureFixture) -> Generator[None]:
    """The block's write refused by ``table``'s check (added for it, dropped after): it
    raises the refusal, once, not logged a second time as the pipeline ends."""
    _refuse(dsn, table, REFUSALS[table])
    try:
        with (
            caplog.at_level(logging.WARNING, logger="psycopg"),
            pytest.raises(ConflictError, match=f"refuse_{table}"),
        ):
            yield
    finally:
        _refuse(dsn, table, None)
    assert [r.getMessage() for r in caplog.records if r.name == "psycopg"] == []


def _poisoned() -> list[FactInput]:
    """Facts of known people, a new one, and the poisoned name and sentence."""
    return [
        FactInput("Ada", "KNOWS", "Bo", valid_at=datetime(2023, 1, 1, tzinfo=UTC)),
        FactInput("Ada", "WORKS_AT", "Acme", valid_at=datetime(2023, 6, 1, tzinfo=UTC)),
        FactInput(POISON_NAME, "KNOWS", "Ada"),
        FactInput("Bo", "KNOWS", "Cy", fact=POISON_FACT),
    ]


def _first(mem: timestone.Memory, group: str) -> None:
    mem.add_facts(
        group,
        [FactInput("Ada", "KNOWS", "Bo"), FactInput("Ada", "WORKS_AT", "Initech")],
        reference_time=REF,
    )


@pytest.mark.parametrize("table", list(REFUSALS))
def test_a_refused_insert_anywhere_in_the_pipeline_writes_nothing(
    mem: timestone.Memory,
    module_dsn: str,
    group: str,
    table: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _first(mem, group)
    before = _counts(module_dsn, group)
    with _refused(module_dsn, table, caplog):
        mem.add_facts(group, _poisoned(), reference_time=REF, name=POISON_EPISODE)
    assert _counts(module_dsn, group) == before
    assert mem.get_entity(group, POISON_NAME) is None
    # the pooled connections came back out of the failed pipeline: the same write goes in,
    # and leaves what it leaves in a group that never saw the refusal
    res = mem.add_facts(group, _poisoned(), reference_time=REF, name=POISON_EPISODE)
    assert res.created
    assert sorted(f.fact for f in res.facts) == sorted(
        ["Ada knows Bo.", "Ada works at Acme.", "Poison Entity knows Ada.", POISON_FACT]
    )
    control = group + "-control"
    _first(mem, control)
    mem.add_facts(control, _poisoned(), reference_time=REF, name=POISON_EPISODE)
    assert _counts(module_dsn, group) == _counts(module_dsn, control)
    assert _counts(module_dsn, group) != before


async def test_a_refused_insert_in_an_async_pipeline_writes_nothing(
    module_dsn: str, group: str, caplog: pytest.LogCaptureFixture
) -> None:
    amem = await timestone.AsyncMemory.open(module_dsn)
    try:
        first = [FactInput("Ada", "KNOWS", "Bo")]
        await amem.add_facts(group, first, reference_time=REF)
        before = _counts(module_dsn, group)
        with _refused(module_dsn, "facts", caplog):
            await amem.add_facts(group, _poisoned(), reference_time=REF)
        assert _counts(module_dsn, group) == before
        res = await amem.add_facts(group, _poisoned(), reference_time=REF)
        assert res.created
        assert len(res.facts) == 4
        control = group + "-control"
        await amem.add_facts(control, first, reference_time=REF)
        await amem.add_facts(control, _poisoned(), reference_time=REF)
        assert _counts(module_dsn, group) == _counts(module_dsn, control) != before
    finally:
        await amem.close()


def test_writes_send_their_statements_in_a_pipeline(
    mem: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``add_facts`` and ``add_document`` write in pipeline mode (the overlap of their
    Python work with the database's rests on it)."""
    from psycopg.pq import PipelineStatus

    from timestone.write import _ingest

    seen: list[PipelineStatus] = []
    insert_episode = _ingest.insert_episode  # pyright: ignore[reportPrivateImportUsage]

    def watched(w: Any, *args: Any) -> Any:
        seen.append(w.conn.pgconn.pipeline_status)
        return insert_episode(w, *args)

    monkeypatch.setattr(_ingest, "insert_episode", watched)
    mem.add_facts(group, [FactInput("Ada", "KNOWS", "Bo")], reference_time=REF)
    mem.add_document(group, "notes://one", "Ada met Bo in Lyon.", reference_time=REF)
    assert seen == [PipelineStatus.ON, PipelineStatus.ON]


def _bulky(count: int) -> list[FactInput]:
    """Facts whose sentences make megabytes of statements: more than a socket holds."""
    filler = " ".join(f"word{i}" for i in range(1_150))
    return [
        FactInput(f"Person {i}", "KNOWS", f"Person {i + 1}", fact=f"Person {i} knows. {filler}")
        for i in range(count)
    ]


@pytest.mark.timeout(120)
def test_a_refusal_with_megabytes_still_to_send_ends_in_the_error(
    mem: timestone.Memory, module_dsn: str, group: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The episode, the pipeline's first insert, is refused while megabytes of facts are
    still to be sent behind it: the write ends in the refusal and writes nothing. (Ending
    the aborted pipeline, a sync waited for the server's answer while the server waited
    for the rest of the statements: both, for ever.)"""
    _first(mem, group)
    before = _counts(module_dsn, group)
    with _refused(module_dsn, "episodes", caplog):
        mem.add_facts(group, _bulky(400), reference_time=REF, name=POISON_EPISODE)
    assert _counts(module_dsn, group) == before
    res = mem.add_facts(group, _bulky(400), reference_time=REF, name=POISON_EPISODE)
    assert len(res.facts) == 400


@pytest.mark.timeout(120)
async def test_an_async_refusal_with_megabytes_still_to_send_ends_in_the_error(
    module_dsn: str, group: str, caplog: pytest.LogCaptureFixture
) -> None:
    amem = await timestone.AsyncMemory.open(module_dsn)
    try:
        await amem.add_facts(group, [FactInput("Ada", "KNOWS", "Bo")], reference_time=REF)
        before = _counts(module_dsn, group)
        with _refused(module_dsn, "episodes", caplog):
            await amem.add_facts(group, _bulky(400), reference_time=REF, name=POISON_EPISODE)
        assert _counts(module_dsn, group) == before
        res = await amem.add_facts(group, _bulky(400), reference_time=REF)
        assert len(res.facts) == 400
    finally:
        await amem.close()

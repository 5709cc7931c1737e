"""Work interrupted midway: a Ctrl-C, a cancelled task, a callback that raises. What was
committed stays whole and is counted once, what was not leaves nothing, the pool keeps
serving, and the caller gets the interruption itself, not a database error."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg_pool import PoolTimeout
from test_add_episodes_failure import EPISODES, Model
from test_add_episodes_failure import _llm as scripted  # pyright: ignore[reportPrivateUsage]

import timestone
from timestone.db import _database as sync_db
from timestone.errors import ConnectionFailed
from timestone.write import _ingest_async

ADA = [{"source": "Ada", "relation": "KNOWS", "target": "Bram"}]
WHEN = datetime(2024, 1, 1, tzinfo=UTC)
ADA_TOLD, BRAM_TOLD = (str(e["content"]) for e in EPISODES[:2])


def _interrupting(at: int) -> tuple[Any, list[int]]:
    """psycopg's wait, raising ``KeyboardInterrupt`` (a Ctrl-C landing there) at its
    ``at``-th call: before the first wait of whatever round trip that is."""
    original = psycopg.Connection.wait
    calls = [0]

    def wait(
        self: psycopg.Connection[Any], gen: Generator[Any, Any, Any], *a: Any, **k: Any
    ) -> Any:
        calls[0] += 1
        if calls[0] == at:
            gen.close()
            raise KeyboardInterrupt
        return original(self, gen, *a, **k)

    return wait, calls


def test_a_ctrl_c_at_any_round_trip_leaves_the_pool_serving(
    fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever round trip of a write the Ctrl-C lands at (a transaction's start among
    them, where psycopg then counts one transaction fewer than none), the connection it
    held is not given back as it is: every later call works, and the write is whole or
    absent."""
    mem = timestone.Memory.open(fresh_dsn, pool_size=2)
    tried = 0
    try:
        for at in range(1, 12):
            group = f"ctrl-c-{at}"
            wait, calls = _interrupting(at)
            with monkeypatch.context() as patch:
                patch.setattr(psycopg.Connection, "wait", wait)
                with contextlib.suppress(KeyboardInterrupt):
                    mem.add_facts(group, ADA, reference_time=WHEN)
            if calls[0] < at:
                break  # the write made fewer round trips: each was tried
            tried = at
            for _ in range(6):  # more calls than the pool has connections
                assert len(mem.facts(group)) in (0, 1)
            mem.add_facts(group, ADA, reference_time=WHEN)
            [fact] = mem.facts(group)
            assert (fact.source, fact.target) == ("Ada", "Bram")
        assert tried > 3
    finally:
        mem.close()


def test_a_database_error_raised_while_an_interruption_unwound_is_the_interruption() -> None:
    """psycopg leaving a pipeline after a Ctrl-C raises its own error ("cannot exit
    pipeline mode while busy"): a caller that retries on ``ConnectionFailed`` would
    swallow the Ctrl-C, so the interruption is raised again."""
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise psycopg.OperationalError("cannot exit pipeline mode while busy") from None
    except psycopg.OperationalError as exc:
        exc.__context__ = exc.__context__ or KeyboardInterrupt()
        with pytest.raises(KeyboardInterrupt):
            sync_db.wrap_db_error(exc, "searching")
    plain = psycopg.OperationalError("server closed the connection unexpectedly")
    assert type(sync_db.wrap_db_error(plain, "searching")).__name__ == "ConnectionFailed"


def test_a_pool_that_gave_no_connection_says_why_it_may_be() -> None:
    waited = PoolTimeout("couldn't get a connection after 30.00 sec")
    said = sync_db.wrap_db_error(waited, "adding facts")
    assert isinstance(said, ConnectionFailed)
    assert str(said) == (
        "adding facts: couldn't get a connection after 30.00 sec: every connection of the "
        "pool was busy (open with a larger pool_size or pool_timeout), or none could be "
        "opened (the server down or refusing; the logger 'psycopg.pool' has the reasons)"
    )


def test_a_call_waits_for_a_busy_pool_as_long_as_pool_timeout_says(dsn: str, group: str) -> None:
    with timestone.Memory.open(dsn, pool_size=1, pool_timeout=0.2, warm=False) as mem:
        mem.add_facts(group, ADA, reference_time=WHEN)
        with mem.connection(group), pytest.raises(ConnectionFailed) as caught:
            mem.facts(group)  # the one connection is held by the block
        assert "couldn't get a connection after 0.20 sec" in str(caught.value)
        assert "pool_size or pool_timeout" in str(caught.value)
        # given back, it serves the next call
        assert [f.target for f in mem.facts(group)] == ["Bram"]


async def test_calls_a_write_committed_as_it_was_cancelled_are_counted_once(
    dsn: str, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task cancelled while its write commits gets ``CancelledError``, the episode
    written: the model's calls were recorded with it, and are not recorded again."""
    committed = _ingest_async.write_with_retry  # pyright: ignore[reportPrivateImportUsage]

    async def cancelled_after_commit(write: Any) -> Any:
        await committed(write)
        raise asyncio.CancelledError

    mem = await timestone.AsyncMemory.open(dsn, llm=scripted(Model(set())), infer_cardinality=False)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(_ingest_async, "write_with_retry", cancelled_after_commit)
            with pytest.raises(asyncio.CancelledError):
                await mem.add_episode(group, ADA_TOLD, reference_time=WHEN)
        assert len(await mem.episodes(group)) == 1
        assert (await mem.llm_usage(group)).calls == 1
        # the same, the write failing before its commit: the calls are recorded alone
        with monkeypatch.context() as patch:

            async def refused(write: Any) -> Any:
                raise asyncio.CancelledError

            patch.setattr(_ingest_async, "write_with_retry", refused)
            with pytest.raises(asyncio.CancelledError):
                await mem.add_episode(group, BRAM_TOLD, reference_time=WHEN)
        assert len(await mem.episodes(group)) == 1
        # its extraction and the judgement of its fact beside Ada's, recorded once
        assert (await mem.llm_usage(group)).calls == 1 + 2
    finally:
        await mem.close()


async def test_a_progress_callback_that_raises_stops_the_batch(dsn: str, group: str) -> None:
    """``on_progress`` raising is the caller stopping the batch: no episode starts after
    it, and its error is raised as it is."""
    model = Model(set())
    mem = await timestone.AsyncMemory.open(dsn, llm=scripted(model), infer_cardinality=False)
    try:

        def progress(done: int, total: int, result: timestone.IngestResult) -> None:
            raise ValueError("the caller's own")

        with pytest.raises(ValueError, match="the caller's own"):
            await mem.add_episodes(group, EPISODES, concurrency=1, on_progress=progress)
        assert model.asked == ["Ada"]
        assert len(await mem.episodes(group)) == 1
    finally:
        await mem.close()


def test_after_the_servers_connections_are_cut_one_call_fails_then_the_pool_is_whole(
    fresh_dsn: str,
) -> None:
    """Every connection the pool holds idle dies (the server restarted, a failover): the
    first call to meet one fails with ``ConnectionFailed``, and the pool checks the rest
    then, so the next calls do not each meet a dead one."""
    mem = timestone.Memory.open(fresh_dsn, pool_size=4)
    try:
        mem.add_facts("cut", ADA, reference_time=WHEN)
        with ThreadPoolExecutor(4) as run:  # the pool grows to its size
            list(run.map(mem.search, ["cut"] * 16, ["Ada"] * 16))
        with psycopg.connect(fresh_dsn, autocommit=True) as conn:
            cut = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND backend_type = 'client backend'"
            ).fetchone()
        assert cut is not None
        assert cut[0] >= 2
        failed = 0
        for _ in range(6):
            try:
                assert len(mem.facts("cut")) == 1
            except ConnectionFailed:
                failed += 1
        assert failed <= 1
    finally:
        mem.close()

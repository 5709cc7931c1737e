"""Concurrent async calls on one store, merged into batches (as LangGraph's
``AsyncBatchedBaseStore`` does).

The calls made in one turn of the event loop are queued; one task per loop runs
them: equal reads once, writes of one key in the order they were called, and
at most ``WIDTH`` calls at a time, so that 60,000 gathered calls take a few
connections of the pool, not all of them and then a timeout. A call that fails
fails alone: the others get their own results.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, Result, SearchOp

__all__ = ["WIDTH", "Merger"]

WIDTH = 4
"""Batches run at once: half the default pool of a ``Memory`` (8 connections)."""

Run = Callable[[list[Op]], Awaitable[list[Result]]]
_Call = tuple[list[Op], "asyncio.Future[list[Result]]"]


def _read_key(ops: list[Op]) -> object | None:
    """A key equal for equal one-read calls (None: the call is not one read)."""
    if len(ops) != 1 or not isinstance(ops[0], (GetOp, SearchOp, ListNamespacesOp)):
        return None
    try:
        hash(ops[0])
    except TypeError:  # a filter dict: compared by its text
        return (type(ops[0]), repr(ops[0]))
    return ops[0]


def _written(ops: list[Op]) -> set[object]:
    """The (namespace, key) pairs a call puts or deletes."""
    keys: set[object] = set()
    for op in ops:
        if isinstance(op, PutOp):
            key = (tuple(op.namespace), op.key)
            try:
                hash(key)
            except TypeError:  # an unhashable label or key: refused when the call runs
                continue
            keys.add(key)
    return keys


class Merger:
    """The queue of one event loop's calls on one store."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._queue: list[_Call] = []
        self._task: asyncio.Task[None] | None = None
        self._writes: dict[object, asyncio.Task[None]] = {}  # the last call writing a key

    async def submit(self, ops: list[Op]) -> list[Result]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[Result]] = loop.create_future()
        self._queue.append((ops, fut))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        gate = asyncio.Semaphore(WIDTH)
        running: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()
        while self._queue or running:
            if self._queue:
                calls, self._queue = self._queue, []
                for group in _merged(calls):
                    await gate.acquire()
                    keys = _written(group[-1][0])
                    before = [self._writes[k] for k in keys if k in self._writes]
                    task = loop.create_task(self._one(group, gate, before))
                    running.add(task)
                    task.add_done_callback(running.discard)
                    for k in keys:
                        self._writes[k] = task
                    task.add_done_callback(self._forget)
                await asyncio.sleep(0)  # let the calls made meanwhile join the queue
            else:
                await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)

    def _forget(self, task: asyncio.Task[None]) -> None:
        for k in [k for k, t in self._writes.items() if t is task]:
            del self._writes[k]

    async def _one(
        self, calls: list[_Call], gate: asyncio.Semaphore, before: list[asyncio.Task[None]]
    ) -> None:
        try:
            if before:  # writes of one key land in the order they were called
                await asyncio.wait(before)
            live = [c for c in calls if not c[1].done()]
            if not live:
                return
            try:
                results = await self._run(live[-1][0])
            except Exception as exc:  # the callers of this run, and no other, see it
                for _, fut in live:
                    if not fut.done():
                        fut.set_exception(exc)
                return
            for _, fut in live:  # equal reads share one result
                if not fut.done():
                    fut.set_result(results)
        finally:
            gate.release()


def _merged(calls: list[_Call]) -> list[list[_Call]]:
    """Calls that share one run: equal reads; every other call alone."""
    groups: list[list[_Call]] = []
    by_key: dict[object, list[_Call]] = {}
    for call in calls:
        key = _read_key(call[0])
        if key is None:
            groups.append([call])
        elif key in by_key:
            by_key[key].append(call)
        else:
            by_key[key] = [call]
            groups.append(by_key[key])
    return groups

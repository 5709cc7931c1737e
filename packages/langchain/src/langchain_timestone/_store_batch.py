"""Concurrent async calls on one store, merged into batches (as LangGraph's
``AsyncBatchedBaseStore`` does).

The calls made in one turn of the event loop are queued; one task per loop runs
them as one batch (one ``batch_items`` call per group: one transaction): equal
reads once, and the batches one after another, so that writes of one key land
in the order they were called and 60,000 gathered calls take one connection of
the pool at a time. A call that fails fails alone: a batch that fails is split
in two halves, run one after the other, until the call that failed is alone
(the failed batch wrote nothing, since it was one transaction per group).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from langgraph.store.base import GetOp, ListNamespacesOp, Op, Result, SearchOp

__all__ = ["Merger"]

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


def _merged(calls: list[_Call]) -> tuple[list[Op], list[list[int]]]:
    """The operations of ``calls`` in one list (equal reads once), and where each call's
    answers are in it."""
    ops: list[Op] = []
    where: list[list[int]] = []
    reads: dict[object, list[int]] = {}
    for call_ops, _ in calls:
        key = _read_key(call_ops)
        if key is not None and key in reads:
            where.append(reads[key])
            continue
        at = list(range(len(ops), len(ops) + len(call_ops)))
        ops.extend(call_ops)
        where.append(at)
        if key is not None:
            reads[key] = at
    return ops, where


class Merger:
    """The queue of one event loop's calls on one store."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._queue: list[_Call] = []
        self._task: asyncio.Task[None] | None = None

    async def submit(self, ops: list[Op]) -> list[Result]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[Result]] = loop.create_future()
        self._queue.append((ops, fut))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        while self._queue:
            calls, self._queue = self._queue, []
            await self._batch([c for c in calls if not c[1].done()])

    async def _batch(self, calls: list[_Call]) -> None:
        if not calls:
            return
        ops, where = _merged(calls)
        try:
            results = await self._run(ops)
        except Exception as exc:
            if len(calls) == 1:  # the caller of this run, and no other, sees it
                if not calls[0][1].done():
                    calls[0][1].set_exception(exc)
                return
            half = len(calls) // 2
            await self._batch(calls[:half])
            await self._batch(calls[half:])
            return
        for (_, fut), at in zip(calls, where, strict=True):
            if not fut.done():
                fut.set_result([results[i] for i in at])

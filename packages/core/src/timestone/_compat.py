"""The primitives that differ between the async code and its blocking twin.

``tools/gen_sync.py`` renames ``ALock`` to ``Lock``, ``ASemaphore`` to ``Semaphore``,
``asleep`` to ``sleep``, ``agather`` to ``gather``, ``ato_thread`` to ``to_thread``, and
``aspawn``, ``ajoin`` and ``asettle`` to ``spawn``, ``join`` and ``settle``, and the type
of what ``aspawn`` returns, ``ASpawned``, to ``Spawned``, and the type of a unit of work,
``AWork``, to ``Work``; everything else is the same code.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any, TypeVar, cast

__all__ = [
    "ALock",
    "ASemaphore",
    "ASpawned",
    "AWork",
    "Lock",
    "Semaphore",
    "Spawned",
    "Work",
    "agather",
    "ajoin",
    "asettle",
    "asleep",
    "aspawn",
    "ato_thread",
    "gather",
    "join",
    "settle",
    "sleep",
    "spawn",
    "to_thread",
]

T = TypeVar("T")

AWork = Callable[[], Awaitable[T]]  # a unit of work run again on a conflict
Work = Callable[[], T]
ALock = asyncio.Lock
Lock = threading.Lock
ASemaphore = asyncio.Semaphore
Semaphore = threading.Semaphore
sleep = time.sleep


async def asleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


async def agather(*aws: Awaitable[T]) -> list[T]:
    """Run ``aws`` side by side and wait for every one to end; then raise the error that
    came first, if one failed. Nothing is left running when it returns or raises."""
    errors: list[Exception] = []

    async def settled(aw: Awaitable[T]) -> T:
        try:
            return await aw
        except Exception as exc:
            errors.append(exc)
            raise

    results = await asyncio.gather(*(settled(aw) for aw in aws), return_exceptions=True)
    if errors:
        raise errors[0]
    return cast(list[T], results)


def gather(*results: T) -> list[T]:
    """The blocking twin of ``agather``: the calls already ran, in order, and the first
    error ended them."""
    return list(results)


async def ato_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run blocking work (starting the embedded server) off the event loop."""
    return await asyncio.to_thread(fn, *args)


def to_thread(fn: Callable[..., T], *args: Any) -> T:
    """The blocking twin of ``ato_thread``: just call it."""
    return fn(*args)


# Work that runs beside the caller's: a task on the event loop, or in the blocking twin a
# thread (a search of a large group reads one of its lists on a second connection).
# ``spawn`` starts it, ``join`` waits for its result (raising its error) and ``settle``
# waits for it to end whatever happened, its outcome left unread: what cleans up after
# it (returning its connection to the pool) must not run while it still works.


async def aspawn(fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> asyncio.Task[T]:
    return asyncio.ensure_future(fn(*args))


async def ajoin(task: asyncio.Task[T]) -> T:
    # shielded: a caller cancelled here leaves the work running, as a thread would be;
    # ``asettle`` then waits for it
    return await asyncio.shield(task)


async def asettle(task: asyncio.Task[Any]) -> None:
    try:
        await asyncio.wait([task])
    except asyncio.CancelledError:
        # cancelled again while waiting: the work is cancelled too, and still waited for
        task.cancel()
        await asyncio.wait([task])
        raise
    finally:
        if task.done() and not task.cancelled():
            task.exception()  # read, so that an error joined by no one is not reported later


_THREADS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="timestone")

ASpawned = asyncio.Task  # what aspawn and spawn return
Spawned = Future


def spawn(fn: Callable[..., T], *args: Any) -> Future[T]:
    return _THREADS.submit(fn, *args)


def join(future: Future[T]) -> T:
    return future.result()


def settle(future: Future[Any]) -> None:
    wait_futures([future])

"""The primitives that differ between the async code and its blocking twin.

``tools/gen_sync.py`` renames ``ALock`` to ``Lock``, ``ASemaphore`` to ``Semaphore``,
``asleep`` to ``sleep``, ``agather`` to ``gather`` and ``ato_thread`` to ``to_thread``;
everything else is the same code.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = [
    "ALock",
    "ASemaphore",
    "Lock",
    "Semaphore",
    "agather",
    "asleep",
    "ato_thread",
    "gather",
    "sleep",
    "to_thread",
]

T = TypeVar("T")

ALock = asyncio.Lock
Lock = threading.Lock
ASemaphore = asyncio.Semaphore
Semaphore = threading.Semaphore
sleep = time.sleep


async def asleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


async def agather(*aws: Awaitable[T]) -> list[T]:
    return list(await asyncio.gather(*aws))


def gather(*results: T) -> list[T]:
    """The blocking twin of ``agather``: the calls already ran, in order."""
    return list(results)


async def ato_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run blocking work (starting the embedded server) off the event loop."""
    return await asyncio.to_thread(fn, *args)


def to_thread(fn: Callable[..., T], *args: Any) -> T:
    """The blocking twin of ``ato_thread``: just call it."""
    return fn(*args)

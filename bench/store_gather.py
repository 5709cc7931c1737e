"""Tens of thousands of gathered async calls on one LangGraph store.

    .venv/bin/python -m bench.store_gather [--calls 60000]

LangGraph's own store tests gather 60,000 calls at once. ``TimestoneStore``
queues the calls of one turn of the event loop and lets at most a few reach
the memory at a time (``langchain_timestone._store_batch``), so the default
pool of 8 connections serves them all without a pool timeout. This run puts
``--calls`` items (``index=False``: no embedding, the cost is the database's),
then gets them back, each phase one ``asyncio.gather``, and checks every answer.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import timestone
from langchain_timestone import TimestoneStore

from ._common import cpu_pace_ms, scratch_data_dir, write_result


async def _measure(calls: int) -> dict[str, Any]:
    with scratch_data_dir() as data_dir:
        memory = await timestone.AsyncMemory.open(data_dir=data_dir)
        try:
            store = TimestoneStore(memory, group_id="bench")
            start = time.perf_counter()
            await asyncio.gather(
                *(
                    store.aput(("users", str(i % 100)), f"k{i}", {"i": i}, index=False)
                    for i in range(calls)
                )
            )
            put_s = time.perf_counter() - start
            start = time.perf_counter()
            got = await asyncio.gather(
                *(store.aget(("users", str(i % 100)), f"k{i}") for i in range(calls))
            )
            get_s = time.perf_counter() - start
        finally:
            await memory.close()
    wrong = sum(1 for i, g in enumerate(got) if g is None or g.value != {"i": i})
    if wrong:
        raise SystemExit(f"{wrong} of {calls} gets did not read back what was put")
    return {
        "calls": calls,
        "put_seconds": round(put_s, 2),
        "get_seconds": round(get_s, 2),
        "puts_per_second": round(calls / put_s),
        "gets_per_second": round(calls / get_s),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Gathered async calls on one LangGraph store.")
    parser.add_argument("--calls", type=int, default=60_000)
    args = parser.parse_args()
    pace = cpu_pace_ms()
    result = {"cpu_pace_ms": pace, **asyncio.run(_measure(args.calls))}
    print(result)
    write_result("store_gather", result)


if __name__ == "__main__":
    main()

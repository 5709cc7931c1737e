"""LangGraph's large-batch store workloads on TimestoneStore and on LangGraph's Postgres store.

    .venv/bin/python -m bench.store [--n 1000] [--m 10] [--rounds 2]

Both stores run on one embedded server, in one run, phase after phase, so that
whatever else loads the machine weighs on both. LangGraph's ``PostgresStore``
and ``AsyncPostgresStore`` (``langgraph-checkpoint-postgres``) get a database of
their own on the server; ``TimestoneStore`` a ``Memory`` or ``AsyncMemory`` on
the Timestone database. Neither embeds: the Postgres store is built without an
index, the Timestone store with ``fields=[]`` (its equivalent: nothing embedded).

The workloads are the bodies of LangGraph's store tests: ``test_large_batches``
(blocking calls from a pool of 10 threads) and ``test_large_batches_async`` (one
``asyncio.gather`` of every call): ``n * m`` rounds of put, get, list_namespaces,
search, put, delete. Before them, each store is timed on ``n * m`` puts, then as
many gets, then ``n * m / 10`` searches, each phase gathered the same way, to
give operations per second of each kind.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from langgraph.store.base import BaseStore
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore
from psycopg.conninfo import make_conninfo

import timestone
from langchain_timestone import TimestoneStore
from timestone.db._embedded import embedded_dsn

from ._common import cpu_pace_ms, scratch_data_dir, write_result

THREADS = 10  # test_large_batches' ThreadPoolExecutor


def _ns(m: int) -> tuple[str, ...]:
    return ("test", "foo", "bar", "baz", str(m % 2))


def _mixed(n: int, m: int) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """The calls of LangGraph's large-batch tests, in their order."""
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    for j in range(m):
        for i in range(n):
            calls += [
                ("put", (_ns(j), f"key{i}"), {"value": {"foo": "bar" + str(i)}}),
                ("get", (_ns(j), f"key{i}"), {}),
                ("list_namespaces", (), {"prefix": None, "max_depth": j + 1}),
                ("search", (("test",),), {}),
                ("put", (_ns(j), f"key{i}"), {"value": {"foo": "bar" + str(i)}}),
                ("delete", (_ns(j), f"key{i}"), {}),
            ]
    return calls


def _phases(n: int, m: int) -> dict[str, list[tuple[str, tuple[Any, ...], dict[str, Any]]]]:
    total = n * m
    keys = [(("bench", str(k % 100)), f"key{k}") for k in range(total)]
    return {
        "put": [("put", key, {"value": {"foo": "bar" + str(k)}}) for k, key in enumerate(keys)],
        "get": [("get", key, {}) for key in keys],
        "search": [
            ("search", (("bench", str(k % 100)),), {"limit": 10}) for k in range(total // 10)
        ],
        "mixed": _mixed(n, m),
    }


def _run_threads(store: BaseStore, calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]]) -> int:
    with ThreadPoolExecutor(max_workers=THREADS) as executor:
        futures = [executor.submit(getattr(store, name), *a, **kw) for name, a, kw in calls]
        return len([f.result() for f in futures])


async def _run_gather(
    store: BaseStore, calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]]
) -> int:
    coros: list[Awaitable[Any]] = [getattr(store, "a" + name)(*a, **kw) for name, a, kw in calls]
    return len(await asyncio.gather(*coros))


def _rate(count: int, seconds: float) -> dict[str, float]:
    return {"ops": count, "seconds": round(seconds, 3), "ops_per_s": round(count / seconds)}


@contextmanager
def _sync_stores(dsn: str, pg_dsn: str) -> Generator[dict[str, BaseStore]]:
    memory = timestone.Memory.open(dsn, pool_size=8)
    try:
        with PostgresStore.from_conn_string(pg_dsn) as postgres:
            postgres.setup()
            yield {
                "timestone": TimestoneStore(memory, group_id="bench", fields=[]),
                "postgres": postgres,
            }
    finally:
        memory.close()


def _sync_rounds(dsn: str, pg_dsn: str, n: int, m: int, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with _sync_stores(dsn, pg_dsn) as stores:
        for phase, calls in _phases(n, m).items():
            for name, store in stores.items():
                best, done = None, 0
                for _ in range(rounds):
                    start = time.perf_counter()
                    done = _run_threads(store, calls)
                    took = time.perf_counter() - start
                    best = took if best is None else min(best, took)
                assert best is not None
                out.setdefault(name, {})[phase] = _rate(done, best)
    return out


async def _async_rounds(dsn: str, pg_dsn: str, n: int, m: int, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    memory = await timestone.AsyncMemory.open(dsn, pool_size=8)
    try:
        async with AsyncPostgresStore.from_conn_string(pg_dsn) as postgres:
            await postgres.setup()
            stores: dict[str, BaseStore] = {
                "timestone": TimestoneStore(memory, group_id="bench", fields=[]),
                "postgres": postgres,
            }
            for phase, calls in _phases(n, m).items():
                for name, store in stores.items():
                    best, done = None, 0
                    for _ in range(rounds):
                        start = time.perf_counter()
                        done = await _run_gather(store, calls)
                        took = time.perf_counter() - start
                        best = took if best is None else min(best, took)
                    assert best is not None
                    out.setdefault(name, {})[phase] = _rate(done, best)
    finally:
        await memory.close()
    return out


def _postgres_database(dsn: str) -> str:
    """A database for LangGraph's Postgres store on the same server."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS langgraph_store")
        conn.execute("CREATE DATABASE langgraph_store")
    return make_conninfo(dsn, dbname="langgraph_store")


def measure(n: int, m: int, rounds: int) -> dict[str, Any]:
    scratch: AbstractContextManager[Any] = scratch_data_dir()
    with scratch as data_dir:
        dsn = embedded_dsn(data_dir)
        timestone.Memory.open(dsn).close()  # the schema, before the clocks start
        pg_dsn = _postgres_database(dsn)
        sync = _sync_rounds(dsn, pg_dsn, n, m, rounds)
        run: Callable[[], Any] = lambda: _async_rounds(dsn, pg_dsn, n, m, rounds)  # noqa: E731
        aio = asyncio.run(run())
    return {"n": n, "m": m, "rounds": rounds, "threads": THREADS, "sync": sync, "async": aio}


def store_section(r: dict[str, Any]) -> list[str]:
    """The table of ``bench/results/store.json`` for docs/benchmarks.md (``bench.report``)."""
    from ._report_tables import count, ratio, table

    rows: list[list[str]] = []
    for mode, title in (("sync", "blocking, 10 threads"), ("async", "async, one gather")):
        ours, theirs = r[mode]["timestone"], r[mode]["postgres"]
        for phase in ("put", "get", "search", "mixed"):
            a, b = ours[phase]["ops_per_s"], theirs[phase]["ops_per_s"]
            rows.append([title, phase, count(ours[phase]["ops"]), count(a), count(b), ratio(a / b)])
    lines = table(
        ["calls", "operations", "count", "Timestone ops/s", "PostgresStore ops/s", "ratio"],
        rows,
        [False, False, True, True, True, True],
    )
    return [
        *lines,
        "",
        f"n={r['n']}, m={r['m']}, best of {r['rounds']}; pace {r['cpu_pace_ms']} ms",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description="LangGraph's store workloads, side by side.")
    parser.add_argument("--n", type=int, default=1000, help="keys per round (LangGraph: 1000)")
    parser.add_argument("--m", type=int, default=10, help="rounds (LangGraph: 10)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each phase; best kept")
    args = parser.parse_args()
    pace = cpu_pace_ms()
    result = {"cpu_pace_ms": pace, **measure(args.n, args.m, args.rounds)}
    print(result)
    write_result("store", result)


if __name__ == "__main__":
    main()

"""Many tenants writing and searching at once: one node against a two-worker Citus cluster.

    .venv/bin/python -m bench.distributed                      # 32 tenants, about two minutes
    .venv/bin/python -m bench.distributed --tenants 32 --facts 400 --threads 8

Both setups run the same PostgreSQL 18 build with Citus (``tools.citus.build``) on
localhost, with the same settings (``tools.citus.cluster``): "one node" is a coordinator
with no workers, whose tables stay local; "cluster" is a coordinator and two workers,
the schema distributed by ``timestone.distributed.distribute``. In each, side by side in
one run:

1. ``--threads`` writers add ``--facts`` facts to each of ``--tenants`` tenants, a
   tenant's facts in calls of 50 (people with changing jobs: cardinality-one slots, so
   each change is a date fight); the aggregate write rate is reported;
2. ``--threads`` readers search the tenants' current jobs at once, each search a
   random tenant and person; reported: the per-search p50 and p95 and the aggregate
   rate, and on the cluster Citus's own counters of single-shard and multi-shard
   executions during the searches (``citus_stat_counters``): routing holds when the
   multi-shard count stays 0.

Every node of both setups runs on this one machine, so the cluster cannot show more
throughput than one node here: what it shows is the cost of the extra hop (the
coordinator plans and forwards each statement to a worker) and that every tenant's
statement stays on one shard. ``docs/scale.md`` says what that implies on real machines.
The embedder is ``HashEmbedder(256)``: the same cost in both setups, and none of the
model's load on this machine's two cores.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

import timestone
from bench._common import percentiles, write_result
from timestone import EdgeType, HashEmbedder, Ontology
from timestone.distributed import distribute
from tools.citus.build import ensure_built
from tools.citus.cluster import Cluster

ONTOLOGY = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
PLACES = [f"Company {i}" for i in range(40)]
BATCH = 50


def _people(facts: int) -> int:
    return max(1, facts // 5)  # five jobs each, on average


def _facts_of(tenant: int, facts: int, rng: random.Random) -> list[list[dict[str, Any]]]:
    """The tenant's facts in calls of ``BATCH``, each call one moment of the world."""
    people = _people(facts)
    rows = [
        {
            "source": f"Person {tenant}-{rng.randrange(people)}",
            "relation": "WORKS_AT",
            "target": rng.choice(PLACES),
        }
        for _ in range(facts)
    ]
    return [rows[i : i + BATCH] for i in range(0, len(rows), BATCH)]


def _run(
    name: str, cluster: Cluster, args: argparse.Namespace, distributed: bool
) -> dict[str, Any]:
    dsn = cluster.dsn
    if distributed:
        distribute(dsn)
    rng = random.Random(7)
    tenants = [f"bench-{i}" for i in range(args.tenants)]
    work: list[tuple[str, int, list[dict[str, Any]]]] = []
    for i, tenant in enumerate(tenants):
        for n, batch in enumerate(_facts_of(i, args.facts, rng)):
            work.append((tenant, n, batch))
    with timestone.Memory.open(
        dsn,
        embedder=HashEmbedder(256),
        ontology=ONTOLOGY,
        warm=False,
        pool_size=args.threads,
    ) as mem:
        assert mem._db.distributed == distributed  # pyright: ignore[reportPrivateUsage]
        start = datetime(2000, 1, 1, tzinfo=UTC)
        # a tenant's calls in order (its world moves forward); tenants interleaved
        by_tenant: dict[str, list[tuple[int, list[dict[str, Any]]]]] = {}
        for tenant, n, batch in work:
            by_tenant.setdefault(tenant, []).append((n, batch))

        def write_tenant(tenant: str) -> None:
            for n, batch in by_tenant[tenant]:
                mem.add_facts(tenant, batch, reference_time=start + timedelta(days=90 * n))

        began = time.perf_counter()
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(write_tenant, tenants))
        write_s = time.perf_counter() - began

        questions: list[tuple[str, str]] = []
        for _ in range(args.searches):
            i = rng.randrange(len(tenants))
            person = rng.randrange(_people(args.facts))
            questions.append((tenants[i], f"Where does Person {i}-{person} work?"))
        for tenant, question in questions[: args.threads * 2]:  # warm the pool's plans
            mem.search(tenant, question)
        counters = _counter_row(dsn) if distributed else None
        lock = threading.Lock()
        samples: list[float] = []

        def ask(item: tuple[str, str]) -> None:
            t0 = time.perf_counter()
            found = mem.search(item[0], item[1])
            ms = (time.perf_counter() - t0) * 1000
            assert all(f.group_id == item[0] for f in found.facts)
            with lock:
                samples.append(ms)

        began = time.perf_counter()
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(ask, questions))
        search_s = time.perf_counter() - began
        routed = _routed(dsn, counters) if counters is not None else None
    result: dict[str, Any] = {
        "setup": name,
        "workers": len(cluster.worker_nodes),
        "facts_written": args.tenants * args.facts,
        "write_facts_per_s": round(args.tenants * args.facts / write_s, 1),
        "searches": len(samples),
        "search_ms": percentiles(samples),
        "search_mean_ms": round(statistics.fmean(samples), 2),
        "searches_per_s": round(len(samples) / search_s, 1),
    }
    if routed is not None:
        result["executions_during_searches"] = routed
    return result


def _counter_row(dsn: str) -> tuple[int, int]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT query_execution_single_shard, query_execution_multi_shard"
            " FROM citus_stat_counters(0) WHERE database_id ="
            " (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
    return (int(row[0]), int(row[1])) if row is not None else (0, 0)


def _routed(dsn: str, before: tuple[int, int]) -> dict[str, int]:
    single, multi = _counter_row(dsn)
    return {"single_shard": single - before[0], "multi_shard": multi - before[1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tenants", type=int, default=32)
    parser.add_argument("--facts", type=int, default=500, help="facts per tenant")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--searches", type=int, default=2000)
    args = parser.parse_args(argv)
    build = ensure_built()
    settings = {"citus.enable_stat_counters": "on"}
    runs: list[dict[str, Any]] = []
    setups: list[tuple[str, int, bool]] = [("one node", 0, False), ("cluster", 2, True)]
    for name, workers, distributed in setups:
        with Cluster(build, workers=workers, settings=settings) as cluster:
            runs.append(_run(name, cluster, args, distributed))
    _print(runs)
    path = write_result(
        "distributed",
        {
            "tenants": args.tenants,
            "facts_per_tenant": args.facts,
            "threads": args.threads,
            "runs": runs,
        },
    )
    print(f"written to {path}")
    return 0


def _print(runs: list[dict[str, Any]]) -> None:
    def cell(r: dict[str, Any]) -> list[str]:
        return [
            r["setup"],
            f"{r['write_facts_per_s']:.0f}",
            f"{r['search_ms']['p50_ms']:.1f}",
            f"{r['search_ms']['p95_ms']:.1f}",
            f"{r['searches_per_s']:.0f}",
            str(r.get("executions_during_searches", {}).get("multi_shard", "-")),
        ]

    head = [
        "setup",
        "facts/s written",
        "search p50 ms",
        "search p95 ms",
        "searches/s",
        "multi-shard",
    ]
    rows = [head, *(cell(r) for r in runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    raise SystemExit(main())

"""Structured ingestion throughput and point / as-of read latency.

    .venv/bin/python -m bench.ingest            # 10k and 100k facts (and 100k in bulk, 4 times)
    .venv/bin/python -m bench.ingest --quick    # 2k and 10k facts (and 10k in bulk, 4 times)

A synthetic career graph: people change employer (``WORKS_AT``, cardinality
one: every change closes the previous period) and know each other
(``KNOWS``, many). Facts go in through ``add_facts`` in batches of 100 and
1,000 on the embedded Postgres with the default (local) embedder; every batch
is one transaction. The largest size is ingested five times: with plain
calls, and inside ``Memory.bulk_load`` (vector indexes built once at the end;
the rate includes that build) with a loop of ``add_facts`` calls, with one
``add_fact_batches`` call (the next batch checked and embedded while the
database stores the one before), and with one ``add_fact_batches`` call of the
same facts in another order, each person's facts together (``ORDERS``: the
other runs shuffle them, so most batches add to timelines that earlier batches
wrote); then once more inside ``bulk_load`` by ``WRITERS`` processes at once,
each writing its share into a group of its own (tenants loaded side by side).
Each run has a database of its own. Reads are timed at each size (in the first
group): the current employer of a person (point), the same as of a moment in
the middle of ingestion (as-of), and a person's whole timeline, once autovacuum
has finished with the new rows (``settled``: the seconds waited are in the
result, ``settled_after_s``) and after ``WARM_UP`` untimed calls of each.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import timestone
from bench._common import (
    cpu_pace_ms,
    percentiles,
    scratch_data_dir,
    server_cpu_seconds,
    settled,
    time_calls,
    write_result,
)
from timestone import EdgeType, FactInput, Ontology

ONTOLOGY = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one"), EdgeType("KNOWS")])
T0 = datetime(2000, 1, 1, tzinfo=UTC)


ORDERS = ("shuffled", "by person", "by date")


def corpus(
    people: int, facts_per_person: int, seed: int = 7, order: str = "shuffled"
) -> list[FactInput]:
    """``people * facts_per_person`` facts: three employers in turn, the rest KNOWS.

    ``order``: ``shuffled`` (every batch mixes people and dates, so most batches add to
    timelines that earlier batches wrote), ``by person`` (each person's facts together,
    as an export entity by entity writes them: most timelines are written by one batch)
    or ``by date`` (in world-time order, as a replay of a log: every batch a slice of the
    calendar, closing the periods the batches before opened)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    rnd = random.Random(seed)
    out: list[FactInput] = []
    for p in range(people):
        person = f"Person {p:07d}"
        for k in range(facts_per_person):
            start = T0 + timedelta(days=365 * k + rnd.randrange(300))
            if k % 2 == 0:
                company = f"Company {rnd.randrange(max(10, people // 20)):05d}"
                out.append(FactInput(person, "WORKS_AT", company, valid_at=start))
            else:
                other = f"Person {rnd.randrange(people):07d}"
                out.append(FactInput(person, "KNOWS", other, valid_at=start))
    rnd.shuffle(out)
    if order == "by person":
        out.sort(key=lambda f: str(f.source))  # stable: each person's facts in shuffled order
    elif order == "by date":
        out.sort(key=lambda f: f.valid_at or T0)
    return out


def ingest(
    mem: timestone.Memory,
    group: str,
    facts: list[FactInput],
    batch: int,
    *,
    started: float,
    many: bool = False,
) -> dict[str, Any]:
    """Write ``facts`` in batches: one ``add_facts`` call each, or (``many``) all of them
    through one ``add_fact_batches`` call."""
    batches: list[dict[str, Any]] = [
        {"facts": facts[i : i + batch], "reference_time": T0, "name": f"batch {i // batch}"}
        for i in range(0, len(facts), batch)
    ]
    if many:
        recorded: list[datetime] = []
        mem.add_fact_batches(
            group,
            batches,
            on_progress=lambda _done, _total, r: recorded.append(r.recorded_at),
            keep_results=False,
        )
    else:
        recorded = [mem.add_facts(group, **b).recorded_at for b in batches]
    return {
        "facts": len(facts),
        "batch": batch,
        "started": started,
        "midpoint": recorded[len(recorded) // 2].isoformat(),
    }


WRITERS = 2  # loaders of the parallel run, one process and one group each


def _writer(dsn: str, group: str, people: int, batch: int, ready: Any, go: Any, done: Any) -> None:
    """One loader of the parallel run (a process of its own): its group's facts through one
    ``add_fact_batches`` call, once every loader is ready."""
    facts = corpus(people, 5)
    with timestone.Memory.open(dsn, ontology=ONTOLOGY) as mem:
        ready.put(group)
        go.wait()
        row = ingest(mem, group, facts, batch, started=time.perf_counter(), many=True)
        done.put(row["midpoint"])


def ingest_parallel(
    mem: timestone.Memory, groups: list[str], people: int, batch: int, data_dir: Path
) -> dict[str, Any]:
    """``len(groups)`` loaders at once, each writing ``people`` people's facts into a group
    of its own; the row's rate counts all of them, from the moment they are let go (the
    server's CPU too: ``server_at_start``)."""
    ctx = multiprocessing.get_context("spawn")  # a fork would copy the pool's threads' locks
    ready, go, done = ctx.Queue(), ctx.Event(), ctx.Queue()
    loaders = [
        ctx.Process(target=_writer, args=(mem.dsn, g, people, batch, ready, go, done))
        for g in groups
    ]
    for p in loaders:
        p.start()
    for _ in loaders:
        ready.get(timeout=300)
    server = server_cpu_seconds(data_dir)
    started = time.perf_counter()
    go.set()
    midpoints = sorted(done.get(timeout=3600) for _ in loaders)
    for p in loaders:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a loader of the parallel run failed (exit code {p.exitcode})")
    return {
        "facts": people * 5 * len(groups),
        "batch": batch,
        "started": started,
        "midpoint": midpoints[0],
        "writers": len(groups),
        "server_at_start": server,
    }


def finish(row: dict[str, Any]) -> dict[str, Any]:
    """The rate, once everything the write needs (a bulk load's index build too) is done."""
    seconds = time.perf_counter() - row.pop("started")
    return {**row, "seconds": round(seconds, 2), "facts_per_second": round(row["facts"] / seconds)}


def _cpu_since(client: float, server: float | None, data_dir: Path) -> dict[str, float | None]:
    """CPU seconds of this process and of the embedded server since the two readings."""
    now = server_cpu_seconds(data_dir)
    return {
        "client_s": round(time.process_time() - client, 1),
        "server_s": round(now - server, 1) if now is not None and server is not None else None,
    }


WARM_UP = 50  # untimed calls of each read first


def reads(
    mem: timestone.Memory, group: str, people: int, midpoint: datetime, repeat: int
) -> dict[str, dict[str, float]]:
    rnd = random.Random(11)

    def person() -> str:
        return f"Person {rnd.randrange(people):07d}"

    def point_read() -> object:
        return mem.facts(group, source=person(), relation="WORKS_AT")

    def as_of_read() -> object:
        return mem.facts(group, source=person(), relation="WORKS_AT", as_of=midpoint)

    def timeline_read() -> object:
        return mem.timeline(group, person())

    for read in (point_read, as_of_read, timeline_read):
        time_calls(read, WARM_UP)
    point = time_calls(point_read, repeat)
    as_of = time_calls(as_of_read, repeat)
    timeline = time_calls(timeline_read, repeat)
    return {
        "point": percentiles(point),
        "as_of": percentiles(as_of),
        "timeline": percentiles(timeline),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2k and 10k facts")
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1 (reads timed at each size), got {args.repeat}")
    # (facts, batch, inside bulk_load, through add_fact_batches, loaders at once, order)
    small, large = (2_000, 10_000) if args.quick else (10_000, 100_000)
    runs = [
        (small, 100, False, False, 1, "shuffled"),
        (large, 1_000, False, False, 1, "shuffled"),
        (large, 1_000, True, False, 1, "shuffled"),
        (large, 1_000, True, True, 1, "shuffled"),
        (large, 1_000, True, True, 1, "by person"),
        (large, 1_000, True, True, WRITERS, "shuffled"),
    ]
    results: list[dict[str, Any]] = []
    for total, batch, bulk, many, writers, order in runs:
        with (
            scratch_data_dir() as data_dir,
            timestone.Memory.open(data_dir=data_dir, ontology=ONTOLOGY) as mem,
        ):
            people = total // 5 // writers  # in each group
            groups = (
                [f"bench-{total}"]
                if writers == 1
                else [f"bench-{total}-{j}" for j in range(writers)]
            )
            group = groups[0]
            # the parallel run's loaders make their own
            facts = corpus(people, 5, order=order) if writers == 1 else []
            pace = cpu_pace_ms()
            client, server = time.process_time(), server_cpu_seconds(data_dir)
            if bulk:
                with mem.bulk_load():
                    if writers == 1:
                        row = ingest(
                            mem, group, facts, batch, started=time.perf_counter(), many=many
                        )
                        written = time.perf_counter()
                        row["cpu"] = _cpu_since(client, server, data_dir)
                    else:
                        row = ingest_parallel(mem, groups, people, batch, data_dir)
                        written = time.perf_counter()
                        # the loaders' CPU is their processes' own (not read here)
                        cpu = _cpu_since(client, row.pop("server_at_start"), data_dir)
                        row["cpu"] = {**cpu, "client_s": None}
                writes = written - row["started"]
                row = finish(row)
                row["writes_seconds"] = round(writes, 2)
                row["writes_per_second"] = round(total / writes)
                row["index_build_seconds"] = round(row["seconds"] - writes, 2)
            else:
                row = finish(ingest(mem, group, facts, batch, started=time.perf_counter()))
                row["cpu"] = _cpu_since(client, server, data_dir)
            row["bulk_load"] = bulk
            row["call"] = "add_fact_batches" if many else "add_facts"
            row["order"] = order
            row["cpu_pace_ms_before_after"] = [pace, cpu_pace_ms()]
            row["settled_after_s"] = settled(mem.dsn)
            row["reads"] = reads(
                mem, group, people, datetime.fromisoformat(str(row["midpoint"])), args.repeat
            )
            results.append(row)
            rate = row["facts_per_second"]
            how = " inside bulk_load (index build included)" if bulk else ""
            by = f" by {writers} loaders at once, one group each" if writers > 1 else ""
            print(
                f"ingested {total:,} facts ({order}) in batches of {batch} ({row['call']})"
                f"{by}{how}: {rate:,} facts/s"
            )
            cpu = row["cpu"]
            if cpu["server_s"] is not None:
                client_cpu = "not read" if cpu["client_s"] is None else f"{cpu['client_s']} s"
                print(
                    f"  CPU while writing: client {client_cpu}, server {cpu['server_s']} s"
                    f" (the machine's pace: {' / '.join(map(str, row['cpu_pace_ms_before_after']))}"
                    " ms before / after)"
                )
            waited = row["settled_after_s"]
            print(
                "  reads timed once autovacuum was done"
                + (
                    f" ({waited} s later)"
                    if waited is not None
                    else " (still busy: not waited for)"
                )
            )
            if bulk:
                print(
                    f"  of which writes {row['writes_seconds']} s ({row['writes_per_second']:,}"
                    f" facts/s), index build {row['index_build_seconds']} s"
                )
    path = write_result("ingest", {"quick": args.quick, "runs": results})

    print(
        "\n| facts | batch | call | facts/s | point p50 / p95 (ms) | as-of p50 / p95 (ms)"
        " | timeline p50 / p95 (ms) |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|")
    for r in results:
        rd: dict[str, dict[str, float]] = r["reads"]

        def cell(name: str, rd: dict[str, dict[str, float]] = rd) -> str:
            return f"{rd[name]['p50_ms']:.2f} / {rd[name]['p95_ms']:.2f}"

        alone = f" (writes alone {r['writes_per_second']:,})" if r["bulk_load"] else ""
        loaders = f", {r['writers']} loaders" if r.get("writers", 1) > 1 else ""
        print(
            f"| {r['facts']:,} | {r['batch']:,}{' (bulk_load)' if r['bulk_load'] else ''} |"
            f" `{r['call']}`{loaders}, {r['order']} | {r['facts_per_second']:,}{alone} |"
            f" {cell('point')} |"
            f" {cell('as_of')} | {cell('timeline')} |"
        )
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()

"""Shared pieces of the benchmarks: a throwaway embedded database, timing, result files."""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from timestone.db._embedded import release_embedded

if TYPE_CHECKING:
    import psycopg

RESULTS = Path(__file__).parent / "results"


@contextmanager
def scratch_data_dir() -> Generator[Path]:
    """A fresh data dir for the embedded server, removed afterwards (its server stopped
    first: a server left running keeps writing into the directory being removed)."""
    with tempfile.TemporaryDirectory(prefix="timestone-bench-") as tmp:
        try:
            yield Path(tmp)
        finally:
            release_embedded(tmp)


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(pick(0.95), 3),
        "p99_ms": round(pick(0.99), 3),
        "n": len(ordered),
    }


def time_calls(fn: Callable[[], Any], repeat: int) -> list[float]:
    out: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def cpu_pace_ms() -> float:
    """Milliseconds a fixed pure-Python loop takes now (median of three). A shared
    machine's speed drifts (the same loop has taken from 0.65 to 1.16 s within minutes
    here): results record it next to the latencies they were measured with."""
    runs: list[float] = []
    for _ in range(3):
        start = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i * i
        runs.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(runs), 1)


def server_cpu_seconds(data_dir: Path) -> float | None:
    """CPU seconds the embedded server of ``data_dir`` has used so far: its postmaster and
    live backends, and the children it has reaped (closed connections, parallel
    workers). ``None`` where ``/proc`` cannot tell (not Linux, or the server not found).
    The difference of two readings is the server's share of what ran between them."""
    import os

    try:
        postmaster = int((data_dir / "pg" / "postmaster.pid").read_text().split()[0])
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue  # gone meanwhile
            fields = stat[stat.rindex(")") + 2 :].split()
            pid, parent = int(entry.name), int(fields[1])
            if pid == postmaster:
                total += sum(int(f) for f in fields[11:15])  # its own and reaped children's
            elif parent == postmaster:
                total += int(fields[11]) + int(fields[12])
        return total / ticks
    except (OSError, ValueError, IndexError):
        return None


def wait_for(
    dsn: str, ready: Callable[[Any], bool], limit_s: float, every_s: float
) -> float | None:
    """Ask ``ready`` (given a connection in autocommit) every ``every_s`` seconds until it
    says yes; the seconds waited, or None if it had not after ``limit_s``."""
    import psycopg

    start = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.perf_counter() - start < limit_s:
            if ready(conn):
                return round(time.perf_counter() - start, 1)
            time.sleep(every_s)
    return None


SETTLE_WAIT_S = 300.0  # seconds ``settled`` waits at most


def settled(dsn: str, quiet_polls: int = 3) -> float | None:
    """Wait until no autovacuum worker has run in the database of ``dsn`` for
    ``quiet_polls`` polls a second apart; the seconds waited, or None if it was still
    busy after ``SETTLE_WAIT_S``. Right after a large load autovacuum vacuums and
    analyzes the new rows (the HNSW indexes among them) on the machine's other core: a
    read timed then measures that maintenance as much as the read."""
    quiet = [0]

    def ready(conn: Any) -> bool:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'"
            " AND datname = current_database()"
        ).fetchone()
        quiet[0] = quiet[0] + 1 if row is not None and row[0] == 0 else 0
        return quiet[0] >= quiet_polls

    return wait_for(dsn, ready, SETTLE_WAIT_S, 1.0)


def kept_databases(parser: argparse.ArgumentParser, data_dirs: list[Path]) -> None:
    """Refuse, through ``parser``, a directory that is not a database kept by
    ``bench.search --keep`` (before anything is opened or written)."""
    for data_dir in data_dirs:
        if not (data_dir / "corpus.json").is_file() or not (data_dir / "pg").is_dir():
            parser.error(
                f"{data_dir} is not a database kept by bench.search"
                " (--keep DIR writes DIR/<size> with corpus.json and pg/)"
            )


def machine() -> dict[str, Any]:
    import os

    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def write_result(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2, default=str) + "\n")
    return path


def ready_to_time(dsn: str) -> float | None:
    """Vacuum and analyse every table a build wrote, so that no autovacuum of them runs
    on the other core while searches are timed; write the pages the vacuums dirtied now
    (not by a checkpoint spread over the minutes of the timing); prewarm; then wait for
    an autovacuum that began meanwhile (``settled``: the seconds waited)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        for (table,) in conn.execute(
            "SELECT c.relname FROM pg_class AS c WHERE c.relkind = 'r'"
            " AND c.relnamespace = 'timestone'::regnamespace ORDER BY 1"
        ).fetchall():
            conn.execute(sql.SQL("VACUUM ANALYZE timestone.{}").format(sql.Identifier(table)))
        conn.execute("CHECKPOINT")
        prewarm(conn)
    return settled(dsn)


def prewarm(conn: psycopg.Connection[Any]) -> None:
    """Load the schema's tables and indexes into the buffer cache, as pg_prewarm's
    autoprewarm does for a restarted production server: a server that has been answering
    holds its working set (without it, at 1M facts every question reads the rows of
    different people back from the operating system). ``conn``: autocommit, as the owner."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    conn.execute(
        "SELECT pg_prewarm(c.oid) FROM pg_class AS c"
        " WHERE c.relnamespace = 'timestone'::regnamespace AND c.relkind IN ('r', 'i')"
    )

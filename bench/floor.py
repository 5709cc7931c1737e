"""The floor of a bulk load: what storing and indexing the same rows costs with no library
work at all.

    .venv/bin/python -m bench.floor [--facts 100000] [--order "by person"] [--rounds 2]

A bulk load (``Memory.bulk_load``) writes with the HNSW and read-only indexes dropped,
then builds them at its end; ``bench.ingest`` times both. This bench first loads a
group as ``bench.ingest``'s fastest row does (``bulk_load``, one ``add_fact_batches``
call of 1,000 facts a batch, each person's facts together). Then, in the same database,
it stores the finished rows again: it copies the five tables a load writes (episodes,
entities, facts, assertions, mentions) with every column, default, generated column,
constraint and index, and drops from the copies the indexes that a bulk load drops.
Each table's rows then go in with one ``INSERT ... SELECT`` on the server. That insert
has no client, no reads, no entity resolution and no date fight, and no row level
security. Next, the indexes a bulk load builds are built on the copies, as
``bulk_load`` builds them (the same ``maintenance_work_mem`` and the server's parallel
workers). The copies are then dropped. The floor is done ``--rounds`` times.

The floor's time is a bound no loader can beat on this server with this schema: the
rows have to be stored, checked by their constraints, and indexed. Its rate is the most
any bulk load could reach here, index build included.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import timestone
from timestone.db._embedding import LOAD_INDEXES, VECTOR_INDEXES
from timestone.db._index_build import build_memory_kb, need_kb, row_bytes

from ._common import cpu_pace_ms, scratch_data_dir, server_cpu_seconds, write_result
from .ingest import ONTOLOGY, ORDERS, corpus, ingest

TABLES = ("episodes", "entities", "facts", "assertions", "mentions")  # in the order a load writes
COPY = "floor"  # the schema of the copies


def load(mem: timestone.Memory, group: str, facts: list[Any], data_dir: Path) -> dict[str, Any]:
    """``facts`` written in a bulk load as ``bench.ingest``'s fastest row writes them."""
    server = server_cpu_seconds(data_dir)
    started = time.perf_counter()
    with mem.bulk_load():
        ingest(mem, group, facts, 1_000, started=started, many=True)
        written = time.perf_counter()
        server_written = server_cpu_seconds(data_dir)
    done = time.perf_counter()
    return {
        "writes_s": round(written - started, 2),
        "build_s": round(done - written, 2),
        "seconds": round(done - started, 2),
        "facts_per_second": round(len(facts) / (done - started)),
        "server_cpu_s": _cpu(server, server_cpu_seconds(data_dir)),
        "server_cpu_writes_s": _cpu(server, server_written),
    }


def _cpu(before: float | None, after: float | None) -> float | None:
    return round(after - before, 2) if before is not None and after is not None else None


def _indexes(conn: psycopg.Connection[Any], schema: str, table: str) -> list[tuple[str, str]]:
    """Each index of ``schema.table``: its name and its definition from ``USING`` on (the
    same for an index and its copy)."""
    rows = conn.execute(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index AS i"
        " JOIN pg_class AS c ON c.oid = i.indexrelid"
        " WHERE i.indrelid = (quote_ident(%s) || '.' || quote_ident(%s))::regclass",
        (schema, table),
    ).fetchall()
    return [(str(name), str(definition).split(" USING ", 1)[1]) for name, definition in rows]


def _copy_tables(conn: psycopg.Connection[Any]) -> None:
    """The copies, each with the indexes and constraints its table keeps during a load."""
    dropped = {definition.split()[2] for definition in LOAD_INDEXES}
    dropped |= {name for name, *_ in VECTOR_INDEXES}
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(COPY)))
    for table in TABLES:
        conn.execute(
            sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(
                sql.Identifier(COPY, table), sql.Identifier("timestone", table)
            )
        )
        # the copy's indexes have names of their own: matched to the original by definition
        originals = _indexes(conn, "timestone", table)
        gone = {d for name, d in originals if name in dropped}
        for name, definition in _indexes(conn, COPY, table):
            if definition in gone:
                conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(COPY, name)))
        kept = sorted(d for name, d in originals if name not in dropped)
        if sorted(d for _, d in _indexes(conn, COPY, table)) != kept:
            raise SystemExit(f"the copy of {table} does not hold the indexes a bulk load keeps")


def _columns(conn: psycopg.Connection[Any], table: str) -> sql.Composable:
    """The columns of ``timestone.table`` that an insert writes (not the generated ones)."""
    rows = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = ('timestone.' || quote_ident(%s))"
        "::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
        (table,),
    ).fetchall()
    return sql.SQL(", ").join(sql.Identifier(str(name)) for (name,) in rows)


def _build_memory(conn: psycopg.Connection[Any]) -> str:
    """The ``maintenance_work_mem`` that ``bulk_load`` gives the build (``_index_build``),
    from the rows of the largest graph."""
    row = conn.execute(
        "SELECT greatest((SELECT count(*) FROM timestone.facts"
        " WHERE expired_at IS NULL AND invalid_at IS NULL),"
        " (SELECT count(*) FROM timestone.facts"
        " WHERE expired_at IS NULL AND invalid_at IS NOT NULL),"
        " (SELECT count(*) FROM timestone.entities WHERE expired_at IS NULL)),"
        " (SELECT atttypmod FROM pg_attribute WHERE attrelid = 'timestone.facts'::regclass"
        " AND attname = 'embedding'),"
        " pg_size_bytes(current_setting('maintenance_work_mem')),"
        " pg_size_bytes(current_setting('shared_buffers'))"
    ).fetchone()
    assert row is not None
    rows, dimension, current, buffers = (int(v) for v in row)
    kb = build_memory_kb(need_kb(rows * row_bytes(dimension)), current // 1024, buffers // 1024)
    return f"{-(-kb // 1024)}MB"


def floor(dsn: str, data_dir: Path) -> dict[str, Any]:
    """One round: the copies made, filled, indexed, timed, and dropped."""
    out: dict[str, Any] = {"inserts": {}, "builds": {}}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(COPY)))
        _copy_tables(conn)
        conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (_build_memory(conn),))
        conn.execute("CHECKPOINT")  # the load's dirty pages written before the clock starts
        server = server_cpu_seconds(data_dir)
        started = time.perf_counter()
        facts = 0
        for table in TABLES:
            columns = _columns(conn, table)
            t0 = time.perf_counter()
            cur = conn.execute(
                sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(
                    sql.Identifier(COPY, table),
                    columns,
                    columns,
                    sql.Identifier("timestone", table),
                )
            )
            out["inserts"][table] = {"rows": cur.rowcount, "s": round(time.perf_counter() - t0, 2)}
            if table == "facts":
                facts = cur.rowcount
        inserted = time.perf_counter()
        for name, table, *_ in VECTOR_INDEXES:
            if table not in TABLES:
                continue  # communities: empty after a load of facts
            definition = _index_definition(conn, name)
            t0 = time.perf_counter()
            conn.execute(definition.encode())
            out["builds"][name] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        for definition in LOAD_INDEXES:
            conn.execute(definition.replace(" ON timestone.", f" ON {COPY}.").encode())
        out["builds"]["read indexes of facts"] = round(time.perf_counter() - t0, 2)
        done = time.perf_counter()
        out.update(
            facts=facts,
            insert_s=round(inserted - started, 2),
            build_s=round(done - inserted, 2),
            seconds=round(done - started, 2),
            facts_per_second=round(facts / (done - started)),
            server_cpu_s=_cpu(server, server_cpu_seconds(data_dir)),
        )
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(COPY)))
    return out


def _index_definition(conn: psycopg.Connection[Any], name: str) -> str:
    """The definition of the vector index ``timestone.name``, on the copy of its table."""
    row = conn.execute(
        "SELECT pg_get_indexdef(('timestone.' || quote_ident(%s))::regclass)", (name,)
    ).fetchone()
    assert row is not None
    return str(row[0]).replace(" ON timestone.", f" ON {COPY}.", 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--order", choices=ORDERS, default="by person")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.facts < 1_000 or args.facts % 5:
        parser.error(f"--facts must be a multiple of 5 from 1,000 up, got {args.facts}")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    facts = corpus(args.facts // 5, 5, order=args.order)
    with (
        scratch_data_dir() as data_dir,
        timestone.Memory.open(data_dir=data_dir, ontology=ONTOLOGY) as mem,
    ):
        pace = [cpu_pace_ms()]
        loaded = load(mem, f"bench-{args.facts}", facts, data_dir)
        print(
            f"bulk load of {args.facts:,} facts ({args.order}): {loaded['facts_per_second']:,}"
            f" facts/s (writes {loaded['writes_s']} s, index build {loaded['build_s']} s)"
        )
        rounds: list[dict[str, Any]] = []
        for _ in range(args.rounds):
            pace.append(cpu_pace_ms())
            row = floor(mem.dsn, data_dir)
            rounds.append(row)
            inserts = ", ".join(f"{t} {v['s']}" for t, v in row["inserts"].items())
            builds = ", ".join(f"{n} {s}" for n, s in row["builds"].items())
            print(
                f"floor: {row['facts_per_second']:,} facts/s: inserts {row['insert_s']} s"
                f" ({inserts}), index build {row['build_s']} s ({builds})"
            )
        pace.append(cpu_pace_ms())
    path = write_result(
        "floor",
        {
            "facts": args.facts,
            "order": args.order,
            "cpu_pace_ms": pace,
            "load": loaded,
            "floor": rounds,
        },
    )
    print(f"the machine's pace (ms): {' / '.join(map(str, pace))}\nwritten to {path}")


if __name__ == "__main__":
    main()

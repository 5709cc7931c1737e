"""Identical vectors in the shared HNSW indexes: whether each group's search still
reaches its own copy of a sentence that many groups hold.

    .venv/bin/python -m bench.duplicates                 # 14 groups, 20 sentences, 8 draws
    .venv/bin/python -m bench.duplicates --groups 20 --sentences 200 --draws 4

Each group gets ``--sentences`` facts and one probe fact, "Mira directs Château Sud.",
through ``add_facts`` on the embedded Postgres with the default embedder. Two databases:
in one every group holds the same sentences (one seed data set loaded into each
tenant); in the other each group's sentences are its own (made-up names drawn per
group). Each is repeated for ``--draws`` draws of the made-up names (the graph an
index grows depends on its data). After each group is added, every group so far looks
its probe up through the facts' HNSW index as a search of a large group reads it
(ordered by the keyed distance, filtered to the group, ``hnsw.ef_search`` 40 as a
search of limit 10 sets it, the planner held to the index): a group counts as found
when its probe comes back.

pgvector keeps up to ten rows of one vector in one graph node, and copies past ten
can fall out of the graph's reach. Timestone's indexes hold each vector keyed by its
group (``timestone._vectors.keyed``: normalized, eight coordinates drawn from the
group id appended), so the copies of different groups are different vectors. Then
the same on a bare table in the same server (the library's schema untouched), the
shared sentences indexed once as they are, as the library's indexes were before
migration 0020, and once keyed by group.
"""

from __future__ import annotations

import argparse
import contextlib
import random
from collections.abc import Generator
from datetime import UTC, datetime
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

import timestone
from bench._common import scratch_data_dir, write_result
from timestone import FactInput
from timestone._vectors import keyed
from timestone.embedders import embed_rows

PROBE = ("Mira", "DIRECTS", "Château Sud")
PROBE_SENTENCE = "Mira directs Château Sud."
T0 = datetime(2020, 1, 1, tzinfo=UTC)
_SYLLABLES = ("ka", "lo", "mi", "ren", "tas", "vu", "bel", "dor", "fin", "gus", "hal", "jor", "zed")


def names(n: int, seed: str) -> list[str]:
    """``n`` made-up names, drawn by a generator seeded with ``seed``."""
    rnd = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        words = ("".join(rnd.choice(_SYLLABLES) for _ in range(3)) for _ in range(3))
        out[" ".join(w.capitalize() for w in words)] = None
    return list(out)


@contextlib.contextmanager
def _server() -> Generator[tuple[timestone.Memory, psycopg.Connection[Any]]]:
    """A memory on a scratch embedded server, and a connection held to the index: on
    tables this small the planner would sort a group's rows by distance instead, which
    is exact and would measure nothing."""
    with (
        scratch_data_dir() as data_dir,
        timestone.Memory.open(data_dir=data_dir) as mem,
        psycopg.connect(mem.dsn, autocommit=True) as conn,
    ):
        register_vector(conn)
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_sort = off")
        conn.execute("SET hnsw.ef_search = 40")  # as a search of limit 10 sets it
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        yield mem, conn


def run(groups: int, sentences: int, shared: bool, draw: int) -> list[dict[str, int]]:
    rows: list[dict[str, int]] = []
    with _server() as (mem, conn):
        dim = mem.embedder.dimension
        probe = mem.embedder.embed([PROBE_SENTENCE])[0]
        lookup = sql.SQL(
            "SELECT count(*) FROM (SELECT f.fact FROM timestone.facts AS f"
            " WHERE f.group_id = %(g)s AND f.expired_at IS NULL AND f.invalid_at IS NULL"
            " ORDER BY {} <=> {} LIMIT 5) AS x WHERE x.fact = %(probe_sentence)s"
        ).format(
            keyed(sql.SQL("f.embedding"), sql.SQL("f.group_id"), dim),
            keyed(sql.SQL("%(probe)s::vector"), sql.SQL("%(g)s::text"), dim),
        )
        plan = conn.execute(
            sql.SQL("EXPLAIN {}").format(lookup),
            {"g": "tenant-0", "probe": probe, "probe_sentence": PROBE_SENTENCE},
        ).fetchall()
        assert any("facts_embedding_hnsw" in str(r[0]) for r in plan), plan
        for k in range(groups):
            group = f"tenant-{k}"
            seed = f"{draw}" if shared else f"{draw}-{group}"
            facts = [FactInput(n, "FILES", "a form") for n in names(sentences, seed)]
            mem.add_facts(group, facts, reference_time=T0)
            mem.add_facts(group, [FactInput(*PROBE)], reference_time=T0)
            found = 0
            for j in range(k + 1):
                given = {"g": f"tenant-{j}", "probe": probe, "probe_sentence": PROBE_SENTENCE}
                row = conn.execute(lookup, given).fetchone()
                found += int(row[0]) if row is not None else 0
            rows.append({"groups": k + 1, "copies": k + 1, "found": found})
    return rows


def bare(groups: int, sentences: int, draws: int) -> dict[str, list[int]]:
    """Groups that found their probe per draw, through a plain index and a keyed one."""
    found: dict[str, list[int]] = {"plain": [], "keyed": []}
    with _server() as (mem, conn):
        dim = mem.embedder.dimension
        plain = (sql.SQL("v"), sql.SQL("%(probe)s"))
        by_group = (
            keyed(sql.SQL("v"), sql.SQL("g"), dim),
            keyed(sql.SQL("%(probe)s::vector"), sql.SQL("%(g)s::text"), dim),
        )
        for draw in range(draws):
            texts = [f"{n} files a form." for n in names(sentences, f"{draw}")]
            vectors = list(embed_rows(mem.embedder, [*texts, PROBE_SENTENCE]))
            for how, (indexed, probe) in (("plain", plain), ("keyed", by_group)):
                conn.execute("DROP TABLE IF EXISTS pg_temp.t")
                conn.execute(
                    sql.SQL("CREATE TEMP TABLE t (id serial, g text, v vector({}))").format(dim)
                )
                conn.execute(
                    sql.SQL("CREATE INDEX ON pg_temp.t USING hnsw (({}) vector_cosine_ops)").format(
                        indexed
                    )
                )
                for k in range(groups):
                    conn.execute(
                        "INSERT INTO pg_temp.t (g, v) SELECT %s, x FROM unnest(%s::vector[]) AS x",
                        (f"tenant-{k}", vectors[:-1]),
                    )
                    conn.execute(
                        "INSERT INTO pg_temp.t (g, v) VALUES (%s, %s)", (f"tenant-{k}", vectors[-1])
                    )
                lookup = sql.SQL(
                    "SELECT count(*) FROM (SELECT v FROM pg_temp.t WHERE g = %(g)s"
                    " ORDER BY {} <=> {} LIMIT 5) AS x WHERE x.v = %(probe)s"
                ).format(indexed, probe)
                hits = 0
                for k in range(groups):
                    given = {"g": f"tenant-{k}", "probe": vectors[-1]}
                    row = conn.execute(lookup, given).fetchone()
                    hits += int(row[0]) if row is not None else 0
                found[how].append(hits)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--groups", type=int, default=14)
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--draws", type=int, default=8)
    args = parser.parse_args()
    result: dict[str, Any] = {"sentences_per_group": args.sentences, "draws": args.draws}
    for shared in (True, False):
        key = "shared_sentences" if shared else "own_sentences"
        result[key] = [run(args.groups, args.sentences, shared, d) for d in range(args.draws)]
    result["bare_table"] = bare(args.groups, args.sentences, args.draws)
    path = write_result("duplicates", result)
    print(
        f"\n| groups holding the probe | groups that found it through the index"
        f" ({args.draws} draws): groups share their {args.sentences} other sentences"
        " | draws that lost one | each group's own sentences | draws that lost one |"
    )
    print("|---:|---:|---:|---:|---:|")
    for n in range(args.groups):
        cells: list[str] = []
        for key in ("shared_sentences", "own_sentences"):
            rows = [draw[n] for draw in result[key]]
            found, copies = sum(r["found"] for r in rows), sum(r["copies"] for r in rows)
            cells += [f"{found} of {copies}", str(sum(r["found"] < r["copies"] for r in rows))]
        print(f"| {n + 1} | {' | '.join(cells)} |")
    for how, label in (("plain", "as they are"), ("keyed", "keyed by group")):
        per = result["bare_table"][how]
        print(
            f"bare table, vectors indexed {label}: {sum(per)} of {args.groups * args.draws}"
            f" probes found (per draw: {', '.join(map(str, per))})"
        )
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()

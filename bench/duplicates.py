"""Identical vectors in the shared HNSW index: how many copies of one sentence a search
of the index still reaches as groups that hold it are added.

    .venv/bin/python -m bench.duplicates                 # 14 groups, 20 sentences, 8 draws
    .venv/bin/python -m bench.duplicates --groups 20 --sentences 200 --draws 4

Each group gets ``--sentences`` facts and one probe fact, "Mira directs Château Sud.",
through ``add_facts`` on the embedded Postgres with the default embedder. Two databases:
in one every group holds the same sentences (one seed data set loaded into each
tenant); in the other each group's sentences are its own (made-up names drawn per
group). Each is repeated for ``--draws`` draws of the made-up names (the graph an
index grows depends on its data). After each group the probe's own vector is looked
up in the facts' HNSW index (``ORDER BY embedding <=> probe LIMIT 50``,
``hnsw.ef_search`` 100, every group's rows): the copies of the probe it returns are
counted against the copies stored.
pgvector keeps up to ten rows of one vector in one graph node; the result shows what
happens past ten.

Then a way out, on a bare table in the same server (the library's schema untouched):
the groups' shared sentences written the same way, indexed once as they are and once
keyed by group, each vector normalized with eight coordinates drawn from its group's id
appended. Within a group that keeps the order of distances (every row and the query
carry the same eight coordinates), and it sets copies held by different groups apart.
Each group then looks its probe up through the index, filtered to itself.
"""

from __future__ import annotations

import argparse
import random
from datetime import UTC, datetime
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

import timestone
from bench._common import scratch_data_dir, write_result
from timestone import FactInput
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


def run(groups: int, sentences: int, shared: bool, draw: int) -> list[dict[str, int]]:
    rows: list[dict[str, int]] = []
    with (
        scratch_data_dir() as data_dir,
        timestone.Memory.open(data_dir=data_dir) as mem,
        psycopg.connect(mem.dsn, autocommit=True) as conn,
    ):
        register_vector(conn)
        conn.execute("SET hnsw.ef_search = 100")
        for k in range(groups):
            group = f"tenant-{k}"
            seed = f"{draw}" if shared else f"{draw}-{group}"
            facts = [FactInput(n, "FILES", "a form") for n in names(sentences, seed)]
            mem.add_facts(group, facts, reference_time=T0)
            mem.add_facts(group, [FactInput(*PROBE)], reference_time=T0)
            probe = conn.execute(
                "SELECT embedding, count(*) OVER () AS n FROM timestone.facts"
                " WHERE fact = %s AND expired_at IS NULL LIMIT 1",
                (PROBE_SENTENCE,),
            ).fetchone()
            assert probe is not None
            found = conn.execute(
                "SELECT count(*) FROM (SELECT f.fact FROM timestone.facts AS f"
                " WHERE f.expired_at IS NULL AND f.invalid_at IS NULL"
                " ORDER BY f.embedding <=> %s LIMIT 50) AS x WHERE x.fact = %s",
                (probe[0], PROBE_SENTENCE),
            ).fetchone()
            assert found is not None
            rows.append({"groups": k + 1, "copies": int(probe[1]), "found": int(found[0])})
    return rows


# schema-qualified: an index expression runs with a search path of pg_catalog only
_KEYED = """CREATE FUNCTION pg_temp.keyed(v public.vector, g text) RETURNS public.vector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT public.l2_normalize(v) OPERATOR(public.||)
ARRAY(SELECT (pg_catalog.hashtextextended(g, i) % 1000)::float4 / 1000
FROM pg_catalog.generate_series(1, 8) AS i)::public.vector $$"""


def bare(groups: int, sentences: int, draws: int) -> dict[str, list[int]]:
    """Copies of the probe found per draw, through a plain index and a keyed one."""
    found: dict[str, list[int]] = {"plain": [], "keyed": []}
    with (
        scratch_data_dir() as data_dir,
        timestone.Memory.open(data_dir=data_dir) as mem,
        psycopg.connect(mem.dsn, autocommit=True) as conn,
    ):
        register_vector(conn)
        conn.execute(_KEYED)
        dim = mem.embedder.dimension
        keyed = sql.SQL("pg_temp.keyed({}, {})::vector({})")
        plain = (sql.SQL("v"), sql.SQL("%(probe)s"))
        by_group = (
            keyed.format(sql.SQL("v"), sql.SQL("g"), dim + 8),
            keyed.format(sql.SQL("%(probe)s"), sql.SQL("%(g)s"), dim + 8),
        )
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET hnsw.ef_search = 100")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
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
        f"\n| groups holding the probe | found through the index ({args.draws} draws):"
        f" groups share their {args.sentences} other sentences | draws that lost copies"
        " | each group's own sentences | draws that lost copies |"
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

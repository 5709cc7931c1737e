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
"""

from __future__ import annotations

import argparse
import random
from datetime import UTC, datetime
from typing import Any

import psycopg
from pgvector.psycopg import register_vector

import timestone
from bench._common import scratch_data_dir, write_result
from timestone import FactInput

PROBE = ("Mira", "DIRECTS", "Château Sud")
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
                " WHERE fact = 'Mira directs Château Sud.' AND expired_at IS NULL LIMIT 1"
            ).fetchone()
            assert probe is not None
            found = conn.execute(
                "SELECT count(*) FROM (SELECT f.fact FROM timestone.facts AS f"
                " WHERE f.expired_at IS NULL AND f.invalid_at IS NULL"
                " ORDER BY f.embedding <=> %s LIMIT 50) AS x"
                " WHERE x.fact = 'Mira directs Château Sud.'",
                (probe[0],),
            ).fetchone()
            assert found is not None
            rows.append({"groups": k + 1, "copies": int(probe[1]), "found": int(found[0])})
    return rows


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
    path = write_result("duplicates", result)
    print(
        f"\n| groups holding the probe | found through the index ({args.draws} draws):"
        f" groups share their {args.sentences} other sentences | draws where none was found"
        " | each group's own sentences | draws where none was found |"
    )
    print("|---:|---:|---:|---:|---:|")
    for n in range(args.groups):
        cells: list[str] = []
        for key in ("shared_sentences", "own_sentences"):
            rows = [draw[n] for draw in result[key]]
            found, copies = sum(r["found"] for r in rows), sum(r["copies"] for r in rows)
            cells += [f"{found} of {copies}", str(sum(r["found"] == 0 for r in rows))]
        print(f"| {n + 1} | {' | '.join(cells)} |")
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()

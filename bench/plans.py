"""The planner's estimate of each search statement, against Postgres's JIT thresholds.

    .venv/bin/python -m bench.plans /tmp/bench-keep/100000 /tmp/bench-keep/1000000

Each argument is a database kept by ``bench.search --keep DIR`` (``DIR/<size>``).

A server with JIT compiles a plan's expressions on every execution once the plan's
estimated cost passes ``jit_above_cost`` (100,000 by default), and inlines and
optimizes them past ``jit_inline_above_cost`` and ``jit_optimize_above_cost`` (500,000).
A search runs the generic plan of its statement (prepared once per connection), so its
estimate is the one shown here, made for a group as large as the table. The library's
connections turn JIT off; this measures why. The embedded server is built without JIT,
so nothing here is compiled: the estimates alone are read (``EXPLAIN (GENERIC_PLAN)``).

``--jit-dsn DSN`` also times what the compile costs on a server that has JIT (any
Postgres built with LLVM; a temporary table, nothing kept): a stand-in statement of the
same shape (a walk, ranked lists, a lateral lookup by key; about 40 functions to compile, where
a search has more), called with JIT off, then compiled, then also inlined and optimized,
the thresholds set to 0 so that it crosses them as a search's estimate does at 1M facts.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, LiteralString

import timestone
from timestone.search import _request as _search_request
from timestone.search import _sql as _search_sql

from ._common import kept_databases, write_result
from .search import ONTOLOGY

QUESTION = "Where does Alma Berg work now?"
SCOPES = ("facts", "entities", "episodes")
THRESHOLDS = ("jit_above_cost", "jit_inline_above_cost", "jit_optimize_above_cost")


def requests() -> dict[str, _search_request.SearchRequest]:
    """A search now, as of a moment (yesterday), and over every period (history)."""
    return {
        "now": _search_request.prepare_search(QUESTION),
        "as of": _search_request.prepare_search(
            QUESTION, as_of=datetime.now(UTC) - timedelta(days=1)
        ),
        "history": _search_request.prepare_search(QUESTION, valid_at=None),
    }


def estimates(data_dir: Path) -> dict[str, Any]:
    """The total cost of the generic plan of each scope's statement, per kind of search,
    read in a transaction of the library's role (row level security as a search has it)
    for the corpus's group, and the server's JIT thresholds."""
    corpus = json.loads((data_dir / "corpus.json").read_text())
    group: str = corpus["group"]
    with timestone.Memory.open(data_dir=data_dir, ontology=ONTOLOGY) as mem:
        db = mem._db  # pyright: ignore[reportPrivateUsage]
        dimension = mem.embedder.dimension
        costs: dict[str, dict[str, float]] = {}
        with db.transaction(group, "estimating plans") as conn:
            row = conn.execute(
                "SELECT current_setting('jit_above_cost')::float8 AS jit_above_cost,"
                " current_setting('jit_inline_above_cost')::float8 AS jit_inline_above_cost,"
                " current_setting('jit_optimize_above_cost')::float8 AS jit_optimize_above_cost,"
                " (SELECT reltuples FROM pg_class WHERE oid = 'timestone.facts'::regclass)"
                "   AS facts_rows"
            ).fetchone()
            assert row is not None
            # the facts statement reads the full-text list the search ranks before it
            conn.execute("SELECT set_config('timestone.fts_ids', '{}', true)")
            for kind, req in requests().items():
                costs[kind] = {}
                for scope in SCOPES:
                    text, _ = _search_sql.statement(scope, req, dimension)
                    found = conn.execute(b"EXPLAIN (GENERIC_PLAN, FORMAT JSON) " + text).fetchone()
                    assert found is not None
                    plan = next(iter(found.values()))[0]["Plan"]
                    costs[kind][scope] = round(float(plan["Total Cost"]))
    return {
        "data_dir": str(data_dir),
        "facts_rows": round(float(row["facts_rows"])),
        "thresholds": {name: float(row[name]) for name in THRESHOLDS},
        "costs": costs,
    }


def crossed(cost: float, thresholds: dict[str, float]) -> str:
    if cost > thresholds["jit_inline_above_cost"] and cost > thresholds["jit_optimize_above_cost"]:
        return "compiled, inlined and optimized"
    if cost > thresholds["jit_above_cost"]:
        return "compiled"
    return "-"


_STAND_IN_ROWS = 200_000
_STAND_IN: LiteralString = """
WITH walked AS MATERIALIZED (SELECT DISTINCT n.e FROM unnest($2::int[]) AS s(e)
  CROSS JOIN LATERAL (
   (SELECT f.target AS e FROM f WHERE f.g = $1 AND f.source = s.e AND f.valid_at <= $3
     AND (f.invalid_at IS NULL OR f.invalid_at > $3) LIMIT 50)
   UNION ALL (SELECT f.source FROM f WHERE f.g = $1 AND f.target = s.e AND f.valid_at <= $3
     AND (f.invalid_at IS NULL OR f.invalid_at > $3) LIMIT 50)) AS n),
around AS MATERIALIZED (SELECT x.id, row_number() OVER (
   ORDER BY abs(extract(epoch FROM x.valid_at - $3)), x.id) AS r
  FROM walked AS w CROSS JOIN LATERAL (SELECT f.id, f.valid_at FROM f WHERE f.g = $1
   AND f.source = w.e AND f.valid_at <= $3 AND (f.invalid_at IS NULL OR f.invalid_at > $3)
   ORDER BY f.valid_at DESC LIMIT 50) AS x LIMIT 30)
SELECT a.id, 1.0 / (60 + a.r) AS fused, f.fact, f.valid_at, f.invalid_at, upper(f.fact),
  length(f.fact) + a.r
FROM around AS a CROSS JOIN LATERAL (SELECT * FROM f WHERE f.g = $1
  AND f.source = a.id % 50000 AND f.id = a.id LIMIT 1) AS f
ORDER BY fused DESC, a.id LIMIT 10
"""
_JIT_MODES: dict[str, tuple[LiteralString, ...]] = {
    "off": ("SET jit = off",),
    "compiled": (
        "SET jit = on",
        "SET jit_above_cost = 0",
        "SET jit_inline_above_cost = 1e9",
        "SET jit_optimize_above_cost = 1e9",
    ),
    "compiled, inlined and optimized": (
        "SET jit = on",
        "SET jit_above_cost = 0",
        "SET jit_inline_above_cost = 0",
        "SET jit_optimize_above_cost = 0",
    ),
}


def jit_cost(dsn: str, calls: int = 20) -> dict[str, Any]:
    """p50 milliseconds of the stand-in statement in each JIT mode, on the server at
    ``dsn`` (which must have JIT: ``pg_jit_available()``)."""
    import statistics
    import time

    import psycopg

    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.OperationalError as exc:
        raise SystemExit(f"cannot connect to the --jit-dsn server: {exc}") from exc
    with conn:
        row = conn.execute("SELECT pg_jit_available(), version()").fetchone()
        assert row is not None
        if not row[0]:
            raise SystemExit(f"this server has no JIT: {row[1]}")
        conn.execute(
            "CREATE TEMP TABLE f AS SELECT 'g'::text AS g, i AS id, i %% 50000 AS source,"
            " (i * 7) %% 50000 AS target, now() - i * interval '1 minute' AS valid_at,"
            " CASE WHEN i %% 3 = 0 THEN now() + i * interval '1 minute' END AS invalid_at,"
            " 'Person ' || i || ' works at Company ' || (i %% 500) AS fact"
            " FROM generate_series(1, %s) AS i",
            (_STAND_IN_ROWS,),
        )
        conn.execute("CREATE INDEX ON f (g, source, valid_at)")
        conn.execute("CREATE INDEX ON f (g, target, valid_at)")
        conn.execute("ANALYZE f")
        args = ("g", [123, 456], datetime.now(UTC))
        cur = psycopg.RawCursor(conn)
        p50: dict[str, float] = {}
        for mode, settings in _JIT_MODES.items():
            for setting in settings:
                conn.execute(setting)
            times: list[float] = []
            for _ in range(calls):
                start = time.perf_counter()
                # planned on each call: a plan psycopg prepared would keep the JIT choice
                # of the settings it was planned under
                cur.execute(_STAND_IN, args, prepare=False).fetchall()
                times.append((time.perf_counter() - start) * 1000)
            p50[mode] = round(statistics.median(times), 2)
        return {"server": row[1], "p50_ms": p50}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data_dirs", type=Path, nargs="+", help="databases kept by bench.search")
    parser.add_argument("--jit-dsn", help="a server with JIT, to time the compile on")
    args = parser.parse_args(argv)
    kept_databases(parser, args.data_dirs)
    runs = [estimates(d) for d in args.data_dirs]
    print("| facts in the table | search | scope | estimated cost | with JIT on, each call |")
    print("|---:|---|---|---:|---|")
    for run in runs:
        for kind, scopes in run["costs"].items():
            for scope, cost in scopes.items():
                what = crossed(cost, run["thresholds"])
                print(f"| {run['facts_rows']:,} | {kind} | {scope} | {cost:,} | {what} |")
    payload: dict[str, Any] = {"runs": runs}
    if args.jit_dsn:
        payload["jit"] = jit_cost(args.jit_dsn)
        print(f"\nThe stand-in statement on {payload['jit']['server']}, p50 of 20 calls:")
        for mode, ms in payload["jit"]["p50_ms"].items():
            print(f"- JIT {mode}: {ms} ms")
    path = write_result("plans", payload)
    print(f"written to {path}")


if __name__ == "__main__":
    main()

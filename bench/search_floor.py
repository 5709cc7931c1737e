"""The floor of a search: the reads no search can skip, against what a search takes.

    .venv/bin/python -m bench.search_floor /tmp/bench-keep/100000 [--questions 300] [--rounds 3]

On a corpus that ``bench.search --keep`` kept, the big group's questions are asked
two ways, each question both ways in turn (the order alternating), so that both see
the same moment of the machine:

- as ``Memory.search(group, question, limit=10)`` asks them, end to end;
- as the floor: the question embedded, then one prepared statement, planned once,
  that makes the three reads a search of this group cannot do without (the open
  facts' HNSW index for the 30 nearest of the group, the open facts' text index for
  the 30 best matches, the facts around the entities whose names the question holds),
  fuses them by reciprocal rank and reads back the 10 it keeps, as tuples.

The floor leaves out what the library adds to those reads: the tenant's setting and
role (row level security), the periods that close later, the full-text function and
its plan made per call, the facts one hop out, the endpoints' names and the result
objects. Its time is a bound no search of these indexes can beat here; the difference
is what those cost. Printed and written to ``bench/results/search_floor.json``: each
way's p50 and p95, the median of each question's difference, and how many questions
got the same ten facts both ways.

Then, unless ``--no-server-times``, one more pass each way with the server logging the
duration of every statement (``log_min_duration_statement = 0`` for that pass only),
read back from the embedded server's log: the p50 of each statement's bind (for a
plan made once, the plan's check and the executor's start-up) and execute, so that
the difference is placed statement by statement, not guessed from the client
(docs/decisions/034-the-distance-to-the-search-floor.md).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

import timestone
from timestone._arrays import TextArray, register_arrays
from timestone._vectors import keyed
from timestone.search._request import name_ngrams, prepare_search

from ._common import cpu_pace_ms, percentiles, prewarm, write_result
from .search import ONTOLOGY


def floor_statement(dimension: int) -> sql.Composed:
    """The three reads, fused, and the kept rows read back: see the module's text."""
    key = keyed(sql.SQL("f.embedding"), sql.SQL("f.group_id"), dimension)
    asked = keyed(sql.SQL("%(vec)s::vector"), sql.SQL("%(g)s::text"), dimension)
    words = sql.SQL("websearch_to_tsquery('english', %(text)s)")
    around = sql.SQL(
        "SELECT f.version_id, f.embedding <=> %(vec)s::vector AS d FROM seeds AS s"
        " JOIN timestone.facts AS f ON f.group_id = %(g)s AND f.{} = s.id"
        " AND f.expired_at IS NULL AND f.invalid_at IS NULL"
    )
    return sql.SQL(
        "WITH vec AS MATERIALIZED (SELECT v.version_id, row_number() OVER () AS r FROM ("
        "  SELECT f.version_id FROM timestone.facts AS f WHERE f.group_id = %(g)s"
        "  AND f.expired_at IS NULL AND f.invalid_at IS NULL AND f.embedding IS NOT NULL"
        "  ORDER BY {key} <=> {asked} LIMIT %(k)s) AS v),"
        " fts AS MATERIALIZED (SELECT t.version_id, row_number() OVER () AS r FROM ("
        "  SELECT f.version_id FROM timestone.facts AS f WHERE f.fts @@ {words}"
        "  AND f.group_id = %(g)s AND f.expired_at IS NULL AND f.invalid_at IS NULL"
        "  ORDER BY ts_rank_cd(f.fts, {words}) DESC LIMIT %(k)s) AS t),"
        " seeds AS (SELECT DISTINCT e.id FROM timestone.entities AS e WHERE e.group_id = %(g)s"
        "  AND e.expired_at IS NULL AND e.norm_name = ANY(%(names)s::text[])),"
        " graph AS MATERIALIZED (SELECT a.version_id, row_number() OVER (ORDER BY a.d) AS r"
        "  FROM ({source} UNION ALL {target} ORDER BY 2 LIMIT %(k)s) AS a),"
        " top AS (SELECT u.version_id, sum(1.0 / (60 + u.r)) AS s FROM ("
        "  SELECT version_id, r FROM vec UNION ALL SELECT version_id, r FROM fts"
        "  UNION ALL SELECT version_id, r FROM graph) AS u"
        "  GROUP BY u.version_id ORDER BY 2 DESC, 1 LIMIT %(limit)s)"
        " SELECT f.id, f.fact, f.valid_at, f.invalid_at, f.source_id, f.target_id, top.s"
        " FROM top JOIN timestone.facts AS f ON f.group_id = %(g)s"
        " AND f.version_id = top.version_id ORDER BY top.s DESC, f.version_id"
    ).format(
        key=key,
        asked=asked,
        words=words,
        source=around.format(sql.Identifier("source_id")),
        target=around.format(sql.Identifier("target_id")),
    )


# what each statement of the two ways starts with, in the server's log
_STATEMENTS = (
    ("settings", "SELECT set_config('timestone.group_id'"),
    ("full-text list", "WITH fts_all AS MATERIALIZED"),
    ("facts statement", "WITH RECURSIVE fts AS"),
    ("floor statement", "WITH vec AS MATERIALIZED"),
)
_LOGGED = re.compile(r"duration: ([0-9.]+) ms  (bind|execute) [^:]*: (.*)")


def server_log(conn: psycopg.Connection[Any]) -> Path | None:
    """The embedded server's log file (``pg/log`` beside its data), None elsewhere."""
    row = conn.execute("SELECT current_setting('data_directory')").fetchone()
    found = Path(str(row[0])) / "log" if row is not None else None
    return found if found is not None and found.is_file() else None


def server_times(logged: str) -> dict[str, dict[str, float]]:
    """The p50 of each statement's bind and execute in ``logged`` (the server's log)."""
    samples: dict[str, dict[str, list[float]]] = {}
    for took, phase, text in _LOGGED.findall(logged):
        name = next((n for n, start in _STATEMENTS if text.startswith(start)), None)
        if name is not None:
            samples.setdefault(name, {}).setdefault(phase, []).append(float(took))
    return {
        name: {phase: round(statistics.median(v), 3) for phase, v in phases.items()}
        for name, phases in samples.items()
    }


def _logging_all(conn: psycopg.Connection[Any], on: bool) -> None:
    """Every statement's duration in the log (``on``) or the server's own setting back;
    a reload reaches the sessions already open (the pool's)."""
    if on:
        conn.execute("ALTER SYSTEM SET log_min_duration_statement = 0")
    else:
        conn.execute("ALTER SYSTEM RESET log_min_duration_statement")
    conn.execute("SELECT pg_reload_conf()")
    time.sleep(0.2)  # each backend reads the reload before its next statement


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data_dir", type=Path, help="a corpus kept by bench.search --keep")
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--no-server-times",
        action="store_true",
        help="skip the pass that reads each statement's bind and execute from the server's log",
    )
    args = parser.parse_args(argv)
    built = args.data_dir / "corpus.json"
    if not built.exists():
        parser.error(f"{built} not found: keep a corpus first (bench.search --keep DIR)")
    if args.questions < 10 or args.rounds < 1:
        parser.error("--questions must be at least 10 and --rounds at least 1")
    corpus = json.loads(built.read_text())
    group: str = corpus["group"]
    pairs: list[list[str]] = corpus["questions"]
    questions = [q for q, _ in random.Random(11).sample(pairs, min(args.questions, len(pairs)))]
    mem = timestone.Memory.open(data_dir=args.data_dir, ontology=ONTOLOGY)
    try:
        statement = floor_statement(mem.embedder.dimension).as_string(None)
        conn = psycopg.connect(mem.dsn, autocommit=True)
        register_vector(conn)
        register_arrays(conn)
        prewarm(conn)
        # a search's own settings (``search._run_async``), for the session: a list of 30 reads
        # the HNSW index as far as ef_search 40; one plan for every call
        conn.execute("SET hnsw.ef_search = 40")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        conn.execute("SET jit = off")
        conn.execute("SET plan_cache_mode = force_generic_plan")

        def floor(question: str) -> list[str]:
            req = prepare_search(question, limit=10)
            params = {
                "g": group,
                "vec": np.asarray(mem.embedder.embed([question])[0], dtype=np.float32),
                "text": question,
                "names": TextArray(name_ngrams(question)),
                "k": req.candidates,
                "limit": req.limit,
            }
            rows = conn.execute(statement, params, prepare=True).fetchall()  # pyright: ignore[reportArgumentType]
            return [str(row[0]) for row in rows]

        def search(question: str) -> list[str]:
            return [str(f.id) for f in mem.search(group, question, limit=10).facts]

        ways: dict[str, Callable[[str], list[str]]] = {"search": search, "floor": floor}
        for way in ways.values():  # warm: plans, caches
            for question in questions[:40]:
                way(question)
        answers = [(search(q), floor(q)) for q in questions]
        same = sum(a == b for a, b in answers)
        same_set = sum(set(a) == set(b) for a, b in answers)
        pace = [cpu_pace_ms()]
        rounds: list[dict[str, Any]] = []
        for r in range(args.rounds):
            took: dict[str, list[float]] = {name: [] for name in ways}
            for i, question in enumerate(questions):
                order = list(ways) if (i + r) % 2 == 0 else list(reversed(ways))
                for name in order:
                    start = time.perf_counter()
                    ways[name](question)
                    took[name].append((time.perf_counter() - start) * 1000)
            gap = statistics.median(
                s - f for s, f in zip(took["search"], took["floor"], strict=True)
            )
            searched, floored = percentiles(took["search"]), percentiles(took["floor"])
            rounds.append({"search": searched, "floor": floored, "median_gap_ms": round(gap, 3)})
            print(
                f"round {r + 1}: search p50 {searched['p50_ms']} p95 {searched['p95_ms']} ms,"
                f" floor p50 {floored['p50_ms']} p95 {floored['p95_ms']} ms,"
                f" each question's gap (median) {gap:.2f} ms",
                flush=True,
            )
        pace.append(cpu_pace_ms())
        server: dict[str, dict[str, float]] = {}
        log = None if args.no_server_times else server_log(conn)
        if log is None and not args.no_server_times:
            print("no server times: the server's log is not a file beside its data here")
        if log is not None:
            start = log.stat().st_size
            _logging_all(conn, True)
            try:
                for question in questions:
                    for way in ways.values():
                        way(question)
            finally:
                _logging_all(conn, False)
            with log.open("rb") as f:
                f.seek(start)
                server = server_times(f.read().decode(errors="replace"))
            for name, phases in server.items():
                print(
                    f"server, {name}: bind {phases.get('bind', 0):.3f} ms,"
                    f" execute {phases.get('execute', 0):.3f} ms (p50)"
                )
        conn.close()
    finally:
        mem.close()
    print(
        f"pace {pace[0]} to {pace[1]} ms; the same ten facts for {same_set} of {len(questions)}"
        f" questions ({same} in the same order)"
    )
    write_result(
        "search_floor",
        {
            "data_dir": str(args.data_dir),
            "facts_written": corpus.get("written"),
            "questions": len(questions),
            "cpu_pace_ms_before_after": pace,
            "same_ten": same_set,
            "same_ten_in_order": same,
            "rounds": rounds,
            "server_ms": server,
        },
    )


if __name__ == "__main__":
    main()

"""Wear of the HNSW indexes under churn: what it does to searches, and what
``Memory.vector_index_health()`` says of it.

    mkdir -p /tmp/bench-wear && cp -a /tmp/bench-keep/100000 /tmp/bench-wear/
    .venv/bin/python -m bench.wear /tmp/bench-wear/100000

The argument is a database kept by ``bench.search --keep DIR`` (``DIR/<size>``),
worn in place (hence the copy), then rebuilt. Its tables and indexes are first
loaded into the buffer cache (``pg_prewarm``, as ``bench.search`` does). Each
round, a churn tenant writes ``--churn`` facts in plain ``add_facts`` calls of
1,000 (each row inserted into the HNSW indexes as it comes), a new tenant of
``NEW_FACTS`` facts is written after it, and both are purged and the tables
vacuumed, as autovacuum would (the vacuum relinks the graph around the erased
rows). Before each round's purge it asks 100 questions (after 20 untimed ones) of
three groups: the big group (built in bulk, its neighbourhood worn around it), a
tenant of ``FIXED_FACTS`` facts written once before the first round (worn as it
ages) and the round's new tenant (inserted into the worn graph). Reported for each
round: the facts written and erased so far (as a share of the table's live rows),
the health figure of each index, and each group's p50 / p95 and the recall@10 of
its answers. At the end every index is rebuilt (``Memory.rebuild_vector_indexes()``)
and the groups are asked again: the database is left rebuilt, with the fixed
tenant purged.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import timestone
from timestone import FactInput

from ._common import cpu_pace_ms, kept_databases, percentiles, prewarm, write_result
from .search import ONTOLOGY, ask, people

ROUNDS = 10
CHURN_FACTS = 10_000
NEW_FACTS = 2_800  # past the exact-ranking bound (1,000 current facts)
FIXED_FACTS = 2_800
QUESTIONS = 100
WARM = 20
CALL = 1_000
REFERENCE = datetime(2025, 1, 1, tzinfo=UTC)
INDEXES = ("facts_embedding_hnsw", "facts_embedding_closed_hnsw", "entities_name_embedding_hnsw")


def _corpus(n: int, seed: int) -> tuple[list[FactInput], list[tuple[str, str]]]:
    facts: list[FactInput] = []
    questions: list[tuple[str, str]] = []
    for person_facts, asked in people(n, seed=seed):
        facts.extend(person_facts)
        questions.extend(asked)
    return facts, questions


def _write(mem: timestone.Memory, group: str, facts: Sequence[FactInput]) -> list[Any]:
    return [
        mem.add_facts(group, facts[start : start + CALL], reference_time=REFERENCE).episode.id
        for start in range(0, len(facts), CALL)
    ]


def _asked(mem: timestone.Memory, group: str, pairs: Sequence[tuple[str, str]]) -> dict[str, float]:
    chosen = random.Random(23).sample(list(pairs), min(QUESTIONS + WARM, len(pairs)))
    questions, answers = [q for q, _ in chosen], [a for _, a in chosen]
    ask(mem, group, questions[:WARM])
    latencies, found = ask(mem, group, questions[WARM:])
    hits = sum(a in f for a, f in zip(answers[WARM:], found, strict=True))
    return {**percentiles(latencies), "recall_at_10": round(hits / len(found), 3)}


def _vacuum(dsn: str) -> float:
    start = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in ("facts", "entities", "episodes", "mentions", "assertions"):
            conn.execute(sql.SQL("VACUUM timestone.{}").format(sql.Identifier(table)))
    return time.perf_counter() - start


def _live_facts(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'timestone.facts'::regclass"
        ).fetchone()
    return int(row[0]) if row else 0


def _measure(
    mem: timestone.Memory, groups: Mapping[str, tuple[str, Sequence[tuple[str, str]]]]
) -> dict[str, Any]:
    health = mem.vector_index_health()
    return {
        "health": {name: health.get(name) for name in INDEXES},
        **{label: _asked(mem, group, pairs) for label, (group, pairs) in groups.items()},
    }


def run(data_dir: Path, rounds: int, churn: int) -> dict[str, Any]:
    corpus = json.loads((data_dir / "corpus.json").read_text())
    big: str = corpus["group"]
    big_pairs = [pair for _, pairs in people(int(data_dir.name)) for pair in pairs]
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    fixed = f"{big}-wear-fixed-{stamp}"
    fixed_facts, fixed_pairs = _corpus(FIXED_FACTS, seed=61)
    rows: list[dict[str, Any]] = []
    with timestone.Memory.open(data_dir=data_dir, ontology=ONTOLOGY) as mem:
        with psycopg.connect(mem.dsn, autocommit=True) as conn:
            prewarm(conn)
        pace_before = cpu_pace_ms()
        table = _live_facts(mem.dsn)
        fixed_episodes = _write(mem, fixed, fixed_facts)
        vacuum_s = _vacuum(mem.dsn)
        groups = {"big": (big, big_pairs), "fixed": (fixed, fixed_pairs)}
        rows.append(
            {"round": 0, "churned": 0, "vacuum_s": round(vacuum_s, 1), **_measure(mem, groups)}
        )
        print(rows[-1], flush=True)
        churned = 0
        for r in range(1, rounds + 1):
            churn_group = f"{big}-wear-churn-{stamp}-{r}"
            new_group = f"{big}-wear-new-{stamp}-{r}"
            churn_facts, _ = _corpus(churn, seed=100 + r)
            new_facts, new_pairs = _corpus(NEW_FACTS, seed=200 + r)
            start = time.perf_counter()
            written = [(churn_group, e) for e in _write(mem, churn_group, churn_facts)]
            written += [(new_group, e) for e in _write(mem, new_group, new_facts)]
            write_s = time.perf_counter() - start
            measured = _measure(mem, {**groups, "new": (new_group, new_pairs)})
            for group, episode in written:
                mem.purge_episode(group, episode)
            churned += len(churn_facts) + len(new_facts)
            rows.append(
                {
                    "round": r,
                    "churned": churned,
                    "churned_share": round(churned / table, 2),
                    "write_s": round(write_s, 1),
                    "vacuum_s": round(_vacuum(mem.dsn), 1),
                    **measured,
                }
            )
            print(rows[-1], flush=True)
        start = time.perf_counter()
        seconds = mem.rebuild_vector_indexes()
        rebuilt = {
            "round": "rebuilt",
            "churned": churned,
            "churned_share": round(churned / table, 2),
            "rebuild_s": {name: round(s, 1) for name, s in seconds.items()},
            **_measure(mem, groups),
        }
        rows.append(rebuilt)
        print(rebuilt, flush=True)
        for episode in fixed_episodes:
            mem.purge_episode(fixed, episode)
        pace_after = cpu_pace_ms()
    return {
        "data_dir": str(data_dir),
        "facts_in_table": table,
        "churn_per_round": churn,
        "new_tenant_facts": NEW_FACTS,
        "fixed_tenant_facts": FIXED_FACTS,
        "cpu_pace_ms_before_after": [pace_before, pace_after],
        "rounds": rows,
    }


def _cell(measured: dict[str, Any] | None) -> str:
    if not measured:
        return "-"
    return f"{measured['p50_ms']} / {measured['p95_ms']} ({measured['recall_at_10']})"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data_dir", type=Path, help="a database kept by bench.search")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--churn", type=int, default=CHURN_FACTS, help="facts a round")
    args = parser.parse_args(argv)
    kept_databases(parser, [args.data_dir])
    if args.rounds < 1 or args.churn < CALL:
        parser.error(f"--rounds must be at least 1 and --churn at least {CALL}")
    result = run(args.data_dir, args.rounds, args.churn)
    print(
        "| round | written and erased (share of the table) | rows each index finds"
        " (open facts, closed facts, entity names) | big group p50 / p95 ms (recall@10)"
        " | fixed tenant | new tenant |"
    )
    print("|---|---:|---|---|---|---|")
    for row in result["rounds"]:
        health = ", ".join(str(row["health"][n]) for n in INDEXES)
        print(
            f"| {row['round']} | {row['churned']:,} ({row.get('churned_share', 0)}) | {health} |"
            f" {_cell(row.get('big'))} | {_cell(row.get('fixed'))} | {_cell(row.get('new'))} |"
        )
    path = write_result(f"wear-{args.data_dir.name}", result)
    print(f"written to {path}")


if __name__ == "__main__":
    main()

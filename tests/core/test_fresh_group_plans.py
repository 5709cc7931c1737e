"""A group the planner's statistics have not seen yet.

Statistics gathered while a database held one tenant say that any other group has no
rows: the planner estimates such a group at one row, whatever it holds, and every index
that starts with ``group_id`` then costs the same to it. Reads that probe the group once
per slot or per entity (a write's slot reads, the component a community update walks)
took an index keyed on the group alone and read the whole group at each probe: a
removal of a 1,000-fact episode took 9 s, the walk of one component of a community
repair 1.1 s.
These reads keep the group's value out of the planner's sight (an ``InitPlan``), so it
estimates an average group and probes by the slot's or the entity's key. Each plan is
read here under such statistics: no scan of facts or assertions repeated per row is
keyed by the group alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import psycopg
from psycopg import sql

import timestone
from timestone import EdgeType, FactInput, Ontology
from timestone.graph import _communities
from timestone.write import _facts

T0 = datetime(2020, 1, 1, tzinfo=UTC)
ONE = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
TABLES = ("episodes", "entities", "mentions", "assertions", "facts")


def _people(prefix: str, n: int, periods: int) -> list[FactInput]:
    return [
        FactInput(
            f"{prefix} {i}", "WORKS_AT", f"Firm {(i + k) % 7}", valid_at=T0 + k * timedelta(days=30)
        )
        for i in range(n)
        for k in range(periods)
    ]


def _repeated_scans(plan: dict[str, Any], repeated: bool = False) -> Iterator[dict[str, Any]]:
    """The index scans of facts and assertions that run once per row of something else:
    below the inner side of a nested loop, or in a subplan."""
    scan = plan["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Index Scan")
    if repeated and scan and str(plan.get("Index Name", "")).startswith(("facts_", "assertions_")):
        yield plan
    for child in plan.get("Plans", ()):
        inner = plan["Node Type"] == "Nested Loop" and child.get("Parent Relationship") == "Inner"
        subplan = child.get("Parent Relationship") == "SubPlan"
        yield from _repeated_scans(child, repeated or inner or subplan)


def _probes_by_the_group_alone(plan: dict[str, Any]) -> list[str]:
    """Scans repeated per row whose index condition is the group alone: each reads the
    whole group."""
    return [
        f"{scan['Index Name']}: {scan.get('Index Cond', '')}"
        for scan in _repeated_scans(plan)
        if not any(key in scan.get("Index Cond", "") for key in ("source_id", "target_id"))
    ]


def _explain(conn: psycopg.Connection[Any], query: sql.Composable, params: dict[str, Any]) -> Any:
    with conn.cursor(binary=True) as cur:
        cur.execute(sql.SQL("EXPLAIN (FORMAT JSON) {}").format(query), params)
        row = cast(dict[str, Any], cur.fetchone())
    return next(iter(row.values()))[0]["Plan"]


def test_reads_by_slot_and_by_entity_probe_their_key_in_a_group_the_statistics_miss(
    fresh_dsn: str,
) -> None:
    with timestone.Memory.open(fresh_dsn, ontology=ONE) as mem:
        mem.add_facts("known", _people("Known", 300, 3), reference_time=T0)
    with psycopg.connect(fresh_dsn, autocommit=True) as owner:
        # tables of some size (copies of its facts under new sources, with no vectors to
        # index), where an index on fewer columns costs less to descend
        for table, new in (
            ("facts", ("version_id", "id", "source_id")),
            ("assertions", ("version_id", "id", "source_id")),
        ):
            columns = [
                row[0]
                for row in owner.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass"
                    " AND attnum > 0 AND NOT attisdropped AND attgenerated = ''"
                    " AND attname <> 'embedding' ORDER BY attnum",
                    (f"timestone.{table}",),
                )
            ]
            owner.execute(
                sql.SQL(
                    "INSERT INTO timestone.{t} ({cols}) SELECT {vals}"
                    " FROM timestone.{t} CROSS JOIN generate_series(1, 40)"
                ).format(
                    t=sql.Identifier(table),
                    cols=sql.SQL(", ").join(map(sql.Identifier, columns)),
                    vals=sql.SQL(", ").join(
                        sql.SQL("gen_random_uuid()") if c in new else sql.Identifier(c)
                        for c in columns
                    ),
                )
            )
        for table in TABLES:  # statistics that know "known" alone, and stay so
            owner.execute(
                sql.SQL("ALTER TABLE timestone.{} SET (autovacuum_enabled = false)").format(
                    sql.Identifier(table)
                )
            )
            owner.execute(sql.SQL("ANALYZE timestone.{}").format(sql.Identifier(table)))
    # a memory of its own: its writes stay under the mark where the library analyzes
    with timestone.Memory.open(fresh_dsn, ontology=ONE) as mem:
        mem.add_facts("unseen", _people("Unseen", 300, 3), reference_time=T0)
        people = mem.facts("unseen", relation="WORKS_AT", limit=1000)
        assert len(people) == 300
        sources = [f.source_id for f in people]
        with mem._db.transaction("unseen", "reading plans") as conn:  # pyright: ignore[reportPrivateUsage]
            # tables this small are cheaper to scan than to probe: what is read here is
            # which index the planner probes, as it does in a large table
            conn.execute("SET LOCAL enable_seqscan = off")
            estimate = _explain(
                conn,
                sql.SQL("SELECT * FROM timestone.facts WHERE group_id = %(g)s"),
                {"g": "unseen"},
            )
            # the premise: the planner takes the group for (about) one row
            assert estimate["Plan Rows"] < 10, estimate["Plan Rows"]
            slots = {
                "g": "unseen",
                "sources": sources,
                "relations": ["WORKS_AT"] * len(sources),
                "targets": [None] * len(sources),
                "since": [None] * len(sources),
                "until": [None] * len(sources),
                "others": [True] * len(sources),
            }
            windows = {
                "g": "unseen",
                "sources": sources,
                "relations": ["WORKS_AT"] * len(sources),
                "earliest": [T0] * len(sources),
                "latest": [T0] * len(sources),
            }
            plans = {
                "slot assertions": _explain(
                    conn,
                    _facts._SLOT_ASSERTIONS,  # pyright: ignore[reportPrivateUsage]
                    {**slots, "episode": None},
                ),
                "slot facts": _explain(conn, _facts._SLOT_FACTS, slots),  # pyright: ignore[reportPrivateUsage]
                "windows": _explain(conn, sql.SQL(_facts._WINDOWS), windows),  # pyright: ignore[reportPrivateUsage]
                "community component": _explain(
                    conn,
                    _communities._COMPONENT,  # pyright: ignore[reportPrivateUsage]
                    {"g": "unseen", "seeds": sources[:5]},
                ),
            }
    assert {name: _probes_by_the_group_alone(plan) for name, plan in plans.items()} == {
        name: [] for name in plans
    }

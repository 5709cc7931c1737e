"""Writes on the distributed schema: the library writing to the shards (``make test-citus``)."""

from __future__ import annotations

import io
import itertools
import json
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import DictRow, dict_row

import timestone
from timestone.db import _database as sync_db
from timestone.db._distributed import run_script
from timestone.db._distributed_async import citus_tenant_settings, split_statements
from timestone.distributed import Distribution
from timestone.errors import TimestoneError
from timestone.graph import _communities_async as _communities
from timestone.llm import ReplayTransport, replay_llm
from timestone.write import _facts_async as _facts
from tools.citus.cluster import Cluster, Node

pytestmark = pytest.mark.citus
MIRA = "t-mira"  # written by the conftest before distributing


def _day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _group() -> str:
    return "t-" + uuid.uuid4().hex[:12]


def test_writes_reach_the_shards_and_fight_their_dates_there(memory: timestone.Memory) -> None:
    group = _group()
    for year, place in ((2019, "Nord"), (2023, "Sud"), (2021, "Ouest")):
        memory.add_facts(
            group,
            [{"source": "Ana", "relation": "DIRECTS", "target": place}],
            reference_time=_day(f"{year}-01-01"),
        )
    periods = sorted(
        (f.valid_at, f.invalid_at, f.fact)
        for f in memory.facts(group, relation="DIRECTS", valid_at=None)
    )
    assert periods == [
        (_day("2019-01-01"), _day("2021-01-01"), "Ana directs Nord."),
        (_day("2021-01-01"), _day("2023-01-01"), "Ana directs Ouest."),
        (_day("2023-01-01"), None, "Ana directs Sud."),
    ]
    assert next(f.fact for f in memory.search(group, "Who directs what?").facts) == (
        "Ana directs Sud."
    )


def test_removal_rollback_and_a_copy_of_a_group(memory: timestone.Memory) -> None:
    group = _group()
    first = memory.add_facts(
        group,
        [{"source": "Ana", "relation": "DIRECTS", "target": "Nord"}],
        reference_time=_day("2019-01-01"),
    )
    before_second = datetime.now(UTC)
    second = memory.add_facts(
        group,
        [{"source": "Ana", "relation": "DIRECTS", "target": "Sud"}],
        reference_time=_day("2023-01-01"),
    )
    memory.remove_episode(group, second.episode.id)
    assert [f.fact for f in memory.facts(group)] == ["Ana directs Nord."]
    memory.add_facts(
        group,
        [{"source": "Ana", "relation": "KNOWS", "target": "Bo"}],
        reference_time=_day("2024-01-01"),
    )
    memory.rollback(group, to=before_second)
    assert [f.fact for f in memory.facts(group)] == ["Ana directs Nord."]
    out = io.StringIO()
    memory.export_group(group, out)
    copy = _group()
    memory.import_group(out.getvalue().splitlines(), group_id=copy)
    assert [f.fact for f in memory.facts(copy)] == ["Ana directs Nord."]
    assert first.episode.id in {e.id for e in memory.episodes(copy)}


def test_eight_writers_at_once_leave_one_timeline(
    cluster: Cluster, distribution: Distribution, open_memory: Callable[[str], timestone.Memory]
) -> None:
    group = _group()
    errors: list[BaseException] = []
    with open_memory(cluster.dsn) as mem:

        def write(i: int) -> None:
            try:
                mem.add_facts(
                    group,
                    [
                        {"source": "Ana", "relation": "DIRECTS", "target": f"Place {i}"},
                        {"source": f"Writer {i}", "relation": "KNOWS", "target": "Ana"},
                    ],
                    reference_time=_day("2010-01-01") + timedelta(days=100 * i),
                )
            except BaseException as exc:  # reported below, in the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        periods = sorted(
            (f.valid_at, f.invalid_at, f.fact)
            for f in mem.facts(group, relation="DIRECTS", valid_at=None)
        )
        knows = mem.facts(group, relation="KNOWS")
    assert [p[2] for p in periods] == [f"Ana directs Place {i}." for i in range(8)]
    for (_, ends, _), (starts, _, _) in itertools.pairwise(periods):
        assert ends == starts  # each period ends where the next begins
    assert periods[-1][1] is None
    assert len(knows) == 8


def _explain_tasks(cluster: Cluster, group: str, query: sql.Composable, params: object) -> str:
    with psycopg.connect(cluster.dsn) as conn:
        conn.execute("SET ROLE timestone_app")
        for statement in citus_tenant_settings(group):
            conn.execute(statement)
        cur = conn.cursor(binary=True)
        cur.execute(sql.SQL("EXPLAIN ") + query, params)  # pyright: ignore[reportArgumentType]
        return "\n".join(str(r[0]) for r in cur.fetchall())


def test_the_date_fight_and_the_walk_of_a_group_are_one_task(
    cluster: Cluster, memory: timestone.Memory
) -> None:
    mira = memory.get_entity(MIRA, "Mira")
    assert mira is not None
    slots: dict[str, object] = {
        "g": MIRA,
        "sources": [mira.id],
        "relations": ["DIRECTS"],
        "targets": [None],
        "since": [None],
        "until": [None],
        "others": [True],
        "episode": None,
        "earliest": [_day("2015-01-01")],
        "latest": [_day("2024-01-01")],
    }
    reads, windows = _facts._READS_ROUTED, _facts._WINDOWS_ROUTED  # pyright: ignore[reportPrivateUsage]
    walk = _communities._COMPONENT_ROUTED  # pyright: ignore[reportPrivateUsage]
    plans = {
        "slot assertions": _explain_tasks(cluster, MIRA, reads[0], slots),
        "slot facts": _explain_tasks(cluster, MIRA, reads[1], slots),
        "windows": _explain_tasks(cluster, MIRA, sql.SQL(windows), slots),
        "walk": _explain_tasks(cluster, MIRA, walk, {"g": MIRA, "seeds": [mira.id]}),
    }
    for name, plan in plans.items():
        assert "Task Count: 1\n" in plan + "\n", (name, plan[:1500])


def _holder(cluster: Cluster, group: str) -> Node:
    """The worker that holds ``group``'s shards."""
    with psycopg.connect(cluster.dsn) as conn:
        row = conn.execute(
            "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid ="
            " get_shard_id_for_distribution_column('timestone.facts', %s::text)",
            (group,),
        ).fetchone()
    assert row is not None
    return next(n for n in cluster.worker_nodes if n.port == row[0])


def test_a_group_moved_to_the_other_worker_reads_the_same(
    cluster: Cluster, memory: timestone.Memory
) -> None:
    def read() -> tuple[object, ...]:
        facts = sorted(
            (f.fact, f.valid_at, f.invalid_at) for f in memory.facts(MIRA, valid_at=None)
        )
        found = [f.fact for f in memory.search(MIRA, "Which chateau does Mira direct?").facts]
        return (facts, found)

    before, source = read(), _holder(cluster, MIRA)
    target = next(n for n in cluster.worker_nodes if n is not source)
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT citus_move_shard_placement("
            " get_shard_id_for_distribution_column('timestone.facts', %s::text),"
            " '127.0.0.1', %s, '127.0.0.1', %s, shard_transfer_mode => 'block_writes')",
            (MIRA, source.port, target.port),
        )
    assert _holder(cluster, MIRA) is target
    assert read() == before


def test_a_write_to_a_stopped_worker_fails_whole_and_succeeds_after_its_restart(
    cluster: Cluster, memory: timestone.Memory
) -> None:
    group = _group()
    memory.add_facts(
        group,
        [{"source": "Ana", "relation": "DIRECTS", "target": "Nord"}],
        reference_time=_day("2019-01-01"),
    )
    holder = _holder(cluster, group)
    facts = [{"source": "Ana", "relation": "DIRECTS", "target": "Sud"}]
    cluster.stop_node(holder)
    try:
        with pytest.raises(TimestoneError, match=f"127.0.0.1:{holder.port}"):
            memory.add_facts(group, facts, reference_time=_day("2023-01-01"))
    finally:
        cluster.start_node(holder)
    assert [f.fact for f in memory.facts(group)] == ["Ana directs Nord."]  # nothing partial
    memory.add_facts(group, facts, reference_time=_day("2023-01-01"))
    assert [f.fact for f in memory.facts(group)] == ["Ana directs Sud."]


def test_a_migration_runs_on_the_distributed_schema(
    cluster: Cluster, distribution: Distribution
) -> None:
    script = (
        b"-- a later migration: an index; and a comment; on a distributed table\n"
        b"CREATE INDEX facts_test_relation ON timestone.facts (group_id, relation);\n"
        b"COMMENT ON INDEX timestone.facts_test_relation IS 'built; then dropped';\n"
        b"DROP INDEX timestone.facts_test_relation;\n"
    )
    with psycopg.connect(cluster.dsn) as conn:
        with pytest.raises(psycopg.Error, match="multiple commands"):
            conn.execute(script)  # as one query, Citus refuses it
        conn.rollback()
    with psycopg.Connection[DictRow].connect(cluster.dsn, row_factory=dict_row) as conn:
        run_script(conn, script, True)
        assert conn.execute(
            "SELECT to_regclass('timestone.facts_test_relation') AS i"
        ).fetchone() == {"i": None}


def test_split_statements_keeps_quoted_semicolons() -> None:
    script = (
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $fn$ SELECT 1; $fn$;\n"
        "-- a comment; with a semicolon\n"
        "SELECT 'a;b', \"c;d\" FROM t; /* e; */\n"
    )
    assert split_statements(script) == [
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $fn$ SELECT 1; $fn$",
        "-- a comment; with a semicolon\nSELECT 'a;b', \"c;d\" FROM t",
    ]


def test_a_tenant_isolated_to_its_own_shard_reads_the_same(
    cluster: Cluster, memory: timestone.Memory
) -> None:
    group = _group()
    memory.add_facts(
        group,
        [
            {"source": "Ana", "relation": "DIRECTS", "target": "Nord"},
            {"source": "Ana", "relation": "KNOWS", "target": "Bo"},
        ],
        reference_time=_day("2019-01-01"),
    )

    def read() -> tuple[object, ...]:
        facts = sorted((f.fact, f.valid_at) for f in memory.facts(group, valid_at=None))
        found = [f.fact for f in memory.search(group, "Whom does Ana know?").facts]
        return (facts, found)

    before = read()
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        shard = conn.execute(
            "SELECT isolate_tenant_to_new_shard('timestone.episodes', %s::text,"
            " cascade_option => 'CASCADE', shard_transfer_mode => 'block_writes')",
            (group,),
        ).fetchone()
        rows = conn.execute(
            "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'timestone.episodes'::regclass"
            " AND shardid = get_shard_id_for_distribution_column('timestone.episodes', %s::text)"
            " AND shardminvalue = shardmaxvalue",
            (group,),
        ).fetchone()
    assert shard is not None
    assert rows == (1,)  # a shard whose hash range is the group's hash alone
    assert read() == before
    memory.add_facts(
        group,
        [{"source": "Ana", "relation": "DIRECTS", "target": "Sud"}],
        reference_time=_day("2023-01-01"),
    )
    assert [f.fact for f in memory.facts(group, relation="DIRECTS")] == ["Ana directs Sud."]


def test_the_library_role_logs_in_on_every_node_and_bypasses_no_policy(
    cluster: Cluster, distribution: Distribution
) -> None:
    for node in cluster.nodes:
        with psycopg.connect(node.dsn()) as conn:
            row = conn.execute(
                "SELECT rolcanlogin, rolbypassrls, rolsuper FROM pg_roles"
                " WHERE rolname = 'timestone_app'"
            ).fetchone()
        assert row == (True, False, False), node.name


EXTRACTION_ONTOLOGY = timestone.Ontology(
    entity_types=[
        timestone.EntityType(name)
        for name in ("Person", "Winery", "Grape", "Organization", "Place")
    ],
    edge_types=[
        timestone.EdgeType(name, cardinality="one")
        for name in ("DIRECTS", "WORKS_AT", "WORKS_WITH_GRAPE")
    ],
)
LLM_FIXTURES = Path(__file__).parents[1] / "fixtures" / "llm"
MIRA_TEXT = Path(__file__).resolve().parents[2] / "examples" / "data" / "mira.jsonl"


def test_episodes_told_as_text_are_extracted_and_fought_on_the_shards(
    cluster: Cluster, distribution: Distribution
) -> None:
    transport = ReplayTransport()
    transport.extend(json.loads((LLM_FIXTURES / "mira.json").read_text())["responses"])
    group = _group()
    with timestone.Memory.open(
        cluster.dsn,
        embedder=timestone.HashEmbedder(16),
        ontology=EXTRACTION_ONTOLOGY,
        warm=False,
        pool_size=2,
        llm=replay_llm(transport, backoff=0.0),
    ) as mem:
        for line in MIRA_TEXT.read_text().splitlines():
            if line.strip():
                told = json.loads(line)
                mem.add_episode(
                    group,
                    told["content"],
                    reference_time=datetime.fromisoformat(told["reference_time"]),
                    name=told["name"],
                )
        [now] = mem.facts(group, source="Mira", relation="DIRECTS")
        [then] = mem.facts(
            group, source="Mira", relation="DIRECTS", valid_at=datetime(2019, 6, 1, tzinfo=UTC)
        )
        context = mem.context(group, "Which winery does Mira direct?")
    transport.check()
    assert now.target == "Château Sud"
    assert then.target == "Château Nord"
    assert any("Château Sud" in item.text for item in context.items)


def test_a_bulk_load_on_the_cluster_rebuilds_the_shards_indexes(
    cluster: Cluster, memory: timestone.Memory
) -> None:
    group = _group()
    # the load's end sizes the index builds from every group's rows, as the owner: a
    # maintenance statement over every shard, by nature (the guard is the conftest's)
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        conn.execute("ALTER DATABASE timestone RESET citus.multi_task_query_log_level")
    try:
        with memory.bulk_load():
            memory.add_facts(
                group,
                [
                    {"source": f"Person {i}", "relation": "DIRECTS", "target": f"Winery {i}"}
                    for i in range(50)
                ],
                reference_time=_day("2020-01-01"),
            )
    finally:
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            conn.execute("ALTER DATABASE timestone SET citus.multi_task_query_log_level = 'error'")
    with psycopg.connect(cluster.dsn) as conn:
        conn.execute("SET citus.multi_task_query_log_level = 'off'")  # every shard, on purpose
        shard_indexes = conn.execute(
            "SELECT count(*) FROM run_command_on_shards('timestone.facts',"
            " $$SELECT count(*) FROM pg_index WHERE indrelid = '%s'::regclass"
            " AND indexrelid::regclass::text LIKE '%%facts_embedding_hnsw_%%'$$)"
            " WHERE result = '1'"
        ).fetchone()
        shards = conn.execute(
            "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'timestone.facts'::regclass"
        ).fetchone()
    assert shard_indexes == shards  # every shard has its HNSW index again
    found = memory.search(group, "Who directs Winery 7?")
    assert found.facts[0].fact == "Person 7 directs Winery 7."


def test_a_worker_stopped_in_the_middle_of_a_write_leaves_nothing_of_it(
    cluster: Cluster, memory: timestone.Memory
) -> None:
    group = _group()
    memory.add_facts(
        group,
        [{"source": "Ana", "relation": "DIRECTS", "target": "Nord"}],
        reference_time=_day("2019-01-01"),
    )
    holder = _holder(cluster, group)
    db = memory._db  # pyright: ignore[reportPrivateUsage]

    def write_while_the_worker_stops() -> None:
        with db.transaction(group, "ending a current version") as conn:
            conn.execute(
                "UPDATE timestone.facts SET expired_at = %s"
                " WHERE group_id = %s AND expired_at IS NULL",
                (datetime.now(UTC), group),
            )
            cluster.stop_node(holder)  # the write's transaction is open on it
            conn.execute("SELECT count(*) FROM timestone.facts WHERE group_id = %s", (group,))

    try:
        with pytest.raises(TimestoneError, match=f"ending a current version: .*:{holder.port}"):
            write_while_the_worker_stops()
    finally:
        if not holder.started:
            cluster.start_node(holder)
    assert [f.fact for f in memory.facts(group)] == ["Ana directs Nord."]  # nothing of it


def test_the_record_of_facts_text_migration_runs_on_the_shards(
    cluster: Cluster, memory: timestone.Memory
) -> None:
    """Migration 0042 (the episodes' text columns made again, their statistics counted
    again: statements of every shard) run by the upgrade of a distributed schema whose
    database refuses multi-shard statements, over a group's rows already on the shards:
    the record of facts holds its facts' words, the statistics equal a recount, and
    the group is searched as before."""
    group = _group()
    memory.add_facts(
        group,
        [{"source": "Ana", "relation": "DIRECTS", "target": "Nord"}],
        reference_time=_day("2019-01-01"),
    )
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        conn.execute("UPDATE timestone.meta SET value = '41' WHERE key = 'schema_version'")
    # as an open of a schema-41 cluster does: 0042 and every later migration
    assert sync_db.migrate(cluster.dsn) == sync_db.SCHEMA_VERSION
    with psycopg.Connection[DictRow].connect(cluster.dsn, row_factory=dict_row) as conn:
        record = conn.execute(
            "SELECT array_to_string(tsvector_to_array(fts), ' ') AS words, fts_words"
            " FROM timestone.episodes WHERE group_id = %s AND source = 'facts'",
            (group,),
        ).fetchone()
        held = conn.execute(
            "SELECT lexeme, sum(docs)::int AS docs, sum(length)::int AS length"
            " FROM timestone.term_stats WHERE group_id = %s AND kind = 'episodes'"
            " GROUP BY lexeme HAVING sum(docs) <> 0 ORDER BY lexeme",
            (group,),
        ).fetchall()
    assert record == {"words": "ana direct nord", "fts_words": 3}
    assert [tuple(r.values()) for r in held] == [
        ("", 1, 3),
        ("ana", 1, 0),
        ("direct", 1, 0),
        ("nord", 1, 0),
    ]
    found = memory.search(group, "Who directs Nord?", scopes=("episodes",), valid_at=None)
    assert [e.source for e in found.episodes] == ["facts"]

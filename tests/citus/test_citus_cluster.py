"""The distributed mode on a real Citus cluster (``make test-citus``)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql

import timestone
from timestone.db._distributed_async import GROUP_TABLES, citus_tenant_settings
from timestone.distributed import Distribution, distribute
from timestone.errors import ConnectionFailed, InvalidInput, MissingExtension, SchemaTooNew
from timestone.search._request import prepare_search
from timestone.search._sql import search_params, statement
from tools.citus.build import Build, ensure_built
from tools.citus.cluster import Cluster

pytestmark = pytest.mark.citus
DIMENSION = 16
MIRA, BO = "t-mira", "t-bo"  # the groups the conftest writes before distributing


def test_group_tables_are_distributed_by_group_and_colocated(
    cluster: Cluster, distribution: Distribution
) -> None:
    assert distribution.distributed_tables == len(GROUP_TABLES)
    assert distribution.reference_tables == 1
    assert len(distribution.workers) == 2
    with psycopg.connect(cluster.dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, p.partmethod, a.attname, p.colocationid"
            " FROM pg_dist_partition AS p JOIN pg_class AS c ON c.oid = p.logicalrelid"
            " LEFT JOIN pg_attribute AS a ON a.attrelid = p.logicalrelid"
            "  AND a.attnum = (SELECT attnum FROM pg_attribute WHERE attrelid = p.logicalrelid"
            "   AND attname = 'group_id')"
            " WHERE c.relnamespace = 'timestone'::regnamespace"
        ).fetchall()
        placed = conn.execute(
            "SELECT count(DISTINCT pl.groupid) FROM pg_dist_placement AS pl"
            " JOIN pg_dist_shard AS s USING (shardid)"
            " WHERE s.logicalrelid = 'timestone.facts'::regclass"
        ).fetchone()
    by_table = {r[0]: r for r in rows}
    assert by_table["meta"][1] == "n"  # a reference table
    distributed = {name: r for name, r in by_table.items() if r[1] == "h"}
    assert set(distributed) == set(GROUP_TABLES)
    assert {r[2] for r in distributed.values()} == {"group_id"}
    assert len({r[3] for r in distributed.values()}) == 1  # one colocation group
    assert placed == (2,)  # the shards are spread over both workers


def test_memory_open_knows_the_cluster(memory: timestone.Memory) -> None:
    assert memory._db.distributed  # pyright: ignore[reportPrivateUsage]


def test_each_group_reads_only_its_rows(memory: timestone.Memory, cluster: Cluster) -> None:
    assert {f.fact for f in memory.facts(BO, valid_at=None)} == {"Bo directs Chateau Est."}
    mira = {f.fact for f in memory.facts(MIRA, valid_at=None)}
    assert "Bo directs Chateau Est." not in mira
    assert "Mira directs Chateau Nord." in mira
    # the library's role on the shards: a statement with no group filter of its own sees
    # only the group of its transaction, and a transaction naming no group sees nothing
    with psycopg.connect(cluster.dsn) as conn:
        conn.execute("SET citus.multi_task_query_log_level = 'off'")  # every shard, on purpose
        conn.execute("SET ROLE timestone_app")
        for statement_ in citus_tenant_settings(BO):
            conn.execute(statement_)
        groups = conn.execute("SELECT DISTINCT group_id FROM timestone.facts").fetchall()
        assert groups == [(BO,)]
        # nor does it write another group's rows
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(
                "INSERT INTO timestone.purges (group_id, episode_id, purged_at, rows_erased)"
                " VALUES (%s, gen_random_uuid(), now(), 0)",
                (MIRA,),
            )
        conn.rollback()
        conn.execute("SET citus.multi_task_query_log_level = 'off'")
        conn.execute("SET ROLE timestone_app")
        assert conn.execute("SELECT count(*) FROM timestone.facts").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM timestone.episodes").fetchone() == (0,)


def test_the_date_fight_holds_on_the_shards(memory: timestone.Memory) -> None:
    now = {f.fact for f in memory.facts(MIRA, relation="DIRECTS")}
    assert now == {"Mira directs Chateau Sud."}
    then = {f.fact for f in memory.facts(MIRA, relation="DIRECTS", valid_at=_day("2016-01-01"))}
    assert then == {"Mira directs Chateau Nord."}
    nord = next(
        f for f in memory.facts(MIRA, relation="DIRECTS", valid_at=None) if "Nord" in f.fact
    )
    assert nord.invalid_at == _day("2023-06-15")


def test_search_and_context_of_a_group(memory: timestone.Memory) -> None:
    found = memory.search(MIRA, "Which chateau does Mira direct?")
    facts = [f.fact for f in found.facts]
    assert facts[0] == "Mira directs Chateau Sud."
    assert all("Bo" not in f for f in facts)
    assert memory.search(BO, "Which chateau does Mira direct?").facts[0].fact == (
        "Bo directs Chateau Est."
    )
    ctx = memory.context(MIRA, "Where does Mira work?")
    texts = [item.text for item in ctx.items]
    assert "Mira directs Chateau Sud." in texts
    assert all("Bo" not in t for t in texts)


def test_a_group_search_is_one_task_on_one_worker(
    cluster: Cluster, distribution: Distribution
) -> None:
    req = prepare_search("Which chateau does Mira direct?")
    vector = timestone.HashEmbedder(DIMENSION).embed(["Which chateau does Mira direct?"])[0]
    params = search_params(req, MIRA, vector)
    for name in ("facts:inline", "entities", "episodes"):
        text, names = statement(name, replace(req, scopes=(name.split(":")[0],)), DIMENSION)
        with psycopg.connect(cluster.dsn) as conn:
            register_vector(conn)
            conn.execute("SET ROLE timestone_app")
            for statement_ in citus_tenant_settings(MIRA):
                conn.execute(statement_)
            cur = psycopg.RawCursor(conn)
            cur.execute(b"EXPLAIN " + text, [params[n] for n in names])
            plan = "\n".join(str(r[0]) for r in cur.fetchall())
        assert "Task Count: 1\n" in plan + "\n", (name, plan[:2000])
        assert plan.count("->  Task") == 1, name


def _bodies(dsn: str, name: str) -> list[str]:
    """The body of ``timestone.<name>`` on the coordinator, then on each worker."""
    with psycopg.connect(dsn) as conn:
        mine = conn.execute(
            "SELECT prosrc FROM pg_proc WHERE oid = to_regproc(%s)", (f"timestone.{name}",)
        ).fetchone()
        theirs = conn.execute(
            "SELECT result FROM run_command_on_workers(format("
            "  'SELECT prosrc FROM pg_proc WHERE oid = to_regproc(%%L)', %s::text))"
            " ORDER BY nodeport",
            (f"timestone.{name}",),
        ).fetchall()
    assert mine is not None
    return [str(mine[0]), *(str(r[0]) for r in theirs)]


def test_a_changed_function_file_reaches_every_worker(
    memory: timestone.Memory,
    cluster: Cluster,
    open_memory: Callable[[str], timestone.Memory],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the search function a routed search calls on the group's worker: a changed file is
    # applied at the next open, on the coordinator and on every worker; the old one back
    from timestone.db import _functions as sync_functions

    files = sync_functions.FUNCTIONS
    before = _bodies(cluster.dsn, "search_text")
    assert len(before) == 3
    assert len(set(before)) == 1
    original = dict(files)["search_text"]
    edited = original.replace(b"AS $fn$\n", b"AS $fn$\n-- edited in its file\n", 1)
    assert edited != original
    monkeypatch.setattr(
        sync_functions,
        "FUNCTIONS",
        tuple(f._replace(text=edited) if f.name == "search_text" else f for f in files),
    )
    open_memory(cluster.dsn).close()
    changed = _bodies(cluster.dsn, "search_text")
    assert all(body.startswith("\n-- edited in its file\n") for body in changed), changed
    assert memory.search(MIRA, "Which chateau does Mira direct?").facts[0].fact == (
        "Mira directs Chateau Sud."
    )
    monkeypatch.setattr(sync_functions, "FUNCTIONS", files)
    open_memory(cluster.dsn).close()
    assert _bodies(cluster.dsn, "search_text") == before


def _day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_a_worker_that_does_not_answer_at_open_is_named(
    cluster: Cluster, memory: timestone.Memory, open_memory: Callable[[str], timestone.Memory]
) -> None:
    worker = cluster.worker_nodes[1]
    cluster.stop_node(worker)
    try:
        with pytest.raises(ConnectionFailed, match=f"worker 127.0.0.1:{worker.port}"):
            open_memory(cluster.dsn)
    finally:
        cluster.start_node(worker)
    with open_memory(cluster.dsn) as mem:
        assert {f.fact for f in mem.facts(BO)} == {"Bo directs Chateau Est."}


def _without_pgvector(build: Build, into: Path) -> Build:
    """A copy of ``build`` whose server lacks pgvector."""
    home = into / "novector"
    shutil.copytree(build.home, home, symlinks=True)
    extension = home / "pginstall" / "share" / "extension"
    for path in extension.glob("vector*"):
        path.unlink()
    (home / "pginstall" / "lib" / "vector.so").unlink()
    return Build(home)


def test_a_worker_without_pgvector_is_refused_before_anything_is_written() -> None:
    build = ensure_built()
    scratch = Path(tempfile.mkdtemp(prefix="timestone-novector-"))
    scratch.chmod(0o755)
    try:
        lacking = _without_pgvector(build, scratch)
        with Cluster(build, workers=1, worker_builds={1: lacking}) as small:
            with pytest.raises(MissingExtension, match=r"worker 127\.0\.0\.1:\d+ lacks .*vector"):
                distribute(small.dsn)
            with psycopg.connect(small.dsn) as conn:
                schema = conn.execute(
                    sql.SQL("SELECT to_regnamespace({})").format(sql.Literal("timestone"))
                ).fetchone()
            assert schema == (None,)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_a_timestone_without_the_distributed_mode_is_refused(
    cluster: Cluster, distribution: Distribution, monkeypatch: pytest.MonkeyPatch
) -> None:
    # distribute() migrates the schema to this Timestone's version, whose migration 0035
    # (similar_entities by the group's value) no Timestone before the distributed mode
    # has (schema 31 and older): such a Timestone, opening the cluster, is refused before
    # it reads or writes anything
    from timestone.db import _database as sync_db

    current = sync_db.SCHEMA_VERSION
    assert 35 in {number for number, _, _ in sync_db.MIGRATIONS}
    monkeypatch.setattr(sync_db, "SCHEMA_VERSION", 31)
    with pytest.raises(SchemaTooNew, match=f"schema is version {current}, newer than this"):
        sync_db.migrate(cluster.dsn)


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, "8"])
def test_a_bad_shard_count_is_refused(cluster: Cluster, bad: object) -> None:
    with pytest.raises(InvalidInput, match="shard_count must be a positive integer"):
        distribute(cluster.dsn, shard_count=bad)  # pyright: ignore[reportArgumentType]


def test_an_as_of_search_on_the_shards(memory: timestone.Memory) -> None:
    """As of now, a search is the present one's: the facts around the entities it names
    are read on the group's shard, and so are the group's statistics that tell how many
    of its facts were created since (``timestone.group_rows``)."""
    question = "Which chateau does Mira direct?"
    now = memory.search(MIRA, question, valid_at=None)
    then = memory.search(MIRA, question, valid_at=None, as_of=datetime.now(UTC))
    assert [f.fact for f in then.facts] == [f.fact for f in now.facts]
    assert {"Mira directs Chateau Sud.", "Mira directs Chateau Nord."} <= {
        f.fact for f in then.facts
    }

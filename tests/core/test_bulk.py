"""Bulk loading: vector and read indexes dropped for the load and built once at its end.

Each test runs on a database of its own (``fresh_dsn``): a bulk load acts on the
whole database, and the other tests share theirs.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import timestone
from timestone import FactInput
from timestone._vectors import keyed
from timestone.db import _embedding, _index_build
from timestone.db._database import connect_owner
from timestone.db._embedding_async import LOAD_INDEXES, VECTOR_INDEXES
from timestone.db._index_build import build_memory_kb
from timestone.errors import ConflictError, DatabaseError, InvalidInput
from timestone.write._bulk import bulk_load

REF = datetime(2024, 1, 1, tzinfo=UTC)
HNSW = {name for name, *_ in VECTOR_INDEXES}
READ = set(LOAD_INDEXES)


def _hnsw_indexes(dsn: str) -> set[str]:
    """The valid HNSW indexes of the timestone schema."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
            " JOIN pg_am AS a ON a.oid = c.relam WHERE a.amname = 'hnsw' AND i.indisvalid"
            " AND c.relnamespace = 'timestone'::regnamespace"
        ).fetchall()
    return {r[0] for r in rows}


def _read_indexes(dsn: str) -> set[str]:
    """The definitions, as the server prints them, of the valid indexes a load drops."""
    names = [d.split()[2] for d in LOAD_INDEXES]
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index AS i"
            " JOIN pg_class AS c ON c.oid = i.indexrelid WHERE i.indisvalid"
            " AND c.relnamespace = 'timestone'::regnamespace AND c.relname = ANY(%s)",
            (names,),
        ).fetchall()
    return {r[0] for r in rows}


def _facts(n: int, tag: str) -> list[FactInput]:
    return [FactInput(f"{tag} {i:04d}", "KNOWS", f"{tag} {(i + 1) % n:04d}") for i in range(n)]


def _plan(dsn: str, group: str, vector: list[float], *, sort: bool = True) -> str:
    """The plan of a nearest-facts query as the library role, ordered as a search reads
    the index (by the keyed distance). Without ``sort``, only an index whose expression
    is the query's order can avoid a sort: the plan names it if it exists."""
    near = sql.SQL("{} <=> {}").format(
        keyed(sql.SQL("embedding"), sql.SQL("group_id"), len(vector)),
        keyed(sql.SQL("%(v)s::vector"), sql.SQL("%(g)s::text"), len(vector)),
    )
    with psycopg.connect(dsn) as conn:
        conn.execute("SET ROLE timestone_app")
        conn.execute("SELECT set_config('timestone.group_id', %s, false)", (group,))
        conn.execute("SELECT set_config('enable_sort', %s, false)", ("on" if sort else "off",))
        rows = conn.execute(
            sql.SQL(
                "EXPLAIN SELECT version_id FROM timestone.facts WHERE group_id = %(g)s"
                " AND expired_at IS NULL AND invalid_at IS NULL ORDER BY {} LIMIT 5"
            ).format(near),
            {"g": group, "v": str(vector)},
        ).fetchall()
    return "\n".join(r[0] for r in rows)


def test_bulk_load_drops_the_indexes_and_builds_them_at_the_end(fresh_dsn: str) -> None:
    group = "bulk-" + uuid.uuid4().hex[:8]
    with timestone.Memory.open(fresh_dsn) as mem:
        assert _hnsw_indexes(fresh_dsn) == HNSW
        assert _read_indexes(fresh_dsn) == READ  # the list says what the migrations built
        with mem.bulk_load(maintenance_work_mem="64MB", workers=0):
            assert _hnsw_indexes(fresh_dsn) == set()
            assert _read_indexes(fresh_dsn) == set()
            mem.add_facts(group, _facts(200, "Walker"), reference_time=REF)
            mem.add_facts(group, _facts(50, "Rider"), reference_time=REF)
            mem.add_facts(
                group,
                [
                    FactInput(
                        "Walker 0001", "KNOWS", "Walker 0002", invalid_at=REF.replace(year=2025)
                    )
                ],
                reference_time=REF,
            )
            # searching and reading history work while the indexes are gone: scans
            during = [f.fact for f in mem.search(group, "Rider 0007 knows", limit=5).facts]
            assert during[0] == "Rider 0007 knows Rider 0008."
            history = mem.timeline(group, "Walker 0001")
            current = mem.facts(group, source="Walker 0001", valid_at=REF.replace(year=2026))
        assert _hnsw_indexes(fresh_dsn) == HNSW
        assert _read_indexes(fresh_dsn) == READ
        after = [f.fact for f in mem.search(group, "Rider 0007 knows", limit=5).facts]
        assert after == during
        assert mem.timeline(group, "Walker 0001") == history
        assert mem.facts(group, source="Walker 0001", valid_at=REF.replace(year=2026)) == current
        assert current == []  # its one fact was closed in 2025 by the correction
        assert [(f.target, f.invalid_at) for f in history if f.source == "Walker 0001"] == [
            ("Walker 0002", REF.replace(year=2025))
        ]
        vector = mem.embedder.embed(["Rider 0007 knows"])[0]
        assert "facts_embedding_hnsw" in _plan(fresh_dsn, group, vector)
        assert mem.stats(group)["facts"]["current"] == 250


def _index_definitions(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index AS i"
            " JOIN pg_class AS c ON c.oid = i.indexrelid"
            " WHERE c.relnamespace = 'timestone'::regnamespace AND c.relname = ANY(%s)",
            (sorted(HNSW),),
        ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def test_a_3072_dimension_embedder_is_indexed_at_half_precision(fresh_dsn: str) -> None:
    """pgvector's HNSW indexes take at most 2,000 dimensions of full precision: a wider
    embedder (OpenAI's text-embedding-3-large has 3,072) is indexed as ``halfvec``, when
    the embedder is bound and when a bulk load builds the indexes again, and a search
    reads that index (a group of more than 1,000 current facts is ranked through it)."""
    group = "wide-" + uuid.uuid4().hex[:8]
    wide = timestone.HashEmbedder(dimension=3072)
    with timestone.Memory.open(fresh_dsn, embedder=wide) as mem:
        built = _index_definitions(fresh_dsn)
        assert set(built) == HNSW
        assert all("::halfvec(3080)) halfvec_cosine_ops" in d for d in built.values()), built
        mem.add_facts(group, _facts(40, "Walker"), reference_time=REF)
        with mem.bulk_load(maintenance_work_mem="64MB"):
            mem.add_facts(group, _facts(1050, "Rider"), reference_time=REF)
        assert _index_definitions(fresh_dsn) == built
        found = [f.fact for f in mem.search(group, "Rider 0007 knows Rider 0008", limit=3).facts]
        assert found[0] == "Rider 0007 knows Rider 0008."
        vector = wide.embed(["Rider 0007 knows"])[0]
        assert "Index Scan using facts_embedding_hnsw" in _plan(
            fresh_dsn, group, vector, sort=False
        )


def test_an_error_inside_still_rebuilds_and_keeps_committed_batches(fresh_dsn: str) -> None:
    group = "bulk-" + uuid.uuid4().hex[:8]
    bad = [{"source": "", "relation": "KNOWS", "target": "x"}]
    with timestone.Memory.open(fresh_dsn) as mem:
        with mem.bulk_load():
            mem.add_facts(group, _facts(20, "Walker"), reference_time=REF)
            with pytest.raises(InvalidInput, match="empty"):
                mem.add_facts(group, bad, reference_time=REF)
        with pytest.raises(RuntimeError, match="the loader fails"), mem.bulk_load():
            raise RuntimeError("the loader fails")
        assert _hnsw_indexes(fresh_dsn) == HNSW
        assert len(mem.facts(group, relation="KNOWS")) == 20  # each batch is its own transaction


def test_one_bulk_load_at_a_time_and_open_leaves_the_indexes_alone(fresh_dsn: str) -> None:
    with timestone.Memory.open(fresh_dsn) as mem, mem.bulk_load():
        with pytest.raises(ConflictError, match="another bulk load"), mem.bulk_load():
            pass
        # the refused load neither rebuilt the indexes nor released the lock
        assert _hnsw_indexes(fresh_dsn) == set()
        with timestone.Memory.open(fresh_dsn) as other:  # a second process opening the database
            assert _hnsw_indexes(fresh_dsn) == set()
            with pytest.raises(ConflictError), other.bulk_load():
                pass
    assert _hnsw_indexes(fresh_dsn) == HNSW


async def test_async_bulk_load(fresh_dsn: str) -> None:
    group = "bulk-" + uuid.uuid4().hex[:8]
    mem = await timestone.AsyncMemory.open(fresh_dsn)
    try:
        async with mem.bulk_load():
            assert _hnsw_indexes(fresh_dsn) == set()
            await mem.add_facts(group, _facts(30, "Walker"), reference_time=REF)
        assert _hnsw_indexes(fresh_dsn) == HNSW
        assert len(await mem.facts(group, relation="KNOWS")) == 30
    finally:
        await mem.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"maintenance_work_mem": "lots"}, "maintenance_work_mem must be"),
        ({"maintenance_work_mem": "1GB; DROP TABLE x"}, "maintenance_work_mem must be"),
        ({"maintenance_work_mem": 1024}, "maintenance_work_mem must be"),
        ({"maintenance_work_mem": "9999999GB"}, "from 1MB to 2047GB"),
        ({"maintenance_work_mem": "512kB"}, "from 1MB to 2047GB"),
        ({"workers": -1}, "workers must be"),
        ({"workers": True}, "workers must be"),
    ],
)
def test_bad_settings_are_refused_before_anything_is_dropped(
    fresh_dsn: str, kwargs: dict[str, object], message: str
) -> None:
    with (
        timestone.Memory.open(fresh_dsn) as mem,
        pytest.raises(InvalidInput, match=message),
        mem.bulk_load(**kwargs),  # type: ignore[arg-type]
    ):
        pass
    assert _hnsw_indexes(fresh_dsn) == HNSW


def test_a_user_who_does_not_own_the_schema_is_told_so(fresh_dsn: str) -> None:
    timestone.Memory.open(fresh_dsn).close()
    role = "bulk_" + uuid.uuid4().hex[:8]
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA timestone TO {}").format(sql.Identifier(role)))
    try:
        other = make_conninfo(fresh_dsn, user=role)
        with pytest.raises(DatabaseError, match="owner of the timestone schema"), bulk_load(other):
            pass
        assert _hnsw_indexes(fresh_dsn) == HNSW
    finally:
        with psycopg.connect(fresh_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _wait_for_sessions_to_end(dsn: str) -> None:
    """The server notices a killed client's closed socket on its own schedule."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(300):
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchone()
            if row is not None and row[0] == 0:
                return
            time.sleep(0.05)
    raise AssertionError("the killed loader's session is still open after 15 s")


KILLED_LOADER = """
import sys, time, datetime as d
import timestone
mem = timestone.Memory.open(sys.argv[1])
with mem.bulk_load():
    facts = [timestone.FactInput(f"Walker {i}", "KNOWS", "Mira") for i in range(20)]
    mem.add_facts("killed", facts, reference_time=d.datetime(2020, 1, 1, tzinfo=d.UTC))
    print("loading", flush=True)
    time.sleep(600)
"""


def test_a_killed_loader_leaves_the_indexes_to_the_next_open(
    fresh_dsn: str, tmp_path: Path
) -> None:
    timestone.Memory.open(fresh_dsn).close()
    script = tmp_path / "loader.py"
    script.write_text(KILLED_LOADER)
    with subprocess.Popen(
        [sys.executable, str(script), fresh_dsn], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "loading"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert _hnsw_indexes(fresh_dsn) == set()
    assert _read_indexes(fresh_dsn) == set()
    _wait_for_sessions_to_end(fresh_dsn)
    # the dead session released the lock; opening builds what is missing
    with timestone.Memory.open(fresh_dsn) as mem:
        assert _hnsw_indexes(fresh_dsn) == HNSW
        assert _read_indexes(fresh_dsn) == READ
        assert len(mem.facts("killed", relation="KNOWS")) == 20


def test_an_open_that_builds_a_missing_index_sizes_its_memory_to_the_graph(
    fresh_dsn: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory.open builds a missing HNSW index (a dead bulk load's) with the memory its
    graph needs, not the server's setting: here the database's 1 MB, which 1,000 facts
    outgrow, with the 1 GB floor lowered for the test so that only the sizing is at
    stake. With the graph's need counted as nothing, the build keeps the 1 MB, spills,
    and the warning says so."""
    group = "reopen-" + uuid.uuid4().hex[:8]
    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts(group, _facts(1000, "Opener"), reference_time=REF)
        vector_bytes = 4 * (mem.embedder.dimension + 8) + 8
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        assert name is not None
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET maintenance_work_mem = '1MB'").format(
                sql.Identifier(name[0])
            )
        )
    monkeypatch.setattr(_index_build, "_MIN_BUILD_KB", 1024)

    def reopen() -> list[str]:
        with psycopg.connect(fresh_dsn, autocommit=True) as conn:
            conn.execute("DROP INDEX timestone.facts_embedding_hnsw")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="timestone"):
            timestone.Memory.open(fresh_dsn).close()
        assert _hnsw_indexes(fresh_dsn) == HNSW
        return [r.getMessage() for r in caplog.records if r.name == "timestone"]

    assert reopen() == []
    monkeypatch.setattr(_index_build, "_ELEMENT_BYTES", -vector_bytes)  # a row needs nothing
    spilled = reopen()
    assert len(spilled) == 1
    assert "no longer fits into maintenance_work_mem" in spilled[0]
    assert "(maintenance_work_mem 1MB)" in spilled[0]


def _files(dsn: str) -> dict[str, int]:
    """Each index of the timestone schema and its file (a rebuild gives it a new one)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.relfilenode FROM pg_class AS c"
            " WHERE c.relkind = 'i' AND c.relnamespace = 'timestone'::regnamespace"
        ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def test_rebuild_vector_indexes_rebuilds_them_in_place(fresh_dsn: str) -> None:
    """Every HNSW index gets a new file, valid, while the others keep theirs; a search
    reads the same after; an invalid copy left by a failed rebuild is dropped first; a
    missing index (a bulk load that died) is built."""
    group = "reindex-" + uuid.uuid4().hex[:8]
    names = [name for name, *_ in VECTOR_INDEXES]
    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts(group, _facts(120, "Walker"), reference_time=REF)
        before = [f.fact for f in mem.search(group, "Walker 0007 knows", limit=5).facts]
        # what a failed REINDEX CONCURRENTLY leaves: an invalid index named <name>_ccnew
        # (<name>_ccold if it failed dropping the old one)
        left = ("facts_embedding_hnsw_ccnew", "facts_embedding_closed_hnsw_ccold")
        with psycopg.connect(fresh_dsn, autocommit=True) as conn:
            for name in left:
                with pytest.raises(psycopg.errors.UniqueViolation):
                    conn.execute(
                        sql.SQL(
                            "CREATE UNIQUE INDEX CONCURRENTLY {} ON timestone.facts (group_id)"
                        ).format(sql.Identifier(name))
                    )
        files = _files(fresh_dsn)
        assert set(left) <= set(files)
        took = mem.rebuild_vector_indexes(maintenance_work_mem="64MB", workers=0)
        assert list(took) == names
        assert all(isinstance(s, float) and s > 0 for s in took.values())
        after = _files(fresh_dsn)
        assert {n for n in after if after[n] != files.get(n)} == set(names)
        assert not set(left) & set(after)
        assert _hnsw_indexes(fresh_dsn) == HNSW
        assert [f.fact for f in mem.search(group, "Walker 0007 knows", limit=5).facts] == before
        vector = mem.embedder.embed(["Walker 0007 knows"])[0]
        assert "facts_embedding_hnsw" in _plan(fresh_dsn, group, vector, sort=False)

        # one index alone, named twice: rebuilt once, the others untouched
        took = mem.rebuild_vector_indexes(
            indexes=["facts_embedding_closed_hnsw", "facts_embedding_closed_hnsw"]
        )
        assert list(took) == ["facts_embedding_closed_hnsw"]
        again = _files(fresh_dsn)
        assert {n for n in again if again[n] != after[n]} == {"facts_embedding_closed_hnsw"}

        with psycopg.connect(fresh_dsn, autocommit=True) as conn:
            conn.execute("DROP INDEX timestone.entities_name_embedding_hnsw")
        assert mem.rebuild_vector_indexes(indexes=("entities_name_embedding_hnsw",)).keys() == {
            "entities_name_embedding_hnsw"
        }
        assert _hnsw_indexes(fresh_dsn) == HNSW


def test_the_build_memory_is_what_the_largest_graph_needs_within_bounds() -> None:
    gb, mb = 1024**2, 1024
    assert build_memory_kb(10_000, 64 * mb, 6 * gb) == gb  # a small graph: 1 GB, as before
    assert build_memory_kb(3 * gb, 64 * mb, 6 * gb) == 3 * gb  # what the graph needs
    assert build_memory_kb(9 * gb, 64 * mb, 6 * gb) == 6 * gb  # at most shared_buffers
    assert build_memory_kb(3 * gb, 64 * mb, 128 * mb) == gb  # small buffers: 1 GB, as before
    assert build_memory_kb(3 * gb, 8 * gb, 6 * gb) == 8 * gb  # never below the server's own


def test_a_build_is_sized_from_the_rows_of_its_graph_and_a_spill_is_logged(
    fresh_dsn: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory a build is given counts the rows each named index would hold (the open
    facts' 1,000 here, the closed facts' none), and a graph that outgrows the memory it
    was given is logged as a warning, naming the setting."""
    group = "spill-" + uuid.uuid4().hex[:8]
    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts(group, _facts(1000, "Spiller"), reference_time=REF)
        with connect_owner(fresh_dsn) as conn:
            settings = conn.execute(
                "SELECT pg_size_bytes(current_setting('maintenance_work_mem')) AS current,"
                " pg_size_bytes(current_setting('shared_buffers')) AS buffers"
            ).fetchone()
            assert settings is not None
            current, buffers = settings["current"] // 1024, settings["buffers"] // 1024
            floor = math.ceil(build_memory_kb(0, current, buffers) / 1024)
            # as measured, an element of 264 dimensions takes under 2 kB: 1,000 fit in 1 GB
            assert _embedding._sized_memory(conn, ["facts_embedding_hnsw"]) == f"{floor}MB"  # pyright: ignore[reportPrivateUsage]
            # at 2 MB an element, 1,000 need about 2.4 GB with the margin
            monkeypatch.setattr(_index_build, "_ELEMENT_BYTES", 2 * 10**6)
            per_row = 4 * (mem.embedder.dimension + 8) + 8 + 2 * 10**6
            need = math.ceil(1000 * per_row * 1.2 / 1024)
            sized = math.ceil(build_memory_kb(need, current, buffers) / 1024)
            assert sized > floor or buffers <= 1024**2  # what shared_buffers allows of it
            for names in (["facts_embedding_hnsw"], ["facts_embedding_closed_hnsw", *HNSW]):
                assert _embedding._sized_memory(conn, names) == f"{sized}MB"  # pyright: ignore[reportPrivateUsage]
            assert _embedding._sized_memory(conn, ["facts_embedding_closed_hnsw"]) == f"{floor}MB"  # pyright: ignore[reportPrivateUsage]
        monkeypatch.undo()

        # 1 MB holds about 600 elements of 264 dimensions: the build spills, and says so
        with caplog.at_level(logging.WARNING, logger="timestone"):
            mem.rebuild_vector_indexes(
                indexes=["facts_embedding_hnsw"], maintenance_work_mem="1MB", workers=0
            )
        spilled = [r.getMessage() for r in caplog.records if r.name == "timestone"]
        assert len(spilled) == 1
        assert "no longer fits into maintenance_work_mem" in spilled[0]
        assert "(maintenance_work_mem 1MB)" in spilled[0]
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="timestone"):
            mem.rebuild_vector_indexes(indexes=["facts_embedding_hnsw"], workers=0)
            with mem.bulk_load(workers=0):
                pass
        assert not [r for r in caplog.records if r.name == "timestone"]
        assert _hnsw_indexes(fresh_dsn) == HNSW
        hits = mem.search(group, "Spiller 0042 knows", limit=3).facts
        assert "Spiller 0042 knows Spiller 0043." in [f.fact for f in hits]


def test_rebuild_vector_indexes_refuses_bad_input_and_a_running_bulk_load(
    fresh_dsn: str,
) -> None:
    with timestone.Memory.open(fresh_dsn) as mem:
        files = _files(fresh_dsn)
        refused: list[tuple[dict[str, object], str]] = [
            ({"indexes": "facts_embedding_hnsw"}, "indexes must be a list of vector index names"),
            ({"indexes": ["facts_history_source"]}, "'facts_history_source' is not a vector index"),
            ({"indexes": [7]}, "7 is not a vector index of timestone"),
            ({"indexes": []}, "indexes is empty"),
            ({"maintenance_work_mem": "lots"}, "must be a Postgres memory size"),
            ({"workers": -1}, "workers must be an integer from 0 to 64"),
        ]
        for kwargs, message in refused:
            with pytest.raises(InvalidInput, match=message) as caught:
                mem.rebuild_vector_indexes(**kwargs)  # pyright: ignore[reportArgumentType]
            assert "facts_embedding_hnsw" in str(caught.value) or "indexes" not in kwargs
        with (
            mem.bulk_load(maintenance_work_mem="64MB"),
            pytest.raises(ConflictError, match="a bulk load or another index rebuild"),
        ):
            mem.rebuild_vector_indexes()
        # the bulk load rebuilt its indexes; the refused calls touched nothing else
        after = _files(fresh_dsn)
        kept = set(files) - HNSW - {d.split()[2] for d in LOAD_INDEXES}
        assert {n: after[n] for n in kept} == {n: files[n] for n in kept}


async def test_the_async_memory_rebuilds_a_vector_index(fresh_dsn: str) -> None:
    group = "areindex-" + uuid.uuid4().hex[:8]
    async with await timestone.AsyncMemory.open(fresh_dsn) as mem:
        await mem.add_facts(group, _facts(30, "Rider"), reference_time=REF)
        before = [f.fact for f in (await mem.search(group, "Rider 0003 knows", limit=3)).facts]
        files = _files(fresh_dsn)
        took = await mem.rebuild_vector_indexes(indexes=["facts_embedding_hnsw"], workers=0)
        assert list(took) == ["facts_embedding_hnsw"]
        after = _files(fresh_dsn)
        assert {n for n in after if after[n] != files[n]} == {"facts_embedding_hnsw"}
        hits = await mem.search(group, "Rider 0003 knows", limit=3)
        assert [f.fact for f in hits.facts] == before
        assert "Rider 0003 knows Rider 0004." in before


def test_vector_index_health_is_the_share_of_its_rows_an_index_finds(fresh_dsn: str) -> None:
    """A freshly built index finds (nearly) every row it holds by the row's own vector; an
    index with no rows, or dropped by a bulk load, has no figure."""
    group = "health-" + uuid.uuid4().hex[:8]
    names = [name for name, *_ in VECTOR_INDEXES]
    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts(group, _facts(150, "Walker"), reference_time=REF)
        health = mem.vector_index_health(sample=60)
        assert list(health) == names
        assert health["communities_name_embedding_hnsw"] is None  # no communities built
        assert health["facts_embedding_closed_hnsw"] is None  # no period has ended
        for name in ("facts_embedding_hnsw", "entities_name_embedding_hnsw"):
            share = health[name]
            assert share is not None
            assert 0.9 <= share <= 1.0, (name, share)
        assert health["episodes_embedding_hnsw"] == 1.0  # its one episode
        assert health["episodes_told_embedding_hnsw"] is None  # which records facts
        assert mem.vector_index_health(indexes=["facts_embedding_hnsw"], sample=1).keys() == {
            "facts_embedding_hnsw"
        }
        with mem.bulk_load(maintenance_work_mem="64MB"):
            assert set(mem.vector_index_health(sample=5).values()) == {None}
        refused: list[tuple[dict[str, object], str]] = [
            ({"sample": 0}, "sample must be an integer from 1 to 10,000, got 0"),
            ({"sample": 10_001}, "sample must be an integer from 1 to 10,000, got 10001"),
            ({"sample": True}, "sample must be an integer from 1 to 10,000, got True"),
            ({"indexes": "facts_embedding_hnsw"}, "indexes must be a list of vector index names"),
            ({"indexes": ["facts_fts_open"]}, "'facts_fts_open' is not a vector index"),
        ]
        for kwargs, message in refused:
            with pytest.raises(InvalidInput, match=message):
                mem.vector_index_health(**kwargs)  # pyright: ignore[reportArgumentType]


BUILDING_LOADER = """
import sys, datetime as d
import timestone
mem = timestone.Memory.open(sys.argv[1])
with mem.bulk_load(workers=0):
    facts = [timestone.FactInput(f"Walker {i}", "KNOWS", "Mira") for i in range(20)]
    mem.add_facts("killed", facts, reference_time=d.datetime(2020, 1, 1, tzinfo=d.UTC))
    print("loaded", flush=True)
    sys.stdin.readline()
"""


def _building_pid(dsn: str) -> int:
    """The server session of the loader, once its final build waits for the tables it
    builds on (it locks them all first, then builds)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(300):
            row = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND query LIKE 'LOCK TABLE %IN SHARE MODE'"
            ).fetchone()
            if row is not None:
                return int(row[0])
            time.sleep(0.05)
    raise AssertionError("the loader did not reach its final build in 15 s")


def _release_when_gone(blocker: psycopg.Connection[tuple[object, ...]], pid: int) -> None:
    """Hold the blocker's lock until the session ``pid`` has ended (20 s at most)."""
    with psycopg.connect(blocker.info.dsn, autocommit=True) as conn:
        for _ in range(400):
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
            if row.fetchone() == (0,):
                break
            time.sleep(0.05)
    blocker.rollback()


def test_an_open_right_after_a_loader_died_in_its_final_build_builds_the_indexes(
    fresh_dsn: str, tmp_path: Path
) -> None:
    """The dead loader's server session holds the load's lock while its statement runs:
    the session checks its client every second and ends, and the open waits for it
    (a few seconds at most) instead of taking the load for a live one and going on
    without the indexes."""
    timestone.Memory.open(fresh_dsn).close()
    script = tmp_path / "loader.py"
    script.write_text(BUILDING_LOADER)
    blocker = psycopg.connect(fresh_dsn)
    try:
        with subprocess.Popen(
            [sys.executable, str(script), fresh_dsn],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as proc:
            assert proc.stdin is not None
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "loaded"
            # the final build waits behind this lock, so that it is killed inside it
            blocker.execute("LOCK TABLE timestone.facts IN ROW EXCLUSIVE MODE")
            proc.stdin.write("\n")
            proc.stdin.flush()
            pid = _building_pid(fresh_dsn)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        # the builds of the open wait behind the lock too: it is released once the dead
        # loader's session has gone (or after 20 s: then the open found it still there)
        releaser = threading.Thread(target=_release_when_gone, args=(blocker, pid))
        releaser.start()
        try:
            with timestone.Memory.open(fresh_dsn) as mem:
                assert _hnsw_indexes(fresh_dsn) == HNSW
                assert _read_indexes(fresh_dsn) == READ
                assert len(mem.facts("killed", relation="KNOWS")) == 20
        finally:
            releaser.join()
    finally:
        blocker.close()


def test_an_open_leaves_a_live_loader_building_to_itself(fresh_dsn: str) -> None:
    """A loader alive in its final build is waited for a few seconds at most: the open
    goes on without building, and the loader builds the indexes."""
    loaded, go = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def load(mem: timestone.Memory) -> None:
        try:
            with mem.bulk_load(workers=0):
                mem.add_facts("live", _facts(20, "Walker"), reference_time=REF)
                loaded.set()
                go.wait(30)
        except BaseException as exc:  # reported by the test below
            failures.append(exc)

    blocker = psycopg.connect(fresh_dsn)
    safety = threading.Timer(30, blocker.cancel)  # never a hung run, whatever happens
    with timestone.Memory.open(fresh_dsn) as mem:
        loader = threading.Thread(target=load, args=(mem,))
        loader.start()
        try:
            assert loaded.wait(30)
            blocker.execute("LOCK TABLE timestone.facts IN ROW EXCLUSIVE MODE")
            go.set()
            _building_pid(fresh_dsn)
            safety.start()
            started = time.monotonic()
            timestone.Memory.open(fresh_dsn).close()
            waited = time.monotonic() - started
            assert _hnsw_indexes(fresh_dsn) == set()  # left to the loader
        finally:
            blocker.rollback()
            go.set()
            loader.join(60)
            safety.cancel()
            blocker.close()
        assert failures == []
        assert waited < 20.0  # the bound (5 s), then on without building
        assert _hnsw_indexes(fresh_dsn) == HNSW
        assert len(mem.facts("live", relation="KNOWS")) == 20

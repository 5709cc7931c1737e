"""Opening: the embedded server, migrations, extensions, DSNs and the embedder contract."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import psycopg
import pytest
from psycopg import sql

import timestone
from timestone import HashEmbedder
from timestone.db import _database as sync_db
from timestone.db import _database_async as aio_db
from timestone.db import _extensions as extensions
from timestone.db._embedded import (
    NAPTIME,
    buffer_size,
    embedded_dsn,
    release_embedded,
    write_settings,
)
from timestone.db._extensions import pgvector_refusal
from timestone.db._sockets import SEND_BUFFER, widen_send_buffer
from timestone.errors import (
    ConnectionFailed,
    EmbeddedServerError,
    EmbedderError,
    EmbedderMismatch,
    MissingExtension,
    SchemaTooNew,
)

REF = datetime(2020, 1, 1, tzinfo=UTC)


def _version(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT value FROM timestone.meta WHERE key = 'schema_version'"
        ).fetchone()
    assert row is not None
    return int(str(row[0]))


# -- the embedded server ---------------------------------------------------------------


def test_embedded_server_is_reused_within_a_process(data_dir: Path, dsn: str) -> None:
    assert embedded_dsn(data_dir) == dsn
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
    assert row is not None
    assert int(str(row[0])) >= 150000


def test_another_process_shares_the_server(data_dir: Path, dsn: str, group: str) -> None:
    script = (
        "import sys, timestone, datetime as d\n"
        "m = timestone.Memory.open(data_dir=sys.argv[1])\n"
        "m.add_facts(sys.argv[2], [timestone.FactInput('Ada', 'KNOWS', 'Grace')],"
        " reference_time=d.datetime(2020, 1, 1, tzinfo=d.UTC))\n"
        "print(m.dsn)\n"
        "m.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(data_dir), group],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == dsn
    with timestone.Memory.open(dsn) as mem:
        assert [f.target for f in mem.facts(group, source="Ada")] == ["Grace"]
    # the server outlived the other process: this one still holds it
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_the_last_process_stops_the_server_after_one_was_killed(tmp_path: Path) -> None:
    """A process killed with SIGKILL never runs its exit handlers and stays on the list of
    the server's users; the last one to exit must still stop the server."""
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, timestone\n"
            "timestone.Memory.open(data_dir=sys.argv[1])\n"
            "print('open', flush=True)\n"
            "time.sleep(600)\n",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "open"
        finally:
            holder.kill()
            holder.wait(timeout=30)
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, timestone\ntimestone.Memory.open(data_dir=sys.argv[1]).close()\n",
            str(tmp_path),
        ],
        check=True,
        timeout=120,
    )
    # stopped: pg_ctl removes the pid file on a clean shutdown
    assert not (tmp_path / "pg" / "postmaster.pid").exists()


def test_threads_opening_one_fresh_data_dir_share_one_server(tmp_path: Path) -> None:
    results: list[str] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            with timestone.Memory.open(data_dir=tmp_path, embedder=HashEmbedder(16)) as mem:
                results.append(mem.dsn)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(results)) == 1


def test_releasing_a_data_dir_stops_its_server_and_keeps_its_data(tmp_path: Path) -> None:
    facts = [timestone.FactInput("Ada", "KNOWS", "Grace")]
    with timestone.Memory.open(data_dir=tmp_path, embedder=HashEmbedder(16)) as mem:
        mem.add_facts("released", facts, reference_time=REF)
    assert (tmp_path / "pg" / "postmaster.pid").exists()
    release_embedded(tmp_path)
    assert not (tmp_path / "pg" / "postmaster.pid").exists()
    release_embedded(tmp_path)  # nothing left to release: no error
    with timestone.Memory.open(data_dir=tmp_path, embedder=HashEmbedder(16)) as mem:
        assert [f.fact for f in mem.facts("released")] == ["Ada knows Grace."]
    release_embedded(tmp_path)
    assert not (tmp_path / "pg" / "postmaster.pid").exists()


def test_the_embedded_server_sizes_its_buffer_cache(data_dir: Path, dsn: str) -> None:
    assert 128 <= buffer_size() <= 8192
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT setting::bigint * 8192 / 1048576 FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()
    assert row == (buffer_size(),)
    with psycopg.connect(dsn) as conn:
        naptime = conn.execute("SELECT current_setting('autovacuum_naptime')").fetchone()
    assert naptime == (NAPTIME,)
    # the data dir's file names the settings now: writing them again leaves it as it is
    conf = data_dir / "pg" / "postgresql.auto.conf"
    before = conf.read_text()
    write_settings(data_dir / "pg")
    assert conf.read_text() == before


def test_a_setting_made_by_alter_system_is_kept(tmp_path: Path) -> None:
    conf = tmp_path / "postgresql.auto.conf"
    conf.write_text("shared_buffers = '256MB'\nautovacuum_naptime = '1min'\n")
    write_settings(tmp_path)
    assert conf.read_text() == "shared_buffers = '256MB'\nautovacuum_naptime = '1min'\n"
    conf.write_text("shared_buffers = '256MB'")  # no naptime yet, and no final newline
    write_settings(tmp_path)
    assert conf.read_text() == (
        f"shared_buffers = '256MB'\nautovacuum_naptime = '{NAPTIME}'  # set by timestone on creation\n"
    )
    (tmp_path / "other").mkdir()
    write_settings(tmp_path / "other")  # a new data dir: the line is added
    assert (
        f"shared_buffers = '{buffer_size()}MB'"
        in (tmp_path / "other" / "postgresql.auto.conf").read_text()
    )


def test_a_setting_written_by_an_earlier_version_follows_the_current_one(tmp_path: Path) -> None:
    conf = tmp_path / "postgresql.auto.conf"
    conf.write_text(
        "# Do not edit this file manually!\n"
        "shared_buffers = '129MB'  # set by timestone on creation\n"
        "work_mem = '8MB'\n"
    )
    write_settings(tmp_path)
    assert conf.read_text() == (
        "# Do not edit this file manually!\n"
        f"shared_buffers = '{buffer_size()}MB'  # set by timestone on creation\n"
        "work_mem = '8MB'\n"
        f"autovacuum_naptime = '{NAPTIME}'  # set by timestone on creation\n"
    )
    conf.write_text(conf.read_text().replace(f"'{NAPTIME}'", "'1min'"))  # an earlier value
    write_settings(tmp_path)
    assert f"autovacuum_naptime = '{NAPTIME}'  # set by timestone on creation\n" in conf.read_text()
    assert "1min" not in conf.read_text()


def test_data_dir_that_is_not_writable(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(EmbeddedServerError, match="data dir"):
        timestone.Memory.open(data_dir=blocker / "sub")
    assert not (blocker / "sub").exists()


# -- DSNs and extensions -----------------------------------------------------------------


def test_dsn_that_does_not_connect() -> None:
    with pytest.raises(ConnectionFailed, match="cannot connect"):
        timestone.Memory.open("postgresql://nobody:secret@127.0.0.1:1/nowhere?connect_timeout=2")


def test_password_is_not_echoed() -> None:
    with pytest.raises(ConnectionFailed) as info:
        timestone.Memory.open("postgresql://nobody:hunter2@127.0.0.1:1/x?connect_timeout=2")
    assert "hunter2" not in str(info.value)


def test_missing_extension_is_named(fresh_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    wanted = (*sync_db.EXTENSIONS, "timestone_no_such_extension")
    monkeypatch.setattr(sync_db, "EXTENSIONS", wanted)
    with pytest.raises(MissingExtension, match="timestone_no_such_extension"):
        timestone.Memory.open(fresh_dsn)
    with psycopg.connect(fresh_dsn) as conn:
        row = conn.execute("SELECT to_regclass('timestone.facts')").fetchone()
    assert row == (None,)  # nothing was created


async def test_async_missing_extension_is_named(
    fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aio_db, "EXTENSIONS", ("vector", "timestone_no_such_extension"))
    with pytest.raises(MissingExtension, match="timestone_no_such_extension"):
        await timestone.AsyncMemory.open(fresh_dsn)


@pytest.mark.parametrize(
    ("version", "iterative", "named"),
    [
        ("0.7.4", None, "pgvector 0.8.0 or newer"),  # no iterative index scans
        ("0.6.2", "off", "ALTER EXTENSION vector UPDATE"),  # a newer library, old SQL
    ],
)
def test_an_old_pgvector_is_refused_with_the_way_out(
    version: str, iterative: str | None, named: str
) -> None:
    refusal = pgvector_refusal(version, iterative)
    assert refusal is not None
    assert version in refusal
    assert named in refusal


def test_the_pgvector_this_library_needs_is_served() -> None:
    assert pgvector_refusal("0.8.0", "off") is None
    assert pgvector_refusal("0.7.0", "relaxed_order") is None  # the library is new
    assert pgvector_refusal("0.10.1", "off") is None  # compared as numbers


def test_a_server_without_iterative_scans_is_refused(
    fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the real server, asked for a setting its pgvector does not define, as 0.7's lacks
    # hnsw.iterative_scan: the open stops before the schema
    monkeypatch.setattr(sync_db, "_ITERATIVE_SETTING", "hnsw.timestone_no_such_setting")
    with pytest.raises(MissingExtension, match=r"no iterative index scans") as info:
        timestone.Memory.open(fresh_dsn)
    with psycopg.connect(fresh_dsn) as conn:
        row = conn.execute(
            "SELECT extversion, to_regclass('timestone.facts') FROM pg_extension"
            " WHERE extname = 'vector'"
        ).fetchone()
    assert row is not None
    assert row[0] in str(info.value)  # the server's own version, named
    assert row[1] is None  # nothing of the schema was created


async def test_async_open_checks_pgvector_too(
    fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(extensions, "PGVECTOR_SQL", (99, 0, 0))
    with pytest.raises(MissingExtension, match="ALTER EXTENSION vector UPDATE"):
        await timestone.AsyncMemory.open(fresh_dsn)


# -- migrations --------------------------------------------------------------------------


def test_migrations_are_numbered_without_gaps() -> None:
    # the runner applies the migrations above the recorded version: a gap filled later
    # would be skipped by every database already past it
    numbers = [number for number, _, _ in sync_db.MIGRATIONS]
    assert numbers == list(range(1, len(numbers) + 1))


def test_migrations_are_idempotent(fresh_dsn: str) -> None:
    first = sync_db.migrate(fresh_dsn)
    second = sync_db.migrate(fresh_dsn)
    assert first == second == sync_db.SCHEMA_VERSION == _version(fresh_dsn)


def test_concurrent_opens_migrate_once(fresh_dsn: str) -> None:
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16)).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _version(fresh_dsn) == sync_db.SCHEMA_VERSION


def test_newer_schema_is_refused(fresh_dsn: str) -> None:
    timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16)).close()
    with psycopg.connect(fresh_dsn) as conn:
        conn.execute("UPDATE timestone.meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(SchemaTooNew, match="999"):
        timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16))


# -- the embedder contract ---------------------------------------------------------------


def test_other_embedder_is_refused_naming_both(fresh_dsn: str) -> None:
    timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16)).close()
    with pytest.raises(EmbedderMismatch) as info:
        timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(32))
    message = str(info.value)
    assert "hash (16 dimensions)" in message
    assert "hash (32 dimensions)" in message
    assert "reembed" in message


def test_reembed_moves_every_vector(fresh_dsn: str, group: str) -> None:
    with timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16)) as mem:
        mem.add_facts(group, [timestone.FactInput("Ada", "KNOWS", "Grace")], reference_time=REF)
    with timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(32), reembed=True) as mem:
        [fact] = mem.facts(group)
        assert fact.target == "Grace"
    with psycopg.connect(fresh_dsn) as conn:
        dims = conn.execute(
            "SELECT vector_dims(embedding) FROM timestone.facts"
            " UNION SELECT vector_dims(name_embedding) FROM timestone.entities"
            " UNION SELECT vector_dims(embedding) FROM timestone.episodes"
        ).fetchall()
        stored = conn.execute("SELECT value FROM timestone.meta WHERE key = 'embedder'").fetchone()
        unbound = conn.execute(
            "SELECT count(*) FROM pg_class WHERE relnamespace = 'timestone'::regnamespace"
            " AND relkind = 'r' AND NOT relrowsecurity"
        ).fetchone()
    assert dims == [(32,)]
    assert stored is not None
    assert stored[0] == {"name": "hash", "dimension": 32}
    assert unbound == (0,)
    # and the old embedder is now the one refused
    with pytest.raises(EmbedderMismatch):
        timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16))


class _BrokenEmbedder(HashEmbedder):
    def __init__(self, mode: str) -> None:
        super().__init__(16)
        self.mode = mode

    def embed(self, texts: object) -> list[list[float]]:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        vectors = super().embed(texts)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
        if self.mode == "nan":
            vectors[-1][0] = float("nan")
        elif self.mode == "huge":  # a finite Python float, infinite as a 4-byte one
            vectors[-1][0] = 1e39
        elif self.mode == "short":
            vectors[-1] = vectors[-1][:-1]
        else:
            vectors = vectors[:-1]
        return vectors


class _BrokenArrayEmbedder(_BrokenEmbedder):
    """The same faults through ``embed_array``, the numpy form Timestone prefers."""

    def embed_array(self, texts: Sequence[str]) -> npt.NDArray[np.float64]:
        if self.mode == "short":
            return np.asarray(HashEmbedder.embed(self, texts))[:, :-1]
        return np.asarray(self.embed(texts), dtype=np.float64)


@pytest.mark.parametrize("kind", [_BrokenEmbedder, _BrokenArrayEmbedder])
@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("nan", "NaN"),
        ("huge", "beyond a 4-byte float"),
        ("short", "dimension 15"),
        ("count", "vectors for"),
    ],
)
def test_bad_embedder_output_writes_nothing(
    fresh_dsn: str, group: str, kind: type[_BrokenEmbedder], mode: str, message: str
) -> None:
    timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16)).close()
    with (
        timestone.Memory.open(fresh_dsn, embedder=kind(mode)) as mem,
        pytest.raises(EmbedderError, match=message),
    ):
        mem.add_facts(group, [timestone.FactInput("Ada", "KNOWS", "Grace")], reference_time=REF)
    with psycopg.connect(fresh_dsn) as conn:
        count = conn.execute("SELECT count(*) FROM timestone.episodes").fetchone()
    assert count == (0,)


def test_stored_embedder_is_recorded(dsn: str, memory: timestone.Memory) -> None:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT value FROM timestone.meta WHERE key = 'embedder'").fetchone()
    assert row is not None
    assert row[0] == {"name": memory.embedder.name, "dimension": memory.embedder.dimension}
    assert json.dumps(row[0])


def _send_buffer(fd: int) -> int:
    with socket.socket(fileno=os.dup(fd)) as sock:
        return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)


def _granted(family: int, asked: int) -> int:
    """The send buffer this system gives a new socket of ``family`` that asks for ``asked``."""
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, asked)
        return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)


def test_the_pool_widens_the_send_buffer_of_its_unix_sockets(memory: timestone.Memory) -> None:
    # a statement larger than the buffer (a megabyte of vectors) holds the client at its
    # send until the server reaches it, where a pipeline would have gone on
    granted = _granted(socket.AF_UNIX, SEND_BUFFER)
    assert granted > _granted(socket.AF_UNIX, 1)  # the system lets it grow at all
    with memory._db.pool.connection() as conn:  # pyright: ignore[reportPrivateUsage]
        assert _send_buffer(conn.pgconn.socket) == granted


async def test_the_async_pool_widens_them_too(amemory: timestone.AsyncMemory) -> None:
    async with amemory._db.pool.connection() as conn:  # pyright: ignore[reportPrivateUsage]
        assert _send_buffer(conn.pgconn.socket) == _granted(socket.AF_UNIX, SEND_BUFFER)


def test_a_tcp_socket_keeps_the_size_linux_tunes() -> None:
    # setting SO_SNDBUF on TCP fixes its size: the kernel would no longer grow it
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        before = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        widen_send_buffer(sock.fileno())
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == before
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        widen_send_buffer(left.fileno())
        assert _send_buffer(left.fileno()) == _granted(socket.AF_UNIX, SEND_BUFFER)
        left.sendall(b"still open")  # the descriptor it borrowed was its own copy
        assert right.recv(16) == b"still open"
    widen_send_buffer(-1)  # no socket: nothing to do, no error


def test_the_pool_turns_jit_off(memory: timestone.Memory) -> None:
    # a search's generic plan is estimated far above jit_above_cost at a million facts;
    # a server with JIT would compile it on every call
    with memory._db.transaction("g", "reading a setting") as conn:  # pyright: ignore[reportPrivateUsage]
        row = conn.execute("SELECT current_setting('jit') AS jit").fetchone()
    assert row == {"jit": "off"}


async def test_the_async_pool_turns_jit_off(amemory: timestone.AsyncMemory) -> None:
    async with amemory._db.transaction("g", "reading a setting") as conn:  # pyright: ignore[reportPrivateUsage]
        cur = await conn.execute("SELECT current_setting('jit') AS jit")
        assert await cur.fetchone() == {"jit": "off"}


def _prepared_on_each(mem: timestone.Memory) -> list[int]:
    """How many statements each of the pool's idle connections has prepared."""
    pool = mem._db.pool  # pyright: ignore[reportPrivateUsage]
    counts: list[int] = []
    for _ in range(pool.get_stats()["pool_available"]):
        with pool.connection() as conn:
            row = conn.execute("SELECT count(*) AS n FROM pg_prepared_statements").fetchone()
            assert row is not None
            counts.append(int(row["n"]))
    return counts


def _write(mem: timestone.Memory, group: str) -> None:
    """Eight writes: the same statements, past psycopg's threshold for preparing them."""
    for year in range(2010, 2018):
        mem.add_facts(
            group,
            [timestone.FactInput("Mira", "WORKS_AT", f"Winery {year}")],
            reference_time=datetime(year, 1, 1, tzinfo=UTC),
        )


def _read(mem: timestone.Memory, group: str) -> list[list[str]]:
    """Reads and searches, each repeated past that threshold (each of the group alone)."""
    found = [mem.facts(group, valid_at=None) for _ in range(6)]
    found += [mem.search(group, f"Winery {y}").facts for y in range(2010, 2018)]
    assert {f.group_id for facts in found for f in facts} == {group}
    return [[f.fact for f in facts] for facts in found]


def test_prepared_statements_can_be_turned_off(dsn: str, group: str) -> None:
    # behind a pooler in transaction mode that does not carry prepared statements
    # between server connections (PgBouncer before 1.21), a statement prepared on one
    # is missing on the next: "prepared statement "_pg3_2" does not exist"
    with timestone.Memory.open(dsn, pool_size=1, warm=False) as mem:
        _write(mem, group)
        prepared = _read(mem, group)
        assert sum(_prepared_on_each(mem)) > 0  # the default prepares what it repeats
    with timestone.Memory.open(dsn, pool_size=1, warm=False, prepared_statements=False) as mem:
        _write(mem, group + "-b")
        plain = _read(mem, group)
        assert _prepared_on_each(mem) == [0]
        assert _read(mem, group + "-b")[0] == prepared[0]
    assert plain == prepared
    assert len(plain[0]) == 8
    assert plain[-1][0] == "Mira works at Winery 2017."


def test_prepared_statements_follow_the_environment(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIMESTONE_PREPARED_STATEMENTS", " OFF ")
    with timestone.Memory.open(dsn, pool_size=1, warm=False) as mem:
        _write(mem, "t-env-" + os.urandom(6).hex())
        assert _prepared_on_each(mem) == [0]
    # the argument wins over the environment
    with timestone.Memory.open(dsn, pool_size=1, warm=False, prepared_statements=True) as mem:
        _write(mem, "t-env-" + os.urandom(6).hex())
        assert sum(_prepared_on_each(mem)) > 0


@pytest.mark.parametrize(
    ("argument", "variable", "message"),
    [
        ("no", None, "prepared_statements must be True, False or None, got str"),
        (0, None, "prepared_statements must be True, False or None, got int"),
        (None, "sometimes", "TIMESTONE_PREPARED_STATEMENTS must be on or off, got 'sometimes'"),
        (None, "", "TIMESTONE_PREPARED_STATEMENTS must be on or off, got ''"),
    ],
)
def test_a_bad_prepared_statements_setting_is_named(
    dsn: str, monkeypatch: pytest.MonkeyPatch, argument: object, variable: str | None, message: str
) -> None:
    if variable is not None:
        monkeypatch.setenv("TIMESTONE_PREPARED_STATEMENTS", variable)
    with pytest.raises(timestone.errors.InvalidInput, match=re.escape(message)):
        timestone.Memory.open(dsn, prepared_statements=argument)  # pyright: ignore[reportArgumentType]


def _with_timeouts(dsn: str, statement: str) -> None:
    """The database of ``dsn`` given a server-side statement timeout (and an idle one), as
    a managed server's administrator may set for applications."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        assert name is not None
        for setting, value in (
            ("statement_timeout", statement),
            ("idle_in_transaction_session_timeout", "1s"),
        ):
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                    sql.Identifier(name[0]), sql.Identifier(setting), sql.Literal(value)
                )
            )


def test_maintenance_runs_past_a_servers_statement_timeout(fresh_dsn: str) -> None:
    # migrating a fresh database ran statements longer than 20 ms here, and was cancelled
    # ("migrating the schema: canceling statement due to statement timeout")
    _with_timeouts(fresh_dsn, "20ms")
    with sync_db.connect_owner(fresh_dsn) as owner:
        row = owner.execute(
            "SELECT current_setting('statement_timeout') AS s,"
            " current_setting('idle_in_transaction_session_timeout') AS i"
        ).fetchone()
    assert row == {"s": "0", "i": "0"}
    with timestone.Memory.open(fresh_dsn, embedder=HashEmbedder(16)) as mem:
        with mem._db.pool.connection() as conn:  # pyright: ignore[reportPrivateUsage]
            kept = conn.execute("SELECT current_setting('statement_timeout') AS s").fetchone()
            conn.rollback()
        assert kept == {"s": "20ms"}  # the library's own queries keep the server's


async def test_async_maintenance_runs_past_it_too(fresh_dsn: str) -> None:
    _with_timeouts(fresh_dsn, "20ms")
    owner = await aio_db.connect_owner(fresh_dsn)
    async with owner:
        cur = await owner.execute("SELECT current_setting('statement_timeout') AS s")
        assert await cur.fetchone() == {"s": "0"}


def test_a_data_dir_with_a_space_in_its_path_starts_and_holds_data(tmp_path: Path) -> None:
    """The wheel passes the socket folder to postgres unquoted: a path with a space gets
    its socket in a folder of the runtime dir instead, and the data stays in the path."""
    folder = tmp_path / "my data"
    facts = [timestone.FactInput("Ada", "KNOWS", "Grace")]
    try:
        with timestone.Memory.open(data_dir=folder, embedder=HashEmbedder(16)) as mem:
            mem.add_facts("spaced", facts, reference_time=REF)
            assert " " not in mem.dsn
            assert [f.fact for f in mem.facts("spaced")] == ["Ada knows Grace."]
        assert (folder / "pg" / "postmaster.pid").exists()
    finally:
        release_embedded(folder)
    assert not (folder / "pg" / "postmaster.pid").exists()

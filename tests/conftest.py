"""One embedded Postgres for the whole run; each test gets its own group (tenant).

Tests never reach the network: any socket connection that is not a Unix
socket or loopback fails the test that made it.
"""

from __future__ import annotations

import atexit
import shutil
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import timestone
from timestone._embedded import embedded_dsn

ALLOW_NETWORK = False


_ROOT: list[Path] = []  # the private temporary root of this run, when it made one
_FAILED: list[bool] = []


def pytest_configure(config: pytest.Config) -> None:
    # A private temporary root per run: pytest's shared root keeps only its three newest
    # runs, and a parallel run must not delete the data dir of a server that is running.
    # It holds the embedded servers' data (about 400 MB), so a run that passes removes it
    # as the process exits: registered now, before any server starts, the removal runs
    # after the exit handlers that stop the servers (they run last registered first).
    # A run that fails keeps it, and says where.
    if config.option.basetemp is None:
        root = Path(tempfile.mkdtemp(prefix="timestone-tests-"))
        config.option.basetemp = str(root)
        _ROOT.append(root)
        atexit.register(_remove_root, root)


def _remove_root(root: Path) -> None:
    if not any(_FAILED):
        shutil.rmtree(root, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _FAILED.append(exitstatus != 0)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int) -> None:
    if _ROOT and exitstatus != 0:
        terminalreporter.write_line(f"the run's databases and files are kept in {_ROOT[0]}")


_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if self.family == socket.AF_UNIX:
        return _real_connect(self, address)
    where: object = address
    host = str(cast(tuple[object, ...], where)[0]) if isinstance(where, tuple) else str(where)
    if host in ("127.0.0.1", "::1", "localhost") or host.startswith("127."):
        return _real_connect(self, address)
    raise RuntimeError(f"a test tried to reach the network ({address!r}); tests run offline")


@pytest.fixture(scope="session", autouse=True)
def _no_network() -> Iterator[None]:
    if ALLOW_NETWORK:
        yield
        return
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    try:
        yield
    finally:
        socket.socket.connect = _real_connect  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("timestone-data")


@pytest.fixture(scope="session")
def dsn(data_dir: Path) -> str:
    """The DSN of the shared test database on the embedded server."""
    return embedded_dsn(data_dir)


def _scratch_database(dsn: str) -> Iterator[str]:
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield make_conninfo(dsn, dbname=name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def fresh_dsn(dsn: str) -> Iterator[str]:
    """A new, empty database on the embedded server, dropped afterwards."""
    yield from _scratch_database(dsn)


@pytest.fixture(scope="module")
def module_dsn(dsn: str) -> Iterator[str]:
    """A new, empty database for one test module (which may change its schema), dropped
    after it."""
    yield from _scratch_database(dsn)


@pytest.fixture(scope="session")
def memory(dsn: str) -> Iterator[timestone.Memory]:
    """The blocking memory on the shared database, with the default embedder."""
    mem = timestone.Memory.open(dsn)
    yield mem
    mem.close()


@pytest.fixture(scope="session")
async def amemory(dsn: str) -> AsyncIterator[timestone.AsyncMemory]:
    """The async memory on the shared database, with the default embedder."""
    mem = await timestone.AsyncMemory.open(dsn)
    yield mem
    await mem.close()


@pytest.fixture
def group() -> str:
    """A fresh group (tenant) id: tests never see each other's data."""
    return "t-" + uuid.uuid4().hex[:16]


# -- a seeded group for the adapter tests: the running example about Mira --------

MIRA: list[tuple[str, list[tuple[str, str, str]]]] = [
    (
        "2015-10-01",
        [
            ("Mira", "DIRECTS", "Château Nord"),
            ("Mira", "WORKS_AT", "Château Nord"),
            ("Mira", "WORKS_WITH_GRAPE", "Gamay"),
        ],
    ),
    (
        "2023-06-15",
        [
            ("Mira", "DIRECTS", "Château Sud"),
            ("Mira", "WORKS_AT", "Château Sud"),
            ("Mira", "WORKS_WITH_GRAPE", "Cabernet Franc"),
        ],
    ),
    (
        "2019-04-10",
        [
            ("Château Nord", "LOCATED_IN", "Burgundy"),
            ("Château Sud", "LOCATED_IN", "Loire Valley"),
            ("Mira", "STUDIED_AT", "Dijon Wine School"),
        ],
    ),
]


def seed_mira(memory: timestone.Memory, group: str) -> None:
    for day, facts in MIRA:
        memory.add_facts(
            group,
            [{"source": s, "relation": r, "target": t} for s, r, t in facts],
            reference_time=datetime.fromisoformat(day).replace(tzinfo=UTC),
        )


@pytest.fixture
def mira(memory: timestone.Memory, group: str) -> str:
    """A fresh group holding the Mira facts; returns its id."""
    seed_mira(memory, group)
    return group


# -- a question whose evidence is one hop from the entity it names ---------------


@pytest.fixture
def heron_facts() -> Callable[[int], list[timestone.FactInput]]:
    """Project Heron's facts: the one edge that leads to the answer of "May Project Heron
    ship lithium batteries?" (its supplier's restriction, one hop out), and ``engineers``
    other edges, each to an engineer who lives in a town of their own."""

    def facts(engineers: int) -> list[timestone.FactInput]:
        out = [
            timestone.FactInput(
                "Project Heron",
                "SHIPS_THROUGH",
                "Ada Logistics",
                fact="Project Heron ships all of its freight through Ada Logistics.",
            ),
            timestone.FactInput(
                "Ada Logistics",
                "RESTRICTED_FROM",
                "freight class",
                fact="Ada Logistics may no longer carry lithium batteries after the 2024 audit.",
            ),
        ]
        for i in range(engineers):
            person = f"Engineer {i}"
            out.append(
                timestone.FactInput(
                    "Project Heron", "EMPLOYS", person, fact=f"Project Heron employs {person}."
                )
            )
            out.append(
                timestone.FactInput(
                    person, "LIVES_IN", f"Town {i}", fact=f"{person} lives in Town {i}."
                )
            )
        return out

    return facts

"""One embedded Postgres for the whole run; each test gets its own group (tenant).

The run is sealed from the caller's environment:

- before anything reads it, every ``OPENAI_*``, ``TIMESTONE_*`` and libpq ``PG*``
  variable is removed from ``os.environ`` (the processes the tests start inherit the
  cleaned environment), so no test picks up a model, a server or a data dir of the
  machine it runs on; a test that needs one sets it with ``monkeypatch``;
- tests never reach the network: any socket connection that is not a Unix socket or
  loopback fails the test that made it;
- tests never reach a model (``ALLOW_MODEL_REQUESTS``): a chat-completion, completion,
  response or embedding request sent through a real ``httpx`` transport, even to
  loopback, raises ``ModelRequestBlocked`` (not an ``Exception``, so no retry loop
  swallows it) and fails the test. Model traffic goes through ``httpx.MockTransport``
  (``timestone.llm.ReplayTransport``) with scripted responses.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import httpx
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import timestone
from timestone.db._embedded import embedded_dsn

pytest_plugins = ("pytester",)

ALLOW_NETWORK = False
ALLOW_MODEL_REQUESTS = False

# what the library, the openai SDK and libpq read from the environment
SEALED_PREFIXES = ("OPENAI_", "TIMESTONE_", "PG")
_MODEL_PATHS = ("/chat/completions", "/completions", "/responses", "/embeddings")


def seal_environment() -> list[str]:
    """Remove the variables a test must not inherit from its caller; returns their names."""
    removed = [k for k in os.environ if k.startswith(SEALED_PREFIXES)]
    for k in removed:
        del os.environ[k]
    return removed


_ROOT: list[Path] = []  # the private temporary root of this run, when it made one
_FAILED: list[bool] = []


def pytest_configure(config: pytest.Config) -> None:
    seal_environment()  # first: nothing below, nor any test, sees the caller's variables
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


class ModelRequestBlocked(BaseException):
    """A test sent a request to a real model. A ``BaseException``, like ``KeyboardInterrupt``:
    the openai SDK and ``OpenAICompatibleLLM`` retry on ``Exception``, and must not turn
    this into a retried connection error."""


_BLOCKED: list[str] = []  # the model requests refused during the current test


def _refuse_model_request(request: Any) -> None:
    url = request.url
    if str(url.path).rstrip("/").endswith(_MODEL_PATHS):
        _BLOCKED.append(str(url))
        raise ModelRequestBlocked(
            f"a test tried to reach a real model ({request.method} {url}); tests never "
            "call a model (ALLOW_MODEL_REQUESTS is False): serve scripted responses with "
            "timestone.llm.ReplayTransport or httpx.MockTransport"
        )


def _real_transports() -> list[tuple[type[Any], type[Any]]]:
    """The network transports of ``httpx`` and of ``httpx2`` (which newer openai SDKs use)."""
    pairs: list[tuple[type[Any], type[Any]]] = [(httpx.HTTPTransport, httpx.AsyncHTTPTransport)]
    try:
        import httpx2  # pyright: ignore[reportMissingImports]
    except ImportError:
        return pairs
    module = cast(Any, httpx2)
    pairs.append((module.HTTPTransport, module.AsyncHTTPTransport))
    return pairs


def _guard(sync: type[Any], aio: type[Any]) -> Callable[[], None]:
    """Make ``sync``/``aio`` refuse model requests; returns what undoes it."""
    real = sync.handle_request
    areal = aio.handle_async_request

    def handle(self: Any, request: Any) -> Any:
        _refuse_model_request(request)
        return real(self, request)

    async def ahandle(self: Any, request: Any) -> Any:
        _refuse_model_request(request)
        return await areal(self, request)

    sync.handle_request = handle
    aio.handle_async_request = ahandle

    def undo() -> None:
        sync.handle_request = real
        aio.handle_async_request = areal

    return undo


@pytest.fixture(scope="session", autouse=True)
def _no_model_requests() -> Iterator[None]:
    if ALLOW_MODEL_REQUESTS:
        yield
        return
    undo = [_guard(sync, aio) for sync, aio in _real_transports()]
    try:
        yield
    finally:
        for u in undo:
            u()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    try:
        return (yield)
    except ModelRequestBlocked:
        _BLOCKED.clear()  # the test fails with it already: once is enough
        raise


@pytest.fixture(autouse=True)
def _no_model_request_went_unnoticed() -> Iterator[None]:
    """Fails a test whose model request was refused even when the code under test caught
    the ``ModelRequestBlocked`` (a bare ``except BaseException``)."""
    _BLOCKED.clear()
    yield
    if _BLOCKED:
        blocked, _BLOCKED[:] = list(_BLOCKED), []
        pytest.fail(f"a test tried to reach a real model: {', '.join(blocked)}", pytrace=False)


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

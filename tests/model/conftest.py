"""A real language model in the loop: the local server of ``tools.model``, on loopback.

``python -m tools.model.run`` runs these tests; ``make test`` does not collect this folder
(``norecursedirs`` in pyproject.toml). The server (``llama-cpp-python`` with the
packaged SmolLM2-135M-Instruct, built once into a cache outside the repository) starts
once per session and is stopped when the session ends, whatever the tests did.

The suite's guards stay, narrowed: the network is still loopback only, and a model
request is allowed only to a port this conftest opened for a local server
(``LOCAL_PORTS``); a request to any other model fails the test. Every exchange with the
server is recorded (``Recorder``): the request the library sent, the status, and the
``usage`` and answer the server gave, so the tests compare the ledger with what the
server counted.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tools.model

from _invariants import LOCAL_PORTS

import timestone
from tools.model.build import ensure_built
from tools.model.client import MakeLLM, Recorder, local_llm
from tools.model.server import Server

_MODEL_PATHS = ("/chat/completions", "/completions", "/responses", "/embeddings")


class ForeignModelRequest(BaseException):
    """A request to a model that is not the local server (a ``BaseException``: no retry
    loop turns it into a retried connection error)."""


def _check(request: Any) -> None:
    url = request.url
    if not str(url.path).rstrip("/").endswith(_MODEL_PATHS):
        return
    if url.host in ("127.0.0.1", "localhost") and url.port in LOCAL_PORTS:
        return
    raise ForeignModelRequest(
        f"a test tried to reach a model other than the local server ({request.method} {url})"
    )


@pytest.fixture(scope="session")
def model_server() -> Iterator[Server]:
    with Server(ensure_built()) as server:
        LOCAL_PORTS.add(server.port)
        yield server


def _transports() -> list[tuple[type[Any], type[Any]]]:
    """The network transports of ``httpx`` and of ``httpx2`` (which newer openai SDKs use)."""
    pairs: list[tuple[type[Any], type[Any]]] = [(httpx.HTTPTransport, httpx.AsyncHTTPTransport)]
    try:
        import httpx2  # pyright: ignore[reportMissingImports]
    except ImportError:
        return pairs
    module = cast(Any, httpx2)
    pairs.append((module.HTTPTransport, module.AsyncHTTPTransport))
    return pairs


@pytest.fixture(scope="session", autouse=True)
def _no_model_requests(model_server: Server) -> Iterator[None]:
    """Overrides the suite's guard: model requests reach the local server, and only it."""
    undo: list[tuple[type[Any], Any, Any]] = []
    for sync, aio in _transports():
        real, areal = sync.handle_request, aio.handle_async_request

        def handle(self: Any, request: Any, real: Any = real) -> Any:
            _check(request)
            return real(self, request)

        async def ahandle(self: Any, request: Any, areal: Any = areal) -> Any:
            _check(request)
            return await areal(self, request)

        sync.handle_request, aio.handle_async_request = handle, ahandle
        undo.append((sync, real, None))
        undo.append((aio, None, areal))
    try:
        yield
    finally:
        for cls, real, areal in undo:
            if real is not None:
                cls.handle_request = real
            else:
                cls.handle_async_request = areal


@pytest.fixture
def open_llm() -> Iterator[MakeLLM]:
    """``open_llm(base_url, model, **options)``: a model object on any endpoint, and its
    recorder; its HTTP clients are closed when the test ends."""
    opened: list[Recorder] = []

    def make(
        base_url: str, model: str, **options: Any
    ) -> tuple[timestone.OpenAICompatibleLLM, Recorder]:
        llm, recorder = local_llm(base_url, model, **options)
        opened.append(recorder)
        return llm, recorder

    yield make
    for recorder in opened:
        recorder.close()


@pytest.fixture
def make_llm(model_server: Server, open_llm: MakeLLM) -> MakeLLM:
    """``make_llm(**options)``: a model object on the local server, and its recorder."""

    def make(**options: Any) -> tuple[timestone.OpenAICompatibleLLM, Recorder]:
        options.setdefault("backoff", 0.05)
        return open_llm(model_server.base_url, model_server.model, **options)

    return make


@pytest.fixture(scope="module")
def model_mem(dsn: str) -> Iterator[timestone.Memory]:
    """A blocking memory on the shared database; each test sets ``llm`` itself."""
    mem = timestone.Memory.open(dsn)
    yield mem
    mem.close()


@pytest.fixture
def mem(model_mem: timestone.Memory) -> Iterator[timestone.Memory]:
    model_mem.llm = None
    yield model_mem
    model_mem.llm = None

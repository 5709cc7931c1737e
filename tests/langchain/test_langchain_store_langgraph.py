# pyright: reportOptionalMemberAccess=false, reportArgumentType=false
"""LangGraph's own store test bodies on TimestoneStore.

Each test below is the body of a test of LangGraph's Postgres store package
(``tests/test_async_store.py`` and ``tests/test_store.py`` of
``langgraph-checkpoint-postgres``), adapted only in how the store is built: a
store from ``TimestoneStore.afrom_conn_string`` or ``from_conn_string`` on the
test server, set up the way LangGraph's fixtures set theirs up.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import PutOp

import timestone
from langchain_timestone import TimestoneStore

GROUP = "langgraph-tests"


class CharacterEmbeddings(Embeddings):
    """An Embeddings with ``dims``, as LangGraph's tests use: Timestone's hashing double."""

    def __init__(self, dims: int = 32) -> None:
        self.dims = dims
        self._inner = timestone.HashEmbedder(dims)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._inner.embed(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._inner.embed([text])[0]


@pytest.fixture
def fake_embeddings() -> CharacterEmbeddings:
    return CharacterEmbeddings()


@pytest.fixture
async def store(fresh_dsn: str) -> AsyncIterator[TimestoneStore]:
    async with TimestoneStore.afrom_conn_string(fresh_dsn, group_id=GROUP) as store:
        await store.setup()
        yield store


def _index(fake_embeddings: CharacterEmbeddings, fields: Sequence[str] | None = None) -> Any:
    return {"dims": fake_embeddings.dims, "embed": fake_embeddings, "fields": fields}


@pytest.fixture
async def vector_store(
    fresh_dsn: str, fake_embeddings: CharacterEmbeddings
) -> AsyncIterator[TimestoneStore]:
    index = _index(fake_embeddings)
    async with TimestoneStore.afrom_conn_string(fresh_dsn, group_id=GROUP, index=index) as store:
        await store.setup()
        yield store


@pytest.fixture
def sync_vector_store(
    fresh_dsn: str, fake_embeddings: CharacterEmbeddings
) -> Iterator[TimestoneStore]:
    index = _index(fake_embeddings)
    with TimestoneStore.from_conn_string(fresh_dsn, group_id=GROUP, index=index) as store:
        store.setup()
        yield store


# -- tests/test_async_store.py ---------------------------------------------------------


async def test_no_running_loop(store: TimestoneStore) -> None:
    with pytest.raises(asyncio.InvalidStateError):
        store.put(("foo", "bar"), "baz", {"val": "baz"})
    with pytest.raises(asyncio.InvalidStateError):
        store.get(("foo", "bar"), "baz")
    with pytest.raises(asyncio.InvalidStateError):
        store.delete(("foo", "bar"), "baz")
    with pytest.raises(asyncio.InvalidStateError):
        store.search(("foo", "bar"))
    with pytest.raises(asyncio.InvalidStateError):
        store.list_namespaces(prefix=("foo",))
    with pytest.raises(asyncio.InvalidStateError):
        store.batch([PutOp(namespace=("foo", "bar"), key="baz", value={"val": "baz"})])
    with ThreadPoolExecutor(max_workers=1) as executor:
        future = executor.submit(store.put, ("foo", "bar"), "baz", {"val": "baz"})
        result = await asyncio.wrap_future(future)
        assert result is None
        future = executor.submit(store.get, ("foo", "bar"), "baz")
        result = await asyncio.wrap_future(future)
        assert result.value == {"val": "baz"}
        result = await asyncio.wrap_future(executor.submit(store.list_namespaces, prefix=("foo",)))


async def test_large_batches(store: TimestoneStore) -> None:
    N = 100  # less important that we are performant here
    M = 10

    with ThreadPoolExecutor(max_workers=10) as executor:
        futures: list[Any] = []
        for m in range(M):
            for i in range(N):
                futures += [
                    executor.submit(
                        store.put,
                        ("test", "foo", "bar", "baz", str(m % 2)),
                        f"key{i}",
                        value={"foo": "bar" + str(i)},
                    ),
                    executor.submit(
                        store.get,
                        ("test", "foo", "bar", "baz", str(m % 2)),
                        f"key{i}",
                    ),
                    executor.submit(
                        store.list_namespaces,
                        prefix=None,
                        max_depth=m + 1,
                    ),
                    executor.submit(
                        store.search,
                        ("test",),
                    ),
                    executor.submit(
                        store.put,
                        ("test", "foo", "bar", "baz", str(m % 2)),
                        f"key{i}",
                        value={"foo": "bar" + str(i)},
                    ),
                    executor.submit(
                        store.put,
                        ("test", "foo", "bar", "baz", str(m % 2)),
                        f"key{i}",
                        None,
                    ),
                ]

        results = await asyncio.gather(*(asyncio.wrap_future(future) for future in futures))
    assert len(results) == M * N * 6


async def test_large_batches_async(store: TimestoneStore) -> None:
    N = 1000
    M = 10
    coros: list[Any] = []
    for m in range(M):
        for i in range(N):
            coros.append(
                store.aput(
                    ("test", "foo", "bar", "baz", str(m % 2)),
                    f"key{i}",
                    value={"foo": "bar" + str(i)},
                )
            )
            coros.append(
                store.aget(
                    ("test", "foo", "bar", "baz", str(m % 2)),
                    f"key{i}",
                )
            )
            coros.append(
                store.alist_namespaces(
                    prefix=None,
                    max_depth=m + 1,
                )
            )
            coros.append(
                store.asearch(
                    ("test",),
                )
            )
            coros.append(
                store.aput(
                    ("test", "foo", "bar", "baz", str(m % 2)),
                    f"key{i}",
                    value={"foo": "bar" + str(i)},
                )
            )
            coros.append(
                store.adelete(
                    ("test", "foo", "bar", "baz", str(m % 2)),
                    f"key{i}",
                )
            )

    results = await asyncio.gather(*coros)
    assert len(results) == M * N * 6


async def test_vector_store_initialization(
    vector_store: TimestoneStore, fake_embeddings: CharacterEmbeddings
) -> None:
    """Test store initialization with embedding config."""
    assert vector_store.index_config is not None
    assert vector_store.index_config["dims"] == fake_embeddings.dims
    if isinstance(vector_store.index_config["embed"], Embeddings):
        assert vector_store.index_config["embed"] == fake_embeddings


# -- tests/test_store.py ---------------------------------------------------------------


def test_sync_vector_store_initialization(
    sync_vector_store: TimestoneStore, fake_embeddings: CharacterEmbeddings
) -> None:
    """Test store initialization with embedding config."""
    assert sync_vector_store.index_config is not None
    assert sync_vector_store.index_config["dims"] == fake_embeddings.dims
    if isinstance(sync_vector_store.index_config["embed"], Embeddings):
        assert sync_vector_store.index_config["embed"] == fake_embeddings

"""``TimestoneStore``: a LangGraph ``BaseStore`` on Timestone items.

Two ways to place namespaces in groups (tenants):

- pinned, ``TimestoneStore(memory, group_id="acme")``: every namespace lives in
  group ``acme``, unchanged. ``("memories", "alice")`` is the namespace
  ``("memories", "alice")`` of ``acme`` (LangMem's pattern), and
  ``list_namespaces()`` lists the group's.
- a group per first label, ``TimestoneStore(memory)``: ``("acme", "users",
  "alice")`` is the namespace ``("users", "alice")`` of group ``acme``; a call
  must name its group, since the database never reads across groups.

Every value is versioned: a put or a delete never erases, and ``as_of`` reads
what the store held then. Each operation is written once, as a plan of calls on
the memory (``_store_plans``), run by a blocking or an async driver.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Generator, Iterable, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any, cast

from langgraph.store.base import BaseStore, IndexConfig, Op, Result, validate_op_namespace

import timestone
from timestone.errors import InvalidInput
from timestone.toolkit import check_group

from ._store_batch import Merger
from ._store_index import EmbeddingsEmbedder, IndexPaths, check_index_config, check_paths
from ._store_plans import Groups, Lockstep, check_namespaces, plan_of

__all__ = ["TimestoneStore"]


def _run_blocking(mem: timestone.Memory, step: Lockstep, as_of: datetime | None) -> list[Result]:
    while not step.done:
        for group, at, ops in step.requests():
            step.answer(at, mem.batch_items(group, ops, as_of=as_of))
    return step.results


async def _run_async(
    mem: timestone.AsyncMemory, step: Lockstep, as_of: datetime | None
) -> list[Result]:
    while not step.done:
        for group, at, ops in step.requests():
            step.answer(at, await mem.batch_items(group, ops, as_of=as_of))
    return step.results


class TimestoneStore(BaseStore):
    """LangGraph long-term memory on Timestone.

    ``memory`` is a ``timestone.Memory`` (sync and async calls; async ones run the blocking
    call in a worker thread) or a ``timestone.AsyncMemory`` (async calls only).
    ``group_id``: the group every namespace lives in, unchanged; without it the first
    label of each namespace is the group. ``index``: LangGraph's ``IndexConfig``; its
    ``fields`` are the JSON paths embedded for ``search(query=...)``, each its own vector
    (default: the whole value); ``embed`` and ``dims``, when given, must be the memory's
    embedder (``from_conn_string`` opens a memory on them). ``fields``: the same as
    ``index={"fields": ...}``. ``as_of``: a read-only view of what the store held then.
    """

    __slots__ = (
        "_index",
        "_index_config",
        "_loop",
        "_mergers",
        "as_of",
        "fields",
        "group_id",
        "memory",
    )

    def __init__(
        self,
        memory: timestone.Memory | timestone.AsyncMemory,
        *,
        group_id: str | None = None,
        index: IndexConfig | None = None,
        fields: Sequence[str] | None = None,
        as_of: datetime | None = None,
    ) -> None:
        given = cast(object, memory)
        if not isinstance(given, (timestone.Memory, timestone.AsyncMemory)):
            raise TypeError(
                f"TimestoneStore needs a timestone.Memory or AsyncMemory, got {type(memory)!r}"
            )
        embed, dims, paths = check_index_config(index)
        if fields is not None:
            if paths is not None:
                raise InvalidInput("give the fields once: in index={'fields': ...} or fields=")
            paths = check_paths(fields, "fields")
        embedder = memory.embedder
        if embed is not None and not (
            isinstance(embedder, EmbeddingsEmbedder) and embedder.source is embed
        ):
            raise InvalidInput(
                "index['embed'] is the embedder of the memory: open the store with "
                "TimestoneStore.from_conn_string(dsn, index=...), or open the Memory with "
                "that embedder"
            )
        if dims is not None and dims != embedder.dimension:
            raise InvalidInput(
                f"index dims is {dims}, but the memory's embedder {embedder.name!r} makes "
                f"{embedder.dimension}-dimensional vectors"
            )
        self.memory = memory
        self.group_id = Groups(group_id, check_group).pinned
        self.fields = None if paths is None or paths == ["$"] else paths
        self._index = IndexPaths(self.fields)
        self.as_of = as_of
        self._mergers: dict[asyncio.AbstractEventLoop, Merger] = {}
        self._loop = _running_loop() if isinstance(memory, timestone.AsyncMemory) else None

    @property
    def index_config(self) -> MappingProxyType[str, Any]:
        """The store's index settings, read-only, as LangGraph's stores show theirs: ``dims``
        (the size of the memory's vectors), ``embed`` (the LangChain ``Embeddings`` given in
        ``index``, else the memory's embedder's ``embed``), ``fields`` (the JSON paths
        embedded; ``["$"]``: the whole value)."""
        embedder = self.memory.embedder
        embed = embedder.embeddings if isinstance(embedder, EmbeddingsEmbedder) else embedder.embed
        return MappingProxyType(
            {
                "dims": embedder.dimension,
                "embed": embed,
                "fields": ["$"] if self.fields is None else list(self.fields),
            }
        )

    # -- built the LangGraph way --------------------------------------------------------

    @classmethod
    @contextlib.contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        group_id: str | None = None,
        index: IndexConfig | None = None,
        pool_size: int = 8,
    ) -> Generator[TimestoneStore]:
        """A store on a ``timestone.Memory`` opened on ``conn_string`` (a Postgres DSN; ``""``:
        the embedded server), closed on exit. ``index["embed"]`` (a LangChain ``Embeddings`` or
        a function of a list of texts) with ``index["dims"]`` becomes the memory's embedder;
        without it, Timestone's default embedder."""
        memory = timestone.Memory.open(
            conn_string or None, embedder=_embedder_of(index), pool_size=pool_size
        )
        try:
            yield cls(memory, group_id=group_id, index=index)
        finally:
            memory.close()

    @classmethod
    @contextlib.asynccontextmanager
    async def afrom_conn_string(
        cls,
        conn_string: str,
        *,
        group_id: str | None = None,
        index: IndexConfig | None = None,
        pool_size: int = 8,
    ) -> AsyncGenerator[TimestoneStore]:
        """``from_conn_string`` on a ``timestone.AsyncMemory``."""
        memory = await timestone.AsyncMemory.open(
            conn_string or None, embedder=_embedder_of(index), pool_size=pool_size
        )
        try:
            yield cls(memory, group_id=group_id, index=index)
        finally:
            await memory.close()

    def setup(self) -> _Ready:
        """What ``PostgresStore.setup()`` does, done already: opening a memory migrates its
        schema. Kept so that code written for LangGraph's stores runs unchanged: a plain
        ``store.setup()`` as for ``PostgresStore``, and ``await store.setup()`` as for
        ``AsyncPostgresStore`` (the answer can be awaited, and need not be)."""
        return _Ready()

    async def asetup(self) -> None:
        """``setup()``: opening the memory migrated the schema."""

    # -- operations ---------------------------------------------------------------------

    def _plans(self, ops: Iterable[Op]) -> Lockstep:
        """The plans of ``ops``, started: every operation checked before any runs."""
        listed = list(ops)
        for op in listed:
            check_namespaces(op)
            validate_op_namespace(op)
        groups = Groups(self.group_id, check_group)
        return Lockstep([plan_of(op, groups, self._index, self.as_of) for op in listed])

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Runs ``ops`` in order. On a store built on an ``AsyncMemory``, a blocking call made
        from another thread is served by the event loop the memory runs on (as
        ``AsyncPostgresStore`` serves it); from that loop's own thread it is refused."""
        mem = self.memory
        if not isinstance(mem, timestone.Memory):
            return self._through_loop(list(ops))
        return _run_blocking(mem, self._plans(ops), self.as_of)

    def _through_loop(self, ops: list[Op]) -> list[Result]:
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            raise asyncio.InvalidStateError(
                "this TimestoneStore wraps an AsyncMemory and no event loop of it is running: "
                "use the async methods (aget, aput, asearch, ...), or build the store on a "
                "timestone.Memory for blocking calls"
            )
        if _running_loop() is loop:
            raise asyncio.InvalidStateError(
                "a blocking call on a TimestoneStore built on an AsyncMemory, made in the "
                "thread of the event loop that serves the memory, would wait on itself: use "
                "the async methods there (await store.aget(...) for store.get(...), aput, "
                "asearch, ...); blocking calls are served from other threads"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), loop).result()

    async def _abatch_now(self, ops: list[Op]) -> list[Result]:
        mem = self.memory
        if isinstance(mem, timestone.Memory):
            return await asyncio.to_thread(self.batch, ops)
        return await _run_async(mem, self._plans(ops), self.as_of)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Runs ``ops`` in order; concurrent calls are merged (``_store_batch``)."""
        loop = asyncio.get_running_loop()
        if isinstance(self.memory, timestone.AsyncMemory):
            self._loop = loop  # the loop that serves blocking calls from other threads
        merger = self._mergers.get(loop)
        if merger is None:
            for old in [lp for lp in self._mergers if lp.is_closed()]:
                del self._mergers[old]
            merger = self._mergers[loop] = Merger(self._abatch_now)
        return await merger.submit(list(ops))


class _Ready:
    """The answer of ``setup()``: nothing to do, and awaitable for async callers."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        yield from ()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _embedder_of(index: IndexConfig | None) -> EmbeddingsEmbedder | None:
    embed, dims, _ = check_index_config(index)
    if embed is None:
        return None
    if dims is None:
        raise InvalidInput("index['embed'] needs index['dims'], the size of its vectors")
    return EmbeddingsEmbedder(embed, dims)

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
from typing import cast

from langgraph.store.base import BaseStore, IndexConfig, Op, Result, validate_op_namespace

import timestone
from timestone.errors import InvalidInput
from timestone.toolkit import check_group

from ._store_batch import Merger
from ._store_index import EmbeddingsEmbedder, IndexPaths, check_index_config, check_paths
from ._store_plans import Groups, Plan, plan_of

__all__ = ["TimestoneStore"]


def _run_blocking(mem: timestone.Memory, plan: Plan) -> Result:
    try:
        call = next(plan)
        while True:
            name, args, kwargs = call
            call = plan.send(getattr(mem, name)(*args, **kwargs))
    except StopIteration as done:
        return cast(Result, done.value)


async def _run_async(mem: timestone.AsyncMemory, plan: Plan) -> Result:
    try:
        call = next(plan)
        while True:
            name, args, kwargs = call
            call = plan.send(await getattr(mem, name)(*args, **kwargs))
    except StopIteration as done:
        return cast(Result, done.value)


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

    __slots__ = ("_index", "_mergers", "as_of", "fields", "group_id", "memory")

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

    def setup(self) -> None:
        """What ``PostgresStore.setup()`` does, done already: opening a memory migrates its
        schema. Kept so that code written for LangGraph's stores runs unchanged."""

    async def asetup(self) -> None:
        """``setup()``: opening the memory migrated the schema."""

    # -- operations ---------------------------------------------------------------------

    def _plans(self, ops: Iterable[Op]) -> list[Plan]:
        listed = list(ops)
        for op in listed:
            validate_op_namespace(op)
        groups = Groups(self.group_id, check_group)
        return [plan_of(op, groups, self._index, self.as_of) for op in listed]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        mem = self.memory
        if not isinstance(mem, timestone.Memory):
            raise TypeError(
                "this TimestoneStore wraps an AsyncMemory: use the async methods (aget, aput, "
                "asearch, ...), or build it on a timestone.Memory for blocking calls"
            )
        return [_run_blocking(mem, plan) for plan in self._plans(ops)]

    async def _abatch_now(self, ops: list[Op]) -> list[Result]:
        mem = self.memory
        if isinstance(mem, timestone.Memory):
            return await asyncio.to_thread(self.batch, ops)
        return [await _run_async(mem, plan) for plan in self._plans(ops)]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Runs ``ops`` in order; concurrent calls are merged (``_store_batch``)."""
        loop = asyncio.get_running_loop()
        merger = self._mergers.get(loop)
        if merger is None:
            for old in [lp for lp in self._mergers if lp.is_closed()]:
                del self._mergers[old]
            merger = self._mergers[loop] = Merger(self._abatch_now)
        return await merger.submit(list(ops))


def _embedder_of(index: IndexConfig | None) -> EmbeddingsEmbedder | None:
    embed, dims, _ = check_index_config(index)
    if embed is None:
        return None
    if dims is None:
        raise InvalidInput("index['embed'] needs index['dims'], the size of its vectors")
    return EmbeddingsEmbedder(embed, dims)

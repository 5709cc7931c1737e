"""Concurrent async calls on one TimestoneStore: merged, bounded, and each answered as
LangGraph's InMemoryStore answers it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from langgraph.store.base import GetOp, Op, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

import timestone
from langchain_timestone import TimestoneStore
from timestone.errors import InvalidInput


class CountingMemory(timestone.AsyncMemory):
    """A real AsyncMemory that counts the item batches reaching it, their operations, and
    the most batches at once."""

    calls = 0
    ops = 0
    running = 0
    most = 0

    async def batch_items(self, group_id: str, ops: Any, **kwargs: Any) -> Any:
        self.calls += 1
        self.ops += len(ops)
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            return await super().batch_items(group_id, ops, **kwargs)
        finally:
            self.running -= 1


@pytest.fixture
async def counting(dsn: str) -> AsyncIterator[CountingMemory]:
    mem = await CountingMemory.open(dsn, pool_size=2)
    yield mem
    await mem.close()


async def _gathered(store: Any, n: int) -> list[Any]:
    await asyncio.gather(
        *(store.aput(("users", str(i % 50)), f"k{i}", {"i": i}, index=False) for i in range(n))
    )
    got = await asyncio.gather(
        *(store.aget(("users", str(i % 50)), f"k{i % 100}") for i in range(n))
    )
    return [None if g is None else (g.namespace, g.key, g.value) for g in got]


async def test_gathered_calls_are_merged_and_bounded(counting: CountingMemory, group: str) -> None:
    n = 2000
    expected = await _gathered(InMemoryStore(), n)
    store = TimestoneStore(counting, group_id=group)
    assert await _gathered(store, n) == expected
    # 2000 gathered puts, one batch; then 2000 gathered gets of which 100 differ, one
    # batch in which equal reads run once
    assert (counting.calls, counting.ops) == (2, n + 100)
    assert counting.most == 1  # one batch at a time: one connection of the pool


async def test_a_failing_call_fails_alone(counting: CountingMemory, group: str) -> None:
    store = TimestoneStore(counting, group_id=group)
    got = await asyncio.gather(
        store.aput(("a",), "good", {"v": 1}),
        store.aput(("a",), "bad", {"v": float("inf")}),
        store.aget(("a",), "good"),
        store.asearch(("a",), limit=-1),
        return_exceptions=True,
    )
    assert got[0] is None
    assert isinstance(got[1], InvalidInput)
    assert isinstance(got[3], InvalidInput)
    item = await store.aget(("a",), "good")
    assert item is not None
    assert item.value == {"v": 1}
    assert await store.aget(("a",), "bad") is None


async def test_blocking_memory_under_an_async_store(memory: timestone.Memory, group: str) -> None:
    store = TimestoneStore(memory, group_id=group)
    reference = InMemoryStore()
    assert await _gathered(store, 300) == await _gathered(reference, 300)


async def _same_key(store: Any) -> list[Any]:
    ns = ("test",)
    await asyncio.gather(*(store.aput(ns, "key", {"value": i}) for i in range(12)))
    first = await store.aget(ns, "key")
    await asyncio.gather(store.aput(ns, "key", {"value": "x"}), store.adelete(ns, "key"))
    gone = await store.aget(ns, "key")
    await asyncio.gather(store.adelete(ns, "key"), store.aput(ns, "key", {"value": "y"}))
    back = await store.aget(ns, "key")
    return [None if g is None else g.value for g in (first, gone, back)]


async def test_writes_of_one_key_land_in_call_order(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    expected = await _same_key(InMemoryStore())
    assert await _same_key(TimestoneStore(amemory, group_id=group)) == expected
    assert expected == [{"value": 11}, None, {"value": "y"}]


def test_a_batch_with_a_bad_op_writes_nothing(memory: timestone.Memory, group: str) -> None:
    store = TimestoneStore(memory, group_id=group)
    store.put(("a",), "kept", {"v": 0})
    bad = [
        PutOp(("a",), "new", {"v": 1}),
        PutOp(("a",), "kept", None),
        PutOp(("a",), "nan", {"v": float("nan")}),  # a value Postgres cannot hold
    ]
    with pytest.raises(InvalidInput, match="item value"):
        store.batch(bad)
    assert store.get(("a",), "new") is None
    kept = store.get(("a",), "kept")
    assert kept is not None
    assert kept.value == {"v": 0}
    with pytest.raises(InvalidInput, match="limit must be a non-negative integer"):
        store.batch([PutOp(("a",), "new", {"v": 1}), SearchOp(("a",), limit=-1)])
    assert store.get(("a",), "new") is None


HUGE = 10**30
BAD_IN_ANOTHER_GROUP: list[tuple[Callable[[str], Op], str]] = [
    (
        lambda g: PutOp((g, "users"), "nan", {"v": float("nan")}),
        "item value['v'] is nan, which JSON cannot hold",
    ),
    (
        lambda g: PutOp((g, "users"), "nul\x00", {"v": 1}),
        "item key contains a NUL byte, which Postgres text cannot store",
    ),
    (
        lambda g: SearchOp((g, "users"), offset=HUGE),
        f"offset must be an integer from 0 to 9,223,372,036,854,775,807, got {HUGE}",
    ),
    (
        lambda g: SearchOp((g, "users"), filter={"v": {"$gte": 0, "extra": 1}}),
        "filter['v'] mixes the operator '$gte' with the plain key 'extra': a condition holds "
        "either operators ($eq, $gt, $gte, $lt, $lte, $ne) or the fields of a nested object",
    ),
]


@pytest.mark.parametrize(
    ("bad", "message"), BAD_IN_ANOTHER_GROUP, ids=["nan", "nul key", "offset", "filter"]
)
def test_a_batch_across_groups_with_a_bad_op_writes_nothing(
    memory: timestone.Memory, group: str, bad: Callable[[str], Op], message: str
) -> None:
    """Without group_id a batch runs one transaction per group: every operation is
    checked before the first group's runs, so that a bad one in a later group fails the
    batch before the earlier group's writes."""
    first, second = group + "-a", group + "-b"
    store = TimestoneStore(memory)  # the first label of a namespace is the group
    store.put((first, "users"), "kept", {"v": 0})
    ops = [PutOp((first, "users"), "new", {"v": 1}), PutOp((first, "users"), "kept", None)]
    with pytest.raises(InvalidInput) as caught:
        store.batch([*ops, PutOp((second, "users"), "ok", {"v": 2}), bad(second)])
    assert str(caught.value) == message
    assert store.get((first, "users"), "new") is None
    kept = store.get((first, "users"), "kept")
    assert kept is not None
    assert kept.value == {"v": 0}
    assert memory.search_items(second, ()) == []


def test_a_batch_reads_before_it_writes(memory: timestone.Memory, group: str) -> None:
    """As in InMemoryStore: the reads of a batch see what was held before its writes, and
    of two writes of one key the last is kept."""
    ops = [
        PutOp(("b",), "k", {"v": 1}),
        GetOp(("b",), "k"),
        PutOp(("b",), "k", {"v": 2}),
        PutOp(("b",), "gone", {"v": 3}),
        PutOp(("b",), "gone", None),
    ]
    reference, store = InMemoryStore(), TimestoneStore(memory, group_id=group)
    got, want = store.batch(ops), reference.batch(ops)
    assert got == want == [None, None, None, None, None]
    for s in (reference, store):
        item = s.get(("b",), "k")
        assert item is not None
        assert item.value == {"v": 2}
        assert s.get(("b",), "gone") is None

"""TimestoneStore against LangGraph's InMemoryStore: same operations, same answers.

Search ranking is excepted: without a query InMemoryStore returns insertion order and
Timestone newest first, so searches are compared as sets, with a limit that holds them all.
Namespace listings are compared on the namespaces that hold items (see ``_run``).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from langgraph.store.base import BaseStore, InvalidNamespaceError, Item
from langgraph.store.memory import InMemoryStore

import timestone
from langchain_timestone import TimestoneStore
from timestone.errors import InvalidInput

Op = tuple[Any, ...]


def _operations(group: str, seed: int, n: int = 60) -> list[Op]:
    rnd = random.Random(seed)
    spaces = [(group, "users", "alice"), (group, "users", "bob"), (group, "notes"), (group,)]
    keys = ["a", "b", "c", "d"]
    ops: list[Op] = []
    for _ in range(n):
        ns, key = rnd.choice(spaces), rnd.choice(keys)
        roll = rnd.random()
        if roll < 0.45:
            value = {"n": rnd.randint(0, 9), "tag": rnd.choice(["x", "y"]), "deep": {"k": key}}
            ops.append(("put", ns, key, value))
        elif roll < 0.55:
            ops.append(("delete", ns, key))
        elif roll < 0.7:
            ops.append(("get", ns, key))
        elif roll < 0.9:
            prefix = ns[: rnd.randint(1, len(ns))]
            filters: list[dict[str, Any] | None] = [
                None,
                {"tag": "x"},
                {"n": {"$gte": 5}},
                {"deep": {"k": key}},
                {"n": {"$ne": 3}, "tag": "y"},
            ]
            ops.append(("search", prefix, rnd.choice(filters)))
        else:
            ops.append(("list", rnd.choice([None, 2, 3]), rnd.choice([(), ("users",), ("*",)])))
    return ops


def _shape(item: Item | None) -> Any:
    return None if item is None else (item.namespace, item.key, item.value)


def _holds(store: BaseStore, namespace: tuple[str, ...], max_depth: int | None) -> bool:
    """Whether a listed namespace holds an item (or, cut at max_depth, has one below)."""
    cut = max_depth is not None and len(namespace) == max_depth
    return any(
        i.namespace == namespace or (cut and i.namespace[: len(namespace)] == namespace)
        for i in store.search(namespace, limit=1000)
    )


def _run(store: BaseStore, group: str, ops: list[Op]) -> list[Any]:
    out: list[Any] = []
    for op in ops:
        if op[0] == "put":
            store.put(op[1], op[2], op[3])
        elif op[0] == "delete":
            store.delete(op[1], op[2])
        elif op[0] == "get":
            out.append(_shape(store.get(op[1], op[2])))
        elif op[0] == "search":
            found = store.search(op[1], filter=op[2], limit=100)
            out.append(sorted((i.namespace, i.key, str(i.value)) for i in found))
        else:
            prefix = (group, *op[2])
            names = store.list_namespaces(prefix=prefix, max_depth=op[1])
            # InMemoryStore keeps listing a namespace once its last item is deleted (or after
            # a mere get); Timestone lists the namespaces that hold items. Compare those.
            out.append([n for n in names if _holds(store, n, op[1])])
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_same_answers_as_in_memory_store(memory: timestone.Memory, group: str, seed: int) -> None:
    ops = _operations(group, seed)
    expected = _run(InMemoryStore(), group, ops)
    assert _run(TimestoneStore(memory), group, ops) == expected
    assert any(r not in (None, []) for r in expected)  # the sequence reads something back


async def test_async_store_on_async_and_blocking_memory(
    amemory: timestone.AsyncMemory, memory: timestone.Memory, group: str
) -> None:
    for mem in (amemory, memory):
        store = TimestoneStore(mem)
        ns = (group, "prefs", type(mem).__name__)
        await store.aput(ns, "food", {"likes": "pasta"})
        got = await store.aget(ns, "food")
        assert got is not None
        assert got.value == {"likes": "pasta"}
        assert got.namespace == ns
        found = await store.asearch(ns, query="what food do they like")
        assert [i.key for i in found] == ["food"]
        assert found[0].score is not None
        assert (await store.alist_namespaces(prefix=(group, "prefs")))[-1] == ns
        await store.adelete(ns, "food")
        assert await store.aget(ns, "food") is None


def test_query_ranks_by_meaning_and_fields(memory: timestone.Memory, group: str) -> None:
    store = TimestoneStore(memory, fields=["text"])
    ns = (group, "memories")
    store.put(ns, "1", {"text": "The user is allergic to peanuts", "kind": "health"})
    store.put(ns, "2", {"text": "The user lives in Lyon", "kind": "place"})
    store.put(ns, "3", {"text": "unindexed", "kind": "misc"}, index=False)
    hits = store.search(ns, query="peanut allergy", limit=3)
    assert hits[0].key == "1"
    assert hits[-1].key == "3"
    assert hits[-1].score is None


def test_as_of_view_reads_the_past_and_is_read_only(memory: timestone.Memory, group: str) -> None:
    store = TimestoneStore(memory)
    ns = (group, "profile")
    store.put(ns, "city", {"name": "Lyon"})
    got = store.get(ns, "city")
    assert got is not None
    store.put(ns, "city", {"name": "Paris"})
    past = TimestoneStore(memory, as_of=got.updated_at)
    before = past.get(ns, "city")
    assert before is not None
    assert before.value == {"name": "Lyon"}
    with pytest.raises(TypeError, match="read-only"):
        past.put(ns, "city", {"name": "Rome"})


def test_namespaces_that_break_the_rules(memory: timestone.Memory) -> None:
    store = TimestoneStore(memory)
    with pytest.raises(InvalidNamespaceError, match="first label is the Timestone group"):
        store.put(("-bad group!", "x"), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError, match="names no group"):
        store.search(())
    with pytest.raises(InvalidNamespaceError, match="names no group"):
        store.list_namespaces(prefix=("*", "users"))
    with pytest.raises(InvalidNamespaceError, match="periods"):
        store.put(("acme", "a.b"), "k", {"v": 1})
    with pytest.raises(TypeError, match="AsyncMemory"):
        TimestoneStore(memory="not a memory")  # type: ignore[arg-type]


def test_values_and_options_that_break_the_rules(memory: timestone.Memory, group: str) -> None:
    """Refused by name (InvalidInput, a ValueError as the in-memory store's errors are),
    and nothing written."""
    store = TimestoneStore(memory)
    with pytest.raises(InvalidInput, match="value must be a dict"):
        store.put((group, "x"), "k", "plain text")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="index must be False, None or a list of field paths"):
        store.put((group, "x"), "k", {"v": 1}, index=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="max_depth must be a non-negative integer, got ''"):
        store.list_namespaces(prefix=(group,), max_depth="")  # type: ignore[arg-type]
    assert store.search((group,)) == []


async def test_blocking_calls_on_async_memory_in_its_loop_are_refused(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    store = TimestoneStore(amemory)
    with pytest.raises(asyncio.InvalidStateError, match=r"await store\.aget"):
        store.get((group,), "k")
    await store.aput((group,), "k", {"v": 1})
    got = await asyncio.to_thread(store.get, (group,), "k")  # another thread: served
    assert got is not None
    assert got.value == {"v": 1}


def test_blocking_calls_on_async_memory_without_its_loop_are_refused(dsn: str, group: str) -> None:
    async def opened() -> TimestoneStore:
        return TimestoneStore(await timestone.AsyncMemory.open(dsn, pool_size=1))

    loop = asyncio.new_event_loop()
    try:
        store = loop.run_until_complete(opened())
        with pytest.raises(asyncio.InvalidStateError, match="no event loop of it is running"):
            store.get((group,), "k")
        assert isinstance(store.memory, timestone.AsyncMemory)
        loop.run_until_complete(store.memory.close())
    finally:
        loop.close()


def test_index_config_is_a_read_only_view(memory: timestone.Memory) -> None:
    store = TimestoneStore(memory, fields=["text"])
    config = store.index_config
    assert dict(config) == {
        "dims": memory.embedder.dimension,
        "embed": memory.embedder.embed,
        "fields": ["text"],
    }
    assert TimestoneStore(memory).index_config["fields"] == ["$"]
    with pytest.raises(TypeError):
        config["dims"] = 3  # type: ignore[index]
    with pytest.raises(AttributeError):
        store.index_config = {}  # type: ignore[misc]


async def test_setup_is_plain_and_awaitable(memory: timestone.Memory) -> None:
    store = TimestoneStore(memory)
    store.setup()  # as PostgresStore's
    assert await store.setup() is None  # as AsyncPostgresStore's

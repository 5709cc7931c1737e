"""TimestoneStore and LangGraph's InMemoryStore side by side: the same calls on both
stores, the same answers compared.

Each test makes one call sequence and runs it on both; where Timestone answers in
another order (newest first where InMemoryStore keeps insertion order), the
answers are compared as sets, and the test says so.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from typing import Any, cast

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

import timestone
from langchain_timestone import TimestoneStore
from timestone.errors import InvalidInput

DIMS = 32


def _words(texts: Sequence[str]) -> list[list[float]]:
    """An embedding function as LangGraph's IndexConfig takes: Timestone's hashing double."""
    return timestone.HashEmbedder(DIMS).embed(texts)


@pytest.fixture
def index_dsn(fresh_dsn: str) -> str:
    """A database of its own: a store built on an IndexConfig records its embedder there."""
    return fresh_dsn


@pytest.fixture
def pinned(memory: timestone.Memory, group: str) -> TimestoneStore:
    return TimestoneStore(memory, group_id=group)


def _found(store: BaseStore, *args: Any, **kwargs: Any) -> set[tuple[Any, ...]]:
    return {(i.namespace, i.key, repr(i.value), i.score) for i in store.search(*args, **kwargs)}


# -- 1. a store pinned to one group: LangMem's ("memories", user_id) -------------------


def _memories(store: BaseStore) -> list[Any]:
    out: list[Any] = []
    for user in ("alice", "bob"):
        store.put(("memories", user), "food", {"likes": f"{user}'s pasta"})
        store.put(("memories", user, "work"), "job", {"role": "engineer", "user": user})
    store.put(("profile",), "alice", {"age": 30})
    store.put(("memories", "bob"), "drink", {"likes": "tea"})
    # InMemoryStore lists a namespace after its last item is deleted; Timestone does not.
    # "drink" stays, so both list ("memories", "bob").
    store.delete(("memories", "bob"), "food")
    got = store.get(("memories", "alice"), "food")
    out.append(None if got is None else (got.namespace, got.key, got.value))
    out.append(store.get(("memories", "bob"), "food"))
    out.append(store.list_namespaces())
    out.append(store.list_namespaces(prefix=("memories",), max_depth=2))
    out.append(store.list_namespaces(suffix=("work",)))
    out.append(store.list_namespaces(prefix=("memories", "*"), suffix=("*",), limit=2, offset=1))
    out.append(sorted((i.namespace, i.key) for i in store.search(("memories",))))
    out.append(sorted((i.namespace, i.key) for i in store.search((), filter={"user": "bob"})))
    return out


def test_pinned_store_keeps_namespaces_as_given(pinned: TimestoneStore) -> None:
    expected = _memories(InMemoryStore())
    assert _memories(pinned) == expected
    assert expected[2] == [("memories", "alice"), ("memories", "alice", "work"), ("memories", "bob"), ("memories", "bob", "work"), ("profile",)]  # fmt: skip


def test_pinned_stores_of_two_groups_do_not_meet(memory: timestone.Memory, group: str) -> None:
    one, other = (
        TimestoneStore(memory, group_id=group),
        TimestoneStore(memory, group_id=group + "x"),
    )
    one.put(("memories", "alice"), "k", {"v": 1})
    assert other.get(("memories", "alice"), "k") is None
    assert other.list_namespaces() == []
    assert one.list_namespaces() == [("memories", "alice")]


def test_pinned_group_must_be_a_group_id(memory: timestone.Memory) -> None:
    with pytest.raises(timestone.errors.InvalidGroup, match="malformed"):
        TimestoneStore(memory, group_id="not a group!")


def test_group_per_first_label_refuses_to_list_every_group(memory: timestone.Memory) -> None:
    with pytest.raises(InvalidNamespaceError, match="pin the store to one group"):
        TimestoneStore(memory).list_namespaces()


# -- 2. an empty query is no query ---------------------------------------------------


def test_empty_query_is_no_query(pinned: TimestoneStore) -> None:
    config: Any = {"dims": DIMS, "embed": _words}
    reference = InMemoryStore(index=config)
    for store in (reference, pinned):
        store.put(("docs",), "a", {"text": "red apples"})
        store.put(("docs",), "b", {"text": "green pears"})
    for query in ("", None):
        got = _found(pinned, ("docs",), query=query)
        assert got == _found(reference, ("docs",), query=query)  # as sets: see the docstring
        assert {s for *_, s in got} == {None}
        assert len(got) == 2


# -- 3. IndexConfig: each field its own vector, an item scored by its best ------------


def _fields_calls(store: BaseStore) -> list[list[tuple[str, float | None]]]:
    ns = ("docs",)
    store.put(ns, "1", {"text": "xxx", "color": "red"})
    store.put(ns, "2", {"text": "blue sky", "color": "xxx"})
    store.put(ns, "3", {"text": "nothing here", "tags": ["alpha", "xxx"]}, index=["tags[*]"])
    store.put(ns, "4", {"other": "xxx"})  # no text at the paths: kept, and not ranked
    store.put(ns, "5", {"text": "xxx"}, index=False)
    out: list[list[tuple[str, float | None]]] = []
    for query in ("xxx", "red", "blue sky"):
        hits = store.search(ns, query=query, limit=10)
        scored = sorted((h.key, round(h.score, 5)) for h in hits if h.score is not None)
        out.append([*scored, *sorted((h.key, None) for h in hits if h.score is None)])
    return out


def test_fields_are_embedded_one_by_one(index_dsn: str, group: str) -> None:
    index: Any = {"dims": DIMS, "embed": _words, "fields": ["text", "color"]}
    expected = _fields_calls(InMemoryStore(index=index))
    with TimestoneStore.from_conn_string(index_dsn, group_id=group, index=index) as store:
        store.setup()
        got = _fields_calls(store)
    assert got == expected
    assert expected[0][:3] == [("1", 1.0), ("2", 1.0), ("3", 1.0)]


def test_langchain_embeddings_in_the_index(index_dsn: str, group: str) -> None:
    embeddings = DeterministicFakeEmbedding(size=DIMS)
    index: Any = {"dims": DIMS, "embed": embeddings, "fields": ["text"]}
    reference = InMemoryStore(index=index)
    with TimestoneStore.from_conn_string(index_dsn, group_id=group, index=index) as store:
        for s in (reference, store):
            s.put(("n",), "a", {"text": "tea with lemon"})
            s.put(("n",), "b", {"text": "coffee, black"})
        hits = [(h.key, round(h.score or 0, 5)) for h in store.search(("n",), query="tea")]
    assert hits == [(h.key, round(h.score or 0, 5)) for h in reference.search(("n",), query="tea")]


async def test_async_store_from_conn_string(index_dsn: str, group: str) -> None:
    index: Any = {"dims": DIMS, "embed": _words, "fields": ["text", "color"]}
    async with TimestoneStore.afrom_conn_string(index_dsn, group_id=group, index=index) as store:
        await store.asetup()
        await store.aput(("d",), "1", {"text": "abc", "color": "xyz"})
        hits = await store.asearch(("d",), query="xyz")
    assert [(h.key, round(h.score or 0, 5)) for h in hits] == [("1", 1.0)]


def test_index_config_that_does_not_fit(memory: timestone.Memory, index_dsn: str) -> None:
    with pytest.raises(InvalidInput, match="embedder of the memory"):
        TimestoneStore(memory, index={"dims": DIMS, "embed": _words})
    with pytest.raises(InvalidInput, match="makes 256-dimensional vectors"):
        TimestoneStore(memory, index={"dims": 3, "fields": ["text"]})
    with pytest.raises(InvalidInput, match="unknown keys"):
        TimestoneStore(memory, index={"field": ["text"]})  # type: ignore[arg-type]
    with (
        pytest.raises(InvalidInput, match="needs index\\['dims'\\]"),
        TimestoneStore.from_conn_string(index_dsn, index={"embed": _words}),
    ):
        pass


# -- 4. a suffix matches the whole namespace, group label included -------------------


def test_suffix_reaches_the_group_label(memory: timestone.Memory, group: str) -> None:
    reference, store = InMemoryStore(), TimestoneStore(memory)
    for s in (reference, store):
        s.put((group, "alice"), "k", {"v": 1})
        s.put((group, "team", "alice"), "k", {"v": 2})
        s.put((group, "bob"), "k", {"v": 3})
    for suffix in [("*", "alice"), (group, "alice"), ("*", "*", "alice"), (group,), ("x", "alice")]:
        for depth in (None, 1, 2):
            calls: dict[str, Any] = {"prefix": (group,), "suffix": suffix, "max_depth": depth}
            assert store.list_namespaces(**calls) == reference.list_namespaces(**calls)
    assert store.list_namespaces(prefix=(group,), suffix=("*", "alice")) == [(group, "alice"), (group, "team", "alice")]  # fmt: skip


# -- 5. limits, unholdable filter values, numbers jsonb would change ------------------


def test_limits_zero_and_above_a_page(pinned: TimestoneStore) -> None:
    reference = InMemoryStore()
    for s in (reference, pinned):
        s.batch([_put(("many",), str(i), {"i": i}) for i in range(1005)])
        s.put(("few",), "a", {"i": 0})
    for limit in (0, 1003, 5000):
        assert len(pinned.search(("many",), limit=limit)) == len(
            reference.search(("many",), limit=limit)
        )
    everything = pinned.search(("many",), limit=5000, offset=2)
    assert len({i.key for i in everything}) == 1003
    assert pinned.search(("few",), limit=0) == reference.search(("few",), limit=0) == []
    assert pinned.list_namespaces(limit=0) == reference.list_namespaces(limit=0) == []
    assert pinned.list_namespaces(limit=5000) == reference.list_namespaces(limit=5000)


def _put(ns: tuple[str, ...], key: str, value: dict[str, Any]) -> Any:
    return PutOp(ns, key, value, index=False)


FILTERS: list[dict[str, Any]] = [
    {"n": math.inf},
    {"n": {"$ne": math.inf}},
    {"n": {"$lt": math.inf}},
    {"n": {"$lte": math.inf}, "tag": "x"},
    {"n": {"$gt": math.inf}},
    {"n": {"$gt": -math.inf}},
    {"n": {"$lt": -math.inf}},
    {"n": {"$gte": math.nan}},
    {"n": math.nan},
    {"tag": "x\x00"},
    {"tag": {"$ne": "x\x00"}},
    {"deep": {"k": math.inf}},
    {"deep": {"k": {"$ne": math.inf}}},
    {"deep": {"k": {"$lt": math.inf}}},
    {"list": [1, math.inf]},
    {"n": {"$gte": 2, "$lt": math.inf}},
]


@pytest.mark.parametrize("filter_", FILTERS, ids=repr)
def test_filters_with_values_no_item_holds(pinned: TimestoneStore, filter_: dict[str, Any]) -> None:
    reference = InMemoryStore()
    for s in (reference, pinned):
        s.put(("f",), "a", {"n": 1, "tag": "x", "deep": {"k": 5}, "list": [1, 2]})
        s.put(("f",), "b", {"n": 2.5, "tag": "y", "deep": {"k": -1}})
        s.put(("f",), "c", {"n": -7, "tag": "x", "deep": "flat"})
    assert _found(pinned, ("f",), filter=filter_) == _found(reference, ("f",), filter=filter_)


MIXED: list[tuple[dict[str, Any], str]] = [
    ({"n": {"$gte": 0, "extra": 1}}, "filter['n'] mixes the operator '$gte' with the plain key 'extra'"),
    ({"n": {"$ne": math.inf, "extra": 1}}, "filter['n'] mixes the operator '$ne' with the plain key 'extra'"),
    ({"deep": {"k": {"extra": 1, "$lt": 9}}}, "filter['deep']['k'] mixes the operator '$lt' with the plain key 'extra'"),
    ({"n": {"$gte": 0, "$in": [1]}}, "filter['n']: unknown operator '$in'"),
]  # fmt: skip


@pytest.mark.parametrize(("filter_", "says"), MIXED, ids=repr)
def test_a_condition_mixing_operators_and_fields_is_refused_by_both(
    pinned: TimestoneStore, filter_: dict[str, Any], says: str
) -> None:
    """InMemoryStore raises "Unsupported operator" for a plain key among operators;
    Timestone refuses it naming the key (a value no item holds does not hide it)."""
    reference = InMemoryStore()
    for s in (reference, pinned):
        s.put(("f",), "a", {"n": 1, "deep": {"k": 5}})
    with pytest.raises(ValueError, match="Unsupported operator"):
        reference.search(("f",), filter=filter_)
    with pytest.raises(InvalidInput) as caught:
        pinned.search(("f",), filter=filter_)
    assert str(caught.value).startswith(says)


def test_a_condition_with_a_value_no_item_holds_is_checked_too(pinned: TimestoneStore) -> None:
    """A filter that could match nothing is still refused when its shape is wrong."""
    pinned.put(("f",), "a", {"n": 1})
    with pytest.raises(InvalidInput) as caught:
        pinned.search(("f",), filter={"n": {"$eq": math.nan, "extra": 1}})
    assert str(caught.value) == (
        "filter['n'] mixes the operator '$eq' with the plain key 'extra': a condition holds "
        "either operators ($eq, $gt, $gte, $lt, $lte, $ne) or the fields of a nested object"
    )


def test_huge_integers_and_offsets(pinned: TimestoneStore) -> None:
    """An integer too big for a float, stored or in a filter, is compared exactly (where
    InMemoryStore's float() overflows); an offset past Postgres's bigint is refused."""
    huge = 10**400
    pinned.put(("h",), "small", {"n": 3})
    pinned.put(("h",), "huge", {"n": huge})
    assert {i.key for i in pinned.search(("h",), filter={"n": {"$lt": huge}})} == {"small"}
    assert {i.key for i in pinned.search(("h",), filter={"n": {"$gt": 1}})} == {"small", "huge"}
    with pytest.raises(InvalidInput) as caught:
        pinned.search(("h",), offset=10**30)
    assert str(caught.value) == (
        f"offset must be an integer from 0 to 9,223,372,036,854,775,807, got {10**30}"
    )


def test_numbers_read_back_as_written(pinned: TimestoneStore) -> None:
    value = {
        "big": 1e300,
        "neg": -1.5e17,
        "small": 1e-300,
        "int": 10**30,
        "f": 1e16,
        "x": 0.1,
        "z": -0.0,
        "zs": [1, {"d": -0.0}],
    }
    reference = InMemoryStore()
    for s in (reference, pinned):
        s.put(("n",), "k", value)
    got, want = pinned.get(("n",), "k"), reference.get(("n",), "k")
    assert got is not None
    assert want is not None
    assert got.value == want.value
    assert {k: type(v) for k, v in got.value.items()} == {k: type(v) for k, v in value.items()}
    for zero in (got.value["z"], got.value["zs"][1]["d"], want.value["z"]):
        assert math.copysign(1.0, zero) == -1.0
    assert pinned.search(("n",), filter={"big": 1e300})[0].value["big"] == 1e300
    for s in (reference, pinned):
        s.put(("n",), "k", {"z": 0.0})  # a later version without -0.0 reads as written too
    later = pinned.get(("n",), "k")
    assert later is not None
    assert math.copysign(1.0, later.value["z"]) == 1.0
    assert pinned.search(("n",), filter={"z": -0.0})[0].key == "k"  # -0.0 == 0.0, as in Python


# -- more bad input: the reference store's answer is the bar --------------------------


@pytest.mark.parametrize("namespace", [("a.b",), ("ok", ""), ("ok", 3), ("x\x00",), ()], ids=repr)
def test_namespaces_both_stores_refuse(pinned: TimestoneStore, namespace: Any) -> None:
    for store in (InMemoryStore(), pinned):
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"v": 1})


def test_keys_and_values_as_the_reference_takes_them(pinned: TimestoneStore) -> None:
    reference = InMemoryStore()
    for s in (reference, pinned):
        s.put(("k",), 7, {"v": 1})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="dict"):  # both refuse, naming a dict
            s.put(("k",), "s", "not a dict")  # type: ignore[arg-type]
    got, want = pinned.get(("k",), "7"), reference.get(("k",), "7")
    assert got is not None
    assert want is not None
    assert (got.key, got.value) == (want.key, want.value)
    assert pinned.get(("k",), "s") is None
    with pytest.raises(InvalidNamespaceError, match="langgraph"):
        pinned.put(("langgraph", "x"), "k", {"v": 1})
    with pytest.raises(InvalidInput, match="limit must be a non-negative integer"):
        pinned.search(("k",), limit=-1)


def test_spaces_are_text_in_keys_and_labels(pinned: TimestoneStore) -> None:
    reference = InMemoryStore()
    for s in (reference, pinned):
        s.put((" ", "a b"), " ", {"v": 1})
    got, want = pinned.get((" ", "a b"), " "), reference.get((" ", "a b"), " ")
    assert got is not None
    assert want is not None
    assert (got.namespace, got.key, got.value) == (want.namespace, want.key, want.value)
    assert pinned.list_namespaces() == reference.list_namespaces() == [(" ", "a b")]
    with pytest.raises(InvalidInput, match="item key is empty"):
        pinned.put(("x",), "", {"v": 1})  # kept by InMemoryStore; refused here, not lost


def _langmem(store: BaseStore) -> tuple[list[str], list[tuple[str, ...]]]:
    import langmem

    tools: Any = langmem  # langmem's tool factories are partly untyped
    namespace = ("memories", "{langgraph_user_id}")
    manage = tools.create_manage_memory_tool(namespace=namespace, store=store)
    search = tools.create_search_memory_tool(
        namespace=namespace, store=store, response_format="content_and_artifact"
    )
    for user, text in [("alice", "Alice likes green tea"), ("bob", "Bob likes coffee")]:
        config: Any = {"configurable": {"langgraph_user_id": user}}
        manage.invoke({"content": text, "action": "create"}, config=config)
    config = {"configurable": {"langgraph_user_id": "alice"}}
    call: Any = {"name": "search_memory", "args": {"query": "tea"}, "id": "1", "type": "tool_call"}
    found = search.invoke(call, config=config).artifact
    return [f.value["content"] for f in found], store.list_namespaces()


# langmem's dependency trustcall imports Send from its pre-1.0 place in langgraph
@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
def test_langmem_tools_on_a_pinned_store(pinned: TimestoneStore) -> None:
    expected = _langmem(InMemoryStore())
    assert _langmem(pinned) == expected
    assert expected == (["Alice likes green tea"], [("memories", "alice"), ("memories", "bob")])


SPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("users", "456", "settings"),
    ("admin", "users", "789"),
    ("guests", "456", "preferences"),
]

LISTINGS: list[dict[str, Any]] = [
    {},
    {"prefix": ("a", "b")},
    {"suffix": ("f",)},
    {"prefix": ("a",), "suffix": ("f",)},
    {"prefix": ("a", "b"), "max_depth": 3},
    {"max_depth": 2},
    {"max_depth": 1},
    {"prefix": ("a", "b"), "limit": 2},
    {"prefix": ("a", "b"), "offset": 2},
    {"prefix": ("a", "*", "f")},
    {"suffix": ("*", "f")},
    {"prefix": ("*", "users"), "suffix": ("*", "settings")},
    {"prefix": ("*", "users")},
    {"suffix": ("*", "preferences")},
    {"prefix": ("nonexistent",)},
    {"prefix": ("users", "123")},
    {"prefix": ("a", "b", "c", "d", "e")},
    {"suffix": ("a", "b", "c", "d", "e")},
]


@pytest.fixture(scope="module")
def listed(memory: timestone.Memory) -> tuple[str, BaseStore, BaseStore, BaseStore]:
    """The same namespaces in a reference store and a pinned store, and under a group
    label in a reference store and a store with a group per first label."""
    group = "t-listing-" + uuid.uuid4().hex[:12]
    reference, pinned = InMemoryStore(), TimestoneStore(memory, group_id=group)
    labelled = InMemoryStore()
    for i, ns in enumerate(SPACES):
        for s in (reference, pinned):
            s.put(ns, f"id_{i}", {"data": i})
        labelled.put((group, *ns), f"id_{i}", {"data": i})  # the same rows, seen whole
    return group, reference, pinned, labelled


@pytest.mark.parametrize("listing", LISTINGS, ids=repr)
def test_namespace_listings(
    listed: tuple[str, BaseStore, BaseStore, BaseStore],
    memory: timestone.Memory,
    listing: dict[str, Any],
) -> None:
    group, reference, pinned, labelled = listed
    assert pinned.list_namespaces(**listing) == reference.list_namespaces(**listing)
    # the same rows through a store whose first label is the group
    whole = dict(listing, prefix=(group, *listing.get("prefix", ())))
    if listing.get("max_depth") is not None:
        whole["max_depth"] = listing["max_depth"] + 1
    assert TimestoneStore(memory).list_namespaces(**whole) == labelled.list_namespaces(**whole)


# -- 6. search prefixes are literal; booleans in ranges; listings cut at depth 0 -----


def _stars(store: BaseStore, base: tuple[str, ...]) -> list[Any]:
    """LangMem's ("memories", user_id) where one user's id is "*"."""
    for user in ("alice", "bob", "*"):
        store.put((*base, "memories", user), "m", {"user": user, "n": 1})
    store.put((*base, "memories", "*", "notes"), "n", {"user": "*", "n": 2})
    out: list[Any] = []
    searches: list[dict[str, Any]] = [{}, {"filter": {"n": {"$gte": 1}}}, {"query": "alice"}]
    for prefix in [("memories", "*"), ("memories", "*", "notes"), ("*",), ("*", "*")]:
        for kwargs in searches:
            found = store.search((*base, *prefix), **kwargs)
            out.append(sorted((i.namespace, i.key) for i in found))
    out.append(store.list_namespaces(prefix=(*base, "memories", "*"), max_depth=len(base) + 2))
    return out


@pytest.mark.parametrize("pin", [True, False], ids=["pinned", "group-label"])
def test_a_star_in_a_search_prefix_is_a_label(
    memory: timestone.Memory, group: str, pin: bool
) -> None:
    """A search's prefix is matched as written, as by InMemoryStore and PostgresStore: the
    user whose id is "*" reads their own items, not every user's. list_namespaces keeps
    "*" as any label."""
    config: Any = {"dims": DIMS, "embed": _words}
    store = TimestoneStore(memory, group_id=group) if pin else TimestoneStore(memory)
    base = () if pin else (group,)
    expected = _stars(InMemoryStore(index=config), base)
    assert _stars(store, base) == expected
    mine = [((*base, "memories", "*"), "m"), ((*base, "memories", "*", "notes"), "n")]
    assert expected[0] == mine
    assert expected[-1] == [(*base, "memories", "*"), (*base, "memories", "alice"), (*base, "memories", "bob")]  # fmt: skip
    [batched] = store.batch([SearchOp((*base, "memories", "*"), filter={"n": 1})])
    assert [(i.namespace, i.key) for i in cast(list[SearchItem], batched)] == mine[:1]


async def test_a_star_in_an_async_search_prefix_is_a_label(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    store = TimestoneStore(amemory, group_id=group)
    for user in ("alice", "*"):
        await store.aput(("memories", user), "m", {"user": user})
    found = await store.asearch(("memories", "*"))
    assert [(i.namespace, i.value) for i in found] == [(("memories", "*"), {"user": "*"})]


RANGES: list[dict[str, Any]] = [
    {"x": {"$gt": 0}},
    {"x": {"$gte": 1}},
    {"x": {"$lt": 1}},
    {"x": {"$lte": True}},
    {"x": {"$gt": False, "$lt": True}},
    {"x": {"$gte": True}, "tag": "b"},
]


@pytest.mark.parametrize("filter_", RANGES, ids=repr)
def test_ranges_read_booleans_as_numbers(pinned: TimestoneStore, filter_: dict[str, Any]) -> None:
    """True compares as 1 and False as 0, as InMemoryStore's float() reads them."""
    reference = InMemoryStore()
    for s in (reference, pinned):
        s.put(("r",), "true", {"x": True, "tag": "b"})
        s.put(("r",), "false", {"x": False, "tag": "b"})
        s.put(("r",), "two", {"x": 2})
        s.put(("r",), "half", {"x": "0.5"})
    assert _found(pinned, ("r",), filter=filter_) == _found(reference, ("r",), filter=filter_)


def test_a_range_on_a_missing_field_matches_nothing(pinned: TimestoneStore) -> None:
    """Where InMemoryStore's float() raises on a missing field or a text that is no
    number, the item simply does not match (as in Postgres, where the field is NULL)."""
    reference = InMemoryStore()
    for s in (reference, pinned):
        s.put(("r",), "k", {"y": 1})
    with pytest.raises(TypeError):
        reference.search(("r",), filter={"x": {"$gt": 0}})
    assert pinned.search(("r",), filter={"x": {"$gt": 0}}) == []
    pinned.put(("r",), "word", {"x": "abc"})
    assert pinned.search(("r",), filter={"x": {"$lt": 5}}) == []


@pytest.mark.parametrize("pin", [True, False], ids=["pinned", "group-label"])
def test_max_depth_zero_lists_the_root(memory: timestone.Memory, group: str, pin: bool) -> None:
    """max_depth=0 cuts every namespace to no label: [()] when any matched, as in
    InMemoryStore. A negative limit, offset or max_depth is refused (InMemoryStore reads
    it as a Python slice from the end; Postgres refuses a negative LIMIT or OFFSET)."""
    store = TimestoneStore(memory, group_id=group) if pin else TimestoneStore(memory)
    base = () if pin else (group,)
    reference = InMemoryStore()
    for s in (reference, store):
        s.put((*base, "a", "b"), "k", {"v": 1})
    for calls in [{}, {"suffix": ("b",)}, {"suffix": ("x",)}, {"prefix": (*base, "a", "b", "c")}]:
        whole: dict[str, Any] = {"prefix": base, **calls, "max_depth": 0}
        assert store.list_namespaces(**whole) == reference.list_namespaces(**whole)
    assert store.list_namespaces(prefix=base, max_depth=0) == [()]
    assert store.list_namespaces(prefix=base, suffix=("x",), max_depth=0) == []
    refused: list[tuple[dict[str, Any], str]] = [
        ({"max_depth": -1}, "max_depth must be a non-negative integer, got -1"),
        ({"limit": -1}, "limit must be a non-negative integer, got -1"),
        ({"offset": -1}, "offset must be a non-negative integer, got -1"),
    ]
    for bad, says in refused:
        with pytest.raises(InvalidInput) as caught:
            store.list_namespaces(prefix=base, **bad)
        assert str(caught.value) == says


# -- 7. a namespace given as one string -----------------------------------------------


def _text_calls(store: TimestoneStore, ns: Any) -> list[tuple[str, Any]]:
    """Each store method given the namespace ``ns``, and the name its refusal gives it."""
    good = PutOp(("ok",), "k", {"v": 1})
    return [
        ("namespace", lambda: store.put(ns, "k", {"v": 1})),
        ("namespace", lambda: store.get(ns, "k")),
        ("namespace", lambda: store.delete(ns, "k")),
        ("search namespace_prefix", lambda: store.search(ns)),
        ("list_namespaces prefix", lambda: store.list_namespaces(prefix=ns)),
        ("list_namespaces suffix", lambda: store.list_namespaces(suffix=ns)),
        ("namespace", lambda: store.batch([good, PutOp(ns, "k", {"v": 1})])),
        ("namespace", lambda: store.batch([good, PutOp(ns, "k", None)])),
        ("namespace", lambda: store.batch([good, GetOp(ns, "k")])),
        ("search namespace_prefix", lambda: store.batch([good, SearchOp(ns)])),
        (
            "list_namespaces prefix",
            lambda: store.batch([good, ListNamespacesOp((MatchCondition("prefix", ns),))]),
        ),
        (
            "list_namespaces suffix",
            lambda: store.batch([good, ListNamespacesOp((MatchCondition("suffix", ns),))]),
        ),
    ]


@pytest.mark.parametrize("pin", [True, False], ids=["pinned", "group-label"])
def test_a_string_namespace_is_refused_not_split(
    memory: timestone.Memory, group: str, pin: bool
) -> None:
    """put("users", ...) would be read as the namespace ("u", "s", "e", "r", "s"); it is
    refused naming it, and nothing of its batch is written."""
    store = TimestoneStore(memory, group_id=group) if pin else TimestoneStore(memory)
    for what, call in _text_calls(store, "users"):
        with pytest.raises(InvalidInput) as caught:
            call()
        assert str(caught.value) == (
            f"{what} must be a tuple of strings, got str 'users': a namespace is a tuple of "
            "labels, one label is ('users',), not 'users'"
        )
    assert TimestoneStore(memory, group_id=group).list_namespaces() == []


def test_a_bytes_namespace_is_refused_not_split(pinned: TimestoneStore) -> None:
    """Operations given to batch are checked by the store first. The store's own methods
    (put, search, ...) check the labels before they build the operation: LangGraph's
    check refuses the bytes there, naming them."""
    for what, call in _text_calls(pinned, b"users"):
        with pytest.raises((InvalidInput, InvalidNamespaceError)) as caught:
            call()
        assert "b'users'" in str(caught.value)
        if caught.type is InvalidInput:
            assert str(caught.value).startswith(f"{what} must be a tuple of strings, got bytes")
    for op in (GetOp(b"users", "k"), SearchOp(b"users")):  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="got bytes b'users'"):
            pinned.batch([op])
    assert pinned.list_namespaces() == []


async def test_a_string_namespace_is_refused_by_the_async_methods(
    amemory: timestone.AsyncMemory, group: str
) -> None:
    store = TimestoneStore(amemory, group_id=group)
    with pytest.raises(InvalidInput, match="namespace must be a tuple of strings, got str"):
        await store.aput("users", "k", {"v": 1})  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="namespace_prefix must be a tuple of strings"):
        await store.asearch("users")  # type: ignore[arg-type]
    assert await store.alist_namespaces() == []

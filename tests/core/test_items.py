"""Items: versioned JSON documents under a namespace and a key."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import pytest

import timestone
from timestone import Item, ItemPut, ItemSearch
from timestone.errors import InvalidGroup, InvalidInput


def test_put_get_replace_delete_and_history(memory: timestone.Memory, group: str) -> None:
    first = memory.put_item(group, ("users", "alice"), "food", {"likes": "pizza"})
    second = memory.put_item(group, ("users", "alice"), "food", {"likes": "pasta"})
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    got = memory.get_item(group, ("users", "alice"), "food")
    assert got is not None
    assert got.value == {"likes": "pasta"}
    assert memory.delete_item(group, ("users", "alice"), "food") is True
    assert memory.delete_item(group, ("users", "alice"), "food") is False
    assert memory.get_item(group, ("users", "alice"), "food") is None
    then = memory.get_item(group, ("users", "alice"), "food", as_of=first.updated_at)
    assert then is not None
    assert then.value == {"likes": "pizza"}


def test_search_filters_prefix_and_query(memory: timestone.Memory, group: str) -> None:
    memory.put_item(group, ("notes", "a"), "1", {"text": "likes hiking in the alps", "n": 1})
    memory.put_item(group, ("notes", "a"), "2", {"text": "allergic to peanuts", "n": 2})
    memory.put_item(group, ("notes", "b"), "3", {"text": "prefers window seats", "n": 3})
    memory.put_item(group, ("other",), "4", {"text": "unrelated", "n": 4}, index=False)
    under = memory.search_items(group, ("notes",), limit=10)
    assert {i.key for i in under} == {"1", "2", "3"}
    assert [i.key for i in memory.search_items(group, ("notes",), filter={"n": {"$gte": 2}})] in (
        ["3", "2"],
        ["2", "3"],
    )
    assert [i.key for i in memory.search_items(group, ("notes", "a"), filter={"n": 1})] == ["1"]
    ranked = memory.search_items(group, (), query="peanut allergy", limit=4)
    assert ranked[0].key == "2"
    assert ranked[0].score is not None
    assert ranked[-1].key == "4"
    assert ranked[-1].score is None  # not indexed: ranked last, unscored
    assert len(memory.search_items(group, (), limit=2, offset=3)) == 1
    assert memory.item_namespaces(group) == [("notes", "a"), ("notes", "b"), ("other",)]
    assert memory.item_namespaces(group, max_depth=1) == [("notes",), ("other",)]
    assert memory.item_namespaces(group, prefix=("*", "b")) == [("notes", "b")]
    assert memory.item_namespaces(group, suffix=("a",)) == [("notes", "a")]


def test_items_are_tenant_scoped(memory: timestone.Memory, group: str) -> None:
    memory.put_item(group, ("ns",), "k", {"v": 1})
    memory.put_item(group, (), "root", {"v": 0})
    root = memory.get_item(group, (), "root")
    assert root is not None
    assert root.namespace == ()
    assert memory.get_item(group + "-other", ("ns",), "k") is None
    assert memory.search_items(group + "-other", ()) == []


async def test_async_twin(amemory: timestone.AsyncMemory, group: str) -> None:
    await amemory.put_item(group, ("a",), "k", {"v": [1, 2]})
    got = await amemory.get_item(group, ("a",), "k")
    assert got is not None
    assert got.value == {"v": [1, 2]}
    assert [i.key for i in await amemory.search_items(group, ("a",), filter={"v": [1, 2]})] == ["k"]


@pytest.mark.parametrize(
    ("namespace", "key", "value", "message"),
    [
        ("users/alice", "k", {}, "tuple of strings"),
        (("a", ""), "k", {}, "namespace label is empty"),
        (("a",), "", {}, "item key is empty"),
        (("a",), "k", ["not", "a", "dict"], "JSON object"),
        (("a",), "k", {"x": object()}, r"item value\['x'\] is a object, which JSON cannot"),
        (("a",), "k", {"x": [1, float("nan")]}, r"item value\['x'\]\[1\] is nan"),
        (("a",), "k", {"x": "a\x00b"}, r"item value\['x'\] contains a NUL byte"),
        (("a",), "k", {"x": "a\ud83d"}, r"item value\['x'\] contains a lone surrogate"),
        (("a",), "k", {"\udc00": 1}, "a key of item value contains a lone surrogate"),
        (("a",), "k", {1: 1}, "item value has a key that is not a string: 1"),
        (("a",), "k\ud800", {}, "item key contains a lone surrogate"),
        (b"users", "k", {}, "namespace must be a tuple of strings, got bytes"),
        (bytearray(b"users"), "k", {}, "namespace must be a tuple of strings, got bytearray"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(
    memory: timestone.Memory,
    group: str,
    namespace: object,
    key: object,
    value: object,
    message: str,
) -> None:
    with pytest.raises(InvalidInput, match=message):
        memory.put_item(group, namespace, key, value)  # type: ignore[arg-type]
    assert memory.search_items(group, ()) == []


def test_bad_filter_and_group(memory: timestone.Memory, group: str) -> None:
    with pytest.raises(InvalidInput, match=r"unknown operator '\$in'"):
        memory.search_items(group, (), filter={"n": {"$in": [1]}})
    with pytest.raises(InvalidGroup):
        memory.put_item("", ("a",), "k", {})


@pytest.mark.parametrize(
    ("filter_", "message"),
    [
        ({"k": float("nan")}, r"filter\['k'\] is nan"),
        ({"k": {"$gt": "a\x00"}}, r"filter\['k'\]\['\$gt'\] contains a NUL byte"),
        ({"k": "\ud800"}, r"filter\['k'\] contains a lone surrogate"),
        ({"k": datetime(2020, 1, 1)}, r"filter\['k'\] is a datetime"),
    ],
)
def test_a_filter_json_cannot_hold_is_refused(
    memory: timestone.Memory, group: str, filter_: dict[str, Any], message: str
) -> None:
    """Such a filter could match nothing: it is refused, not answered with no items."""
    memory.put_item(group, ("a",), "k", {"k": "v"})
    with pytest.raises(InvalidInput, match=message):
        memory.search_items(group, (), filter=filter_)


def test_json_nested_too_deep_is_refused(memory: timestone.Memory, group: str) -> None:
    value: dict[str, Any] = {}
    inner = value
    for _ in range(100):
        inner["x"] = {}
        inner = inner["x"]
    with pytest.raises(InvalidInput, match=r"item value.*is nested deeper than 64 levels"):
        memory.put_item(group, ("a",), "k", value)
    assert memory.search_items(group, ()) == []


OPERATORS = "$eq, $gt, $gte, $lt, $lte, $ne"


@pytest.mark.parametrize(
    ("filter_", "message"),
    [
        (
            {"score": {"$gte": 0, "extra": 1}},
            "filter['score'] mixes the operator '$gte' with the plain key 'extra': a condition "
            f"holds either operators ({OPERATORS}) or the fields of a nested object",
        ),
        (
            {"a": {"b": {"extra": 1, "$lt": 5}}},
            "filter['a']['b'] mixes the operator '$lt' with the plain key 'extra': a condition "
            f"holds either operators ({OPERATORS}) or the fields of a nested object",
        ),
        (
            {"a": {"b": {"$in": [1]}}},
            f"filter['a']['b']: unknown operator '$in'; use one of {OPERATORS}",
        ),
        (
            {"tags": [1, {"$gte": 0, "$like": "x"}]},
            f"filter['tags'][1]: unknown operator '$like'; use one of {OPERATORS}",
        ),
    ],
)
def test_a_condition_is_operators_or_nested_fields_not_both(
    memory: timestone.Memory, group: str, filter_: dict[str, Any], message: str
) -> None:
    """As in LangGraph's InMemoryStore: a mapping with a ``$`` key holds operators only,
    wherever it is; a plain key among them was read as ``$lte``."""
    memory.put_item(group, ("a",), "k", {"score": 0, "a": {"b": 1}, "tags": [1, 2]})
    with pytest.raises(InvalidInput) as caught:
        memory.search_items(group, (), filter=filter_)
    assert str(caught.value) == message
    with pytest.raises(InvalidInput) as in_batch:  # the batch's write is not made
        memory.batch_items(
            group, [ItemPut(("a",), "new", {"v": 1}), ItemSearch((), filter=filter_)]
        )
    assert str(in_batch.value) == message
    assert [i.key for i in memory.search_items(group, ())] == ["k"]


def test_a_mapping_without_operators_matches_nested_fields(
    memory: timestone.Memory, group: str
) -> None:
    """Each field of a nested mapping is a condition of its own, operators included."""
    memory.put_item(group, ("a",), "one", {"a": {"b": 1, "c": "x"}, "tags": [1, 5]})
    memory.put_item(group, ("a",), "two", {"a": {"b": 7, "c": "x"}, "tags": [1, 2]})
    memory.put_item(group, ("a",), "flat", {"a": 3})

    def keys(filter_: dict[str, Any]) -> list[str]:
        return sorted(i.key for i in memory.search_items(group, (), filter=filter_))

    assert keys({"a": {"c": "x"}}) == ["one", "two"]
    assert keys({"a": {"b": {"$gt": 2}}}) == ["two"]
    assert keys({"a": {"b": {"$gte": 1}, "c": {"$ne": "y"}}}) == ["one", "two"]
    assert keys({"tags": [1, {"$gt": 3}]}) == ["one"]
    assert keys({"a": {}}) == ["one", "two"]  # an object with no field asked: any object


def test_range_filters_compare_huge_integers_exactly(memory: timestone.Memory, group: str) -> None:
    """An integer too big for a float is compared as it is: neither a filter naming one
    nor an item holding one fails a search."""
    huge = 10**400
    memory.put_item(group, ("n",), "small", {"n": 3})
    memory.put_item(group, ("n",), "float", {"n": 1e308})
    memory.put_item(group, ("n",), "huge", {"n": huge})
    memory.put_item(group, ("n",), "text", {"n": "2.5"})

    def keys(filter_: dict[str, Any]) -> list[str]:
        return sorted(i.key for i in memory.search_items(group, ("n",), filter=filter_))

    assert keys({"n": {"$lt": huge}}) == ["float", "small", "text"]
    assert keys({"n": {"$gt": 1}}) == ["float", "huge", "small", "text"]
    assert keys({"n": {"$gte": huge}}) == ["huge"]
    assert keys({"n": {"$gt": huge - 1, "$lte": huge}}) == ["huge"]
    assert keys({"n": {"$gt": huge}}) == []
    assert keys({"n": {"$gt": 1e308}}) == ["huge"]
    assert keys({"n": {"$lt": 3}}) == ["text"]


def test_an_offset_past_bigint_is_refused_naming_it(memory: timestone.Memory, group: str) -> None:
    """Postgres's OFFSET is a bigint: a larger offset is refused by name, not failed in
    the database."""
    memory.put_item(group, ("a",), "k", {"v": 1})
    assert memory.search_items(group, (), offset=2**63 - 1) == []
    assert memory.item_namespaces(group, offset=2**63 - 1) == []
    message = "offset must be an integer from 0 to 9,223,372,036,854,775,807, got {}"
    for offset in (2**63, 10**30):
        with pytest.raises(InvalidInput) as caught:
            memory.search_items(group, (), offset=offset)
        assert str(caught.value) == message.format(offset)
        with pytest.raises(InvalidInput) as listing:
            memory.item_namespaces(group, offset=offset)
        assert str(listing.value) == message.format(offset)
        with pytest.raises(InvalidInput) as in_batch:
            memory.batch_items(
                group, [ItemPut(("a",), "new", {"v": 2}), ItemSearch(("a",), offset=offset)]
            )
        assert str(in_batch.value) == message.format(offset)
    assert [i.key for i in memory.search_items(group, ())] == ["k"]


def test_check_item_ops_checks_as_batch_items_does_and_runs_none(
    memory: timestone.Memory, group: str
) -> None:
    ops = [ItemPut(("a",), "k", {"v": 1}), ItemPut(("a",), "bad", {"v": float("nan")})]
    for check in (timestone.Memory.check_item_ops, timestone.AsyncMemory.check_item_ops):
        with pytest.raises(InvalidInput) as caught:
            check(ops)
        assert str(caught.value) == "item value['v'] is nan, which JSON cannot hold"
        assert check(ops[:1]) is None
    assert memory.search_items(group, ()) == []


def test_a_search_prefix_is_literal_a_star_is_a_label(memory: timestone.Memory, group: str) -> None:
    """``*`` in a search's prefix is the label ``*`` (a user id may be one), as in
    LangGraph's stores: ``("memories", "*")`` is that user's items, not every user's.
    Only ``item_namespaces`` reads ``*`` as any label."""
    for user in ("alice", "bob", "*"):
        memory.put_item(group, ("memories", user), "m", {"user": user, "n": 1})
    memory.put_item(group, ("memories", "*", "deep"), "d", {"user": "*", "n": 2})

    def found(prefix: tuple[str, ...], **kwargs: Any) -> set[tuple[tuple[str, ...], str]]:
        return {(i.namespace, i.key) for i in memory.search_items(group, prefix, **kwargs)}

    star = {(("memories", "*"), "m"), (("memories", "*", "deep"), "d")}
    assert found(("memories", "*")) == star
    assert found(("memories", "*"), filter={"n": {"$gte": 1}}) == star  # filtered in Python
    assert found(("memories", "*"), query="alice") == star
    assert found(("memories", "*", "deep")) == {(("memories", "*", "deep"), "d")}
    assert found(("*",)) == set()
    assert found(("*", "*")) == set()
    assert found(("memories", "alice")) == {(("memories", "alice"), "m")}
    [batched] = memory.batch_items(group, [ItemSearch(("memories", "*"), filter={"n": 1})])
    assert {(i.namespace, i.key) for i in cast(list[Item], batched)} == {(("memories", "*"), "m")}
    assert memory.item_namespaces(group, prefix=("memories", "*"), max_depth=2) == [
        ("memories", "*"),
        ("memories", "alice"),
        ("memories", "bob"),
    ]


def test_range_filters_read_booleans_as_numbers(memory: timestone.Memory, group: str) -> None:
    """A boolean compares as 1 or 0 in a range, as equality already holds ``True == 1`` and
    as LangGraph's InMemoryStore reads it; a missing field, null or a text that is no
    number satisfies no range."""
    values: dict[str, dict[str, Any]] = {
        "true": {"x": True},
        "false": {"x": False},
        "two": {"x": 2},
        "half": {"x": "0.5"},
        "word": {"x": "abc"},
        "null": {"x": None},
        "missing": {"y": 1},
    }
    for key, value in values.items():
        memory.put_item(group, ("b",), key, value)

    def keys(filter_: dict[str, Any]) -> list[str]:
        return sorted(i.key for i in memory.search_items(group, ("b",), filter=filter_))

    assert keys({"x": {"$gt": 0}}) == ["half", "true", "two"]
    assert keys({"x": {"$gte": 1}}) == ["true", "two"]
    assert keys({"x": {"$lt": 1}}) == ["false", "half"]
    assert keys({"x": {"$lte": True}}) == ["false", "half", "true"]
    assert keys({"x": {"$gt": False, "$lt": True}}) == ["half"]
    assert keys({"x": 1}) == ["true"]  # equality: True == 1, as in Python
    assert keys({"y": {"$gt": 0}}) == ["missing"]
    assert keys({"x": {"$ne": 5}, "y": {"$lt": 5}}) == ["missing"]


def test_a_str_or_bytes_namespace_is_refused_everywhere(
    memory: timestone.Memory, group: str
) -> None:
    """A namespace given as text is not read as one label per character."""
    texts: list[Any] = ["users", b"users"]
    for namespace in texts:
        kind = type(namespace).__name__
        calls: list[tuple[str, Any]] = [
            ("namespace", lambda ns=namespace: memory.put_item(group, ns, "k", {"v": 1})),
            ("namespace", lambda ns=namespace: memory.get_item(group, ns, "k")),
            ("namespace", lambda ns=namespace: memory.delete_item(group, ns, "k")),
            ("namespace_prefix", lambda ns=namespace: memory.search_items(group, ns)),
            ("prefix", lambda ns=namespace: memory.item_namespaces(group, prefix=ns)),
            ("suffix", lambda ns=namespace: memory.item_namespaces(group, suffix=ns)),
            (
                "namespace",
                lambda ns=namespace: memory.batch_items(
                    group, [ItemPut(("ok",), "k", {"v": 1}), ItemPut(ns, "k", {"v": 1})]
                ),
            ),
            (
                "namespace_prefix",
                lambda ns=namespace: memory.batch_items(
                    group, [ItemPut(("ok",), "k", {"v": 1}), ItemSearch(ns)]
                ),
            ),
        ]
        for what, call in calls:
            with pytest.raises(InvalidInput) as caught:
                call()
            assert str(caught.value).startswith(f"{what} must be a tuple of strings, got {kind}")
    assert memory.item_namespaces(group) == []

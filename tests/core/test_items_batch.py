"""``batch_items``: one transaction for a batch of item operations."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import timestone
from timestone import ItemGet, ItemNamespaces, ItemPut, ItemSearch
from timestone.errors import InvalidInput


def test_a_batch_answers_each_operation_in_order(memory: timestone.Memory, group: str) -> None:
    memory.put_item(group, ("a",), "old", {"v": 0})
    got = memory.batch_items(
        group,
        [
            ItemPut(("a",), "k", {"v": 1}),
            ItemGet(("a",), "old"),
            ItemGet(("a",), "k"),  # reads see what was held before the batch's writes
            ItemPut((), "root", {"v": 2}, index=["one", "two"]),
            ItemPut(("a",), "old", None),
            ItemNamespaces(),
            ItemSearch(("a",), limit=5),
        ],
    )
    assert got[0] is None
    assert isinstance(got[1], timestone.Item)
    assert got[1].value == {"v": 0}
    assert got[2] is None
    assert got[5] == [("a",)]
    assert [i.key for i in got[6] or []] == ["old"]  # type: ignore[union-attr]
    assert memory.get_item(group, ("a",), "old") is None
    item = memory.get_item(group, ("a",), "k")
    assert item is not None
    assert item.value == {"v": 1}
    assert memory.get_item(group, (), "root") is not None
    assert [i.key for i in memory.search_items(group, (), query="two", limit=3)][:1] == ["root"]


def test_a_bad_operation_fails_the_batch_and_writes_nothing(
    memory: timestone.Memory, group: str
) -> None:
    with pytest.raises(InvalidInput, match="item key is empty"):
        memory.batch_items(group, [ItemPut(("b",), "k", {"v": 1}), ItemPut(("b",), "", {"v": 2})])
    assert memory.get_item(group, ("b",), "k") is None
    with pytest.raises(InvalidInput, match="takes ItemGet, ItemPut"):
        memory.batch_items(group, ["not an op"])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="a batch that writes cannot take it"):
        memory.batch_items(group, [ItemPut(("b",), "k", {"v": 1})], as_of=datetime.now(UTC))
    assert memory.get_item(group, ("b",), "k") is None

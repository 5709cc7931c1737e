"""The operations of ``batch_items``: what each reads or writes (no I/O here)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .._arguments import check_limit
from .._records import check_text
from ..errors import InvalidInput
from ._item import (
    Item,
    check_address,
    check_depth,
    check_filter,
    check_index,
    check_key,
    check_namespace,
    check_offset,
    check_value,
    index_texts,
)

__all__ = [
    "Checked",
    "ItemGet",
    "ItemNamespaces",
    "ItemOp",
    "ItemPut",
    "ItemResult",
    "ItemSearch",
    "check_op",
]


@dataclasses.dataclass(frozen=True, slots=True)
class ItemGet:
    """Read the item under ``namespace`` and ``key`` (its answer: the ``Item`` or None)."""

    namespace: Sequence[str]
    key: str


@dataclasses.dataclass(frozen=True, slots=True)
class ItemPut:
    """Write ``value`` under ``namespace`` and ``key``; ``value=None`` deletes. ``index`` as
    in ``put_item``. Its answer is None."""

    namespace: Sequence[str]
    key: str
    value: Mapping[str, Any] | None
    index: bool | str | Sequence[str] = True


@dataclasses.dataclass(frozen=True, slots=True)
class ItemSearch:
    """``search_items`` (its answer: the list of items); ``namespace_prefix`` is matched
    as written, ``*`` included."""

    namespace_prefix: Sequence[str] = ()
    query: str | None = None
    filter: Mapping[str, Any] | None = None
    limit: int = 10
    offset: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class ItemNamespaces:
    """``item_namespaces`` (its answer: the list of namespaces)."""

    prefix: Sequence[str] = ()
    suffix: Sequence[str] = ()
    max_depth: int | None = None
    limit: int = 100
    offset: int = 0


ItemOp = ItemGet | ItemPut | ItemSearch | ItemNamespaces
ItemResult = Item | list[Item] | list[tuple[str, ...]] | None


@dataclasses.dataclass(frozen=True, slots=True)
class Checked:
    """An operation with its arguments checked: ``kind`` is get, put, delete, search or
    namespaces; ``texts``: what a put embeds."""

    kind: str
    namespace: tuple[str, ...]
    key: str = ""
    value: dict[str, Any] | None = None
    texts: tuple[str, ...] = ()
    query: str | None = None
    filter: dict[str, Any] | None = None
    suffix: tuple[str, ...] = ()
    max_depth: int | None = None
    limit: int = 0
    offset: int = 0


def check_op(op: object) -> Checked:
    """``op`` checked as the single-item method it stands for checks its arguments."""
    if isinstance(op, ItemGet):
        return Checked("get", check_namespace(op.namespace, allow_empty=True), check_key(op.key))
    if isinstance(op, ItemPut):
        ns, key = check_namespace(op.namespace, allow_empty=True), check_key(op.key)
        check_address(ns, key)
        if op.value is None:
            return Checked("delete", ns, key)
        data = check_value(op.value)
        return Checked("put", ns, key, data, tuple(index_texts(data, check_index(op.index))))
    if isinstance(op, ItemSearch):
        prefix = check_namespace(op.namespace_prefix, "namespace_prefix", allow_empty=True)
        if op.query is not None:
            check_text(op.query, "query", max_chars=10_000)
        return Checked(
            "search",
            prefix,
            query=op.query,
            filter=check_filter(op.filter),
            limit=check_limit(op.limit),
            offset=check_offset(op.offset),
        )
    if isinstance(op, ItemNamespaces):
        return Checked(
            "namespaces",
            check_namespace(op.prefix, "prefix", allow_empty=True),
            suffix=check_namespace(op.suffix, "suffix", allow_empty=True),
            max_depth=check_depth(op.max_depth),
            limit=check_limit(op.limit),
            offset=check_offset(op.offset),
        )
    raise InvalidInput(
        f"a batch of items takes ItemGet, ItemPut, ItemSearch and ItemNamespaces, "
        f"got {type(op).__name__}"
    )

"""``TimestoneStore``: a LangGraph ``BaseStore`` on Timestone items.

A namespace's first label is the Timestone group (tenant); the rest is the
item's namespace inside the group. ``("acme", "users", "alice")`` is the
namespace ``("users", "alice")`` of group ``acme``. Every value is versioned:
a put or a delete never erases, and ``as_of`` reads what the store held then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
)

import timestone
from timestone._groups import check_group
from timestone.errors import InvalidGroup, InvalidInput

__all__ = ["TimestoneStore"]


def _split(namespace: Sequence[str], what: str) -> tuple[str, tuple[str, ...]]:
    """(group, namespace inside the group) of a LangGraph namespace."""
    if not namespace or namespace[0] == "*":
        raise InvalidNamespaceError(
            f"{what} {tuple(namespace)!r} names no group: the first label of a Timestone "
            "namespace is the group (tenant), and the database never reads across groups; "
            "start it with the group id, e.g. ('acme', 'users', 'alice')"
        )
    try:
        group = check_group(namespace[0])
    except InvalidGroup as exc:
        raise InvalidNamespaceError(
            f"{what} {tuple(namespace)!r}: its first label is the Timestone group, and {exc}"
        ) from exc
    return group, tuple(namespace[1:])


def _item(group: str, item: timestone.Item) -> Item:
    return Item(
        value=dict(item.value),
        key=item.key,
        namespace=(group, *item.namespace),
        created_at=item.created_at,
        updated_at=item.updated_at,
    )


def _search_item(group: str, item: timestone.Item) -> SearchItem:
    return SearchItem(
        namespace=(group, *item.namespace),
        key=item.key,
        value=dict(item.value),
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=item.score,
    )


class TimestoneStore(BaseStore):
    """LangGraph long-term memory on Timestone: ``namespace[0]`` is the group.

    ``memory`` is a ``timestone.Memory`` (sync and async calls; async ones run the blocking
    call in a worker thread) or a ``timestone.AsyncMemory`` (async calls only). ``fields``:
    the JSON paths embedded for ``search(query=...)`` (default: the whole value), as in
    LangGraph's ``IndexConfig``. ``as_of``: a read-only view of what the store held then.
    """

    __slots__ = ("as_of", "fields", "memory")

    def __init__(
        self,
        memory: timestone.Memory | timestone.AsyncMemory,
        *,
        fields: Sequence[str] | None = None,
        as_of: datetime | None = None,
    ) -> None:
        given = cast(object, memory)
        if not isinstance(given, (timestone.Memory, timestone.AsyncMemory)):
            raise TypeError(
                f"TimestoneStore needs a timestone.Memory or AsyncMemory, got {type(memory)!r}"
            )
        self.memory = memory
        self.fields = None if fields is None or list(fields) == ["$"] else list(fields)
        self.as_of = as_of

    # -- mapping ops to Timestone calls --------------------------------------------------

    def _index(self, op: PutOp, value: dict[str, Any]) -> bool | str:
        if op.index is False:
            return False
        given = cast(object, op.index)
        if given is not None and (
            isinstance(given, str)
            or not isinstance(given, Sequence)
            or not all(isinstance(p, str) for p in cast(Sequence[object], given))
        ):
            raise InvalidInput(
                f"index must be False, None or a list of field paths, got {given!r:.80}"
            )
        paths = op.index if op.index is not None else self.fields
        if paths is None or list(paths) == ["$"]:
            return True
        texts = [t for path in paths for t in get_text_at_path(value, tokenize_path(path))]
        return "\n".join(texts) if texts else False

    def _check_writable(self) -> None:
        if self.as_of is not None:
            raise TypeError("this TimestoneStore reads as_of a past moment and is read-only")

    @staticmethod
    def _conditions(op: ListNamespacesOp) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        prefix: tuple[str, ...] = ()
        suffix: tuple[str, ...] = ()
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                prefix = tuple(condition.path)
            elif condition.match_type == "suffix":
                suffix = tuple(condition.path)
            else:
                raise ValueError(f"unsupported match type {condition.match_type!r}")
        group, inner = _split(prefix, "list_namespaces prefix")
        return group, inner, suffix

    @staticmethod
    def _depth(op: ListNamespacesOp) -> int | None:
        """The depth inside the group (the group is the first label)."""
        depth = cast(object, op.max_depth)
        if depth is None:
            return None
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise InvalidInput(f"max_depth must be a positive integer, got {depth!r:.80}")
        return max(depth - 1, 1)

    @staticmethod
    def _names(
        op: ListNamespacesOp, group: str, names: list[tuple[str, ...]]
    ) -> list[tuple[str, ...]]:
        if op.max_depth == 1:  # only the group itself: one namespace, if it holds anything
            return [(group,)][op.offset : op.offset + op.limit] if names else []
        return [(group, *n) for n in names]

    @staticmethod
    def _window(op: ListNamespacesOp) -> tuple[int, int]:
        return (1000, 0) if op.max_depth == 1 else (op.limit, op.offset)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        mem = self.memory
        if not isinstance(mem, timestone.Memory):
            raise TypeError(
                "this TimestoneStore wraps an AsyncMemory: use the async methods (aget, aput, "
                "asearch, ...), or build it on a timestone.Memory for blocking calls"
            )
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                group, ns = _split(op.namespace, "namespace")
                got = mem.get_item(group, ns, op.key, as_of=self.as_of)
                results.append(None if got is None else _item(group, got))
            elif isinstance(op, SearchOp):
                group, ns = _split(op.namespace_prefix, "search namespace_prefix")
                found = mem.search_items(
                    group,
                    ns,
                    query=op.query,
                    filter=op.filter,
                    limit=op.limit,
                    offset=op.offset,
                    as_of=self.as_of,
                )
                results.append([_search_item(group, i) for i in found])
            elif isinstance(op, ListNamespacesOp):
                group, prefix, suffix = self._conditions(op)
                limit, offset = self._window(op)
                names = mem.item_namespaces(
                    group,
                    prefix=prefix,
                    suffix=suffix,
                    max_depth=self._depth(op),
                    limit=limit,
                    offset=offset,
                    as_of=self.as_of,
                )
                results.append(self._names(op, group, names))
            else:
                self._check_writable()
                group, ns = _split(op.namespace, "namespace")
                if op.value is None:
                    mem.delete_item(group, ns, op.key)
                else:
                    given = cast(object, op.value)
                    if not isinstance(given, Mapping):
                        raise InvalidInput(
                            f"value must be a dict (None deletes), got {type(given).__name__}"
                        )
                    value = dict(cast(Mapping[str, Any], given))
                    mem.put_item(group, ns, op.key, value, index=self._index(op, value))
                results.append(None)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        mem = self.memory
        if isinstance(mem, timestone.Memory):
            return await asyncio.to_thread(self.batch, list(ops))
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                group, ns = _split(op.namespace, "namespace")
                got = await mem.get_item(group, ns, op.key, as_of=self.as_of)
                results.append(None if got is None else _item(group, got))
            elif isinstance(op, SearchOp):
                group, ns = _split(op.namespace_prefix, "search namespace_prefix")
                found = await mem.search_items(
                    group,
                    ns,
                    query=op.query,
                    filter=op.filter,
                    limit=op.limit,
                    offset=op.offset,
                    as_of=self.as_of,
                )
                results.append([_search_item(group, i) for i in found])
            elif isinstance(op, ListNamespacesOp):
                group, prefix, suffix = self._conditions(op)
                limit, offset = self._window(op)
                names = await mem.item_namespaces(
                    group,
                    prefix=prefix,
                    suffix=suffix,
                    max_depth=self._depth(op),
                    limit=limit,
                    offset=offset,
                    as_of=self.as_of,
                )
                results.append(self._names(op, group, names))
            else:
                self._check_writable()
                group, ns = _split(op.namespace, "namespace")
                if op.value is None:
                    await mem.delete_item(group, ns, op.key)
                else:
                    given = cast(object, op.value)
                    if not isinstance(given, Mapping):
                        raise InvalidInput(
                            f"value must be a dict (None deletes), got {type(given).__name__}"
                        )
                    value = dict(cast(Mapping[str, Any], given))
                    await mem.put_item(group, ns, op.key, value, index=self._index(op, value))
                results.append(None)
        return results

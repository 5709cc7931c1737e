"""Each LangGraph store operation as a plan of calls on a Timestone memory.

A plan is a generator: it yields ``(group, operation)``, a Timestone item
operation (``timestone.ItemGet``, ``ItemPut``, ``ItemSearch``, ``ItemNamespaces``)
in a group, receives its answer, and returns the LangGraph result. The drivers
(``_store``) advance the plans of a batch together: the operations they yield at
one step run as one ``batch_items`` call per group, on a ``Memory`` or an
``AsyncMemory``: one body for both.
Results follow LangGraph's ``InMemoryStore``: ``limit=0`` is an empty page, a
limit above a page of Timestone's (1,000) reads page after page, a filter
naming a value no item can hold is settled (``_store_filters``), and an empty
query ranks nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

import timestone
from timestone.errors import InvalidInput, TimestoneError

from ._store_filters import NOTHING, settle, stand_in
from ._store_index import IndexPaths

__all__ = ["Groups", "Lockstep", "Plan", "check_namespaces", "plan_of"]

ItemOp = timestone.ItemGet | timestone.ItemPut | timestone.ItemSearch | timestone.ItemNamespaces
Call = tuple[str, ItemOp]
Plan = Generator[Call, Any, Result]
Namespace = tuple[str, ...]

PAGE = 1000
"""The most items or namespaces one Timestone call returns (its ``limit``)."""


class Groups:
    """Where a namespace lives: in the pinned group, unchanged, or in the group its first
    label names."""

    __slots__ = ("check", "pinned")

    def __init__(self, pinned: str | None, check: Callable[[object], str]) -> None:
        self.pinned = None if pinned is None else check(pinned)
        self.check = check

    def split(
        self, namespace: Sequence[str], what: str, *, wildcards: bool = False
    ) -> tuple[str, Namespace]:
        """(group, namespace inside the group). ``wildcards``: ``namespace`` is a pattern of
        ``list_namespaces``, where ``*`` is any label; elsewhere ``*`` is a label as written
        (never a valid group id)."""
        if self.pinned is not None:
            return self.pinned, tuple(namespace)
        if not namespace or (wildcards and namespace[0] == "*"):
            raise InvalidNamespaceError(
                f"{what} {tuple(namespace)!r} names no group: the first label of a Timestone "
                "namespace is the group (tenant), and the database never reads across groups; "
                "start it with the group id, e.g. ('acme', 'users', 'alice'), or pin the "
                "store to one group: TimestoneStore(memory, group_id='acme')"
            )
        try:
            group = self.check(namespace[0])
        except TimestoneError as exc:
            raise InvalidNamespaceError(
                f"{what} {tuple(namespace)!r}: its first label is the Timestone group, and {exc}"
            ) from exc
        return group, tuple(namespace[1:])

    def full(self, group: str, inner: Sequence[str]) -> Namespace:
        """The LangGraph namespace of ``inner`` in ``group``."""
        return tuple(inner) if self.pinned is not None else (group, *inner)


def check_namespaces(op: Op) -> None:
    """Refuse a namespace (or a search prefix, or a listing's prefix or suffix) given as a
    ``str`` or ``bytes``, which would be read as one label per character: before LangGraph's
    label check, which reads it so too."""
    given = cast(object, op)
    if isinstance(given, (GetOp, PutOp)):
        _whole(cast(object, given.namespace), "namespace")
    elif isinstance(given, SearchOp):
        _whole(cast(object, given.namespace_prefix), "search namespace_prefix")
    elif isinstance(given, ListNamespacesOp):
        for condition in given.match_conditions or ():
            _whole(cast(object, condition.path), f"list_namespaces {condition.match_type}")


def _whole(namespace: object, what: str) -> None:
    if isinstance(namespace, (str, bytes, bytearray)):
        raise InvalidInput(
            f"{what} must be a tuple of strings, got {type(namespace).__name__} "
            f"{namespace!r:.80}: a namespace is a tuple of labels, one label is "
            "('users',), not 'users'"
        )


def _count(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidInput(f"{what} must be a non-negative integer, got {value!r:.80}")
    return value


def _matches(namespace: Namespace, suffix: Namespace) -> bool:
    if len(namespace) < len(suffix):
        return False
    tail = namespace[len(namespace) - len(suffix) :]
    return all(s in ("*", n) for n, s in zip(tail, suffix, strict=True))


def plan_of(op: Op, groups: Groups, fields: IndexPaths, as_of: datetime | None) -> Plan:
    if isinstance(op, GetOp):
        return _get(op, groups)
    if isinstance(op, SearchOp):
        return _search(op, groups)
    if isinstance(op, ListNamespacesOp):
        return _namespaces(op, groups)
    if isinstance(cast(object, op), PutOp):
        if as_of is not None:
            raise TypeError("this TimestoneStore reads as_of a past moment and is read-only")
        return _put(op, groups, fields)
    raise InvalidInput(f"unknown store operation {type(op).__name__}")


def _get(op: GetOp, groups: Groups) -> Plan:
    group, ns = groups.split(op.namespace, "namespace")
    got: timestone.Item | None = yield (group, timestone.ItemGet(ns, op.key))
    if got is None:
        return None
    return Item(
        value=dict(got.value),
        key=got.key,
        namespace=groups.full(group, got.namespace),
        created_at=got.created_at,
        updated_at=got.updated_at,
    )


def _put(op: PutOp, groups: Groups, fields: IndexPaths) -> Plan:
    group, ns = groups.split(op.namespace, "namespace")
    if op.value is None:
        yield (group, timestone.ItemPut(ns, op.key, None))
        return None
    given = cast(object, op.value)
    if not isinstance(given, Mapping):
        raise InvalidInput(f"value must be a dict (None deletes), got {type(given).__name__}")
    value = dict(cast(Mapping[str, Any], given))
    index = fields.index_of(value, op.index)
    yield (group, timestone.ItemPut(ns, op.key, value, index))
    return None


def _search(op: SearchOp, groups: Groups) -> Plan:
    group, ns = groups.split(op.namespace_prefix, "search namespace_prefix")
    limit, offset = _count(op.limit, "limit"), _count(op.offset, "offset")
    given = cast(object, op.filter)
    if given is not None and not isinstance(given, Mapping):
        raise InvalidInput(f"filter must be a dict, got {type(given).__name__}")
    if given is not None:  # its shape, before settle drops what no item can hold
        shape = cast(Mapping[str, Any], stand_in(cast(object, given)))
        timestone.Memory.check_item_ops([timestone.ItemSearch(filter=shape)])
    filter_ = settle(cast(Mapping[str, Any] | None, given))
    query = cast(object, op.query)
    if query is not None and not isinstance(query, str):
        raise InvalidInput(f"query must be a string, got {type(query).__name__}")
    if limit == 0 or filter_ is NOTHING:
        return []
    found: list[timestone.Item] = []
    while len(found) < limit:
        n = min(limit - len(found), PAGE)
        page: list[timestone.Item] = yield (
            group,
            timestone.ItemSearch(
                ns,
                query=query if query and query.strip() else None,  # "" or blanks: no query
                filter=cast(Mapping[str, Any] | None, filter_),
                limit=n,
                offset=offset + len(found),
            ),
        )
        found.extend(page)
        if len(page) < n:
            break
    return [
        SearchItem(
            namespace=groups.full(group, i.namespace),
            key=i.key,
            value=dict(i.value),
            created_at=i.created_at,
            updated_at=i.updated_at,
            score=i.score,
        )
        for i in found
    ]


def _namespaces(op: ListNamespacesOp, groups: Groups) -> Plan:
    prefix: Namespace = ()
    suffix: Namespace = ()
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix":
            prefix = tuple(condition.path)
        elif condition.match_type == "suffix":
            suffix = tuple(condition.path)
        else:
            raise InvalidInput(f"unsupported match type {condition.match_type!r:.80}")
    depth = cast(object, op.max_depth)
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 0):
        raise InvalidInput(f"max_depth must be a non-negative integer, got {depth!r:.80}")
    limit, offset = _count(op.limit, "limit"), _count(op.offset, "offset")
    group, inner = groups.split(prefix, "list_namespaces prefix", wildcards=True)
    # Inside a group a suffix can be matched only on the labels after the group: the
    # last label of it that would fall on the group is checked here, on the full names.
    inner_suffix = suffix if groups.pinned is not None else suffix[1:]
    names: list[Namespace] = []
    while True:
        page: list[Namespace] = yield (
            group,
            timestone.ItemNamespaces(inner, inner_suffix, limit=PAGE, offset=len(names)),
        )
        names.extend(page)
        if len(page) < PAGE:
            break
    full = (groups.full(group, n) for n in names)
    # max_depth=0 cuts every namespace to (): [()] when any matched, as in InMemoryStore
    cut = {n[:depth] if depth is not None else n for n in full if _matches(n, suffix)}
    return sorted(cut)[offset : offset + limit]


class Lockstep:
    """The plans of one batch, advanced together: the operations they yield at one step
    are asked of the memory together, one ``batch_items`` call per group. Starting the
    plans checks every operation, so that a bad one fails the batch before anything runs:
    the store's arguments as the plans read them, then the Timestone operations of the
    first step (every write of the batch is in it) when they span groups. In one group
    the ``batch_items`` call checks them all first itself; across groups it could not,
    since each group's call commits before the next one starts."""

    __slots__ = ("_plans", "_waiting", "results")

    def __init__(self, plans: list[Plan]) -> None:
        self._plans = plans
        self._waiting: dict[int, Call] = {}
        self.results: list[Result] = [None] * len(plans)
        for i in range(len(plans)):
            self._step(i, None)
        if len({group for group, _ in self._waiting.values()}) > 1:
            timestone.Memory.check_item_ops([op for _, op in self._waiting.values()])

    def _step(self, i: int, answer: Any) -> None:
        plan = self._plans[i]
        try:
            self._waiting[i] = plan.send(answer)  # send(None) starts a plan
        except StopIteration as done:
            self.results[i] = cast(Result, done.value)

    @property
    def done(self) -> bool:
        return not self._waiting

    def requests(self) -> list[tuple[str, list[int], list[ItemOp]]]:
        """(group, the plans asking, their operations) of this step."""
        by_group: dict[str, tuple[list[int], list[ItemOp]]] = {}
        for i, (group, op) in self._waiting.items():
            at, ops = by_group.setdefault(group, ([], []))
            at.append(i)
            ops.append(op)
        return [(group, at, ops) for group, (at, ops) in by_group.items()]

    def answer(self, at: list[int], answers: Sequence[Any]) -> None:
        for i, got in zip(at, answers, strict=True):
            del self._waiting[i]
            self._step(i, got)

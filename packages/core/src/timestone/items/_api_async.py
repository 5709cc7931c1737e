"""Items: JSON documents under a namespace and a key, as ``AsyncMemory`` offers them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .._arguments import check_as_of, check_limit
from .._records import (
    check_text,
)
from ..db._database_async import Database
from ..embedders import Embedder, aembed_vectors
from ._batch_async import run_batch
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
from ._ops import ItemOp, ItemResult, check_op
from ._store_async import get_item, item_namespaces, remove_item, search_items, store_item

__all__ = ["ItemsAPI"]


class ItemsAPI:
    """The item methods of ``AsyncMemory``: each checks its arguments and hands the work
    to ``timestone.items._store`` (embedding, locks and the transaction included)."""

    _db: Database
    embedder: Embedder

    async def put_item(
        self,
        group_id: str,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        index: bool | str | Sequence[str] = True,
    ) -> Item:
        """Store a JSON object under ``namespace`` (``()``: the group's root) and ``key``,
        replacing the current version.

        ``index``: True embeds the value's JSON for ``search_items(query=...)``, a string
        embeds that text instead, a list of strings embeds each (the item scores by its
        best), False leaves the item out of query ranking.
        """
        ns = check_namespace(namespace, allow_empty=True)
        ident = check_key(key)
        check_address(ns, ident)
        data = check_value(value)
        texts = index_texts(data, check_index(index))
        return await store_item(self._db, self.embedder, group_id, ns, ident, data, texts)

    async def delete_item(self, group_id: str, namespace: Sequence[str], key: str) -> bool:
        """Expire the item (history keeps it for ``as_of``); False when there was none."""
        ns = check_namespace(namespace, allow_empty=True)
        ident = check_key(key)
        check_address(ns, ident)
        return await remove_item(self._db, self.embedder, group_id, ns, ident)

    async def get_item(
        self,
        group_id: str,
        namespace: Sequence[str],
        key: str,
        *,
        as_of: datetime | None = None,
    ) -> Item | None:
        """The item as held at ``as_of`` (default: now); ``None`` if absent."""
        ns = check_namespace(namespace, allow_empty=True)
        ident = check_key(key)
        system = check_as_of(as_of)
        async with self._db.transaction(group_id, "reading an item") as conn:
            return await get_item(conn, group_id, ns, ident, system)

    async def search_items(
        self,
        group_id: str,
        namespace_prefix: Sequence[str] = (),
        *,
        query: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        as_of: datetime | None = None,
    ) -> list[Item]:
        """Items under ``namespace_prefix`` whose value matches ``filter`` (JSONB-like equality
        and ``$eq $ne $gt $gte $lt $lte``); ranked by similarity to ``query`` (``score`` set),
        else newest first.

        The prefix is matched as written, as in LangGraph's stores: ``*`` is a label like
        any other (``("memories", "*")`` finds the items of the user whose id is ``*``,
        not every user's); only ``item_namespaces`` reads ``*`` as any label.

        As in LangGraph's ``InMemoryStore``, a dict of the filter whose keys start with
        ``$`` holds operators only, and a dict without one matches a nested object field by
        field; one that mixes the two is refused. The ranges compare numbers exactly, a
        boolean as 1 or 0; a missing field, or one that is not a number, satisfies none.
        ``offset`` is at most ``2**63 - 1``, what Postgres's ``bigint`` holds."""

        prefix = check_namespace(namespace_prefix, "namespace_prefix", allow_empty=True)
        conditions = check_filter(filter)
        n, skip = check_limit(limit), check_offset(offset)
        system = check_as_of(as_of)
        vector = None
        if query is not None:
            check_text(query, "query", max_chars=10_000)
            vector = (await aembed_vectors(self.embedder, [query]))[0]
        async with self._db.transaction(group_id, "searching items") as conn:
            return await search_items(
                conn,
                group_id,
                prefix,
                query_vector=vector,
                filter_=conditions,
                limit=n,
                offset=skip,
                as_of=system,
            )

    async def item_namespaces(
        self,
        group_id: str,
        *,
        prefix: Sequence[str] = (),
        suffix: Sequence[str] = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
        as_of: datetime | None = None,
    ) -> list[tuple[str, ...]]:
        """The namespaces holding items, sorted; ``*`` in ``prefix``/``suffix`` matches any
        label; ``max_depth`` cuts each namespace to that many labels."""

        pre = check_namespace(prefix, "prefix", allow_empty=True)
        suf = check_namespace(suffix, "suffix", allow_empty=True)
        depth, n, skip = check_depth(max_depth), check_limit(limit), check_offset(offset)
        system = check_as_of(as_of)
        async with self._db.transaction(group_id, "listing item namespaces") as conn:
            return await item_namespaces(
                conn,
                group_id,
                prefix=pre,
                suffix=suf,
                max_depth=depth,
                limit=n,
                offset=skip,
                as_of=system,
            )

    async def batch_items(
        self, group_id: str, ops: Sequence[ItemOp], *, as_of: datetime | None = None
    ) -> list[ItemResult]:
        """Run ``ops`` (``ItemGet``, ``ItemPut``, ``ItemSearch``, ``ItemNamespaces``) in one
        transaction, one statement per kind of operation; the answer of each, in order.

        Reads see what the group held before the batch; of several writes of one key the
        last is kept. Every operation is checked first, as its single-item method checks
        it: a bad one fails the batch, which writes nothing. ``as_of`` reads the past, and
        is refused in a batch that writes."""
        return await run_batch(self._db, self.embedder, group_id, ops, check_as_of(as_of))

    @staticmethod
    def check_item_ops(ops: Sequence[ItemOp]) -> None:
        """Check ``ops`` as ``batch_items`` checks them, and run none: raises
        ``InvalidInput`` naming the first bad one.

        ``batch_items`` runs in one group. A caller that splits one batch over several
        groups (one ``batch_items`` call each) checks every operation first, so that a bad
        one fails the whole batch before any group's call writes."""
        for op in ops:
            check_op(op)

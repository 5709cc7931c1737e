"""A batch of item operations in one transaction, one statement per kind of operation.

Every operation is checked before anything runs, and every text of the batch (the
puts' indexed texts, the searches' queries) is embedded in one call before the
transaction opens. Then the reads run (all gets in one statement, each search and
each namespace listing in its own), then the writes (the locks of every key
written in one statement, the deletes in one, the puts in one): reads see what
the group held before the batch, as in LangGraph's stores. Of several writes of
one key the last is the one kept. A bad operation fails the batch, which writes
nothing.

A namespace is a ``text[]`` of any length, so the namespaces of a batch travel as
one flat array of labels and, per operation, the bounds of its slice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from psycopg import sql

from ..db._database_async import Conn, Database
from ..embedders import Embedder, aembed_vectors
from ..errors import InvalidInput
from ..write._facts_async import held_clause
from ..write._transaction_async import Write, begin_write
from ._item import Item, negative_zero, value_json
from ._ops import Checked, ItemResult, check_op
from ._store_async import (
    ITEM_COLUMNS,
    item_namespaces,
    item_of_row,
    lock_keys,
    search_items,
    vector_text,
)
from ._texts import kept_texts

__all__ = ["delete_many", "get_many", "put_many", "run_batch"]


def _slices(namespaces: Sequence[tuple[str, ...]]) -> tuple[list[str], list[int], list[int]]:
    """(every label in one list, the first and last position of each namespace, 1-based)."""
    labels: list[str] = []
    lo: list[int] = []
    hi: list[int] = []
    for ns in namespaces:
        lo.append(len(labels) + 1)
        labels.extend(ns)
        hi.append(len(labels))  # below lo for (): the empty slice
    return labels, lo, hi


async def get_many(
    conn: Conn, group_id: str, keys: Sequence[tuple[tuple[str, ...], str]], as_of: datetime | None
) -> list[Item | None]:
    """The items under each (namespace, key), in one statement."""
    labels, lo, hi = _slices([ns for ns, _ in keys])
    cur = await conn.execute(
        sql.SQL(
            "SELECT q.n, {cols} FROM unnest(%s::int[], %s::int[], %s::text[])"
            " WITH ORDINALITY AS q(lo, hi, key, n)"
            " CROSS JOIN LATERAL (SELECT {cols} FROM timestone.items AS i"
            "  WHERE i.group_id = %s AND i.namespace = (%s::text[])[q.lo:q.hi]"
            "  AND i.key = q.key AND {held} ORDER BY i.created_at DESC LIMIT 1) AS i"
        ).format(cols=ITEM_COLUMNS, held=held_clause("i", as_of)),
        (lo, hi, [k for _, k in keys], group_id, labels),
    )
    found: list[Item | None] = [None] * len(keys)
    for row in await cur.fetchall():
        found[row["n"] - 1] = item_of_row(row)
    return found


async def delete_many(w: Write, keys: Sequence[tuple[tuple[str, ...], str]]) -> None:
    """Expire the current version of each (namespace, key), in one statement."""
    labels, lo, hi = _slices([ns for ns, _ in keys])
    await w.conn.execute(
        "UPDATE timestone.items AS i SET expired_at = %s"
        " FROM unnest(%s::int[], %s::int[], %s::text[]) AS q(lo, hi, key)"
        " WHERE i.group_id = %s AND i.namespace = (%s::text[])[q.lo:q.hi]"
        " AND i.key = q.key AND i.expired_at IS NULL",
        (w.now, lo, hi, [k for _, k in keys], w.group_id, labels),
    )


def _vectors_literal(vectors: Sequence[Sequence[float]]) -> str | None:
    """The ``text[]`` literal of an item's field vectors (None for one vector or none)."""
    if len(vectors) < 2:
        return None
    return "{" + ",".join('"' + str(vector_text(v)) + '"' for v in vectors) + "}"


def _texts_json(put: Checked) -> str | None:
    """The JSON of what the put keeps of its texts (``kept_texts``; None for none)."""
    assert put.value is not None
    kept = kept_texts(put.value, put.texts)
    return None if kept is None else json.dumps(kept)


_PUT = sql.SQL(
    "WITH q AS (SELECT * FROM unnest(%(lo)s::int[], %(hi)s::int[], %(key)s::text[],"
    "  %(value)s::text[], %(exact)s::text[], %(vector)s::text[], %(fields)s::text[],"
    "  %(texts)s::text[]) WITH ORDINALITY AS q(lo, hi, key, value, exact, vector, fields,"
    "  texts, n)),"
    " old AS (UPDATE timestone.items AS i SET expired_at = %(now)s FROM q"
    "  WHERE i.group_id = %(group)s AND i.namespace = (%(labels)s::text[])[q.lo:q.hi]"
    "  AND i.key = q.key AND i.expired_at IS NULL RETURNING q.n, i.item_created_at)"
    " INSERT INTO timestone.items (group_id, namespace, key, value, value_exact,"
    "  item_created_at, embedding, field_embeddings, index_texts, created_at)"
    " SELECT %(group)s, (%(labels)s::text[])[q.lo:q.hi], q.key, q.value::jsonb, q.exact::json,"
    "  coalesce(old.item_created_at, %(now)s), q.vector::vector, q.fields::text[]::vector[],"
    "  CASE WHEN q.texts IS NOT NULL THEN ARRAY(SELECT t.t FROM"
    "  jsonb_array_elements_text(q.texts::jsonb) WITH ORDINALITY AS t(t, o) ORDER BY t.o) END,"
    "  %(now)s FROM q LEFT JOIN old ON old.n = q.n"
)


async def put_many(
    w: Write, puts: Sequence[Checked], vectors: Sequence[Sequence[Sequence[float]]]
) -> None:
    """Write a new version of each item (``vectors``: the vectors of its indexed texts), in
    one statement: the current versions expired, the new ones inserted."""
    labels, lo, hi = _slices([p.namespace for p in puts])
    values: list[str] = []
    exact: list[str | None] = []
    for p in puts:
        assert p.value is not None
        text = value_json(p.value)
        values.append(text)
        exact.append(text if negative_zero(p.value) else None)
    await w.conn.execute(
        _PUT,
        {
            "lo": lo,
            "hi": hi,
            "key": [p.key for p in puts],
            "value": values,
            "exact": exact,
            "vector": [vector_text(v[0]) if len(v) == 1 else None for v in vectors],
            "fields": [_vectors_literal(v) for v in vectors],
            "texts": [_texts_json(p) for p in puts],
            "now": w.now,
            "group": w.group_id,
            "labels": labels,
        },
    )


async def _embedded(
    embedder: Embedder, checked: Sequence[Checked]
) -> tuple[dict[int, list[list[float]]], dict[int, list[float]]]:
    """The vectors of each put (by position) and of each search's query, from one call."""
    texts: list[str] = []
    for c in checked:
        if c.kind == "put":
            texts.extend(c.texts)
        elif c.kind == "search" and c.query is not None:
            texts.append(c.query)
    if not texts:
        return {}, {}
    vectors = await aembed_vectors(embedder, texts)
    puts: dict[int, list[list[float]]] = {}
    queries: dict[int, list[float]] = {}
    at = 0
    for i, c in enumerate(checked):
        if c.kind == "put":
            puts[i] = [list(v) for v in vectors[at : at + len(c.texts)]]
            at += len(c.texts)
        elif c.kind == "search" and c.query is not None:
            queries[i] = list(vectors[at])
            at += 1
    return puts, queries


async def _reads(
    conn: Conn,
    group_id: str,
    checked: Sequence[Checked],
    queries: dict[int, list[float]],
    as_of: datetime | None,
    results: list[ItemResult],
) -> None:
    gets = [i for i, c in enumerate(checked) if c.kind == "get"]
    if gets:
        keys = [(checked[i].namespace, checked[i].key) for i in gets]
        for i, got in zip(gets, await get_many(conn, group_id, keys, as_of), strict=True):
            results[i] = got
    for i, c in enumerate(checked):
        if c.kind == "search":
            results[i] = await search_items(
                conn,
                group_id,
                c.namespace,
                query_vector=queries.get(i),
                filter_=c.filter,
                limit=c.limit,
                offset=c.offset,
                as_of=as_of,
            )
        elif c.kind == "namespaces":
            results[i] = await item_namespaces(
                conn,
                group_id,
                prefix=c.namespace,
                suffix=c.suffix,
                max_depth=c.max_depth,
                limit=c.limit,
                offset=c.offset,
                as_of=as_of,
            )


async def run_batch(
    db: Database, embedder: Embedder, group_id: str, ops: Sequence[object], as_of: datetime | None
) -> list[ItemResult]:
    """The answer of each operation of ``ops`` in ``group_id``, in order."""
    checked = [check_op(op) for op in ops]
    last: dict[tuple[tuple[str, ...], str], int] = {}  # the write of each key that is kept
    for i, c in enumerate(checked):
        if c.kind in ("put", "delete"):
            last[(c.namespace, c.key)] = i
    if last and as_of is not None:
        raise InvalidInput("as_of reads the past: a batch that writes cannot take it")
    put_vectors, queries = await _embedded(embedder, checked)
    results: list[ItemResult] = [None] * len(checked)
    what = "running a batch of item operations"
    async with db.transaction(group_id, what) as conn:
        await _reads(conn, group_id, checked, queries, as_of, results)
        if last:
            kept = sorted(last.values())
            locks = [k for i in kept for k in lock_keys(checked[i].namespace, checked[i].key)]
            w = await begin_write(conn, group_id, embedder, keys=locks)
            deletes = [(checked[i].namespace, checked[i].key) for i in kept
                       if checked[i].kind == "delete"]  # fmt: skip
            if deletes:
                await delete_many(w, deletes)
            puts = [i for i in kept if checked[i].kind == "put"]
            if puts:
                await put_many(
                    w, [checked[i] for i in puts], [put_vectors.get(i, []) for i in puts]
                )
    return results

"""Items: JSON documents under a namespace and a key, versioned in system time.

A put expires the key's current version and inserts a new one; a delete only
expires it. Reads take ``as_of``. Searches rank by the cosine similarity of
the item's indexed text to the query when a query is given, else by recency;
filters are applied to the candidates of the namespace prefix. A search's prefix
is literal; a namespace listing's prefix and suffix read ``*`` as any one label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from psycopg import sql

from ..db._database_async import Conn, Database
from ..embedders import Embedder, aembed_vectors
from ..write._facts_async import held_clause
from ..write._transaction_async import Write, begin_write
from ._item import Item, matches_filter, matches_namespace, negative_zero, value_json
from ._texts import kept_texts

__all__ = [
    "ITEM_COLUMNS",
    "delete_item",
    "get_item",
    "item_namespaces",
    "item_of_row",
    "lock_keys",
    "put_item",
    "remove_item",
    "search_items",
    "store_item",
    "vector_text",
]

ITEM_COLUMNS = sql.SQL(
    "i.group_id, i.namespace, i.key, i.value, i.value_exact, i.item_created_at, i.created_at,"
    " i.expired_at"
)


def item_of_row(row: Mapping[str, Any]) -> Item:
    return Item(
        group_id=row["group_id"],
        namespace=tuple(row["namespace"]),
        key=row["key"],
        value=dict(row["value"] if row.get("value_exact") is None else row["value_exact"]),
        created_at=row["item_created_at"],
        updated_at=row["created_at"],
        score=None if row.get("score") is None else float(row["score"]),
    )


def vector_text(values: Sequence[float] | None) -> str | None:
    return None if values is None else "[" + ",".join(repr(float(v)) for v in values) + "]"


async def put_item(
    w: Write,
    namespace: tuple[str, ...],
    key: str,
    value: Mapping[str, Any],
    vector: Sequence[float] | None,
    field_vectors: Sequence[Sequence[float]] = (),
    texts: Sequence[str] = (),
) -> Item:
    """Write a new version of the item (the first, or one that replaces the current), with
    the vector of its indexed text, or the vectors of its indexed texts when it has several
    (``field_vectors``, migration 0033), and those ``texts`` (``kept_texts``, migration
    0043): none for vectors the caller gave."""
    cur = await w.conn.execute(
        "UPDATE timestone.items SET expired_at = %s"
        " WHERE group_id = %s AND namespace = %s AND key = %s AND expired_at IS NULL"
        " RETURNING item_created_at",
        (w.now, w.group_id, list(namespace), key),
    )
    old = await cur.fetchone()
    first = old["item_created_at"] if old is not None else w.now
    text = value_json(value)
    cur = await w.conn.execute(
        sql.SQL(
            "INSERT INTO timestone.items AS i (group_id, namespace, key, value, value_exact,"
            " item_created_at, embedding, field_embeddings, index_texts, created_at)"
            " VALUES (%s, %s, %s, %s, %s::json, %s, %s::vector, %s::text[]::vector[], %s, %s)"
            " RETURNING {}"
        ).format(ITEM_COLUMNS),
        (
            w.group_id,
            list(namespace),
            key,
            text,
            text if negative_zero(value) else None,
            first,
            vector_text(vector),
            [vector_text(v) for v in field_vectors] if field_vectors else None,
            kept_texts(value, texts),
            w.now,
        ),
    )
    row = await cur.fetchone()
    assert row is not None
    return item_of_row(row)


async def delete_item(w: Write, namespace: tuple[str, ...], key: str) -> bool:
    """Expire the item's current version; False when there was none."""
    cur = await w.conn.execute(
        "UPDATE timestone.items SET expired_at = %s"
        " WHERE group_id = %s AND namespace = %s AND key = %s AND expired_at IS NULL",
        (w.now, w.group_id, list(namespace), key),
    )
    return cur.rowcount > 0


async def get_item(
    conn: Conn, group_id: str, namespace: tuple[str, ...], key: str, as_of: datetime | None
) -> Item | None:
    cur = await conn.execute(
        sql.SQL(
            "SELECT {cols} FROM timestone.items AS i"
            " WHERE i.group_id = %s AND i.namespace = %s AND i.key = %s AND {held}"
            " ORDER BY i.created_at DESC LIMIT 1"
        ).format(cols=ITEM_COLUMNS, held=held_clause("i", as_of)),
        (group_id, list(namespace), key),
    )
    row = await cur.fetchone()
    return item_of_row(row) if row is not None else None


def _prefix_clause(prefix: Sequence[str], *, wildcards: bool) -> tuple[sql.Composable, list[Any]]:
    """Rows whose namespace starts with ``prefix``, its labels as written; with
    ``wildcards``, with its labels up to the first ``*`` (``matches_namespace`` then
    reads the rest, each ``*`` any one label)."""
    concrete: list[str] = []
    for label in prefix:
        if wildcards and label == "*":
            break
        concrete.append(label)
    if not concrete:
        return sql.SQL("true"), []
    return sql.SQL("i.namespace[1:%s] = %s::text[]"), [len(concrete), concrete]


async def search_items(
    conn: Conn,
    group_id: str,
    prefix: tuple[str, ...],
    *,
    query_vector: Sequence[float] | None,
    filter_: Mapping[str, Any] | None,
    limit: int,
    offset: int,
    as_of: datetime | None,
) -> list[Item]:
    """Items under ``prefix`` matching ``filter_``; by similarity to the query, else newest
    first. The prefix is literal, as in LangGraph's stores: ``*`` is a label like any other
    (a user id may be one), and matches only itself."""
    where, params = _prefix_clause(prefix, wildcards=False)
    if query_vector is not None:
        score = sql.SQL(
            "CASE WHEN i.embedding IS NOT NULL AND vector_dims(i.embedding) = %s"
            " THEN 1 - (i.embedding <=> %s::vector)"
            " WHEN i.field_embeddings IS NOT NULL THEN (SELECT max(1 - (v <=> %s::vector))"
            " FROM unnest(i.field_embeddings) AS v WHERE vector_dims(v) = %s) END"
        )
        dims, text = len(query_vector), vector_text(query_vector)
        score_params: list[Any] = [dims, text, text, dims]
        order = sql.SQL("score DESC NULLS LAST, i.created_at DESC, i.key")
    else:
        score = sql.SQL("NULL::float8")
        score_params = []
        order = sql.SQL("i.created_at DESC, i.namespace, i.key")
    in_python = bool(filter_)
    window = sql.SQL("")
    window_params: list[Any] = []
    if not in_python:
        window = sql.SQL(" LIMIT %s OFFSET %s")
        window_params = [limit, offset]
    cur = await conn.execute(
        sql.SQL(
            "SELECT {cols}, {score} AS score FROM timestone.items AS i"
            " WHERE i.group_id = %s AND {held} AND {prefix} ORDER BY {order}{window}"
        ).format(
            cols=ITEM_COLUMNS,
            score=score,
            held=held_clause("i", as_of),
            prefix=where,
            order=order,
            window=window,
        ),
        [*score_params, group_id, *params, *window_params],
    )
    rows = [item_of_row(row) for row in await cur.fetchall()]
    if in_python:
        rows = [r for r in rows if matches_filter(r.value, filter_)][offset : offset + limit]
    return rows


async def item_namespaces(
    conn: Conn,
    group_id: str,
    *,
    prefix: tuple[str, ...],
    suffix: tuple[str, ...],
    max_depth: int | None,
    limit: int,
    offset: int,
    as_of: datetime | None,
) -> list[tuple[str, ...]]:
    """The distinct namespaces that hold items, sorted, cut at ``max_depth`` labels; ``*`` in
    ``prefix`` or ``suffix`` matches any one label."""
    where, params = _prefix_clause(prefix, wildcards=True)
    cur = await conn.execute(
        sql.SQL(
            "SELECT DISTINCT i.namespace FROM timestone.items AS i"
            " WHERE i.group_id = %s AND {held} AND {prefix}"
        ).format(held=held_clause("i", as_of), prefix=where),
        [group_id, *params],
    )
    found = {
        tuple(row["namespace"])[: max_depth if max_depth is not None else None]
        for row in await cur.fetchall()
        if matches_namespace(row["namespace"], prefix, suffix)
    }
    return sorted(found)[offset : offset + limit]


def lock_keys(namespace: tuple[str, ...], key: str) -> list[str]:
    return ["item\x1f" + "\x1f".join((*namespace, key))]


async def store_item(
    db: Database,
    embedder: Embedder,
    group_id: str,
    namespace: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    texts: Sequence[str],
) -> Item:
    """A checked put: ``texts`` embedded before the transaction opens, then the write under
    the key's lock (one vector, or several that the item scores by the best of)."""
    vectors = await aembed_vectors(embedder, texts) if texts else []
    async with db.transaction(group_id, "putting an item") as conn:
        w = await begin_write(conn, group_id, embedder, keys=lock_keys(namespace, key))
        one = vectors[0] if len(vectors) == 1 else None
        several = vectors if len(vectors) > 1 else ()
        return await put_item(w, namespace, key, value, one, several, texts)


async def remove_item(
    db: Database, embedder: Embedder, group_id: str, namespace: tuple[str, ...], key: str
) -> bool:
    """A checked delete, under the key's lock; False when there was no current version."""
    async with db.transaction(group_id, "deleting an item") as conn:
        w = await begin_write(conn, group_id, embedder, keys=lock_keys(namespace, key))
        return await delete_item(w, namespace, key)

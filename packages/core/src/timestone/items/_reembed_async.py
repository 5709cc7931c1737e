"""The vectors of the items moved to another embedder: each row's texts, kept by its put
(``index_texts``, migration 0043), embedded again into the same columns.

The vectors a caller gave (the property graph's, namespace ``graph/vectors``) are in the
caller's space, not the embedder's, and stay as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import sql

from ..db._database_async import Conn
from ..embedders import Embedder, aembed_vectors
from ..errors import DatabaseError
from ..graph._nodes import GRAPH_VECTORS
from ._store_async import ITEM_COLUMNS, item_of_row, vector_text
from ._texts import embedded_texts

__all__ = ["check_item_texts", "reembed_items"]

# A row with a vector of the embedder whose texts are not known: written before puts
# kept them (migration 0043).
_UNKNOWN = sql.SQL(
    "i.index_texts IS NULL AND (i.embedding IS NOT NULL OR i.field_embeddings IS NOT NULL)"
    " AND i.namespace[1:{n}] IS DISTINCT FROM {given}::text[]"
).format(n=sql.Literal(len(GRAPH_VECTORS)), given=sql.Literal(list(GRAPH_VECTORS)))


async def check_item_texts(conn: Conn) -> None:
    """Refuse, before any vector moves, a database whose current items hold a vector
    whose texts are not known: another embedder could not embed them again."""
    cur = await conn.execute(
        sql.SQL(
            "SELECT i.group_id, i.namespace, i.key, count(*) OVER () AS n"
            " FROM timestone.items AS i WHERE i.expired_at IS NULL AND {}"
            " ORDER BY i.group_id, i.namespace, i.key LIMIT 1"
        ).format(_UNKNOWN)
    )
    row = await cur.fetchone()
    if row is None:
        return
    n = int(row["n"])
    raise DatabaseError(
        f"{n} current item{'s hold' if n > 1 else ' holds'} a vector whose texts are not known, "
        f"as group {row['group_id']!r:.80} item {tuple(row['namespace'])!r:.200} "
        f"key {row['key']!r:.80}: they were put before Timestone kept the texts an item is "
        "embedded from, so another embedder cannot embed them again. Put each again "
        "(put_item with its value and index, which keeps its texts; or index=False to "
        "leave it out of query ranking), then reembed"
    )


async def reembed_items(conn: Conn, embedder: Embedder, batch_size: int) -> int:
    """Embed the kept texts of every item version again with ``embedder`` (after
    ``check_item_texts``); clear the vector of a version of the past whose texts are not
    known. Returns the number of rows re-embedded."""
    await conn.execute(
        sql.SQL(
            "UPDATE timestone.items AS i SET embedding = NULL, field_embeddings = NULL"
            " WHERE i.expired_at IS NOT NULL AND {}"
        ).format(_UNKNOWN)
    )
    cur = await conn.execute(
        sql.SQL(
            "SELECT {}, i.version_id, i.index_texts FROM timestone.items AS i"
            " WHERE i.index_texts IS NOT NULL"
        ).format(ITEM_COLUMNS)
    )
    rows = await cur.fetchall()
    for start in range(0, len(rows), batch_size):
        batch = rows[start : start + batch_size]
        texts = [embedded_texts(item_of_row(r).value, r["index_texts"]) for r in batch]
        flat = await aembed_vectors(embedder, [t for each in texts for t in each])
        updates: list[tuple[str | None, list[str | None] | None, str, object]] = []
        at = 0
        for r, each in zip(batch, texts, strict=True):
            vectors: Sequence[Sequence[float]] = flat[at : at + len(each)]
            at += len(each)
            one = vector_text(vectors[0]) if len(vectors) == 1 else None
            several = [vector_text(v) for v in vectors] if len(vectors) > 1 else None
            updates.append((one, several, r["group_id"], r["version_id"]))
        async with conn.cursor() as wcur:
            await wcur.executemany(
                "UPDATE timestone.items SET embedding = %s::vector,"
                " field_embeddings = %s::text[]::vector[]"
                " WHERE group_id = %s AND version_id = %s",
                updates,
            )
    return len(rows)

"""Purging a document's version: the chunks it retracted are held wherever it was.

Had the version never been written, the chunks of the version it replaced would have
stayed current until the next version was written (or until now), and wherever a
rollback held the purged version again, they would have been held instead. The names
those chunks mention are the entities held then: an entity a later write made of one of
them while the version kept it from being current is folded into theirs."""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Mapping, Sequence
from datetime import datetime
from typing import Any, LiteralString, TypeVar

from psycopg import sql

from .._arrays import UuidArray
from ..db._distributed_async import row_inserts
from ._transaction_async import ENTITY_COLUMNS, Write, copied_values, copy_columns, renaming

__all__ = [
    "delete_versions",
    "earliest",
    "hold_what_the_version_retracted",
    "named_then",
    "slot_key",
]

K = TypeVar("K", bound=Hashable)


async def delete_versions(w: Write, table: str, version_ids: Sequence[uuid.UUID]) -> int:
    cur = await w.conn.execute(
        sql.SQL("DELETE FROM timestone.{} WHERE group_id = %s AND version_id = ANY(%s)").format(
            sql.Identifier(table)
        ),
        (w.group_id, list(version_ids)),
    )
    return cur.rowcount


def slot_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    if row["cardinality"] == "one":
        return (row["source_id"], row["relation"], "one")
    return (row["source_id"], row["relation"], "many", row["target_id"])


def earliest(starts: dict[K, datetime], key: K, moment: datetime) -> None:
    starts[key] = min(starts.get(key, moment), moment)


# -- a document's version ------------------------------------------------------------

# The chunks of a document that the purged chunk's version retracted when it was written
# (rows of other versions that expired at the version's first moment), with that moment.
_RETRACTED_BY_VERSION: LiteralString = """
WITH purged AS (
    SELECT DISTINCT document_uri AS uri, document_version AS v FROM timestone.episodes
    WHERE group_id = %(g)s AND id = %(e)s AND document_uri IS NOT NULL
), written AS (
    SELECT min(x.created_at) AS at FROM timestone.episodes AS x JOIN purged
      ON x.document_uri = purged.uri AND x.document_version = purged.v
    WHERE x.group_id = %(g)s
)
SELECT DISTINCT x.id, written.at AS retracted_at
FROM timestone.episodes AS x JOIN purged ON x.document_uri = purged.uri
  JOIN written ON x.expired_at = written.at
WHERE x.group_id = %(g)s AND x.document_version <> purged.v
"""

# The times the purged chunk's version was held, from the version's first moment: each row
# of one of its chunks (a rollback or a reinstatement held one again), whether of the
# purged chunk (retracted by now) or of another (purged already if gone; open if current).
_VERSION_HELD: LiteralString = """
WITH purged AS (
    SELECT DISTINCT document_uri AS uri, document_version AS v FROM timestone.episodes
    WHERE group_id = %(g)s AND id = %(e)s AND document_uri IS NOT NULL
)
SELECT x.id = %(e)s AS mine, x.created_at, x.expired_at
FROM timestone.episodes AS x JOIN purged
  ON x.document_uri = purged.uri AND x.document_version = purged.v
WHERE x.group_id = %(g)s AND x.created_at >= %(at)s
  AND (x.expired_at IS NULL OR x.expired_at > x.created_at)
  AND (x.id <> %(e)s OR x.expired_at IS NOT NULL)
ORDER BY x.created_at
"""

Window = tuple[datetime, datetime]


def _alone(
    held: Sequence[Window], others: Sequence[tuple[datetime, datetime | None]]
) -> list[Window]:
    """The parts of the windows ``held`` when none of ``others`` is held (an open end: held
    still), in order."""
    out: list[Window] = []
    for window in held:
        pieces = [window]
        for other_start, other_end in others:
            cut: list[Window] = []
            for start, end in pieces:
                if other_start >= end or (other_end is not None and other_end <= start):
                    cut.append((start, end))
                    continue
                if start < other_start:
                    cut.append((start, other_start))
                if other_end is not None and other_end < end:
                    cut.append((other_end, end))
            pieces = cut
        out.extend(pieces)
    return sorted(out)


async def _held_alone(w: Write, episode_id: uuid.UUID, written: datetime) -> list[Window]:
    """The times the purged chunk alone held its version: when, had it never been written,
    the chunks the version retracted would have been held instead. Purged chunk by chunk,
    the version's times are all covered once its last chunk is, whichever chunk stopped
    being held last (a chunk removed before the others were replaced or removed)."""
    cur = await w.conn.execute(_VERSION_HELD, {"g": w.group_id, "e": episode_id, "at": written})
    rows = await cur.fetchall()
    mine = [(row["created_at"], row["expired_at"]) for row in rows if row["mine"]]
    others = [(row["created_at"], row["expired_at"]) for row in rows if not row["mine"]]
    return _alone(mine, others)


# the tables of a chunk's rows: the column naming the chunk, and what an update returns
_HELD_AGAIN: tuple[tuple[str, str, LiteralString], ...] = (
    ("episodes", "id", "id"),
    ("mentions", "episode_id", "entity_id"),
    ("assertions", "episode_id", "source_id, relation, target_id, cardinality"),
)


_RETRACTED: LiteralString = (
    "SELECT version_id, {r} FROM timestone.{t} WHERE group_id = %s AND {k} = ANY(%s)"
    " AND expired_at = %s"
)
_EXTENDED: LiteralString = (
    "UPDATE timestone.{t} SET expired_at = %s WHERE group_id = %s AND {k} = ANY(%s)"
    " AND expired_at = %s RETURNING version_id, {r}"
)


async def _retracted_rows(
    w: Write,
    table: str,
    key: str,
    returned: LiteralString,
    chunks: Sequence[uuid.UUID],
    retracted_at: datetime,
    ended: datetime | None,
) -> list[dict[str, Any]]:
    """The rows of ``table`` of the retracted chunks that expired when the version was
    written; with ``ended``, they expire then instead (held on until the version ended)."""
    params = (w.group_id, list(chunks), retracted_at)
    query, args = (_EXTENDED, (ended, *params)) if ended is not None else (_RETRACTED, params)
    cur = await w.conn.execute(
        sql.SQL(query).format(t=sql.Identifier(table), k=sql.Identifier(key), r=sql.SQL(returned)),
        args,
    )
    return await cur.fetchall()


async def hold_what_the_version_retracted(
    w: Write, episode_id: uuid.UUID
) -> tuple[dict[tuple[Any, ...], datetime], dict[uuid.UUID, datetime]]:
    """When the episode is a chunk of a document's version, the chunks that version
    retracted are held wherever it alone held the version, as if it had never been written
    (``_held_alone``): their rows (the episode, its mentions and assertions) that expired
    when the version was written expire when it stopped being held (when no other chunk of
    it is left), and are copied for each later time it alone held it (another chunk removed
    before it, or a rollback that held it again). Returns the slots and the entities those
    rows feed, each with the moment its history changes from."""
    cur = await w.conn.execute(_RETRACTED_BY_VERSION, {"g": w.group_id, "e": episode_id})
    found = await cur.fetchall()
    renamed: dict[datetime, dict[uuid.UUID, uuid.UUID]] = {}
    slots: dict[tuple[Any, ...], datetime] = {}
    entities: dict[uuid.UUID, datetime] = {}
    mentioned: list[uuid.UUID] = []  # the entities the chunks themselves mention
    if not found:
        return slots, entities
    chunks = [row["id"] for row in found]
    retracted_at: datetime = found[0]["retracted_at"]
    windows = await _held_alone(w, episode_id, retracted_at)
    if not windows:
        return slots, entities
    # held from the version's write (no other chunk of it is left): the rows it retracted
    # expire when it first ended; each later window (held by a rollback's copies of the
    # chunk, or alone after another chunk was removed) gets copies of them
    first = windows[0][0]
    extended = first == retracted_at
    again = windows[1:] if extended else windows
    for table, key, returned in _HELD_AGAIN:
        ended = windows[0][1] if extended else None
        rows = await _retracted_rows(w, table, key, returned, chunks, retracted_at, ended)
        for row in rows:
            if table == "mentions":
                earliest(entities, row["entity_id"], first)
                mentioned.append(row["entity_id"])
            elif table == "assertions":
                earliest(slots, slot_key(row), first)
        if not again:
            continue
        if table == "mentions":  # per time held again: the names held then by another
            named = [row["entity_id"] for row in rows]
            renamed = {at: await named_then(w, named, at, episode_id) for at, _ in again}
        columns = await copy_columns(w.conn, table)
        for created, expired in again:
            moved = renamed.get(created, {})
            for row in rows if table != "episodes" else ():
                if table == "mentions" and row["entity_id"] in moved:
                    earliest(entities, moved[row["entity_id"]], created)
                elif table == "assertions" and moved:
                    ends = {c: moved.get(row[c], row[c]) for c in ("source_id", "target_id")}
                    earliest(slots, slot_key(row | ends), created)
            await w.conn.execute(
                row_inserts(
                    w.conn,
                    sql.SQL(
                        "INSERT INTO timestone.{t} ({cols}, created_at, expired_at)"
                        " SELECT {values}, %(created)s, %(expired)s FROM timestone.{t} AS x"
                        " WHERE x.group_id = %(g)s AND x.version_id = ANY(%(versions)s)"
                    ).format(
                        t=sql.Identifier(table),
                        cols=sql.SQL(", ").join(map(sql.Identifier, columns)),
                        values=copied_values(columns, ENTITY_COLUMNS),
                    ),
                ),
                {
                    "created": created,
                    "expired": expired,
                    "g": w.group_id,
                    "versions": [row["version_id"] for row in rows],
                }
                | renaming(moved),
            )
    # the entities named by the chunks' own rows, not those their copies were renamed to
    # for a time held again: such an entity, made by a write while the version kept the
    # chunks' one from being current, is one to fold into theirs
    merged = await _merge_named_again(w, episode_id, mentioned, windows)
    for slot, at in merged[0].items():
        earliest(slots, slot, at)
    for ident, at in merged[1].items():
        earliest(entities, ident, at)
    return slots, entities


# Of the entities ``ids``, those not held at a moment, each with the entity of its name
# held then (of the same type, or either untyped, as names resolve, ``_entities._pick``;
# one of the same type first): what a chunk brought back then names, in a purge's
# replayed history as in a removal's reinstatement (``_correct._named_again``).
_NAMED_THEN: LiteralString = """
SELECT DISTINCT ON (gone.id) gone.id AS gone, held.id AS current
FROM unnest(%(ids)s::uuid[]) AS x(id)
CROSS JOIN LATERAL (
    SELECT e.id, e.entity_type, e.norm_name FROM timestone.entities AS e
    WHERE e.group_id = %(g)s AND e.id = x.id AND e.created_at <= %(at)s
    ORDER BY e.created_at DESC LIMIT 1) AS gone
JOIN timestone.entities AS held ON held.group_id = %(g)s AND held.id <> gone.id
    AND held.norm_name = gone.norm_name
    AND (held.entity_type = gone.entity_type OR 'Entity' IN (held.entity_type, gone.entity_type))
    AND held.created_at <= %(at)s AND (held.expired_at IS NULL OR held.expired_at > %(at)s)
    AND (%(purged)s::uuid IS NULL OR EXISTS (
        SELECT 1 FROM timestone.mentions AS m WHERE m.group_id = %(g)s AND m.entity_id = held.id
          AND m.episode_id <> %(purged)s AND m.created_at <= %(at)s
          AND (m.expired_at IS NULL OR m.expired_at > %(at)s)))
WHERE NOT EXISTS (
    SELECT 1 FROM timestone.entities AS e WHERE e.group_id = %(g)s AND e.id = x.id
      AND e.created_at <= %(at)s AND (e.expired_at IS NULL OR e.expired_at > %(at)s))
ORDER BY gone.id, held.entity_type = gone.entity_type DESC, held.id
"""


async def named_then(
    w: Write, ids: Sequence[uuid.UUID], at: datetime, purged: uuid.UUID | None = None
) -> dict[uuid.UUID, uuid.UUID]:
    """With ``purged``, an entity held then only by that episode's mentions (its version
    held again, or made by it) is not one the chunks would have named then."""
    cur = await w.conn.execute(
        _NAMED_THEN,
        {"g": w.group_id, "ids": list(dict.fromkeys(ids)), "at": at, "purged": purged},
    )
    return {row["gone"]: row["current"] for row in await cur.fetchall()}


# Entities of the name of one the held-again chunks mention, first mentioned (but by the
# purged episode) while the chunks are held again (from the version's write until it
# first ended, and each later time it was held): made by a write that named the entity
# while the version kept it from being current.
# Had the version never been written, that write would have named the entity the chunks
# mention: one of the same type, or either untyped, as names resolve (``_entities._pick``).
_NAMED_WHILE_RETRACTED: LiteralString = """
WITH kept AS (
    SELECT DISTINCT ON (id) id, entity_type, norm_name FROM timestone.entities
    WHERE group_id = %(g)s AND id = ANY(%(ids)s) ORDER BY id, created_at DESC
), named AS (
    SELECT id, (array_agg(entity_type ORDER BY created_at))[1] AS entity_type,
           (array_agg(norm_name ORDER BY created_at))[1] AS norm_name
    FROM timestone.entities WHERE group_id = %(g)s
      AND norm_name IN (SELECT norm_name FROM kept) AND id <> ALL(%(ids)s)
    GROUP BY id
), born AS (
    SELECT entity_id AS id, min(created_at) AS at FROM timestone.mentions
    WHERE group_id = %(g)s AND entity_id IN (SELECT id FROM named) AND episode_id <> %(purged)s
    GROUP BY entity_id
)
SELECT DISTINCT ON (e.id) e.id AS gone, kept.id AS kept, born.at AS born
FROM named AS e JOIN born ON born.id = e.id
JOIN kept ON e.norm_name = kept.norm_name
    AND (e.entity_type = kept.entity_type OR 'Entity' IN (e.entity_type, kept.entity_type))
WHERE EXISTS (SELECT 1 FROM unnest(%(starts)s::timestamptz[], %(ends)s::timestamptz[])
              AS h(s, e) WHERE born.at > h.s AND born.at < h.e)
ORDER BY e.id, e.entity_type = kept.entity_type DESC, kept.id
"""


# the rows of a table that name an entity of ``ids``
_NAMING: tuple[tuple[str, LiteralString], ...] = (
    ("mentions", "x.entity_id = ANY(%(ids)s)"),
    ("assertions", "(x.source_id = ANY(%(ids)s) OR x.target_id = ANY(%(ids)s))"),
)


async def _merge_named_again(
    w: Write,
    purged: uuid.UUID,
    mentioned: Sequence[uuid.UUID],
    windows: Sequence[tuple[datetime, datetime]],
) -> tuple[dict[tuple[Any, ...], datetime], dict[uuid.UUID, datetime]]:
    """The entity a later write made of a name the held-again chunks mention
    (``_NAMED_WHILE_RETRACTED``) becomes the one they mention: its mentions and the
    assertions naming it, every version, are rewritten to name that entity (copies, the
    rows deleted), so that the replay gives one entity, as if the version had never been
    written. ``mentioned``: the entities of the chunks' own rows, not those their copies
    for a later time held were renamed to (which may be such an entity). Returns the
    slots and entities to replay, from when each changes."""
    slots: dict[tuple[Any, ...], datetime] = {}
    changed: dict[uuid.UUID, datetime] = {}
    if not mentioned:
        return slots, changed
    cur = await w.conn.execute(
        _NAMED_WHILE_RETRACTED,
        {
            "g": w.group_id,
            "ids": list(dict.fromkeys(mentioned)),
            "purged": purged,
            "starts": [start for start, _ in windows],
            "ends": [end for _, end in windows],
        },
    )
    renamed: dict[uuid.UUID, uuid.UUID] = {}
    for row in await cur.fetchall():
        renamed[row["gone"]] = row["kept"]
        for ident in (row["gone"], row["kept"]):
            earliest(changed, ident, row["born"])
    if not renamed:
        return slots, changed
    gone = list(renamed)
    for table, named in _NAMING:
        cur = await w.conn.execute(
            sql.SQL(
                "SELECT x.*, x.expired_at IS NULL AS current FROM timestone.{t} AS x"
                " WHERE x.group_id = %(g)s AND {named}"
            ).format(t=sql.Identifier(table), named=sql.SQL(named)),
            {"g": w.group_id, "ids": gone},
        )
        rows = await cur.fetchall()
        for row in rows if table == "assertions" else ():
            earliest(slots, slot_key(row), row["created_at"])
            named_now = {c: renamed.get(row[c], row[c]) for c in ("source_id", "target_id")}
            earliest(slots, slot_key(row | named_now), row["created_at"])
        versions = UuidArray(row["version_id"] for row in rows)
        held = UuidArray(row["version_id"] for row in rows if row["current"])
        params = {"g": w.group_id, "versions": versions, "held": held}
        if held:  # out of the way of the copies: current ids are unique
            await w.conn.execute(
                sql.SQL(
                    "UPDATE timestone.{t} SET expired_at = created_at"
                    " WHERE group_id = %(g)s AND version_id = ANY(%(held)s)"
                ).format(t=sql.Identifier(table)),
                params,
            )
        columns = await copy_columns(w.conn, table)
        await w.conn.execute(
            row_inserts(
                w.conn,
                sql.SQL(
                    "INSERT INTO timestone.{t} ({cols}, created_at, expired_at)"
                    " SELECT {values}, x.created_at, CASE WHEN x.version_id = ANY(%(held)s)"
                    " THEN NULL ELSE x.expired_at END FROM timestone.{t} AS x"
                    " WHERE x.group_id = %(g)s AND x.version_id = ANY(%(versions)s)"
                ).format(
                    t=sql.Identifier(table),
                    cols=sql.SQL(", ").join(map(sql.Identifier, columns)),
                    values=copied_values(columns, ENTITY_COLUMNS),
                ),
            ),
            params | renaming(renamed),
        )
        await delete_versions(w, table, [row["version_id"] for row in rows])
    return slots, changed

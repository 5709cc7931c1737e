"""Correcting and forgetting: exact removal, rollback to a moment, physical purge.

- ``retract_episodes`` expires episodes with their mentions and assertions and
  recomputes every slot and entity they touched: the current graph becomes the
  graph that never saw them. History stays readable with ``as_of``.
- ``rollback`` makes the current rows of every table equal the rows held at a
  moment: rows written since are expired, rows expired since are restored as
  new versions, and a current row equal to one the moment held stays as it is (a
  second rollback to the same moment writes nothing). It is itself a write, so it
  can be rolled back.
- ``purge_episode`` erases the episode and what only it supported from history
  too, and records that a purge happened.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, LiteralString

from psycopg import sql

from .._records import RemovalReport, RollbackReport, check_uuid
from .._time import aware
from ..db._database_async import Conn
from ..db._distributed_async import row_inserts
from ..errors import AlreadyRemoved, InvalidPeriod, NotFound
from ._entities_async import recompute_entities
from ._facts_async import SlotChanges, recompute_retracted, recompute_slots
from ._purge_async import erase_episode
from ._purge_versions_async import named_then
from ._transaction_async import ENTITY_COLUMNS, Write, copied_values, copy_columns, renaming

__all__ = ["VERSIONED_TABLES", "check_episode_id", "purge", "retract_episodes", "rollback"]

VERSIONED_TABLES = (
    "episodes",
    "entities",
    "mentions",
    "assertions",
    "facts",
    "communities",
    "items",
)


def check_episode_id(value: object) -> uuid.UUID:
    return check_uuid(value, "episode_id")


async def retract_episodes(w: Write, episode_ids: Sequence[uuid.UUID]) -> SlotChanges:
    await w.conn.execute(
        "UPDATE timestone.episodes SET expired_at = %s"
        " WHERE group_id = %s AND id = ANY(%s) AND expired_at IS NULL",
        (w.now, w.group_id, list(episode_ids)),
    )
    cur = await w.conn.execute(
        "UPDATE timestone.mentions SET expired_at = %s"
        " WHERE group_id = %s AND episode_id = ANY(%s) AND expired_at IS NULL RETURNING entity_id",
        (w.now, w.group_id, list(episode_ids)),
    )
    entity_ids = {row["entity_id"] for row in await cur.fetchall()}
    cur = await w.conn.execute(
        "UPDATE timestone.assertions SET expired_at = %s"
        " WHERE group_id = %s AND episode_id = ANY(%s) AND expired_at IS NULL"
        " RETURNING source_id, relation, cardinality, valid_at",
        (w.now, w.group_id, list(episode_ids)),
    )
    changes = await recompute_retracted(w, await cur.fetchall())
    gone, changed = await recompute_entities(w, entity_ids | changes.touched_entities)
    changes.touched_entities = entity_ids | changes.touched_entities
    changes.entity_counts = (gone, changed)
    return changes


async def _latest_episode(conn: Conn, group_id: str, episode_id: uuid.UUID) -> dict[str, Any]:
    cur = await conn.execute(
        "SELECT expired_at FROM timestone.episodes WHERE group_id = %s AND id = %s"
        " ORDER BY created_at DESC LIMIT 1",
        (group_id, episode_id),
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no episode {episode_id} in group {group_id!r}")
    return row


async def retract_episode(w: Write, episode_id: uuid.UUID) -> SlotChanges:
    """Retract one current episode. The last current chunk of a document's version takes the
    document back to the version it replaced: a new version retracts the chunks of the one
    before (``add_document``), so with the new one gone the old one is what remains."""
    cur = await w.conn.execute(
        "SELECT document_uri, document_version FROM timestone.episodes"
        " WHERE group_id = %s AND id = %s AND expired_at IS NULL",
        (w.group_id, episode_id),
    )
    row = await cur.fetchone()
    changes = await retract_episodes(w, [episode_id])
    if row is None or row["document_uri"] is None:
        return changes
    back = await _reinstate(w, row["document_uri"], row["document_version"])
    if back is None:
        return changes
    back.expired.update(changes.expired)
    back.inserted.update(changes.inserted)
    back.written[:0] = changes.written
    gone, changed = changes.entity_counts
    back.entity_counts = (gone + back.entity_counts[0], changed + back.entity_counts[1])
    return back


# The chunks a document's version ``v`` retracted when it was written, once no chunk of
# the document is current: the chunks, of any version, one of whose rows expired at the
# first moment ``v`` was held (its write retracted them then, and nothing else expired at
# that moment). Found by that moment, not by a version number, so a chunk brought back
# before (a new row of it) or held again by a rollback is found all the same.
_REPLACED_CHUNKS: LiteralString = """
WITH held AS (
    SELECT EXISTS (SELECT 1 FROM timestone.episodes WHERE group_id = %(g)s
                   AND document_uri = %(uri)s AND expired_at IS NULL) AS any
), written AS (
    SELECT min(created_at) AS at FROM timestone.episodes
    WHERE group_id = %(g)s AND document_uri = %(uri)s AND document_version = %(v)s
)
SELECT DISTINCT e.id, e.expired_at FROM timestone.episodes AS e, written, held
WHERE e.group_id = %(g)s AND e.document_uri = %(uri)s AND e.document_version <> %(v)s
  AND e.expired_at = written.at AND NOT held.any
"""


async def _reinstate(w: Write, uri: str, version: int) -> SlotChanges | None:
    """Make current again, with their mentions and assertions as they were retracted, the
    chunks of document ``uri`` that its ``version`` retracted, when none of the document is
    current; then recompute what they feed. None when there is nothing to bring back."""
    cur = await w.conn.execute(_REPLACED_CHUNKS, {"g": w.group_id, "uri": uri, "v": version})
    found = await cur.fetchall()
    if not found:
        return None
    chunks, retracted_at = [row["id"] for row in found], found[0]["expired_at"]
    # names a later write named again: the copies name its entity (``_named_again``)
    renamed = await _named_again(w, chunks, retracted_at)
    for table, key in (
        ("episodes", "id"),
        ("mentions", "episode_id"),
        ("assertions", "episode_id"),
    ):
        columns = await copy_columns(w.conn, table)
        await w.conn.execute(
            row_inserts(
                w.conn,
                sql.SQL(
                    "INSERT INTO timestone.{t} ({cols}, created_at)"
                    " SELECT {values}, %(now)s FROM timestone.{t} AS x"
                    " WHERE x.group_id = %(g)s AND x.{k} = ANY(%(chunks)s)"
                    " AND x.expired_at = %(at)s"
                ).format(
                    t=sql.Identifier(table),
                    cols=sql.SQL(", ").join(map(sql.Identifier, columns)),
                    values=copied_values(columns, ENTITY_COLUMNS),
                    k=sql.Identifier(key),
                ),
            ),
            {"now": w.now, "g": w.group_id, "chunks": chunks, "at": retracted_at}
            | renaming(renamed),
        )
    cur = await w.conn.execute(
        "SELECT source_id, relation, cardinality, valid_at FROM timestone.assertions"
        " WHERE group_id = %s AND episode_id = ANY(%s) AND created_at = %s",
        (w.group_id, chunks, w.now),
    )
    changes = await recompute_retracted(w, await cur.fetchall())
    cur = await w.conn.execute(
        "SELECT DISTINCT entity_id FROM timestone.mentions"
        " WHERE group_id = %s AND episode_id = ANY(%s) AND created_at = %s",
        (w.group_id, chunks, w.now),
    )
    changes.touched_entities |= {row["entity_id"] for row in await cur.fetchall()}
    changes.entity_counts = await recompute_entities(w, changes.touched_entities)
    return changes


async def _named_again(
    w: Write, chunks: Sequence[uuid.UUID], retracted_at: datetime
) -> dict[uuid.UUID, uuid.UUID]:
    """The entities the retracted chunks mentioned that are no longer current, each with the
    current entity a later write made of its name (``named_then`` now): with the chunks
    retracted, it had lost its last mention, and the write, which would have named it,
    made one of its own."""
    cur = await w.conn.execute(
        "SELECT DISTINCT entity_id FROM timestone.mentions"
        " WHERE group_id = %s AND episode_id = ANY(%s) AND expired_at = %s",
        (w.group_id, list(chunks), retracted_at),
    )
    return await named_then(w, [row["entity_id"] for row in await cur.fetchall()], w.now)


async def remove(w: Write, episode_id: uuid.UUID) -> RemovalReport:
    latest = await _latest_episode(w.conn, w.group_id, episode_id)
    if latest["expired_at"] is not None:
        # a chunk of a document's version is retracted by the write of a newer version,
        # first held at the moment the chunk's row expired
        cur = await w.conn.execute(
            "SELECT e.document_uri AS uri, e.document_version AS version, n.version AS newer"
            " FROM timestone.episodes AS e CROSS JOIN LATERAL ("
            " SELECT x.document_version AS version FROM timestone.episodes AS x"
            " WHERE x.group_id = e.group_id AND x.document_uri = e.document_uri"
            " AND x.document_version > e.document_version GROUP BY x.document_version"
            " HAVING min(x.created_at) = e.expired_at) AS n"
            " WHERE e.group_id = %s AND e.id = %s AND e.expired_at = %s"
            " ORDER BY n.version LIMIT 1",
            (w.group_id, episode_id, latest["expired_at"]),
        )
        replaced = await cur.fetchone()
        at = latest["expired_at"].isoformat()
        if replaced is not None:
            raise AlreadyRemoved(
                f"episode {episode_id} of group {w.group_id!r} is a chunk of version "
                f"{replaced['version']} of document {replaced['uri']!r:.80}, which version "
                f"{replaced['newer']} replaced at {at}; nothing to do"
            )
        raise AlreadyRemoved(
            f"episode {episode_id} of group {w.group_id!r} was removed at {at}; nothing to do"
        )
    changes = await retract_episode(w, episode_id)
    gone, changed = changes.entity_counts
    return RemovalReport(
        episode_id=episode_id,
        removed_at=w.now,
        facts_expired=len(changes.expired),
        facts_created=len(changes.inserted),
        entities_expired=gone,
        entities_changed=changed,
    )


async def rollback(w: Write, to: datetime) -> RollbackReport:
    point = aware(to, "rollback to")
    if point > w.now:
        raise InvalidPeriod(
            f"cannot roll back to {point.isoformat()}: it is in the future "
            f"(the database clock reads {w.now.isoformat()})"
        )
    expired: dict[str, int] = {}
    restored: dict[str, int] = {}
    for table in VERSIONED_TABLES:
        columns = await copy_columns(w.conn, table)
        same = await _same_version(w.conn, table, columns)
        # a row written since that is a copy of one held at the moment stays current
        cur = await w.conn.execute(
            sql.SQL(
                "UPDATE timestone.{t} AS x SET expired_at = %(now)s"
                " WHERE x.group_id = %(g)s AND x.expired_at IS NULL AND x.created_at > %(at)s"
                " AND NOT EXISTS (SELECT 1 FROM timestone.{t} AS h"
                " WHERE h.group_id = x.group_id AND h.created_at <= %(at)s"
                " AND h.expired_at > %(at)s AND {same})"
            ).format(t=sql.Identifier(table), same=same),
            {"now": w.now, "g": w.group_id, "at": point},
        )
        expired[table] = cur.rowcount
        # a row held at the moment is copied unless an equal one is current
        cur = await w.conn.execute(
            row_inserts(
                w.conn,
                sql.SQL(
                    "INSERT INTO timestone.{t} ({cols}, created_at)"
                    " SELECT {h_cols}, %(now)s FROM timestone.{t} AS h"
                    " WHERE h.group_id = %(g)s AND h.created_at <= %(at)s"
                    " AND h.expired_at > %(at)s AND NOT EXISTS (SELECT 1 FROM timestone.{t} AS x"
                    " WHERE x.group_id = h.group_id AND x.expired_at IS NULL AND {same})"
                ).format(
                    t=sql.Identifier(table),
                    cols=sql.SQL(", ").join(map(sql.Identifier, columns)),
                    h_cols=sql.SQL(", ").join(sql.Identifier("h", c) for c in columns),
                    same=same,
                ),
            ),
            {"now": w.now, "g": w.group_id, "at": point},
        )
        restored[table] = cur.rowcount
    await _settle_after_purges(w)
    return RollbackReport(to=point, rolled_back_at=w.now, expired=expired, restored=restored)


async def _same_version(conn: Conn, table: str, columns: Sequence[str]) -> sql.Composed:
    """``x`` and ``h`` are versions of one row with the same content: equal on the row's
    key (compared first, so an index or a hash join finds the candidates) and on every
    column a copy takes (a ``json`` column, which has no equality, by its text)."""
    cur = await conn.execute(
        "SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = %s::regclass"
        " AND atttypid = 'pg_catalog.json'::regtype AND NOT attisdropped",
        (f"timestone.{table}",),
    )
    as_text = {row["attname"] for row in await cur.fetchall()}

    def side(alias: str) -> sql.Composed:
        return sql.SQL(", ").join(
            sql.SQL("{}::text").format(sql.Identifier(alias, c))
            if c in as_text
            else sql.Identifier(alias, c)
            for c in columns
        )

    key = ("namespace", "key") if table == "items" else ("id",)
    return sql.SQL(" AND ").join(
        [sql.SQL("x.{c} = h.{c}").format(c=sql.Identifier(c)) for c in key]
        + [sql.SQL("({}) IS NOT DISTINCT FROM ({})").format(side("x"), side("h"))]
    )


async def _settle_after_purges(w: Write) -> None:
    """In a group where episodes were purged, bring what a rollback restored to the state
    its current assertions and mentions say.

    A purge replays history without the episode, so the rows held at any moment are
    already what their assertions and mentions make, and this changes nothing. A purge
    made before that replay existed left versions the purged episode had shaped (its
    sentences, an end date it put on another fact, a fact whose entities it deleted);
    restored, they are recomputed here, so that none reaches the current graph. A group
    that never purged is left exactly as the copy made it."""
    cur = await w.conn.execute(
        "SELECT EXISTS (SELECT 1 FROM timestone.purges WHERE group_id = %s) AS purged",
        (w.group_id,),
    )
    row = await cur.fetchone()
    if row is None or not row["purged"]:
        return
    # what the rollback wrote: rows created or expired at its clock
    cur = await w.conn.execute(
        "SELECT source_id, relation FROM timestone.assertions"
        " WHERE group_id = %(g)s AND (created_at = %(t)s OR expired_at = %(t)s)"
        " UNION SELECT source_id, relation FROM timestone.facts"
        " WHERE group_id = %(g)s AND (created_at = %(t)s OR expired_at = %(t)s)",
        {"g": w.group_id, "t": w.now},
    )
    pairs = [(row["source_id"], row["relation"]) for row in await cur.fetchall()]
    changes = await recompute_slots(w, pairs)
    cur = await w.conn.execute(
        "SELECT entity_id AS id FROM timestone.mentions"
        " WHERE group_id = %(g)s AND (created_at = %(t)s OR expired_at = %(t)s)"
        " UNION SELECT id FROM timestone.entities"
        " WHERE group_id = %(g)s AND (created_at = %(t)s OR expired_at = %(t)s)"
        " UNION SELECT unnest(ARRAY[source_id, target_id]) FROM timestone.facts"
        " WHERE group_id = %(g)s AND (created_at = %(t)s OR expired_at = %(t)s)",
        {"g": w.group_id, "t": w.now},
    )
    entity_ids = {row["id"] for row in await cur.fetchall()}
    await recompute_entities(w, entity_ids | changes.touched_entities)


async def purge(w: Write, episode_id: uuid.UUID) -> int:
    """Erase the episode and what only it supported, history included; return rows erased.

    The current graph first becomes the graph without it (``retract_episodes``); then its
    rows go and the history of every slot and entity it fed is replayed without it
    (``_purge.erase_episode``): no version of any table keeps its id, its sentences or
    its attributes, nor an end date or a name only it gave."""
    latest = await _latest_episode(w.conn, w.group_id, episode_id)
    if latest["expired_at"] is None:
        await retract_episode(w, episode_id)
    erased, mentioned = await erase_episode(w, episode_id)
    if mentioned:
        # communities are named after their members and summarized by their facts: every
        # version that held an entity the episode mentioned may quote it, history included
        # (the caller rebuilds the current ones)
        cur = await w.conn.execute(
            "DELETE FROM timestone.communities WHERE group_id = %s AND members && %s::uuid[]",
            (w.group_id, mentioned),
        )
        erased += cur.rowcount
    await w.conn.execute(
        "INSERT INTO timestone.purges (group_id, episode_id, purged_at, rows_erased)"
        " VALUES (%s, %s, %s, %s)",
        (w.group_id, episode_id, w.now, erased),
    )
    return erased

"""Correcting and forgetting: exact removal, rollback to a moment, physical purge.

- ``retract_episodes`` expires episodes with their mentions and assertions and
  recomputes every slot and entity they touched: the current graph becomes the
  graph that never saw them. History stays readable with ``as_of``.
- ``rollback`` makes the current rows of every table equal the rows held at a
  moment: rows written since are expired, rows expired since are restored as
  new versions. It is itself a write, so it can be rolled back.
- ``purge_episode`` erases the episode and what only it supported from history
  too, and records that a purge happened.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import sql

from .._records import RemovalReport, RollbackReport, check_uuid
from .._time import aware
from ..db._database_async import Conn
from ..db._distributed_async import row_inserts
from ..errors import AlreadyRemoved, InvalidPeriod, NotFound
from ._entities_async import recompute_entities
from ._facts_async import SlotChanges, recompute_retracted
from ._transaction_async import Write

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


async def remove(w: Write, episode_id: uuid.UUID) -> RemovalReport:
    latest = await _latest_episode(w.conn, w.group_id, episode_id)
    if latest["expired_at"] is not None:
        raise AlreadyRemoved(
            f"episode {episode_id} of group {w.group_id!r} was removed at "
            f"{latest['expired_at'].isoformat()}; nothing to do"
        )
    changes = await retract_episodes(w, [episode_id])
    gone, changed = changes.entity_counts
    return RemovalReport(
        episode_id=episode_id,
        removed_at=w.now,
        facts_expired=len(changes.expired),
        facts_created=len(changes.inserted),
        entities_expired=gone,
        entities_changed=changed,
    )


async def _copy_columns(conn: Conn, table: str) -> list[str]:
    cur = await conn.execute(
        "SELECT attname FROM pg_attribute"
        " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''"
        " AND attname NOT IN ('version_id', 'created_at', 'expired_at') ORDER BY attnum",
        (f"timestone.{table}",),
    )
    return [row["attname"] for row in await cur.fetchall()]


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
        cur = await w.conn.execute(
            sql.SQL(
                "UPDATE timestone.{} SET expired_at = %s"
                " WHERE group_id = %s AND expired_at IS NULL AND created_at > %s"
            ).format(sql.Identifier(table)),
            (w.now, w.group_id, point),
        )
        expired[table] = cur.rowcount
    for table in VERSIONED_TABLES:
        columns = sql.SQL(", ").join(map(sql.Identifier, await _copy_columns(w.conn, table)))
        cur = await w.conn.execute(
            row_inserts(
                w.conn,
                sql.SQL(
                    "INSERT INTO timestone.{t} ({cols}, created_at)"
                    " SELECT {cols}, %s FROM timestone.{t}"
                    " WHERE group_id = %s AND created_at <= %s AND expired_at > %s"
                ).format(t=sql.Identifier(table), cols=columns),
            ),
            (w.now, w.group_id, point, point),
        )
        restored[table] = cur.rowcount
    return RollbackReport(to=point, rolled_back_at=w.now, expired=expired, restored=restored)


async def purge(w: Write, episode_id: uuid.UUID) -> int:
    """Erase the episode and what only it supported, history included; return rows erased."""
    latest = await _latest_episode(w.conn, w.group_id, episode_id)
    if latest["expired_at"] is None:
        await retract_episodes(w, [episode_id])
    cur = await w.conn.execute(
        "SELECT DISTINCT entity_id FROM timestone.mentions WHERE group_id = %s AND episode_id = %s",
        (w.group_id, episode_id),
    )
    mentioned = [row["entity_id"] for row in await cur.fetchall()]
    erased = 0
    for query in (
        "DELETE FROM timestone.facts WHERE group_id = %(g)s AND episodes = ARRAY[%(e)s::uuid]",
        "DELETE FROM timestone.assertions WHERE group_id = %(g)s AND episode_id = %(e)s",
        "DELETE FROM timestone.mentions WHERE group_id = %(g)s AND episode_id = %(e)s",
        "DELETE FROM timestone.episodes WHERE group_id = %(g)s AND id = %(e)s",
    ):
        cur = await w.conn.execute(query, {"g": w.group_id, "e": episode_id})
        erased += cur.rowcount
    if mentioned:
        # entities no other episode ever mentioned existed only through this one
        cur = await w.conn.execute(
            "DELETE FROM timestone.entities AS e WHERE e.group_id = %s AND e.id = ANY(%s)"
            " AND NOT EXISTS (SELECT 1 FROM timestone.mentions AS m"
            "   WHERE m.group_id = %s AND m.entity_id = e.id)",
            (w.group_id, mentioned, w.group_id),
        )
        erased += cur.rowcount
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

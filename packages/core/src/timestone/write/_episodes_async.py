"""Episodes: the raw record of every write, verbatim, with its idempotency key."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg import AsyncCursor, sql
from psycopg.rows import DictRow

from .._records import Episode
from ..db._database_async import Conn
from ._ids import new_ids
from ._transaction_async import Write

if TYPE_CHECKING:
    from .._vectors import Row

__all__ = [
    "EpisodeInsert",
    "SentEpisode",
    "episode_from_row",
    "find_by_key",
    "idempotency_key",
    "insert_episode",
]

EPISODE_COLUMNS = sql.SQL(
    "id, group_id, name, content, source, source_description, reference_time, saga,"
    " idempotency_key, created_at, expired_at, document_uri, chunk_index, char_start, char_end,"
    " llm_calls, llm_tokens"
)


def idempotency_key(group_id: str, content: str, reference_time: datetime) -> str:
    """The default key: a hash of group, content and reference time."""
    digest = hashlib.sha256()
    for part in (group_id, content, reference_time.isoformat()):
        digest.update(part.encode())
        digest.update(b"\x1f")
    return digest.hexdigest()


@dataclasses.dataclass(frozen=True, slots=True)
class EpisodeInsert:
    """An episode as a write inserts it (``timestone.models.EpisodeRow`` reads the table)."""

    name: str
    content: str
    source: str
    source_description: str
    reference_time: datetime
    saga: str | None
    idempotency_key: str
    actor: str | None = None
    document_uri: str | None = None
    document_version: int | None = None
    chunk_index: int | None = None
    char_start: int | None = None
    char_end: int | None = None
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict[str, Any])
    llm_calls: int = 0
    llm_tokens: int = 0


def episode_from_row(row: Mapping[str, Any]) -> Episode:
    return Episode(
        id=row["id"],
        group_id=row["group_id"],
        name=row["name"],
        content=row["content"],
        source=row["source"],
        source_description=row["source_description"],
        reference_time=row["reference_time"],
        saga=row["saga"],
        idempotency_key=row["idempotency_key"],
        created_at=row["created_at"],
        expired_at=row["expired_at"],
        document_uri=row["document_uri"],
        chunk_index=row["chunk_index"],
        char_start=row["char_start"],
        char_end=row["char_end"],
        llm_calls=row["llm_calls"],
        llm_tokens=row["llm_tokens"],
        score=row.get("score"),
    )


async def find_by_key(conn: Conn, group_id: str, key: str) -> Episode | None:
    cur = await conn.execute(
        sql.SQL(
            "SELECT {} FROM timestone.episodes"
            " WHERE group_id = %s AND idempotency_key = %s AND expired_at IS NULL"
        ).format(EPISODE_COLUMNS),
        (group_id, key),
    )
    row = await cur.fetchone()
    return episode_from_row(row) if row is not None else None


@dataclasses.dataclass(slots=True)
class SentEpisode:
    """An episode's insert, sent: its id is known at once, its stored row once read."""

    id: uuid.UUID
    cursor: AsyncCursor[DictRow]
    _stored: Episode | None = None

    async def stored(self) -> Episode:
        """The row as stored (in a pipeline, the first call waits for the statements sent
        before)."""
        if self._stored is None:
            row = await self.cursor.fetchone()
            assert row is not None
            self._stored = episode_from_row(row)
        return self._stored


async def insert_episode(w: Write, episode: EpisodeInsert, vector: Row | None) -> SentEpisode:
    """Send the insert; its result is read by ``SentEpisode.stored``, so that in a pipeline
    the write goes on while the database stores the episode."""
    ident = new_ids(1)[0]
    cur = await w.conn.execute(
        sql.SQL(
            "INSERT INTO timestone.episodes (group_id, id, name, content, source,"
            " source_description, reference_time, saga, idempotency_key, actor, document_uri,"
            " document_version,"
            " chunk_index, char_start, char_end, metadata, llm_calls, llm_tokens, recorded_at,"
            " embedding, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
            " %b, %s)"
            " RETURNING {}"
        ).format(EPISODE_COLUMNS),
        (
            w.group_id,
            ident,
            episode.name,
            episode.content,
            episode.source,
            episode.source_description,
            episode.reference_time,
            episode.saga,
            episode.idempotency_key,
            episode.actor,
            episode.document_uri,
            episode.document_version,
            episode.chunk_index,
            episode.char_start,
            episode.char_end,
            json.dumps(episode.metadata),
            episode.llm_calls,
            episode.llm_tokens,
            w.now,
            vector,
            w.now,
        ),
    )
    return SentEpisode(id=ident, cursor=cur)

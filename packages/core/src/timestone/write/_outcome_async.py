"""What a write gives back: the facts and entities it wrote or closed, in read order;
or, for a key already written, the result of the write that came first."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Sequence

from psycopg import AsyncCursor, sql
from psycopg.rows import DictRow

from .._arrays import TextArray, UuidArray
from .._records import (
    DocumentResult,
    Entity,
    Episode,
    Fact,
    IngestResult,
)
from ..db._database_async import Conn
from ._entities_async import (
    ENTITY_COLUMNS,
    entity_from_row,
)
from ._episodes_async import (
    EPISODE_COLUMNS,
    SentEpisode,
    episode_from_row,
)
from ._facts_async import (
    SlotChanges,
    read_facts,
)
from ._transaction_async import Write, stored_order

__all__ = [
    "RelationOrder",
    "Written",
    "closed_apart",
    "created_result",
    "entities_by_id",
    "episode_facts",
    "existing_document",
    "existing_result",
    "in_read_order",
    "ingest_outcome",
    "names_at",
    "send_relation_order",
]


@dataclasses.dataclass(frozen=True, slots=True)
class Written:
    """``current``: the current version of every entity the write recomputed.

    ``sent``: the episode's insert, whose stored row is read last (``stored``): in a
    pipeline that read waits for every statement of the write, so what can be built
    without it is built first."""

    sent: SentEpisode
    entity_ids: list[uuid.UUID]
    changes: SlotChanges
    current: dict[uuid.UUID, Entity] = dataclasses.field(default_factory=dict[uuid.UUID, Entity])

    @property
    def episode_id(self) -> uuid.UUID:
        return self.sent.id

    async def stored(self) -> Episode:
        return await self.sent.stored()

    def entities(self) -> list[Entity]:
        return [self.current[i] for i in self.entity_ids if i in self.current]


async def entities_by_id(conn: Conn, group_id: str, ids: Sequence[uuid.UUID]) -> list[Entity]:
    if not ids:
        return []
    cur = await conn.execute(
        sql.SQL(
            "SELECT {} FROM timestone.entities"
            " WHERE group_id = %s AND expired_at IS NULL AND id = ANY(%b::uuid[])"
        ).format(ENTITY_COLUMNS),
        (group_id, list(ids)),
    )
    by_id = {row["id"]: entity_from_row(row) for row in await cur.fetchall()}
    return [by_id[i] for i in ids if i in by_id]


async def ingest_outcome(
    w: Write, written: Written, order: RelationOrder | None = None
) -> tuple[list[Fact], list[Fact]]:
    """The facts this episode now supports, and the facts its write closed or expired.

    The versions the write inserted are built from what it wrote, not read back: a read
    would give the same rows, with the endpoints' names as of the write, in the order of
    ``read_facts``. ``order``: the episode's relations sorted by the database, asked for
    before the write's inserts (``send_relation_order``), else asked for here.
    """
    changes = written.changes
    names = {ident: e.name for ident, e in written.current.items()}
    unnamed = {i for _, key, p in changes.written for i in (key[0], p.target_id)} - set(names)
    if unnamed:
        names.update(await names_at(w, unnamed))
    new = await in_read_order(
        w,
        order,
        [
            Fact(
                id=p.id,
                version_id=version_id,
                group_id=w.group_id,
                source_id=key[0],
                source=names[key[0]],
                relation=key[1],
                target_id=p.target_id,
                target=names[p.target_id],
                fact=p.fact,
                valid_at=p.valid_at,
                invalid_at=p.invalid_at,
                created_at=w.now,
                expired_at=None,
                episodes=p.episodes,
                attributes=stored_order(p.attributes),
            )
            for version_id, key, p in changes.written
            if key[0] in names and p.target_id in names
        ],
    )
    facts = [f for f in new if written.episode_id in f.episodes]
    closed = [
        f
        for f in new
        if written.episode_id not in f.episodes
        and f.id in changes.expired
        and f.invalid_at != changes.expired[f.id]["invalid_at"]
    ]
    gone = [fid for fid in changes.expired if fid not in changes.inserted]
    if gone:
        closed += await read_facts(
            w.conn,
            w.group_id,
            valid_at=None,
            as_of=None,
            read_time=w.now,
            limit=None,
            history=True,
            version_ids=[changes.expired[fid]["version_id"] for fid in gone],
        )
    return facts, closed


async def created_result(
    w: Write,
    written: Written,
    outcome: tuple[list[Fact], list[Fact]],
    llm_calls: int = 0,
    llm_tokens: int = 0,
) -> IngestResult:
    """The result of a write that created its episode: ``outcome`` is the facts it
    supports and the facts it closed (``ingest_outcome``)."""
    return IngestResult(
        episode=await written.stored(),
        entities=written.entities(),
        facts=outcome[0],
        invalidated=outcome[1],
        created=True,
        recorded_at=w.now,
        llm_calls=llm_calls,
        llm_tokens=llm_tokens,
    )


async def names_at(w: Write, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The names of entities as of the write: each one's latest version."""
    cur = await w.conn.execute(
        "SELECT DISTINCT ON (id) id, name FROM timestone.entities"
        " WHERE group_id = %s AND id = ANY(%b::uuid[]) AND created_at <= %s"
        " ORDER BY id, created_at DESC",
        (w.group_id, UuidArray(ids), w.now),
    )
    return {row["id"]: row["name"] for row in await cur.fetchall()}


@dataclasses.dataclass(slots=True)
class RelationOrder:
    """Relations sorted by the database, sent before the write's inserts: read at the end,
    the answer is already there and waits for nothing the write sent after it."""

    relations: frozenset[str]
    cursor: AsyncCursor[DictRow] | None  # None: at most one relation, nothing to sort
    _ranks: dict[str, int] | None = None

    async def ranks(self) -> dict[str, int]:
        if self._ranks is None:
            if self.cursor is None:
                self._ranks = dict.fromkeys(self.relations, 0)
            else:
                rows = await self.cursor.fetchall()
                self._ranks = {row["r"]: i for i, row in enumerate(rows)}
        return self._ranks


async def send_relation_order(w: Write, relations: Iterable[str]) -> RelationOrder:
    """Ask the database to sort ``relations`` (a pipeline sends it without waiting)."""
    wanted = frozenset(relations)
    if len(wanted) < 2:
        return RelationOrder(wanted, None)
    cur = await w.conn.execute(
        "SELECT r FROM unnest(%b::text[]) AS r ORDER BY r", (TextArray(sorted(wanted)),)
    )
    return RelationOrder(wanted, cur)


async def in_read_order(w: Write, order: RelationOrder | None, facts: list[Fact]) -> list[Fact]:
    """``facts`` in the order of ``read_facts``: newest world time first, then relation (in
    the database's collation), then id (uuids compare as their bytes, as in Postgres).
    ``order``: the relations' order, asked for earlier (asked for now if it misses one)."""
    relations = {f.relation for f in facts}
    if order is None or not relations <= order.relations:
        order = await send_relation_order(w, relations)
    rank = await order.ranks()
    facts.sort(key=lambda f: (rank[f.relation], f.id))
    facts.sort(key=lambda f: f.valid_at, reverse=True)
    return facts


async def existing_result(conn: Conn, group_id: str, episode: Episode) -> IngestResult:
    """The result of a write that was already ingested: nothing new was written."""
    cur = await conn.execute(
        "SELECT DISTINCT entity_id FROM timestone.mentions"
        " WHERE group_id = %s AND episode_id = %s AND expired_at IS NULL",
        (group_id, episode.id),
    )
    entity_ids = [row["entity_id"] for row in await cur.fetchall()]
    cur = await conn.execute(
        "SELECT version_id FROM timestone.facts"
        " WHERE group_id = %s AND expired_at IS NULL AND %s = ANY(episodes)",
        (group_id, episode.id),
    )
    version_ids = [row["version_id"] for row in await cur.fetchall()]
    facts = await read_facts(
        conn,
        group_id,
        valid_at=None,
        as_of=None,
        read_time=episode.created_at,
        limit=None,
        version_ids=version_ids,
    )
    return IngestResult(
        episode=episode,
        entities=await entities_by_id(conn, group_id, entity_ids),
        facts=facts,
        invalidated=[],
        created=False,
        recorded_at=episode.created_at,
    )


async def existing_document(conn: Conn, group_id: str, uri: str, version: int) -> DocumentResult:
    cur = await conn.execute(
        sql.SQL(
            "SELECT {} FROM timestone.episodes WHERE group_id = %s AND document_uri = %s"
            " AND expired_at IS NULL ORDER BY chunk_index"
        ).format(EPISODE_COLUMNS),
        (group_id, uri),
    )
    episodes = [episode_from_row(row) for row in await cur.fetchall()]
    return DocumentResult(
        uri=uri,
        version=version,
        episodes=episodes,
        entities=[],
        facts=[],
        invalidated=[],
        retracted=[],
        created=False,
        recorded_at=episodes[0].created_at,
    )


async def episode_facts(w: Write, episode_ids: Sequence[uuid.UUID]) -> list[Fact]:
    """The current facts the episodes support."""
    cur = await w.conn.execute(
        "SELECT version_id FROM timestone.facts"
        " WHERE group_id = %s AND expired_at IS NULL AND episodes && %b::uuid[]",
        (w.group_id, list(episode_ids)),
    )
    version_ids = [row["version_id"] for row in await cur.fetchall()]
    if not version_ids:
        return []
    return await read_facts(
        w.conn,
        w.group_id,
        valid_at=None,
        as_of=None,
        read_time=w.now,
        limit=None,
        version_ids=version_ids,
    )


def closed_apart(
    written: Written, facts: list[Fact], invalidated: list[Fact]
) -> tuple[list[Fact], list[Fact]]:
    """An older fact the episode closed (a contradiction) is invalidated, not a new fact."""
    before = written.changes.expired
    closed = [
        f
        for f in facts
        if f.episodes[0] != written.episode_id
        and f.invalid_at is not None
        and f.id in before
        and before[f.id]["invalid_at"] is None
    ]
    return [f for f in facts if f not in closed], [*invalidated, *closed]

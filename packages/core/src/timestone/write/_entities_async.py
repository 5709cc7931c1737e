"""Entities: resolution of names to ids, mentions, and the entity state derived from them.

An entity's current state is a function of its current mentions (what live
episodes said of it) and its current facts:

- name: the first mention's name; labels: every mention's labels, in order;
  type: the first label, or ``Entity``;
- attributes: merged in recording order, later values winning;
- summary: the latest explicit summary. Reads add the sentences of the
  entity's facts true now (world time) as held at the read's ``as_of``, newest
  first, cut at
  ``SUMMARY_CHARS``: a summary is exact at any system time, and removals and
  rollbacks repair it by construction, without a version per fact.

Every write recomputes the entities it touched, and writes a new version only
where the state changed (a new name spelling, labels, attributes or explicit
summary), so busy entities do not churn.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from psycopg import sql

from .._arrays import IntArray, TextArray, UuidArray
from .._names import fold, fuzzy_eligible, near_identical, normalize
from .._records import Entity, EntityInput
from .._time import utcnow
from .._vectors import VectorArray
from ..db._database_async import Conn
from ..db._distributed_async import row_inserts
from ..ontology import Ontology
from ._facts_async import held_clause, valid_clause
from ._ids import new_ids
from ._transaction_async import (
    Write,
    as_stored,
    json_object,
    json_text,
    stored_order,
    vector_inserts,
)

__all__ = [
    "SUMMARY_CHARS",
    "EntityReads",
    "EntityState",
    "MentionInsert",
    "Mentioned",
    "entity_state",
    "insert_mentions",
    "read_entities",
    "recompute_entities",
    "resolve_entities",
    "write_entities",
]

SUMMARY_CHARS = 2000
# pg_trgm similarity below which a name cannot be a near-identical spelling
_MIN_TRIGRAM = 0.6
_SUMMARY_FACTS = 20


def entity_key(entity: EntityInput) -> tuple[str, str | None]:
    return (_spellings(entity.name)[0], entity.labels[0] if entity.labels else None)


@functools.lru_cache(maxsize=1 << 16)
def _spellings(name: str) -> tuple[str, str]:
    """The normalized and the folded spelling of a name; a bulk load repeats names often."""
    return normalize(name), fold(name)


def lock_keys(entities: Iterable[EntityInput]) -> list[str]:
    """The advisory lock keys of names: their folded spelling, so variants meet."""
    return name_keys(e.name for e in entities)


def name_keys(names: Iterable[str]) -> list[str]:
    spellings = [_spellings(n) for n in set(names)]
    return sorted({"entity\x1f" + (folded or norm) for norm, folded in spellings})


async def stored_keys(w: Write, ids: Iterable[uuid.UUID]) -> set[str]:
    """The lock keys of the current names of stored entities ``ids``."""
    cur = await w.conn.execute(
        "SELECT name FROM timestone.entities WHERE group_id = %s AND id = ANY(%s)"
        " AND expired_at IS NULL",
        (w.group_id, list(ids)),
    )
    return set(name_keys(row["name"] for row in await cur.fetchall()))


async def resolve_entities(
    w: Write,
    entities: Sequence[EntityInput],
    ontology: Ontology,
    decided: Mapping[tuple[str, str | None], uuid.UUID] | None = None,
    new: set[uuid.UUID] | None = None,
    joined: set[uuid.UUID] | None = None,
) -> dict[tuple[str, str | None], uuid.UUID]:
    """Map each distinct (normalized name, type) to an entity id, cheapest tier first
    (``new``, when given, receives the ids minted: entities nothing stored mentions yet;
    ``joined`` those of stored entities reached by another spelling, tiers 2 and 3).

    1. exact normalized name (the unique index); an untyped name matches any type;
    2. ``decided``: what the LLM tier chose, before the write, for ambiguous names;
    3. trigram candidates from the index, kept only when ``near_identical``;
    4. otherwise a new id (the entity row is written by ``recompute_entities``).
    """
    for e in entities:
        ontology.check_entity(e.entity_type, e.attributes, e.name)
    names = {entity_key(e): e.name for e in entities}  # in order of first mention
    keys = list(names)
    folds = {k: _spellings(names[k])[1] for k in keys}
    cur = await w.conn.execute(
        "SELECT id, norm_name, fold_name, entity_type, created_at FROM timestone.entities"
        " WHERE group_id = %s AND expired_at IS NULL"
        " AND (norm_name = ANY(%b::text[]) OR fold_name = ANY(%b::text[]))"
        " ORDER BY created_at, id",
        (
            w.group_id,
            TextArray({k[0] for k in keys}),
            TextArray({f for f in folds.values() if f}),
        ),
    )
    known = _Known(folds)
    for row in await cur.fetchall():
        known.add(row["norm_name"], row["fold_name"], row["id"], row["entity_type"])

    resolved: dict[tuple[str, str | None], uuid.UUID] = {}
    # typed keys first, so that an untyped mention of the same name joins the typed entity
    ordered = [k for k in keys if k[1] is not None] + [k for k in keys if k[1] is None]
    unmatched: list[tuple[str, str | None]] = []
    for key in ordered:
        ident = known.exact(key)
        if ident is not None:
            resolved[key] = ident
        else:
            unmatched.append(key)

    if unmatched:
        # trigram candidates only for names that could merge with another spelling
        eligible = [names[k] for k in unmatched if fuzzy_eligible(names[k])]
        fuzzy = await _similar(w, eligible) if eligible else {}
        fresh = iter(new_ids(len(unmatched)))
        for key in unmatched:
            ident = known.exact(key)  # an earlier fuzzy or minted key may now match
            other = False  # reached through another spelling
            if ident is None and decided:
                ident = decided.get(key)
                other = ident is not None
            if ident is None:
                ident = known.same_fold(key)
            if ident is None:
                ident = _pick_similar(names[key], key[1], fuzzy.get(normalize(names[key]), []))
                other = ident is not None
            if ident is None:
                ident = next(fresh)
                if new is not None:
                    new.add(ident)
                known.mint(key, ident)
            elif other and joined is not None and not known.minted(ident):
                joined.add(ident)
            resolved[key] = ident
    return resolved


_Found = list[tuple[uuid.UUID, str]]  # (entity id, entity type)


class _Known:
    """The entities a resolution may join: stored ones by normalized and folded name, and
    those it minted itself, so that later spellings of a name join the first."""

    def __init__(self, folds: Mapping[tuple[str, str | None], str | None]) -> None:
        self.folds = folds
        self.by_name: dict[str, _Found] = {}
        self.by_fold: dict[str, _Found] = {}
        self.new: set[uuid.UUID] = set()

    def add(self, norm: str, fold: str | None, ident: uuid.UUID, etype: str) -> None:
        self.by_name.setdefault(norm, []).append((ident, etype))
        if fold:
            self.by_fold.setdefault(fold, []).append((ident, etype))

    def mint(self, key: tuple[str, str | None], ident: uuid.UUID) -> None:
        self.add(key[0], self.folds[key], ident, key[1] or "Entity")
        self.new.add(ident)

    def minted(self, ident: uuid.UUID) -> bool:
        return ident in self.new

    def exact(self, key: tuple[str, str | None]) -> uuid.UUID | None:
        return _pick(self.by_name.get(key[0], []), key[1])

    def same_fold(self, key: tuple[str, str | None]) -> uuid.UUID | None:
        f = self.folds[key]
        return _pick(self.by_fold.get(f, []), key[1]) if f else None


def _pick(found: _Found, etype: str | None) -> uuid.UUID | None:
    """A typed name takes the entity of its type, else an untyped one; an untyped name
    takes the first."""
    if etype is None:
        return found[0][0] if found else None
    for ident, t in found:
        if t == etype:
            return ident
    for ident, t in found:
        if t == "Entity":
            return ident
    return None


async def _similar(w: Write, names: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    cur = await w.conn.execute(
        "SELECT query, id, name, entity_type, similarity"
        " FROM timestone.similar_entities(%b::text[], 5, %s::real)",
        ([normalize(n) for n in names], _MIN_TRIGRAM),
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for row in await cur.fetchall():
        out.setdefault(row["query"], []).append(dict(row))
    return out


def _pick_similar(
    name: str, etype: str | None, candidates: list[dict[str, Any]]
) -> uuid.UUID | None:
    best: tuple[float, uuid.UUID] | None = None
    for c in candidates:
        compatible = etype is None or c["entity_type"] in (etype, "Entity")
        if compatible and near_identical(name, c["name"]):
            score = float(c["similarity"])
            if best is None or score > best[0]:
                best = (score, c["id"])
    return best[1] if best else None


@dataclasses.dataclass(slots=True)  # made per fact: not frozen, whose __init__ costs 2.6x
class MentionInsert:
    """A mention as a write inserts it (``timestone.models.MentionRow`` reads the table)."""

    entity_id: uuid.UUID
    entity: EntityInput
    attributes: Mapping[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Mentioned:
    """The mentions one episode just wrote, by entity, as a read of them would give them:
    recomputing the entities takes them from here rather than reading them back."""

    episode_id: uuid.UUID
    by_entity: dict[uuid.UUID, list[dict[str, Any]]]


_INSERT_MENTIONS = (
    "INSERT INTO timestone.mentions (group_id, id, episode_id, entity_id, name, labels,"
    " attributes, summary, position, recorded_at, created_at)"
    " SELECT %(group)s, x.id, %(episode)s, x.entity_id, x.name,"
    " (%(labels)b::text[])[x.first:x.last], x.attributes::jsonb, x.summary, x.position,"
    " %(now)s, %(now)s"
    " FROM unnest(%(id)b::uuid[], %(entity)b::uuid[], %(name)b::text[], %(first)b::int[],"
    " %(last)b::int[], %(attributes)b::text[], %(summary)b::text[], %(position)b::int[])"
    " AS x(id, entity_id, name, first, last, attributes, summary, position)"
)


async def insert_mentions(
    w: Write, episode_id: uuid.UUID, mentions: Sequence[MentionInsert]
) -> Mentioned:
    """One statement for every row; each row's labels are a slice of one array."""
    labels: list[str] = []
    first: list[int] = []
    last: list[int] = []
    by_entity: dict[uuid.UUID, list[dict[str, Any]]] = {}
    ids = new_ids(len(mentions))
    attributes = [json_text(m.attributes) for m in mentions]
    for position, (m, ident, text) in enumerate(zip(mentions, ids, attributes, strict=True)):
        first.append(len(labels) + 1)
        labels.extend(m.entity.labels)
        last.append(len(labels))
        by_entity.setdefault(m.entity_id, []).append(
            {
                "entity_id": m.entity_id,
                "name": m.entity.name,
                "labels": list(m.entity.labels),
                "attributes": as_stored(text),
                "summary": m.entity.summary,
                "recorded_at": w.now,
                "position": position,
                "id": ident,
            }
        )
    if mentions:
        await w.conn.execute(
            row_inserts(w.conn, _INSERT_MENTIONS),
            {
                "group": w.group_id,
                "episode": episode_id,
                "now": w.now,
                "labels": TextArray(labels),
                "id": UuidArray(ids),
                "entity": UuidArray(m.entity_id for m in mentions),
                "name": TextArray(m.entity.name for m in mentions),
                "first": IntArray(first),
                "last": IntArray(last),
                "attributes": TextArray(attributes),
                "summary": TextArray(m.entity.summary for m in mentions),
                "position": IntArray(range(len(mentions))),
            },
        )
    return Mentioned(episode_id=episode_id, by_entity=by_entity)


@dataclasses.dataclass(slots=True)  # made per fact: not frozen, whose __init__ costs 2.6x
class EntityState:
    name: str
    entity_type: str
    labels: tuple[str, ...]
    attributes: Mapping[str, Any]
    summary: str

    def same(self, row: Mapping[str, Any]) -> bool:
        return (
            self.name == row["name"]
            and self.entity_type == row["entity_type"]
            and self.labels == tuple(row["labels"])
            and dict(self.attributes) == json_object(row["attributes"])
            and self.summary == row["summary"]
        )


def _mention_order(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (row["recorded_at"], row["position"], row["id"])


_INSERT_ENTITIES = sql.SQL(
    "INSERT INTO timestone.entities (group_id, id, name, norm_name, fold_name, entity_type,"
    " labels, attributes, summary, name_embedding, created_at)"
    " SELECT %(group)s, x.id, x.name, x.norm_name, x.fold_name, x.entity_type,"
    " (%(labels)b::text[])[x.first:x.last], x.attributes::jsonb, x.summary, {vector}, %(now)s"
    " FROM unnest(%(id)b::uuid[], %(name)b::text[], %(norm_name)b::text[],"
    " %(fold_name)b::text[], %(entity_type)b::text[], %(first)b::int[], %(last)b::int[],"
    " %(attributes)b::text[], %(summary)b::text[], {column})"
    " AS x(id, name, norm_name, fold_name, entity_type, first, last, attributes, summary,"
    " {name}){join}"
)
# new vectors, or each vector copied from the version a row replaces (text unchanged)
_INSERT_ENTITIES_EMBEDDED, _INSERT_ENTITIES_KEPT = vector_inserts(
    _INSERT_ENTITIES, "entities", "name_embedding"
)


@dataclasses.dataclass(frozen=True, slots=True)
class EntityReads:
    """What recomputing some entities reads: their current versions, and the mentions to
    fold for each (``_folded_so_far``)."""

    ids: list[uuid.UUID]
    rows_now: dict[uuid.UUID, dict[str, Any]]
    mentions: dict[uuid.UUID, list[dict[str, Any]]]


async def recompute_entities(
    w: Write,
    entity_ids: Iterable[uuid.UUID],
    fresh: Mentioned | None = None,
    current: dict[uuid.UUID, Entity] | None = None,
) -> tuple[int, int]:
    """Bring the touched entities to the state their mentions and facts say.

    ``fresh``: mentions this write just inserted, taken as given rather than read back.
    ``current``: filled with the current version of every entity that keeps one.
    Returns (entities expired for lack of any mention, entities given a new version).
    """
    return await write_entities(w, await read_entities(w, entity_ids, fresh), current)


async def read_entities(
    w: Write, entity_ids: Iterable[uuid.UUID], fresh: Mentioned | None = None
) -> EntityReads:
    """The reads of ``recompute_entities``. They skip ``fresh``'s episode, so a write may
    read before its own mentions are in."""
    ids = sorted(set(entity_ids))
    mentions: dict[uuid.UUID, list[dict[str, Any]]] = {}
    if not ids:
        return EntityReads(ids=ids, rows_now={}, mentions=mentions)
    async with w.conn.cursor(binary=True) as bcur:
        # vectors stay in the database: a kept one is copied there by the insert
        await bcur.execute(
            "SELECT e.id, e.version_id, e.name, e.entity_type, e.labels,"
            " e.attributes::text AS attributes, e.summary, e.created_at,"
            " e.name_embedding IS NOT NULL AS embedded,"
            " (SELECT max(m.recorded_at) FROM timestone.mentions AS m"
            "  WHERE m.group_id = %s AND m.entity_id = e.id AND m.expired_at IS NULL"
            "  AND m.episode_id IS DISTINCT FROM %s::uuid) AS last_mention"
            " FROM timestone.entities AS e WHERE e.group_id = %s AND e.expired_at IS NULL"
            " AND e.id = ANY(%b::uuid[])",
            (w.group_id, fresh.episode_id if fresh else None, w.group_id, UuidArray(ids)),
        )
        rows_now = {row["id"]: row for row in await bcur.fetchall()}
        mentions, unread = _folded_so_far(ids, rows_now, fresh)
        if unread:
            await bcur.execute(
                "SELECT entity_id, name, labels, attributes::text AS attributes, summary,"
                " recorded_at, position, id FROM timestone.mentions"
                " WHERE group_id = %s AND expired_at IS NULL AND entity_id = ANY(%b::uuid[])"
                " AND episode_id IS DISTINCT FROM %s::uuid"
                " ORDER BY recorded_at, position, id",
                (w.group_id, UuidArray(unread), fresh.episode_id if fresh else None),
            )
            for row in await bcur.fetchall():
                row["attributes"] = json_object(row["attributes"])
                mentions.setdefault(row["entity_id"], []).append(row)
            if fresh is not None:
                for ident in unread:
                    rows = fresh.by_entity.get(ident)
                    if not rows:
                        continue
                    found = mentions.setdefault(ident, [])
                    later = bool(found) and _mention_order(found[-1]) > _mention_order(rows[0])
                    found.extend(rows)
                    if later:
                        found.sort(key=_mention_order)
    return EntityReads(ids=ids, rows_now=rows_now, mentions=mentions)


async def write_entities(
    w: Write, reads: EntityReads, current: dict[uuid.UUID, Entity] | None = None
) -> tuple[int, int]:
    """Fold what ``read_entities`` read and write the versions that changed (no result is
    read: in a pipeline the statements run while the write goes on)."""
    ids, rows_now, mentions = reads.ids, reads.rows_now, reads.mentions
    expire: list[uuid.UUID] = []
    insert: list[tuple[uuid.UUID, EntityState, uuid.UUID | None]] = []
    for ident in ids:
        rows = mentions.get(ident)
        row = rows_now.get(ident)
        if not rows:
            if row is not None:
                expire.append(row["version_id"])
            continue
        state = entity_state(rows)
        if row is not None and state.same(row):
            if current is not None:
                current[ident] = Entity(
                    id=ident,
                    group_id=w.group_id,
                    name=row["name"],
                    labels=tuple(row["labels"]),
                    summary=row["summary"],
                    attributes=json_object(row["attributes"]),
                    created_at=row["created_at"],
                    expired_at=None,
                )
            continue
        if row is not None:
            expire.append(row["version_id"])
        keep = (
            row["version_id"]
            if row is not None and row["name"] == state.name and row["embedded"]
            else None
        )
        insert.append((ident, state, keep))
        if current is not None:
            current[ident] = Entity(
                id=ident,
                group_id=w.group_id,
                name=state.name,
                labels=state.labels,
                summary=state.summary,
                attributes=stored_order(state.attributes),
                created_at=w.now,
                expired_at=None,
            )

    if expire:
        await w.conn.execute(
            "UPDATE timestone.entities SET expired_at = %s"
            " WHERE group_id = %s AND version_id = ANY(%b::uuid[])",
            (w.now, w.group_id, expire),
        )
    fresh_names = [i for i in insert if i[2] is None]
    kept = [i for i in insert if i[2] is not None]
    if fresh_names:
        vectors = await w.embed(s.name for _, s, _ in fresh_names)
        params = _entity_params(w, fresh_names)
        params["embedding"] = VectorArray(
            [vectors[s.name] for _, s, _ in fresh_names], w.embedder.dimension
        )
        await w.conn.execute(row_inserts(w.conn, _INSERT_ENTITIES_EMBEDDED), params)
    if kept:
        params = _entity_params(w, kept)
        params["keep"] = UuidArray(keep for _, _, keep in kept)
        await w.conn.execute(row_inserts(w.conn, _INSERT_ENTITIES_KEPT), params)
    expired_for_good = sum(1 for ident in ids if not mentions.get(ident) and ident in rows_now)
    return (expired_for_good, len(insert))


def _folded_so_far(
    ids: Sequence[uuid.UUID],
    rows_now: Mapping[uuid.UUID, Mapping[str, Any]],
    fresh: Mentioned | None,
) -> tuple[dict[uuid.UUID, list[dict[str, Any]]], list[uuid.UUID]]:
    """The mentions to fold for each entity, where they need no read; and the entities
    whose mentions must be read.

    An entity's current version is the fold (``entity_state``) of its current mentions in
    recording order. When a write only adds mentions that come after all of them, the
    fold continues from that version: the version stands for the mentions before, and
    an entity the write does not mention keeps its state. Reading every mention again
    would cost a read of the whole history of a busy entity on each write. Anything
    else (no fresh mentions given, a new entity, a mention recorded at or after this
    write's clock, a version without mentions) is read and folded from the start.
    """
    folded: dict[uuid.UUID, list[dict[str, Any]]] = {}
    unread: list[uuid.UUID] = []
    for ident in ids:
        row = rows_now.get(ident)
        new = fresh.by_entity.get(ident, []) if fresh is not None else None
        last = row["last_mention"] if row is not None else None
        if new is None or row is None or last is None or any(last >= m["recorded_at"] for m in new):
            unread.append(ident)
            continue
        so_far = {
            "name": row["name"],
            "labels": list(row["labels"]),
            "attributes": json_object(row["attributes"]),
            "summary": row["summary"],
        }
        folded[ident] = [so_far, *new]
    return folded, unread


def _entity_params(
    w: Write, insert: Sequence[tuple[uuid.UUID, EntityState, uuid.UUID | None]]
) -> dict[str, Any]:
    labels: list[str] = []
    first: list[int] = []
    last: list[int] = []
    for _, s, _ in insert:
        first.append(len(labels) + 1)
        labels.extend(s.labels)
        last.append(len(labels))
    return {
        "group": w.group_id,
        "now": w.now,
        "labels": TextArray(labels),
        "id": UuidArray(ident for ident, _, _ in insert),
        "name": TextArray(s.name for _, s, _ in insert),
        "norm_name": TextArray(_spellings(s.name)[0] for _, s, _ in insert),
        "fold_name": TextArray(_spellings(s.name)[1] for _, s, _ in insert),
        "entity_type": TextArray(s.entity_type for _, s, _ in insert),
        "first": IntArray(first),
        "last": IntArray(last),
        "attributes": TextArray(json_text(s.attributes) for _, s, _ in insert),
        "summary": TextArray(s.summary for _, s, _ in insert),
    }


def entity_state(mentions: Sequence[Mapping[str, Any]]) -> EntityState:
    """The state of an entity its ``mentions`` (in recording order) give."""
    labels: list[str] = []
    attributes: dict[str, Any] = {}
    explicit = ""
    for m in mentions:
        for label in m["labels"]:
            if label not in labels:
                labels.append(label)
        attributes.update(m["attributes"])
        if m["summary"]:
            explicit = m["summary"]
    return EntityState(
        name=mentions[0]["name"],
        entity_type=labels[0] if labels else "Entity",
        labels=tuple(labels),
        attributes=attributes,
        summary=explicit,
    )


def compose_summary(explicit: str, sentences: Iterable[str]) -> str:
    """The explicit summary, then fact sentences, cut at ``SUMMARY_CHARS``."""
    summary = explicit.strip()
    for part in sentences:
        candidate = f"{summary} {part}".strip()
        if len(candidate) > SUMMARY_CHARS:
            break
        summary = candidate
    return summary


async def fact_sentences(
    conn: Conn, group_id: str, entity_id: uuid.UUID, as_of: datetime | None, valid_at: datetime
) -> list[str]:
    """The sentences of the entity's facts true at ``valid_at`` and held at ``as_of``, newest
    world time first: a fact that starts later is not yet true, one closed later still is."""
    branch = sql.SQL(
        "(SELECT f.fact, f.valid_at, f.id FROM timestone.facts AS f"
        " WHERE f.group_id = {g} AND f.{col} = {e} AND {valid} AND {held}"
        " ORDER BY f.valid_at DESC, f.fact, f.id LIMIT {n})"
    )
    parts = [
        branch.format(
            g=sql.Literal(group_id),
            col=sql.Identifier(col),
            e=sql.Literal(entity_id),
            valid=valid_clause("f", valid_at),
            held=held_clause("f", as_of),
            n=sql.Literal(_SUMMARY_FACTS),
        )
        for col in ("source_id", "target_id")
    ]
    query = sql.SQL(
        "SELECT fact FROM ({} UNION {}) AS s ORDER BY valid_at DESC, fact, id LIMIT {}"
    ).format(parts[0], parts[1], sql.Literal(_SUMMARY_FACTS))
    cur = await conn.execute(query)
    return [row["fact"] for row in await cur.fetchall()]


ENTITY_COLUMNS = sql.SQL("id, group_id, name, labels, summary, attributes, created_at, expired_at")


def entity_from_row(row: Mapping[str, Any]) -> Entity:
    return Entity(
        id=row["id"],
        group_id=row["group_id"],
        name=row["name"],
        labels=tuple(row["labels"]),
        summary=row["summary"],
        attributes=dict(row["attributes"]),
        created_at=row["created_at"],
        expired_at=row["expired_at"],
        score=row.get("score"),
    )


async def read_entity(
    conn: Conn, group_id: str, key: uuid.UUID | str, as_of: datetime | None
) -> Entity | None:
    """An entity by id, or by normalized name (the earliest minted on a tie), at ``as_of``."""
    match = (
        sql.SQL("e.id = {}").format(sql.Literal(key))
        if isinstance(key, uuid.UUID)
        else sql.SQL("e.norm_name = {}").format(sql.Literal(key))
    )
    query = sql.SQL(
        "SELECT {cols} FROM timestone.entities AS e WHERE e.group_id = {g} AND {held}"
        " AND {match} ORDER BY e.created_at, e.id LIMIT 1"
    ).format(
        cols=ENTITY_COLUMNS,
        g=sql.Literal(group_id),
        held=held_clause("e", as_of),
        match=match,
    )
    cur = await conn.execute(query)
    row = await cur.fetchone()
    if row is None:
        return None
    entity = entity_from_row(row)
    sentences = await fact_sentences(conn, group_id, entity.id, as_of, utcnow())
    return dataclasses.replace(entity, summary=compose_summary(entity.summary, sentences))


async def near_entity(
    conn: Conn, group_id: str, name: str, as_of: datetime | None = None
) -> uuid.UUID | None:
    """The id of an entity of ``group_id`` (the transaction's group) held at ``as_of`` (now:
    ``None``) whose name is a near-identical spelling of ``name``."""
    folded = fold(name)
    if folded:
        # the group named, not read from the setting: Citus routes by a value (_distributed)
        cur = await conn.execute(
            sql.SQL(
                "SELECT e.id FROM timestone.entities AS e WHERE e.group_id = {g}"
                " AND {held} AND e.fold_name = {f} ORDER BY e.created_at, e.id LIMIT 1"
            ).format(g=sql.Literal(group_id), held=held_clause("e", as_of), f=sql.Literal(folded))
        )
        row = await cur.fetchone()
        if row is not None:
            return row["id"]
    if not fuzzy_eligible(name):
        return None
    if as_of is None:
        cur = await conn.execute(
            "SELECT id, name, similarity FROM timestone.similar_entities(%s, 5, %s::real)",
            ([normalize(name)], _MIN_TRIGRAM),
        )
    else:
        # the names held then: the trigram index serves the current names only, so the
        # group's rows held at ``as_of`` are compared one by one
        cur = await conn.execute(
            sql.SQL(
                "SELECT e.id, e.name FROM timestone.entities AS e WHERE e.group_id = {g}"
                " AND {held} AND similarity(e.norm_name, {n}) >= {m}"
                " ORDER BY similarity(e.norm_name, {n}) DESC, e.created_at, e.id LIMIT 5"
            ).format(
                g=sql.Literal(group_id),
                held=held_clause("e", as_of),
                n=sql.Literal(normalize(name)),
                m=sql.Literal(_MIN_TRIGRAM),
            )
        )
    for row in await cur.fetchall():
        if near_identical(name, row["name"]):
            return row["id"]
    return None

"""Entities: resolution of names to ids, mentions, and the entity state derived from them.

An entity's current state is a function of its current mentions (what live
episodes said of it) and its current facts:

- name: the first mention's name; labels: every mention's labels, in order;
  type: the first label, or ``Entity``;
- attributes: merged in recording order, later values winning;
- summary: the latest explicit summary. Reads add the sentences of the
  entity's open facts held at the read's ``as_of``, newest first, cut at
  ``SUMMARY_CHARS``: a summary is exact at any system time, and removals and
  rollbacks repair it by construction, without a version per fact.

Every write recomputes the entities it touched, and writes a new version only
where the state changed (a new name spelling, labels, attributes or explicit
summary), so busy entities do not churn.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from psycopg import sql

from .._models import Entity, EntityInput
from .._names import fold, fuzzy_eligible, near_identical, normalize
from ..ontology import Ontology
from ._db import Conn
from ._write import Write

__all__ = [
    "SUMMARY_CHARS",
    "MentionRow",
    "insert_mentions",
    "recompute_entities",
    "resolve_entities",
]

SUMMARY_CHARS = 2000
# pg_trgm similarity below which a name cannot be a near-identical spelling
_MIN_TRIGRAM = 0.6
_SUMMARY_FACTS = 20


def entity_key(entity: EntityInput) -> tuple[str, str | None]:
    return (normalize(entity.name), entity.labels[0] if entity.labels else None)


def lock_keys(entities: Iterable[EntityInput]) -> list[str]:
    """The advisory lock keys of names: their folded spelling, so variants meet."""
    return sorted({"entity\x1f" + (fold(e.name) or normalize(e.name)) for e in entities})


async def resolve_entities(
    w: Write,
    entities: Sequence[EntityInput],
    ontology: Ontology,
    decided: Mapping[tuple[str, str | None], uuid.UUID] | None = None,
) -> dict[tuple[str, str | None], uuid.UUID]:
    """Map each distinct (normalized name, type) to an entity id, cheapest tier first.

    1. exact normalized name (the unique index); an untyped name matches any type;
    2. ``decided``: what the LLM tier chose, before the write, for ambiguous names;
    3. trigram candidates from the index, kept only when ``near_identical``;
    4. otherwise a new id (the entity row is written by ``recompute_entities``).
    """
    for e in entities:
        ontology.check_entity(e.entity_type, e.attributes, e.name)
    keys = list(dict.fromkeys(entity_key(e) for e in entities))
    names = {entity_key(e): e.name for e in entities}
    folds = {k: fold(names[k]) for k in keys}
    cur = await w.conn.execute(
        "SELECT id, norm_name, fold_name, entity_type, created_at FROM timestone.entities"
        " WHERE group_id = %s AND expired_at IS NULL"
        " AND (norm_name = ANY(%s) OR fold_name = ANY(%s))"
        " ORDER BY created_at, id",
        (w.group_id, list({k[0] for k in keys}), list({f for f in folds.values() if f})),
    )
    existing: dict[str, list[tuple[uuid.UUID, str]]] = {}
    folded: dict[str, list[tuple[uuid.UUID, str]]] = {}
    for row in await cur.fetchall():
        existing.setdefault(row["norm_name"], []).append((row["id"], row["entity_type"]))
        if row["fold_name"]:
            folded.setdefault(row["fold_name"], []).append((row["id"], row["entity_type"]))

    resolved: dict[tuple[str, str | None], uuid.UUID] = {}
    minted: dict[str, list[tuple[uuid.UUID, str]]] = {}
    minted_folds: dict[str, list[tuple[uuid.UUID, str]]] = {}

    def pick(found: list[tuple[uuid.UUID, str]], etype: str | None) -> uuid.UUID | None:
        if etype is not None:
            for ident, t in found:
                if t == etype:
                    return ident
            for ident, t in found:
                if t == "Entity":
                    return ident
            return None
        return found[0][0] if found else None

    def exact(norm: str, etype: str | None) -> uuid.UUID | None:
        return pick(existing.get(norm, []) + minted.get(norm, []), etype)

    def same_fold(key: tuple[str, str | None]) -> uuid.UUID | None:
        f = folds[key]
        return pick(folded.get(f, []) + minted_folds.get(f, []), key[1]) if f else None

    # typed keys first, so that an untyped mention of the same name joins the typed entity
    ordered = [k for k in keys if k[1] is not None] + [k for k in keys if k[1] is None]
    unmatched: list[tuple[str, str | None]] = []
    for key in ordered:
        ident = exact(*key)
        if ident is not None:
            resolved[key] = ident
        else:
            unmatched.append(key)

    if unmatched:
        # trigram candidates only for names that could merge with another spelling
        eligible = [names[k] for k in unmatched if fuzzy_eligible(names[k])]
        fuzzy = await _similar(w, eligible) if eligible else {}
        for key in unmatched:
            ident = exact(*key)  # an earlier fuzzy or minted key may now match
            if ident is None and decided:
                ident = decided.get(key)
            if ident is None:
                ident = same_fold(key)
            if ident is None:
                ident = _pick_similar(names[key], key[1], fuzzy.get(normalize(names[key]), []))
            if ident is None:
                ident = uuid.uuid4()
                minted.setdefault(key[0], []).append((ident, key[1] or "Entity"))
                if folds[key]:
                    minted_folds.setdefault(folds[key], []).append((ident, key[1] or "Entity"))
            resolved[key] = ident
    return resolved


async def _similar(w: Write, names: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    cur = await w.conn.execute(
        "SELECT query, id, name, entity_type, similarity"
        " FROM timestone.similar_entities(%s, 5, %s::real)",
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


@dataclasses.dataclass(frozen=True, slots=True)
class MentionRow:
    entity_id: uuid.UUID
    entity: EntityInput
    attributes: Mapping[str, Any]


async def insert_mentions(w: Write, episode_id: uuid.UUID, mentions: Sequence[MentionRow]) -> None:
    async with w.conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO timestone.mentions (group_id, id, episode_id, entity_id, name, labels,"
            " attributes, summary, position, recorded_at, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    w.group_id,
                    uuid.uuid4(),
                    episode_id,
                    m.entity_id,
                    m.entity.name,
                    list(m.entity.labels),
                    json.dumps(m.attributes),
                    m.entity.summary,
                    position,
                    w.now,
                    w.now,
                )
                for position, m in enumerate(mentions)
            ],
        )


@dataclasses.dataclass(frozen=True, slots=True)
class _State:
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
            and dict(self.attributes) == dict(row["attributes"])
            and self.summary == row["summary"]
        )


async def recompute_entities(w: Write, entity_ids: Iterable[uuid.UUID]) -> tuple[int, int]:
    """Bring the touched entities to the state their mentions and facts say.

    Returns (entities expired for lack of any mention, entities given a new version).
    """
    ids = sorted(set(entity_ids))
    if not ids:
        return (0, 0)
    cur = await w.conn.execute(
        "SELECT entity_id, name, labels, attributes, summary FROM timestone.mentions"
        " WHERE group_id = %s AND expired_at IS NULL AND entity_id = ANY(%s)"
        " ORDER BY recorded_at, position, id",
        (w.group_id, ids),
    )
    mentions: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for row in await cur.fetchall():
        mentions.setdefault(row["entity_id"], []).append(row)

    async with w.conn.cursor(binary=True) as bcur:
        await bcur.execute(
            "SELECT id, version_id, name, entity_type, labels, attributes, summary, name_embedding"
            " FROM timestone.entities WHERE group_id = %s AND expired_at IS NULL AND id = ANY(%s)",
            (w.group_id, ids),
        )
        current = {row["id"]: row for row in await bcur.fetchall()}

    expire: list[uuid.UUID] = []
    insert: list[tuple[uuid.UUID, _State, Any]] = []
    for ident in ids:
        rows = mentions.get(ident)
        row = current.get(ident)
        if not rows:
            if row is not None:
                expire.append(row["version_id"])
            continue
        state = _state(rows)
        if row is not None and state.same(row):
            continue
        if row is not None:
            expire.append(row["version_id"])
        keep = row["name_embedding"] if row is not None and row["name"] == state.name else None
        insert.append((ident, state, keep))

    if expire:
        await w.conn.execute(
            "UPDATE timestone.entities SET expired_at = %s"
            " WHERE group_id = %s AND version_id = ANY(%s)",
            (w.now, w.group_id, expire),
        )
    if insert:
        vectors = await w.embed(s.name for _, s, keep in insert if keep is None)
        async with w.conn.cursor() as cur2:
            await cur2.executemany(
                "INSERT INTO timestone.entities (group_id, id, name, norm_name, fold_name,"
                " entity_type, labels, attributes, summary, name_embedding, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        w.group_id,
                        ident,
                        s.name,
                        normalize(s.name),
                        fold(s.name),
                        s.entity_type,
                        list(s.labels),
                        json.dumps(s.attributes),
                        s.summary,
                        keep if keep is not None else _vec(vectors[s.name]),
                        w.now,
                    )
                    for ident, s, keep in insert
                ],
            )
    expired_for_good = sum(1 for ident in ids if not mentions.get(ident) and ident in current)
    return (expired_for_good, len(insert))


def _vec(values: list[float]) -> Any:
    import numpy as np

    return np.asarray(values, dtype=np.float32)


def _state(mentions: Sequence[Mapping[str, Any]]) -> _State:
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
    return _State(
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
    conn: Conn, group_id: str, entity_id: uuid.UUID, as_of: datetime | None
) -> list[str]:
    """The sentences of the entity's open facts held at ``as_of``, newest world time first."""
    from ._facts import held_clause

    branch = sql.SQL(
        "(SELECT f.fact, f.valid_at, f.id FROM timestone.facts AS f"
        " WHERE f.group_id = {g} AND f.{col} = {e} AND f.invalid_at IS NULL AND {held}"
        " ORDER BY f.valid_at DESC, f.fact, f.id LIMIT {n})"
    )
    parts = [
        branch.format(
            g=sql.Literal(group_id),
            col=sql.Identifier(col),
            e=sql.Literal(entity_id),
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
    from ._facts import held_clause

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
    sentences = await fact_sentences(conn, group_id, entity.id, as_of)
    return dataclasses.replace(entity, summary=compose_summary(entity.summary, sentences))


async def near_entity(conn: Conn, name: str) -> uuid.UUID | None:
    """The id of a current entity whose name is a near-identical spelling of ``name``."""
    folded = fold(name)
    if folded:
        cur = await conn.execute(
            "SELECT id FROM timestone.entities WHERE group_id = current_setting("
            "'timestone.group_id', true) AND expired_at IS NULL AND fold_name = %s"
            " ORDER BY created_at, id LIMIT 1",
            (folded,),
        )
        row = await cur.fetchone()
        if row is not None:
            return row["id"]
    if not fuzzy_eligible(name):
        return None
    cur = await conn.execute(
        "SELECT id, name, similarity FROM timestone.similar_entities(%s, 5, %s::real)",
        ([normalize(name)], _MIN_TRIGRAM),
    )
    for row in await cur.fetchall():
        if near_identical(name, row["name"]):
            return row["id"]
    return None

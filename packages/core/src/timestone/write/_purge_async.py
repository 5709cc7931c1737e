"""Purging an episode: its rows go, and history is replayed as if it had never been recorded.

Facts are a function of the assertions the graph holds (the date fight), and an
entity's stored state a function of its mentions (``_entities``). So the history
of a slot or an entity is a function of the history of its assertions or
mentions: at each moment one of them was created or expired, the fight (or the
fold) over the rows held then gives the versions held until the next such
moment. A purge deletes every version of the episode's assertions and mentions,
then replays the history of each slot and entity they belonged to from the rows
that remain. Stored versions equal to a replayed one (same content, same system
times) are kept as they are; the others are deleted, and the replayed versions
inserted with their own ``created_at`` and ``expired_at``. A replayed version that
continues unchanged across the moments the episode alone made is one version.

This is exact where rewriting only the versions that list the episode would not
be: the episode may have authored a fact (its sentence and id come from the
first assertion), won a date in a cardinality-one slot, or closed or split
another episode's period, and each of those changed versions that do not name
it. After the replay an ``as_of`` read of any moment gives what it would have
given had the episode never been ingested. A version's vector is copied from a
stored version of the same text, or embedded again when none has it.

The history before the first moment the episode's rows were held is unchanged by
the purge: the versions that ended before it are kept, and replaying costs, per
slot or entity touched, one fold of the rows held at each moment from then on
(the whole history, quadratic in its length, only when what is stored just before
that moment is not what the fold gives).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

from psycopg import sql

from .._arrays import IntArray, TextArray, TimeArray, UuidArray
from .._names import fold, normalize
from .._vectors import VectorArray
from ..db._distributed_async import row_inserts
from ._date_fight import Assertion, Period, attributes_key, compute_slot
from ._entities_async import EntityState, entity_state
from ._facts_async import assertion_from_row, version_key
from ._ids import new_ids
from ._purge_versions_async import delete_versions as _delete
from ._purge_versions_async import earliest as _earliest
from ._purge_versions_async import hold_what_the_version_retracted
from ._purge_versions_async import slot_key as _slot
from ._transaction_async import Write, json_object, json_text, vector_inserts

__all__ = ["Version", "erase_episode", "replay"]

X = TypeVar("X")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclasses.dataclass(frozen=True, slots=True)
class Version(Generic[K, V]):
    """One version of a replayed history: its content (``key``, and ``value``, what is
    written) and the system time it is held."""

    key: K
    value: V
    created_at: datetime
    expired_at: datetime | None


def replay(
    inputs: Sequence[tuple[X, datetime, datetime | None]],
    derive: Callable[[list[X]], dict[K, V]],
    order: Callable[[X], Any],
    splits: set[tuple[K, datetime]],
    since: tuple[datetime, Mapping[K, datetime]] | None = None,
) -> list[Version[K, V]] | None:
    """The versions ``derive`` gives over ``inputs`` (rows, each with its ``created_at`` and
    ``expired_at``) held at each moment, in ``order``. A version held across a moment
    stays one version, unless the stored history ended and began one of that content
    there (``splits``: a rollback re-inserts what it restores).

    With ``since`` (a moment, and the stored versions held just before it: their content
    and ``created_at``) the history before that moment is taken as stored: the rows held
    then are folded once, and only the versions held at that moment or after are
    returned. None when what is stored just before it is not what the fold gives."""
    events: dict[datetime, tuple[list[int], list[int]]] = {}
    for i, (_, created, expired) in enumerate(inputs):
        if expired is not None and expired <= created:
            continue  # never held
        events.setdefault(created, ([], []))[0].append(i)
        if expired is not None:
            events.setdefault(expired, ([], []))[1].append(i)
    held: set[int] = set()
    opened: dict[K, tuple[V, datetime]] | None = None if since else {}
    out: list[Version[K, V]] = []
    for moment in sorted(events):
        if opened is None and since and moment >= since[0]:
            opened = _seed(derive(sorted((inputs[i][0] for i in held), key=order)), since[1])
            if opened is None:
                return None
        added, removed = events[moment]
        held.difference_update(removed)
        held.update(added)
        if opened is None:
            continue  # before ``since``: as stored
        state = derive(sorted((inputs[i][0] for i in held), key=order))
        for key in list(opened):
            if key not in state or (key, moment) in splits:
                value, start = opened.pop(key)
                out.append(Version(key, value, start, moment))
        for key, value in state.items():
            if key not in opened:
                opened[key] = (value, moment)
    if opened is None and since:
        opened = _seed(derive(sorted((inputs[i][0] for i in held), key=order)), since[1])
        if opened is None:
            return None
    assert opened is not None
    out.extend(Version(key, value, start, None) for key, (value, start) in opened.items())
    return out


def _seed(state: dict[K, V], stored: Mapping[K, datetime]) -> dict[K, tuple[V, datetime]] | None:
    """The versions open at a moment, their values folded and their starts as stored; None
    when the stored ones are not the fold's."""
    if state.keys() != stored.keys():
        return None
    return {key: (value, stored[key]) for key, value in state.items()}


# a version to insert: what it belongs to (slot, entity id), itself, the version whose
# vector it keeps
_Insert = tuple[Any, Version[K, V], uuid.UUID | None]


def _splits(rows: Iterable[tuple[K, datetime, datetime | None]]) -> set[tuple[K, datetime]]:
    ends = {(key, expired) for key, _, expired in rows if expired is not None}
    return {(key, created) for key, created, _ in rows if (key, created) in ends}


def _replay_stored(
    inputs: Sequence[tuple[X, datetime, datetime | None]],
    derive: Callable[[list[X]], dict[K, V]],
    order: Callable[[X], Any],
    stored: Sequence[Mapping[str, Any]],
    stored_key: Callable[[Mapping[str, Any]], K],
    start: datetime | None,
) -> tuple[Sequence[Mapping[str, Any]], list[Version[K, V]]]:
    """The stored versions a replay may change, and the versions it gives in their place.
    From ``start`` (the first moment the purged rows were held) when one is known: the
    history before it is unchanged, so the versions that ended before it are kept, and
    the rows are folded at the moments from it on."""
    if start is not None:
        later = [r for r in stored if not _ended_before(r, start)]
        open_then = [r for r in later if r["created_at"] < start and not _never_held(r)]
        held = {stored_key(r): r["created_at"] for r in open_then}
        if len(held) == len(open_then):  # one open version of each content, as written
            keyed = [(stored_key(r), r["created_at"], r["expired_at"]) for r in later]
            replayed = replay(inputs, derive, order, _splits(keyed), (start, held))
            if replayed is not None:
                return later, replayed
    keyed = [(stored_key(r), r["created_at"], r["expired_at"]) for r in stored]
    replayed = replay(inputs, derive, order, _splits(keyed))
    assert replayed is not None
    return stored, replayed


def _never_held(row: Mapping[str, Any]) -> bool:
    return row["expired_at"] is not None and row["expired_at"] <= row["created_at"]


def _ended_before(row: Mapping[str, Any], moment: datetime) -> bool:
    return not _never_held(row) and row["expired_at"] is not None and row["expired_at"] < moment


@dataclasses.dataclass
class _Plan(Generic[K, V]):
    """What a replay changes in one table: stored versions to delete (those still current
    are expired first, so that the new ones take their place), and versions to insert,
    each with what it belongs to (a slot, an entity) and the stored version whose vector
    it keeps."""

    delete: list[uuid.UUID] = dataclasses.field(default_factory=list[uuid.UUID])
    current: list[uuid.UUID] = dataclasses.field(default_factory=list[uuid.UUID])
    insert: list[_Insert[K, V]] = dataclasses.field(default_factory=list[_Insert[K, V]])

    def diff(
        self,
        owner: Any,
        stored: Sequence[Mapping[str, Any]],
        stored_key: Callable[[Mapping[str, Any]], K],
        replayed: Sequence[Version[K, V]],
        text: Callable[[V], str],
    ) -> None:
        """Keep what is unchanged, delete the rest, insert the new versions, each keeping
        the vector of a stored version of the same text (``text``) where one has it."""
        wanted = {(v.key, v.created_at, v.expired_at): v for v in replayed}
        vectors: dict[str, uuid.UUID] = {}
        for row in stored:
            if row["embedded"]:
                vectors.setdefault(row["text"], row["version_id"])
            found = (stored_key(row), row["created_at"], row["expired_at"])
            if found in wanted:
                del wanted[found]
                continue
            self.delete.append(row["version_id"])
            if row["expired_at"] is None:
                self.current.append(row["version_id"])
        self.insert.extend((owner, v, vectors.get(text(v.value))) for v in wanted.values())


async def _expire(w: Write, table: str, version_ids: Sequence[uuid.UUID]) -> None:
    await w.conn.execute(
        sql.SQL(
            "UPDATE timestone.{} SET expired_at = %s WHERE group_id = %s AND version_id = ANY(%s)"
        ).format(sql.Identifier(table)),
        (w.now, w.group_id, list(version_ids)),
    )


async def _write(
    w: Write,
    table: str,
    plan: _Plan[K, V],
    statements: tuple[sql.Composed, sql.Composed],
    params: Callable[[Write, Sequence[_Insert[K, V]]], dict[str, Any]],
    text: Callable[[V], str],
) -> int:
    """Apply ``plan``: expire the current versions it replaces, insert the new ones (their
    vectors copied from versions about to go, or embedded), delete the old. Returns rows
    deleted."""
    if plan.current:
        await _expire(w, table, plan.current)
    fresh = [i for i in plan.insert if i[2] is None]
    kept = [i for i in plan.insert if i[2] is not None]
    if fresh:
        vectors = await w.embed(text(v.value) for _, v, _ in fresh)
        values = params(w, fresh)
        values["embedding"] = VectorArray(
            [vectors[text(v.value)] for _, v, _ in fresh], w.embedder.dimension
        )
        await w.conn.execute(row_inserts(w.conn, statements[0]), values)
    if kept:
        values = params(w, kept)
        values["keep"] = UuidArray(keep for _, _, keep in kept)
        await w.conn.execute(row_inserts(w.conn, statements[1]), values)
    return await _delete(w, table, plan.delete) if plan.delete else 0


# -- facts ----------------------------------------------------------------------------

_SLOT_ASSERTIONS = (
    "SELECT id, episode_id, recorded_at, position, source_id, relation, target_id,"
    " cardinality, fact, attributes::text AS attributes, valid_at, invalid_at,"
    " created_at, expired_at FROM timestone.assertions"
    " JOIN unnest(%s::uuid[], %s::text[]) AS p(source_id, relation) USING (source_id, relation)"
    " WHERE group_id = %s"
)
_SLOT_FACTS = (
    "SELECT version_id, id, source_id, relation, target_id, cardinality, fact,"
    " fact AS text, attributes::text AS attributes, episodes, valid_at, invalid_at,"
    " created_at, expired_at, embedding IS NOT NULL AS embedded FROM timestone.facts"
    " JOIN unnest(%s::uuid[], %s::text[]) AS p(source_id, relation) USING (source_id, relation)"
    " WHERE group_id = %s"
)

_INSERT_FACTS = sql.SQL(
    "INSERT INTO timestone.facts (group_id, version_id, id, source_id, relation, target_id,"
    " cardinality, fact, attributes, episodes, valid_at, invalid_at, embedding, created_at,"
    " expired_at)"
    " SELECT %(group)s, x.version_id, x.id, x.source_id, x.relation, x.target_id,"
    " x.cardinality, x.fact, x.attributes::jsonb, (%(episodes)b::uuid[])[x.first:x.last],"
    " x.valid_at, x.invalid_at, {vector}, x.created_at, x.expired_at"
    " FROM unnest(%(version_id)b::uuid[], %(id)b::uuid[], %(source)b::uuid[],"
    " %(relation)b::text[], %(target)b::uuid[], %(cardinality)b::text[], %(fact)b::text[],"
    " %(attributes)b::text[], %(first)b::int[], %(last)b::int[], %(valid_at)b::timestamptz[],"
    " %(invalid_at)b::timestamptz[], %(created)b::timestamptz[], %(expired)b::timestamptz[],"
    " {column})"
    " AS x(version_id, id, source_id, relation, target_id, cardinality, fact, attributes,"
    " first, last, valid_at, invalid_at, created_at, expired_at, {name}){join}"
)
_INSERT_FACTS_EMBEDDED, _INSERT_FACTS_KEPT = vector_inserts(_INSERT_FACTS, "facts", "embedding")


def _fight(held: list[Assertion]) -> dict[tuple[object, ...], Period]:
    return {p.key(): p for p in compute_slot(held)} if held else {}


def _fact_params(
    w: Write, inserts: Sequence[tuple[Any, Version[tuple[object, ...], Period], uuid.UUID | None]]
) -> dict[str, Any]:
    episodes: list[uuid.UUID] = []
    first: list[int] = []
    last: list[int] = []
    for _, v, _ in inserts:
        first.append(len(episodes) + 1)
        episodes.extend(v.value.episodes)
        last.append(len(episodes))
    periods = [v.value for _, v, _ in inserts]
    return {
        "group": w.group_id,
        "episodes": UuidArray(episodes),
        "version_id": UuidArray(new_ids(len(inserts))),
        "id": UuidArray(p.id for p in periods),
        "source": UuidArray(slot[0] for slot, _, _ in inserts),
        "relation": TextArray(slot[1] for slot, _, _ in inserts),
        "target": UuidArray(p.target_id for p in periods),
        "cardinality": TextArray(slot[2] for slot, _, _ in inserts),
        "fact": TextArray(p.fact for p in periods),
        "attributes": TextArray(json_text(p.attributes) for p in periods),
        "first": IntArray(first),
        "last": IntArray(last),
        "valid_at": TimeArray(p.valid_at for p in periods),
        "invalid_at": TimeArray(p.invalid_at for p in periods),
        "created": TimeArray(v.created_at for _, v, _ in inserts),
        "expired": TimeArray(v.expired_at for _, v, _ in inserts),
    }


def _assertion_order(a: Assertion) -> tuple[datetime, int, uuid.UUID]:
    return (a.recorded_at, a.position, a.id)


def _sentence(p: Period) -> str:
    return p.fact


async def _replay_slots(
    w: Write, episode_id: uuid.UUID, changed: Mapping[tuple[Any, ...], datetime]
) -> int:
    """Delete the episode's assertions and replay the slots it asserted in (or that a fact
    version naming it is in), and those ``changed`` from the moment given. Returns the
    rows deleted."""
    cur = await w.conn.execute(
        "SELECT DISTINCT source_id, relation, target_id, cardinality FROM timestone.assertions"
        " WHERE group_id = %s AND episode_id = %s"
        " UNION SELECT DISTINCT source_id, relation, target_id, cardinality FROM timestone.facts"
        " WHERE group_id = %s AND %s = ANY(episodes)",
        (w.group_id, episode_id, w.group_id, episode_id),
    )
    touched = {_slot(row) for row in await cur.fetchall()} | set(changed)
    cur = await w.conn.execute(
        "DELETE FROM timestone.assertions WHERE group_id = %s AND episode_id = %s"
        " RETURNING source_id, relation, target_id, cardinality, created_at",
        (w.group_id, episode_id),
    )
    starts = dict(changed)
    for row in await cur.fetchall():
        _earliest(starts, _slot(row), row["created_at"])
    erased = cur.rowcount
    if not touched:
        return erased
    pairs = sorted({(key[0], key[1]) for key in touched})
    sources = [p[0] for p in pairs]
    relations = [p[1] for p in pairs]
    assertions: dict[tuple[Any, ...], list[tuple[Assertion, datetime, datetime | None]]] = {}
    cur = await w.conn.execute(_SLOT_ASSERTIONS, (sources, relations, w.group_id))
    for row in await cur.fetchall():
        key = _slot(row)
        if key in touched:
            assertions.setdefault(key, []).append(
                (assertion_from_row(row), row["created_at"], row["expired_at"])
            )
    facts: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    cur = await w.conn.execute(_SLOT_FACTS, (sources, relations, w.group_id))
    for row in await cur.fetchall():
        key = _slot(row)
        if key in touched:
            facts.setdefault(key, []).append(row)
    plan: _Plan[tuple[object, ...], Period] = _Plan()
    for key in touched:
        stored, replayed = _replay_stored(
            assertions.get(key, []),
            _fight,
            _assertion_order,
            facts.get(key, []),
            version_key,
            starts.get(key),
        )
        plan.diff(key, stored, version_key, replayed, _sentence)
    erased += await _write(
        w, "facts", plan, (_INSERT_FACTS_EMBEDDED, _INSERT_FACTS_KEPT), _fact_params, _sentence
    )
    return erased


# -- entities -------------------------------------------------------------------------

_ENTITY_MENTIONS = (
    "SELECT id, episode_id, entity_id, name, labels, attributes::text AS attributes, summary,"
    " position, recorded_at, created_at, expired_at FROM timestone.mentions"
    " WHERE group_id = %s AND entity_id = ANY(%s)"
)
_ENTITY_VERSIONS = (
    "SELECT version_id, id, name, name AS text, entity_type, labels,"
    " attributes::text AS attributes, summary, created_at, expired_at,"
    " name_embedding IS NOT NULL AS embedded FROM timestone.entities"
    " WHERE group_id = %s AND id = ANY(%s)"
)
_INSERT_ENTITIES = sql.SQL(
    "INSERT INTO timestone.entities (group_id, version_id, id, name, norm_name, fold_name,"
    " entity_type, labels, attributes, summary, name_embedding, created_at, expired_at)"
    " SELECT %(group)s, x.version_id, x.id, x.name, x.norm_name, x.fold_name, x.entity_type,"
    " (%(labels)b::text[])[x.first:x.last], x.attributes::jsonb, x.summary, {vector},"
    " x.created_at, x.expired_at"
    " FROM unnest(%(version_id)b::uuid[], %(id)b::uuid[], %(name)b::text[],"
    " %(norm_name)b::text[], %(fold_name)b::text[], %(entity_type)b::text[], %(first)b::int[],"
    " %(last)b::int[], %(attributes)b::text[], %(summary)b::text[],"
    " %(created)b::timestamptz[], %(expired)b::timestamptz[], {column})"
    " AS x(version_id, id, name, norm_name, fold_name, entity_type, first, last, attributes,"
    " summary, created_at, expired_at, {name}){join}"
)
_INSERT_ENTITIES_EMBEDDED, _INSERT_ENTITIES_KEPT = vector_inserts(
    _INSERT_ENTITIES, "entities", "name_embedding"
)

# an entity's state as a comparable key: name, type, labels, attributes, explicit summary
_EntityKey = tuple[str, str, tuple[str, ...], str, str]


def _entity_key(row: Mapping[str, Any]) -> _EntityKey:
    return (
        row["name"],
        row["entity_type"],
        tuple(row["labels"]),
        attributes_key(json_object(row["attributes"])),
        row["summary"],
    )


def _fold(held: list[dict[str, Any]]) -> dict[_EntityKey, EntityState]:
    if not held:
        return {}
    s = entity_state(held)
    return {(s.name, s.entity_type, s.labels, attributes_key(s.attributes), s.summary): s}


def _mention_order(m: Mapping[str, Any]) -> tuple[datetime, int, uuid.UUID]:
    return (m["recorded_at"], m["position"], m["id"])


def _name(s: EntityState) -> str:
    return s.name


def _entity_params(
    w: Write, inserts: Sequence[tuple[Any, Version[_EntityKey, EntityState], uuid.UUID | None]]
) -> dict[str, Any]:
    labels: list[str] = []
    first: list[int] = []
    last: list[int] = []
    for _, v, _ in inserts:
        first.append(len(labels) + 1)
        labels.extend(v.value.labels)
        last.append(len(labels))
    states = [v.value for _, v, _ in inserts]
    return {
        "group": w.group_id,
        "labels": TextArray(labels),
        "version_id": UuidArray(new_ids(len(inserts))),
        "id": UuidArray(ident for ident, _, _ in inserts),
        "name": TextArray(s.name for s in states),
        "norm_name": TextArray(normalize(s.name) for s in states),
        "fold_name": TextArray(fold(s.name) for s in states),
        "entity_type": TextArray(s.entity_type for s in states),
        "first": IntArray(first),
        "last": IntArray(last),
        "attributes": TextArray(json_text(s.attributes) for s in states),
        "summary": TextArray(s.summary for s in states),
        "created": TimeArray(v.created_at for _, v, _ in inserts),
        "expired": TimeArray(v.expired_at for _, v, _ in inserts),
    }


async def _replay_entities(
    w: Write, episode_id: uuid.UUID, changed: Mapping[uuid.UUID, datetime]
) -> int:
    """Delete the episode's mentions and replay the entities they were of, and those
    ``changed`` from the moment given. Returns the rows deleted."""
    cur = await w.conn.execute(
        "DELETE FROM timestone.mentions WHERE group_id = %s AND episode_id = %s"
        " RETURNING entity_id, created_at",
        (w.group_id, episode_id),
    )
    rows = await cur.fetchall()
    erased = len(rows)
    starts = dict(changed)
    for row in rows:
        _earliest(starts, row["entity_id"], row["created_at"])
    ids = sorted(starts)
    if not ids:
        return erased
    mentions: dict[uuid.UUID, list[tuple[dict[str, Any], datetime, datetime | None]]] = {}
    cur = await w.conn.execute(_ENTITY_MENTIONS, (w.group_id, ids))
    for row in await cur.fetchall():
        row["attributes"] = json_object(row["attributes"])
        mentions.setdefault(row["entity_id"], []).append(
            (row, row["created_at"], row["expired_at"])
        )
    versions: dict[uuid.UUID, list[dict[str, Any]]] = {}
    cur = await w.conn.execute(_ENTITY_VERSIONS, (w.group_id, ids))
    for row in await cur.fetchall():
        versions.setdefault(row["id"], []).append(row)
    plan: _Plan[_EntityKey, EntityState] = _Plan()
    for ident in ids:
        stored, replayed = _replay_stored(
            mentions.get(ident, []),
            _fold,
            _mention_order,
            versions.get(ident, []),
            _entity_key,
            starts[ident],
        )
        plan.diff(ident, stored, _entity_key, replayed, _name)
    erased += await _write(
        w,
        "entities",
        plan,
        (_INSERT_ENTITIES_EMBEDDED, _INSERT_ENTITIES_KEPT),
        _entity_params,
        _name,
    )
    return erased


async def erase_episode(w: Write, episode_id: uuid.UUID) -> tuple[int, list[uuid.UUID]]:
    """Delete every version of the episode, its mentions and assertions, and replay the
    history of the slots and entities they fed. The episode must be retracted already.
    A chunk of a document's version leaves the chunks that version retracted held wherever
    it alone held the version (the last chunk: from the version's write until it ended).
    Returns the rows deleted and the entities it mentioned (and those of the chunks held
    again)."""
    cur = await w.conn.execute(
        "SELECT DISTINCT entity_id FROM timestone.mentions WHERE group_id = %s AND episode_id = %s",
        (w.group_id, episode_id),
    )
    mentioned = [row["entity_id"] for row in await cur.fetchall()]
    slots, entities = await hold_what_the_version_retracted(w, episode_id)
    erased = await _replay_slots(w, episode_id, slots)
    erased += await _replay_entities(w, episode_id, entities)
    cur = await w.conn.execute(
        "DELETE FROM timestone.episodes WHERE group_id = %s AND id = %s",
        (w.group_id, episode_id),
    )
    erased += cur.rowcount
    # the entities whose history changed with the version held again (and those folded
    # into theirs): their communities of the past go with the episode's
    return erased, list(dict.fromkeys([*mentioned, *entities]))

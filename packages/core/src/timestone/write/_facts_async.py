"""Facts: assertions in, versioned facts out, by the date fight; and fact reads.

Facts are a function of the current assertions, computed per slot by
``timestone.write._date_fight.compute_slot``. A write recomputes the slots it touched
and diffs the result against the current fact versions: an unchanged fact is
left alone, a changed one is expired and a new version inserted, with the
same stable id. Nothing is deleted.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, LiteralString

from psycopg import sql
from psycopg.rows import tuple_row

from .._arrays import BoolArray, IntArray, TextArray, TimeArray, UuidArray
from .._names import normalize
from .._records import Fact
from .._vectors import VectorArray
from ..db._distributed_async import HIDDEN_GROUP, ROUTED_GROUP, routed, row_inserts
from ._date_fight import Assertion, Period, attributes_key, compute_slot, supporting
from ._ids import new_ids
from ._transaction_async import Write, as_stored, json_object, json_text, vector_inserts

__all__ = [
    "FACT_SELECT",
    "Asserted",
    "AssertionInsert",
    "Slot",
    "SlotChanges",
    "SlotPlan",
    "SlotReads",
    "asserted_spans",
    "assertion_from_row",
    "fact_from_row",
    "fight_slots",
    "held_clause",
    "insert_assertions",
    "read_facts",
    "read_slots",
    "recompute_slots",
    "supporting_assertions",
    "version_key",
    "write_slots",
]

# (source, relation): every assertion of the pair; (source, relation, target): the
# cardinality-many slot of that target alone (and any cardinality-one assertions of the pair)
Slot = tuple[uuid.UUID, str] | tuple[uuid.UUID, str, uuid.UUID]


@dataclasses.dataclass(slots=True)  # made per fact: not frozen, whose __init__ costs 2.6x
class AssertionInsert:
    """An assertion as a write inserts it (``timestone.models.AssertionRow`` reads the table)."""

    source_id: uuid.UUID
    relation: str
    target_id: uuid.UUID
    cardinality: str
    fact: str
    attributes: Mapping[str, Any]
    valid_at: datetime
    invalid_at: datetime | None


@dataclasses.dataclass(frozen=True, slots=True)
class Asserted:
    """The assertions one episode just wrote, as the date fight reads them: the recomputation
    takes them from here rather than reading them back."""

    episode_id: uuid.UUID
    by_slot: dict[tuple[Any, ...], list[Assertion]]


_INSERT_ASSERTIONS = (
    "INSERT INTO timestone.assertions (group_id, id, episode_id, position, source_id,"
    " relation, target_id, cardinality, fact, attributes, valid_at, invalid_at,"
    " recorded_at, created_at)"
    " SELECT %(group)s, x.id, %(episode)s, x.position, x.source_id, x.relation, x.target_id,"
    " x.cardinality, x.fact, x.attributes::jsonb, x.valid_at, x.invalid_at, %(now)s, %(now)s"
    " FROM unnest(%(id)b::uuid[], %(position)b::int[], %(source)b::uuid[], %(relation)b::text[],"
    " %(target)b::uuid[], %(cardinality)b::text[], %(fact)b::text[], %(attributes)b::text[],"
    " %(valid_at)b::timestamptz[], %(invalid_at)b::timestamptz[])"
    " AS x(id, position, source_id, relation, target_id, cardinality, fact, attributes,"
    " valid_at, invalid_at)"
)


async def insert_assertions(
    w: Write, episode_id: uuid.UUID, rows: Sequence[AssertionInsert]
) -> Asserted:
    """One statement for every row. Returns the rows as the database now holds them (JSON and
    times normalized the way a read would give them back)."""
    tz = w.now.tzinfo
    ids = new_ids(len(rows))
    attributes = [json_text(r.attributes) for r in rows]
    by_slot: dict[tuple[Any, ...], list[Assertion]] = {}
    for position, (r, ident, text) in enumerate(zip(rows, ids, attributes, strict=True)):
        key = _slot_key(r.cardinality, r.source_id, r.relation, r.target_id)
        by_slot.setdefault(key, []).append(
            Assertion(
                id=ident,
                episode_id=episode_id,
                recorded_at=w.now,
                position=position,
                target_id=r.target_id,
                valid_at=r.valid_at.astimezone(tz),
                invalid_at=r.invalid_at.astimezone(tz) if r.invalid_at is not None else None,
                fact=r.fact,
                attributes=as_stored(text),
            )
        )
    if rows:
        await w.conn.execute(
            row_inserts(w.conn, _INSERT_ASSERTIONS),
            {
                "group": w.group_id,
                "episode": episode_id,
                "now": w.now,
                "id": UuidArray(ids),
                "position": IntArray(range(len(rows))),
                "source": UuidArray(r.source_id for r in rows),
                "relation": TextArray(r.relation for r in rows),
                "target": UuidArray(r.target_id for r in rows),
                "cardinality": TextArray(r.cardinality for r in rows),
                "fact": TextArray(r.fact for r in rows),
                "attributes": TextArray(attributes),
                "valid_at": TimeArray(r.valid_at for r in rows),
                "invalid_at": TimeArray(r.invalid_at for r in rows),
            },
        )
    return Asserted(episode_id=episode_id, by_slot=by_slot)


@dataclasses.dataclass
class SlotChanges:
    """What a recomputation did: the version ids it expired and inserted, by fact id.

    ``written``: each inserted version as (version id, slot key, period), in insertion order.
    """

    expired: dict[uuid.UUID, dict[str, Any]] = dataclasses.field(
        default_factory=dict[uuid.UUID, dict[str, Any]]
    )
    inserted: dict[uuid.UUID, uuid.UUID] = dataclasses.field(
        default_factory=dict[uuid.UUID, uuid.UUID]
    )
    touched_entities: set[uuid.UUID] = dataclasses.field(default_factory=set[uuid.UUID])
    entity_counts: tuple[int, int] = (0, 0)
    written: list[tuple[uuid.UUID, tuple[Any, ...], Period]] = dataclasses.field(
        default_factory=list[tuple[uuid.UUID, tuple[Any, ...], Period]]
    )


def _slot_key(
    cardinality: str, source: uuid.UUID, relation: str, target: uuid.UUID
) -> tuple[Any, ...]:
    return (source, relation) if cardinality == "one" else (source, relation, target)


def assertion_from_row(row: Mapping[str, Any]) -> Assertion:
    """An assertion as the date fight reads it, from a stored row (attributes as text)."""
    return Assertion(
        id=row["id"],
        episode_id=row["episode_id"],
        recorded_at=row["recorded_at"],
        position=row["position"],
        target_id=row["target_id"],
        valid_at=row["valid_at"],
        invalid_at=row["invalid_at"],
        fact=row["fact"],
        attributes=json_object(row["attributes"]),
    )


def version_key(row: Mapping[str, Any]) -> tuple[object, ...]:
    """What a stored fact version holds, as ``Period.key`` compares it."""
    return (
        row["id"],
        row["target_id"],
        row["valid_at"],
        row["invalid_at"],
        row["fact"],
        attributes_key(json_object(row["attributes"])),
        tuple(row["episodes"]),
    )


_INSERT_FACTS = sql.SQL(
    "INSERT INTO timestone.facts (group_id, version_id, id, source_id, relation, target_id,"
    " cardinality, fact, attributes, episodes, valid_at, invalid_at, embedding, created_at)"
    " SELECT %(group)s, x.version_id, x.id, x.source_id, x.relation, x.target_id,"
    " x.cardinality, x.fact, x.attributes::jsonb, (%(episodes)b::uuid[])[x.first:x.last],"
    " x.valid_at, x.invalid_at, {vector}, %(now)s"
    " FROM unnest(%(version_id)b::uuid[], %(id)b::uuid[], %(source)b::uuid[],"
    " %(relation)b::text[], %(target)b::uuid[], %(cardinality)b::text[], %(fact)b::text[],"
    " %(attributes)b::text[], %(first)b::int[], %(last)b::int[], %(valid_at)b::timestamptz[],"
    " %(invalid_at)b::timestamptz[], {column})"
    " AS x(version_id, id, source_id, relation, target_id, cardinality, fact, attributes,"
    " first, last, valid_at, invalid_at, {name}){join}"
)
# new vectors, or each vector copied from the version a row replaces (text unchanged)
_INSERT_FACTS_EMBEDDED, _INSERT_FACTS_KEPT = vector_inserts(_INSERT_FACTS, "facts", "embedding")


@dataclasses.dataclass
class SlotReads:
    """What the date fight over some slots reads: their assertions (other episodes'), by
    slot key, and their current fact versions as rows; ``until``, for a slot read in a
    window that ends before its last period, where the window ends (``read_slots``)."""

    whole: set[tuple[uuid.UUID, str]]
    narrow: set[tuple[uuid.UUID, str, uuid.UUID]]
    assertions: dict[tuple[Any, ...], list[Assertion]]
    fact_rows: list[dict[str, Any]]
    until: dict[tuple[Any, ...], datetime]


@dataclasses.dataclass
class SlotPlan:
    """The outcome of a date fight, before it is written: ``changes`` knows what it expires
    and the entities it touches; ``inserts`` are the versions to write, as (slot key,
    cardinality, period, version whose vector it keeps)."""

    changes: SlotChanges
    inserts: list[tuple[tuple[Any, ...], str, Period, uuid.UUID | None]]


async def recompute_slots(
    w: Write,
    slots: Iterable[Slot],
    asserted: Asserted | None = None,
    within: Mapping[Slot, tuple[datetime, datetime]] | None = None,
    only_one: Collection[Slot] = (),
) -> SlotChanges:
    """Make the current facts of ``slots`` equal the date fight over their current assertions.

    ``asserted``: assertions this write just inserted, taken as given rather than read back.
    ``within``, ``only_one``: the dates a write changed in cardinality-one slots, and the
    pairs it changed only such rows of (``read_slots``).
    A three-part slot reads one target's cardinality-many slot, not every target of the
    pair (a busy entity's other facts of the relation stay unread); the pair's
    cardinality-one assertions, if an earlier ontology made any, are read whole.
    """
    reads = await read_slots(w, slots, asserted.episode_id if asserted else None, within, only_one)
    return await write_slots(w, fight_slots(reads, asserted))


async def recompute_retracted(w: Write, retracted: Iterable[Mapping[str, Any]]) -> SlotChanges:
    """``recompute_slots`` after assertions were expired: ``retracted`` holds each one's
    ``source_id``, ``relation``, ``cardinality`` and ``valid_at``. A cardinality-one timeline
    is read around the dates retracted from it, not whole, and a pair only cardinality-one
    rows were retracted from reads none of its cardinality-many ones."""
    rows = list(retracted)
    slots = {(row["source_id"], row["relation"]) for row in rows}
    spans = asserted_spans(
        ((row["source_id"], row["relation"]), row["valid_at"])
        for row in rows
        if row["cardinality"] == "one"
    )
    many = {(row["source_id"], row["relation"]) for row in rows if row["cardinality"] != "one"}
    return await recompute_slots(w, slots, within=spans, only_one=slots - many)


async def supporting_assertions(w: Write, fact_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """The current assertions behind the current facts ``fact_ids``: those the date fight
    over each one's slot made that fact of (``supporting``), not every assertion of its
    source, relation and target (another period of the same target is another fact)."""
    cur = await w.conn.execute(
        "SELECT DISTINCT id, source_id, relation, target_id, cardinality FROM timestone.facts"
        " WHERE group_id = %s AND id = ANY(%s) AND expired_at IS NULL",
        (w.group_id, list(fact_ids)),
    )
    named = await cur.fetchall()
    wanted = {row["id"] for row in named}
    slots = {
        _slot_key(row["cardinality"], row["source_id"], row["relation"], row["target_id"])
        for row in named
    }
    reads = await read_slots(w, slots)
    return [
        assertion
        for held in reads.assertions.values()
        for fact, behind in supporting(held).items()
        if fact in wanted
        for assertion in behind
    ]


def asserted_spans(said: Iterable[tuple[Slot, datetime]]) -> dict[Slot, tuple[datetime, datetime]]:
    """The earliest and latest ``valid_at`` said of each slot (``read_slots``'s ``within``)."""
    out: dict[Slot, tuple[datetime, datetime]] = {}
    for key, valid_at in said:
        found = out.get(key)
        if found is None:
            out[key] = (valid_at, valid_at)
        elif valid_at < found[0]:
            out[key] = (valid_at, found[1])
        elif valid_at > found[1]:
            out[key] = (found[0], valid_at)
    return out


# Per cardinality-one slot given the earliest and latest ``valid_at`` a write asserts
# into it (or an episode's removal retracts from it): the window of the timeline the
# write can change, read instead of the whole slot. It starts at the last period that
# starts before the earliest date (``since``; NULL: the slot's first period), and ends
# before the start of the second period that starts after the latest date (``until``;
# NULL: the slot's last period). A period starts where an assertion wins its date, so no
# assertion earlier than ``since`` holds past it; the period before the earliest date is
# read because a new winner on its end can merge with it, the period after the latest
# date because the last period the write changes can merge with it. Neither can change
# beyond them: their starts and targets stay, and so their neighbours'.
_WINDOWS = (
    "SELECT (SELECT max(y.valid_at) FROM timestone.facts AS y"
    "   WHERE y.group_id = (SELECT %(g)s::text)"
    "   AND y.source_id = s.source_id AND y.relation = s.relation"
    "   AND y.expired_at IS NULL AND y.cardinality = 'one' AND y.valid_at < s.earliest)"
    " AS since,"
    # the second period to start after the latest date (the current versions of a
    # cardinality-one slot do not overlap: no two start together)
    " (SELECT z.valid_at FROM timestone.facts AS z"
    "   WHERE z.group_id = (SELECT %(g)s::text)"
    "   AND z.source_id = s.source_id AND z.relation = s.relation"
    "   AND z.expired_at IS NULL AND z.cardinality = 'one' AND z.valid_at > s.latest"
    "   ORDER BY z.valid_at OFFSET 1 LIMIT 1) AS until"
    " FROM unnest(%(sources)b::uuid[], %(relations)b::text[], %(earliest)b::timestamptz[],"
    "   %(latest)b::timestamptz[]) WITH ORDINALITY AS s(source_id, relation, earliest, latest, n)"
    " ORDER BY s.n"
)


# What a slot's fight reads, per slot. A pair (no target): its cardinality-one rows in the
# window (``since`` to ``until``: a range of the index on the slot and ``valid_at``), and,
# unless the write left them alone (``others``), its other rows. A three-part slot: the
# pair's rows of its target, and the pair's cardinality-one rows (an earlier ontology's),
# in one pass over the pair. The bounds are CASE expressions, not coalesce: under row
# level security the planner keeps a qual it cannot prove leakproof (coalesce, for one)
# out of an index scan, and read the table whole.
_SLOTS_TEXT: LiteralString = (
    " FROM unnest(%(sources)b::uuid[], %(relations)b::text[], %(targets)b::uuid[],"
    "   %(since)b::timestamptz[], %(until)b::timestamptz[], %(others)b::bool[])"
    "   AS s(source_id, relation, target_id, since, until, others)"
    " CROSS JOIN LATERAL ("
    "  SELECT * FROM timestone.{table} AS x WHERE s.target_id IS NULL"
    "   AND x.group_id = (SELECT %(g)s::text)"
    "   AND x.source_id = s.source_id AND x.relation = s.relation AND x.expired_at IS NULL"
    "   AND x.cardinality = 'one'"
    "   AND x.valid_at >= CASE WHEN s.since IS NULL THEN '-infinity' ELSE s.since END"
    "   AND x.valid_at {before} CASE WHEN s.until IS NULL THEN 'infinity' ELSE s.until END"
    "  UNION ALL"
    "  SELECT * FROM timestone.{table} AS x WHERE (s.target_id IS NOT NULL OR s.others)"
    "   AND x.group_id = (SELECT %(g)s::text)"
    "   AND x.source_id = s.source_id AND x.relation = s.relation"
    "   AND x.expired_at IS NULL AND CASE WHEN s.target_id IS NULL THEN x.cardinality <> 'one'"
    "    ELSE x.cardinality = 'one' OR x.target_id = s.target_id END"
    " ) AS {alias}"
)


def _slot_reads(slots: sql.SQL) -> tuple[sql.Composed, sql.Composed]:
    """The two reads of a slot's fight (assertions, then facts) over ``slots``."""
    return _SLOT_ASSERTIONS_OF.format(
        # the winners on ``until`` too: they end the window's last period
        slots=slots.format(
            table=sql.Identifier("assertions"), before=sql.SQL("<="), alias=sql.Identifier("a")
        )
    ), _SLOT_FACTS_OF.format(
        slots=slots.format(
            table=sql.Identifier("facts"), before=sql.SQL("<"), alias=sql.Identifier("f")
        )
    )


_SLOT_ASSERTIONS_OF = sql.SQL(
    "SELECT a.id, a.episode_id, a.recorded_at, a.position, a.source_id, a.relation,"
    " a.target_id, a.cardinality, a.fact, a.attributes::text AS attributes, a.valid_at,"
    " a.invalid_at{slots} WHERE a.episode_id IS DISTINCT FROM %(episode)s::uuid"
)
# vectors stay in the database: a kept one is copied there by the insert
_SLOT_FACTS_OF = sql.SQL(
    "SELECT f.version_id, f.id, f.source_id, f.relation, f.target_id, f.cardinality,"
    " f.fact, f.attributes::text AS attributes, f.episodes, f.valid_at, f.invalid_at,"
    " f.embedding IS NOT NULL AS embedded{slots}"
)
_SLOT_ASSERTIONS, _SLOT_FACTS = _READS = _slot_reads(sql.SQL(_SLOTS_TEXT))
# on a distributed database (``_distributed.routed``): the group's value named
_READS_ROUTED = _slot_reads(sql.SQL(_SLOTS_TEXT.replace(HIDDEN_GROUP, ROUTED_GROUP)))
_WINDOWS_ROUTED = _WINDOWS.replace(HIDDEN_GROUP, ROUTED_GROUP)


async def read_slots(
    w: Write,
    slots: Iterable[Slot],
    episode_id: uuid.UUID | None = None,
    within: Mapping[Slot, tuple[datetime, datetime]] | None = None,
    only_one: Collection[Slot] = (),
) -> SlotReads:
    """The current assertions of ``slots`` (but those of ``episode_id``, which the write
    gives to ``fight_slots``) and their current fact versions. Neither read depends on
    the episode's own rows: a write may read before it inserts them.

    ``within``: for cardinality-one slots, the earliest and latest ``valid_at`` the write
    asserts into each (or retracts from it). Such a slot is read in the window of its
    timeline those dates can change (``_WINDOWS``): a write into a timeline of thousands
    of periods, at its end or in its middle, costs what the few periods around its dates
    cost. The fight over the window makes the same periods there as the fight over the
    whole slot, and the periods outside it are neither read nor changed.

    ``only_one``: pairs the write changed only cardinality-one rows of: their
    cardinality-many rows (an earlier ontology's), which such a write cannot change, are
    not read (nor would they be found but by reading every row of the pair)."""
    whole = {(s[0], s[1]) for s in slots if len(s) == 2}
    narrow = {s for s in slots if len(s) == 3 and (s[0], s[1]) not in whole}
    reads = SlotReads(whole=whole, narrow=narrow, assertions={}, fact_rows=[], until={})
    wanted: list[Slot] = [*sorted(whole), *sorted(narrow)]
    if not wanted:
        return reads
    sources = UuidArray(s[0] for s in wanted)
    relations = TextArray(s[1] for s in wanted)
    targets = UuidArray(s[2] if len(s) == 3 else None for s in wanted)
    spans = [within.get(s) if within and len(s) == 2 else None for s in wanted]
    # binary: ids, times and arrays come back without text to parse
    on_citus = routed(w.conn)
    slot_assertions, slot_facts = _READS_ROUTED if on_citus else _READS
    async with w.conn.cursor(binary=True) as bcur:
        sinces: list[datetime | None] = [None] * len(wanted)
        untils: list[datetime | None] = [None] * len(wanted)
        if any(span is not None for span in spans):
            await bcur.execute(
                _WINDOWS_ROUTED if on_citus else _WINDOWS,
                {
                    "g": w.group_id,
                    "sources": sources,
                    "relations": relations,
                    # a slot without dates gets none: NULL bounds, read whole
                    "earliest": TimeArray(span[0] if span else None for span in spans),
                    "latest": TimeArray(span[1] if span else None for span in spans),
                },
            )
            for i, row in enumerate(await bcur.fetchall()):
                if spans[i] is not None:
                    sinces[i], untils[i] = row["since"], row["until"]
                    if row["until"] is not None:
                        reads.until[wanted[i]] = row["until"]
        window = {
            "g": w.group_id,
            "sources": sources,
            "relations": relations,
            "targets": targets,
            "since": TimeArray(sinces),
            "until": TimeArray(untils),
            "others": BoolArray(not (len(s) == 2 and s in only_one) for s in wanted),
        }
        await bcur.execute(slot_assertions, {**window, "episode": episode_id})
        seen: set[uuid.UUID] = set()  # a cardinality-one row matches each narrow slot of its pair
        for row in await bcur.fetchall():
            if row["id"] in seen:
                continue
            seen.add(row["id"])
            key = _slot_key(row["cardinality"], row["source_id"], row["relation"], row["target_id"])
            reads.assertions.setdefault(key, []).append(assertion_from_row(row))
        await bcur.execute(slot_facts, window)
        reads.fact_rows = list({row["version_id"]: row for row in await bcur.fetchall()}.values())
    return reads


def fight_slots(reads: SlotReads, asserted: Asserted | None = None) -> SlotPlan:
    """The date fight over what ``read_slots`` read and the write's own ``asserted`` (after
    the older assertions, as a read would list them), diffed against the current versions.
    No I/O."""
    whole, narrow = reads.whole, reads.narrow
    assertions = reads.assertions
    if asserted is not None:
        pairs = whole | {(s[0], s[1]) for s in narrow}
        for key, found in asserted.by_slot.items():
            if (key[0], key[1]) in pairs and (
                len(key) == 2 or (key[0], key[1]) in whole or key in narrow
            ):
                assertions.setdefault(key, []).extend(found)
    existing: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in reads.fact_rows:
        key = _slot_key(row["cardinality"], row["source_id"], row["relation"], row["target_id"])
        existing.setdefault(key, []).append(row)

    changes = SlotChanges()
    inserts: list[tuple[tuple[Any, ...], str, Period, uuid.UUID | None]] = []
    for key in set(assertions) | set(existing):
        cardinality = "one" if len(key) == 2 else "many"
        said = assertions.get(key, [])
        if len(said) == 1 and key not in existing:
            # a new slot said once (most of a bulk load): its one period, nothing to diff
            period = compute_slot(said)[0]
            inserts.append((key, cardinality, period, None))
            changes.touched_entities.update((key[0], period.target_id))
            continue
        periods = compute_slot(said)
        until = reads.until.get(key)
        if until is not None:
            # read in a window: the periods from its end on are outside it, unchanged
            periods = [p for p in periods if p.valid_at < until]
        by_key = {p.key(): p for p in periods}
        old_by_id = {row["id"]: row for row in existing.get(key, [])}
        for row in existing.get(key, []):
            row_key = version_key(row)
            if row_key in by_key:
                del by_key[row_key]
            else:
                changes.expired[row["id"]] = row
                changes.touched_entities.update((row["source_id"], row["target_id"]))
        for period in by_key.values():
            old = old_by_id.get(period.id)
            keep = (
                old["version_id"]
                if old is not None and old["fact"] == period.fact and old["embedded"]
                else None
            )
            inserts.append((key, cardinality, period, keep))
            changes.touched_entities.update((key[0], period.target_id))
    return SlotPlan(changes=changes, inserts=inserts)


async def write_slots(w: Write, plan: SlotPlan) -> SlotChanges:
    """Expire the versions the fight replaced and insert the new ones (no result is read:
    in a pipeline the statements run while the write goes on)."""
    changes, inserts = plan.changes, plan.inserts
    if changes.expired:
        await w.conn.execute(
            "UPDATE timestone.facts SET expired_at = %s"
            " WHERE group_id = %s AND version_id = ANY(%b::uuid[])",
            (w.now, w.group_id, [row["version_id"] for row in changes.expired.values()]),
        )
    fresh = [i for i in inserts if i[3] is None]
    kept = [i for i in inserts if i[3] is not None]
    if fresh:
        vectors = await w.embed(p.fact for _, _, p, _ in fresh)
        params = _fact_params(w, changes, fresh)
        params["embedding"] = VectorArray(
            [vectors[p.fact] for _, _, p, _ in fresh], w.embedder.dimension
        )
        await w.conn.execute(row_inserts(w.conn, _INSERT_FACTS_EMBEDDED), params)
    if kept:
        params = _fact_params(w, changes, kept)
        params["keep"] = UuidArray(keep for _, _, _, keep in kept)
        await w.conn.execute(row_inserts(w.conn, _INSERT_FACTS_KEPT), params)
    return changes


def _fact_params(
    w: Write,
    changes: SlotChanges,
    inserts: Sequence[tuple[tuple[Any, ...], str, Period, uuid.UUID | None]],
) -> dict[str, Any]:
    """The columns of ``inserts`` as arrays; each row's episodes are a slice of one array."""
    version_ids: list[uuid.UUID] = []
    episodes: list[uuid.UUID] = []
    first: list[int] = []
    last: list[int] = []
    for (key, _, period, _), version_id in zip(inserts, new_ids(len(inserts)), strict=True):
        version_ids.append(version_id)
        changes.inserted[period.id] = version_id
        changes.written.append((version_id, key, period))
        first.append(len(episodes) + 1)
        episodes.extend(period.episodes)
        last.append(len(episodes))
    return {
        "group": w.group_id,
        "now": w.now,
        "episodes": UuidArray(episodes),
        "version_id": UuidArray(version_ids),
        "id": UuidArray(p.id for _, _, p, _ in inserts),
        "source": UuidArray(key[0] for key, _, _, _ in inserts),
        "relation": TextArray(key[1] for key, _, _, _ in inserts),
        "target": UuidArray(p.target_id for _, _, p, _ in inserts),
        "cardinality": TextArray(c for _, c, _, _ in inserts),
        "fact": TextArray(p.fact for _, _, p, _ in inserts),
        "attributes": TextArray(json_text(p.attributes) for _, _, p, _ in inserts),
        "first": IntArray(first),
        "last": IntArray(last),
        "valid_at": TimeArray(p.valid_at for _, _, p, _ in inserts),
        "invalid_at": TimeArray(p.invalid_at for _, _, p, _ in inserts),
    }


# The columns in the order of ``Fact``'s fields (``read_facts`` builds it from the tuple).
FACT_SELECT = sql.SQL(
    "SELECT f.id, f.version_id, f.group_id, f.source_id, s.name AS source, f.relation,"
    " f.target_id, t.name AS target, f.fact, f.valid_at, f.invalid_at, f.created_at,"
    " f.expired_at, f.episodes, f.attributes::text AS attributes"
    " FROM timestone.facts AS f"
    # the group named, not taken from f: Citus routes the names' lookups to the group's
    # shard only by a value it can read (``_distributed``)
    " CROSS JOIN LATERAL (SELECT e.name FROM timestone.entities AS e"
    "   WHERE e.group_id = {g} AND e.id = f.source_id AND e.created_at <= {t}"
    "   ORDER BY e.created_at DESC LIMIT 1) AS s"
    " CROSS JOIN LATERAL (SELECT e.name FROM timestone.entities AS e"
    "   WHERE e.group_id = {g} AND e.id = f.target_id AND e.created_at <= {t}"
    "   ORDER BY e.created_at DESC LIMIT 1) AS t"
)


def held_clause(alias: str, as_of: datetime | None) -> sql.Composable:
    """Rows the graph held at ``as_of`` (system time); ``None``: held now."""
    a = sql.Identifier(alias)
    if as_of is None:
        return sql.SQL("{}.expired_at IS NULL").format(a)
    return sql.SQL(
        "{a}.created_at <= {t} AND ({a}.expired_at IS NULL OR {a}.expired_at > {t})"
    ).format(a=a, t=sql.Literal(as_of))


def valid_clause(alias: str, valid_at: datetime | None) -> sql.Composable:
    """Rows true in the world at ``valid_at``; ``None``: every period."""
    if valid_at is None:
        return sql.SQL("true")
    return sql.SQL(
        "{a}.valid_at <= {w} AND ({a}.invalid_at IS NULL OR {a}.invalid_at > {w})"
    ).format(a=sql.Identifier(alias), w=sql.Literal(valid_at))


def fact_from_row(row: Mapping[str, Any]) -> Fact:
    return Fact(
        id=row["id"],
        version_id=row["version_id"],
        group_id=row["group_id"],
        source_id=row["source_id"],
        source=row["source"],
        relation=row["relation"],
        target_id=row["target_id"],
        target=row["target"],
        fact=row["fact"],
        valid_at=row["valid_at"],
        invalid_at=row["invalid_at"],
        created_at=row["created_at"],
        expired_at=row["expired_at"],
        episodes=tuple(row["episodes"]),
        attributes=_attributes(row["attributes"]),
        score=row.get("score"),
    )


def _attributes(value: str | Mapping[str, Any]) -> dict[str, Any]:
    """A row's attributes, read as ``jsonb`` text (most are empty, and decoding ``{}`` per
    row was most of the client's time for a timeline of 20,000 periods) or as a mapping."""
    return json_object(value) if isinstance(value, str) else dict(value)


async def _entity_ids(conn: Any, group_id: str, value: str | uuid.UUID) -> list[uuid.UUID]:
    """The ids an entity reference names: the id itself, or every entity of that normalized
    name (any type, any version: ids are stable)."""
    if isinstance(value, uuid.UUID):
        return [value]
    cur = await conn.execute(
        "SELECT DISTINCT id FROM timestone.entities WHERE group_id = %s AND norm_name = %s",
        (group_id, normalize(value)),
    )
    return [row["id"] for row in await cur.fetchall()]


def _ids_filter(column: str, ids: Sequence[uuid.UUID]) -> sql.Composable:
    return sql.SQL("f.{} = ANY({})").format(sql.Identifier(column), sql.Literal(list(ids)))


async def read_facts(
    w_conn: Any,
    group_id: str,
    *,
    source: str | uuid.UUID | None = None,
    relation: str | None = None,
    target: str | uuid.UUID | None = None,
    entity: str | uuid.UUID | None = None,
    valid_at: datetime | None,
    as_of: datetime | None,
    read_time: datetime,
    order: str = "recent",
    limit: int | None = 100,
    version_ids: Sequence[uuid.UUID] | None = None,
    history: bool = False,
    during: tuple[datetime | None, datetime | None] = (None, None),
) -> list[Fact]:
    """Facts held at ``as_of`` and true at ``valid_at``, joined with their endpoint names.

    ``history=True`` drops the system-time filter (every version, expired ones too).
    ``during``: only periods that overlap ``[since, until)`` (either end open if None).
    """
    where: list[sql.Composable] = [
        sql.SQL("f.group_id = {}").format(sql.Literal(group_id)),
        sql.SQL("true") if history else held_clause("f", as_of),
        valid_clause("f", valid_at),
    ]
    # entity references are resolved to ids first: filters on ids use the indexes
    if source is not None:
        where.append(_ids_filter("source_id", await _entity_ids(w_conn, group_id, source)))
    if target is not None:
        where.append(_ids_filter("target_id", await _entity_ids(w_conn, group_id, target)))
    if entity is not None:
        ids = await _entity_ids(w_conn, group_id, entity)
        where.append(
            sql.SQL("({} OR {})").format(
                _ids_filter("source_id", ids), _ids_filter("target_id", ids)
            )
        )
    if relation is not None:
        where.append(sql.SQL("f.relation = {}").format(sql.Literal(relation)))
    if version_ids is not None:
        where.append(sql.SQL("f.version_id = ANY({})").format(sql.Literal(list(version_ids))))
    since, until = during
    if until is not None:
        where.append(sql.SQL("f.valid_at < {}").format(sql.Literal(until)))
    if since is not None:
        where.append(
            sql.SQL("(f.invalid_at IS NULL OR f.invalid_at > {})").format(sql.Literal(since))
        )
    ordering = (
        sql.SQL("f.valid_at, f.relation, f.id")
        if order == "timeline"
        else sql.SQL("f.valid_at DESC, f.relation, f.id")
    )
    query = sql.SQL("{select} WHERE {where} ORDER BY {order}{limit}").format(
        select=FACT_SELECT.format(t=sql.Literal(as_of or read_time), g=sql.Literal(group_id)),
        where=sql.SQL(" AND ").join(where),
        order=ordering,
        limit=sql.SQL(" LIMIT {}").format(sql.Literal(limit)) if limit is not None else sql.SQL(""),
    )
    # binary tuples in ``Fact``'s own field order: a timeline of thousands of periods
    # parses no text and builds no dict per row
    async with w_conn.cursor(binary=True, row_factory=tuple_row) as cur:
        await cur.execute(query)
        rows = await cur.fetchall()
    return [
        Fact(
            id=r[0],
            version_id=r[1],
            group_id=r[2],
            source_id=r[3],
            source=r[4],
            relation=r[5],
            target_id=r[6],
            target=r[7],
            fact=r[8],
            valid_at=r[9],
            invalid_at=r[10],
            created_at=r[11],
            expired_at=r[12],
            episodes=tuple(r[13]),
            attributes=_attributes(r[14]),
        )
        for r in rows
    ]

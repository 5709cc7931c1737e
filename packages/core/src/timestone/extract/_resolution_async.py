"""Resolution with a model, after extraction and before the write: candidates for each
new entity and fact from the indexes, and one batched call for what is still ambiguous."""

from __future__ import annotations

import dataclasses
import uuid
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg import sql

from .._names import fold, near_identical, normalize
from .._records import EntityInput, FactInput, held_entity
from .._vectors import keyed
from ..db._database_async import Conn, Database
from ..errors import ExtractionWarning
from ..llm import LLM
from ..ontology import Ontology
from ..write._entities_async import SUMMARY_CHARS, entity_key
from . import _prompts as P
from ._answers import check_condensed, check_entity_decisions, check_fact_judgements
from ._calls_async import Ledger, call
from ._extraction_async import Extracted, model_request

if TYPE_CHECKING:
    from .._vectors import Row

__all__ = [
    "CANDIDATES_PER_FACT",
    "EMBED_MATCH",
    "Plan",
    "compatible",
    "condense",
    "entity_candidates",
    "fact_candidates",
    "maybe_same",
    "plan",
    "tokens_close",
    "vec_text",
]


CANDIDATES_PER_FACT = 5


EMBED_MATCH = 0.85


@dataclasses.dataclass
class Plan:
    """What the write transaction does with one episode's extraction."""

    entities: list[EntityInput]
    facts: list[FactInput]
    decided: dict[tuple[str, str | None], uuid.UUID]


def vec_text(v: Row) -> str:
    return "[" + ",".join(repr(x) for x in v.tolist()) + "]"


async def entity_candidates(
    conn: Conn, group_id: str, names: Sequence[str], vectors: Mapping[str, Row]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """Exact matches by normalized name, and trigram + embedding candidates of the rest."""
    norms = list(dict.fromkeys(normalize(n) for n in names))
    cur = await conn.execute(
        "SELECT id, name, norm_name, entity_type, summary FROM timestone.entities"
        " WHERE group_id = %s AND expired_at IS NULL AND norm_name = ANY(%s)"
        " ORDER BY created_at, id",
        (group_id, norms),
    )
    exact: dict[str, list[dict[str, Any]]] = {}
    for row in await cur.fetchall():
        exact.setdefault(row["norm_name"], []).append(dict(row))
    rest = [n for n in names if normalize(n) not in exact]
    similar: dict[str, list[dict[str, Any]]] = {normalize(n): [] for n in rest}
    if not rest:
        return exact, similar
    cur = await conn.execute(
        "SELECT s.query, s.id, s.name, s.entity_type, e.summary"
        " FROM timestone.similar_entities(%s) AS s"
        " JOIN timestone.entities AS e ON e.group_id = %s AND e.id = s.id"
        "  AND e.expired_at IS NULL",
        ([normalize(n) for n in rest], group_id),
    )
    for row in await cur.fetchall():
        similar.setdefault(row["query"], []).append(dict(row))
    dimension = len(vectors[rest[0]])
    cur = await conn.execute(
        sql.SQL(
            "SELECT q.query, c.id, c.name, c.entity_type, c.summary, c.sim"
            " FROM unnest(%(queries)s::text[], %(vectors)s::text[]) AS q(query, vec)"
            " CROSS JOIN LATERAL ("
            "  SELECT e.id, e.name, e.entity_type, e.summary,"
            "   1 - (e.name_embedding <=> q.vec::vector) AS sim"
            "  FROM timestone.entities AS e WHERE e.group_id = %(g)s AND e.expired_at IS NULL"
            "  ORDER BY {near} <=> {query} LIMIT 3) AS c"
        ).format(
            # the keyed distance, which the HNSW index is built on (``_vectors.keyed``)
            near=keyed(sql.SQL("e.name_embedding"), sql.SQL("e.group_id"), dimension),
            query=keyed(sql.SQL("q.vec::vector"), sql.SQL("%(g)s::text"), dimension),
        ),
        {
            "queries": [normalize(n) for n in rest],
            "vectors": [vec_text(vectors[n]) for n in rest],
            "g": group_id,
        },
    )
    for row in await cur.fetchall():
        found = similar.setdefault(row["query"], [])
        if row["sim"] >= EMBED_MATCH and all(c["id"] != row["id"] for c in found):
            found.append(dict(row))
    return exact, similar


def compatible(etype: str | None, candidate_type: str) -> bool:
    return etype is None or candidate_type in (etype, "Entity")


def tokens_close(t: str, u: str) -> bool:
    if t == u or t.startswith(u) or u.startswith(t):
        return True
    if len(t) >= 4 and len(u) >= 4 and t[:4] == u[:4]:
        return True
    if min(len(t), len(u)) >= 5 and abs(len(t) - len(u)) <= 1:
        return sum(a != b for a, b in zip(t, u, strict=False)) <= 1
    return False


def maybe_same(a: str, b: str) -> bool:
    """Whether two names could name one thing: every word of the shorter one matches a word
    of the other (equal, a prefix or initial, a shared stem, a one-letter typo). "Kathy
    Johansson"/"Katherine Johansson" may; "Château Sud"/"Château Nord" cannot, and never
    reach the model."""
    ta = [w for w in (fold(x) for x in normalize(a).split()) if w]
    tb = [w for w in (fold(x) for x in normalize(b).split()) if w]
    if not ta or not tb:
        return False
    short, long = (ta, tb) if len(ta) <= len(tb) else (tb, ta)
    return all(any(tokens_close(t, u) for u in long) for t in short)


async def fact_candidates(
    conn: Conn,
    group_id: str,
    queries: Sequence[tuple[int, uuid.UUID | None, uuid.UUID | None, str, Row]],
) -> dict[int, list[dict[str, Any]]]:
    """Open cardinality-many facts on the new facts' endpoints, nearest in meaning first."""
    if not queries:
        return {}
    cur = await conn.execute(
        "SELECT q.i, c.* FROM unnest(%s::int[], %s::uuid[], %s::uuid[], %s::text[], %s::text[])"
        "  AS q(i, src, tgt, rel, vec)"
        " CROSS JOIN LATERAL ("
        "  SELECT f.id, f.source_id, f.relation, f.target_id, f.fact, f.valid_at,"
        "   s.name AS source, s.entity_type AS source_type,"
        "   t.name AS target, t.entity_type AS target_type"
        "  FROM timestone.facts AS f"
        "  JOIN timestone.entities AS s ON s.group_id = f.group_id AND s.id = f.source_id"
        "   AND s.expired_at IS NULL"
        "  JOIN timestone.entities AS t ON t.group_id = f.group_id AND t.id = f.target_id"
        "   AND t.expired_at IS NULL"
        "  WHERE f.group_id = %s AND f.expired_at IS NULL AND f.invalid_at IS NULL"
        "   AND f.cardinality = 'many'"
        "   AND (f.source_id IN (q.src, q.tgt) OR f.target_id IN (q.src, q.tgt))"
        "   AND NOT (f.source_id IS NOT DISTINCT FROM q.src AND f.relation = q.rel"
        "    AND f.target_id IS NOT DISTINCT FROM q.tgt)"
        "  ORDER BY f.embedding <=> q.vec::vector, f.id LIMIT %s) AS c",
        (
            [q[0] for q in queries],
            [q[1] for q in queries],
            [q[2] for q in queries],
            [q[3] for q in queries],
            [vec_text(q[4]) for q in queries],
            group_id,
            CANDIDATES_PER_FACT,
        ),
    )
    out: dict[int, list[dict[str, Any]]] = {}
    for row in await cur.fetchall():
        out.setdefault(row["i"], []).append(dict(row))
    return out


def named_end(name: str, entity_type: str) -> EntityInput:
    """A stored fact's end (``held_entity``)."""
    return held_entity(name, labels=() if entity_type == "Entity" else (entity_type,))


_Key = tuple[str, str | None]
_Ambiguous = tuple[EntityInput, list[dict[str, Any]], str]


@dataclasses.dataclass(slots=True)
class _Entities:
    """What resolution knows of the names: ids by key, those the model chose, types by id."""

    ids: dict[_Key, uuid.UUID] = dataclasses.field(default_factory=dict[_Key, uuid.UUID])
    decided: dict[_Key, uuid.UUID] = dataclasses.field(default_factory=dict[_Key, uuid.UUID])
    types_of: dict[uuid.UUID, str] = dataclasses.field(default_factory=dict[uuid.UUID, str])

    def take(self, key: _Key, row: Mapping[str, Any]) -> None:
        self.ids[key] = row["id"]
        self.types_of[row["id"]] = row["entity_type"]


def _by_mechanism(
    extracted: Sequence[Extracted],
    exact: Mapping[str, list[dict[str, Any]]],
    similar: Mapping[str, list[dict[str, Any]]],
) -> tuple[_Entities, list[_Ambiguous]]:
    """Tiers 1 and 2: an exact name, then a near-identical one; the rest is ambiguous."""
    known = _Entities()
    ambiguous: list[_Ambiguous] = []
    for x in extracted:
        for e in x.entities:
            key = entity_key(e)
            if key in known.ids or any(a[0] is e for a in ambiguous):
                continue
            found = [c for c in exact.get(key[0], []) if compatible(key[1], c["entity_type"])]
            if found:
                known.take(key, found[0])
                continue
            cands = [
                c
                for c in similar.get(key[0], [])
                if compatible(key[1], c["entity_type"]) and maybe_same(e.name, c["name"])
            ]
            close = [c for c in cands if near_identical(e.name, c["name"])]
            if close:
                known.take(key, close[0])
            elif cands and all(entity_key(a[0]) != key for a in ambiguous):
                ambiguous.append((e, cands, x.context))
    return known, ambiguous


def _numbered(
    groups: Iterable[Iterable[dict[str, Any]]],
) -> tuple[list[dict[str, Any]], dict[Any, int]]:
    """Rows of several candidate lists, each once, numbered in order of first appearance."""
    rows: list[dict[str, Any]] = []
    index: dict[Any, int] = {}
    for group in groups:
        for r in group:
            if r["id"] not in index:
                index[r["id"]] = len(rows)
                rows.append(r)
    return rows, index


async def _ask_entities(
    llm: LLM, ledger: Ledger, ambiguous: list[_Ambiguous], known: _Entities
) -> None:
    """Call 2: one batched question for the names the mechanism could not settle."""
    catalog, index = _numbered(cands for _, cands, _ in ambiguous)
    offered = [[index[c["id"]] for c in cands] for _, cands, _ in ambiguous]
    items = [
        {"item": i, "name": e.name, "type": e.entity_type, "candidates": offered[i]}
        for i, (e, _, _) in enumerate(ambiguous)
    ]
    shown = [
        {"number": i, "name": c["name"], "type": c["entity_type"], "summary": c["summary"][:300]}
        for i, c in enumerate(catalog)
    ]
    context = "\n---\n".join(dict.fromkeys(ctx for _, _, ctx in ambiguous))[:6000]
    answer = await call(
        llm,
        ledger,
        model_request(
            P.ENTITY_RESOLUTION,
            P.entity_resolution_messages(items, shown, context),
            P.ENTITY_RESOLUTION_SCHEMA,
        ),
        P.EntityDecisions,
        lambda a: check_entity_decisions(a, offered),
    )
    for d in answer.decisions:  # checked: a match is one of its item's candidates
        if d.match is None:
            continue
        key, chosen = entity_key(ambiguous[d.item][0]), catalog[d.match]
        known.take(key, chosen)
        known.decided[key] = chosen["id"]


_Flat = tuple[int, int, FactInput]  # (episode, fact, the fact)
_Query = tuple[int, uuid.UUID | None, uuid.UUID | None, str, "Row"]


def _fact_queries(
    extracted: Sequence[Extracted],
    ontology: Ontology,
    ids: Mapping[_Key, uuid.UUID],
    vectors: Mapping[str, Row],
) -> tuple[list[_Flat], list[_Query]]:
    """The cardinality-many facts with a known end: each is looked up among stored facts."""
    flat: list[_Flat] = []
    queries: list[_Query] = []
    for xi, x in enumerate(extracted):
        for fi, f in enumerate(x.facts):
            if ontology.cardinality(f.relation) == "one":
                continue
            src, tgt = ids.get(entity_key(f.source_entity)), ids.get(entity_key(f.target_entity))
            if src is None and tgt is None:
                continue
            queries.append((len(flat), src, tgt, f.relation, vectors[f.fact or ""]))
            flat.append((xi, fi, f))
    return flat, queries


def _stored_fact(old: Mapping[str, Any], f: FactInput, *, duplicate: bool) -> FactInput:
    """A stored fact again: the new one's wording and dates when it duplicates it, else the
    stored fact itself, ended when the new one began (a contradiction)."""
    source = named_end(old["source"], old["source_type"])
    target = named_end(old["target"], old["target_type"])
    if duplicate:
        return FactInput(
            source=source,
            relation=old["relation"],
            target=target,
            fact=f.fact,
            valid_at=f.valid_at,
            invalid_at=f.invalid_at,
            attributes=dict(f.attributes) if old["relation"] == f.relation else {},
        )
    return FactInput(
        source=source,
        relation=old["relation"],
        target=target,
        fact=old["fact"],
        valid_at=old["valid_at"],
        invalid_at=f.valid_at,
    )


def _contradicted(f: FactInput, old: Mapping[str, Any], extra: list[FactInput]) -> FactInput:
    """A contradiction settled by the dates: a later new fact ends the stored one (``extra``
    gets its closed version); an earlier one ends when the stored one began."""
    if f.valid_at is not None and f.valid_at > old["valid_at"]:
        extra.append(_stored_fact(old, f, duplicate=False))
    elif (
        f.valid_at is not None
        and f.valid_at < old["valid_at"]
        and (f.invalid_at is None or f.invalid_at > old["valid_at"])
    ):
        # the new fact is older than the one it contradicts: it ended when that began
        return dataclasses.replace(f, invalid_at=old["valid_at"])
    return f


async def _judge_facts(
    llm: LLM,
    ledger: Ledger,
    flat: list[_Flat],
    candidates: Mapping[int, list[dict[str, Any]]],
    facts: list[list[FactInput]],
) -> None:
    """Call 3: duplicates and contradictions among the stored candidates, applied to
    ``facts`` (each episode's list, changed in place)."""
    existing, index = _numbered(candidates.values())
    allowed = {i: [index[r["id"]] for r in rows] for i, rows in candidates.items()}
    new = [
        {
            "new": i,
            "fact": f.fact,
            "valid_at": (f.valid_at.isoformat() if f.valid_at else None),
            "candidates": allowed[i],
        }
        for i, (_, _, f) in enumerate(flat)
        if i in candidates
    ]
    shown = [
        {"number": i, "fact": r["fact"], "valid_at": r["valid_at"].isoformat()}
        for i, r in enumerate(existing)
    ]
    answer = await call(
        llm,
        ledger,
        model_request(
            P.FACT_RESOLUTION, P.fact_resolution_messages(new, shown), P.FACT_RESOLUTION_SCHEMA
        ),
        P.FactJudgements,
        lambda a: check_fact_judgements(a, allowed),
    )
    extra: list[list[FactInput]] = [[] for _ in facts]
    for j in answer.judgements:  # checked: each names a new fact and its candidates
        xi, fi, f = flat[j.new]
        if j.duplicate_of is not None:
            facts[xi][fi] = _stored_fact(existing[j.duplicate_of], f, duplicate=True)
            continue
        for k in dict.fromkeys(j.contradicts):
            f = _contradicted(f, existing[k], extra[xi])
            facts[xi][fi] = f
    for xi, more in enumerate(extra):
        facts[xi].extend(more)


async def _start_ended_periods(
    db: Database, group_id: str, extracted: Sequence[Extracted], ids: Mapping[_Key, uuid.UUID]
) -> list[Extracted]:
    """Facts told as over by the episode's time with no start (``valid_at`` None, the
    extraction's mark): each ends the stored period of its source, relation and target
    that held just before its end, so it takes that period's ``valid_at`` (a correction,
    which the date fight settles: the later recording's end wins). One the graph holds no
    such period of is dropped, with a warning: nothing says when it began."""
    ended = [
        (xi, fi, f)
        for xi, x in enumerate(extracted)
        for fi, f in enumerate(x.facts)
        if f.valid_at is None
    ]
    if not ended:
        return list(extracted)
    starts: dict[int, datetime] = {}
    known = [
        (
            i,
            ids.get(entity_key(f.source_entity)),
            f.relation,
            ids.get(entity_key(f.target_entity)),
            f.invalid_at,
        )
        for i, (_, _, f) in enumerate(ended)
    ]
    asked = [q for q in known if q[1] is not None and q[3] is not None]
    if asked:
        async with db.transaction(group_id, "reading the periods facts end") as conn:
            cur = await conn.execute(
                "SELECT q.i, p.valid_at FROM unnest(%s::int[], %s::uuid[], %s::text[],"
                " %s::uuid[], %s::timestamptz[]) AS q(i, src, rel, tgt, ended)"
                " CROSS JOIN LATERAL (SELECT f.valid_at FROM timestone.facts AS f"
                "  WHERE f.group_id = %s AND f.source_id = q.src AND f.relation = q.rel"
                "   AND f.target_id = q.tgt AND f.expired_at IS NULL AND f.valid_at < q.ended"
                "   AND (f.invalid_at IS NULL OR f.invalid_at >= q.ended)"
                "  ORDER BY f.valid_at DESC LIMIT 1) AS p",
                (
                    [q[0] for q in asked],
                    [q[1] for q in asked],
                    [q[2] for q in asked],
                    [q[3] for q in asked],
                    [q[4] for q in asked],
                    group_id,
                ),
            )
            starts = {row["i"]: row["valid_at"] for row in await cur.fetchall()}
    facts = [list(x.facts) for x in extracted]
    for i, (xi, fi, f) in enumerate(ended):
        start = starts.get(i)
        if start is None:
            warnings.warn(
                f"fact {f.fact!r}: told as over by {f.invalid_at:%Y-%m-%d} with no start, and "
                "the graph holds no period of it then; dropped",
                ExtractionWarning,
                stacklevel=4,
            )
        facts[xi][fi] = dataclasses.replace(f, valid_at=start)
    return [
        dataclasses.replace(x, facts=[f for f in facts[xi] if f.valid_at is not None])
        for xi, x in enumerate(extracted)
    ]


async def plan(
    db: Database,
    group_id: str,
    llm: LLM,
    ledger: Ledger,
    extracted: Sequence[Extracted],
    ontology: Ontology,
    vectors: Mapping[str, Row],
) -> list[Plan]:
    """Calls 2 and 3 (and condensation), batched over every episode in ``extracted``.

    ``vectors`` holds the embeddings of every entity name and fact sentence.
    """
    names = list(dict.fromkeys(e.name for x in extracted for e in x.entities))
    async with db.transaction(group_id, "reading resolution candidates") as conn:
        exact, similar = await entity_candidates(conn, group_id, names, vectors)
    # tier 1 and 2 by the mechanism; the rest goes to one call
    known, ambiguous = _by_mechanism(extracted, exact, similar)
    if ambiguous:
        await _ask_entities(llm, ledger, ambiguous, known)
    extracted = await _start_ended_periods(db, group_id, extracted, known.ids)
    # fact resolution: cardinality-many facts with a known endpoint
    flat, queries = _fact_queries(extracted, ontology, known.ids, vectors)
    candidates: dict[int, list[dict[str, Any]]] = {}
    if queries:
        async with db.transaction(group_id, "reading fact candidates") as conn:
            candidates = await fact_candidates(conn, group_id, queries)
    facts = [list(x.facts) for x in extracted]
    if candidates:
        await _judge_facts(llm, ledger, flat, candidates, facts)
    plans = [
        Plan(entities=list(x.entities), facts=facts[xi], decided=known.decided)
        for xi, x in enumerate(extracted)
    ]
    await condense(db, group_id, llm, ledger, plans, known.ids)
    return plans


CONDENSED_CHARS = 1000


async def _summary_state(
    conn: Conn, group_id: str, entities: set[uuid.UUID]
) -> dict[uuid.UUID, tuple[str, list[str]]]:
    """Each entity's latest explicit summary, and the sentences of its open facts written
    since then, newest world time first."""
    cur = await conn.execute(
        "SELECT x.ent, m.summary, m.recorded_at FROM unnest(%s::uuid[]) AS x(ent)"
        " LEFT JOIN LATERAL (SELECT summary, recorded_at FROM timestone.mentions"
        "  WHERE group_id = %s AND expired_at IS NULL AND entity_id = x.ent"
        "  AND summary IS NOT NULL AND summary <> ''"
        "  ORDER BY recorded_at DESC, position DESC LIMIT 1) AS m ON true",
        (list(entities), group_id),
    )
    explicit = {r["ent"]: (r["summary"] or "", r["recorded_at"]) for r in await cur.fetchall()}
    cur = await conn.execute(
        "SELECT x.ent, f.fact FROM unnest(%s::uuid[], %s::timestamptz[]) AS x(ent, since)"
        " JOIN timestone.facts AS f ON f.group_id = %s AND f.expired_at IS NULL"
        "  AND f.invalid_at IS NULL AND (f.source_id = x.ent OR f.target_id = x.ent)"
        "  AND (x.since IS NULL OR f.created_at > x.since)"
        " ORDER BY f.valid_at DESC",
        (
            list(explicit),
            [explicit[i][1] for i in explicit],
            group_id,
        ),
    )
    sentences: dict[uuid.UUID, list[str]] = {}
    for r in await cur.fetchall():
        sentences.setdefault(r["ent"], []).append(r["fact"])
    return {i: (explicit[i][0], sentences.get(i, [])) for i in explicit}


def _give_summaries(plans: Sequence[Plan], condensed: dict[_Key, str]) -> None:
    """Each condensed summary goes to its entity in the first plan naming it (an entity, or
    else the end of a fact)."""
    for p in plans:
        for i, e in enumerate(p.entities):
            text = condensed.get(entity_key(e))
            if text is not None:
                p.entities[i] = dataclasses.replace(e, summary=text)
                condensed.pop(entity_key(e))
        for key, text in list(condensed.items()):  # an endpoint not among the entities
            for f in p.facts:
                for end in (f.source_entity, f.target_entity):
                    if entity_key(end) == key and key in condensed:
                        p.entities.append(dataclasses.replace(end, summary=text))
                        condensed.pop(key)


async def condense(
    db: Database,
    group_id: str,
    llm: LLM,
    ledger: Ledger,
    plans: Sequence[Plan],
    ids: Mapping[tuple[str, str | None], uuid.UUID],
) -> None:
    """Past ``SUMMARY_CHARS``, condense an entity's summary with the small model, once.

    The condensed text becomes this episode's explicit summary mention of the entity, so
    removing the episode drops it and the summary falls back to what remains.
    """
    new_text: dict[tuple[str, str | None], list[str]] = {}
    for p in plans:
        for f in p.facts:
            for end in (f.source_entity, f.target_entity):
                new_text.setdefault(entity_key(end), []).append(f.fact or "")
    known = {key: ids[key] for key in new_text if key in ids}
    state: dict[uuid.UUID, tuple[str, list[str]]] = {}
    if known:
        async with db.transaction(group_id, "reading summaries") as conn:
            state = await _summary_state(conn, group_id, set(known.values()))
    items: list[tuple[tuple[str, str | None], str]] = []
    for key, added in new_text.items():
        summary, old = state.get(known[key], ("", [])) if key in known else ("", [])
        parts = [summary, *dict.fromkeys([*added, *old])]
        text = " ".join(p for p in parts if p)
        if len(text) > SUMMARY_CHARS:
            items.append((key, text[: SUMMARY_CHARS * 4]))
    if not items:
        return
    answer = await call(
        llm,
        ledger,
        model_request(
            P.CONDENSE,
            P.condense_messages(
                [{"item": i, "entity": k[0], "text": t} for i, (k, t) in enumerate(items)],
                CONDENSED_CHARS,
            ),
            P.CONDENSE_SCHEMA,
            small=True,
        ),
        P.Condensed,
        lambda a: check_condensed(a, len(items)),
    )
    condensed = {
        items[s.item][0]: s.summary.strip()[: CONDENSED_CHARS * 2]
        for s in answer.summaries
        if s.summary.strip()
    }
    _give_summaries(plans, condensed)

"""LLM ingestion: extraction and the LLM tiers of resolution, all before the write opens.

One episode costs at most three calls, each only when needed:

1. extraction: entities and facts together, constrained to the ontology, dates
   resolved against the reference time (always);
2. entity resolution: one batched call for the names that the exact and the
   near-identical tiers left ambiguous (only when some are);
3. fact resolution: one batched call judging which existing cardinality-many
   facts the new facts duplicate or contradict (only when candidates exist;
   cardinality-one slots never reach the model: the date fight settles them).

Past ``SUMMARY_CHARS`` an entity's summary is condensed by the small model in
one more batched call (rare). The mechanism turns every answer into plain
inputs of the core write path: a duplicate is a new assertion on the existing
fact's exact triple, a contradiction an assertion that closes the old fact at
the new fact's ``valid_at`` (see docs/llm.md). Model output that breaks the
ontology is dropped with an ``ExtractionWarning``; malformed output is asked
again a bounded number of times, then fails with an ``LLMError`` naming the step.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import pydantic
from psycopg import sql

from .._names import fold, near_identical, normalize, relation_name
from .._records import EntityInput, Episode, FactInput, check_chars, check_relation, storable
from .._time import utcnow
from .._vectors import keyed
from ..db._database_async import Conn, Database
from ..errors import (
    ExtractionWarning,
    InvalidInput,
    NotFound,
    OntologyViolation,
)
from ..llm import LLM, LLMBudget, LLMRequest, LLMUsage
from ..ontology import EntityType, Ontology
from ..write._entities_async import SUMMARY_CHARS, entity_key
from ..write._episodes_async import EPISODE_COLUMNS, episode_from_row
from ..write._transaction_async import Write
from . import _prompts as P
from ._answers import check_condensed, check_entity_decisions, check_fact_judgements
from ._calls_async import OUTPUT_RETRIES, STEPS, Ledger, call, why

if TYPE_CHECKING:
    from .._vectors import Row

__all__ = [
    "MAX_EPISODE_CHARS",
    "OUTPUT_RETRIES",
    "Extracted",
    "Ledger",
    "Plan",
    "Types",
    "build_types",
    "call",
    "check_episode_content",
    "extract",
    "plan",
]

MAX_EPISODE_CHARS = 100_000
SOURCES = ("text", "message", "json")
MAX_PREVIOUS = 10
_PREVIOUS_CHARS = 1000
_CANDIDATES_PER_FACT = 5
_CONDENSED_CHARS = 1000
_EMBED_MATCH = 0.85


# -- validation of the input -------------------------------------------------------------


def check_episode_content(content: object, source: object, max_chars: int) -> str:
    """Refuse what no model should see: not text, empty, binary, oversized, bad JSON."""
    if source not in SOURCES:
        raise InvalidInput(f"source must be one of {', '.join(SOURCES)}, got {source!r:.80}")
    if isinstance(content, (bytes, bytearray, memoryview)):
        raise InvalidInput("episode content is binary (bytes); pass decoded text")
    if not isinstance(content, str):
        raise InvalidInput(f"episode content must be a string, got {type(content).__name__}")
    if not content.strip():
        raise InvalidInput("episode content is empty")
    if len(content) > max_chars:
        raise InvalidInput(
            f"episode content has {len(content):,} characters; the limit is {max_chars:,} "
            "(raise max_chars, or use add_document, which chunks long text)"
        )
    control = sum(1 for ch in content if ord(ch) < 32 and ch not in "\n\r\t")
    if "\x00" in content or control > max(8, len(content) // 100):
        raise InvalidInput("episode content looks binary (NUL or control characters); pass text")
    check_chars(content, "episode content")
    if source == "json":
        try:
            json.loads(content)
        except ValueError as exc:
            raise InvalidInput(f"source='json' but the content is not valid JSON: {exc}") from exc
    return content


# -- the call-level ontology ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Types:
    """What one extraction may return: entity and edge types, the edge map, exclusions."""

    entities: Mapping[str, EntityType]
    edges: Mapping[str, tuple[str, type[pydantic.BaseModel] | None]]
    edge_map: Mapping[tuple[str, str], tuple[str, ...]]
    excluded: frozenset[str]
    closed_relations: bool
    instructions: str | None

    @property
    def entity_names(self) -> list[str]:
        names = [n for n in self.entities if n not in self.excluded]
        return [*names, "Entity"] if names else []

    def attribute_names(self) -> dict[str, list[str]]:
        return {
            n: list(t.attributes.model_fields) for n, t in self.entities.items() if t.attributes
        }


def _describe_model(model: type[pydantic.BaseModel]) -> str:
    doc = (model.__doc__ or "").strip()
    return "" if doc.startswith(("A base class", "Usage docs")) else doc.split("\n\n")[0]


def build_types(
    ontology: Ontology,
    entity_types: object,
    edge_types: object,
    edge_type_map: object,
    excluded_entity_types: object,
    instructions: object,
) -> Types:
    """Merge the memory's ontology with the call's custom types (pydantic models by name)."""
    entities: dict[str, EntityType] = {t.name: t for t in ontology.entity_types}
    for name, model in _models_by_name(entity_types, "entity_types").items():
        entities[name] = EntityType(name, attributes=model, description=_describe_model(model))
    edges: dict[str, tuple[str, type[pydantic.BaseModel] | None]] = {
        t.name: (t.description, t.attributes) for t in ontology.edge_types
    }
    for name, model in _models_by_name(edge_types, "edge_types").items():
        edges[check_relation(name)] = (_describe_model(model), model)
    edge_map: dict[tuple[str, str], tuple[str, ...]] = {}
    if edge_type_map is not None:
        if not isinstance(edge_type_map, Mapping):
            raise InvalidInput("edge_type_map must map (source type, target type) to relations")
        pairs = cast(Mapping[object, object], edge_type_map)
        for pair, rels in pairs.items():
            if not (isinstance(pair, tuple) and len(cast(tuple[object, ...], pair)) == 2):
                raise InvalidInput(f"edge_type_map key {pair!r:.80} is not a (source, target) pair")
            ends = cast(tuple[object, object], pair)
            if isinstance(rels, str) or not isinstance(rels, Iterable):
                raise InvalidInput(f"edge_type_map[{pair!r:.80}] must be a list of relation names")
            names = cast(Iterable[object], rels)
            edge_map[(str(ends[0]), str(ends[1]))] = tuple(check_relation(r) for r in names)
    excluded: frozenset[str] = frozenset()
    if excluded_entity_types is not None:
        if isinstance(excluded_entity_types, str) or not isinstance(
            excluded_entity_types, Iterable
        ):
            raise InvalidInput("excluded_entity_types must be a list of entity type names")
        excluded = frozenset(str(x) for x in cast(Iterable[object], excluded_entity_types))
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidInput(f"instructions must be a string, got {type(instructions).__name__}")
    return Types(
        entities=entities,
        edges=edges,
        edge_map=edge_map,
        excluded=excluded,
        closed_relations=ontology.closed,
        instructions=instructions or None,
    )


def _models_by_name(value: object, what: str) -> dict[str, type[pydantic.BaseModel]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{what} must map type names to pydantic models")
    out: dict[str, type[pydantic.BaseModel]] = {}
    for name, model in value.items():  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(name, str) or not name:
            raise InvalidInput(f"{what}: type names must be non-empty strings, got {name!r:.80}")
        if not (isinstance(model, type) and issubclass(model, pydantic.BaseModel)):
            raise InvalidInput(f"{what}[{name!r:.80}] must be a pydantic model class")
        out[name] = model
    return out


def _request(
    schema_name: str,
    messages: list[dict[str, str]],
    schema: Mapping[str, Any],
    *,
    small: bool = False,
) -> LLMRequest:
    return LLMRequest(
        step=STEPS[schema_name],
        messages=messages,
        schema_name=schema_name,
        schema=schema,
        small=small,
    )


# -- 1. extraction ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Extracted:
    """What the mechanism kept of one extraction."""

    entities: list[EntityInput]
    facts: list[FactInput]
    context: str


def _warn(message: str) -> None:
    warnings.warn(message, ExtractionWarning, stacklevel=3)


def _date(value: str | None, what: str) -> datetime | None:
    if value is None or not value.strip():
        return None
    text = value.strip().replace("Z", "+00:00")
    if re.fullmatch(r"\d{4}", text):
        text += "-01-01"
    elif re.fullmatch(r"\d{4}-\d{2}", text):
        text += "-01"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        _warn(f"{what}: {value!r} is not an ISO 8601 date; dropped")
        return None
    try:
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except OverflowError:
        _warn(f"{what}: {value!r} is outside the years 1 to 9999 in UTC; dropped")
        return None


def _attrs(items: Sequence[P.Attribute]) -> dict[str, Any]:
    return {a.key: a.value for a in items if a.key}


def _check_attrs(
    model: type[pydantic.BaseModel] | None, values: dict[str, Any], what: str
) -> dict[str, Any]:
    if model is None or not values:
        return values
    known = {k: v for k, v in values.items() if k in model.model_fields}
    try:
        return model.model_validate(known).model_dump(mode="json", exclude_unset=True)
    except pydantic.ValidationError as exc:
        _warn(f"attributes of {what} fail {model.__name__} ({why(exc)}); dropped")
        return {}


def _keep(
    raw: P.Extraction, types: Types, ontology: Ontology, ref: datetime
) -> tuple[list[EntityInput], list[FactInput]]:
    allowed = set(types.entity_names)
    entities: dict[str, EntityInput] = {}
    for e in raw.entities:
        name = e.name.strip()
        if not name or len(name) > 512 or not storable(name):
            continue
        etype = e.type.strip() or "Entity"
        if etype in types.excluded:
            continue
        if allowed and etype not in allowed:
            _warn(f"entity {name!r} has type {etype!r}, outside the ontology; dropped")
            continue
        if normalize(name) in entities:
            continue
        declared = types.entities.get(etype)
        attributes = _check_attrs(
            declared.attributes if declared else None, _attrs(e.attributes), f"{etype} {name!r}"
        )
        try:
            attributes = ontology.check_entity(etype, attributes, name)
        except (OntologyViolation, InvalidInput) as exc:
            _warn(f"entity {name!r}: {exc}; dropped")
            continue
        labels = () if etype == "Entity" else (etype,)
        entities[normalize(name)] = EntityInput(name, labels=labels, attributes=attributes)

    facts: list[FactInput] = []
    for f in raw.facts:
        src, tgt = entities.get(normalize(f.source)), entities.get(normalize(f.target))
        if src is None or tgt is None:
            missing = f.source if src is None else f.target
            _warn(f"fact {f.fact!r} names {missing!r}, which is not an extracted entity; dropped")
            continue
        relation = relation_name(f.relation)
        if relation is None:
            _warn(f"fact {f.fact!r} has no usable relation ({f.relation!r}); dropped")
            continue
        if types.closed_relations and relation not in types.edges:
            _warn(f"fact {f.fact!r}: relation {relation} is not in the closed ontology; dropped")
            continue
        if types.edge_map and relation in types.edges:
            pair = (src.entity_type, tgt.entity_type)
            allowed_here = {
                r
                for p, rels in types.edge_map.items()
                if p in (pair, ("Entity", "Entity"))
                for r in rels
            }
            if relation not in allowed_here:
                _warn(
                    f"fact {f.fact!r}: {relation} is not allowed from {pair[0]} to {pair[1]};"
                    " dropped"
                )
                continue
        declared_edge = types.edges.get(relation)
        attributes = _check_attrs(
            declared_edge[1] if declared_edge else None, _attrs(f.attributes), relation
        )
        try:
            attributes = ontology.check_relation(
                relation,
                attributes,
                src.entity_type if src.labels else None,
                tgt.entity_type if tgt.labels else None,
            )
        except (OntologyViolation, InvalidInput) as exc:
            _warn(f"fact {f.fact!r}: {exc}; dropped")
            continue
        valid_at = _date(f.valid_at, f"valid_at of {f.fact!r}") or ref
        invalid_at = _date(f.invalid_at, f"invalid_at of {f.fact!r}")
        if invalid_at is not None and invalid_at <= valid_at:
            _warn(f"fact {f.fact!r}: invalid_at is not after valid_at; dropped")
            continue
        sentence = (
            f.fact.strip()[:10_000]
            or f"{src.name} {relation.lower().replace('_', ' ')} {tgt.name}."
        )
        if not storable(sentence):
            _warn(f"fact {sentence!r:.80}: a NUL byte or a lone surrogate; dropped")
            continue
        facts.append(
            FactInput(
                source=src,
                relation=relation,
                target=tgt,
                fact=sentence,
                valid_at=valid_at,
                invalid_at=invalid_at,
                attributes=attributes,
            )
        )
    return list(entities.values()), facts


async def extract(
    llm: LLM,
    ledger: Ledger,
    *,
    content: str,
    source: str,
    reference_time: datetime,
    source_description: str,
    previous: Sequence[tuple[datetime, str]],
    types: Types,
    ontology: Ontology,
    document: Mapping[str, str] | None = None,
    known_entities: Sequence[str] = (),
) -> Extracted:
    """Call 1: entities and facts of one episode, kept only where the ontology allows."""
    messages = P.extraction_messages(
        content=content,
        source="document" if document is not None else source,
        reference_time=reference_time,
        source_description=source_description,
        previous=previous,
        entity_types={
            n: t.description for n, t in types.entities.items() if n not in types.excluded
        },
        edge_types={n: d for n, (d, _) in types.edges.items()},
        edge_map=types.edge_map,
        entity_attributes=types.attribute_names(),
        instructions=types.instructions,
        document=document,
        known_entities=known_entities,
    )
    schema = P.extraction_schema(
        types.entity_names, sorted(types.edges) if types.closed_relations else []
    )
    raw = await call(llm, ledger, _request(P.EXTRACTION, messages, schema), P.Extraction)
    entities, facts = _keep(raw, types, ontology, reference_time)
    return Extracted(entities=entities, facts=facts, context=content[:4000])


# -- 2 and 3. resolution --------------------------------------------------------------------


@dataclasses.dataclass
class Plan:
    """What the write transaction does with one episode's extraction."""

    entities: list[EntityInput]
    facts: list[FactInput]
    decided: dict[tuple[str, str | None], uuid.UUID]


def _vec_text(v: Row) -> str:
    return "[" + ",".join(repr(x) for x in v.tolist()) + "]"


async def _entity_candidates(
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
            "vectors": [_vec_text(vectors[n]) for n in rest],
            "g": group_id,
        },
    )
    for row in await cur.fetchall():
        found = similar.setdefault(row["query"], [])
        if row["sim"] >= _EMBED_MATCH and all(c["id"] != row["id"] for c in found):
            found.append(dict(row))
    return exact, similar


def _compatible(etype: str | None, candidate_type: str) -> bool:
    return etype is None or candidate_type in (etype, "Entity")


def _tokens_close(t: str, u: str) -> bool:
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
    return all(any(_tokens_close(t, u) for u in long) for t in short)


async def _fact_candidates(
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
            [_vec_text(q[4]) for q in queries],
            group_id,
            _CANDIDATES_PER_FACT,
        ),
    )
    out: dict[int, list[dict[str, Any]]] = {}
    for row in await cur.fetchall():
        out.setdefault(row["i"], []).append(dict(row))
    return out


def _end(name: str, entity_type: str) -> EntityInput:
    return EntityInput(name, labels=() if entity_type == "Entity" else (entity_type,))


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
        exact, similar = await _entity_candidates(conn, group_id, names, vectors)

    # tier 1 and 2 by the mechanism; the rest goes to one call
    ids: dict[tuple[str, str | None], uuid.UUID] = {}
    decided: dict[tuple[str, str | None], uuid.UUID] = {}
    types_of: dict[uuid.UUID, str] = {}
    ambiguous: list[tuple[EntityInput, list[dict[str, Any]], str]] = []
    for x in extracted:
        for e in x.entities:
            key = entity_key(e)
            if key in ids or any(a[0] is e for a in ambiguous):
                continue
            found = [c for c in exact.get(key[0], []) if _compatible(key[1], c["entity_type"])]
            if found:
                ids[key] = found[0]["id"]
                types_of[found[0]["id"]] = found[0]["entity_type"]
                continue
            cands = [
                c
                for c in similar.get(key[0], [])
                if _compatible(key[1], c["entity_type"]) and maybe_same(e.name, c["name"])
            ]
            close = [c for c in cands if near_identical(e.name, c["name"])]
            if close:
                ids[key] = close[0]["id"]
                types_of[close[0]["id"]] = close[0]["entity_type"]
            elif cands and all(entity_key(a[0]) != key for a in ambiguous):
                ambiguous.append((e, cands, x.context))
    if ambiguous:
        catalog: list[dict[str, Any]] = []
        index: dict[uuid.UUID, int] = {}
        for _, cands, _ in ambiguous:
            for c in cands:
                if c["id"] not in index:
                    index[c["id"]] = len(catalog)
                    catalog.append(c)
        offered = [[index[c["id"]] for c in cands] for _, cands, _ in ambiguous]
        items = [
            {"item": i, "name": e.name, "type": e.entity_type, "candidates": offered[i]}
            for i, (e, _, _) in enumerate(ambiguous)
        ]
        shown = [
            {
                "number": i,
                "name": c["name"],
                "type": c["entity_type"],
                "summary": c["summary"][:300],
            }
            for i, c in enumerate(catalog)
        ]
        context = "\n---\n".join(dict.fromkeys(ctx for _, _, ctx in ambiguous))[:6000]
        answer = await call(
            llm,
            ledger,
            _request(
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
            e = ambiguous[d.item][0]
            chosen = catalog[d.match]
            ids[entity_key(e)] = chosen["id"]
            decided[entity_key(e)] = chosen["id"]
            types_of[chosen["id"]] = chosen["entity_type"]

    # fact resolution: cardinality-many facts with a known endpoint
    flat: list[tuple[int, int, FactInput]] = []
    queries: list[tuple[int, uuid.UUID | None, uuid.UUID | None, str, Row]] = []
    for xi, x in enumerate(extracted):
        for fi, f in enumerate(x.facts):
            if ontology.cardinality(f.relation) == "one":
                continue
            src, tgt = ids.get(entity_key(f.source_entity)), ids.get(entity_key(f.target_entity))
            if src is None and tgt is None:
                continue
            sentence = f.fact or ""
            queries.append((len(flat), src, tgt, f.relation, vectors[sentence]))
            flat.append((xi, fi, f))
    candidates: dict[int, list[dict[str, Any]]] = {}
    if queries:
        async with db.transaction(group_id, "reading fact candidates") as conn:
            candidates = await _fact_candidates(conn, group_id, queries)
    facts = [list(x.facts) for x in extracted]
    if candidates:
        existing: list[dict[str, Any]] = []
        index = {}
        for rows in candidates.values():
            for r in rows:
                if r["id"] not in index:
                    index[r["id"]] = len(existing)
                    existing.append(r)
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
            _request(
                P.FACT_RESOLUTION, P.fact_resolution_messages(new, shown), P.FACT_RESOLUTION_SCHEMA
            ),
            P.FactJudgements,
            lambda a: check_fact_judgements(a, allowed),
        )
        extra: list[list[FactInput]] = [[] for _ in extracted]
        for j in answer.judgements:  # checked: each names a new fact and its candidates
            xi, fi, f = flat[j.new]
            if j.duplicate_of is not None:
                old = existing[j.duplicate_of]
                same_relation = old["relation"] == f.relation
                facts[xi][fi] = FactInput(
                    source=_end(old["source"], old["source_type"]),
                    relation=old["relation"],
                    target=_end(old["target"], old["target_type"]),
                    fact=f.fact,
                    valid_at=f.valid_at,
                    invalid_at=f.invalid_at,
                    attributes=dict(f.attributes) if same_relation else {},
                )
                continue
            for k in dict.fromkeys(j.contradicts):
                old = existing[k]
                if f.valid_at is not None and f.valid_at > old["valid_at"]:
                    extra[xi].append(
                        FactInput(
                            source=_end(old["source"], old["source_type"]),
                            relation=old["relation"],
                            target=_end(old["target"], old["target_type"]),
                            fact=old["fact"],
                            valid_at=old["valid_at"],
                            invalid_at=f.valid_at,
                        )
                    )
                elif (
                    f.valid_at is not None
                    and f.valid_at < old["valid_at"]
                    and (f.invalid_at is None or f.invalid_at > old["valid_at"])
                ):
                    # the new fact is older than the one it contradicts: it ended when that began
                    f = dataclasses.replace(f, invalid_at=old["valid_at"])
                    facts[xi][fi] = f
        for xi, more in enumerate(extra):
            facts[xi].extend(more)

    plans = [
        Plan(entities=list(x.entities), facts=facts[xi], decided=decided)
        for xi, x in enumerate(extracted)
    ]
    await _condense(db, group_id, llm, ledger, plans, ids)
    return plans


# -- summaries --------------------------------------------------------------------------------


async def _condense(
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
            cur = await conn.execute(
                "SELECT x.ent, m.summary, m.recorded_at FROM unnest(%s::uuid[]) AS x(ent)"
                " LEFT JOIN LATERAL (SELECT summary, recorded_at FROM timestone.mentions"
                "  WHERE group_id = %s AND expired_at IS NULL AND entity_id = x.ent"
                "  AND summary IS NOT NULL AND summary <> ''"
                "  ORDER BY recorded_at DESC, position DESC LIMIT 1) AS m ON true",
                (list(set(known.values())), group_id),
            )
            explicit = {
                r["ent"]: (r["summary"] or "", r["recorded_at"]) for r in await cur.fetchall()
            }
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
            state = {i: (explicit[i][0], sentences.get(i, [])) for i in explicit}
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
        _request(
            P.CONDENSE,
            P.condense_messages(
                [{"item": i, "entity": k[0], "text": t} for i, (k, t) in enumerate(items)],
                _CONDENSED_CHARS,
            ),
            P.CONDENSE_SCHEMA,
            small=True,
        ),
        P.Condensed,
        lambda a: check_condensed(a, len(items)),
    )
    condensed = {
        items[s.item][0]: s.summary.strip()[: _CONDENSED_CHARS * 2]
        for s in answer.summaries
        if s.summary.strip()
    }
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


# -- budgets and the ledger in the database -------------------------------------------------


async def read_budget(conn: Conn, group_id: str) -> tuple[LLMBudget | None, LLMUsage | None]:
    cur = await conn.execute(
        "SELECT max_calls, max_tokens, period FROM timestone.llm_budgets"
        " WHERE group_id = %s AND expired_at IS NULL",
        (group_id,),
    )
    row = await cur.fetchone()
    if row is None:
        return None, None
    budget = LLMBudget(
        max_calls=row["max_calls"], max_tokens=row["max_tokens"], period=row["period"]
    )
    return budget, await read_usage(conn, group_id, since=utcnow() - budget.period)


async def read_usage(conn: Conn, group_id: str, *, since: datetime | None) -> LLMUsage:
    cur = await conn.execute(
        "SELECT count(*) AS calls, coalesce(sum(prompt_tokens), 0) AS prompt,"
        " coalesce(sum(completion_tokens), 0) AS completion FROM timestone.llm_ledger"
        " WHERE group_id = %s AND (%s::timestamptz IS NULL OR created_at > %s)",
        (group_id, since, since),
    )
    row = await cur.fetchone()
    assert row is not None
    return LLMUsage(
        calls=int(row["calls"]),
        prompt_tokens=int(row["prompt"]),
        completion_tokens=int(row["completion"]),
        since=since,
    )


async def write_ledger(
    conn: Conn, group_id: str, ledger: Ledger, episode_id: uuid.UUID | None, now: datetime
) -> None:
    if not ledger.entries:
        return
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO timestone.llm_ledger (group_id, episode_id, step, model, prompt_tokens,"
            " completion_tokens, ok, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    group_id,
                    episode_id,
                    e.step,
                    e.model,
                    e.prompt_tokens,
                    e.completion_tokens,
                    e.ok,
                    now,
                )
                for e in ledger.entries
            ],
        )


async def record_spent(db: Database, group_id: str, ledger: Ledger) -> None:
    """Work that failed wrote nothing, but the calls it made still count against the budget."""
    if not ledger.entries:
        return
    async with db.transaction(group_id, "recording LLM calls") as conn:
        await write_ledger(conn, group_id, ledger, None, utcnow())


async def previous_episodes(
    conn: Conn, group_id: str, saga: str | None, before: datetime
) -> list[tuple[datetime, str]]:
    """Up to ``MAX_PREVIOUS`` episodes before ``before`` (of the saga, if any), oldest first."""
    cur = await conn.execute(
        "SELECT reference_time, content FROM timestone.episodes"
        " WHERE group_id = %s AND expired_at IS NULL AND reference_time <= %s"
        " AND (%s::text IS NULL OR saga = %s) AND source <> 'document'"
        " ORDER BY reference_time DESC, created_at DESC LIMIT %s",
        (group_id, before, saga, saga, MAX_PREVIOUS),
    )
    rows = await cur.fetchall()
    return [(r["reference_time"], r["content"][:_PREVIOUS_CHARS]) for r in reversed(rows)]


async def summarize_saga(
    db: Database, group_id: str, llm: LLM, saga: str, limit: int = 1500
) -> tuple[str, Ledger]:
    """A summary of a saga's episodes in world-time order (small model, one call)."""
    async with db.transaction(group_id, "reading a saga") as conn:
        cur = await conn.execute(
            "SELECT reference_time, content FROM timestone.episodes"
            " WHERE group_id = %s AND expired_at IS NULL AND saga = %s"
            " ORDER BY reference_time, created_at",
            (group_id, saga),
        )
        rows = [(r["reference_time"], r["content"][:2000]) for r in await cur.fetchall()]
        budget, used = await read_budget(conn, group_id)
    if not rows:
        raise NotFound(f"no episodes in saga {saga!r} of this group")
    ledger = Ledger(budget=budget, used=used)
    try:
        answer = await call(
            llm,
            ledger,
            _request(P.SAGA_SUMMARY, P.saga_messages(saga, rows, limit), P.SAGA_SCHEMA, small=True),
            P.SagaSummary,
        )
    finally:
        await record_spent(db, group_id, ledger)
    return answer.summary.strip(), ledger


async def saga_episodes(conn: Conn, group_id: str, saga: str) -> list[Episode]:
    cur = await conn.execute(
        sql.SQL(
            "SELECT {} FROM timestone.episodes WHERE group_id = %s AND expired_at IS NULL"
            " AND saga = %s ORDER BY reference_time, created_at"
        ).format(EPISODE_COLUMNS),
        (group_id, saga),
    )
    return [episode_from_row(r) for r in await cur.fetchall()]


def check_budget(max_calls: object, max_tokens: object, period: object) -> LLMBudget | None:
    for value, what in ((max_calls, "max_calls"), (max_tokens, "max_tokens")):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise InvalidInput(f"{what} must be a non-negative integer or None, got {value!r:.80}")
    if not isinstance(period, timedelta) or period <= timedelta(0):
        raise InvalidInput(f"period must be a positive timedelta, got {period!r:.80}")
    if max_calls is None and max_tokens is None:
        return None
    return LLMBudget(
        max_calls=cast(int | None, max_calls),
        max_tokens=cast(int | None, max_tokens),
        period=period,
    )


async def set_budget(w: Write, budget: LLMBudget | None) -> None:
    await w.conn.execute(
        "UPDATE timestone.llm_budgets SET expired_at = %s"
        " WHERE group_id = %s AND expired_at IS NULL",
        (w.now, w.group_id),
    )
    if budget is not None:
        await w.conn.execute(
            "INSERT INTO timestone.llm_budgets (group_id, max_calls, max_tokens, period,"
            " created_at) VALUES (%s, %s, %s, %s, %s)",
            (w.group_id, budget.max_calls, budget.max_tokens, budget.period, w.now),
        )

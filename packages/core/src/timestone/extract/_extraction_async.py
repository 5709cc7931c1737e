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

import contextlib
import dataclasses
import json
import logging
import re
import uuid
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import pydantic
from psycopg import sql

from .._names import normalize, relation_name
from .._records import (
    EntityInput,
    Episode,
    FactInput,
    check_chars,
    check_name,
    check_relation,
    check_text,
    check_visible,
    storable,
)
from .._time import utcnow
from ..db._database_async import Conn, Database
from ..errors import (
    ExtractionWarning,
    InvalidInput,
    NotFound,
    OntologyViolation,
    TimestoneError,
)
from ..llm import LLM, LLMBudget, LLMRequest, LLMUsage
from ..ontology import EntityType, Ontology, date_from_number
from ..write._episodes_async import EPISODE_COLUMNS, episode_from_row
from ..write._transaction_async import Write
from . import _prompts as P
from ._calls_async import OUTPUT_RETRIES, STEPS, Ledger, call, why

if TYPE_CHECKING:
    pass

__all__ = [
    "MAX_EPISODE_CHARS",
    "OUTPUT_RETRIES",
    "Extracted",
    "Ledger",
    "Types",
    "build_types",
    "call",
    "check_episode_content",
    "check_max_chars",
    "extract",
    "model_request",
]

_log = logging.getLogger("timestone")

MAX_EPISODE_CHARS = 100_000
"""The longest text episode extracted in one model call; a longer text goes in as a
document (``add_document``)."""
SOURCES = ("text", "message", "json")
MAX_PREVIOUS = 10
_PREVIOUS_CHARS = 1000


# -- validation of the input -------------------------------------------------------------


def check_max_chars(max_chars: object) -> int:
    """The longest episode content a call takes: a positive integer."""
    if not isinstance(max_chars, int) or isinstance(max_chars, bool) or max_chars < 1:
        raise InvalidInput(f"max_chars must be a positive integer, got {max_chars!r:.80}")
    return max_chars


def check_episode_content(content: object, source: object, max_chars: int) -> str:
    """Refuse what no model should see: not text, empty, binary, oversized, bad JSON."""
    check_max_chars(max_chars)
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
    check_visible(content, "episode content")
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


MAX_INSTRUCTIONS = 20_000  # characters of a call's instructions, sent with every prompt


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
        excluded = frozenset(
            check_text(x, "a name of excluded_entity_types", max_chars=128)
            for x in cast(Iterable[object], excluded_entity_types)
        )
    if instructions is not None:
        if not isinstance(instructions, str):
            raise InvalidInput(f"instructions must be a string, got {type(instructions).__name__}")
        check_text(instructions, "instructions", max_chars=MAX_INSTRUCTIONS, allow_empty=True)
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


def model_request(
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
    return {a.key: a.value for a in items if a.key and a.value is not None}


def _check_attrs(
    model: type[pydantic.BaseModel] | None, values: dict[str, Any], what: str
) -> dict[str, Any]:
    if model is None or not values:
        return values
    known = {k: v for k, v in values.items() if k in model.model_fields}
    try:
        made = model.model_validate(known)
        # a number given for a date is no date (lax mode reads it as seconds since 1970):
        # that attribute goes, the others stay
        epoch = date_from_number(known, made, ())
        if epoch is not None:
            where, number = epoch[0][0], epoch[1]
            _warn(f"attributes of {what}: {where}: {number!r:.40} is a number, not a date; dropped")
            del known[where]
            return _check_attrs(model, known, what)
        return made.model_dump(mode="json", exclude_unset=True)
    except pydantic.ValidationError as exc:
        _warn(f"attributes of {what} fail {model.__name__} ({why(exc)}); dropped")
        return {}


def _type_name(given: str, allowed: Iterable[str]) -> str:
    """An extracted entity type in the one spelling it is stored under: a declared type
    whatever its case ("person" for Person); else CamelCase, as the prompt asks, when
    the model wrote it in one case ("person", "SPORTS_TEAM": Person, SportsTeam). Types
    are part of an entity's identity: told "Person" once and "person" next, a name would
    otherwise become two entities."""
    given = given.strip() or "Entity"
    declared = {n.casefold(): n for n in (*allowed, "Entity")}
    if given.casefold() in declared:
        return declared[given.casefold()]
    if given.islower() or given.isupper():
        words = [w for w in re.split(r"[\s_-]+", given) if w]
        return "".join(w[0].upper() + w[1:].lower() for w in words) or given
    return given


def _keep_entity(
    e: P.ExtractedEntity,
    entities: Mapping[str, EntityInput],
    types: Types,
    ontology: Ontology,
    read: str,
) -> EntityInput | None:
    """An extracted entity as stored; None for a name already kept, or (warned) where it
    breaks the call's ontology or does not occur in ``read`` (the normalized text the model
    was shown)."""
    allowed = set(types.entity_names)
    name = e.name.strip()
    try:
        check_name(name)  # empty, too long, not storable, invisible: nothing to keep
    except InvalidInput as exc:
        if name:
            _warn(f"entity {name!r:.60}: {exc}; dropped")
        return None
    etype = _type_name(e.type, allowed)
    if etype.casefold() in {x.casefold() for x in types.excluded}:
        return None
    if allowed and etype not in allowed:
        _warn(f"entity {name!r} has type {etype!r}, outside the ontology; dropped")
        return None
    kept = entities.get(normalize(name))
    if kept is not None:
        if kept.entity_type != etype:  # facts name entities by name alone: one per name
            _warn(
                f"entity {name!r} of type {etype} is {kept.name!r} of type {kept.entity_type} "
                "again; its facts are that entity's"
            )
        return None
    if not grounded(name, read):
        _warn(f"entity {name!r} does not occur in the text the model read; dropped")
        return None
    declared = types.entities.get(etype)
    attributes = _check_attrs(
        declared.attributes if declared else None, _attrs(e.attributes), f"{etype} {name!r}"
    )
    try:
        attributes = ontology.check_entity(etype, attributes, name)
    except (OntologyViolation, InvalidInput) as exc:
        _warn(f"entity {name!r}: {exc}; dropped")
        return None
    labels = () if etype == "Entity" else (etype,)
    try:
        return EntityInput(name, labels=labels, attributes=attributes)
    except InvalidInput as exc:  # a type no label may be: too long, a NUL
        _warn(f"entity {name!r:.60}: {exc}; dropped")
        return None


def _keep_fact(
    f: P.ExtractedFact,
    entities: Mapping[str, EntityInput],
    types: Types,
    ontology: Ontology,
    ref: datetime,
) -> FactInput | None:
    """An extracted fact as stored, or None (warned) where it names no extracted entity or
    breaks the call's ontology; its dates default to the reference time."""
    src, tgt = entities.get(normalize(f.source)), entities.get(normalize(f.target))
    if src is None or tgt is None:
        missing = f.source if src is None else f.target
        _warn(f"fact {f.fact!r} names {missing!r}, which is not an extracted entity; dropped")
        return None
    if src is tgt:  # a model's slip: a fact joins two things
        _warn(f"fact {f.fact!r} has {src.name!r} at both ends; dropped")
        return None
    relation = relation_name(f.relation)
    if relation is None:
        _warn(f"fact {f.fact!r} has no usable relation ({f.relation!r}); dropped")
        return None
    if types.closed_relations and relation not in types.edges:
        _warn(f"fact {f.fact!r}: relation {relation} is not in the closed ontology; dropped")
        return None
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
                f"fact {f.fact!r}: {relation} is not allowed from {pair[0]} to {pair[1]}; dropped"
            )
            return None
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
        return None
    valid_at = _date(f.valid_at, f"valid_at of {f.fact!r}")
    invalid_at = _date(f.invalid_at, f"invalid_at of {f.fact!r}")
    if valid_at is None and (invalid_at is None or invalid_at > ref):
        valid_at = ref
    # valid_at left None: a period told as over by then, its start untold ("stepped down
    # in April"); resolution finds the stored period it ends (``plan``)
    if valid_at is not None and invalid_at is not None and invalid_at <= valid_at:
        _warn(f"fact {f.fact!r}: invalid_at is not after valid_at; dropped")
        return None
    sentence = (
        f.fact.strip()[:10_000] or f"{src.name} {relation.lower().replace('_', ' ')} {tgt.name}."
    )
    if not storable(sentence):
        _warn(f"fact {sentence!r:.80}: a NUL byte or a lone surrogate; dropped")
        return None
    return FactInput(
        source=src,
        relation=relation,
        target=tgt,
        fact=sentence,
        valid_at=valid_at,
        invalid_at=invalid_at,
        attributes=attributes,
    )


def _keep(
    raw: P.Extraction, types: Types, ontology: Ontology, ref: datetime, read: str
) -> tuple[list[EntityInput], list[FactInput]]:
    entities: dict[str, EntityInput] = {}
    for e in raw.entities:
        kept = _keep_entity(e, entities, types, ontology, read)
        if kept is not None:
            entities[normalize(kept.name)] = kept
    facts: dict[tuple[object, ...], FactInput] = {}
    for f in raw.facts:
        kept = _keep_fact(f, entities, types, ontology, ref)
        if kept is not None:  # the same fact twice in one answer is one assertion
            facts.setdefault(_same_fact(kept), kept)
    return list(entities.values()), list(facts.values())


def _same_fact(f: FactInput) -> tuple[object, ...]:
    return (
        normalize(f.source_entity.name),
        f.relation,
        normalize(f.target_entity.name),
        f.fact,
        f.valid_at,
        f.invalid_at,
        json.dumps(f.attributes, sort_keys=True, default=str),
    )


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
    document_text: str = "",
    graph_names: Sequence[str] = (),
) -> Extracted:
    """Call 1: entities and facts of one episode, kept only where the ontology allows and
    named in what the model read (``document_text``: the whole document of a chunk) or in
    the graph (``graph_names``, see ``names_in_graph``)."""
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
    raw = await call(llm, ledger, model_request(P.EXTRACTION, messages, schema), P.Extraction)
    read = _read_text(
        content, source, previous, document, [*known_entities, *graph_names, document_text]
    )
    entities, facts = _keep(raw, types, ontology, reference_time, read)
    return Extracted(entities=entities, facts=facts, context=content[:4000])


_WORD = re.compile(r"\w+")
_PART = re.compile(r"[^\W_]+")
_HUMP = re.compile(r"(?<=[a-zß-öø-ÿ])(?=[A-ZÀ-ÖØ-Þ])|(?<=[A-Z])(?=[A-Z][a-z])")
# the scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, the kana,
# the CJK ideographs (a name's word is found inside a run of them)
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]"
)


def grounded(name: str, read: str) -> bool:
    """Every word of ``name`` (normalized) is a word of ``read``: "Order 1042" is grounded
    in ``{"order_id": 1042}``, a made-up "John Doe" is not, nor "Tom Ted" in "Tomorrow we
    started". Words split at what is not a letter or digit, and where a CamelCase word
    turns ("#StanfordUniversity", ``_humps``). A word of a script written without
    spaces (Chinese, Japanese, Thai, ...) need only occur in ``read``, and ends the words
    next to it ("Acme" in "住むAcmeの社員")."""
    words = frozenset(_PART.findall(_UNSPACED.sub(" ", read)))
    return all(
        word in words or (_UNSPACED.search(word) is not None and word in read)
        for word in _PART.findall(normalize(name))
    )


def _humps(text: str) -> str:
    """``text`` with a space where a word in CamelCase turns: a lower-case letter then a
    capital, or the last capital of an initialism before a word ("HTTPServer")."""
    return _HUMP.sub(" ", text)


def _read_text(
    content: str,
    source: str,
    previous: Sequence[tuple[datetime, str]],
    document: Mapping[str, str] | None,
    known_entities: Sequence[str],
) -> str:
    """What the model was shown of the episode, normalized like names: an entity whose
    name's words do not occur in it was made up (a small model does), and is not kept."""
    parts = [content, *(text for _, text in previous), *known_entities]
    parts += list((document or {}).values())
    if source == "json":  # its strings as the model reads them, escapes decoded
        with contextlib.suppress(ValueError):
            parts.append(json.dumps(json.loads(content), ensure_ascii=False))
    parts += [_humps(p) for p in parts if _HUMP.search(p)]
    return "\n".join(normalize(p) for p in parts)


# -- 2 and 3. resolution --------------------------------------------------------------------


# -- summaries --------------------------------------------------------------------------------


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
    return budget, await read_usage(conn, group_id, since=window_start(budget.period))


def window_start(period: timedelta) -> datetime | None:
    """The start of the budget's window ending now; None (ever) for a period that reaches
    back past the year 1, which a datetime cannot hold."""
    now = utcnow()
    return now - period if period < now - datetime.min.replace(tzinfo=UTC) else None


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
    ledger.held_at = now


async def record_spent(db: Database, group_id: str, ledger: Ledger) -> None:
    """Work that failed wrote nothing, but the calls it made still count against the budget.

    A write interrupted at its commit (a cancelled task, a Ctrl-C) may have committed, the
    calls' rows with it: rows of its transaction's time mean it did, and they are not
    written twice. The work's own error is what its caller needs: a failure to record the
    calls is logged, not raised in its place."""
    if not ledger.entries:
        return
    try:
        async with db.transaction(group_id, "recording LLM calls") as conn:
            if ledger.held_at is not None:
                cur = await conn.execute(
                    "SELECT EXISTS (SELECT FROM timestone.llm_ledger"
                    " WHERE group_id = %s AND created_at = %s) AS held",
                    (group_id, ledger.held_at),
                )
                row = await cur.fetchone()
                if row is not None and row["held"]:
                    return
            await write_ledger(conn, group_id, ledger, None, utcnow())
    except TimestoneError as exc:
        _log.warning("%d LLM call(s) of group %r not recorded: %s", ledger.calls, group_id, exc)


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


MAX_GRAPH_NAMES = 200


async def names_in_graph(conn: Conn, group_id: str, content: str) -> list[str]:
    """Names of the group's current entities that share a word with ``content``: "Jonas" in
    an episode lets the model write the "Jonas Weber" the graph already holds, which is
    resolution, not invention, even when the episode that named him is no longer among the
    previous ones shown."""
    words = sorted(set(_WORD.findall(normalize(content[:20_000]))))[:MAX_GRAPH_NAMES]
    if not words:
        return []
    cur = await conn.execute(
        "SELECT name FROM timestone.entities WHERE group_id = %s AND expired_at IS NULL"
        " AND fts @@ to_tsquery('simple', %s) LIMIT %s",
        (group_id, " | ".join(words), MAX_GRAPH_NAMES),
    )
    return [r["name"] for r in await cur.fetchall()]


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
            model_request(
                P.SAGA_SUMMARY, P.saga_messages(saga, rows, limit), P.SAGA_SCHEMA, small=True
            ),
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


# what the budget's columns hold: max_calls an integer, max_tokens a bigint
_MOST = {"max_calls": 2**31 - 1, "max_tokens": 2**63 - 1}


def check_budget(max_calls: object, max_tokens: object, period: object) -> LLMBudget | None:
    for value, what in ((max_calls, "max_calls"), (max_tokens, "max_tokens")):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise InvalidInput(f"{what} must be a non-negative integer or None, got {value!r:.80}")
        if value is not None and value > _MOST[what]:
            raise InvalidInput(f"{what} must be at most {_MOST[what]:,}, got {value:,}")
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

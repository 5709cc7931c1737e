"""Prompt text and JSON schemas of every model call, and the models that validate answers.

Every schema is strict-mode compatible (every property required, no extra
properties), so servers with structured outputs enforce it; servers in JSON
mode get the same schema in the prompt and the mechanism validates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any

import pydantic
from pydantic_core import PydanticCustomError

__all__ = [
    "CONDENSE",
    "ENTITY_RESOLUTION",
    "EXTRACTION",
    "FACT_RESOLUTION",
    "QUESTION_REWRITE",
    "REWRITE_ALTERNATIVES",
    "REWRITE_SCHEMA",
    "SAGA_SUMMARY",
    "Condensed",
    "EntityDecisions",
    "Extraction",
    "FactJudgements",
    "Rewrite",
    "SagaSummary",
    "condense_messages",
    "entity_resolution_messages",
    "extraction_messages",
    "extraction_schema",
    "fact_resolution_messages",
    "rewrite_messages",
    "saga_messages",
]

EXTRACTION = "extraction"
ENTITY_RESOLUTION = "entity_resolution"
FACT_RESOLUTION = "fact_resolution"
CONDENSE = "summary_condensation"
SAGA_SUMMARY = "saga_summary"


# -- answers ---------------------------------------------------------------------------


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")


# pydantic's lax mode reads JSON's true and false as the integers 1 and 0; where a number
# names an item, a candidate or a fact, that would read "no" as "the first one". A boolean
# there is malformed output (asked again), except ``false`` where null is allowed: a model
# that writes false for "none" means null, and is read so.


def _no_boolean(value: object) -> object:
    if isinstance(value, bool):
        raise PydanticCustomError(
            "boolean_number",
            "{value} is a boolean, not a number",
            {"value": "true" if value else "false"},
        )
    return value


def _false_is_null(value: object) -> object:
    return None if value is False else _no_boolean(value)


_Number = Annotated[int, pydantic.BeforeValidator(_no_boolean)]
_NumberOrNull = Annotated[int | None, pydantic.BeforeValidator(_false_is_null)]


class Attribute(_Strict):
    """A declared attribute's value as the model wrote it: the schema asks for a string,
    and a model in JSON mode (no schema enforced) writes a number or a boolean as
    itself. Each is kept for the declared type's model to read; a null is no value."""

    key: str
    value: str | bool | int | float | None  # smart mode: each read as its exact type


class ExtractedEntity(_Strict):
    name: str
    type: str
    attributes: list[Attribute] = pydantic.Field(default_factory=list[Attribute])


class ExtractedFact(_Strict):
    source: str
    relation: str
    target: str
    fact: str
    valid_at: str | None = None
    invalid_at: str | None = None
    attributes: list[Attribute] = pydantic.Field(default_factory=list[Attribute])


class Extraction(_Strict):
    entities: list[ExtractedEntity]
    facts: list[ExtractedFact]


class EntityDecision(_Strict):
    item: _Number
    match: _NumberOrNull


class EntityDecisions(_Strict):
    decisions: list[EntityDecision]


class FactJudgement(_Strict):
    new: _Number
    duplicate_of: _NumberOrNull
    contradicts: list[_Number]


class FactJudgements(_Strict):
    judgements: list[FactJudgement]


class CondensedSummary(_Strict):
    item: _Number
    summary: str


class Condensed(_Strict):
    summaries: list[CondensedSummary]


class SagaSummary(_Strict):
    summary: str


# -- schemas ---------------------------------------------------------------------------


def _obj(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def _list(item: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": dict(item)}


_STR: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer"}
_OPT_STR: dict[str, Any] = {"type": ["string", "null"]}
_OPT_INT: dict[str, Any] = {"type": ["integer", "null"]}
_ATTRS = _list(_obj({"key": _STR, "value": _STR}))


def extraction_schema(entity_types: Sequence[str], relations: Sequence[str]) -> dict[str, Any]:
    """Entities and facts; ``type`` (and ``relation``, when the relations are closed) enums."""
    etype: dict[str, Any] = {"type": "string", "enum": list(entity_types)} if entity_types else _STR
    rel: dict[str, Any] = {"type": "string", "enum": list(relations)} if relations else _STR
    return _obj(
        {
            "entities": _list(_obj({"name": _STR, "type": etype, "attributes": _ATTRS})),
            "facts": _list(
                _obj(
                    {
                        "source": _STR,
                        "relation": rel,
                        "target": _STR,
                        "fact": _STR,
                        "valid_at": _OPT_STR,
                        "invalid_at": _OPT_STR,
                        "attributes": _ATTRS,
                    }
                )
            ),
        }
    )


ENTITY_RESOLUTION_SCHEMA = _obj({"decisions": _list(_obj({"item": _INT, "match": _OPT_INT}))})
FACT_RESOLUTION_SCHEMA = _obj(
    {"judgements": _list(_obj({"new": _INT, "duplicate_of": _OPT_INT, "contradicts": _list(_INT)}))}
)
CONDENSE_SCHEMA = _obj({"summaries": _list(_obj({"item": _INT, "summary": _STR}))})
SAGA_SCHEMA = _obj({"summary": _STR})


# -- prompts ---------------------------------------------------------------------------

_EXTRACT_SYSTEM = """\
You extract a knowledge graph from one episode of an AI agent's memory.
Return the entities the episode names and the facts it states between them.

Entities: people, organisations, places, products, concepts and other things the \
episode names explicitly. Use the most complete name the episode gives. Do not \
invent entities; never extract dates, times or bare numbers as entities.

Facts: one fact per relationship the episode states, only between entities you \
returned (use their names exactly as given in "entities"). "relation" is an \
UPPER_SNAKE_CASE verb phrase (WORKS_AT, LIVES_IN). "fact" is one short, \
self-contained sentence that states the fact with full names.

Dates: "valid_at" is when the fact became true and "invalid_at" when it stopped, \
as ISO 8601 (2019-03-01T00:00:00Z). Resolve relative expressions ("last spring", \
"two years ago", "since 2019", "until March") against the reference time. Use null \
when the episode says nothing about a date: the mechanism then uses the reference \
time for valid_at. A fact stated as over ("used to", "left in 2020") gets invalid_at.

Attributes: key/value pairs only for the declared attributes of a type; else [].\
"""

_SOURCE_NOTES = {
    "text": "The episode is free text.",
    "message": (
        'The episode is a conversation, one message per line as "speaker: text". Every '
        "speaker is a Person entity; first-person words (I, me, my) refer to the speaker of "
        "that line and second-person words to the person addressed."
    ),
    "json": "The episode is a JSON document: its keys and values describe entities and facts.",
    "document": "The episode is one chunk of a longer document.",
}


def _types_block(
    entity_types: Mapping[str, str],
    edge_types: Mapping[str, str],
    edge_map: Mapping[tuple[str, str], Sequence[str]],
    entity_attributes: Mapping[str, Sequence[str]],
) -> str:
    lines: list[str] = []
    if entity_types:
        lines.append('Entity types (use exactly one as "type"; Entity if none fits):')
        for name, description in entity_types.items():
            attrs = entity_attributes.get(name, ())
            extra = f" Attributes: {', '.join(attrs)}." if attrs else ""
            lines.append(f"- {name}: {description or 'no description'}.{extra}")
    else:
        lines.append('Entity "type": a short CamelCase type (Person, Organization, Place).')
    if edge_types:
        lines.append("Relations (prefer these; their description says when they apply):")
        for name, description in edge_types.items():
            lines.append(f"- {name}: {description or 'no description'}")
    if edge_map:
        lines.append("Relations allowed between entity types (source, target):")
        for (src, tgt), rels in edge_map.items():
            lines.append(f"- ({src}, {tgt}): {', '.join(rels)}")
    return "\n".join(lines)


def extraction_messages(
    *,
    content: str,
    source: str,
    reference_time: datetime,
    source_description: str,
    previous: Sequence[tuple[datetime, str]],
    entity_types: Mapping[str, str],
    edge_types: Mapping[str, str],
    edge_map: Mapping[tuple[str, str], Sequence[str]],
    entity_attributes: Mapping[str, Sequence[str]],
    instructions: str | None,
    document: Mapping[str, str] | None = None,
    known_entities: Sequence[str] = (),
) -> list[dict[str, str]]:
    system = "\n\n".join(
        part
        for part in (
            _EXTRACT_SYSTEM,
            _SOURCE_NOTES.get(source, ""),
            _types_block(entity_types, edge_types, edge_map, entity_attributes),
            f"Further instructions:\n{instructions}" if instructions else "",
        )
        if part
    )
    parts: list[str] = []
    if previous:
        parts.append(
            "<PREVIOUS_EPISODES> (context only: extract nothing from them)\n"
            + "\n".join(f"[{when.isoformat()}] {text}" for when, text in previous)
            + "\n</PREVIOUS_EPISODES>"
        )
    if document:
        parts.append(
            "<DOCUMENT> (context only: extract from the CURRENT chunk)\n"
            + "\n".join(f"{k}: {v}" for k, v in document.items() if v)
            + "\n</DOCUMENT>"
        )
    if known_entities:
        parts.append(
            "<KNOWN_ENTITIES> (reuse these exact names for the same things)\n"
            + "\n".join(known_entities)
            + "\n</KNOWN_ENTITIES>"
        )
    if source_description:
        parts.append(f"<SOURCE>{source_description}</SOURCE>")
    parts.append(f"<REFERENCE_TIME>{reference_time.isoformat()}</REFERENCE_TIME>")
    parts.append(f"<CURRENT_EPISODE>\n{content}\n</CURRENT_EPISODE>")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


_RESOLVE_SYSTEM = """\
You decide whether newly mentioned entities are entities the graph already knows.
For each item, "match" is the number of the candidate that is the same real-world \
thing, or null when none is. Same thing means the same person, organisation, place \
or object, not merely a similar name: "Anna Smith" and "Anna Smyth" may be one \
person; "Paris, France" and "Paris, Texas" are not. When unsure, answer null.\
"""


def entity_resolution_messages(
    items: Sequence[Mapping[str, Any]], candidates: Sequence[Mapping[str, Any]], context: str
) -> list[dict[str, str]]:
    user = (
        f"<EPISODE>\n{context}\n</EPISODE>\n\n"
        f"<CANDIDATES>\n{json.dumps(list(candidates), ensure_ascii=False)}\n</CANDIDATES>\n\n"
        f"<ITEMS>\n{json.dumps(list(items), ensure_ascii=False)}\n</ITEMS>\n\n"
        "Answer one decision per item."
    )
    return [{"role": "system", "content": _RESOLVE_SYSTEM}, {"role": "user", "content": user}]


_FACTS_SYSTEM = """\
You compare new facts with facts the graph already holds.
For each new fact: "duplicate_of" is the number of an existing fact that states the \
same thing (same meaning, possibly other words), or null; "contradicts" lists the \
existing facts that the new fact makes no longer true (for example a new employer \
replacing an old one, a moved address, a changed preference). A fact that merely \
adds information contradicts nothing. When unsure, answer null and [].\
"""


def fact_resolution_messages(
    new: Sequence[Mapping[str, Any]], existing: Sequence[Mapping[str, Any]]
) -> list[dict[str, str]]:
    user = (
        f"<EXISTING_FACTS>\n{json.dumps(list(existing), ensure_ascii=False)}\n</EXISTING_FACTS>"
        f"\n\n<NEW_FACTS>\n{json.dumps(list(new), ensure_ascii=False)}\n</NEW_FACTS>\n\n"
        "Answer one judgement per new fact."
    )
    return [{"role": "system", "content": _FACTS_SYSTEM}, {"role": "user", "content": user}]


_CONDENSE_SYSTEM = """\
You condense what a knowledge graph knows about entities into short summaries.
For each item, write at most {limit} characters that keep every distinct fact, the \
most recent first, with dates where given. Do not add anything that is not in the text.\
"""


def condense_messages(items: Sequence[Mapping[str, Any]], limit: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": _CONDENSE_SYSTEM.format(limit=limit)},
        {
            "role": "user",
            "content": f"<ITEMS>\n{json.dumps(list(items), ensure_ascii=False)}\n</ITEMS>",
        },
    ]


_SAGA_SYSTEM = """\
You summarise a thread of episodes (a saga), given in world-time order, in at most \
{limit} characters: what happened, who was involved, and how things stand at the end.\
"""


def saga_messages(
    saga: str, episodes: Sequence[tuple[datetime, str]], limit: int
) -> list[dict[str, str]]:
    body = "\n".join(f"[{when.isoformat()}] {text}" for when, text in episodes)
    return [
        {"role": "system", "content": _SAGA_SYSTEM.format(limit=limit)},
        {"role": "user", "content": f"<SAGA name={json.dumps(saga)}>\n{body}\n</SAGA>"},
    ]


# -- the optional rewrite of a search question (``search._rewrite_async``) ----------------------

QUESTION_REWRITE = "question_rewrite"
REWRITE_ALTERNATIVES = 3

REWRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "alternatives": {"type": "array", "items": {"type": "string"}},
        "after": {"type": ["string", "null"]},
        "before": {"type": ["string", "null"]},
    },
    "required": ["alternatives", "after", "before"],
    "additionalProperties": False,
}

_REWRITE_SYSTEM = """\
You help a search over a memory of conversations, documents and facts. Given a \
question, write up to {n} alternative phrasings of it that the memory's text may \
hold: the statement an answer would be written in, synonyms, names written out. \
Keep each short; do not answer the question and do not add facts. When the \
question asks about a period of time, give it as "after" (first day, included) and \
"before" (first day after it), dates in YYYY-MM-DD, reading relative words ("last \
year", "two weeks ago") against the reference moment; otherwise null for both.\
"""


def _no_epoch(value: object) -> object:
    """A date as text: a number (or text of digits, "2024") is no date, where lax mode
    would read it as seconds since 1970."""
    text = value.strip() if isinstance(value, str) else None
    if (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
        text is not None and text.lstrip("+-").replace(".", "", 1).isdigit()
    ):
        raise PydanticCustomError(
            "number_date", "{value} is a number, not a date", {"value": repr(value)}
        )
    return value


_Date = Annotated[datetime | None, pydantic.BeforeValidator(_no_epoch)]


class Rewrite(pydantic.BaseModel):
    """A rewrite's answer: alternative phrasings and, optionally, a window of dates."""

    model_config = pydantic.ConfigDict(extra="forbid")
    alternatives: list[str]
    after: _Date
    before: _Date


def rewrite_messages(question: str, reference: datetime) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": _REWRITE_SYSTEM.format(n=REWRITE_ALTERNATIVES)},
        {
            "role": "user",
            "content": f"Reference moment: {reference.date().isoformat()}\n"
            f"<QUESTION>\n{question}\n</QUESTION>",
        },
    ]

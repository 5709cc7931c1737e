"""What the memory tools and retrievers of every adapter share: the text they show a
model, how they read the dates a model writes, the settings they are built with, and
the record of a search result as a retriever hands it over.

One line per fact with its citation id and its period; ISO 8601 dates read as
UTC when they name no zone; a memory, a group, the two clocks and a token budget
checked once, where the tools are made (``timestone._tools_async`` holds the
bodies); one metadata mapping per kind of record, the citation id included, so
that a LangChain ``Document`` and a LlamaIndex node of one search carry the same
keys. The public face of all this is ``timestone.toolkit``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from ._groups import check_group
from ._records import Entity, Episode, Fact
from ._results import citation_of
from ._time import Now, aware
from .errors import InvalidGroup, InvalidInput
from .search._context_async import MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET

if TYPE_CHECKING:
    from ._memory import Memory
    from ._memory_async import AsyncMemory

__all__ = [
    "DEFAULT_RETRIEVER_SCOPES",
    "DESCRIPTIONS",
    "RETRIEVER_SCOPES",
    "Found",
    "Retrieved",
    "check_scopes",
    "check_tool_settings",
    "day",
    "entity_record",
    "episode_record",
    "fact_line",
    "fact_record",
    "ranked_records",
]


def day(value: datetime | None) -> str:
    """The date of ``value``, or ``present`` for a period still open."""
    return value.date().isoformat() if value is not None else "present"


def fact_line(fact: Fact) -> str:
    """``[F-…] (from to until) sentence``, plus when the graph stopped holding it, if it did."""
    line = f"[{citation_of('fact', fact.id)}] ({day(fact.valid_at)} to {day(fact.invalid_at)})"
    line += f" {fact.fact}"
    if fact.expired_at is not None:
        line += f" (superseded in the record on {day(fact.expired_at)})"
    return line


def check_tool_settings(
    who: str,
    memory: object,
    group_id: object,
    *,
    valid_at: datetime | Now | None,
    as_of: datetime | None,
    token_budget: object,
    prefix: str = "",
) -> tuple[Memory | AsyncMemory, str]:
    """The memory and the group tools are made with, or the error naming what is wrong:
    ``TypeError`` for what is not a memory, the library's errors for the group and the
    clocks, ``ValueError`` for a budget ``context`` does not take (an integer from
    ``MIN_TOKEN_BUDGET`` to ``MAX_TOKEN_BUDGET``). ``prefix`` goes before each setting's
    name in a message: ``deps.`` for the settings an agent's deps object carries."""
    from ._memory import Memory  # at call time: the facade imports most of the core
    from ._memory_async import AsyncMemory

    if not isinstance(memory, (Memory, AsyncMemory)):
        setting = f" as {prefix}memory" if prefix else ""
        raise TypeError(
            f"{who} needs a timestone.Memory or AsyncMemory{setting}, got {type(memory)!r}"
        )
    try:
        group = check_group(group_id)
    except InvalidGroup as exc:  # its message starts with the setting's name, group_id
        if not prefix:
            raise
        raise InvalidGroup(f"{prefix}{exc}") from None
    if valid_at is not None and not isinstance(valid_at, Now):
        aware(valid_at, f"{prefix}valid_at")
    if as_of is not None:
        aware(as_of, f"{prefix}as_of")
    if (
        isinstance(token_budget, bool)
        or not isinstance(token_budget, int)
        or not MIN_TOKEN_BUDGET <= token_budget <= MAX_TOKEN_BUDGET
    ):
        raise ValueError(
            f"{prefix}token_budget must be an integer from {MIN_TOKEN_BUDGET} to "
            f"{MAX_TOKEN_BUDGET:,}, got {token_budget!r:.80}"
        )
    return memory, group


# What a model reads about each tool: a toolkit that describes a tool by its docstring
# (PydanticAI, LlamaIndex) takes these, the "Args:" section describing each argument.
DESCRIPTIONS = {
    "search_memory": """Search long-term memory for facts and passages relevant to the query.

Each item is dated and has a citation id in brackets.

Args:
    query: What to look for, in plain words.
""",
    "entity_timeline": """Every period of every fact about an entity, oldest first.

An entity is a person, place or thing: how what memory holds about it changed.

Args:
    entity: The entity's name.
    relation: Only this relation, e.g. "WORKS_AT"; default: every relation.
    since: Only periods that last past this ISO 8601 date; default: from the start.
    until: Only periods that start before this ISO 8601 date; default: to the end.
""",
    "remember": """Store one fact in long-term memory: subject -relation-> object.

Args:
    subject: Who or what the fact is about, e.g. "Mira".
    relation: An UPPER_SNAKE_CASE relation, e.g. "WORKS_AT".
    object: The other end of the fact, e.g. "Château Sud".
    sentence: The fact as a sentence; default: made from the three parts.
    valid_from: When it became true, as an ISO 8601 date or datetime (UTC unless it
        names a zone); default: now.
""",
}
"""What a model reads about each memory tool, by name: a summary and an ``Args:``
section describing each argument."""


# -- retrieved records --------------------------------------------------------------------

RETRIEVER_SCOPES = ("facts", "entities", "episodes")
"""What a retriever can search: facts, entities, and episodes (told episodes and the
chunks of documents)."""
DEFAULT_RETRIEVER_SCOPES = ("facts", "episodes")
"""A retriever's default: facts and episodes, ranked together, so that a memory of
documents answers as well as a memory of facts."""


def check_scopes(value: object) -> tuple[str, ...]:
    """The retriever scopes ``value`` names (a name or a list of names, in the order
    given, each once), or ``InvalidInput`` naming what is wrong."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Sequence) or not value:
        raise InvalidInput(
            f"scopes must name at least one of {', '.join(RETRIEVER_SCOPES)}, got {value!r:.80}"
        )
    given: Sequence[object] = value  # pyright: ignore[reportUnknownVariableType]
    unknown = [s for s in given if s not in RETRIEVER_SCOPES]
    if unknown:
        shown = ", ".join(f"{u!r:.80}" for u in unknown)
        raise InvalidInput(
            f"unknown scope(s) {shown}; the scopes are {', '.join(RETRIEVER_SCOPES)}"
        )
    return tuple(dict.fromkeys(str(s) for s in given))


@dataclasses.dataclass(frozen=True, slots=True)
class Retrieved:
    """One search result as a retriever hands it over: ``id`` (the record's stable id),
    ``text`` (what a model reads), ``metadata`` (JSON values only, the same keys in every
    adapter) and ``score``. ``metadata["citation"]`` is the id ``context()``, the tools and
    ``GroundedAnswer`` cite (``F-`` a fact, ``E-`` an episode or a document chunk; an
    entity has none: ``None``)."""

    id: str
    text: str
    metadata: dict[str, Any]
    score: float | None


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def fact_record(fact: Fact) -> Retrieved:
    """A fact: its sentence; its citation, ids, endpoints, both clocks, episodes, attributes
    and score."""
    return Retrieved(
        id=str(fact.id),
        text=fact.fact,
        metadata={
            "kind": "fact",
            "citation": citation_of("fact", fact.id),
            "id": str(fact.id),
            "version_id": str(fact.version_id),
            "group_id": fact.group_id,
            "source": fact.source,
            "source_id": str(fact.source_id),
            "relation": fact.relation,
            "target": fact.target,
            "target_id": str(fact.target_id),
            "valid_at": _iso(fact.valid_at),
            "invalid_at": _iso(fact.invalid_at),
            "created_at": _iso(fact.created_at),
            "expired_at": _iso(fact.expired_at),
            "episodes": [str(e) for e in fact.episodes],
            "attributes": dict(fact.attributes),
            "score": fact.score,
        },
        score=fact.score,
    )


def entity_record(entity: Entity) -> Retrieved:
    """An entity: ``name: summary``; its ids, labels, attributes, system clock and score."""
    text = f"{entity.name}: {entity.summary}" if entity.summary else entity.name
    return Retrieved(
        id=str(entity.id),
        text=text,
        metadata={
            "kind": "entity",
            "citation": None,
            "id": str(entity.id),
            "group_id": entity.group_id,
            "name": entity.name,
            "labels": list(entity.labels),
            "attributes": dict(entity.attributes),
            "created_at": _iso(entity.created_at),
            "expired_at": _iso(entity.expired_at),
            "score": entity.score,
        },
        score=entity.score,
    )


def episode_record(episode: Episode) -> Retrieved:
    """An episode or a document chunk: its verbatim content; its citation, where it came
    from (the document's uri and character offsets), both clocks and score."""
    return Retrieved(
        id=str(episode.id),
        text=episode.content,
        metadata={
            "kind": "episode",
            "citation": citation_of("episode", episode.id),
            "id": str(episode.id),
            "group_id": episode.group_id,
            "name": episode.name,
            "source": episode.source,
            "source_description": episode.source_description,
            "reference_time": _iso(episode.reference_time),
            "created_at": _iso(episode.created_at),
            "expired_at": _iso(episode.expired_at),
            "document_uri": episode.document_uri,
            "char_start": episode.char_start,
            "char_end": episode.char_end,
            "score": episode.score,
        },
        score=episode.score,
    )


class Found(Protocol):
    """What ``search`` returns, as far as a retriever needs it (``SearchResults``)."""

    @property
    def facts(self) -> Sequence[Fact]: ...
    @property
    def entities(self) -> Sequence[Entity]: ...
    @property
    def episodes(self) -> Sequence[Episode]: ...


def ranked_records(results: Found, k: int) -> list[Retrieved]:
    """The ``k`` best records of a search across its scopes, ranked together by their
    rank in their own scope (reciprocal rank fusion of the scopes' lists): the scopes'
    scores are on scales of their own (a fused rank of facts, a text score of episodes),
    so a scope's n-th record stands beside the other scopes' n-th. A tie keeps the order
    facts, entities, episodes. Each record keeps its own ``score``."""
    scopes = [
        [fact_record(f) for f in results.facts],
        [entity_record(e) for e in results.entities],
        [episode_record(e) for e in results.episodes],
    ]
    ranked = [(rank, scope, r) for scope, rs in enumerate(scopes) for rank, r in enumerate(rs)]
    ranked.sort(key=lambda t: (t[0], t[1]))
    return [r for _, _, r in ranked[:k]]

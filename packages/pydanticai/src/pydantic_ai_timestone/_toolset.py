"""The memory tools: search memory, an entity's timeline, remember a fact.

Each tool reads ``ctx.deps.memory`` and ``ctx.deps.group_id`` (``TimestoneDeps``
or any deps object with those attributes). Results are text the model can
read, each item with its citation id (``[F-…]`` for facts, ``[E-…]`` for
episodes). Bad arguments go back to the model as ``ModelRetry``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.toolsets import FunctionToolset

import timestone
from timestone._time import NOW
from timestone.errors import InvalidInput

from ._citations import citation_of
from ._deps import MemoryDeps

__all__ = ["entity_timeline", "memory_toolset", "remember", "search_memory"]


async def _call(ctx: RunContext[MemoryDeps], name: str, *args: Any, **kwargs: Any) -> Any:
    """``memory.<name>(group_id, *args, **kwargs)``, awaited or run in a worker thread."""
    mem = ctx.deps.memory
    method: Callable[..., Any] = getattr(mem, name)
    if isinstance(mem, timestone.AsyncMemory):
        return await method(ctx.deps.group_id, *args, **kwargs)
    return await asyncio.to_thread(lambda: method(ctx.deps.group_id, *args, **kwargs))


def _reading(ctx: RunContext[MemoryDeps]) -> dict[str, Any]:
    return {
        "valid_at": getattr(ctx.deps, "valid_at", NOW),
        "as_of": getattr(ctx.deps, "as_of", None),
    }


def _day(value: datetime | None) -> str:
    return value.date().isoformat() if value is not None else "present"


def fact_line(fact: timestone.Fact) -> str:
    """``[F-…] (from to until) sentence``, plus when the graph stopped holding it, if it did."""
    line = f"[{citation_of('fact', fact.id)}] ({_day(fact.valid_at)} to {_day(fact.invalid_at)})"
    line += f" {fact.fact}"
    if fact.expired_at is not None:
        line += f" (superseded in the record on {_day(fact.expired_at)})"
    return line


def _when(text: str, what: str = "valid_from") -> datetime:
    """An ISO 8601 date or datetime from a model; one without a zone is read as UTC."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput(f"{what} {text!r:.80} is not an ISO 8601 date, like 2024-05-01") from exc
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


async def search_memory(ctx: RunContext[MemoryDeps], query: str) -> str:
    """Search long-term memory for facts and passages relevant to the query.

    Args:
        query: What to look for, in plain words.
    """
    if not query.strip():
        raise ModelRetry("search_memory needs a non-empty query")
    budget = getattr(ctx.deps, "token_budget", 1200)
    try:
        context: Any = await _call(ctx, "context", query, token_budget=budget, **_reading(ctx))
    except InvalidInput as exc:  # a query too long, a NUL byte: the model can ask again
        raise ModelRetry(f"search_memory refused the query: {exc}") from exc
    if not len(context):
        return "Nothing in memory matches this query."
    return str(context.as_prompt())


async def entity_timeline(
    ctx: RunContext[MemoryDeps],
    entity: str,
    relation: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> str:
    """Every period of every fact about an entity (person, place, thing), oldest first.

    Args:
        entity: The entity's name.
        relation: Only this relation, e.g. "WORKS_AT"; default: every relation.
        since: Only periods that last past this ISO 8601 date; default: from the start.
        until: Only periods that start before this ISO 8601 date; default: to the end.
    """
    if not entity.strip():
        raise ModelRetry("entity_timeline needs an entity name")
    as_of = getattr(ctx.deps, "as_of", None)
    try:
        facts: list[timestone.Fact] = await _call(
            ctx,
            "timeline",
            entity,
            as_of=as_of,
            relation=relation,
            since=_when(since, "since") if since else None,
            until=_when(until, "until") if until else None,
        )
    except InvalidInput as exc:
        raise ModelRetry(f"entity_timeline refused the request: {exc}") from exc
    if not facts:
        narrowed = " of that relation or in those dates" if relation or since or until else ""
        return f"Memory holds no facts about {entity!r:.200}{narrowed}."
    return "\n".join([f"Timeline of {entity} (cite items by [id]):", *map(fact_line, facts)])


async def remember(
    ctx: RunContext[MemoryDeps],
    subject: str,
    relation: str,
    object: str,
    sentence: str | None = None,
    valid_from: str | None = None,
) -> str:
    """Store one fact in long-term memory: subject -relation-> object.

    Args:
        subject: Who or what the fact is about, e.g. "Mira".
        relation: An UPPER_SNAKE_CASE relation, e.g. "WORKS_AT".
        object: The other end of the fact, e.g. "Château Sud".
        sentence: The fact as a sentence; default: made from the three parts.
        valid_from: When it became true, as an ISO 8601 date or datetime (UTC unless it
            names a zone); default: now.
    """
    try:
        now = datetime.now(UTC)
        when = _when(valid_from) if valid_from else now
        fact = timestone.FactInput.parse(
            {
                "source": subject,
                "relation": relation,
                "target": object,
                "fact": sentence,
                "valid_at": when,
            }
        )
        result: timestone.IngestResult = await _call(
            ctx, "add_facts", [fact], reference_time=now, source_description="agent"
        )
    except InvalidInput as exc:
        raise ModelRetry(f"remember refused the fact: {exc}") from exc
    lines = [fact_line(f) for f in result.facts if f.relation == relation]
    return "Remembered:\n" + "\n".join(lines)


def memory_toolset(*, id: str = "timestone") -> FunctionToolset[Any]:
    """A toolset with ``search_memory``, ``entity_timeline`` and ``remember``."""
    return FunctionToolset[Any]([search_memory, entity_timeline, remember], id=id)

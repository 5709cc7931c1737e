"""The memory tools: search memory, an entity's timeline, remember a fact.

Each tool reads ``ctx.deps.memory`` and ``ctx.deps.group_id`` (``TimestoneDeps``
or any deps object with those attributes). The bodies are Timestone's own
(``timestone._aio._tools``, shared with the LangChain and LlamaIndex tools):
results are text the model can read, each item with its citation id (``[F-…]``
for facts, ``[E-…]`` for episodes). Bad arguments go back to the model as
``ModelRetry``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.toolsets import FunctionToolset

import timestone
from timestone._aio import _tools as atools
from timestone._sync import _tools as stools
from timestone._time import NOW
from timestone.errors import ToolRefused

from ._deps import MemoryDeps

__all__ = ["entity_timeline", "memory_toolset", "remember", "search_memory"]


async def _call(ctx: RunContext[MemoryDeps], name: str, *args: Any, **kwargs: Any) -> str:
    """The tool ``name`` on the run's memory and group: awaited for an ``AsyncMemory``,
    the blocking twin in a worker thread for a ``Memory``; a refusal becomes a retry."""
    mem = ctx.deps.memory
    group = ctx.deps.group_id
    try:
        if isinstance(mem, timestone.AsyncMemory):
            return await getattr(atools, name)(mem, group, *args, **kwargs)
        return await asyncio.to_thread(lambda: getattr(stools, name)(mem, group, *args, **kwargs))
    except ToolRefused as exc:
        raise ModelRetry(str(exc)) from exc


async def search_memory(ctx: RunContext[MemoryDeps], query: str) -> str:
    """Search long-term memory for facts and passages relevant to the query.

    Args:
        query: What to look for, in plain words.
    """
    return await _call(
        ctx,
        "search_memory",
        query,
        valid_at=getattr(ctx.deps, "valid_at", NOW),
        as_of=getattr(ctx.deps, "as_of", None),
        token_budget=getattr(ctx.deps, "token_budget", atools.DEFAULT_TOKEN_BUDGET),
    )


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
    return await _call(
        ctx,
        "entity_timeline",
        entity,
        relation=relation,
        since=since,
        until=until,
        as_of=getattr(ctx.deps, "as_of", None),
    )


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
    return await _call(
        ctx, "remember", subject, relation, object, sentence=sentence, valid_from=valid_from
    )


def memory_toolset(*, id: str = "timestone") -> FunctionToolset[Any]:
    """A toolset with ``search_memory``, ``entity_timeline`` and ``remember``."""
    return FunctionToolset[Any]([search_memory, entity_timeline, remember], id=id)

"""The memory tools: search memory, an entity's timeline, remember a fact.

Each tool reads ``ctx.deps.memory`` and ``ctx.deps.group_id`` (``TimestoneDeps``
or any deps object with those attributes). The bodies are Timestone's own
(``timestone.toolkit``, shared with the LangChain and LlamaIndex tools):
results are text the model can read, each item with its citation id (``[F-…]``
for facts, ``[E-…]`` for episodes). Bad arguments go back to the model as
``ModelRetry``; deps the tools cannot work with (not a memory, a malformed group, a
naive clock, a budget out of range) raise to the caller of the run before a tool runs,
naming the setting (``deps.group_id``): the model cannot fix them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.toolsets import FunctionToolset

import timestone
from timestone.errors import ToolRefused
from timestone.toolkit import (
    ASYNC_TOOLS,
    DEFAULT_TOKEN_BUDGET,
    DESCRIPTIONS,
    NOW,
    TOOLS,
    check_tool_settings,
)

from ._deps import MemoryDeps

__all__ = ["entity_timeline", "memory_toolset", "remember", "search_memory"]


# the settings each tool reads from the deps, besides the memory and the group
_READS = {"search_memory": ("valid_at", "as_of", "token_budget"), "entity_timeline": ("as_of",)}


def _deps(deps: object) -> tuple[timestone.Memory | timestone.AsyncMemory, str, dict[str, Any]]:
    """The memory, the group and the settings the tools read from the run's deps, checked
    as ``TimestoneDeps`` checks them: the deps are the developer's, so an error raises to
    the caller of the run."""
    settings: dict[str, Any] = {
        "valid_at": getattr(deps, "valid_at", NOW),
        "as_of": getattr(deps, "as_of", None),
        "token_budget": getattr(deps, "token_budget", DEFAULT_TOKEN_BUDGET),
    }
    memory, group = check_tool_settings(
        "memory_toolset",
        getattr(deps, "memory", None),
        getattr(deps, "group_id", None),
        **settings,
        prefix="deps.",
    )
    return memory, group, settings


async def _call(ctx: RunContext[MemoryDeps], name: str, *args: Any, **kwargs: Any) -> str:
    """The tool ``name`` on the run's memory and group, with the settings of its deps:
    awaited for an ``AsyncMemory``, the blocking twin in a worker thread for a ``Memory``;
    a refusal of the model's arguments becomes a retry."""
    mem, group, settings = _deps(ctx.deps)
    kwargs.update({k: settings[k] for k in _READS.get(name, ())})
    try:
        if isinstance(mem, timestone.AsyncMemory):
            return await ASYNC_TOOLS[name](mem, group, *args, **kwargs)
        return await asyncio.to_thread(lambda: TOOLS[name](mem, group, *args, **kwargs))
    except ToolRefused as exc:
        raise ModelRetry(str(exc)) from exc


async def search_memory(ctx: RunContext[MemoryDeps], query: str) -> str:
    """The ``search_memory`` tool of ``timestone.toolkit``; the model reads
    ``timestone.toolkit.DESCRIPTIONS["search_memory"]`` (this docstring
    at import)."""
    return await _call(ctx, "search_memory", query)


search_memory.__doc__ = DESCRIPTIONS["search_memory"]


async def entity_timeline(
    ctx: RunContext[MemoryDeps],
    entity: str,
    relation: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> str:
    """The ``entity_timeline`` tool of ``timestone.toolkit``; the model reads
    ``timestone.toolkit.DESCRIPTIONS["entity_timeline"]`` (this docstring
    at import)."""
    return await _call(ctx, "entity_timeline", entity, relation=relation, since=since, until=until)


entity_timeline.__doc__ = DESCRIPTIONS["entity_timeline"]


async def remember(
    ctx: RunContext[MemoryDeps],
    subject: str,
    relation: str,
    object: str,
    sentence: str | None = None,
    valid_from: str | None = None,
) -> str:
    """The ``remember`` tool of ``timestone.toolkit``; the model reads
    ``timestone.toolkit.DESCRIPTIONS["remember"]`` (this docstring
    at import)."""
    return await _call(
        ctx, "remember", subject, relation, object, sentence=sentence, valid_from=valid_from
    )


remember.__doc__ = DESCRIPTIONS["remember"]


def memory_toolset(*, id: str = "timestone") -> FunctionToolset[Any]:
    """A toolset with ``search_memory``, ``entity_timeline`` and ``remember``."""
    return FunctionToolset[Any]([search_memory, entity_timeline, remember], id=id)

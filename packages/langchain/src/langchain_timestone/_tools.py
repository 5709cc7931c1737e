"""``timestone_tools``: Timestone's memory as LangChain tools an agent can call.

``search_memory`` (evidence for a question, with dates and citation ids),
``entity_timeline`` (every period about an entity, narrowed by relation and
dates) and ``remember`` (store one fact). The bodies are Timestone's own
(``timestone.toolkit``, shared with the PydanticAI toolset and the
LlamaIndex tool spec). Arguments the library refuses come back to the model as
the tool's answer (a ``ToolException``, handled), so it can try again; other
errors (the database, the embedder) fail the run as usual.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

import timestone
from timestone.errors import ToolRefused
from timestone.toolkit import (
    ASYNC_TOOLS,
    DEFAULT_TOKEN_BUDGET,
    DESCRIPTIONS,
    NOW,
    TOOL_NAMES,
    TOOLS,
    Now,
    check_tool_settings,
)

__all__ = ["timestone_tools"]


class SearchMemoryArgs(BaseModel):
    query: str = Field(description="What to look for, in plain words.")


class EntityTimelineArgs(BaseModel):
    entity: str = Field(description="The entity's name (a person, place or thing).")
    relation: str | None = Field(
        default=None, description='Only this relation, e.g. "WORKS_AT"; default: every relation.'
    )
    since: str | None = Field(
        default=None,
        description="Only periods that last past this ISO 8601 date; default: from the start.",
    )
    until: str | None = Field(
        default=None,
        description="Only periods that start before this ISO 8601 date; default: to the end.",
    )


class RememberArgs(BaseModel):
    subject: str = Field(description='Who or what the fact is about, e.g. "Mira".')
    relation: str = Field(description='An UPPER_SNAKE_CASE relation, e.g. "WORKS_AT".')
    object: str = Field(description='The other end of the fact, e.g. "Château Sud".')
    sentence: str | None = Field(
        default=None, description="The fact as a sentence; default: made from the three parts."
    )
    valid_from: str | None = Field(
        default=None,
        description="When it became true, as an ISO 8601 date or datetime (UTC unless it "
        "names a zone); default: now.",
    )


# the summary of each tool's shared description; its arguments are the schemas' fields
_DESCRIPTIONS = {name: DESCRIPTIONS[name].split("\nArgs:")[0].strip() for name in TOOL_NAMES}
_SCHEMAS: dict[str, type[BaseModel]] = {
    "search_memory": SearchMemoryArgs,
    "entity_timeline": EntityTimelineArgs,
    "remember": RememberArgs,
}


def timestone_tools(
    memory: timestone.Memory | timestone.AsyncMemory,
    group_id: str,
    *,
    valid_at: datetime | Now | None = NOW,
    as_of: datetime | None = None,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
) -> list[BaseTool]:
    """``search_memory``, ``entity_timeline`` and ``remember`` over ``group_id``.

    ``valid_at``/``as_of``: the world time and system time the reads speak of (default:
    now); ``token_budget``: how much evidence one ``search_memory`` returns. On a
    ``timestone.Memory`` the tools run with ``invoke`` and ``ainvoke`` (in a worker
    thread); on an ``AsyncMemory``, with ``ainvoke`` only.
    """
    memory, group = check_tool_settings(
        "timestone_tools",
        memory,
        group_id,
        valid_at=valid_at,
        as_of=as_of,
        token_budget=token_budget,
    )
    settings: dict[str, dict[str, Any]] = {
        "search_memory": {"valid_at": valid_at, "as_of": as_of, "token_budget": token_budget},
        "entity_timeline": {"as_of": as_of},
        "remember": {},
    }
    return [_tool(memory, group, name, settings[name]) for name in _DESCRIPTIONS]


def _tool(
    memory: timestone.Memory | timestone.AsyncMemory,
    group: str,
    name: str,
    settings: dict[str, Any],
) -> BaseTool:
    def run(**kwargs: Any) -> str:
        if not isinstance(memory, timestone.Memory):
            raise TypeError(
                f"the {name} tool wraps an AsyncMemory: call ainvoke (an async agent), or "
                "build the tools on a timestone.Memory for invoke"
            )
        body = TOOLS[name]
        try:  # the schema's fields are the body's parameters, by name
            return body(memory, group, **kwargs, **settings)
        except ToolRefused as exc:
            raise ToolException(str(exc)) from exc

    async def arun(**kwargs: Any) -> str:
        if isinstance(memory, timestone.Memory):
            return await asyncio.to_thread(lambda: run(**kwargs))
        abody = ASYNC_TOOLS[name]
        try:
            return await abody(memory, group, **kwargs, **settings)
        except ToolRefused as exc:
            raise ToolException(str(exc)) from exc

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=name,
        description=_DESCRIPTIONS[name],
        args_schema=_SCHEMAS[name],
        handle_tool_error=True,
    )

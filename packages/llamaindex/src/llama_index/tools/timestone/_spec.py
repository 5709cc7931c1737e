"""``TimestoneToolSpec``: search memory, an entity's timeline and remember, for an agent.

The bodies are Timestone's own (``timestone.toolkit``, shared with the
PydanticAI toolset and the LangChain tools): each returns text the model can read,
every item with its citation id. Arguments the library refuses raise
``timestone.errors.ToolRefused``, whose message names the tool and the reason;
a LlamaIndex agent hands that message back to the model as the tool's (error)
output, so it can try again.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from llama_index.core.tools.tool_spec.base import BaseToolSpec

import timestone
from timestone import toolkit
from timestone.toolkit import DEFAULT_TOKEN_BUDGET, DESCRIPTIONS, NOW, Now, check_tool_settings

__all__ = ["TimestoneToolSpec"]


class TimestoneToolSpec(BaseToolSpec):
    """The memory tools over one group: ``to_tool_list()`` gives ``search_memory``,
    ``entity_timeline`` and ``remember`` as ``FunctionTool``s, each with a blocking and an
    async body.

    ``valid_at``/``as_of``: the world time and system time the reads speak of (default:
    now); ``token_budget``: how much evidence one ``search_memory`` returns. On a
    ``timestone.Memory`` both ``call`` and ``acall`` work (``acall`` in a worker thread);
    on an ``AsyncMemory``, ``acall`` only.
    """

    spec_functions = [  # noqa: RUF012 (BaseToolSpec declares it a class attribute)
        ("search_memory", "asearch_memory"),
        ("entity_timeline", "aentity_timeline"),
        ("remember", "aremember"),
    ]

    def __init__(
        self,
        memory: timestone.Memory | timestone.AsyncMemory,
        group_id: str,
        *,
        valid_at: datetime | Now | None = NOW,
        as_of: datetime | None = None,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
    ) -> None:
        self.memory, self.group_id = check_tool_settings(
            "TimestoneToolSpec",
            memory,
            group_id,
            valid_at=valid_at,
            as_of=as_of,
            token_budget=token_budget,
        )
        self.valid_at = valid_at
        self.as_of = as_of
        self.token_budget = token_budget

    def _blocking(self, tool: str) -> timestone.Memory:
        if not isinstance(self.memory, timestone.Memory):
            raise TypeError(
                f"the {tool} tool wraps an AsyncMemory: call acall (an async agent), or build "
                "the spec on a timestone.Memory for call"
            )
        return self.memory

    def search_memory(self, query: str) -> str:
        return toolkit.search_memory(
            self._blocking("search_memory"), self.group_id, query, **self._search()
        )

    search_memory.__doc__ = DESCRIPTIONS["search_memory"]

    async def asearch_memory(self, query: str) -> str:
        """``search_memory`` for async agents (its description is the blocking one's)."""
        mem = self.memory
        if isinstance(mem, timestone.Memory):
            return await asyncio.to_thread(self.search_memory, query)
        return await toolkit.asearch_memory(mem, self.group_id, query, **self._search())

    def entity_timeline(
        self,
        entity: str,
        relation: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> str:
        return toolkit.entity_timeline(
            self._blocking("entity_timeline"),
            self.group_id,
            entity,
            relation=relation,
            since=since,
            until=until,
            as_of=self.as_of,
        )

    entity_timeline.__doc__ = DESCRIPTIONS["entity_timeline"]

    async def aentity_timeline(
        self,
        entity: str,
        relation: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> str:
        """``entity_timeline`` for async agents (its description is the blocking one's)."""
        mem = self.memory
        if isinstance(mem, timestone.Memory):
            return await asyncio.to_thread(self.entity_timeline, entity, relation, since, until)
        return await toolkit.aentity_timeline(
            mem,
            self.group_id,
            entity,
            relation=relation,
            since=since,
            until=until,
            as_of=self.as_of,
        )

    def remember(
        self,
        subject: str,
        relation: str,
        object: str,
        sentence: str | None = None,
        valid_from: str | None = None,
    ) -> str:
        return toolkit.remember(
            self._blocking("remember"),
            self.group_id,
            subject,
            relation,
            object,
            sentence=sentence,
            valid_from=valid_from,
        )

    remember.__doc__ = DESCRIPTIONS["remember"]

    async def aremember(
        self,
        subject: str,
        relation: str,
        object: str,
        sentence: str | None = None,
        valid_from: str | None = None,
    ) -> str:
        """``remember`` for async agents (its description is the blocking one's)."""
        mem = self.memory
        if isinstance(mem, timestone.Memory):
            return await asyncio.to_thread(
                self.remember, subject, relation, object, sentence, valid_from
            )
        return await toolkit.aremember(
            mem,
            self.group_id,
            subject,
            relation,
            object,
            sentence=sentence,
            valid_from=valid_from,
        )

    def _search(self) -> dict[str, Any]:
        return {"valid_at": self.valid_at, "as_of": self.as_of, "token_budget": self.token_budget}

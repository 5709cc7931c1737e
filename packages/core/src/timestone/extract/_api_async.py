"""What ``AsyncMemory`` offers around its model: sagas, the LLM budget and usage."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .._records import (
    Episode,
    check_text,
)
from .._time import aware
from ..db._database_async import Database
from ..embedders import Embedder
from ..errors import LLMError
from ..llm import LLM, LLMBudget, LLMUsage
from ..write._transaction_async import begin_write
from ._extraction_async import (
    check_budget,
    read_budget,
    read_usage,
    saga_episodes,
    set_budget,
    summarize_saga,
)

__all__ = ["ModelAPI"]


class ModelAPI:
    """The model-related methods of ``AsyncMemory``: saga summaries, the LLM budget and the
    usage ledger."""

    _db: Database
    embedder: Embedder
    llm: Any

    def _llm(self, what: str) -> LLM:
        if self.llm is None:
            raise LLMError(
                f"{what} needs an LLM, and none is configured: pass "
                "llm=timestone.OpenAICompatibleLLM(...) to open(), or set OPENAI_API_KEY or "
                "OPENAI_BASE_URL; add_facts ingests structured facts without any LLM",
                step="configuration",
            )
        return self.llm

    async def saga_episodes(self, group_id: str, saga: str) -> list[Episode]:
        """The episodes of a saga (a named thread), in world-time order."""
        name = check_text(saga, "saga", max_chars=512)
        async with self._db.transaction(group_id, "reading a saga") as conn:
            return await saga_episodes(conn, group_id, name)

    async def summarize_saga(self, group_id: str, saga: str) -> str:
        """A summary of a saga, on request: one call to the small model (counted and budgeted)."""
        name = check_text(saga, "saga", max_chars=512)
        text, _ = await summarize_saga(self._db, group_id, self._llm("summarize_saga"), name)
        return text

    async def set_llm_budget(
        self,
        group_id: str,
        *,
        max_calls: int | None = None,
        max_tokens: int | None = None,
        period: timedelta = timedelta(days=1),
    ) -> LLMBudget | None:
        """Limit the group's LLM calls and/or tokens in any window of ``period``; both
        ``None`` removes the budget. Work the budget cannot cover is refused before a call."""
        budget = check_budget(max_calls, max_tokens, period)
        async with self._db.transaction(group_id, "setting an LLM budget") as conn:
            w = await begin_write(conn, group_id, self.embedder, keys=["llm-budget"])
            await set_budget(w, budget)
        return budget

    async def llm_budget(self, group_id: str) -> LLMBudget | None:
        """The group's LLM budget, or ``None``."""
        async with self._db.transaction(group_id, "reading the LLM budget") as conn:
            return (await read_budget(conn, group_id))[0]

    async def llm_usage(self, group_id: str, *, since: datetime | None = None) -> LLMUsage:
        """The LLM calls and tokens the group spent since ``since`` (default: ever), failed
        work included."""
        point = None if since is None else aware(since, "since")
        async with self._db.transaction(group_id, "reading LLM usage") as conn:
            return await read_usage(conn, group_id, since=point)

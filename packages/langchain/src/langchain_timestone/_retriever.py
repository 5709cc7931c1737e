"""``TimestoneRetriever``: a LangChain ``BaseRetriever`` over Timestone's hybrid search."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, ValidationInfo, field_validator

import timestone
from timestone.errors import InvalidInput
from timestone.toolkit import (
    DEFAULT_RETRIEVER_SCOPES,
    MAX_SEARCH_LIMIT,
    NOW,
    Now,
    check_aware,
    check_group,
)
from timestone.toolkit import check_scopes as _check_scopes

from ._documents import ranked_documents

__all__ = ["TimestoneRetriever"]


def _check_k(value: object) -> int:
    """``k``, the number of documents, or ``InvalidInput`` naming it: as many as one
    search returns at most."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_SEARCH_LIMIT:
        raise InvalidInput(f"k must be an integer from 1 to {MAX_SEARCH_LIMIT}, got {value!r:.80}")
    return value


class TimestoneRetriever(BaseRetriever):
    """Facts and passages (episodes and document chunks) relevant to a query, ranked
    together, as ``Document``s; ``scopes=`` narrows or widens what is searched (``facts``,
    ``entities``, ``episodes``).

    A record's text is the content; its citation id (``F-…``/``E-…``, as ``context()``
    and the tools cite it), ids, both clocks, source and score are in ``metadata``, the
    same keys as LlamaIndex's nodes (``timestone.toolkit.fact_record``). ``valid_at``:
    the world time the facts must hold at (default: now; ``None``: every period).
    ``as_of``: what the graph held at that system time (default: now). ``k`` can also be
    passed per call: ``retriever.invoke(query, k=2)``; either way from 1 to
    ``timestone.toolkit.MAX_SEARCH_LIMIT``, the most one search returns.
    """

    # a misspelt setting (top_k=) is refused, not ignored
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    memory: timestone.Memory | timestone.AsyncMemory
    group_id: str
    k: int = 4
    scopes: tuple[str, ...] = DEFAULT_RETRIEVER_SCOPES
    valid_at: datetime | Now | None = NOW
    as_of: datetime | None = None

    @field_validator("group_id", mode="before")
    @classmethod
    def _group(cls, value: object) -> str:
        return check_group(value)

    @field_validator("valid_at", "as_of", mode="before")
    @classmethod
    def _not_a_number(cls, value: object, info: ValidationInfo) -> object:
        # pydantic reads a number as seconds since 1970: as_of=2019 would be 1970-01-01
        if isinstance(value, (int, float)):
            raise InvalidInput(
                f"{info.field_name} must be a timezone-aware datetime, got {type(value).__name__}"
            )
        return value

    @field_validator("valid_at", "as_of")
    @classmethod
    def _aware(cls, value: datetime | Now | None) -> datetime | Now | None:
        return value if value is None or value is NOW else check_aware(value, "valid_at/as_of")

    @field_validator("k", mode="before")
    @classmethod
    def _k(cls, value: object) -> int:
        return _check_k(value)

    @field_validator("scopes", mode="before")
    @classmethod
    def _scopes(cls, value: object) -> tuple[str, ...]:
        return _check_scopes(value)

    def _search_args(self, query: str, k: int | None) -> dict[str, Any]:
        n = self.k if k is None else _check_k(k)
        return {
            "group_id": self.group_id,
            "query": query,
            "limit": n,
            "scopes": self.scopes,
            "valid_at": self.valid_at,
            "as_of": self.as_of,
            # the records of structured facts are not passages: their facts are the answer
            "fact_records": False,
        }

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        mem = self.memory
        if not isinstance(mem, timestone.Memory):
            raise TypeError(
                "this TimestoneRetriever wraps an AsyncMemory: call ainvoke, or build it on a "
                "timestone.Memory for invoke"
            )
        args = self._search_args(query, k)
        return ranked_documents(mem.search(**args), args["limit"])

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
    ) -> list[Document]:
        mem = self.memory
        args = self._search_args(query, k)
        if isinstance(mem, timestone.Memory):
            results = await asyncio.to_thread(lambda: mem.search(**args))
        else:
            results = await mem.search(**args)
        return ranked_documents(results, args["limit"])

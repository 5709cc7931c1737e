"""``TimestoneRetriever``: a LangChain ``BaseRetriever`` over Timestone's hybrid search."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, field_validator

import timestone
from timestone._groups import check_group
from timestone._time import NOW, Now, aware

from ._documents import ranked_documents

__all__ = ["TimestoneRetriever"]

_SCOPES = frozenset({"facts", "entities", "episodes"})


class TimestoneRetriever(BaseRetriever):
    """Facts (and optionally entities and episodes) relevant to a query, as ``Document``s.

    A fact's sentence is the content; its ids, endpoints, both clocks, episodes and score are
    in ``metadata``. ``valid_at``: the world time the facts must hold at (default: now;
    ``None``: every period). ``as_of``: what the graph held at that system time (default:
    now). ``k`` can also be passed per call: ``retriever.invoke(query, k=2)``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: timestone.Memory | timestone.AsyncMemory
    group_id: str
    k: int = 4
    scopes: tuple[str, ...] = ("facts",)
    valid_at: datetime | Now | None = NOW
    as_of: datetime | None = None

    @field_validator("group_id", mode="before")
    @classmethod
    def _group(cls, value: object) -> str:
        return check_group(value)

    @field_validator("valid_at", "as_of")
    @classmethod
    def _aware(cls, value: datetime | Now | None) -> datetime | Now | None:
        return value if value is None or value is NOW else aware(value, "valid_at/as_of")

    @field_validator("k")
    @classmethod
    def _k(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"k must be at least 1, got {value}")
        return value

    @field_validator("scopes", mode="before")
    @classmethod
    def _scopes(cls, value: object) -> tuple[str, ...]:
        if isinstance(value, str):
            value = (value,)
        if not isinstance(value, Sequence) or not value:
            raise ValueError("scopes must name at least one of: facts, entities, episodes")
        scopes = tuple(str(v) for v in value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        unknown = sorted(set(scopes) - _SCOPES)
        if unknown:
            raise ValueError(
                f"unknown scope(s) {', '.join(f'{u!r:.80}' for u in unknown)}; use facts, "
                "entities or episodes"
            )
        return scopes

    def _search_args(self, query: str, k: int | None) -> dict[str, Any]:
        n = self.k if k is None else k
        return {
            "group_id": self.group_id,
            "query": query,
            "limit": n,
            "scopes": self.scopes,
            "valid_at": self.valid_at,
            "as_of": self.as_of,
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

"""Timestone for LangChain and LangGraph: a retriever, a long-term memory store, an
agent middleware that recalls before the model and records after the agent, and the
memory tools an agent calls (search, an entity's timeline, remember)."""

from ._documents import entity_document, episode_document, fact_document
from ._middleware import TimestoneMemoryMiddleware
from ._retriever import TimestoneRetriever
from ._store import TimestoneStore
from ._tools import timestone_tools

__all__ = [
    "TimestoneMemoryMiddleware",
    "TimestoneRetriever",
    "TimestoneStore",
    "entity_document",
    "episode_document",
    "fact_document",
    "timestone_tools",
]

"""Timestone for LangChain and LangGraph: a retriever, a long-term memory store, and an
agent middleware that recalls before the model and records after the agent."""

from ._documents import entity_document, episode_document, fact_document
from ._middleware import TimestoneMemoryMiddleware
from ._retriever import TimestoneRetriever
from ._store import TimestoneStore

__all__ = [
    "TimestoneMemoryMiddleware",
    "TimestoneRetriever",
    "TimestoneStore",
    "entity_document",
    "episode_document",
    "fact_document",
]

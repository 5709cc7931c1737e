"""Timestone for LangChain and LangGraph: a retriever, a long-term memory store, and an
agent middleware that recalls before the model and records after the agent."""

from ._store import TimestoneStore

__all__ = ["TimestoneStore"]

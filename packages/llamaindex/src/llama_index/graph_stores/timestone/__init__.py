"""Timestone for LlamaIndex: a property graph store and a retriever for query engines."""

from ._graph_store import TimestonePropertyGraphStore
from ._retriever import TimestoneRetriever, entity_node, episode_node, fact_node

__all__ = [
    "TimestonePropertyGraphStore",
    "TimestoneRetriever",
    "entity_node",
    "episode_node",
    "fact_node",
]

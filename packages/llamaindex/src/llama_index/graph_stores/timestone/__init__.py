"""Timestone for LlamaIndex: a retriever for query engines, with Timestone's two clocks."""

from ._retriever import TimestoneRetriever, entity_node, episode_node, fact_node

__all__ = ["TimestoneRetriever", "entity_node", "episode_node", "fact_node"]

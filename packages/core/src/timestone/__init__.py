"""Timestone: a knowledge graph that tells time, inside PostgreSQL.

Every fact carries two clocks: the world's (``valid_at``/``invalid_at``) and
the graph's own (``created_at``/``expired_at``). Open a store with
``Memory.open()`` (blocking) or ``await AsyncMemory.open()``.
"""

from . import errors, toolkit
from ._memory import Memory
from ._memory_async import AsyncMemory
from ._records import (
    DocumentResult,
    Entity,
    EntityInput,
    Episode,
    Fact,
    FactInput,
    IngestResult,
    RemovalReport,
    RollbackReport,
)
from ._results import Community, CommunityReport, Context, ContextItem, SearchResults
from ._time import NOW
from .embedders import Embedder, HashEmbedder, OpenAICompatibleEmbedder, WordLlamaEmbedder
from .errors import TimestoneError
from .graph._nodes import GraphChunk, GraphEdge, GraphNodes, GraphRelation, GraphWrite
from .items._item import Item
from .items._ops import ItemGet, ItemNamespaces, ItemPut, ItemSearch
from .llm import LLM, LLMBudget, LLMReply, LLMRequest, LLMUsage, OpenAICompatibleLLM
from .ontology import EdgeType, EntityType, Ontology
from .rerankers import HTTPReranker, OverlapReranker, Reranker

__all__ = [
    "LLM",
    "NOW",
    "AsyncMemory",
    "Community",
    "CommunityReport",
    "Context",
    "ContextItem",
    "DocumentResult",
    "EdgeType",
    "Embedder",
    "Entity",
    "EntityInput",
    "EntityType",
    "Episode",
    "Fact",
    "FactInput",
    "GraphChunk",
    "GraphEdge",
    "GraphNodes",
    "GraphRelation",
    "GraphWrite",
    "HTTPReranker",
    "HashEmbedder",
    "IngestResult",
    "Item",
    "ItemGet",
    "ItemNamespaces",
    "ItemPut",
    "ItemSearch",
    "LLMBudget",
    "LLMReply",
    "LLMRequest",
    "LLMUsage",
    "Memory",
    "Ontology",
    "OpenAICompatibleEmbedder",
    "OpenAICompatibleLLM",
    "OverlapReranker",
    "RemovalReport",
    "Reranker",
    "RollbackReport",
    "SearchResults",
    "TimestoneError",
    "WordLlamaEmbedder",
    "errors",
    "toolkit",
]

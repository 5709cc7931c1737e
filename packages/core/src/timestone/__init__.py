"""Timestone: a knowledge graph that tells time, inside PostgreSQL.

Every fact carries two clocks: the world's (``valid_at``/``invalid_at``) and
the graph's own (``created_at``/``expired_at``). Open a store with
``Memory.open()`` (blocking) or ``await AsyncMemory.open()``.

The names are imported on first use, so that ``import timestone.cli`` (the command
line's ``--help``) loads neither the database driver nor the models nor numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# where each public name lives (the modules errors and toolkit are imported as themselves)
_LAZY: dict[str, str] = {
    "Memory": "._memory",
    "AsyncMemory": "._memory_async",
    "DocumentResult": "._records",
    "Entity": "._records",
    "EntityInput": "._records",
    "Episode": "._records",
    "Fact": "._records",
    "FactInput": "._records",
    "IngestResult": "._records",
    "RemovalReport": "._records",
    "RollbackReport": "._records",
    "Community": "._results",
    "CommunityReport": "._results",
    "Context": "._results",
    "ContextItem": "._results",
    "SearchResults": "._results",
    "NOW": "._time",
    "Embedder": ".embedders",
    "HashEmbedder": ".embedders",
    "OpenAICompatibleEmbedder": ".embedders",
    "WordLlamaEmbedder": ".embedders",
    "TimestoneError": ".errors",
    "GraphChunk": ".graph._nodes",
    "GraphEdge": ".graph._nodes",
    "GraphNodes": ".graph._nodes",
    "GraphRelation": ".graph._nodes",
    "GraphWrite": ".graph._nodes",
    "Item": ".items._item",
    "ItemGet": ".items._ops",
    "ItemNamespaces": ".items._ops",
    "ItemPut": ".items._ops",
    "ItemSearch": ".items._ops",
    "LLM": ".llm",
    "LLMBudget": ".llm",
    "LLMReply": ".llm",
    "LLMRequest": ".llm",
    "LLMUsage": ".llm",
    "OpenAICompatibleLLM": ".llm",
    "EdgeType": ".ontology",
    "EntityType": ".ontology",
    "Ontology": ".ontology",
    "HTTPReranker": ".rerankers",
    "OverlapReranker": ".rerankers",
    "Reranker": ".rerankers",
}


def __getattr__(name: str) -> Any:
    if name in ("errors", "toolkit"):
        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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

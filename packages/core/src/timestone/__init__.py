"""Timestone: a knowledge graph that tells time, inside PostgreSQL.

Every fact carries two clocks: the world's (``valid_at``/``invalid_at``) and
the graph's own (``created_at``/``expired_at``). Open a store with
``Memory.open()`` (blocking) or ``await AsyncMemory.open()``.
"""

from . import errors
from ._aio._memory import AsyncMemory
from ._items import Item
from ._models import (
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
from ._sync._memory import Memory
from ._time import NOW
from .embedders import Embedder, HashEmbedder, OpenAICompatibleEmbedder, WordLlamaEmbedder
from .errors import TimestoneError
from .ontology import EdgeType, EntityType, Ontology

__all__ = [
    "NOW",
    "AsyncMemory",
    "DocumentResult",
    "EdgeType",
    "Embedder",
    "Entity",
    "EntityInput",
    "EntityType",
    "Episode",
    "Fact",
    "FactInput",
    "HashEmbedder",
    "IngestResult",
    "Item",
    "Memory",
    "Ontology",
    "OpenAICompatibleEmbedder",
    "RemovalReport",
    "RollbackReport",
    "TimestoneError",
    "WordLlamaEmbedder",
    "errors",
]

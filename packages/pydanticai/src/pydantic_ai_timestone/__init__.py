"""Timestone memory for PydanticAI: deps, a memory toolset, a capability that bundles them
with instructions, and a ``GroundedAnswer`` output type whose citations are checked."""

from ._capability import INSTRUCTIONS, TimestoneMemory
from ._citations import retrieved_citations
from ._deps import MemoryDeps, TimestoneDeps
from ._grounded import GroundedAnswer, check_citations
from ._toolset import entity_timeline, memory_toolset, remember, search_memory

__all__ = [
    "INSTRUCTIONS",
    "GroundedAnswer",
    "MemoryDeps",
    "TimestoneDeps",
    "TimestoneMemory",
    "check_citations",
    "entity_timeline",
    "memory_toolset",
    "remember",
    "retrieved_citations",
    "search_memory",
]

"""``TimestoneMemory``: the memory toolset, its instructions and the citation check, as one
PydanticAI capability."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.toolsets import AgentToolset

from ._grounded import GroundedAnswer, check_citations
from ._toolset import memory_toolset

__all__ = ["INSTRUCTIONS", "TimestoneMemory"]

INSTRUCTIONS = (
    "You have a long-term memory (Timestone), a knowledge graph whose facts carry the period "
    "they were true. Before answering from memory, call search_memory; for how something "
    "changed over time, call entity_timeline; to store a new durable fact, call remember. "
    "Memory results show each item with an id in brackets, like [F-1a2b3c4d5e]. When you "
    "answer with a GroundedAnswer, cite the ids of the items your answer rests on, and only "
    "ids retrieved in this conversation turn."
)
"""What the model reads about its memory: when to call each tool and how to cite."""


@dataclasses.dataclass
class TimestoneMemory(AbstractCapability[Any]):
    """Adds the memory tools and their instructions to an agent, and rejects (with a retry) a
    ``GroundedAnswer`` that cites anything the tools did not return in this run.

    ``Agent(model, deps_type=TimestoneDeps, output_type=GroundedAnswer,
    capabilities=[TimestoneMemory()])``
    """

    instructions: str = INSTRUCTIONS

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """None: the capability is not written into an agent spec."""
        return None  # holds a toolset of Python functions: not spec-serializable

    def get_toolset(self) -> AgentToolset[Any] | None:
        """The memory tools: ``search_memory``, ``entity_timeline``, ``remember``."""
        return memory_toolset()

    def get_instructions(self) -> str:
        """What the model reads about its memory (``instructions``)."""
        return self.instructions

    async def after_output_validate(
        self, ctx: RunContext[Any], *, output_context: Any, output: Any
    ) -> Any:
        """A final ``GroundedAnswer`` whose citations were all retrieved in this run, or
        a retry naming the ones that were not."""
        if isinstance(output, GroundedAnswer) and not ctx.partial_output:
            return check_citations(ctx, output)
        return output

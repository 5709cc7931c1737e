"""The dependencies the memory tools read: a Timestone memory and the group it works in."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Protocol

import timestone
from timestone.toolkit import DEFAULT_TOKEN_BUDGET, NOW, Now, check_tool_settings

__all__ = ["MemoryDeps", "TimestoneDeps"]


class MemoryDeps(Protocol):
    """Any deps object with ``memory`` and ``group_id`` works with the toolset (and, if it
    has them, ``valid_at``, ``as_of`` and ``token_budget``), checked before each tool runs
    as ``TimestoneDeps`` checks them: what is wrong raises to the caller of the run."""

    @property
    def memory(self) -> timestone.Memory | timestone.AsyncMemory: ...
    @property
    def group_id(self) -> str: ...


@dataclasses.dataclass(frozen=True)
class TimestoneDeps:
    """Deps for an agent with Timestone memory.

    ``valid_at``/``as_of``: the world time and system time the tools read at (default: now).
    ``token_budget``: how much evidence one ``search_memory`` call returns.
    """

    memory: timestone.Memory | timestone.AsyncMemory
    group_id: str
    valid_at: datetime | Now | None = NOW
    as_of: datetime | None = None
    token_budget: int = DEFAULT_TOKEN_BUDGET

    def __post_init__(self) -> None:
        check_tool_settings(
            "TimestoneDeps",
            object.__getattribute__(self, "memory"),
            self.group_id,
            valid_at=self.valid_at,
            as_of=self.as_of,
            token_budget=self.token_budget,
        )

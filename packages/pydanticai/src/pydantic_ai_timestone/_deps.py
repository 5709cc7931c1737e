"""The dependencies the memory tools read: a Timestone memory and the group it works in."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Protocol

import timestone
from timestone._groups import check_group
from timestone._time import NOW, Now, aware

__all__ = ["MemoryDeps", "TimestoneDeps"]


class MemoryDeps(Protocol):
    """Any deps object with ``memory`` and ``group_id`` works with the toolset."""

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
    token_budget: int = 1200

    def __post_init__(self) -> None:
        given = object.__getattribute__(self, "memory")
        if not isinstance(given, (timestone.Memory, timestone.AsyncMemory)):
            raise TypeError(
                f"TimestoneDeps needs a timestone.Memory or AsyncMemory, got {type(given)!r}"
            )
        check_group(self.group_id)
        if isinstance(self.valid_at, datetime):
            aware(self.valid_at, "valid_at")
        if self.as_of is not None:
            aware(self.as_of, "as_of")

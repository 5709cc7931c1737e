"""What the memory tools of every adapter share: the text they show a model, how they
read the dates a model writes, and the settings they are built with.

One line per fact with its citation id and its period; ISO 8601 dates read as
UTC when they name no zone; a memory, a group, the two clocks and a token budget
checked once, where the tools are made (``timestone._aio._tools`` holds the
bodies).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ._groups import check_group
from ._models import Fact
from ._results import citation_of
from ._time import Now, aware
from .errors import InvalidInput

if TYPE_CHECKING:
    from . import AsyncMemory, Memory

__all__ = ["DESCRIPTIONS", "check_tool_settings", "day", "fact_line", "parse_when"]


def day(value: datetime | None) -> str:
    """The date of ``value``, or ``present`` for a period still open."""
    return value.date().isoformat() if value is not None else "present"


def fact_line(fact: Fact) -> str:
    """``[F-…] (from to until) sentence``, plus when the graph stopped holding it, if it did."""
    line = f"[{citation_of('fact', fact.id)}] ({day(fact.valid_at)} to {day(fact.invalid_at)})"
    line += f" {fact.fact}"
    if fact.expired_at is not None:
        line += f" (superseded in the record on {day(fact.expired_at)})"
    return line


def parse_when(text: str, what: str) -> datetime:
    """An ISO 8601 date or datetime from a model; one without a zone is read as UTC."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput(f"{what} {text!r:.80} is not an ISO 8601 date, like 2024-05-01") from exc
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def check_tool_settings(
    who: str,
    memory: object,
    group_id: object,
    *,
    valid_at: datetime | Now | None,
    as_of: datetime | None,
    token_budget: object,
) -> tuple[Memory | AsyncMemory, str]:
    """The memory and the group tools are made with, or the error naming what is wrong:
    ``TypeError`` for what is not a memory, the library's errors for the group and the
    clocks, ``ValueError`` for a budget that is not a positive integer."""
    from . import AsyncMemory, Memory

    if not isinstance(memory, (Memory, AsyncMemory)):
        raise TypeError(f"{who} needs a timestone.Memory or AsyncMemory, got {type(memory)!r}")
    group = check_group(group_id)
    if valid_at is not None and not isinstance(valid_at, Now):
        aware(valid_at, "valid_at")
    if as_of is not None:
        aware(as_of, "as_of")
    if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
        raise ValueError(f"token_budget must be a positive integer, got {token_budget!r:.80}")
    return memory, group


# What a model reads about each tool: a toolkit that describes a tool by its docstring
# (PydanticAI, LlamaIndex) takes these, the "Args:" section describing each argument.
DESCRIPTIONS = {
    "search_memory": """Search long-term memory for facts and passages relevant to the query.

Each item is dated and has a citation id in brackets.

Args:
    query: What to look for, in plain words.
""",
    "entity_timeline": """Every period of every fact about an entity, oldest first.

An entity is a person, place or thing: how what memory holds about it changed.

Args:
    entity: The entity's name.
    relation: Only this relation, e.g. "WORKS_AT"; default: every relation.
    since: Only periods that last past this ISO 8601 date; default: from the start.
    until: Only periods that start before this ISO 8601 date; default: to the end.
""",
    "remember": """Store one fact in long-term memory: subject -relation-> object.

Args:
    subject: Who or what the fact is about, e.g. "Mira".
    relation: An UPPER_SNAKE_CASE relation, e.g. "WORKS_AT".
    object: The other end of the fact, e.g. "Château Sud".
    sentence: The fact as a sentence; default: made from the three parts.
    valid_from: When it became true, as an ISO 8601 date or datetime (UTC unless it
        names a zone); default: now.
""",
}

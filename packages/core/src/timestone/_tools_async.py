"""The memory tools an agent calls, written once for every adapter.

``search_memory`` (evidence for a question, ``AsyncMemory.context``),
``entity_timeline`` (every period about an entity, narrowed by relation and
dates) and ``remember`` (one fact, now or from a date). Each returns text a
model can read, every item with its citation id (``[F-…]`` for facts, ``[E-…]``
for episodes), and raises ``ToolRefused`` for arguments the library refuses:
its message names the tool and the reason, for the model to read and try
again. Errors that are not the model's (the database, the embedder) pass
through unchanged. The PydanticAI toolset, the LangChain tools and the
LlamaIndex tool spec are thin wrappers around these functions.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ._records import FactInput
from ._time import NOW, Now, parse_when
from ._toolkit import fact_line
from .errors import InvalidInput, ToolRefused

if TYPE_CHECKING:
    from ._memory_async import AsyncMemory

__all__ = ["DEFAULT_TOKEN_BUDGET", "entity_timeline", "remember", "search_memory"]

DEFAULT_TOKEN_BUDGET = 1200
"""The evidence one ``search_memory`` call returns, in tokens."""


def _text(tool: str, what: str, value: object, *, optional: bool = False) -> str | None:
    """An argument a model sends as text (a model may send null or a number where the
    schema says text, and not every toolkit checks it first)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ToolRefused(f"{tool} needs {what} as text, got {type(value).__name__}")
    return value


async def search_memory(
    mem: AsyncMemory,
    group_id: str,
    query: str,
    *,
    valid_at: datetime | Now | None = NOW,
    as_of: datetime | None = None,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
) -> str:
    """Evidence for ``query`` under ``token_budget`` tokens, rendered with dates and
    citation ids, or a sentence saying nothing matches."""
    if not (_text("search_memory", "the query", query) or "").strip():
        raise ToolRefused("search_memory needs a non-empty query")
    try:
        context = await mem.context(
            group_id, query, token_budget=token_budget, valid_at=valid_at, as_of=as_of
        )
    except InvalidInput as exc:  # a query too long, a NUL byte: the model can ask again
        raise ToolRefused(f"search_memory refused the query: {exc}") from exc
    if not len(context):
        return "Nothing in memory matches this query."
    return context.as_prompt()


async def entity_timeline(
    mem: AsyncMemory,
    group_id: str,
    entity: str,
    *,
    relation: str | None = None,
    since: str | None = None,
    until: str | None = None,
    as_of: datetime | None = None,
) -> str:
    """Every period of every fact about ``entity``, oldest first, one line each;
    ``since`` and ``until`` are ISO 8601 dates as a model writes them."""
    if not (_text("entity_timeline", "the entity name", entity) or "").strip():
        raise ToolRefused("entity_timeline needs an entity name")
    for what, value in (("relation", relation), ("since", since), ("until", until)):
        _text("entity_timeline", what, value, optional=True)
    try:
        facts = await mem.timeline(
            group_id,
            entity,
            as_of=as_of,
            relation=relation or None,
            since=parse_when(since, "since") if since else None,
            until=parse_when(until, "until") if until else None,
        )
    except InvalidInput as exc:
        raise ToolRefused(f"entity_timeline refused the request: {exc}") from exc
    if not facts:
        narrowed = " of that relation or in those dates" if relation or since or until else ""
        return f"Memory holds no facts about {entity!r:.200}{narrowed}."
    return "\n".join([f"Timeline of {entity} (cite items by [id]):", *map(fact_line, facts)])


async def remember(
    mem: AsyncMemory,
    group_id: str,
    subject: str,
    relation: str,
    object: str,
    *,
    sentence: str | None = None,
    valid_from: str | None = None,
) -> str:
    """Store ``subject -relation-> object``, true from ``valid_from`` (an ISO 8601 date,
    default now), as one episode; returns the facts it now holds for that relation."""
    for what, value in (("sentence", sentence), ("valid_from", valid_from)):
        _text("remember", what, value, optional=True)
    try:
        now = datetime.now(UTC)
        fact = FactInput.parse(
            {
                "source": subject,
                "relation": relation,
                "target": object,
                "fact": sentence,
                "valid_at": parse_when(valid_from, "valid_from") if valid_from else now,
            }
        )
        result = await mem.add_facts(
            group_id, [fact], reference_time=now, source_description="agent"
        )
    except InvalidInput as exc:
        raise ToolRefused(f"remember refused the fact: {exc}") from exc
    lines = [fact_line(f) for f in result.facts if f.relation == fact.relation]
    return "Remembered:\n" + "\n".join(lines)

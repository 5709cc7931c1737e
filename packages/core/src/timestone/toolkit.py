"""The integration API: what a toolkit adapter builds on, and the only part of the core
it imports besides ``timestone`` and ``timestone.errors``.

- **The memory tools**, written once: ``search_memory``, ``entity_timeline`` and
  ``remember`` on a ``Memory`` (blocking), ``asearch_memory``, ``aentity_timeline`` and
  ``aremember`` on an ``AsyncMemory``; ``TOOLS`` and ``ASYNC_TOOLS`` map each name to its
  body. Each returns text a model reads, every item with its citation id, and raises
  ``errors.ToolRefused`` for arguments the library refuses. ``DESCRIPTIONS``: what a
  model reads about each tool (an ``Args:`` section per argument);
  ``DEFAULT_TOKEN_BUDGET``: the evidence one ``search_memory`` returns;
  ``MIN_TOKEN_BUDGET``: the least budget a context takes.
- **Limits**: ``MAX_QUERY_CHARS`` (a search or context query), ``MAX_EPISODE_CHARS`` (a
  text episode extracted in one call; a longer text goes in as a document),
  ``MAX_DOCUMENT_CHARS`` (a document's content), ``MAX_NAME_CHARS`` (a name: an entity's,
  an episode's, a document's title), ``MAX_SEARCH_LIMIT`` (the most one search returns).
- **Retrieved records**: ``fact_record``, ``entity_record``, ``episode_record`` and
  ``ranked_records`` map search results to ``Retrieved`` (id, text, metadata, score),
  one mapping for every adapter; ``metadata["citation"]`` is the ``F-…``/``E-…`` id
  ``context()``, the tools and ``GroundedAnswer`` cite (``citation_of``,
  ``CITATION_PATTERN``). ``RETRIEVER_SCOPES``, ``DEFAULT_RETRIEVER_SCOPES`` (facts and
  episodes, ranked together) and ``check_scopes``.
- **Checks**, each raising an error of ``timestone.errors`` that names what is wrong:
  ``check_group``, ``check_aware``, ``check_list``, ``check_text``, ``check_tool_settings``;
  ``relation_name``, the normal form of a relation label (``UPPER_SNAKE_CASE``).
- **Time**: ``NOW`` and its type ``Now`` (the default of ``valid_at=``), ``parse_when``
  (an ISO 8601 date as a model writes it), ``fact_line`` (a fact as the tools show it).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType

from ._groups import check_group
from ._names import relation_name
from ._records import MAX_NAME_CHARS, check_list, check_text
from ._results import citation_of
from ._time import NOW, Now, parse_when
from ._time import aware as check_aware
from ._toolkit import (
    DEFAULT_RETRIEVER_SCOPES,
    DESCRIPTIONS,
    RETRIEVER_SCOPES,
    Found,
    Retrieved,
    check_scopes,
    check_tool_settings,
    entity_record,
    episode_record,
    fact_line,
    fact_record,
    ranked_records,
)
from ._tools import entity_timeline, remember, search_memory
from ._tools_async import DEFAULT_TOKEN_BUDGET
from ._tools_async import entity_timeline as aentity_timeline
from ._tools_async import remember as aremember
from ._tools_async import search_memory as asearch_memory
from .extract._extraction_async import MAX_EPISODE_CHARS
from .search._context_async import MIN_TOKEN_BUDGET
from .search._request import MAX_QUERY_CHARS, MAX_SEARCH_LIMIT
from .write._ingest_async import MAX_CONTENT_CHARS as MAX_DOCUMENT_CHARS

__all__ = [
    "ASYNC_TOOLS",
    "CITATION_PATTERN",
    "DEFAULT_RETRIEVER_SCOPES",
    "DEFAULT_TOKEN_BUDGET",
    "DESCRIPTIONS",
    "MAX_DOCUMENT_CHARS",
    "MAX_EPISODE_CHARS",
    "MAX_NAME_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_SEARCH_LIMIT",
    "MIN_TOKEN_BUDGET",
    "NOW",
    "RETRIEVER_SCOPES",
    "TOOLS",
    "TOOL_NAMES",
    "Found",
    "Now",
    "Retrieved",
    "aentity_timeline",
    "aremember",
    "asearch_memory",
    "check_aware",
    "check_group",
    "check_list",
    "check_scopes",
    "check_text",
    "check_tool_settings",
    "citation_of",
    "entity_record",
    "entity_timeline",
    "episode_record",
    "fact_line",
    "fact_record",
    "parse_when",
    "ranked_records",
    "relation_name",
    "remember",
    "search_memory",
]

TOOL_NAMES = ("search_memory", "entity_timeline", "remember")
"""The memory tools, in the order a toolkit lists them."""

TOOLS: Mapping[str, Callable[..., str]] = MappingProxyType(
    {"search_memory": search_memory, "entity_timeline": entity_timeline, "remember": remember}
)
"""Each tool's blocking body, by name: ``TOOLS[name](memory, group_id, *args, **settings)``."""

ASYNC_TOOLS: Mapping[str, Callable[..., Awaitable[str]]] = MappingProxyType(
    {
        "search_memory": asearch_memory,
        "entity_timeline": aentity_timeline,
        "remember": aremember,
    }
)
"""Each tool's async body, by name, for an ``AsyncMemory``."""

CITATION_PATTERN = re.compile(r"(?<![\w-])[FE]-[0-9a-f]{10}(?![\w-])")
"""A citation id as ``citation_of`` writes it: ``F-`` (a fact) or ``E-`` (an episode or a
document chunk) and 10 hex digits, not part of a longer word (``REF-0123456789ab``)."""

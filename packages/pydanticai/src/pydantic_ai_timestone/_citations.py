"""Citation ids, and the ones a run has retrieved so far.

A citation id is ``F-`` (a fact) or ``E-`` (an episode or document chunk) and 10 hex
digits of its id, as ``Memory.context`` renders them (``citation_of``). What a run
retrieved is read from the run's own messages: the citations that lead the items of
the memory tools' returns (one item a line, ``[F-…] ...``) in requests of this run
(``run_id``), so the check needs no state of its own. A
request without a run id (history stored without it, or built by hand) is not this
run's; a context without a run id (a ``RunContext`` built by hand) counts every request.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelRequest, ToolReturnPart

from timestone.toolkit import CITATION_PATTERN, citation_of

__all__ = ["CITATION", "MEMORY_TOOLS", "citation_of", "retrieved_citations"]

CITATION = CITATION_PATTERN
MEMORY_TOOLS = frozenset({"search_memory", "entity_timeline", "remember"})


def retrieved_citations(ctx: RunContext[object], tools: Iterable[str] = MEMORY_TOOLS) -> set[str]:
    """Every citation id that a memory tool returned in this run (requests whose
    ``run_id`` is the context's)."""
    names = set(tools)
    found: set[str] = set()
    for message in ctx.messages:
        if not isinstance(message, ModelRequest):
            continue
        if ctx.run_id is not None and message.run_id != ctx.run_id:
            continue  # another run's, or one without a run id (history from elsewhere)
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and part.tool_name in names:
                found.update(_ITEM.findall(part.model_response_str()))
    return found


# an item of a memory tool's return: a line that starts with its citation (``[F-…]``); a
# citation quoted inside an item's text (a recorded conversation that cited one) is text
_ITEM = re.compile(r"^\[([FE]-[0-9a-f]{10})\]", re.MULTILINE)

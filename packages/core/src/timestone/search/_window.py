"""Facts true in the window of time a question names come first.

A question that names a time ("Where did Mira work in 2019?", "... last year",
``timestone.search._question``) prefers the facts whose period of validity overlaps that
window, as the episodes scope prefers the episodes told in it
(``timestone.search._episodes_sql``): a preference, not a filter. The facts statement
sends ``FAVOUR_POOL`` times the limit of its candidates when a window is named;
each fact true at some moment of the window adds ``WINDOW_SHARE`` of the best
candidate's fused score to its own, and the list is cut to the limit again. With
``valid_at`` a moment (the default, now), every candidate is true then, and the
window orders them by whether they were also true in it.

Only the reciprocal-rank order is favoured: the other rerankers order by what they
name (hops, mentions, diversity, a cross-encoder's score).
"""

# why: docs/decisions/019-time-words-and-question-rewrite.md

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ._fusion import Candidate
from ._request import SearchRequest

__all__ = ["FAVOUR_POOL", "WINDOW_SHARE", "favour_window", "favoured_keep"]

WINDOW_SHARE = 0.4  # as the episodes scope's (decision 017)
FAVOUR_POOL = 3


def favoured_keep(req: SearchRequest) -> int | None:
    """How many facts the statement sends for ``favour_window`` to choose from, or None
    (no window, or an order a window does not touch)."""
    if req.window is None or req.method != "rrf" or "facts" not in req.scopes:
        return None
    return max(req.candidates, FAVOUR_POOL * req.limit)


def _overlaps(row: Mapping[str, Any], window: tuple[datetime, datetime]) -> bool:
    start, end = window
    valid_at: datetime | None = row.get("valid_at")
    invalid_at: datetime | None = row.get("invalid_at")
    return (valid_at is None or valid_at < end) and (invalid_at is None or invalid_at > start)


def favour_window(
    ranked: Sequence[Candidate],
    rows: Mapping[Any, Mapping[str, Any]],
    window: tuple[datetime, datetime],
    limit: int,
) -> list[Candidate]:
    """``ranked`` (scored, best first) with the facts true in ``window`` raised, cut to
    ``limit``."""
    if not ranked:
        return []
    bonus = WINDOW_SHARE * max(c.score for c in ranked)
    for c in ranked:
        if _overlaps(rows[c.key], window):
            c.score += bonus
    return sorted(ranked, key=lambda c: (-c.score, str(c.key)))[:limit]

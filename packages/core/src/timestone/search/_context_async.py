"""Context: evidence for a question, chosen under a token budget, ready to cite.

1. Search facts and episodes (document chunks, text episodes) with a wide
   candidate list. Around a busy entity the graph walk's facts are ranked by
   similarity to the question, so the one relevant fact among hundreds of
   neighbours competes on relevance, not on a stored weight or degree.
2. Merge both kinds by fused score, each against the best of its kind (facts are
   fused by rank, episodes by score); drop near-duplicates (same text, or
   embeddings closer than ``DUPLICATE_SIMILARITY`` with nearly the same words:
   "directs Château Nord" and "directs Château Sud" are both kept; two facts are
   duplicates only when their periods overlap, so a history keeps each period of a
   sentence); pick by maximal marginal relevance so that the evidence stays diverse.
3. Fill the budget greedily, counting tokens with a real tokenizer (see
   ``timestone.search._tokens``); the rendered prompt never exceeds the budget.
4. Order for the prompt: the strongest items at the two edges, the weakest in
   the middle (models attend least to the middle of a long context).

Episodes that are only the record of structured facts (source ``facts``) are
left out of the search (``SearchRequest.fact_records``): their facts are already
candidates, with dates, and the records would take the places of episodes that
tell something.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

from .._characters import joined_back
from .._records import check_text
from .._results import Context, ContextItem, citation_of
from .._time import NOW, Now
from ..db._database_async import Database
from ..embedders import Embedder
from ..errors import InvalidInput
from ._fusion import Embedding
from ._request import MAX_QUERY_CHARS, prepare_search
from ._run_async import search_hits
from ._tokens import TokenCounter, default_counter

__all__ = ["DUPLICATE_SIMILARITY", "MAX_TOKEN_BUDGET", "build_context", "edge_order"]

MIN_TOKEN_BUDGET = 50
"""The least ``token_budget`` a context takes (its header and at least a short item)."""
MAX_TOKEN_BUDGET = 200_000
DUPLICATE_SIMILARITY = 0.97
DIVERSITY_LAMBDA = 0.75
_CANDIDATES = 60
MAX_EPISODE_CHARS = 2000


T = TypeVar("T")


def edge_order(ranked: Sequence[T]) -> list[T]:
    """Strongest first and last: ranks 1, 3, 5, ... then ..., 6, 4, 2."""
    return [*ranked[0::2], *reversed(ranked[1::2])]


@dataclasses.dataclass(slots=True)
class _Piece:
    item: ContextItem
    embedding: Embedding | None
    key: str

    def repeats(self, other: _Piece) -> bool:
        """Whether ``other`` tells the same thing: the same words, and, for two facts, periods
        that overlap. Two periods of one sentence apart in time ("lives in Paris" 2010 to 2012,
        again 2015 to 2018) are two pieces of evidence, as a history asks for both."""
        if self.item.kind != "fact" or other.item.kind != "fact":
            return True
        a, b = self.item, other.item
        return (a.invalid_at is None or b.valid_at is None or b.valid_at < a.invalid_at) and (
            b.invalid_at is None or a.valid_at is None or a.valid_at < b.invalid_at
        )


def _top(scope: Any) -> float:
    """The best score of a scope's hits (1 when it has none or none above zero)."""
    best = max((c.score for c in scope.ranked), default=0.0) if scope is not None else 0.0
    return best if best > 0 else 1.0


def _pieces(hits: Any) -> list[_Piece]:
    """Facts and episodes as pieces, each scored against its scope's best hit: facts are
    fused by rank and episodes by score (``timestone.search._episodes_sql``), two scales."""
    pieces: list[_Piece] = []
    facts = hits.get("facts")
    if facts is not None:
        top = _top(facts)
        for c in facts.ranked:
            row = facts.rows[c.key]
            pieces.append(
                _Piece(
                    ContextItem(
                        citation=citation_of("fact", row["id"]),
                        kind="fact",
                        text=str(row["fact"]),
                        score=c.score / top,
                        tokens=0,
                        fact_id=row["id"],
                        version_id=row["version_id"],
                        episode_ids=tuple(row["episodes"]),
                        valid_at=row["valid_at"],
                        invalid_at=row["invalid_at"],
                    ),
                    c.embedding,
                    " ".join(str(row["fact"]).casefold().split()),
                )
            )
    episodes = hits.get("episodes")
    if episodes is not None:
        top = _top(episodes)
        for c in episodes.ranked:
            row = episodes.rows[c.key]
            pieces.append(
                _Piece(
                    ContextItem(
                        citation=citation_of("episode", row["id"]),
                        kind="episode",
                        text=_clip(str(row["content"])),
                        score=c.score / top,
                        tokens=0,
                        episode_ids=(row["id"],),
                        document_uri=row["document_uri"],
                        char_start=row["char_start"],
                        char_end=row["char_end"],
                        reference_time=row["reference_time"],
                    ),
                    c.embedding,
                    " ".join(str(row["content"]).casefold().split()),
                )
            )
    return pieces


def _clip(read: str) -> str:
    """An episode's text as an item shows it: its whitespace collapsed, and at most
    ``MAX_EPISODE_CHARS`` characters, the last "…" when it was cut. ``read`` is the content
    as the search read it, at most one character more than that: as long as that, it was
    cut there, and collapsing its whitespace does not make it whole again. The cut keeps
    a character with what joins it to the next (an accent, the parts of an emoji)."""
    text = " ".join(read.split())
    if len(text) <= MAX_EPISODE_CHARS and len(read) <= MAX_EPISODE_CHARS:
        return text
    end = min(len(text), MAX_EPISODE_CHARS - 1)
    if end < len(text):
        end = joined_back(text, 0, end)
    return text[:end].rstrip() + "…"


def _jaccard(a: str, b: str) -> float:
    wa, wb = set(a.split()), set(b.split())
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


def _select(pieces: list[_Piece], limit: int) -> list[_Piece]:
    """Near-duplicates out, then maximal marginal relevance over the rest."""
    if not pieces:
        return []
    import numpy as np

    top = max(p.item.score for p in pieces) or 1.0
    relevance = np.asarray([p.item.score / top for p in pieces], dtype=np.float64)
    dim = next((len(p.embedding) for p in pieces if p.embedding is not None), 1)
    matrix = np.asarray(
        [p.embedding if p.embedding is not None else [0.0] * dim for p in pieces],
        dtype=np.float64,
    )
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit = matrix / norms
    sims = unit @ unit.T
    redundancy = np.zeros(len(pieces))
    alive = np.ones(len(pieces), dtype=bool)
    chosen: list[_Piece] = []
    picked: list[int] = []
    while alive.any() and len(chosen) < limit:
        values = DIVERSITY_LAMBDA * relevance - (1 - DIVERSITY_LAMBDA) * redundancy
        values[~alive] = -np.inf
        i = int(np.argmax(values))
        alive[i] = False
        piece = pieces[i]
        if any(
            piece.repeats(pieces[j])
            and (
                piece.key == pieces[j].key
                or (
                    sims[i, j] >= DUPLICATE_SIMILARITY and _jaccard(piece.key, pieces[j].key) >= 0.8
                )
            )
            for j in picked
        ):
            continue
        picked.append(i)
        chosen.append(piece)
        redundancy = np.maximum(redundancy, sims[i])
    return chosen


async def build_context(
    db: Database,
    embedder: Embedder,
    group_id: str,
    query: str,
    *,
    token_budget: object,
    valid_at: datetime | Now | None = NOW,
    as_of: datetime | None = None,
    counter: TokenCounter | None = None,
) -> Context:
    text = check_text(query, "context query", max_chars=MAX_QUERY_CHARS)
    if (
        not isinstance(token_budget, int)
        or isinstance(token_budget, bool)
        or not MIN_TOKEN_BUDGET <= token_budget <= MAX_TOKEN_BUDGET
    ):
        raise InvalidInput(
            f"token_budget must be an integer from {MIN_TOKEN_BUDGET} to {MAX_TOKEN_BUDGET:,}, "
            f"got {token_budget!r:.80}"
        )
    req = prepare_search(
        text,
        limit=_CANDIDATES,
        scopes=("facts", "episodes"),
        valid_at=valid_at,
        as_of=as_of,
        candidates=_CANDIDATES,
        embeddings=True,
        # no more than an item shows (``_clip``), and one more to know it was clipped
        content_chars=MAX_EPISODE_CHARS + 1,
        # the records of structured facts are no evidence of their own (their facts
        # are): left out in the search, they take no candidate's place
        fact_records=False,
        what="context query",
    )
    count = (counter or default_counter()).count

    def render(items: Sequence[ContextItem]) -> Context:
        return Context(
            query=text,
            items=list(items),
            token_budget=token_budget,
            tokens=0,
            valid_at=req.valid_at,
            as_of=req.as_of,
        )

    used = count(render([]).as_prompt())
    if used > token_budget:  # the header alone (the times it speaks of) would not fit
        raise InvalidInput(
            f"token_budget {token_budget} is less than the context's header takes"
            f" ({used} tokens, with the times it speaks of); give at least {used}"
        )
    hits = await search_hits(db, embedder, group_id, req)
    pieces = _select(_pieces(hits), limit=2 * _CANDIDATES)
    chosen: list[ContextItem] = []
    for piece in pieces:
        cost = count(piece.item.render()) + 1  # and its newline
        if used + cost > token_budget:
            continue
        used += cost
        chosen.append(dataclasses.replace(piece.item, tokens=cost))
    ordered = edge_order(chosen)
    tokens = count(render(ordered).as_prompt())  # the prompt's, counted once as it stands
    while ordered and tokens > token_budget:
        weakest = min(ordered, key=lambda item: item.score)
        ordered.remove(weakest)
        tokens = count(render(ordered).as_prompt())
    return dataclasses.replace(render(ordered), tokens=tokens)

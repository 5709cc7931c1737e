"""The optional rewrite of a search question: one small model call, never required.

``search(..., rewrite=True)`` with an LLM configured asks the small model once for up
to ``REWRITE_ALTERNATIVES`` other phrasings of the question (the statement an answer
would be written in, synonyms, names written out) and, when the question asks about a
period, its window of dates (``timestone.extract._prompts.rewrite_messages``). The question
and each phrasing are searched alike (same scopes, filters and limit) and their lists
fused per scope by reciprocal rank fusion, the question's list weighing as much as
all the phrasings' together: a hit the phrasings agree on rises, and none of them
outvotes the question alone (LangChain's ``MultiQueryRetriever`` takes the union of
its queries' hits; a union has no order to keep). A window from the model is used
only when the question's own words open none (``timestone.search._question``).

The call is in the group's LLM ledger (step ``question rewrite``), counted against
its budget like any other. A model that fails, refuses, is cut off or answers out
of shape, and a budget that refuses the call, fall back to the plain search with a
``RewriteWarning`` saying why: the search is never worse off than without the
option, and nothing but the ledger row is written. A malformed answer is not asked
again: a search waits on it.
"""

# why: docs/decisions/019-time-words-and-question-rewrite.md

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .._records import check_text
from .._results import SearchResults
from .._time import utcnow
from ..db._database_async import Database
from ..embedders import Embedder
from ..errors import InvalidInput, LLMError, RewriteWarning
from ..extract import _prompts as P
from ..extract._calls_async import Ledger, call
from ..extract._extraction_async import read_budget, record_spent
from ..llm import LLM, LLMRequest
from ._fulltext import check_alternatives
from ._fusion import RRF_K, Candidate
from ._request import MAX_QUERY_CHARS, SearchRequest
from ._run_async import ScopeHits, results_of, search_hits

__all__ = ["STEP", "alternatives_of", "rewrite_request", "rewritten_search"]

STEP = "question rewrite"


def rewrite_request(question: str, reference: datetime) -> LLMRequest:
    return LLMRequest(
        step=STEP,
        messages=P.rewrite_messages(question, reference),
        schema_name=P.QUESTION_REWRITE,
        schema=P.REWRITE_SCHEMA,
        small=True,
        max_tokens=300,
    )


def _problem(answer: P.Rewrite) -> str | None:
    """What makes an answer that fits the schema unusable, or None."""
    if len(answer.alternatives) > P.REWRITE_ALTERNATIVES:
        return f"{len(answer.alternatives)} alternatives, at most {P.REWRITE_ALTERNATIVES}"
    if (answer.after is None) != (answer.before is None):
        return "a window with one end"
    if answer.after is not None and answer.before is not None:
        try:
            after, before = _utc(answer.after), _utc(answer.before)
        except OverflowError:  # 9999-12-31T23:00-05:00 is past what UTC holds
            return "a window past the years 1 to 9999 in UTC"
        if after >= before:
            return f"a window that ends ({before.date()}) before it starts ({after.date()})"
    return None


def _utc(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def alternatives_of(question: str, answer: P.Rewrite) -> list[str]:
    """The model's phrasings, stripped, without blanks, repeats of the question, or text a
    question could not be (checked as ``prepare_search`` checks the question)."""
    seen = {question.strip().casefold()}
    out: list[str] = []
    for text in answer.alternatives:
        text = text.strip()
        try:
            check_alternatives(check_text(text, "alternative", max_chars=MAX_QUERY_CHARS))
        except InvalidInput:
            continue
        if text.casefold() not in seen:
            seen.add(text.casefold())
            out.append(text)
    return out


def fuse(lists: Sequence[ScopeHits], weights: Sequence[float], limit: int) -> ScopeHits:
    """Reciprocal rank fusion of one scope's hits over several questions."""
    rows: dict[Any, dict[str, Any]] = {}
    best: dict[Any, Candidate] = {}
    scores: dict[Any, float] = {}
    for hits, weight in zip(lists, weights, strict=True):
        for rank, c in enumerate(hits.ranked, start=1):
            scores[c.key] = scores.get(c.key, 0.0) + weight / (RRF_K + rank)
            best.setdefault(c.key, c)
            rows.setdefault(c.key, hits.rows[c.key])
    ordered = sorted(scores, key=lambda k: (-scores[k], str(k)))[:limit]
    ranked: list[Candidate] = []
    for key in ordered:
        c = dataclasses.replace(best[key])
        c.score = scores[key]
        ranked.append(c)
    return ScopeHits(lists[0].scope, {k: rows[k] for k in ordered}, ranked)


async def _ask(db: Database, llm: LLM, group_id: str, req: SearchRequest) -> P.Rewrite | None:
    """The model's answer, or None (a ``RewriteWarning`` says why); the call is in the
    ledger either way."""
    reference = req.valid_at or utcnow()
    ledger = Ledger()
    try:
        async with db.transaction(group_id, "reading the LLM budget") as conn:
            budget, used = await read_budget(conn, group_id)
        ledger = Ledger(budget=budget, used=used)
        return await call(
            llm, ledger, rewrite_request(req.query, reference), P.Rewrite, _problem, retries=0
        )
    except LLMError as exc:
        warnings.warn(
            f"search rewrite: {exc}; searched the question alone", RewriteWarning, stacklevel=4
        )
        return None
    finally:
        await record_spent(db, group_id, ledger)


async def rewritten_search(
    db: Database, embedder: Embedder, llm: LLM | None, group_id: str, req: SearchRequest
) -> SearchResults:
    """``search`` with the model's phrasings of the question searched beside it."""
    if llm is None:
        warnings.warn(
            "search rewrite: no LLM is configured (pass llm= to open(), or set "
            "OPENAI_API_KEY); searched the question alone",
            RewriteWarning,
            stacklevel=3,
        )
        return results_of(req, await search_hits(db, embedder, group_id, req))
    answer = await _ask(db, llm, group_id, req)
    if answer is None:
        return results_of(req, await search_hits(db, embedder, group_id, req))
    if req.window is None and answer.after is not None and answer.before is not None:
        req = dataclasses.replace(req, window=(_utc(answer.after), _utc(answer.before)))
    others = alternatives_of(req.query, answer)
    requests = [req, *(dataclasses.replace(req, query=text) for text in others)]
    found = [await search_hits(db, embedder, group_id, r) for r in requests]
    if not others:
        return results_of(req, found[0])
    # the question weighs as much as all its phrasings together
    weights = [1.0, *([1.0 / len(others)] * len(others))]
    fused = {
        scope: fuse([hits[scope] for hits in found], weights, req.limit) for scope in req.scopes
    }
    return results_of(req, fused)

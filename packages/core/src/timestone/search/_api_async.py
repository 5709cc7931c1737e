"""Reading and retrieval, as ``AsyncMemory`` offers them: facts, timelines, search, context."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from .._arguments import check_as_of, check_limit, check_valid_at, entity_ref
from .._names import normalize
from .._records import (
    Entity,
    Fact,
    check_relation,
)
from .._results import Context, SearchResults
from .._time import NOW, Now, aware, utcnow
from ..db._database_async import Conn, Database
from ..embedders import Embedder
from ..errors import InvalidInput, InvalidPeriod
from ..write._entities_async import near_entity, read_entity
from ..write._facts_async import read_facts
from ._context_async import build_context
from ._request import prepare_search
from ._rewrite_async import rewritten_search
from ._run_async import search

__all__ = ["RetrievalAPI"]


class RetrievalAPI:
    """The reading methods of ``AsyncMemory``: facts and timelines as held at a point of
    either clock, an entity, hybrid search and prompt context (``_run``, ``_context``)."""

    _db: Database
    embedder: Embedder
    llm: Any

    async def facts(
        self,
        group_id: str,
        *,
        source: str | uuid.UUID | None = None,
        relation: str | None = None,
        target: str | uuid.UUID | None = None,
        valid_at: datetime | Now | None = NOW,
        as_of: datetime | None = None,
        limit: int = 100,
    ) -> list[Fact]:
        """Facts held at ``as_of`` (default: now) and true at ``valid_at`` (default: now;
        ``None``: every period), newest world time first."""
        world, system, n = check_valid_at(valid_at), check_as_of(as_of), check_limit(limit)
        src = None if source is None else entity_ref(source, "source")
        tgt = None if target is None else entity_ref(target, "target")
        if relation is not None:
            relation = check_relation(relation)
        async with self._db.transaction(group_id, "reading facts") as conn:

            async def read(ends: tuple[_Ref, ...]) -> list[Fact]:
                return await read_facts(
                    conn,
                    group_id,
                    source=ends[0],
                    relation=relation,
                    target=ends[1],
                    valid_at=world,
                    as_of=system,
                    read_time=utcnow(),
                    limit=n,
                )

            found = await read((src, tgt))
            if not found and (near := await _near(conn, group_id, system, (src, tgt))):
                found = await read(near)
            return found

    async def timeline(
        self,
        group_id: str,
        entity: str | uuid.UUID,
        *,
        as_of: datetime | None = None,
        relation: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
    ) -> list[Fact]:
        """Every period of every fact about ``entity`` (as source or target), by ``valid_at``.

        Narrowed, for an entity of long history: ``relation``; ``since`` and ``until``,
        the periods that overlap ``[since, until)`` in world time (a period open at
        ``since`` included; either end may be left open); ``limit``, the first periods
        only (1 to 1,000)."""
        ref = entity_ref(entity, "entity")
        system = check_as_of(as_of)
        start = None if since is None else aware(since, "since")
        end = None if until is None else aware(until, "until")
        if start is not None and end is not None and end <= start:
            raise InvalidPeriod(
                f"until ({end.isoformat()}) must be after since ({start.isoformat()})"
            )
        n = None if limit is None else check_limit(limit)
        if relation is not None:
            relation = check_relation(relation)
        async with self._db.transaction(group_id, "reading a timeline") as conn:

            async def read(ends: tuple[_Ref, ...]) -> list[Fact]:
                return await read_facts(
                    conn,
                    group_id,
                    entity=ends[0],
                    relation=relation,
                    valid_at=None,
                    as_of=system,
                    read_time=utcnow(),
                    order="timeline",
                    limit=n,
                    during=(start, end),
                )

            found = await read((ref,))
            if not found and (near := await _near(conn, group_id, system, (ref,))):
                found = await read(near)
            return found

    async def get_entity(
        self, group_id: str, name_or_id: str | uuid.UUID, *, as_of: datetime | None = None
    ) -> Entity | None:
        """The entity by id or name as held at ``as_of``; ``None`` if absent.

        An id is a ``UUID`` or its text (``str(entity.id)``); every read that takes an
        entity reads such text as the id. A name matches its normalized form (case,
        spacing, Unicode), then a near-identical spelling (accents, punctuation), the same
        tiers ingestion resolves names with, among the entities held at ``as_of``.
        """
        ref = entity_ref(name_or_id, "name_or_id")
        system = check_as_of(as_of)
        async with self._db.transaction(group_id, "reading an entity") as conn:
            if isinstance(ref, uuid.UUID):
                return await read_entity(conn, group_id, ref, system)
            found = await read_entity(conn, group_id, normalize(ref), system)
            if found is None:
                ident = await near_entity(conn, group_id, ref, system)
                if ident is not None:
                    found = await read_entity(conn, group_id, ident, system)
            return found

    async def search(
        self,
        group_id: str,
        query: str,
        *,
        limit: int = 10,
        scopes: Sequence[str] = ("facts",),
        valid_at: datetime | Now | None = NOW,
        as_of: datetime | None = None,
        reranker: Any = "rrf",
        center: str | uuid.UUID | None = None,
        edge_types: Sequence[str] | None = None,
        labels: Sequence[str] | None = None,
        ids: Sequence[uuid.UUID | str] | None = None,
        fact_records: bool = True,
        rewrite: bool = False,
    ) -> SearchResults:
        """Hybrid search (full text, vectors, graph walk) over ``scopes``: facts, entities,
        episodes, communities. ``reranker``: rrf, mmr, node_distance, episode_mentions, or a
        ``timestone.rerankers.Reranker``. Time: ``valid_at`` (default now; None: history),
        ``as_of`` (system time); time words of the question ("last year") are read against
        ``valid_at``, else now; an event ("after the move") is looked up first, and its side
        favoured. ``fact_records=False``: the episodes that only record
        structured facts (``add_facts``) are not searched, only told ones and chunks.
        ``rewrite=True``: one small call to the LLM adds phrasings of the question, searched
        beside it (``search/_rewrite_async``; without a model, or on a failed answer, a
        ``RewriteWarning`` and the plain search)."""

        req = prepare_search(
            query,
            limit=limit,
            scopes=scopes,
            valid_at=valid_at,
            as_of=as_of,
            reranker=reranker,
            center=center,
            edge_types=edge_types,
            labels=labels,
            ids=ids,
            fact_records=fact_records,
        )
        if not isinstance(cast(object, rewrite), bool):
            raise InvalidInput(f"rewrite must be True or False, got {rewrite!r:.80}")
        if rewrite:
            return await rewritten_search(self._db, self.embedder, self.llm, group_id, req)
        return await search(self._db, self.embedder, group_id, req)

    async def context(
        self,
        group_id: str,
        query: str,
        *,
        token_budget: int = 2000,
        valid_at: datetime | Now | None = NOW,
        as_of: datetime | None = None,
    ) -> Context:
        """Evidence for ``query`` under ``token_budget`` tokens, each item with a stable
        citation id; ``.as_prompt()`` renders it with dates."""

        return await build_context(
            self._db,
            self.embedder,
            group_id,
            query,
            token_budget=token_budget,
            valid_at=valid_at,
            as_of=as_of,
        )


_Ref = str | uuid.UUID | None


async def _near(
    conn: Conn, group_id: str, as_of: datetime | None, refs: tuple[_Ref, ...]
) -> tuple[_Ref, ...] | None:
    """For a read that found nothing: each name of ``refs`` as the entity held at ``as_of``
    it is a near spelling of ("Chateau Sud", '"Mira"'), the tiers ``get_entity`` reads;
    None when that names no other entity."""
    held: list[_Ref] = []
    for r in refs:
        near = await near_entity(conn, group_id, r, as_of) if isinstance(r, str) else None
        held.append(r if near is None else near)
    return tuple(held) if tuple(held) != refs else None

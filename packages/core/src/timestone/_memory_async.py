"""``AsyncMemory``: the public face of one Timestone graph store (blocking twin: ``Memory``).

A thin facade: it validates the call's shape, opens one tenant transaction,
and hands the work to the domain modules (``_ingest``, ``_facts``,
``_entities``, ``_correct``).
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

import pydantic
from psycopg import AsyncConnection
from psycopg.rows import DictRow

from . import _compat
from ._names import normalize
from ._records import (
    DocumentResult,
    Entity,
    EntityInput,
    Episode,
    Fact,
    FactInput,
    IngestResult,
    RemovalReport,
    RollbackReport,
    check_list,
    check_mapping,
    check_relation,
    check_text,
)
from ._results import CommunityReport, Context, SearchResults
from ._time import NOW, Now, aware, utcnow
from .db._database_async import Database, bind_embedder, migrate
from .db._database_async import reembed as reembed_all
from .db._distributed_async import check_workers
from .db._embedded import embedded_dsn
from .db._health_async import HEALTH_SAMPLE, vector_index_health
from .db._prepared import prepared_statements as prepared_statements_setting
from .db._tenant_async import tenant_connection
from .db._transfer_async import (
    LineSink,
    count_rows,
    export_rows,
    fact_history,
    import_rows,
    list_episodes,
    parse_export,
)
from .embedders import Embedder, WordLlamaEmbedder, check_embedder
from .embedders import awarm as load_model
from .errors import InvalidInput, InvalidPeriod, LLMError
from .extract._cardinality_async import Cardinalities
from .extract._extraction_async import (
    MAX_EPISODE_CHARS,
    build_types,
    check_budget,
    read_budget,
    read_usage,
    saga_episodes,
    set_budget,
    summarize_saga,
)
from .graph._communities_async import (
    MAX_UPDATE_ENTITIES,
    build_communities,
    communities_built,
    update_communities,
)
from .graph._nodes import GraphChunk, GraphEdge, GraphNodes, GraphRelation, GraphWrite
from .items._item import Item
from .llm import LLM, LLMBudget, LLMUsage, OpenAICompatibleLLM
from .ontology import Ontology
from .write._bulk_async import bulk_load, rebuild_vector_indexes
from .write._correct_async import check_episode_id, purge, remove, rollback
from .write._entities_async import near_entity, read_entity
from .write._facts_async import read_facts
from .write._ingest_async import Ingest
from .write._transaction_async import begin_write

__all__ = ["AsyncMemory"]

MAX_LIMIT = 1000
COMMUNITY_MODES = ("manual", "auto")


def _check_communities(mode: object) -> None:
    if mode not in COMMUNITY_MODES:
        raise InvalidInput(
            f"communities must be one of {', '.join(COMMUNITY_MODES)}, got {mode!r:.80}"
        )


def _check_pool_size(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInput(f"pool_size must be an integer of at least 1, got {value!r:.80}")
    return value


def _check_ontology(value: object) -> Ontology:
    if value is None:
        return Ontology()
    if not isinstance(value, Ontology):
        raise InvalidInput(
            f"ontology must be a timestone.Ontology or None, got {type(value).__name__}"
        )
    return value


def _limit(limit: object) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r:.80}")
    return limit


def _world(valid_at: datetime | Now | None) -> datetime | None:
    if valid_at is NOW:
        return utcnow()
    return None if valid_at is None else aware(valid_at, "valid_at")


def _system(as_of: datetime | None) -> datetime | None:
    return None if as_of is None else aware(as_of, "as_of")


def _entity_ref(value: object, what: str) -> str | uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    return check_text(value, what, max_chars=512)


class AsyncMemory:
    """A bi-temporal knowledge graph in Postgres. Open with ``await AsyncMemory.open()``."""

    def __init__(
        self,
        db: Database,
        *,
        embedder: Embedder,
        ontology: Ontology,
        llm: Any = None,
        communities: str = "manual",
        infer_cardinality: bool = True,
    ) -> None:
        _check_communities(communities)
        if not isinstance(cast(object, infer_cardinality), bool):
            raise InvalidInput("infer_cardinality must be True or False")
        self._db = db
        self.embedder = embedder
        self.ontology = ontology
        self.llm = llm
        self.communities = communities
        self.infer_cardinality = infer_cardinality
        self._learned = Cardinalities(
            db, ontology, lambda: self.llm if self.infer_cardinality else None
        )
        self._ingest = Ingest(db, embedder, ontology, self._learned)

    # -- lifecycle -------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        dsn: str | None = None,
        *,
        data_dir: str | Path | None = None,
        embedder: Embedder | None = None,
        llm: Any = None,
        ontology: Ontology | None = None,
        reembed: bool = False,
        pool_size: int = 8,
        communities: str = "manual",
        warm: bool = True,
        prepared_statements: bool | None = None,
        infer_cardinality: bool = True,
    ) -> Self:
        """Connect (or start the embedded Postgres), migrate, check the embedder, open a pool.

        No ``dsn`` and no ``TIMESTONE_DSN``: the embedded server in ``data_dir``.
        ``communities="auto"``: every write to a group is followed by an incremental
        community update of what it changed (see ``update_communities``); ``"manual"``
        (the default): communities change when you build or update them, and when a
        removal repairs them. ``pool_size``: connections to the database at most; a
        search of a table of 500,000 facts or more takes a second one when one is idle
        (its full-text list is read beside the rest), never waiting for it. ``warm``: load
        the embedder's model (its ``warm()``) beside the start-up, so that the first write
        or search does not pay for it; a short-lived process that may never embed (a read
        from the command line) passes ``warm=False``. ``prepared_statements``: whether the
        pool's connections prepare the statements they repeat (psycopg's
        ``prepare_threshold``; a search prepares its statements at their first use).
        False behind a pooler in transaction mode that does not carry prepared statements
        from one server connection to another (PgBouncer before 1.21): every statement is
        then planned each time it runs. None: the ``TIMESTONE_PREPARED_STATEMENTS``
        environment variable, ``on`` or ``off`` (unset: on). ``infer_cardinality``: with an
        LLM, a relation the ontology does not declare is asked about once per group (can a
        subject hold several at once?) and the answer kept, so that a later fact of a
        single-valued relation supersedes the earlier (docs/llm.md); without an LLM, or
        with False, such relations are ``many`` and their facts accumulate.
        """
        _check_communities(communities)
        size, kinds = _check_pool_size(pool_size), _check_ontology(ontology)
        prepare = prepared_statements_setting(prepared_statements)
        chosen = check_embedder(embedder) if embedder is not None else WordLlamaEmbedder()
        # the model loads beside the server's start and the migrations, not in the first
        # write or search
        if not isinstance(cast(object, warm), bool):
            raise InvalidInput(f"warm must be True or False, got {type(warm).__name__}")
        warming = await _compat.aspawn(load_model, chosen if warm else None)
        try:
            target = dsn or os.environ.get("TIMESTONE_DSN")
            if target is None:
                target = await _compat.ato_thread(embedded_dsn, data_dir)
            await check_workers(target)  # a Citus cluster: every worker answers
            await migrate(target)
            if reembed:
                await reembed_all(target, chosen)
            else:
                await bind_embedder(target, chosen)
            db = await Database.aopen(target, max_size=size, prepare=prepare)
        finally:
            await _compat.asettle(warming)
        model = llm if llm is not None else OpenAICompatibleLLM.from_env()
        return cls(
            db,
            embedder=chosen,
            ontology=kinds,
            llm=model,
            communities=communities,
            infer_cardinality=infer_cardinality,
        )

    @property
    def dsn(self) -> str:
        """The DSN this memory is connected to (embedded: its socket DSN)."""
        return self._db.dsn

    @asynccontextmanager
    async def connection(self, group_id: str) -> AsyncGenerator[AsyncConnection[DictRow]]:
        """A connection of the pool for your own SQL, in one transaction that sees only
        ``group_id`` under row level security (docs/sql.md); committed at the end of the
        block, rolled back if it raises. A connection to ``dsn`` acts as the schema's
        owner, whom the policies do not bind, and sees every group."""
        async with tenant_connection(self._db, group_id) as conn:
            yield conn

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def reembed(self, embedder: Embedder) -> int:
        """Move every stored vector to ``embedder`` and use it from now on; returns rows done."""
        done = await reembed_all(self._db.dsn, check_embedder(embedder))
        self.embedder = embedder
        self._ingest = Ingest(self._db, embedder, self.ontology, self._learned)
        return done

    @asynccontextmanager
    async def bulk_load(
        self, *, maintenance_work_mem: str | None = None, workers: int | None = None
    ) -> AsyncGenerator[None]:
        """Write inside it with the vector indexes dropped; they are built once on exit.

        For an initial import or a migration window: the indexes are the database's,
        so for every group vector search is exact (slower) while it runs, and other
        writers wait for the rebuild. Needs the schema owner (the DSN's user); one bulk
        load at a time (``ConflictError`` otherwise). ``maintenance_work_mem`` bounds the
        in-memory build (too small and the build spills to disk, several times slower,
        with a warning logged): None sizes it to the largest graph, at least 1 GB, at most
        the server's ``shared_buffers`` and never below the server's own setting;
        ``workers``: parallel build workers (``None``: the server's setting).
        """
        async with bulk_load(
            self._db.dsn, maintenance_work_mem=maintenance_work_mem, workers=workers
        ):
            yield

    async def rebuild_vector_indexes(
        self,
        *,
        indexes: Sequence[str] | None = None,
        maintenance_work_mem: str | None = None,
        workers: int | None = None,
    ) -> dict[str, float]:
        """Rebuild HNSW indexes worn by churn, while reads and writes go on.

        ``indexes``: names among ``facts_embedding_hnsw`` (the facts' open periods),
        ``facts_embedding_closed_hnsw``, ``entities_name_embedding_hnsw``,
        ``episodes_embedding_hnsw``, ``episodes_told_embedding_hnsw`` (the episodes that
        are not records of facts) and ``communities_name_embedding_hnsw`` (None: every
        one). Each is rebuilt by ``REINDEX INDEX CONCURRENTLY``; returns the seconds each
        took. For all
        groups of the database; needs the schema owner (the DSN's user), and not during
        a bulk load (``ConflictError``). ``maintenance_work_mem`` and ``workers`` as for
        ``bulk_load``.
        """
        return await rebuild_vector_indexes(
            self._db.dsn,
            indexes=indexes,
            maintenance_work_mem=maintenance_work_mem,
            workers=workers,
        )

    async def vector_index_health(
        self, *, indexes: Sequence[str] | None = None, sample: int = HEALTH_SAMPLE
    ) -> dict[str, float | None]:
        """The share of a sample of each HNSW index's rows that it finds among the ten
        nearest to their own vector, within their group, as a search reads it: about 1.0
        when the graph is whole, lower as churn wears it (``rebuild_vector_indexes``
        restores it). None for an index with no rows. ``indexes`` as for
        ``rebuild_vector_indexes``; ``sample``: rows probed per index (1 to 10,000, one
        index scan each). Needs the schema owner (the DSN's user).
        """
        return await vector_index_health(self._db.dsn, indexes=indexes, sample=sample)

    # -- writing ---------------------------------------------------------------------

    async def add_facts(
        self,
        group_id: str,
        facts: Sequence[FactInput | Mapping[str, Any]],
        *,
        reference_time: datetime,
        name: str | None = None,
        saga: str | None = None,
        idempotency_key: str | None = None,
        source_description: str = "",
    ) -> IngestResult:
        """Structured ingestion, no LLM: one episode, one transaction."""
        result = await self._ingest.add_facts(
            group_id,
            facts,
            reference_time=reference_time,
            name=name,
            saga=saga,
            idempotency_key_=idempotency_key,
            source_description=source_description,
        )
        await self._follow(group_id, [result])
        return result

    async def add_fact_batches(
        self,
        group_id: str,
        batches: Iterable[Mapping[str, Any]],
        *,
        on_progress: Callable[[int, int | None, IngestResult], object] | None = None,
        keep_results: bool = True,
    ) -> list[IngestResult]:
        """Many ``add_facts`` calls, for an import: each mapping of ``batches`` holds one
        call's arguments (``facts``, ``reference_time``, optional ``name``, ``saga``,
        ``idempotency_key``, ``source_description``). The batches are written in order,
        each its own transaction, while the next one is checked and embedded beside the
        database's work (faster than the loop where the client has time to spare while
        the database writes, not where its CPU is the bottleneck). ``batches`` may be a
        generator, read one batch ahead. ``on_progress(done, total, result)`` follows
        each commit (``total`` is None when ``batches`` has no length). A bad batch
        raises before any of it is written; the batches before it stay written, and
        running the same import again skips them (their idempotency keys).

        The results hold every fact and entity written, about 1.3 kB a fact: for an
        import of millions, ``keep_results=False`` keeps none (the list returned is
        empty; ``on_progress`` still sees each one)."""
        if on_progress is not None and not callable(on_progress):
            raise InvalidInput(
                f"on_progress must be a function or None, got {type(on_progress).__name__}"
            )
        follow = self.communities == "auto"  # what ``_follow`` needs, kept until the end
        done: list[IngestResult] = []

        def progress(count: int, total: int | None, result: IngestResult) -> None:
            if follow:
                done.append(result)
            if on_progress is not None:
                on_progress(count, total, result)

        try:
            return await self._ingest.add_fact_batches(
                group_id,
                batches,
                # with no one to see the results, none is built
                on_progress=progress if follow or on_progress is not None else None,
                keep_results=keep_results,
            )
        finally:
            if done:
                await self._follow(group_id, done)

    async def add_document(
        self,
        group_id: str,
        uri: str,
        content: str,
        *,
        title: str | None = None,
        reference_time: datetime,
        metadata: Mapping[str, Any] | None = None,
        max_chunk_chars: int = 1500,
    ) -> DocumentResult:
        """A long document as chunk episodes; the same uri with new content is a new version."""
        result = await self._ingest.add_document(
            group_id,
            uri,
            content,
            title=title,
            reference_time=reference_time,
            metadata=metadata,
            max_chunk_chars=max_chunk_chars,
            llm=self.llm,
        )
        await self._follow(group_id)
        return result

    async def add_episode(
        self,
        group_id: str,
        content: str,
        *,
        reference_time: datetime,
        name: str | None = None,
        source: str = "text",
        source_description: str = "",
        saga: str | None = None,
        idempotency_key: str | None = None,
        entity_types: Mapping[str, type[pydantic.BaseModel]] | None = None,
        edge_types: Mapping[str, type[pydantic.BaseModel]] | None = None,
        edge_type_map: Mapping[tuple[str, str], Sequence[str]] | None = None,
        excluded_entity_types: Sequence[str] | None = None,
        instructions: str | None = None,
        max_chars: int = MAX_EPISODE_CHARS,
    ) -> IngestResult:
        """An unstructured episode (``source``: text, message or json), extracted by the LLM;
        every model call happens before the one write transaction (see docs/llm.md)."""
        llm = self._llm("add_episode")
        types = build_types(
            self.ontology,
            entity_types,
            edge_types,
            edge_type_map,
            excluded_entity_types,
            instructions,
        )
        result = await self._ingest.add_episode(
            group_id,
            llm,
            content,
            reference_time=reference_time,
            name=name,
            source=source,
            source_description=source_description,
            saga=saga,
            idempotency_key_=idempotency_key,
            types=types,
            max_chars=max_chars,
        )
        await self._follow(group_id, [result])
        return result

    # -- reading ---------------------------------------------------------------------

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
        world, system, n = _world(valid_at), _system(as_of), _limit(limit)
        src = None if source is None else _entity_ref(source, "source")
        tgt = None if target is None else _entity_ref(target, "target")
        if relation is not None:
            relation = check_relation(relation)
        async with self._db.transaction(group_id, "reading facts") as conn:
            return await read_facts(
                conn,
                group_id,
                source=src,
                relation=relation,
                target=tgt,
                valid_at=world,
                as_of=system,
                read_time=utcnow(),
                limit=n,
            )

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
        ref = _entity_ref(entity, "entity")
        system = _system(as_of)
        start = None if since is None else aware(since, "since")
        end = None if until is None else aware(until, "until")
        if start is not None and end is not None and end <= start:
            raise InvalidPeriod(
                f"until ({end.isoformat()}) must be after since ({start.isoformat()})"
            )
        n = None if limit is None else _limit(limit)
        if relation is not None:
            relation = check_relation(relation)
        async with self._db.transaction(group_id, "reading a timeline") as conn:
            return await read_facts(
                conn,
                group_id,
                entity=ref,
                relation=relation,
                valid_at=None,
                as_of=system,
                read_time=utcnow(),
                order="timeline",
                limit=n,
                during=(start, end),
            )

    async def get_entity(
        self, group_id: str, name_or_id: str | uuid.UUID, *, as_of: datetime | None = None
    ) -> Entity | None:
        """The entity by id or name as held at ``as_of``; ``None`` if absent.

        A name matches its normalized form (case, spacing, Unicode), then a near-identical
        spelling (accents, punctuation), the same tiers ingestion resolves names with.
        """
        ref = _entity_ref(name_or_id, "name_or_id")
        system = _system(as_of)
        async with self._db.transaction(group_id, "reading an entity") as conn:
            if isinstance(ref, uuid.UUID):
                return await read_entity(conn, group_id, ref, system)
            found = await read_entity(conn, group_id, normalize(ref), system)
            if found is None:
                ident = await near_entity(conn, group_id, ref)
                if ident is not None:
                    found = await read_entity(conn, group_id, ident, system)
            return found

    # -- correcting and forgetting ---------------------------------------------------

    async def remove_episode(self, group_id: str, episode_id: uuid.UUID | str) -> RemovalReport:
        """Exact removal: the current graph becomes the graph that never saw the episode."""
        ident = check_episode_id(episode_id)
        async with self._db.transaction(group_id, "removing an episode") as conn:
            w = await begin_write(conn, group_id, self.embedder, exclusive=True)
            report = await remove(w, ident)
            built = await communities_built(conn, group_id)
        if built and (report.facts_expired or report.facts_created):
            # communities the episode fed: re-label the neighbourhood of what changed
            await self.update_communities(group_id)
        return report

    async def rollback(self, group_id: str, *, to: datetime) -> RollbackReport:
        """Make the current graph what it held at ``to``, as a new (reversible) write."""
        point = aware(to, "to")
        async with self._db.transaction(group_id, "rolling back") as conn:
            w = await begin_write(conn, group_id, self.embedder, exclusive=True)
            report = await rollback(w, point)
        await self._follow(group_id)
        return report

    async def purge_episode(self, group_id: str, episode_id: uuid.UUID | str) -> int:
        """Physical erasure of the episode and what only it supported; returns rows erased.

        Community versions that held an entity the episode mentioned are erased with it,
        history included, and a group that had communities gets them rebuilt."""
        ident = check_episode_id(episode_id)
        async with self._db.transaction(group_id, "purging an episode") as conn:
            w = await begin_write(conn, group_id, self.embedder, exclusive=True)
            built = await communities_built(conn, group_id)
            erased = await purge(w, ident)
        if built:
            await self.build_communities(group_id)
        return erased

    # -- items (key-value memory) --

    async def put_item(
        self,
        group_id: str,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        index: bool | str | Sequence[str] = True,
    ) -> Item:
        """Store a JSON object under ``namespace`` (``()``: the group's root) and ``key``,
        replacing the current version.

        ``index``: True embeds the value's JSON for ``search_items(query=...)``, a string
        embeds that text instead, a list of strings embeds each (the item scores by its
        best), False leaves the item out of query ranking.
        """
        from .embedders import check_vectors
        from .items._item import check_index, check_key, check_namespace, check_value, index_texts
        from .items._store_async import put_item

        ns = check_namespace(namespace, allow_empty=True)
        ident = check_key(key)
        data = check_value(value)
        texts = index_texts(data, check_index(index))
        vectors = []
        if texts:
            vectors = check_vectors(self.embedder, texts, await self.embedder.aembed(texts))
        async with self._db.transaction(group_id, "putting an item") as conn:
            w = await begin_write(
                conn, group_id, self.embedder, keys=["item\x1f" + "\x1f".join((*ns, ident))]
            )
            one = vectors[0] if len(vectors) == 1 else None
            return await put_item(w, ns, ident, data, one, vectors if len(vectors) > 1 else ())

    async def delete_item(self, group_id: str, namespace: Sequence[str], key: str) -> bool:
        """Expire the item (history keeps it for ``as_of``); False when there was none."""
        from .items._item import check_key, check_namespace
        from .items._store_async import delete_item

        ns = check_namespace(namespace, allow_empty=True)
        ident = check_key(key)
        async with self._db.transaction(group_id, "deleting an item") as conn:
            w = await begin_write(
                conn, group_id, self.embedder, keys=["item\x1f" + "\x1f".join((*ns, ident))]
            )
            return await delete_item(w, ns, ident)

    async def get_item(
        self,
        group_id: str,
        namespace: Sequence[str],
        key: str,
        *,
        as_of: datetime | None = None,
    ) -> Item | None:
        """The item as held at ``as_of`` (default: now); ``None`` if absent."""
        from .items._item import check_key, check_namespace
        from .items._store_async import get_item

        ns = check_namespace(namespace, allow_empty=True)
        ident = check_key(key)
        system = _system(as_of)
        async with self._db.transaction(group_id, "reading an item") as conn:
            return await get_item(conn, group_id, ns, ident, system)

    async def search_items(
        self,
        group_id: str,
        namespace_prefix: Sequence[str] = (),
        *,
        query: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        as_of: datetime | None = None,
    ) -> list[Item]:
        """Items under ``namespace_prefix`` whose value matches ``filter`` (JSONB-like equality
        and ``$eq $ne $gt $gte $lt $lte``); ranked by similarity to ``query`` (``score`` set),
        else newest first."""
        from .embedders import check_vectors
        from .items._item import check_filter, check_namespace, check_offset
        from .items._store_async import search_items

        prefix = check_namespace(namespace_prefix, "namespace_prefix", allow_empty=True)
        conditions = check_filter(filter)
        n, skip = _limit(limit), check_offset(offset)
        system = _system(as_of)
        vector = None
        if query is not None:
            check_text(query, "query", max_chars=10_000)
            vector = check_vectors(self.embedder, [query], await self.embedder.aembed([query]))[0]
        async with self._db.transaction(group_id, "searching items") as conn:
            return await search_items(
                conn,
                group_id,
                prefix,
                query_vector=vector,
                filter_=conditions,
                limit=n,
                offset=skip,
                as_of=system,
            )

    async def item_namespaces(
        self,
        group_id: str,
        *,
        prefix: Sequence[str] = (),
        suffix: Sequence[str] = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
        as_of: datetime | None = None,
    ) -> list[tuple[str, ...]]:
        """The namespaces holding items, sorted; ``*`` in ``prefix``/``suffix`` matches any
        label; ``max_depth`` cuts each namespace to that many labels."""
        from .items._item import check_depth, check_namespace, check_offset
        from .items._store_async import item_namespaces

        pre = check_namespace(prefix, "prefix", allow_empty=True)
        suf = check_namespace(suffix, "suffix", allow_empty=True)
        depth, n, skip = check_depth(max_depth), _limit(limit), check_offset(offset)
        system = _system(as_of)
        async with self._db.transaction(group_id, "listing item namespaces") as conn:
            return await item_namespaces(
                conn,
                group_id,
                prefix=pre,
                suffix=suf,
                max_depth=depth,
                limit=n,
                offset=skip,
                as_of=system,
            )

    # -- the property graph view (timestone.graph._nodes: entities, facts, chunks, links) --

    async def graph_upsert(
        self,
        group_id: str,
        *,
        entities: Sequence[EntityInput | Mapping[str, Any]] = (),
        chunks: Sequence[GraphChunk] = (),
        relations: Sequence[GraphRelation] = (),
        vectors: Mapping[str, Sequence[float]] | None = None,
        vector_space: str = "default",
        reference_time: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> GraphWrite:
        """Write graph nodes and edges in one transaction. ``entities`` upsert by name (an
        entity of that name, whatever its type, gets the labels and attributes, later values
        winning) through one episode; ``relations`` between entities become facts true from
        ``valid_at`` (default ``reference_time``, default now), those with a chunk end links;
        ``vectors`` (entity name to vector) are kept in ``vector_space`` for
        ``graph_nearest``. Node ids are per group: another group's ids are not seen."""
        from .graph._nodes import check_chunk, check_space, check_vector
        from .graph._property_graph_async import graph_upsert, write_keys
        from .items._item import check_value

        ents = [
            e if isinstance(e, EntityInput) else EntityInput(**check_mapping(e, "an entity"))
            for e in check_list(entities, "entities", "EntityInput records or dicts")
        ]
        for e in ents:
            check_value(e.attributes, f"attributes of node {e.name!r:.80}")
        parts = [check_chunk(c) for c in check_list(chunks, "chunks", "GraphChunk records")]
        for c in parts:
            check_value(c.attributes, f"attributes of chunk {c.key!r:.80}")
        rels: list[GraphRelation] = []
        for r in check_list(relations, "relations", "GraphRelation records"):
            if not isinstance(r, GraphRelation):
                raise InvalidInput(f"relations must be GraphRelation records, got {r!r:.80}")
            rels.append(dataclasses.replace(r, relation=check_relation(r.relation)))
            check_text(r.source, "relation source", max_chars=512)
            check_text(r.target, "relation target", max_chars=512)
            check_value(r.attributes, f"attributes of relation {r.relation!r:.80}")
        named: Mapping[str, Any] = {} if vectors is None else check_mapping(vectors, "vectors")
        given = {check_text(k, "vector entity name", max_chars=512): v for k, v in named.items()}
        vecs = {k: check_vector(v, f"vector of {k!r}") for k, v in given.items()}
        space = check_space(vector_space)
        ref = utcnow() if reference_time is None else aware(reference_time, "reference_time")
        world = ref if valid_at is None else aware(valid_at, "valid_at")
        text = " ".join(
            [*(e.name for e in ents), *(f"{r.source} {r.relation} {r.target}" for r in rels)]
        )
        vector = (await self._ingest.vectors([text]))[text] if text.strip() else None
        from .errors import ConflictError

        for attempt in range(3):
            try:
                async with self._db.transaction(group_id, "writing graph nodes") as conn:
                    w = await begin_write(
                        conn, group_id, self.embedder, keys=write_keys(ents, parts, rels)
                    )
                    return await graph_upsert(
                        w,
                        self._ingest,
                        entities=ents,
                        chunks=parts,
                        relations=rels,
                        vectors=vecs,
                        space=space,
                        reference_time=ref,
                        valid_at=world,
                        episode_vector=vector,
                    )
            except ConflictError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def graph_nodes(
        self,
        group_id: str,
        *,
        ids: Sequence[str] | None = None,
        attributes: Mapping[str, Any] | None = None,
        as_of: datetime | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> GraphNodes:
        """Entities and chunks by node id (a chunk key, an entity id, or a name resolved as
        ingestion resolves it) and/or by attributes (every one equal); neither: every node.
        ``limit``/``offset`` page the entities and the chunks each."""
        from .graph._nodes import check_node_ids
        from .graph._property_graph_async import graph_nodes
        from .items._item import check_offset, check_value

        wanted = None if ids is None else check_node_ids(ids, "ids")
        attrs = None if attributes is None else check_value(attributes, "attributes")
        n, skip, system = _limit(limit), check_offset(offset), _system(as_of)
        async with self._db.transaction(group_id, "reading graph nodes") as conn:
            return await graph_nodes(
                conn, group_id, ids=wanted, attributes=attrs, as_of=system, limit=n, offset=skip
            )

    async def graph_edges(
        self,
        group_id: str,
        *,
        around: Sequence[str] | None = None,
        depth: int = 1,
        relations: Sequence[str] | None = None,
        skip_relations: Sequence[str] = (),
        valid_at: datetime | Now | None = NOW,
        as_of: datetime | None = None,
        limit: int = 100,
    ) -> list[GraphEdge]:
        """Facts and links within ``depth`` hops of the nodes ``around`` names (either
        direction; nearest first; each edge once; cycles end the walk), by one recursive
        query. ``skip_relations`` are not walked; ``around=None``: every edge."""
        from .graph._nodes import check_depth, check_node_ids, check_relations
        from .graph._property_graph_async import graph_edges

        start = None if around is None else check_node_ids(around, "around")
        hops = check_depth(depth)
        only = None if relations is None else check_relations(relations, "relations")
        skip = check_relations(skip_relations, "skip_relations")
        world, system, n = _world(valid_at), _system(as_of), _limit(limit)
        async with self._db.transaction(group_id, "walking the graph") as conn:
            return await graph_edges(
                conn,
                group_id,
                around=start,
                depth=hops,
                relations=only,
                skip=skip,
                valid_at=world,
                as_of=system,
                read_time=utcnow(),
                limit=n,
            )

    async def graph_nearest(
        self,
        group_id: str,
        *,
        vector: Sequence[float] | None = None,
        query: str | None = None,
        vector_space: str = "default",
        limit: int = 10,
        as_of: datetime | None = None,
    ) -> list[Entity]:
        """Entities by cosine similarity (``score`` set): ``vector`` against the vectors
        ``graph_upsert`` kept in ``vector_space`` (exact; another dimension is refused), or
        ``query`` text against the entities' own name embeddings (this memory's embedder)."""
        from .embedders import check_vectors
        from .graph._nodes import check_space, check_vector
        from .graph._property_graph_async import graph_nearest

        if (vector is None) == (query is None):
            raise InvalidInput("graph_nearest takes a vector or a query, one of the two")
        n, system = _limit(limit), _system(as_of)
        space: str | None = None
        if vector is not None:
            probe, space = check_vector(vector, "vector"), check_space(vector_space)
        else:
            text = check_text(query, "query", max_chars=10_000)
            probe = check_vectors(self.embedder, [text], await self.embedder.aembed([text]))[0]
        async with self._db.transaction(group_id, "finding near entities") as conn:
            return await graph_nearest(conn, group_id, probe, space=space, limit=n, as_of=system)

    async def graph_retract(
        self,
        group_id: str,
        *,
        ids: Sequence[str] = (),
        edges: Sequence[uuid.UUID | str] = (),
    ) -> dict[str, int]:
        """Retract nodes by id (with every edge at them) and edges by ``GraphEdge.id`` (a
        fact id or a link key), in system time: current reads stop seeing them, ``as_of``
        still does. Returns what went, per kind. Node ids are per group."""
        from .graph._nodes import check_node_ids
        from .graph._property_graph_async import graph_retract

        nodes = check_node_ids(ids, "ids")
        parsed: list[uuid.UUID | str] = []
        for e in check_list(edges, "edges", "edge ids"):
            parsed.append(
                e if isinstance(e, uuid.UUID) else check_text(e, "edge id", max_chars=128)
            )
        async with self._db.transaction(group_id, "retracting graph nodes") as conn:
            w = await begin_write(conn, group_id, self.embedder, exclusive=True)
            return await graph_retract(w, ids=nodes, edges=parsed)

    # -- transfer and inventory --

    async def export_group(self, group_id: str, out: LineSink) -> dict[str, int]:
        """Write every row version of the group, both clocks as stored, as JSON lines to
        ``out`` (anything with ``write(str)``); returns the rows written per table."""
        if not callable(getattr(out, "write", None)):
            raise InvalidInput(
                f"out must be writable (a file opened for text, or anything with write(str)), "
                f"got {type(out).__name__}"
            )
        async with self._db.transaction(group_id, "exporting a group") as conn:
            return await export_rows(conn, group_id, out)

    async def import_group(
        self, lines: Iterable[str], *, group_id: str | None = None
    ) -> dict[str, int]:
        """Read an ``export_group`` file into an empty group (default: the exported one's id),
        in one transaction; returns the rows written per table."""
        parsed = parse_export(lines)
        target = group_id if group_id is not None else str(parsed.header.get("group_id", ""))
        async with self._db.transaction(target, "importing a group") as conn:
            w = await begin_write(conn, target, self.embedder, exclusive=True)
            return await import_rows(w, parsed)

    async def stats(self, group_id: str) -> dict[str, dict[str, int]]:
        """Rows of the group per table: ``current`` (held now) and ``versions`` (all)."""
        async with self._db.transaction(group_id, "counting rows") as conn:
            return await count_rows(conn, group_id)

    async def episodes(
        self,
        group_id: str,
        *,
        ids: Sequence[uuid.UUID | str] | None = None,
        as_of: datetime | None = None,
        limit: int = 100,
    ) -> list[Episode]:
        """Episodes held at ``as_of`` (default: now), newest ``reference_time`` first."""
        wanted = (
            None
            if ids is None
            else [check_episode_id(i) for i in check_list(ids, "ids", "episode ids")]
        )
        system, n = _system(as_of), _limit(limit)
        async with self._db.transaction(group_id, "reading episodes") as conn:
            return await list_episodes(conn, group_id, as_of=system, ids=wanted, limit=n)

    async def fact_history(self, group_id: str, entity: str | uuid.UUID) -> list[Fact]:
        """Every version of every fact about ``entity``, superseded beliefs included (their
        ``expired_at`` set), by ``valid_at``: the material of a timeline picture."""
        ref = _entity_ref(entity, "entity")
        async with self._db.transaction(group_id, "reading a fact history") as conn:
            return await fact_history(conn, group_id, ref, read_time=utcnow())

    # -- retrieval --

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
        ``valid_at``, else now. ``fact_records=False``: the episodes that only record
        structured facts (``add_facts``) are not searched, only told ones and chunks.
        ``rewrite=True``: one small call to the LLM adds phrasings of the question, searched
        beside it (``timestone.search._rewrite_async``; without a model, or on a failed answer, a
        ``RewriteWarning`` and the plain search)."""
        from .search._request import prepare_search
        from .search._run_async import search

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
            from .search._rewrite_async import rewritten_search

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
        from .search._context_async import build_context

        return await build_context(
            self._db,
            self.embedder,
            group_id,
            query,
            token_budget=token_budget,
            valid_at=valid_at,
            as_of=as_of,
        )

    async def build_communities(self, group_id: str) -> CommunityReport:
        """Recompute the group's communities from its current fact graph (label propagation)."""
        return await build_communities(self._db, self.embedder, self.llm, group_id)

    async def update_communities(
        self, group_id: str, entities: Sequence[uuid.UUID] | None = None
    ) -> CommunityReport:
        """Incremental update after ingestion: re-label only the neighbourhood of ``entities``
        (default: entities whose facts changed since the last build)."""
        return await update_communities(self._db, self.embedder, self.llm, group_id, entities)

    async def _follow(
        self, group_id: str, results: Sequence[IngestResult | DocumentResult] | None = None
    ) -> None:
        """With ``communities="auto"``, update the group's communities after a write, in a
        second transaction: around the entities the write touched (those it mentioned and
        the ends of the facts it closed), or, without ``results``, around everything
        changed since the last community write. Should that transaction fail, the write
        stands, and ``update_communities(group)`` catches up."""
        if self.communities != "auto":
            return
        if results is None:
            await self.update_communities(group_id)
            return
        seeds: dict[uuid.UUID, None] = {}
        for result in results:
            seeds.update(dict.fromkeys(e.id for e in result.entities))
            for fact in (*result.facts, *result.invalidated):
                seeds.update(dict.fromkeys((fact.source_id, fact.target_id)))
        if len(seeds) > MAX_UPDATE_ENTITIES:
            await self.update_communities(group_id)
        elif seeds:
            await self.update_communities(group_id, list(seeds))

    # -- LLM ingestion --

    def _llm(self, what: str) -> LLM:
        if self.llm is None:
            raise LLMError(
                f"{what} needs an LLM, and none is configured: pass "
                "llm=timestone.OpenAICompatibleLLM(...) to open(), or set OPENAI_API_KEY or "
                "OPENAI_BASE_URL; add_facts ingests structured facts without any LLM",
                step="configuration",
            )
        return self.llm

    async def add_episodes(
        self,
        group_id: str,
        episodes: Sequence[Mapping[str, Any]],
        *,
        concurrency: int = 4,
        on_progress: Callable[[int, int, IngestResult], object] | None = None,
        entity_types: Mapping[str, type[pydantic.BaseModel]] | None = None,
        edge_types: Mapping[str, type[pydantic.BaseModel]] | None = None,
        edge_type_map: Mapping[tuple[str, str], Sequence[str]] | None = None,
        excluded_entity_types: Sequence[str] | None = None,
        instructions: str | None = None,
        max_chars: int = MAX_EPISODE_CHARS,
    ) -> list[IngestResult]:
        """Bulk ``add_episode``: each mapping holds its arguments (``content``,
        ``reference_time``, optional ``name``, ``source``, ``source_description``, ``saga``,
        ``idempotency_key``); at most ``concurrency`` run at once (the blocking twin runs
        them in order). ``on_progress(done, total, result)`` follows each one."""
        llm = self._llm("add_episodes")
        types = build_types(
            self.ontology,
            entity_types,
            edge_types,
            edge_type_map,
            excluded_entity_types,
            instructions,
        )
        results = await self._ingest.add_episodes(
            group_id,
            llm,
            episodes,
            types=types,
            max_chars=max_chars,
            concurrency=concurrency,
            on_progress=on_progress,
        )
        await self._follow(group_id, results)
        return results

    async def saga_episodes(self, group_id: str, saga: str) -> list[Episode]:
        """The episodes of a saga (a named thread), in world-time order."""
        name = check_text(saga, "saga", max_chars=512)
        async with self._db.transaction(group_id, "reading a saga") as conn:
            return await saga_episodes(conn, group_id, name)

    async def summarize_saga(self, group_id: str, saga: str) -> str:
        """A summary of a saga, on request: one call to the small model (counted and budgeted)."""
        name = check_text(saga, "saga", max_chars=512)
        text, _ = await summarize_saga(self._db, group_id, self._llm("summarize_saga"), name)
        return text

    async def set_llm_budget(
        self,
        group_id: str,
        *,
        max_calls: int | None = None,
        max_tokens: int | None = None,
        period: timedelta = timedelta(days=1),
    ) -> LLMBudget | None:
        """Limit the group's LLM calls and/or tokens in any window of ``period``; both
        ``None`` removes the budget. Work the budget cannot cover is refused before a call."""
        budget = check_budget(max_calls, max_tokens, period)
        async with self._db.transaction(group_id, "setting an LLM budget") as conn:
            w = await begin_write(conn, group_id, self.embedder, keys=["llm-budget"])
            await set_budget(w, budget)
        return budget

    async def llm_budget(self, group_id: str) -> LLMBudget | None:
        """The group's LLM budget, or ``None``."""
        async with self._db.transaction(group_id, "reading the LLM budget") as conn:
            return (await read_budget(conn, group_id))[0]

    async def llm_usage(self, group_id: str, *, since: datetime | None = None) -> LLMUsage:
        """The LLM calls and tokens the group spent since ``since`` (default: ever), failed
        work included."""
        point = _system(since)
        async with self._db.transaction(group_id, "reading LLM usage") as conn:
            return await read_usage(conn, group_id, since=point)

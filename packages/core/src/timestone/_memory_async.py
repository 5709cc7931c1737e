"""``AsyncMemory``: the public face of one Timestone graph store (blocking twin: ``Memory``).

A thin facade: the lifecycle (open, close, connections), the writes and corrections,
each of which checks the call's shape and hands the work to its feature (``write/``);
the rest of the public methods come from each feature's own part of the facade:
reading and retrieval (``search/_api``), items (``items/_api``), the property graph and
communities (``graph/_api``), upkeep and transfer (``db/_upkeep``), the model's budget and
sagas (``extract/_api``). Why in parts: docs/decisions/021-the-core-by-feature.md.
"""

from __future__ import annotations

import logging
import math
import os
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

import pydantic
from psycopg import AsyncConnection
from psycopg.rows import DictRow

from . import _compat
from ._records import (
    DocumentResult,
    FactInput,
    IngestResult,
    RemovalReport,
    RollbackReport,
)
from ._time import aware
from .db._database_async import Database, migrate
from .db._distributed_async import check_workers
from .db._embedded import default_data_dir, embedded_dsn
from .db._embedding_async import bind_embedder
from .db._embedding_async import reembed as reembed_all
from .db._prepared import prepared_statements as prepared_statements_setting
from .db._tenant_async import tenant_connection
from .db._upkeep_async import UpkeepAPI
from .embedders import Embedder, WordLlamaEmbedder, check_embedder
from .embedders import awarm as load_model
from .errors import InvalidInput, TimestoneError
from .extract._api_async import ModelAPI
from .extract._cardinality_async import Cardinalities
from .extract._extraction_async import (
    MAX_EPISODE_CHARS,
    build_types,
)
from .graph._api_async import GraphAPI
from .graph._communities_async import (
    MAX_UPDATE_ENTITIES,
    communities_built,
)
from .items._api_async import ItemsAPI
from .llm import LLM, OpenAICompatibleLLM, check_llm
from .ontology import Ontology
from .search._api_async import RetrievalAPI
from .write._correct_async import check_episode_id, purge, remove, rollback
from .write._ingest_async import Ingest
from .write._inputs_async import check_on_progress
from .write._transaction_async import begin_write

__all__ = ["AsyncMemory"]

_log = logging.getLogger("timestone")

COMMUNITY_MODES = ("manual", "auto")


def _check_communities(mode: object) -> None:
    if mode not in COMMUNITY_MODES:
        raise InvalidInput(
            f"communities must be one of {', '.join(COMMUNITY_MODES)}, got {mode!r:.80}"
        )


#: The most connections ``pool_size`` may ask for: Postgres's default ``max_connections``
#: (the embedded server's). A pool the server cannot fill makes callers wait for a
#: connection that never comes.
MAX_POOL_SIZE = 100


def _check_pool_size(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInput(f"pool_size must be an integer of at least 1, got {value!r:.80}")
    if value > MAX_POOL_SIZE:
        raise InvalidInput(
            f"pool_size must be at most {MAX_POOL_SIZE} (Postgres's default max_connections), "
            f"got {value}"
        )
    return value


def _check_pool_timeout(value: object) -> float:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidInput(f"pool_timeout must be a number of seconds above 0, got {value!r:.80}")
    return float(value)


def _check_flag(what: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{what} must be True or False, got {value!r:.80}")
    return value


def _check_where(dsn: object, data_dir: object) -> None:
    """A DSN is a non-empty string (an empty one would reach libpq's defaults, or the
    embedded server, unasked); a data dir, a path; not both."""
    if dsn is not None and (not isinstance(dsn, str) or not dsn.strip()):
        shown = "an empty string" if isinstance(dsn, str) else type(dsn).__name__
        raise InvalidInput(
            f"dsn must be a connection string (postgresql://...) or None for the embedded "
            f"server, got {shown}"
        )
    if data_dir is not None:
        if not isinstance(data_dir, (str, os.PathLike)):
            raise InvalidInput(f"data_dir must be a path, got {type(data_dir).__name__}")
        if "\x00" in os.fsdecode(cast("str | os.PathLike[str]", data_dir)):
            raise InvalidInput("data_dir contains a NUL byte")
        if dsn is not None:
            raise InvalidInput(
                "pass dsn= or data_dir=, not both: data_dir is the embedded server's"
            )


def _target(dsn: str | None, data_dir: str | Path | None) -> str | Path:
    """The DSN to connect to, or the data dir of the embedded server to start: ``dsn``,
    else ``TIMESTONE_DSN`` (set but blank counts as unset), else ``data_dir``, else
    ``TIMESTONE_DATA_DIR`` or the platform's user data dir."""
    if dsn is not None:
        return dsn
    env = os.environ.get("TIMESTONE_DSN", "")
    if env.strip():
        return env
    return Path(data_dir) if data_dir is not None else default_data_dir()


def _check_ontology(value: object) -> Ontology:
    if value is None:
        return Ontology()
    if not isinstance(value, Ontology):
        raise InvalidInput(
            f"ontology must be a timestone.Ontology or None, got {type(value).__name__}"
        )
    return value


class AsyncMemory(RetrievalAPI, ItemsAPI, GraphAPI, UpkeepAPI, ModelAPI):
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
        _check_flag("infer_cardinality", infer_cardinality)
        self._db = db
        self.embedder = embedder
        self.ontology = ontology
        self._llm_model: LLM | None = check_llm(llm)
        self.communities = communities
        self.infer_cardinality = infer_cardinality
        self._learned = Cardinalities(
            db, ontology, lambda: self.llm if self.infer_cardinality else None
        )
        self._ingest = Ingest(db, embedder, ontology, self._learned)

    @property
    def llm(self) -> LLM | None:
        """The model that text, message and JSON episodes go through (None: none); set it
        to a ``timestone.LLM`` or None."""
        return self._llm_model

    @llm.setter
    def llm(self, value: object) -> None:
        self._llm_model = check_llm(value)

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
        pool_timeout: float = 30.0,
        communities: str = "manual",
        warm: bool = True,
        prepared_statements: bool | None = None,
        infer_cardinality: bool = True,
    ) -> Self:
        """Connect (or start the embedded Postgres), migrate, check the embedder, open a pool.

        Where: ``dsn``, a Postgres server; else the server ``TIMESTONE_DSN`` names; else
        the embedded server in ``data_dir``, else in ``TIMESTONE_DATA_DIR``, else in the
        platform's user data dir. ``dsn`` and ``data_dir`` together are refused;
        ``TIMESTONE_DSN`` set points every open at its server, one passing ``data_dir``
        included (a deployment's setting, as for the demo). Either variable set but blank
        counts as unset (whitespace around a ``TIMESTONE_DATA_DIR`` is refused); an empty
        ``dsn`` is refused, not taken for none. Every argument and variable, the model's
        too (``OpenAICompatibleLLM.from_env``), is checked before a server is started or
        anything is written.
        ``communities="auto"``: every write to a group is followed by an incremental
        community update of what it changed (see ``update_communities``); ``"manual"``
        (the default): communities change when you build or update them, and when a
        removal repairs them. ``pool_size``: connections to the database at most; a
        search of a table of 500,000 facts or more takes a second one when one is idle
        (its full-text list is read beside the rest), never waiting for it.
        ``pool_timeout``: the seconds a call waits for a connection when all ``pool_size``
        are busy, then fails with ``ConnectionFailed`` (psycopg_pool's ``timeout``). ``warm``: load
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
        waiting = _check_pool_timeout(pool_timeout)
        prepare = prepared_statements_setting(prepared_statements)
        check_llm(llm)
        _check_where(dsn, data_dir)
        if not isinstance(cast(object, reembed), bool):
            raise InvalidInput(f"reembed must be True or False, got {type(reembed).__name__}")
        if not isinstance(cast(object, warm), bool):
            raise InvalidInput(f"warm must be True or False, got {type(warm).__name__}")
        _check_flag("infer_cardinality", infer_cardinality)
        place = _target(dsn, data_dir)
        model = llm if llm is not None else OpenAICompatibleLLM.from_env()
        chosen = check_embedder(embedder) if embedder is not None else WordLlamaEmbedder()
        # the model loads beside the server's start and the migrations, not in the first
        # write or search
        warming = await _compat.aspawn(load_model, chosen if warm else None)
        try:
            embedded = isinstance(place, Path)
            target = await _compat.ato_thread(embedded_dsn, place) if embedded else str(place)
            await check_workers(target)  # a Citus cluster: every worker answers
            await migrate(target)
            if reembed:
                await reembed_all(target, chosen)
            else:
                await bind_embedder(target, chosen)
            db = await Database.aopen(target, max_size=size, wait=waiting, prepare=prepare)
        finally:
            await _compat.asettle(warming)
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
        """Close the connection pool; ``async with`` does it on leaving the block. A
        method called afterwards raises ``InvalidInput`` (this Memory is closed); a
        second ``close`` does nothing.

        The embedded server keeps running, for the other memories of this process and
        for the next open: it stops when the last process using it exits (processes
        opening one data dir share its server). Exit before removing or moving the
        data dir."""
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
        check_on_progress(on_progress)
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
        extract: bool = True,
    ) -> DocumentResult:
        """A long document as chunk episodes; the same uri with new content, title or metadata is
        a new version (the same again, every chunk of its version current: ``created`` False,
        nothing written; with a chunk of it removed, a new version with every chunk). The
        title is ``title``, else ``metadata["title"]`` (where document loaders put it), else
        the uri: both given must be the same; the key ``document_sha256`` is the library's.
        The uri takes at most 2,048 bytes of UTF-8, and the content needs a visible
        character. With a model, every chunk is extracted into facts; ``extract=False`` keeps
        the chunks only."""
        if not isinstance(cast(object, extract), bool):
            raise InvalidInput(f"extract must be True or False, got {extract!r:.80}")
        result = await self._ingest.add_document(
            group_id,
            uri,
            content,
            title=title,
            reference_time=reference_time,
            metadata=metadata,
            max_chunk_chars=max_chunk_chars,
            llm=self.llm if extract else None,
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
            async with self._repairing(group_id, "removal"):
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
            async with self._repairing(group_id, "purge"):
                await self.build_communities(group_id)
        return erased

    async def _follow(
        self, group_id: str, results: Sequence[IngestResult | DocumentResult] | None = None
    ) -> None:
        """With ``communities="auto"``, update the group's communities after a write, in a
        second transaction: around the entities the write touched (those it mentioned and
        the ends of the facts it closed), or, without ``results``, around everything
        changed since the last community write."""
        if self.communities != "auto":
            return
        if results is None:
            async with self._repairing(group_id, "write"):
                await self.update_communities(group_id)
            return
        seeds: dict[uuid.UUID, None] = {}
        for result in results:
            seeds.update(dict.fromkeys(e.id for e in result.entities))
            for fact in (*result.facts, *result.invalidated):
                seeds.update(dict.fromkeys((fact.source_id, fact.target_id)))
        if len(seeds) > MAX_UPDATE_ENTITIES:
            async with self._repairing(group_id, "write"):
                await self.update_communities(group_id)
        elif seeds:
            async with self._repairing(group_id, "write"):
                await self.update_communities(group_id, list(seeds))

    @asynccontextmanager
    async def _repairing(self, group_id: str, write: str) -> AsyncGenerator[None]:
        """Around the communities' repair that follows a committed write. Should it fail,
        the write stands and its result is returned all the same: the failure is logged (a
        warning on the ``timestone`` logger), and ``update_communities(group)`` catches up."""
        try:
            yield
        except TimestoneError as exc:
            _log.warning(
                "group %r: the %s committed; updating its communities failed, and"
                " update_communities(group) catches up: %s",
                group_id,
                write,
                exc,
            )

    # -- LLM ingestion --
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

"""Upkeep of a memory: bulk loads, index rebuilds and health, a group out and in, counts."""

from __future__ import annotations

import io
import uuid
from collections.abc import AsyncGenerator, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

from .._arguments import check_as_of, check_limit, entity_ref
from .._records import (
    Episode,
    Fact,
    check_list,
)
from .._time import utcnow
from ..embedders import Embedder
from ..errors import InvalidInput
from ..write._bulk_async import bulk_load, rebuild_vector_indexes
from ..write._correct_async import check_episode_id
from ..write._transaction_async import begin_write
from ._database_async import Database
from ._health_async import HEALTH_SAMPLE, vector_index_health
from ._import_checks import header_group
from ._transfer_async import (
    LineSink,
    count_rows,
    export_rows,
    fact_history,
    import_rows,
    list_episodes,
    parse_export,
)

__all__ = ["UpkeepAPI"]


class UpkeepAPI:
    """The upkeep methods of ``AsyncMemory``: bulk loads, vector index rebuilds and their
    health, export and import of a group, row counts, episode listings, fact histories."""

    _db: Database
    embedder: Embedder

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

    async def export_group(self, group_id: str, out: LineSink) -> dict[str, int]:
        """Write every row version of the group, both clocks as stored, as JSON lines to
        ``out`` (anything with ``write(str)``); returns the rows written per table."""
        if not callable(getattr(out, "write", None)):
            raise InvalidInput(
                f"out must be writable (a file opened for text, or anything with write(str)), "
                f"got {type(out).__name__}"
            )
        if isinstance(out, (io.RawIOBase, io.BufferedIOBase)):
            raise InvalidInput(
                f"out is a binary stream ({type(out).__name__}); the export is text: open the "
                "file with 'w', or wrap it in io.TextIOWrapper(..., encoding='utf-8')"
            )
        # every table read from one snapshot: a write committed meanwhile is in all or none
        async with self._db.transaction(group_id, "exporting a group", snapshot=True) as conn:
            return await export_rows(conn, group_id, out)

    async def import_group(
        self, lines: Iterable[str], *, group_id: str | None = None
    ) -> dict[str, int]:
        """Read an ``export_group`` file into an empty group (default: the exported one's id),
        in one transaction; returns the rows written per table. A file that is not whole, or
        holds a value a write method would refuse, or a row naming a row it does not hold, is
        refused naming the line, and nothing is written."""
        parsed = parse_export(lines)
        target = (
            group_id if group_id is not None else header_group(parsed.header, parsed.header_line)
        )
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
        system, n = check_as_of(as_of), check_limit(limit)
        async with self._db.transaction(group_id, "reading episodes") as conn:
            return await list_episodes(conn, group_id, as_of=system, ids=wanted, limit=n)

    async def fact_history(self, group_id: str, entity: str | uuid.UUID) -> list[Fact]:
        """Every version of every fact about ``entity``, superseded beliefs included (their
        ``expired_at`` set), by ``valid_at``: the material of a timeline picture."""
        ref = entity_ref(entity, "entity")
        async with self._db.transaction(group_id, "reading a fact history") as conn:
            return await fact_history(conn, group_id, ref, read_time=utcnow())

"""Documents (``add_document``): the call's checks; the extraction before the write, every
chunk extracted in order, with its neighbours, the title and the entities of earlier
chunks as context, then resolved; and the write, in which a new version of a uri retracts
the chunks of the one before."""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, LiteralString

from psycopg.types.json import Jsonb

from .. import _compat
from .._groups import check_group
from .._records import (
    MAX_NAME_CHARS,
    DocumentResult,
    Episode,
    Fact,
    check_json,
    check_json_size,
    check_mapping,
    check_text,
    check_visible,
)
from .._time import aware
from ..errors import ConflictError, InvalidInput
from ..extract._extraction_async import (
    Extracted,
    Ledger,
    build_types,
    extract,
    read_budget,
    record_spent,
    write_ledger,
)
from ..extract._resolution_async import Plan, plan
from ..llm import LLM
from ._chunks import Chunk, chunk_text, late_vectors
from ._correct_async import retract_episodes
from ._entities_async import lock_keys
from ._episodes_async import EpisodeInsert
from ._facts_async import read_facts
from ._inputs_async import Prepared, named, optional_text
from ._outcome_async import entities_by_id, episode_facts, existing_document
from ._transaction_async import Write, begin_write, write_with_retry

if TYPE_CHECKING:
    from .._vectors import Row
    from ._ingest_async import Ingest

__all__ = [
    "CURRENT_CHUNKS",
    "LAST_DOCUMENT_VERSION",
    "MAX_CONTENT_CHARS",
    "MAX_URI_BYTES",
    "document_plans",
    "ingest_document",
    "unchanged",
]

MAX_CONTENT_CHARS = 1_000_000
"""The longest document ``add_document`` takes, in characters."""
MAX_URI_BYTES = 2_048
"""The longest uri ``add_document`` takes, in bytes of UTF-8. A uri is part of its chunks'
idempotency key, one entry of a database index with the group (``episodes_current_key``),
which Postgres caps at 2,704 bytes: with the longest group id (128 characters) and the key's
other parts (the content's SHA-256 and the chunk's number), such an entry of a uri of
2,048 bytes is about 2,300 bytes."""
RESERVED_METADATA = "document_sha256"  # the content's digest, in every chunk's metadata
ATTEMPTS = 3  # writes that met the document changed after extraction was skipped

# The highest version a document ever had, removed ones included: a new version of it is
# numbered after it, so that no number is given twice (index episodes_document_versions).
LAST_DOCUMENT_VERSION: LiteralString = (
    "SELECT coalesce(max(document_version), 0) AS v FROM timestone.episodes"
    " WHERE group_id = %s AND document_uri = %s"
)
# A document's current chunks, and whether the call's content, title and metadata are
# theirs: the same content under a new title or metadata is a new version too (the title
# is every chunk's context), so that a correction is not dropped (``unchanged``).
CURRENT_CHUNKS: LiteralString = (
    "SELECT id, document_version, chunk_index, char_end, (metadata->>'document_sha256' = %s"
    " AND metadata->>'title' = %s AND metadata - 'document_sha256' - 'title'"
    " = %s::jsonb - 'document_sha256' - 'title') IS TRUE AS same"
    " FROM timestone.episodes WHERE group_id = %s AND document_uri = %s"
    " AND expired_at IS NULL ORDER BY chunk_index"
)


@dataclasses.dataclass(frozen=True, slots=True)
class DocumentCall:
    """One ``add_document`` call, checked and chunked: what every attempt of it shares.
    ``late``: the chunks' vectors from one pass over the document (late chunking), if the
    embedder makes them."""

    group_id: str
    uri: str
    digest: str  # the content's SHA-256
    title: str
    meta: dict[str, Any]
    chunks: list[Chunk]
    ref: datetime
    late: Row | None

    def current(self) -> tuple[object, ...]:
        """The parameters of ``CURRENT_CHUNKS``."""
        return (self.digest, self.title, Jsonb(self.meta), self.group_id, self.uri)


@dataclasses.dataclass(frozen=True, slots=True)
class _Planned:
    """What one attempt wrote from: each chunk's plan and facts, the vectors, the model's
    calls, and whether a model read the chunks."""

    plans: list[Plan]
    prepared: list[list[Prepared]]
    vectors: dict[str, Row]
    ledger: Ledger
    extracted: bool


class _Changed(Exception):
    """Raised in the write of a call whose extraction was skipped (the document held this
    content when it was read) when the document no longer holds it: the transaction is
    rolled back, and the call extracts the content before it writes."""


def check_uri(value: object) -> str:
    """A document's uri: text (``check_text``) of at most ``MAX_URI_BYTES`` bytes of UTF-8."""
    uri = check_text(value, "document uri", max_chars=sys.maxsize)  # bounded by its bytes
    size = len(uri.encode())
    if size > MAX_URI_BYTES:
        raise InvalidInput(
            f"document uri {uri!r:.80} is {size:,} bytes of UTF-8; the limit is "
            f"{MAX_URI_BYTES:,} bytes (the uri is part of every chunk's key, which the "
            "database indexes)"
        )
    return uri


def document_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The call's metadata, checked; the key the library writes itself is refused."""
    meta = {} if metadata is None else dict(check_mapping(metadata, "document metadata"))
    if RESERVED_METADATA in meta:
        raise InvalidInput(
            f"document metadata has the key {RESERVED_METADATA!r}, which is reserved: "
            "add_document records the content's SHA-256 under it; name the key otherwise"
        )
    check_json(meta, "document metadata")
    check_json_size(meta, "document metadata")
    return meta


def document_title(uri: str, title: object, meta: Mapping[str, Any]) -> str:
    """The document's title: ``title``, else the metadata's ``"title"`` (where LangChain's
    and LlamaIndex's document loaders put it; None or blank is none), else the uri. Given
    both, they must be the same: the title is stored as the metadata's ``"title"``."""
    given = optional_text(title, "document title", MAX_NAME_CHARS)
    found: object = meta.get("title")
    if found is None or (isinstance(found, str) and not found.strip()):
        return given or uri
    loader = check_text(found, "document metadata['title']", max_chars=MAX_NAME_CHARS)
    if given is not None and given != loader:
        raise InvalidInput(
            f"document title {given!r:.80} and metadata['title'] {loader!r:.80} differ: "
            "the metadata's title is the document's title; give one of them, or the same"
        )
    return loader


def unchanged(rows: Sequence[Mapping[str, Any]], chunks: Sequence[Chunk]) -> bool:
    """Whether a document's current chunks (``CURRENT_CHUNKS``) are the whole of one version
    of the call's content, title and metadata. A version with a chunk removed (or purged)
    is not: the same content again is then a new version, which brings every passage back."""
    if not rows or not all(r["same"] for r in rows):
        return False
    if len({r["document_version"] for r in rows}) != 1:
        return False
    if [r["chunk_index"] for r in rows] != list(range(len(rows))):
        return False
    # the last chunk of a text ends where the text does, whatever the size of its chunks
    return rows[-1]["char_end"] == chunks[-1].end


async def ingest_document(
    ingest: Ingest,
    group_id: str,
    uri: str,
    content: str,
    *,
    title: str | None,
    reference_time: datetime,
    metadata: Mapping[str, Any] | None,
    max_chunk_chars: int,
    llm: LLM | None,
) -> DocumentResult:
    """``Ingest.add_document``: the call checked, chunked and embedded once, then extracted
    (unless the document holds this content already) and written. An attempt whose
    extraction was skipped, and whose write finds the document changed since, extracts
    before it writes; past ``ATTEMPTS`` such attempts, ``ConflictError``."""
    check_group(group_id)
    ref = aware(reference_time, "reference_time")
    check_uri(uri)
    check_text(content, "document content", max_chars=MAX_CONTENT_CHARS)
    check_visible(content, "document content")
    meta = document_metadata(metadata)
    title_ = document_title(uri, title, meta)
    digest = hashlib.sha256(content.encode()).hexdigest()
    chunks = chunk_text(content, max_chars=max_chunk_chars)
    late = await _compat.ato_thread(late_vectors, ingest.embedder, content, chunks)
    call = DocumentCall(group_id, uri, digest, title_, meta, chunks, ref, late)
    for _ in range(ATTEMPTS):
        try:
            return await _attempt(ingest, call, llm)
        except _Changed:
            continue
    raise ConflictError(
        f"document {uri!r:.80} of group {group_id!r} changed {ATTEMPTS} times between the "
        "read that found it holding this content and the write (other writers are adding "
        "versions of it); nothing was written, try it again"
    )


async def _attempt(ingest: Ingest, call: DocumentCall, llm: LLM | None) -> DocumentResult:
    """Extract the chunks (unless the document holds them already), then write."""
    ledger, plans = Ledger(), None
    if llm is not None:
        ledger, plans = await document_plans(ingest, llm, call)
    skipped = llm is not None and plans is None
    try:
        plans = plans if plans is not None else [Plan([], [], {}) for _ in call.chunks]
        prepared = [ingest.prepare(p.facts, call.ref)[1] if p.facts else [] for p in plans]
        names = [e for p, pre in zip(plans, prepared, strict=True) for e in named(p, pre)]
        vectors = await ingest.vectors(
            [
                *(c.text for c in call.chunks if call.late is None),
                *(x.sentence for pre in prepared for x in pre),
                *(e.name for e in names),
            ]
        )
        planned = _Planned(plans, prepared, vectors, ledger, extracted=llm is not None)
        # a new version retracts the chunks of the last one and recomputes every slot and
        # entity they touched, names this write does not lock: it then holds the group
        # alone, as a removal does
        alone = False

        async def write() -> DocumentResult:
            nonlocal alone
            async with ingest.db.transaction(
                call.group_id, "adding a document", pipeline=True
            ) as conn:
                w = await begin_write(
                    conn,
                    call.group_id,
                    ingest.embedder,
                    exclusive=alone,
                    keys=["document\x1f" + call.uri, *lock_keys(names)],
                )
                w.remember(vectors)
                cur = await conn.execute(CURRENT_CHUNKS, call.current())
                old = await cur.fetchall()
                if unchanged(old, call.chunks):
                    await write_ledger(conn, call.group_id, ledger, None, w.now)
                    version = int(old[0]["document_version"])
                    return await existing_document(conn, call.group_id, call.uri, version)
                if skipped:
                    raise _Changed  # it held this content when read: extract it now
                if old and not alone:
                    alone = True
                    raise ConflictError("a new version of a document holds the group alone")
                return await _write_version(ingest, w, call, planned, [r["id"] for r in old])

        return await write_with_retry(write)
    except BaseException:
        await record_spent(ingest.db, call.group_id, ledger)
        raise


async def _write_version(
    ingest: Ingest,
    w: Write,
    call: DocumentCall,
    planned: _Planned,
    retracted: list[uuid.UUID],
) -> DocumentResult:
    """Write the call's content as the document's next version, retracting ``retracted``
    (the chunks of the one it replaces)."""
    conn, group_id, ledger = w.conn, call.group_id, planned.ledger
    cur = await conn.execute(LAST_DOCUMENT_VERSION, (group_id, call.uri))
    last = await cur.fetchone()
    version = int(last["v"]) + 1 if last is not None else 1
    changes = await retract_episodes(w, retracted) if retracted else None
    episodes: list[Episode] = []
    entity_ids: list[uuid.UUID] = []
    parts = zip(call.chunks, planned.plans, planned.prepared, strict=True)
    for chunk, p, pre in parts:
        row = EpisodeInsert(
            name=f"{call.title} [{chunk.index + 1}/{len(call.chunks)}]",
            content=chunk.text,
            source="document",
            source_description=call.title,
            reference_time=call.ref,
            saga=None,
            idempotency_key=f"document:{call.uri}:{call.digest}:{chunk.index}",
            document_uri=call.uri,
            document_version=version,
            chunk_index=chunk.index,
            char_start=chunk.start,
            char_end=chunk.end,
            metadata={**call.meta, RESERVED_METADATA: call.digest, "title": call.title},
            llm_calls=ledger.calls if chunk.index == 0 else 0,
            llm_tokens=ledger.tokens if chunk.index == 0 else 0,
        )
        vector = planned.vectors[chunk.text] if call.late is None else call.late[chunk.index]
        written = await ingest._write_episode(  # pyright: ignore[reportPrivateUsage]
            w, row, vector, pre, p.entities, p.decided
        )
        if chunk.index == 0:
            await write_ledger(conn, group_id, ledger, written.episode_id, w.now)
        episodes.append(await written.stored())
        entity_ids.extend(i for i in written.entity_ids if i not in entity_ids)
    invalidated: list[Fact] = []
    if changes is not None and changes.expired:
        invalidated = await read_facts(
            conn,
            group_id,
            valid_at=None,
            as_of=None,
            read_time=w.now,
            limit=None,
            history=True,
            version_ids=[r["version_id"] for r in changes.expired.values()],
        )
    return DocumentResult(
        uri=call.uri,
        version=version,
        episodes=episodes,
        entities=await entities_by_id(conn, group_id, entity_ids),
        facts=await episode_facts(w, [e.id for e in episodes]) if planned.extracted else [],
        invalidated=invalidated,
        retracted=retracted,
        created=True,
        recorded_at=w.now,
        llm_calls=ledger.calls,
        llm_tokens=ledger.tokens,
    )


async def document_plans(
    ingest: Ingest, llm: LLM, call: DocumentCall
) -> tuple[Ledger, list[Plan] | None]:
    """Extract every chunk in order, then resolve them all with one call per tier. None
    for the plans: the document holds this content already (``unchanged``), nothing was
    extracted."""
    chunks, title = call.chunks, call.title
    async with ingest.db.transaction(call.group_id, "reading before extraction") as conn:
        cur = await conn.execute(CURRENT_CHUNKS, call.current())
        rows = await cur.fetchall()
        budget, used = await read_budget(conn, call.group_id)
    ledger = Ledger(budget=budget, used=used)
    if unchanged(rows, chunks):
        return ledger, None
    types = build_types(ingest.ontology, None, None, None, None, None)
    try:
        extracted: list[Extracted] = []
        known: list[str] = []
        whole = "\n".join(c.text for c in chunks)
        for i, chunk in enumerate(chunks):
            context = {
                "title": title,
                "chunk": f"{i + 1} of {len(chunks)}",
                "previous chunk (end)": chunks[i - 1].text[-600:] if i > 0 else "",
                "next chunk (start)": chunks[i + 1].text[:600] if i + 1 < len(chunks) else "",
            }
            x = await extract(
                llm,
                ledger,
                content=chunk.text,
                source="document",
                reference_time=call.ref,
                source_description=title,
                previous=[],
                types=types,
                ontology=ingest.ontology,
                document=context,
                known_entities=known[-100:],
                document_text=whole,
            )
            extracted.append(x)
            known.extend(e.name for e in x.entities if e.name not in known)
        vectors = await ingest.vectors(
            [
                *(e.name for x in extracted for e in x.entities),
                *(f.fact or "" for x in extracted for f in x.facts),
            ]
        )
        plans = await plan(
            ingest.db, call.group_id, llm, ledger, extracted, ingest.ontology, vectors
        )
    except BaseException:
        await record_spent(ingest.db, call.group_id, ledger)
        raise
    return ledger, plans

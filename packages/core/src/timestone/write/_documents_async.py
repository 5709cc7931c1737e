"""A document's extraction before its write: every chunk extracted in order, with its
neighbours, the title and the entities of earlier chunks as context, then resolved."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, LiteralString

from psycopg.types.json import Jsonb

from ..extract._extraction_async import (
    Extracted,
    Ledger,
    build_types,
    extract,
    read_budget,
    record_spent,
)
from ..extract._resolution_async import Plan, plan
from ..llm import LLM
from ._chunks import Chunk

if TYPE_CHECKING:
    from ._ingest_async import Ingest

__all__ = ["CURRENT_CHUNKS", "document_plans"]

# A document's current chunks, and whether the call's content, title and metadata are
# theirs: the same content under a new title or metadata is a new version too (the title
# is every chunk's context), so that a correction is not dropped.
CURRENT_CHUNKS: LiteralString = (
    "SELECT id, document_version, (metadata->>'document_sha256' = %s"
    " AND metadata->>'title' = %s AND metadata - 'document_sha256' - 'title'"
    " = %s::jsonb - 'document_sha256' - 'title') IS TRUE AS same"
    " FROM timestone.episodes WHERE group_id = %s AND document_uri = %s"
    " AND expired_at IS NULL ORDER BY chunk_index"
)


async def document_plans(
    ingest: Ingest,
    group_id: str,
    llm: LLM,
    uri: str,
    version: tuple[str, str, Mapping[str, Any]],
    chunks: Sequence[Chunk],
    ref: datetime,
) -> tuple[Ledger, list[Plan]]:
    """Extract every chunk in order, then resolve them all with one call per tier.
    ``version``: the content's digest, the title and the metadata."""
    digest, title, meta = version
    async with ingest.db.transaction(group_id, "reading before extraction") as conn:
        cur = await conn.execute(CURRENT_CHUNKS, (digest, title, Jsonb(meta), group_id, uri))
        row = await cur.fetchone()
        budget, used = await read_budget(conn, group_id)
    ledger = Ledger(budget=budget, used=used)
    if row is not None and row["same"]:  # unchanged: nothing to extract
        return ledger, [Plan([], [], {}) for _ in chunks]
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
                reference_time=ref,
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
        plans = await plan(ingest.db, group_id, llm, ledger, extracted, ingest.ontology, vectors)
    except BaseException:
        await record_spent(ingest.db, group_id, ledger)
        raise
    return ledger, plans

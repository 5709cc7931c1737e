"""Writing: structured facts, episodes and documents (``_documents``), each call one
transaction.

Validation and embedding happen before the transaction opens, so bad input
writes nothing and the locks are held only for the database work. Inside:
the write locks, the idempotency check, entity resolution and the reads of the
touched slots; then the episode, its mentions and assertions are sent, the
date fight over the slots runs, and the fact versions and the entities they
changed are written (``Ingest._write_episode``; docs/time.md, "The order of a
write").
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from .. import _compat
from .._groups import check_group
from .._records import (
    MAX_NAME_CHARS,
    DocumentResult,
    Entity,
    EntityInput,
    FactInput,
    IngestResult,
    check_text,
)
from .._time import aware
from ..db._database_async import Database
from ..embedders import Embedder, aembed_rows
from ..errors import InvalidInput, InvalidPeriod, TimestoneError
from ..extract._cardinality_async import Cardinalities
from ..extract._extraction_async import (
    Ledger,
    Types,
    extract,
    names_in_graph,
    previous_episodes,
    read_budget,
    record_spent,
    write_ledger,
)
from ..extract._resolution_async import plan
from ..llm import LLM
from ..ontology import Ontology
from ._collector import paused
from ._documents_async import LAST_DOCUMENT_VERSION, MAX_CONTENT_CHARS, ingest_document
from ._entities_async import (
    MentionInsert,
    entity_key,
    insert_mentions,
    lock_keys,
    read_entities,
    resolve_entities,
    stored_keys,
    write_entities,
)
from ._episodes_async import (
    EpisodeInsert,
    find_by_key,
    insert_episode,
)
from ._facts_async import (
    AssertionInsert,
    Slot,
    SlotChanges,
    asserted_spans,
    fight_slots,
    insert_assertions,
    read_slots,
    write_slots,
)
from ._inputs_async import (
    END,
    FACTS_KEYS,
    FactBatch,
    Prepared,
    as_given,
    check_concurrency,
    check_on_progress,
    default_sentence,
    episode_row,
    episode_rows,
    fact_end,
    fact_json,
    key_of,
    merge,
    optional_text,
)
from ._outcome_async import (
    Written,
    closed_apart,
    created_result,
    existing_result,
    ingest_outcome,
    send_relation_order,
)
from ._transaction_async import Relock, Write, begin_write, write_with_retry

if TYPE_CHECKING:
    from .._vectors import Row

__all__ = [
    "LAST_DOCUMENT_VERSION",
    "MAX_CONTENT_CHARS",
    "MAX_FACTS_PER_CALL",
    "Ingest",
    "default_sentence",
    "facts_text",
    "ingest_outcome",
    "prepare_facts",
]

MAX_FACTS_PER_CALL = 10_000
PAUSE_COLLECTOR_FACTS = 100  # add_facts of this many facts or more pauses the cyclic collector


def prepare_facts(
    ontology: Ontology, facts: object, reference_time: datetime
) -> tuple[list[FactInput], list[Prepared]]:
    """An ``add_facts`` call's facts checked against ``ontology`` and made ready to write:
    each with its ends, sentence, period and attributes."""
    kind = type(facts).__name__
    if isinstance(facts, (str, bytes, Mapping)) or not isinstance(facts, Iterable):
        raise InvalidInput(f"facts must be a list of FactInput or dicts, got {kind}")
    items = cast(Iterable[FactInput | Mapping[str, Any]], facts)
    parsed = [FactInput.parse(f) for f in items]
    if not parsed:
        raise InvalidInput("facts is empty: add_facts needs at least one fact")
    if len(parsed) > MAX_FACTS_PER_CALL:
        raise InvalidInput(
            f"{len(parsed):,} facts in one call; the limit is {MAX_FACTS_PER_CALL:,} "
            "(split the batch: each call is one transaction)"
        )
    prepared: list[Prepared] = []
    for f in parsed:
        source, target = fact_end(f.source), fact_end(f.target)
        attributes = ontology.check_relation(
            f.relation,
            f.attributes,
            source.entity_type if source.labels else None,
            target.entity_type if target.labels else None,
        )
        ontology.check_entity(source.entity_type, source.attributes, source.name)
        ontology.check_entity(target.entity_type, target.attributes, target.name)
        valid_at = f.valid_at or reference_time
        if f.invalid_at is not None and f.invalid_at <= valid_at:
            raise InvalidPeriod(
                f"{f.relation} fact: invalid_at {f.invalid_at.isoformat()} is not after its "
                f"valid_at {valid_at.isoformat()} (valid_at defaults to the reference_time)"
            )
        prepared.append(
            Prepared(
                source=source,
                relation=f.relation,
                target=target,
                sentence=f.fact or default_sentence(source.name, f.relation, target.name),
                valid_at=valid_at,
                invalid_at=f.invalid_at,
                attributes=attributes,
            )
        )
    return parsed, prepared


def facts_text(prepared: Sequence[Prepared]) -> str:
    """The text an ``add_facts`` call's episode is embedded from: its facts' sentences."""
    return " ".join(p.sentence for p in prepared)


class Ingest:
    """The write paths of one memory: its database, embedder and ontology."""

    def __init__(
        self, db: Database, embedder: Embedder, ontology: Ontology, learned: Cardinalities
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.ontology = ontology
        self.learned = learned  # undeclared relations' cardinality (``_cardinality``)

    # -- validation (no I/O) ---------------------------------------------------------

    def prepare(
        self, facts: object, reference_time: datetime
    ) -> tuple[list[FactInput], list[Prepared]]:
        return prepare_facts(self.ontology, facts, reference_time)

    async def vectors(self, texts: Iterable[str]) -> dict[str, Row]:
        unique = list(dict.fromkeys(texts))
        if not unique:
            return {}
        return dict(zip(unique, await aembed_rows(self.embedder, unique), strict=True))

    # -- add_facts -------------------------------------------------------------------

    async def add_facts(
        self,
        group_id: str,
        facts: object,
        *,
        reference_time: datetime,
        name: str | None,
        saga: str | None,
        idempotency_key_: str | None,
        source_description: str,
    ) -> IngestResult:
        check_group(group_id)
        # a large write pauses the cyclic collector (``_collector``); a small one has too
        # few objects for it to matter, and leaves the process's collector alone
        with paused(isinstance(facts, Sized) and len(facts) >= PAUSE_COLLECTOR_FACTS):
            batch = await self._batch(
                group_id,
                facts,
                reference_time=reference_time,
                name=name,
                saga=saga,
                idempotency_key_=idempotency_key_,
                source_description=source_description,
            )
            result = await self._store(batch, outcome=True)
            assert result is not None
            return result

    async def add_fact_batches(
        self,
        group_id: str,
        batches: object,
        *,
        on_progress: Callable[[int, int | None, IngestResult], object] | None,
        keep_results: object = True,
    ) -> list[IngestResult]:
        """Many ``add_facts`` calls in order, each its own transaction, the next batch
        checked and embedded while the database stores the one before.

        The result is a loop of ``add_facts`` calls: the same writes, committed in the
        same order, and a bad batch raises before anything of it is written, after the
        batches before it committed (its error names it and how many were written before
        it: ``batches[2] (2 written before it): ...``). ``on_progress(done, total,
        result)`` follows each commit (``total``: None for an iterable without a length); without
        ``keep_results`` the results are not kept, and the list returned is empty. With
        neither, no result is built: the write is the same, its outcome is not read."""
        check_group(group_id)
        if not isinstance(keep_results, bool):
            raise InvalidInput(
                f"keep_results must be True or False, got {type(keep_results).__name__}"
            )
        kind = type(batches).__name__
        if isinstance(batches, (str, bytes, Mapping)) or not isinstance(batches, Iterable):
            raise InvalidInput(
                "batches must be an iterable of mappings with add_facts' arguments "
                f"(facts, reference_time, ...), got {kind}"
            )
        items = cast(Iterable[object], batches)
        total = len(items) if isinstance(items, Sized) else None
        source = iter(items)
        results: list[IngestResult] = []
        outcome = keep_results or on_progress is not None
        done = 0
        pending = await _compat.aspawn(self._next_batch, group_id, source, 0)
        try:
            while (batch := await _compat.ajoin(pending)) is not None:
                pending = await _compat.aspawn(self._next_batch, group_id, source, done + 1)
                try:
                    with paused(len(batch.prepared) >= PAUSE_COLLECTOR_FACTS):
                        result = await self._store(batch, outcome=outcome)
                except TimestoneError as exc:  # the database refused it or failed
                    if exc.args:
                        before = f"{done} written before it" if done else "none written before it"
                        exc.args = (f"batches[{done}] ({before}): {exc.args[0]}", *exc.args[1:])
                    raise
                done += 1
                if result is not None and keep_results:
                    results.append(result)
                if result is not None and on_progress is not None:
                    on_progress(done, total, result)
            return results
        finally:
            await _compat.asettle(pending)

    async def _next_batch(
        self, group_id: str, source: Iterator[object], index: int
    ) -> FactBatch | None:
        """Batch ``index`` of ``add_fact_batches`` checked and embedded; None at the end."""
        value = next(source, END)
        if value is END:
            return None
        if not isinstance(value, Mapping):
            raise InvalidInput(
                f"batches[{index}] must be a mapping with add_facts' arguments, "
                f"got {type(value).__name__}"
            )
        item = cast(Mapping[str, Any], value)
        unknown = set(item) - FACTS_KEYS
        if unknown:
            raise InvalidInput(f"batches[{index}] has unknown keys {sorted(map(str, unknown))}")
        for required in ("facts", "reference_time"):
            if required not in item:
                raise InvalidInput(f"batches[{index}] has no {required!r}")
        facts = item["facts"]
        try:
            with paused(isinstance(facts, Sized) and len(facts) >= PAUSE_COLLECTOR_FACTS):
                return await self._batch(
                    group_id,
                    facts,
                    reference_time=item["reference_time"],
                    name=item.get("name"),
                    saga=item.get("saga"),
                    idempotency_key_=item.get("idempotency_key"),
                    source_description=item.get("source_description", ""),
                )
        except InvalidInput as exc:
            written = f"; the {index} batches before it were written" if index else ""
            raise type(exc)(f"batches[{index}]: {exc}{written}") from exc

    async def _batch(
        self,
        group_id: str,
        facts: object,
        *,
        reference_time: datetime,
        name: str | None,
        saga: str | None,
        idempotency_key_: str | None,
        source_description: str,
    ) -> FactBatch:
        """One ``add_facts`` call checked and embedded: everything but the database."""
        ref = aware(reference_time, "reference_time")
        parsed, prepared = self.prepare(facts, ref)
        content = json.dumps([fact_json(f) for f in parsed], ensure_ascii=False, default=as_given)
        key = key_of(idempotency_key_, group_id, content, ref)
        episode = EpisodeInsert(
            name=check_text(name, "episode name", max_chars=MAX_NAME_CHARS)
            if name is not None
            else f"facts at {ref.isoformat()}",
            content=content,
            source="facts",
            source_description=check_text(
                source_description, "source_description", max_chars=10_000, allow_empty=True
            ),
            reference_time=ref,
            saga=optional_text(saga, "saga", MAX_NAME_CHARS),
            idempotency_key=key,
        )
        episode_text = facts_text(prepared)
        # names are embedded inside the transaction, and only for entities it mints
        vectors = await self.vectors([episode_text, *(p.sentence for p in prepared)])
        return FactBatch(group_id, episode, prepared, episode_text, vectors)

    async def _store(self, batch: FactBatch, *, outcome: bool) -> IngestResult | None:
        """Write a checked batch: one transaction, retried when a concurrent writer took a
        name or the idempotency key first. Its result, or None without ``outcome``: the
        facts and entities it wrote are then not built, nor the facts it closed read."""
        group_id, prepared, key = batch.group_id, batch.prepared, batch.episode.idempotency_key
        entities = [e for p in prepared for e in (p.source, p.target)]
        await self.learned.ask(group_id, (p.relation for p in prepared))

        async def write() -> IngestResult | None:
            async with self.db.transaction(group_id, "adding facts", pipeline=True) as conn:
                w = await begin_write(
                    conn,
                    group_id,
                    self.embedder,
                    keys=["episode\x1f" + key, *lock_keys(entities)],
                )
                w.remember(batch.vectors)
                existing = await find_by_key(conn, group_id, key)
                if existing is not None:
                    if not outcome:
                        return None
                    return await existing_result(conn, group_id, existing)
                relations = (p.relation for p in prepared)
                order = await send_relation_order(w, relations) if outcome else None
                written = await self._write_episode(
                    w, batch.episode, batch.vectors[batch.episode_text], prepared, keep=outcome
                )
                # built while the database stores the write; the episode's row comes last
                result = (
                    await created_result(w, written, await ingest_outcome(w, written, order))
                    if outcome
                    else None
                )
            await self.db.note_writes(len(prepared), group_id)
            return result

        return await write_with_retry(write)

    async def _write_episode(
        self,
        w: Write,
        row: EpisodeInsert,
        vector: Row | None,
        prepared: Sequence[Prepared],
        entities_by_id: Sequence[EntityInput] = (),
        decided: Mapping[tuple[str, str | None], uuid.UUID] | None = None,
        *,
        keep: bool = True,
    ) -> Written:
        """``entities_by_id``: entities the episode names besides its facts' endpoints (extraction);
        ``decided``: the LLM tier's choices for ambiguous names, made before the write;
        ``keep``: whether the caller builds a result (without one, the entities' current
        versions are not built: ``Written.current`` stays empty).

        The reads come first (resolution, then the touched slots: neither depends on this
        episode's rows), then the inserts are sent, and the date fight and the entities'
        fold run in Python while the database stores them: in a pipeline
        (``Database.transaction(..., pipeline=True)``) no insert is waited for until the
        episode's row is read back at the end.
        """
        if not prepared and not entities_by_id:
            sent = await insert_episode(w, row, vector)
            return Written(sent=sent, entity_ids=[], changes=SlotChanges())
        entities = [*entities_by_id, *(e for p in prepared for e in (p.source, p.target))]
        minted: set[uuid.UUID] = set()
        joined: set[uuid.UUID] = set()
        ids = await resolve_entities(w, entities, self.ontology, decided, minted, joined)
        if joined:
            # a stored entity reached by another spelling: its writers lock its own name
            unlocked = await stored_keys(w, joined) - w.keys
            if unlocked:
                raise Relock(unlocked)
        idents = [ids[entity_key(e)] for e in entities]  # the facts' ends: two per fact, last
        merged: dict[uuid.UUID, EntityInput] = {}
        attributes: dict[uuid.UUID, dict[str, Any]] = {}
        for e, ident in zip(entities, idents, strict=True):
            prev = merged.get(ident)
            merged[ident] = e if prev is None else merge(prev, e)
            attributes.setdefault(ident, {}).update(
                self.ontology.check_entity(e.entity_type, e.attributes, e.name)
            )
        ends = iter(idents[len(entities_by_id) :])  # zip takes a fact's source, then its target
        learned = await self.learned.read(w.conn, w.group_id, (p.relation for p in prepared))
        rows = [
            AssertionInsert(
                source_id=source_id,
                relation=p.relation,
                target_id=target_id,
                cardinality=learned.get(p.relation) or self.ontology.cardinality(p.relation),
                fact=p.sentence,
                attributes=p.attributes,
                valid_at=p.valid_at,
                invalid_at=p.invalid_at,
            )
            for p, source_id, target_id in zip(prepared, ends, ends, strict=True)
        ]
        slots: set[Slot] = {
            (r.source_id, r.relation)
            if r.cardinality == "one"
            else (r.source_id, r.relation, r.target_id)
            for r in rows
        }
        reads = await read_slots(
            w,
            slots,
            # a source this write minted holds no stored timeline to read a window of
            within=asserted_spans(
                ((r.source_id, r.relation), r.valid_at)
                for r in rows
                if r.cardinality == "one" and r.source_id not in minted
            ),
            # a pair is a slot here only for cardinality-one rows
            only_one={s for s in slots if len(s) == 2},
        )
        sent = await insert_episode(w, row, vector)
        mentioned = await insert_mentions(
            w,
            sent.id,
            [MentionInsert(ident, entity, attributes[ident]) for ident, entity in merged.items()],
        )
        fight = fight_slots(reads, await insert_assertions(w, sent.id, rows))
        touched = await read_entities(w, set(merged) | fight.changes.touched_entities, mentioned)
        changes = await write_slots(w, fight)
        current: dict[uuid.UUID, Entity] = {}
        await write_entities(w, touched, current if keep else None)
        return Written(
            sent=sent,
            entity_ids=list(merged),
            changes=changes,
            current=current,
        )

    # -- add_document ----------------------------------------------------------------

    async def add_document(
        self,
        group_id: str,
        uri: str,
        content: str,
        *,
        title: str | None,
        reference_time: datetime,
        metadata: Mapping[str, Any] | None,
        max_chunk_chars: int,
        llm: LLM | None = None,
    ) -> DocumentResult:
        """With ``llm``: every chunk is extracted (before the transaction), with the title,
        its neighbours and the entities of earlier chunks as context (``_documents``)."""
        return await ingest_document(
            self,
            group_id,
            uri,
            content,
            title=title,
            reference_time=reference_time,
            metadata=metadata,
            max_chunk_chars=max_chunk_chars,
            llm=llm,
        )

    # -- add_episode (LLM ingestion: every call before the transaction) ---------------

    async def add_episode(
        self,
        group_id: str,
        llm: LLM,
        content: object,
        *,
        reference_time: datetime,
        name: str | None,
        source: str,
        source_description: str,
        saga: str | None,
        idempotency_key_: str | None,
        types: Types,
        max_chars: int,
    ) -> IngestResult:
        check_group(group_id)
        row = episode_row(
            group_id,
            content,
            reference_time=reference_time,
            name=name,
            source=source,
            source_description=source_description,
            saga=saga,
            idempotency_key_=idempotency_key_,
            max_chars=max_chars,
        )
        return await self._extract_episode(group_id, llm, row, types)

    async def _extract_episode(
        self, group_id: str, llm: LLM, row: EpisodeInsert, types: Types
    ) -> IngestResult:
        """A checked episode extracted, resolved and written (``add_episode``)."""
        text, ref, key = row.content, row.reference_time, row.idempotency_key
        async with self.db.transaction(group_id, "reading before extraction") as conn:
            existing = await find_by_key(conn, group_id, key)
            if existing is not None:
                return await existing_result(conn, group_id, existing)
            budget, used = await read_budget(conn, group_id)
            previous = await previous_episodes(conn, group_id, row.saga, ref)
            graph_names = await names_in_graph(conn, group_id, text)
        ledger = Ledger(budget=budget, used=used)
        try:
            extracted = await extract(
                llm,
                ledger,
                content=text,
                source=row.source,
                reference_time=ref,
                source_description=row.source_description,
                previous=previous,
                types=types,
                ontology=self.ontology,
                graph_names=graph_names,
            )
            names = await self.vectors(
                [*(e.name for e in extracted.entities), *(f.fact or "" for f in extracted.facts)]
            )
            [planned] = await plan(
                self.db, group_id, llm, ledger, [extracted], self.ontology, names
            )
            prepared = self.prepare(planned.facts, ref)[1] if planned.facts else []
            vectors = await self.vectors(
                [text, *(p.sentence for p in prepared), *(e.name for e in planned.entities)]
            )
        except BaseException:
            await record_spent(self.db, group_id, ledger)
            raise
        row = dataclasses.replace(row, llm_calls=ledger.calls, llm_tokens=ledger.tokens)
        everyone = [*planned.entities, *(e for p in prepared for e in (p.source, p.target))]

        async def write() -> IngestResult:
            async with self.db.transaction(group_id, "adding an episode", pipeline=True) as conn:
                w = await begin_write(
                    conn,
                    group_id,
                    self.embedder,
                    keys=["episode\x1f" + key, *lock_keys(everyone)],
                )
                w.remember(vectors)
                existing = await find_by_key(conn, group_id, key)
                if existing is not None:
                    await write_ledger(conn, group_id, ledger, None, w.now)
                    return await existing_result(conn, group_id, existing)
                order = await send_relation_order(w, (p.relation for p in prepared))
                written = await self._write_episode(
                    w, row, vectors[text], prepared, planned.entities, planned.decided
                )
                await write_ledger(conn, group_id, ledger, written.episode_id, w.now)
                return await created_result(
                    w,
                    written,
                    closed_apart(written, *(await ingest_outcome(w, written, order))),
                    llm_calls=ledger.calls,
                    llm_tokens=ledger.tokens,
                )

        try:
            return await write_with_retry(write)
        except BaseException:
            await record_spent(self.db, group_id, ledger)
            raise

    async def add_episodes(
        self,
        group_id: str,
        llm: LLM,
        episodes: object,
        *,
        types: Types,
        max_chars: int,
        concurrency: object,
        on_progress: Callable[[int, int, IngestResult], object] | None,
    ) -> list[IngestResult]:
        """Many episodes, each its own transaction, at most ``concurrency`` at a time.
        Every item is checked before the first model call.

        When one fails, no episode starts after it; those already running end (each
        written whole, or not at all) before its error is raised, its message led by the
        failing item (``episodes[2]: ...``). What was written stays, each reported to
        ``on_progress``: the same call again writes the rest, the written ones recognised
        by their idempotency keys."""
        check_group(group_id)
        slots = _compat.ASemaphore(check_concurrency(concurrency))
        check_on_progress(on_progress)
        rows = episode_rows(group_id, episodes, max_chars)
        done: list[int] = [0]
        failed: list[int] = []

        async def one(index: int, row: EpisodeInsert) -> IngestResult | None:
            async with slots:
                if failed:
                    return None  # not started: an episode before it failed
                try:
                    result = await self._extract_episode(group_id, llm, row, types)
                except Exception as exc:
                    failed.append(index)
                    if isinstance(exc, TimestoneError) and exc.args:
                        exc.args = (f"episodes[{index}]: {exc.args[0]}", *exc.args[1:])
                    raise
                done[0] += 1
                if on_progress is not None:
                    try:
                        on_progress(done[0], len(rows), result)
                    except BaseException:
                        failed.append(index)  # the caller's callback stops the batch too
                        raise
            return result

        results = await _compat.agather(*[one(i, r) for i, r in enumerate(rows)])
        return [r for r in results if r is not None]

"""Search: the statements of ``timestone.search._sql`` sent, read and fused.

A search is checked first (``timestone.search._request``). The statements of all its
scopes go to the server in one pipeline (one round trip). The full-text list of facts
goes first, as a statement of its own, and the query is embedded while the server
ranks it; the facts statement reads that list back from the transaction. In a large
facts table, the full-text list of facts is read on a second connection, in the same
snapshot, beside the others (``run_search``). Each statement sends only the rows it
keeps (``_search_sql``); the client then runs ``timestone.search._fusion`` over what arrived,
which keeps that order, and a cross-encoder, when one is given, reorders it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any, LiteralString

import psycopg
from psycopg import AsyncCursor, AsyncRawCursor, sql
from psycopg.rows import DictRow

from .._compat import ajoin, asettle, aspawn
from .._groups import check_group
from .._records import Entity, Episode, Fact
from .._results import Community, SearchResults
from ..db._database_async import TENANT_SETTINGS, Conn, Database, autocommit, wrap_db_error
from ..embedders import Embedder, aembed_rows
from ..errors import NotFound, TimestoneError
from ..rerankers import check_scores, reranker_failed
from ..write._entities_async import entity_from_row
from ..write._episodes_async import episode_from_row
from ..write._facts_async import fact_from_row
from ._episodes_sql import KNOWN_NAMES
from ._fusion import Candidate, Embedding, rerank
from ._question import event_window, names_in
from ._ranked_lists_sql import EXACT_BELOW, keep_of, search_params
from ._request import MAX_QUERY_CHARS, SPLIT_ROWS, SearchRequest, prepare_search
from ._sql import statement
from ._window import favour_window, favoured_keep

if TYPE_CHECKING:
    from .._vectors import Row

__all__ = [
    "ScopeHits",
    "candidate_of",
    "community_from_row",
    "embed_query",
    "run_search",
    "search",
    "search_hits",
]


def community_from_row(row: Mapping[str, Any]) -> Community:
    return Community(
        id=row["id"],
        version_id=row["version_id"],
        group_id=row["group_id"],
        name=row["name"],
        summary=row["summary"],
        members=tuple(row["members"]),
        fact_count=row["fact_count"],
        created_at=row["created_at"],
        expired_at=row["expired_at"],
        score=row.get("score"),
    )


# -- running ----------------------------------------------------------------------------

_RANK_COLUMNS = ("fts_rank", "vec_rank", "graph_rank", "named_rank")


def candidate_of(row: Mapping[str, Any], key: Any) -> Candidate:
    ranks = {c: int(row[c]) for c in _RANK_COLUMNS if row.get(c) is not None}
    embedding = row.get("embedding")
    return Candidate(
        key=key,
        ranks=ranks,
        distance=float(row["distance"]) if row.get("distance") is not None else None,
        hops=int(row["hops"]) if row.get("hops") is not None else None,
        mentions=int(row.get("mentions") or 0),
        embedding=_array(embedding) if embedding is not None else None,
        fused=float(row["fused"]) if row.get("fused") is not None else None,
    )


def _array(value: Any) -> Embedding:
    """A vector column's value (pgvector ``Vector``, numpy array or list) as an array of
    float32, without a Python float per element: ``context()`` reads 120 embeddings a
    call, and turning each into a list of floats took 9 ms of it."""
    if hasattr(value, "to_numpy"):
        return value.to_numpy()
    import numpy as np

    return np.asarray(value, dtype=np.float32)


@dataclasses.dataclass(slots=True)
class ScopeHits:
    """The fused candidates of one scope, with their rows (for context building)."""

    scope: str
    rows: dict[Any, dict[str, Any]]
    ranked: list[Candidate]


def _text_of(scope: str, row: Mapping[str, Any]) -> str:
    if scope == "facts":
        return str(row["fact"])
    if scope == "episodes":
        return str(row["content"])
    return f"{row['name']}: {row['summary']}".strip(": ")


# Every setting is local to the transaction: in autocommit (``search_hits``), the implicit
# one the statements of a pipeline share until its sync, or the explicit one of a split
# search (``run_search``); the group first, then the library's role and JIT off, as in
# every tenant transaction (``_db.TENANT_SETTINGS``). The statements
# are written in the join order they should run in (candidates first, then their rows,
# then the small rank lists): keeping that order spares the planner its search over a
# dozen relations, a third of the planning time.
_SETTINGS: LiteralString = (
    TENANT_SETTINGS + ","
    " pg_catalog.set_config('hnsw.ef_search', %s, true),"
    " pg_catalog.set_config('hnsw.iterative_scan', 'relaxed_order', true),"
    " pg_catalog.set_config('join_collapse_limit', '1', true),"
    " pg_catalog.set_config('from_collapse_limit', '1', true),"
    " pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true)"
)
# An as-of search filters the current versions by creation time, a condition whose
# value a generic plan does not know: it counts a third of the rows as passing, and in a
# table of some thousands of rows it then finds a scan of the group's rows, sorted by
# the keyed distance, cheaper than the HNSW index (the key computed for each row: 36 ms
# p50 at 10k facts, against 5.8 through the index). Seq scans are off for its
# statements, which all read indexes otherwise; a custom plan per call also chose the
# index, at 5 ms of planning a search at 100k facts.
_AS_OF_SETTING: LiteralString = "pg_catalog.set_config('enable_seqscan', 'off', true), "


def _settings_of(req: SearchRequest) -> LiteralString:
    return (
        _SETTINGS
        if req.as_of is None
        else _SETTINGS.replace("SELECT ", "SELECT " + _AS_OF_SETTING, 1)
    )


_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"


async def _send(
    conn: Conn, name: str, req: SearchRequest, params: Mapping[str, Any], dimension: int
) -> AsyncRawCursor[DictRow]:
    text, names = statement(name, req, dimension)
    cur = AsyncRawCursor(conn)
    # prepared at its first use on a connection, not its sixth (psycopg's default):
    # each of the first five would be planned again, a few ms each
    await cur.execute(text, [params[n] for n in names], prepare=True, binary=True)
    return cur


async def _text_list(
    conn: Conn,
    snapshot: str,
    settings: tuple[str, str],
    req: SearchRequest,
    params: Mapping[str, Any],
    dimension: int,
) -> DictRow:
    """The full-text list of facts, read on ``conn`` in the snapshot of the search."""
    async with conn.pipeline():
        await conn.execute(_BEGIN)
        await conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot)))
        await conn.execute(_SETTINGS, settings)
        cur = await _send(conn, "facts:text", req, params, dimension)
        await conn.execute("COMMIT")
    row = await cur.fetchone()
    assert row is not None
    return row


async def _send_text_first(
    conn: Conn, req: SearchRequest, params: Mapping[str, Any], dimension: int
) -> None:
    """The full-text list of facts, ranked into the transaction's setting that the facts
    statement reads (``facts_text_first_sql``); nothing to fetch."""
    if "facts" in req.scopes:
        await _send(conn, "facts:text_first", req, params, dimension)


async def _send_scopes(
    conn: Conn,
    scopes: Iterable[str],
    req: SearchRequest,
    params: Mapping[str, Any],
    dimension: int,
    into: dict[str, AsyncRawCursor[DictRow]],
    inline: bool = False,
) -> None:
    """``inline``: the facts statement ranks its full-text list itself (no text first)."""
    for scope in scopes:
        name = "facts:inline" if inline and scope == "facts" else scope
        given = params
        if scope == "episodes" and params.get(_MEANING) is not None:
            given = {**params, "vec": params[_MEANING]}
        into[scope] = await _send(conn, name, req, given, dimension)


# The vector of what a question asks about, for the episodes scope: the question without
# the names it writes (``_question.without_names``). A name says whose, not what; in a
# vector of averaged word pieces it weighs as a word of meaning, and drew the vector list
# to any turn of the person named. The names are matched by the text list (BM25 weighs
# them by their rarity). On the dev conversations, recall@10 0.694 -> 0.701
# (docs/decisions/018-facts-fallback-and-names.md). Facts and entities keep the whole
# question: their questions name what they are about ("Where does Karin Tal work?").
_MEANING = "episodes_vec"


def _statement_params(
    req: SearchRequest,
    group_id: str,
    vector: Row | Sequence[float] | None,
    db: Database | None,
    large: bool,
) -> tuple[dict[str, Any], int | None]:
    """The statement's parameters, and how many facts it keeps for ``favour_window`` (None:
    the question names no window, ``_window``)."""
    params = search_params(req, group_id, vector)
    widened = favoured_keep(req)
    if widened is not None:
        params["keep"] = widened
    # ranked through the index: no count to make (as of a moment, the count is of the
    # rows created by then, which a large group may still have held few of)
    if db is not None and (db.held_many(group_id, req.as_of) if req.as_of is not None else large):
        params["exact_below"] = 0
    return params, widened


async def _embed(
    embedder: Embedder | None, needed: bool, req: SearchRequest, params: dict[str, Any]
) -> None:
    """The query's vector (``vec``) when ``needed``, and the episodes scope's
    (``_MEANING``) when the question names someone (else ``vec`` serves)."""
    if embedder is None:
        if needed:
            raise TypeError("run_search needs the query's vector or an embedder")
        return
    import numpy as np

    if needed:
        params["vec"] = np.asarray(await embed_query(embedder, req.query), dtype=np.float32)
    if "episodes" not in req.scopes:
        return
    meaning = req.meaning
    if meaning is not None:
        params[_MEANING] = np.asarray(await embed_query(embedder, meaning), dtype=np.float32)


# The first step of a split search: its snapshot, and whether the group has fewer than
# ``SPLIT_FACTS`` current facts (an index-only count that stops there): the lists of a
# group that small cost less than the round trips of the split, and run as one statement.
_SPLIT_PROBE = (
    "SELECT pg_export_snapshot() AS snapshot, (SELECT count(*) < %(n)s FROM (SELECT 1"
    " FROM timestone.facts AS p WHERE p.group_id = %(g)s AND p.expired_at IS NULL"
    " LIMIT %(n)s) AS p) AS few"
)
SPLIT_FACTS = EXACT_BELOW


async def run_search(
    conn: Conn,
    group_id: str,
    req: SearchRequest,
    vector: Row | Sequence[float] | None,
    dimension: int,
    spare: Conn | None = None,
    db: Database | None = None,
    embedder: Embedder | None = None,
) -> dict[str, ScopeHits]:
    """Run every scope of ``req`` and fuse each; no cross-encoder yet.

    ``vector`` is the query's; with None, ``embedder`` embeds it once the statements that
    need no vector (the settings, the full-text list of facts, a split search's probe)
    are on their way, so the server works on them meanwhile.

    Without ``spare``, every statement goes in one pipeline, one round trip. With it (both
    connections in autocommit), ``conn`` opens a read-only repeatable-read transaction,
    exports its snapshot and counts the group's facts up to ``SPLIT_FACTS``. A group
    with fewer runs its statements in that transaction (and ``db`` notes it small, so
    that its next searches go the first way). Otherwise the facts statement
    is split: ``spare`` reads the full-text list in the exported snapshot while ``conn``
    reads the other lists (and the other scopes), then ``conn`` fuses the three in its
    transaction. Either way the result is the one statement's, read in one snapshot."""
    large = db is not None and db.large(group_id)
    params, widened = _statement_params(req, group_id, vector, db, large)
    settings = (group_id, str(min(1000, max(40, req.candidates))))
    cursors: dict[str, AsyncRawCursor[DictRow]] = {}
    async with conn.pipeline():
        if spare is not None:
            await conn.execute(_BEGIN)
        await conn.execute(_settings_of(req), settings)
        distributed = db is not None and db.distributed
        if db is not None and distributed:  # the group for the workers too
            await db.set_group(conn, group_id)
        probe = None
        if spare is not None:
            probe = await conn.execute(_SPLIT_PROBE, {"g": group_id, "n": SPLIT_FACTS})
        elif not distributed:
            await _send_text_first(conn, req, params, dimension)
        center_cur = None
        if req.center is not None:
            center_cur = await conn.execute(
                "SELECT count(*) AS n FROM timestone.entities AS e WHERE e.group_id = %(g)s"
                " AND (e.id = %(center_id)s::uuid OR e.norm_name = %(center_name)s::text)",
                params,
            )
        await _embed(embedder, vector is None, req, params)
        if spare is None:
            await _send_scopes(conn, req.scopes, req, params, dimension, cursors, distributed)
    if center_cur is not None:
        await _check_center(center_cur, req, group_id)
    probed = await probe.fetchone() if probe is not None else None
    if spare is not None and probed is not None and probed["few"]:
        if db is not None:
            db.note_small(group_id)
        async with conn.pipeline():
            await _send_text_first(conn, req, params, dimension)
            await _send_scopes(conn, req.scopes, req, params, dimension, cursors)
            await conn.execute("COMMIT")
    elif spare is not None and probed is not None:
        text = await aspawn(_text_list, spare, probed["snapshot"], settings, req, params, dimension)
        try:
            async with conn.pipeline():
                lists = await _send(conn, "facts:lists", req, params, dimension)
                others = [scope for scope in req.scopes if scope != "facts"]
                await _send_scopes(conn, others, req, params, dimension, cursors)
            listed = await lists.fetchone() or {}
            given = {**params, **listed, **(await ajoin(text))}
            if db is not None and listed.get("few") is False:
                db.note_large(group_id)
                _note_horizon(db, group_id, listed)
        finally:
            await asettle(text)
        async with conn.pipeline():
            cursors["facts"] = await _send(conn, "facts:given", req, given, dimension)
            await conn.execute("COMMIT")
    return {
        scope: await _fused(scope, cursors[scope], req, group_id, db, large, widened)
        for scope in req.scopes
    }


async def _check_center(cur: AsyncCursor[DictRow], req: SearchRequest, group_id: str) -> None:
    found = await cur.fetchone()
    if found is None or found["n"] == 0:
        raise NotFound(f"center {req.center!r:.80} is not an entity of group {group_id!r:.80}")


async def _fused(
    scope: str,
    cur: AsyncRawCursor[DictRow],
    req: SearchRequest,
    group_id: str,
    db: Database | None,
    large: bool,
    widened: int | None,
) -> ScopeHits:
    """A scope's candidates read and fused; a facts list ranked through the index tells
    ``db`` the group is large (its next searches skip the count, ``exact_below``); facts
    true in the window the question names are favoured from ``widened`` candidates."""
    rows = await cur.fetchall()
    ranked_large = scope == "facts" and rows and rows[0].get("few") is False
    if ranked_large and db is not None:
        if not large:
            db.note_large(group_id)
        _note_horizon(db, group_id, rows[0])
    keyed = {(row.get("version_id") or row["id"]): dict(row) for row in rows}
    candidates = [candidate_of(row, key) for key, row in keyed.items()]
    if scope == "facts" and widened is not None and req.window is not None:
        ranked = rerank(candidates, req.method, widened)
        ranked = favour_window(ranked, keyed, req.window, keep_of(req))
    else:
        ranked = rerank(candidates, req.method, keep_of(req))
    return ScopeHits(scope, keyed, ranked)


def _note_horizon(db: Database, group_id: str, row: Mapping[str, Any]) -> None:
    """Remember the horizon (``_few``) of an as-of search that did not rank exactly: from
    then on, no moment would be ranked exactly either."""
    horizon = row.get("horizon")
    if isinstance(horizon, datetime):
        db.note_horizon(group_id, horizon)


async def embed_query(embedder: Embedder, text: str) -> Row:
    return (await aembed_rows(embedder, [text]))[0]


async def _cross_encode(req: SearchRequest, hits: ScopeHits) -> None:
    reranker = req.reranker
    assert not isinstance(reranker, str)
    top = hits.ranked
    if not top:
        return
    try:
        scores = await reranker.arerank(
            req.query, [_text_of(hits.scope, hits.rows[c.key]) for c in top]
        )
    except TimestoneError:
        raise
    except Exception as exc:
        raise reranker_failed(reranker.name, exc) from exc
    for c, s in zip(top, check_scores(reranker.name, scores, len(top)), strict=True):
        c.score = s
    hits.ranked = sorted(top, key=lambda c: -c.score)[: req.limit]


def results_of(req: SearchRequest, hits: Mapping[str, ScopeHits]) -> SearchResults:
    def scored(scope: str) -> list[dict[str, Any]]:
        found = hits.get(scope)
        if found is None:
            return []
        out: list[dict[str, Any]] = []
        for c in found.ranked:
            row = {**found.rows[c.key], "score": c.score}
            attributes = row.get("attributes")
            if isinstance(attributes, str):
                # attributes travel as text and are parsed only for the results kept
                row["attributes"] = json.loads(attributes)
            out.append(row)
        return out

    return SearchResults(
        query=req.query,
        facts=[fact_from_row(r) for r in scored("facts")],
        entities=[entity_from_row(r) for r in scored("entities")],
        episodes=[episode_from_row(r) for r in scored("episodes")],
        communities=[community_from_row(r) for r in scored("communities")],
    )


async def search_hits(
    db: Database, embedder: Embedder, group_id: str, req: SearchRequest
) -> dict[str, ScopeHits]:
    """The hits of every scope of ``req``; a question whose time is relative to an event
    ("after the road trip") looks the event up first (``event_window``)."""
    group = check_group(group_id)
    req = await _with_known_names(db, group, req)
    event = req.event if req.window is None else None
    if event is not None:
        req = await _with_event_window(db, embedder, group, req, event)
    return await _hits(db, embedder, group, req)


async def _with_known_names(db: Database, group: str, req: SearchRequest) -> SearchRequest:
    """``req`` with the names its question writes that the group knows (``KNOWN_NAMES``),
    for the episodes' vector; a question with no word written with a capital, or a
    search without episodes, reads nothing. As of a moment, the names it knew then (the
    entities and episodes held then): the search made then."""
    written = names_in(req.query) if "episodes" in req.scopes else []
    if not written:
        return req
    try:
        async with (
            db.borrowed() as conn,
            conn.transaction() if db.distributed else autocommit(conn),
        ):
            async with conn.pipeline():
                await db.set_group(conn, group)
                if req.as_of is not None:  # the moment, for the transaction (known_names)
                    await conn.execute(
                        sql.SQL(
                            "SELECT pg_catalog.set_config('timestone.as_of',"
                            " %s::timestamptz::text, true)"
                        ),
                        (req.as_of,),
                    )
                cur = await conn.execute(KNOWN_NAMES, {"names": written})
            known = {str(row["name"]) for row in await cur.fetchall()}
    except psycopg.Error as exc:
        raise wrap_db_error(exc, "searching") from exc
    return dataclasses.replace(req, names=tuple(n for n in written if n in known))


async def _with_event_window(
    db: Database, embedder: Embedder, group: str, req: SearchRequest, event: tuple[str, str]
) -> SearchRequest:
    """``req`` with the window on the asked side of its event: the event is searched for
    (its words and the question's names, over all time, as held at ``as_of``) and the
    best fact true then (its ``valid_at``), else the best episode (told then), dates it.
    No date found: ``req`` as it is."""
    side, words = event
    scopes = tuple(s for s in ("facts", "episodes") if s in req.scopes)
    if not scopes:
        return req
    names = [n for n in names_in(req.query) if n.casefold() not in words.casefold()]
    probe = prepare_search(
        " ".join([*names, words])[:MAX_QUERY_CHARS],
        limit=1,
        scopes=scopes,
        valid_at=None,
        as_of=req.as_of,
        fact_records=req.fact_records,
        content_chars=1,
    )
    found = await _hits(db, embedder, group, dataclasses.replace(probe, window=None))
    for scope, column in (("facts", "valid_at"), ("episodes", "reference_time")):
        hits = found.get(scope)
        when = hits.rows[hits.ranked[0].key].get(column) if hits and hits.ranked else None
        if isinstance(when, datetime):
            return dataclasses.replace(req, window=event_window(side, when))
    return req


async def _hits(
    db: Database, embedder: Embedder, group: str, req: SearchRequest
) -> dict[str, ScopeHits]:
    # an embedder of this process embeds the query while the server ranks the full text;
    # a service is called first, so that no pooled connection waits on it
    beside = getattr(embedder, "in_process", False) is True
    vector = None if beside else await embed_query(embedder, req.query)
    try:
        # One round trip: in autocommit, the statements of a pipeline up to its sync run
        # in one implicit transaction, which ends there, and the group setting with it;
        # there is no BEGIN to send nor COMMIT to wait for. (A sync in the middle would
        # leave the later statements without a group: they would see no rows, not
        # another group's.) A large facts table: see ``SPLIT_ROWS``.
        # On a distributed database, a transaction: the group reaches the workers only
        # as a SET LOCAL in a transaction block (``_distributed``).
        async with (
            db.borrowed() as conn,
            conn.transaction() if db.distributed else autocommit(conn),
        ):
            large = (
                "facts" in req.scopes
                and not db.small(group)
                and await db.facts_rows(conn) >= SPLIT_ROWS
            )
            async with db.spare() if large else nullcontext() as spare:
                hits = await run_search(
                    conn, group, req, vector, embedder.dimension, spare, db, embedder
                )
    except TimestoneError:
        raise
    except psycopg.Error as exc:
        raise wrap_db_error(exc, "searching") from exc
    if not isinstance(req.reranker, str):
        for scope_hits in hits.values():
            await _cross_encode(req, scope_hits)
    return hits


async def search(
    db: Database, embedder: Embedder, group_id: str, req: SearchRequest
) -> SearchResults:
    return results_of(req, await search_hits(db, embedder, group_id, req))


Result = Fact | Entity | Episode | Community

"""The facts search split over two connections (a large facts table).

From ``SPLIT_ROWS`` rows in the facts table, a search of a group of ``SPLIT_FACTS``
facts or more reads the full-text list of facts on a second connection of the pool,
in the snapshot of the first, while the first reads the vector and graph lists; the
first then fuses the three. Here the thresholds are lowered so that the split runs
on a small group, and every result
must be the one statement's, to the score: for each time filter, filter and
reranker, in both twins; in the snapshot of the search when a write lands in
between; for one tenant only; and with both connections handed back clean,
after a success and after a failure.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import DictRow

import timestone
from timestone import EntityInput as E
from timestone import FactInput as F
from timestone.db import _database as sdb
from timestone.db import _database_async as adb
from timestone.errors import DatabaseError, NotFound
from timestone.search import _ranked_lists_sql as lists_sql
from timestone.search import _run as ssearch
from timestone.search import _run_async as asearch
from timestone.search import _sql as search_sql

T2015 = datetime(2015, 1, 1, tzinfo=UTC)
T2019 = datetime(2019, 6, 1, tzinfo=UTC)
T2023 = datetime(2023, 1, 1, tzinfo=UTC)
NEVER = 10**15  # a threshold no table reaches: the one-statement search


def _seed(memory: timestone.Memory, group: str) -> datetime:
    """Wineries, people and grapes over three world dates, some periods closed; returns a
    moment between the two writes, for as-of searches."""
    memory.add_facts(
        group,
        [F(E("Mira", labels=("Person",)), "DIRECTS", "Château Nord", invalid_at=T2023)]
        + [F(f"Winemaker {i}", "WORKS_AT", f"Estate {i % 7}") for i in range(30)]
        + [F(f"Estate {i}", "GROWS", g) for i in range(7) for g in ("Gamay", "Pinot Noir")]
        + [F("Château Nord", "LOCATED_IN", E("Beaujolais", labels=("Region",)))],
        reference_time=T2015,
    )
    between = datetime.now(UTC)
    memory.add_facts(
        group,
        [
            F("Mira", "DIRECTS", "Château Sud", fact="Mira directs the winery Château Sud."),
            F("Mira", "WORKS_WITH_GRAPE", "Cabernet Franc"),
        ]
        + [F(f"Winemaker {i}", "WORKS_AT", f"Estate {(i + 3) % 7}") for i in range(0, 30, 3)],
        reference_time=T2023,
    )
    return between


@pytest.fixture
def split_memory(dsn: str) -> Iterator[timestone.Memory]:
    """A memory with a pool of its own (of up to three connections), grown to two."""
    mem = timestone.Memory.open(dsn, pool_size=3)
    pool = mem._db.pool  # pyright: ignore[reportPrivateUsage]
    with pool.connection(), pool.connection():
        pass  # the second connection stays in the pool, idle, for the split
    yield mem
    mem.close()


def _splits(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[int]:
    """Lower the threshold of ``module`` to every table; count the lists read apart."""
    calls: list[int] = []
    text_list = module._text_list

    def counted(*args: Any) -> Any:
        calls.append(1)
        return text_list(*args)

    monkeypatch.setattr(module, "SPLIT_ROWS", 0)
    monkeypatch.setattr(module, "SPLIT_FACTS", 0)  # no group is too small
    monkeypatch.setattr(module, "_text_list", counted)
    # the second connection may be busy being put back by the pool for a moment after the
    # last search, and a search does not wait for it: here it waits, so that every search
    # counted is split (on a loaded machine the half-millisecond wait was not always enough)
    for db in (adb, sdb):
        monkeypatch.setattr(db, "_SPARE_WAIT", 5.0)
    return calls


def _shown(found: timestone.SearchResults) -> list[tuple[Any, ...]]:
    return [(f.version_id, f.fact, f.source, f.target, f.score) for f in found.facts]


QUERIES = [
    "Who directs the château?",
    "Which estate does Winemaker 4 work at?",
    "Gamay Pinot Noir estates",
    "Mira",
    "zzzz qqqq",  # no word matches, no entity named: empty full-text list and walk
    'grape -Gamay OR "Cabernet Franc"',
]


def _variants(between: datetime) -> list[dict[str, Any]]:
    return [
        {},
        {"valid_at": None},
        {"valid_at": T2019},
        {"as_of": between},
        {"as_of": between, "valid_at": None},
        {"edge_types": ["DIRECTS", "WORKS_AT"]},
        {"labels": ["Person"]},
        {"center": "Mira"},
        {"reranker": "node_distance", "limit": 4},
        {"reranker": "episode_mentions"},
        {"reranker": "mmr", "limit": 5},
        {"limit": 1},
        {"limit": 40},
    ]


def test_the_split_search_is_the_one_statement_search(
    split_memory: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    between = _seed(split_memory, group)
    calls = _splits(monkeypatch, ssearch)
    cases = [(q, v) for q in QUERIES for v in _variants(between)]
    split = [_shown(split_memory.search(group, q, **v)) for q, v in cases]
    assert len(calls) == len(cases)  # every one of them read its lists apart
    monkeypatch.setattr(ssearch, "SPLIT_FACTS", 10_000)  # a small group: not split
    db = split_memory._db  # pyright: ignore[reportPrivateUsage]
    probed: list[list[tuple[Any, ...]]] = []
    for q, v in cases:
        db._small.clear()  # pyright: ignore[reportPrivateUsage]  (probe each time)
        probed.append(_shown(split_memory.search(group, q, **v)))
        assert db.small(group)
    monkeypatch.setattr(ssearch, "SPLIT_ROWS", NEVER)  # a small table: not probed
    whole = [_shown(split_memory.search(group, q, **v)) for q, v in cases]
    assert len(calls) == len(cases)
    assert split == whole
    assert probed == whole
    assert sum(1 for rows in whole if rows) > len(cases) // 2  # most found something
    # the lists read apart are each the statement's: a fact found by full text only
    only_text = split_memory.search(group, "directs winery", valid_at=None)
    assert "Mira directs the winery Château Sud." in {f.fact for f in only_text.facts}


def test_the_split_ranks_a_group_of_many_facts_through_the_index_as_the_statement_does(
    split_memory: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other tests' groups are ranked exactly (fewer facts than ``EXACT_BELOW``):
    with the bound below the group's size, the split and the one statement both rank the
    vector list through the HNSW indexes, and agree."""
    between = _seed(split_memory, group)
    calls = _splits(monkeypatch, ssearch)
    monkeypatch.setattr(lists_sql, "EXACT_BELOW", 3)
    monkeypatch.setattr(search_sql, "_STATEMENTS", {})  # composed again with the bound
    db = split_memory._db  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(db, "_large", {})
    cases = [(q, v) for q in QUERIES for v in _variants(between)[:4]]
    split = [_shown(split_memory.search(group, q, **v)) for q, v in cases]
    assert len(calls) == len(cases)
    assert db.large(group)  # the vector list of the split told it: not counted again
    monkeypatch.setattr(ssearch, "SPLIT_ROWS", NEVER)
    whole = [_shown(split_memory.search(group, q, **v)) for q, v in cases]
    assert split == whole
    assert sum(len(rows) for rows in whole) > 3 * len(cases)  # more than the bound each


async def test_the_async_split_search_is_the_one_statement_search(
    split_memory: timestone.Memory, group: str, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    between = _seed(split_memory, group)
    calls = _splits(monkeypatch, asearch)
    amem = await timestone.AsyncMemory.open(dsn, pool_size=3)
    try:
        pool = amem._db.pool  # pyright: ignore[reportPrivateUsage]
        async with pool.connection(), pool.connection():
            pass
        cases = [(q, v) for q in QUERIES for v in _variants(between)[:6]]
        split = [_shown(await amem.search(group, q, **v)) for q, v in cases]
    finally:
        await amem.close()
    assert len(calls) == len(cases)
    whole = [_shown(split_memory.search(group, q, **v)) for q, v in cases]
    assert split == whole


def test_the_second_connection_reads_the_snapshot_of_the_first(
    split_memory: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fact written after the search began (between the first connection's snapshot
    and the second's read) is in neither list: the split search is the search of one
    moment. Read in a snapshot of its own, the full-text list would hold it."""
    _seed(split_memory, group)
    query = "Mira OR Syrah OR Château"  # matches facts of before and the one written
    new = "Mira planted Syrah at Château Sud."
    before = _shown(split_memory.search(group, query))
    assert before
    calls = _splits(monkeypatch, ssearch)
    text_list: Callable[..., DictRow] = ssearch._text_list  # pyright: ignore[reportPrivateUsage]

    def late_write(*args: Any) -> DictRow:
        split_memory.add_facts(
            group, [F("Mira", "PLANTED", "Syrah", fact=new)], reference_time=T2023
        )
        return text_list(*args)

    monkeypatch.setattr(ssearch, "_text_list", late_write)
    during = _shown(split_memory.search(group, query))
    assert len(calls) == 1
    assert during == before  # the ranks too: the new fact took no place in a list
    monkeypatch.setattr(ssearch, "_text_list", text_list)
    assert new in {f.fact for f in split_memory.search(group, query).facts}


def test_the_split_search_sees_one_tenant(
    split_memory: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(split_memory, group)
    other = "t-" + uuid.uuid4().hex[:16]
    split_memory.add_facts(other, [F("Ines", "DIRECTS", "Château Ouest")], reference_time=T2023)
    calls = _splits(monkeypatch, ssearch)
    theirs = split_memory.search(other, "Who directs Château Nord or Château Sud?")
    assert [(f.group_id, f.target) for f in theirs.facts] == [(other, "Château Ouest")]
    mine = split_memory.search(group, "Who directs Château Ouest?", valid_at=None)
    assert all(f.group_id == group for f in mine.facts)
    assert mine.facts
    assert "Château Ouest" not in {f.target for f in mine.facts}
    assert len(calls) == 2


def _clean(memory: timestone.Memory) -> None:
    """Every connection of the pool is idle in it, out of autocommit, with no group."""
    pool = memory._db.pool  # pyright: ignore[reportPrivateUsage]
    stats = pool.get_stats()
    assert stats["pool_available"] == stats["pool_size"] >= 2
    held = [pool.getconn() for _ in range(stats["pool_size"])]
    try:
        for conn in held:
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert not conn.autocommit
            row = conn.execute("SELECT current_setting('timestone.group_id', true) AS g").fetchone()
            assert row is not None
            assert not row["g"]
            conn.rollback()
    finally:
        for conn in held:
            pool.putconn(conn)


def test_the_connections_go_back_clean(
    split_memory: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(split_memory, group)
    calls = _splits(monkeypatch, ssearch)
    assert split_memory.search(group, "Who directs the château?").facts
    _clean(split_memory)
    monkeypatch.setattr(ssearch, "SPLIT_FACTS", 10_000)  # probed, found small, not split
    assert split_memory.search(group, "Who directs the château?").facts
    _clean(split_memory)
    monkeypatch.setattr(ssearch, "SPLIT_FACTS", 0)
    split_memory._db._small.clear()  # pyright: ignore[reportPrivateUsage]
    with pytest.raises(NotFound, match="center 'Nobody'"):  # raised before the split
        split_memory.search(group, "Who directs the château?", center="Nobody")
    _clean(split_memory)
    text_list = ssearch._text_list  # pyright: ignore[reportPrivateUsage]

    def failing(conn: psycopg.Connection[DictRow], *args: Any) -> DictRow:
        conn.execute("SELECT 1 / 0")
        return text_list(conn, *args)

    monkeypatch.setattr(ssearch, "_text_list", failing)
    with pytest.raises(DatabaseError, match="searching"):
        split_memory.search(group, "Who directs the château?")
    _clean(split_memory)
    monkeypatch.setattr(ssearch, "_text_list", text_list)
    assert split_memory.search(group, "Who directs the château?").facts
    assert len(calls) == 2  # the first search and the last (the failing read replaced it)


def test_without_an_idle_connection_the_search_is_one_statement(
    dsn: str, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool of one connection has none to spare: the search does not wait for one,
    nor ask the pool for one."""
    mem = timestone.Memory.open(dsn, pool_size=1)
    try:
        between = _seed(mem, group)
        calls = _splits(monkeypatch, ssearch)
        pool = mem._db.pool  # pyright: ignore[reportPrivateUsage]
        asked: list[float | None] = []
        getconn = pool.getconn

        def counted(timeout: float | None = None) -> Any:
            asked.append(timeout)
            return getconn(timeout)

        monkeypatch.setattr(pool, "getconn", counted)
        alone = [_shown(mem.search(group, q, as_of=between)) for q in QUERIES]
        assert calls == []
        assert asked == [None] * len(QUERIES)  # each search's own connection only
    finally:
        mem.close()
    monkeypatch.setattr(ssearch, "SPLIT_ROWS", NEVER)
    mem = timestone.Memory.open(dsn)
    try:
        assert alone == [_shown(mem.search(group, q, as_of=between)) for q in QUERIES]
    finally:
        mem.close()


def test_the_row_estimate_is_the_planners(split_memory: timestone.Memory) -> None:
    db = split_memory._db  # pyright: ignore[reportPrivateUsage]
    with psycopg.connect(split_memory.dsn, autocommit=True) as owner:
        owner.execute("ANALYZE timestone.facts")
        row = owner.execute(
            "SELECT reltuples FROM pg_class WHERE oid = 'timestone.facts'::regclass"
        ).fetchone()
    assert row is not None
    db._facts_rows = (0.0, -3600.0)  # pyright: ignore[reportPrivateUsage]  stale: read
    with db.pool.connection() as conn:
        assert db.facts_rows(conn) == max(float(row[0]), 0.0)
        db._facts_rows = (123.0, db._facts_rows[1])  # pyright: ignore[reportPrivateUsage]
        assert db.facts_rows(conn) == 123.0  # fresh: kept
        conn.rollback()


def test_a_group_found_small_is_not_probed_again(
    split_memory: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe of a split search that finds the group small is remembered for a
    while: the group's next searches take no second connection and send no probe."""
    _seed(split_memory, group)
    monkeypatch.setattr(ssearch, "SPLIT_ROWS", 0)  # SPLIT_FACTS as it is: the group is small
    db = split_memory._db  # pyright: ignore[reportPrivateUsage]
    spares: list[int] = []
    spare = db.spare

    def counted() -> Any:
        spares.append(1)
        return spare()

    monkeypatch.setattr(db, "spare", counted)
    assert not db.small(group)
    first = _shown(split_memory.search(group, "Who directs the château?"))
    assert spares == [1]
    assert db.small(group)
    assert _shown(split_memory.search(group, "Who directs the château?")) == first
    assert spares == [1]
    db._small[group] -= 3600  # pyright: ignore[reportPrivateUsage]  (an hour ago)
    assert not db.small(group)
    split_memory.search(group, "Who directs the château?")
    assert spares == [1, 1]


async def test_a_cancelled_async_split_search_hands_both_connections_back(
    dsn: str, group: str, memory: timestone.Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while the second connection still reads, the search waits for that read
    to end (it may fail: the transaction whose snapshot it imports may have ended with
    the cancelled statement of the first connection) before the connection goes back to
    the pool: both come back idle, and the next search runs."""
    _seed(memory, group)
    _splits(monkeypatch, asearch)
    text_list = asearch._text_list  # pyright: ignore[reportPrivateUsage]
    reading = asyncio.Event()
    ended: list[int] = []

    async def slow(*args: Any) -> Any:
        reading.set()
        try:
            await asyncio.sleep(0.3)
            return await text_list(*args)
        finally:
            ended.append(1)

    monkeypatch.setattr(asearch, "_text_list", slow)
    amem = await timestone.AsyncMemory.open(dsn, pool_size=3)
    try:
        pool = amem._db.pool  # pyright: ignore[reportPrivateUsage]
        async with pool.connection(), pool.connection():
            pass
        search = asyncio.ensure_future(amem.search(group, "Who directs the château?"))
        await reading.wait()
        search.cancel()
        with pytest.raises(asyncio.CancelledError):
            await search
        assert ended == [1]  # the second connection's read ended before it went back
        stats = pool.get_stats()
        assert stats["pool_available"] == stats["pool_size"] >= 2
        for _ in range(stats["pool_size"]):
            async with pool.connection() as conn:
                assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
                assert not conn.autocommit
        monkeypatch.setattr(asearch, "_text_list", text_list)
        found = await amem.search(group, "Who directs the château?")
        assert "Mira directs the winery Château Sud." in {f.fact for f in found.facts}
    finally:
        await amem.close()

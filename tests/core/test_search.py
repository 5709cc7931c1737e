from __future__ import annotations

import contextlib
import json
import random
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from pgvector.psycopg import register_vector_async
from psycopg import sql
from psycopg.rows import DictRow, dict_row

import timestone
from timestone import FactInput as F
from timestone.errors import InvalidInput, NaiveDatetime, NotFound, RerankerError
from timestone.search._fusion import rerank
from timestone.search._request import MAX_SEARCH_LIMIT, prepare_search
from timestone.search._run_async import candidate_of, run_search

T2015 = datetime(2015, 1, 1, tzinfo=UTC)
# the HNSW index scans the current transaction has started
HNSW_SCANS = (
    "SELECT sum(pg_stat_get_xact_numscans(i.indexrelid)) AS n FROM pg_index AS i"
    " JOIN pg_class AS c ON c.oid = i.indexrelid JOIN pg_am AS a ON a.oid = c.relam"
    " WHERE a.amname = 'hnsw' AND c.relnamespace = 'timestone'::regnamespace"
)
T2023 = datetime(2023, 1, 1, tzinfo=UTC)


def _mira(memory: timestone.Memory, group: str) -> None:
    memory.add_facts(
        group,
        [
            F(
                timestone.EntityInput("Mira", labels=("Person",)),
                "DIRECTS",
                "Château Nord",
                invalid_at=T2023,
            ),
            F("Mira", "WORKS_WITH_GRAPE", "Gamay"),
            F(
                "Château Nord",
                "LOCATED_IN",
                timestone.EntityInput("Beaujolais", labels=("Region",)),
            ),
        ],
        reference_time=T2015,
    )
    memory.add_facts(
        group,
        [F("Mira", "DIRECTS", "Château Sud", fact="Mira directs the winery Château Sud.")],
        reference_time=T2023,
    )


def test_facts_scope_current_only_by_default(memory: timestone.Memory, group: str) -> None:
    _mira(memory, group)
    found = memory.search(group, "Who directs the château?")
    texts = [f.fact for f in found.facts]
    assert "Mira directs the winery Château Sud." in texts
    assert "Mira directs Château Nord." not in texts  # ended in 2023: not valid now
    assert all(f.score is not None for f in found.facts)
    history = memory.search(group, "Who directs the château?", valid_at=None)
    assert {"Mira directs Château Nord.", "Mira directs the winery Château Sud."} <= {
        f.fact for f in history.facts
    }
    in_2019 = memory.search(group, "Mira directs", valid_at=datetime(2019, 6, 1, tzinfo=UTC))
    assert [f.target for f in in_2019.facts if f.relation == "DIRECTS"] == ["Château Nord"]


def test_as_of_search_sees_what_the_graph_held(memory: timestone.Memory, group: str) -> None:
    first = memory.add_facts(group, [F("Ada", "LIVES_IN", "Paris")], reference_time=T2015)
    memory.add_facts(
        group, [F("Ada", "LIVES_IN", "Lyon", fact="Ada lives in Lyon now.")], reference_time=T2023
    )
    before = memory.search(group, "Where does Ada live?", as_of=first.recorded_at, valid_at=None)
    assert [f.target for f in before.facts] == ["Paris"]
    now = memory.search(group, "Where does Ada live?", valid_at=None)
    assert {f.target for f in now.facts} == {"Paris", "Lyon"}


def test_entities_episodes_and_filters(memory: timestone.Memory, group: str) -> None:
    _mira(memory, group)
    ents = memory.search(group, "Mira", scopes=("entities",))
    assert ents.entities[0].name == "Mira"
    assert ents.facts == []
    regions = memory.search(group, "Beaujolais Mira Gamay", scopes=["entities"], labels=["Region"])
    assert [e.name for e in regions.entities] == ["Beaujolais"]
    memory.add_document(
        group,
        "file:///notes/harvest.md",
        "The 2024 harvest at Château Sud started early because of the heat wave.",
        reference_time=T2023,
    )
    eps = memory.search(group, "harvest heat wave", scopes=("episodes",))
    assert eps.episodes[0].document_uri == "file:///notes/harvest.md"
    grapes = memory.search(group, "Mira", edge_types=["WORKS_WITH_GRAPE"])
    assert [f.relation for f in grapes.facts] == ["WORKS_WITH_GRAPE"]
    region_facts = memory.search(group, "Château Nord", labels=["Region"], valid_at=None)
    assert [f.relation for f in region_facts.facts] == ["LOCATED_IN"]
    some = memory.search(group, "Mira", valid_at=None)
    chosen = some.facts[-1]
    only = memory.search(group, "Mira", valid_at=None, ids=[chosen.id])
    assert [f.id for f in only.facts] == [chosen.id]


def test_a_filter_keeps_limit_hits_when_full_text_finds_others_first(
    memory: timestone.Memory, group: str
) -> None:
    """Full text does not apply a label filter (the filter is checked on the fused
    candidates): a search whose words match only facts outside the filter still returns
    ``limit`` facts inside it, found by the other lists, not fewer."""
    memory.add_facts(
        group,
        [F("Zed", "LIKES", f"Pie {i}", fact=f"Zed likes apple pie number {i}.") for i in range(20)]
        + [
            F(
                "Bo",
                "MEETS",
                timestone.EntityInput(f"Mate {i}", labels=("Team",)),
                fact=f"Bo meets mate {i} on mondays.",
            )
            for i in range(15)
        ],
        reference_time=T2015,
    )
    found = memory.search(group, "apple pie", labels=["Team"], limit=10).facts
    assert len(found) == 10
    assert {f.relation for f in found} == {"MEETS"}


def test_graph_walk_from_center(memory: timestone.Memory, group: str) -> None:
    _mira(memory, group)
    # the region is two hops from Mira and shares no words with the query
    found = memory.search(
        group, "wine country", center="Mira", reranker="node_distance", valid_at=None, limit=5
    )
    by_fact = {f.fact: f.score for f in found.facts}
    assert by_fact["Mira works with grape Gamay."] == 1.0  # touches the center
    assert by_fact.get("Château Nord located in Beaujolais.") == 0.5  # one hop out


@pytest.mark.parametrize("reranker", ["rrf", "mmr", "node_distance", "episode_mentions"])
def test_each_reranker(memory: timestone.Memory, group: str, reranker: str) -> None:
    _mira(memory, group)
    memory.add_facts(group, [F("Mira", "WORKS_WITH_GRAPE", "Gamay")], reference_time=T2023)
    found = memory.search(group, "Mira grape", reranker=reranker, limit=3, valid_at=None)
    assert 1 <= len(found.facts) <= 3
    scores = [f.score for f in found.facts]
    assert all(s is not None for s in scores)
    if reranker == "episode_mentions":
        assert found.facts[0].fact == "Mira works with grape Gamay."  # two episodes say it
        assert len(found.facts[0].episodes) == 2
    if reranker != "mmr":
        assert scores == sorted(scores, reverse=True)  # pyright: ignore[reportArgumentType]


def test_cross_encoder_reranker(memory: timestone.Memory, group: str) -> None:
    _mira(memory, group)
    calls: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls.append(body)
        docs: list[str] = body["documents"]
        # the recorded shape of a /rerank answer: the Gamay fact is judged best
        results = [
            {"index": i, "relevance_score": 0.99 if "Gamay" in d else 0.01 * i}
            for i, d in enumerate(docs)
        ]
        return httpx.Response(200, json={"id": "rr-1", "results": results})

    reranker = timestone.HTTPReranker(
        "bge-reranker", base_url="http://127.0.0.1:9/v1", transport=httpx.MockTransport(handler)
    )
    found = memory.search(group, "Mira", reranker=reranker, limit=2, valid_at=None)
    assert found.facts[0].fact == "Mira works with grape Gamay."
    assert found.facts[0].score == 0.99
    assert len(calls) == 1
    assert calls[0]["model"] == "bge-reranker"

    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"results": [{"index": 0, "relevance_score": 1}]})

    bad = timestone.HTTPReranker(
        "x", base_url="http://127.0.0.1:9", transport=httpx.MockTransport(broken)
    )
    with pytest.raises(RerankerError, match="scored 1 of"):
        memory.search(group, "Mira", reranker=bad, valid_at=None)


def test_overlap_reranker_is_a_reranker(memory: timestone.Memory, group: str) -> None:
    _mira(memory, group)
    found = memory.search(group, "grape Gamay", reranker=timestone.OverlapReranker(), limit=1)
    assert found.facts[0].fact == "Mira works with grape Gamay."


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"query": ""}, InvalidInput, "empty"),
        ({"query": "x" * 100_000}, InvalidInput, "100,000 characters"),
        (
            {"query": " or ".join(f"w{i}" for i in range(65))},
            InvalidInput,
            r"search query has 65 alternatives \(words joined by 'or'\); the limit is 64",
        ),
        (
            {"query": " OR ".join(f"w{i}" for i in range(500))},
            InvalidInput,
            "has 500 alternatives",
        ),
        ({"limit": 0}, InvalidInput, "limit"),
        ({"limit": 10_000}, InvalidInput, "limit"),
        ({"reranker": "bm25"}, InvalidInput, "unknown reranker"),
        ({"scopes": ("facts", "nodes")}, InvalidInput, "unknown search scope 'nodes'"),
        ({"scopes": []}, InvalidInput, r"scopes is empty: name one or more of facts, .*None"),
        ({"edge_types": []}, InvalidInput, "edge_types is empty: pass None for no filter"),
        ({"valid_at": datetime(2020, 1, 1)}, NaiveDatetime, "valid_at"),
        ({"as_of": datetime(2020, 1, 1)}, NaiveDatetime, "as_of"),
        ({"edge_types": ["not a relation"]}, InvalidInput, "relation"),
        ({"ids": ["nope"]}, InvalidInput, "UUID"),
    ],
)
def test_bad_input_is_refused(
    memory: timestone.Memory, group: str, kwargs: dict[str, object], error: type, match: str
) -> None:
    args: dict[str, object] = {"query": "Mira"} | kwargs
    query = args.pop("query")
    with pytest.raises(error, match=match):
        memory.search(group, query, **args)  # type: ignore[arg-type]


def test_alternatives_up_to_the_limit_are_searched(memory: timestone.Memory, group: str) -> None:
    _mira(memory, group)
    words = [f"w{i}" for i in range(63)]
    # quoted, an "or" is a word of a phrase: 64 alternatives and a phrase that says "or"
    asked = " or ".join(["Gamay", *words]) + ' "red or white"'
    found = memory.search(group, asked, valid_at=None)
    assert any("Gamay" in f.fact for f in found.facts)
    context = memory.context(group, " OR ".join(["Gamay", *words]))
    assert any("Gamay" in item.text for item in context.items)
    with pytest.raises(InvalidInput, match="65 alternatives"):
        memory.context(group, " or ".join(["Gamay", *words, "w63"]))


def test_tenancy_no_search_path_leaks(memory: timestone.Memory, group: str) -> None:
    _mira(memory, group)
    memory.build_communities(group)
    other = "t-" + uuid.uuid4().hex[:16]
    memory.add_facts(other, [F("Zed", "LIKES", "Tea")], reference_time=T2015)
    everything = ("facts", "entities", "episodes", "communities")
    leaked = memory.search(other, "Mira Château Gamay Beaujolais", scopes=everything, valid_at=None)
    names = {e.name for e in leaked.entities} | {f.source for f in leaked.facts}
    assert "Mira" not in names
    assert leaked.communities == []
    assert all(e.group_id == other for e in leaked.episodes)
    with pytest.raises(NotFound, match="center 'Mira'"):
        memory.search(other, "anything", center="Mira")
    mira = memory.get_entity(group, "Mira")
    assert mira is not None
    with pytest.raises(NotFound):
        memory.search(other, "anything", center=mira.id)


@pytest.fixture
async def app_conn(dsn: str) -> AsyncIterator[psycopg.AsyncConnection[DictRow]]:
    conn = await psycopg.AsyncConnection[DictRow].connect(dsn, row_factory=dict_row)
    await register_vector_async(conn)
    await conn.execute("SET ROLE timestone_app")
    await conn.commit()
    yield conn  # pyright: ignore[reportReturnType]
    await conn.close()


async def test_no_search_path_falls_back_to_a_sequential_scan(
    amemory: timestone.AsyncMemory, group: str, app_conn: psycopg.AsyncConnection[DictRow]
) -> None:
    """Every index path must stay usable under RLS: with sequential scans priced out,
    a scan that still happens means a predicate could not use its index."""
    await amemory.add_facts(
        group,
        [
            F(f"person {i}", "WORKS_AT", "Acme", fact=f"Person {i} works at Acme.")
            for i in range(50)
        ],
        reference_time=T2015,
    )
    await amemory.add_document(
        group, "file:///a.md", "Acme was founded in 1990.", reference_time=T2015
    )
    await amemory.build_communities(group)
    req = prepare_search(
        "Who founded Acme?",
        scopes=("facts", "entities", "episodes"),
        reranker="mmr",
    )
    vector = (await amemory.embedder.aembed([req.query]))[0]
    async with app_conn.transaction():
        await app_conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
        await app_conn.execute("SET LOCAL enable_seqscan = off")
        hits = await run_search(app_conn, group, req, vector, amemory.embedder.dimension)  # pyright: ignore[reportArgumentType]
        cur = await app_conn.execute(
            "SELECT relname, seq_scan, idx_scan FROM pg_stat_xact_user_tables"
            " WHERE schemaname = 'timestone' AND relname IN ('facts', 'entities', 'episodes')"
        )
        stats = {r["relname"]: r for r in await cur.fetchall()}
    assert hits["facts"].ranked
    assert {name: row["seq_scan"] for name, row in stats.items()} == {
        "facts": 0,
        "entities": 0,
        "episodes": 0,
    }
    assert all(int(row["idx_scan"]) > 0 for row in stats.values())  # pyright: ignore[reportArgumentType]


def _text_ranks(rows: Mapping[Any, Mapping[str, Any]]) -> dict[str, object]:
    return {str(r["fact"]): r["fts_rank"] for r in rows.values()}


async def test_the_full_text_list_reaches_the_fused_search(
    amemory: timestone.AsyncMemory, memory: timestone.Memory, group: str
) -> None:
    """The full-text list is ranked by a statement of its own, sent before the query is
    embedded, and read back by the fused statement from the transaction: its ranks are
    the ranks of the hits, in both twins."""
    from timestone.search._run import search_hits
    from timestone.search._run_async import search_hits as asearch_hits

    memory.add_facts(
        group,
        [
            F("Ada", "WROTE", "Notes", fact="Ada wrote notes on the quinquennial survey."),
            F("Ada", "KNOWS", "Grace", fact="Ada knows Grace from the quinquennial audit."),
            F("Ada", "VISITED", "Turin"),
        ],
        reference_time=T2015,
    )
    req = prepare_search("quinquennial survey")
    db = memory._db  # pyright: ignore[reportPrivateUsage]
    adb = amemory._db  # pyright: ignore[reportPrivateUsage]
    for ranks in (
        _text_ranks(
            search_hits(db, memory.embedder, group, prepare_search(req.query))["facts"].rows
        ),
        _text_ranks((await asearch_hits(adb, amemory.embedder, group, req))["facts"].rows),
    ):
        assert ranks["Ada wrote notes on the quinquennial survey."] == 1
        assert ranks.get("Ada knows Grace from the quinquennial audit.") is None  # not "survey"
        assert ranks.get("Ada visited Turin.") is None


async def test_async_search_matches_sync(
    amemory: timestone.AsyncMemory, memory: timestone.Memory, group: str
) -> None:
    await amemory.add_facts(group, [F("Ada", "WROTE", "Notes")], reference_time=T2015)
    a = await amemory.search(group, "Ada wrote", scopes=("facts", "entities"))
    s = memory.search(group, "Ada wrote", scopes=("facts", "entities"))
    assert [f.id for f in a.facts] == [f.id for f in s.facts]
    assert [e.id for e in a.entities] == [e.id for e in s.entities]
    assert a.facts[0].valid_at == T2015
    assert timedelta(0) <= datetime.now(UTC) - a.facts[0].created_at


async def test_an_episode_is_as_far_from_the_center_as_its_nearest_entity(
    amemory: timestone.AsyncMemory,
    group: str,
    app_conn: psycopg.AsyncConnection[DictRow],
) -> None:
    """An episode's ``hops`` (what ``node_distance`` ranks by) is the least depth at
    which the walk reached an entity it mentions; none reached: no hops."""
    chain = [("Ada", "Bo"), ("Bo", "Cy"), ("Cy", "Dee"), ("Eve", "Fay")]
    episodes: dict[uuid.UUID, tuple[str, str]] = {}
    for source, target in chain:
        res = await amemory.add_facts(
            group,
            [F(source, "KNOWS", target, fact=f"{source} knows {target}.")],
            reference_time=T2015,
        )
        episodes[res.episode.id] = (source, target)
    req = prepare_search(
        "who knows whom",
        scopes=("episodes",),
        center="Ada",
        limit=10,
        valid_at=None,
        reranker="node_distance",
    )
    vector = (await amemory.embedder.aembed(["who knows whom"]))[0]
    async with app_conn.transaction():
        await app_conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
        found = await run_search(app_conn, group, req, vector, amemory.embedder.dimension)  # pyright: ignore[reportArgumentType]
    hops = {episodes[row["id"]]: row["hops"] for row in found["episodes"].rows.values()}
    # the walk from Ada: Ada 0, Bo 1, Cy 2 (two hops); Dee, Eve and Fay unreached
    assert hops == {("Ada", "Bo"): 0, ("Bo", "Cy"): 1, ("Cy", "Dee"): 2, ("Eve", "Fay"): None}


@pytest.mark.parametrize("reranker", ["rrf", "mmr", "node_distance", "episode_mentions"])
async def test_a_signal_read_from_the_mentions_is_read_for_its_reranker_only(
    amemory: timestone.AsyncMemory,
    group: str,
    app_conn: psycopg.AsyncConnection[DictRow],
    reranker: str,
) -> None:
    """An episode's hops and an episode's or entity's count of mentions are subqueries
    over every mention of each hit: read for the reranker that orders by them, NULL for
    the others, which never look at them."""
    first = await amemory.add_facts(
        group,
        [F("Ada", "KNOWS", "Bo", fact="Ada knows Bo."), F("Ada", "KNOWS", "Cy")],
        reference_time=T2015,
    )
    await amemory.add_facts(
        group, [F("Ada", "KNOWS", "Bo", fact="Ada knows Bo.")], reference_time=T2023
    )
    req = prepare_search(
        "Ada knows Bo",
        scopes=("entities", "episodes"),
        center="Ada",
        limit=10,
        valid_at=None,
        reranker=reranker,
    )
    vector = (await amemory.embedder.aembed([req.query]))[0]
    async with app_conn.transaction():
        await app_conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
        found = await run_search(app_conn, group, req, vector, amemory.embedder.dimension)  # pyright: ignore[reportArgumentType]
    episode = next(r for r in found["episodes"].rows.values() if r["id"] == first.episode.id)
    ada = next(r for r in found["entities"].rows.values() if r["name"] == "Ada")
    counted = reranker == "episode_mentions"
    # the first episode mentions Ada, Bo and Cy; Ada is mentioned in both episodes
    assert (episode["mentions"], ada["mentions"]) == ((3, 2) if counted else (None, None))
    assert episode["hops"] == (0 if reranker == "node_distance" else None)
    assert ada["hops"] == 0  # the walk's own depth, read for every reranker


@pytest.mark.parametrize("reranker", ["rrf", "node_distance", "episode_mentions"])
async def test_the_database_cut_equals_fusion_over_every_candidate(
    amemory: timestone.AsyncMemory,
    group: str,
    app_conn: psycopg.AsyncConnection[DictRow],
    reranker: str,
) -> None:
    """The database orders the candidates by the reranker and sends only ``limit`` rows;
    the cut must be the first ``limit`` of ``_fusion.rerank`` over every candidate, ties
    and reciprocal-rank sums included, in every scope."""
    people = [f"Person {i}" for i in range(40)]
    await amemory.add_facts(
        group,
        [F(p, "WORKS_AT", "Acme", fact=f"{p} works at Acme in Lyon.") for p in people],
        reference_time=T2015,
    )
    await amemory.add_facts(  # a second episode for some: mentions differ, hops too
        group,
        [F(p, "LIVES_IN", "Lyon", fact=f"{p} lives in Lyon near Acme.") for p in people[::3]]
        + [F(p, "WORKS_AT", "Acme", fact=f"{p} works at Acme in Lyon.") for p in people[::4]]
        # not reached by a walk from Acme or Lyon: no hops
        + [
            F(f"Visitor {i}", "VISITS", "Paris", fact=f"Visitor {i} works in Paris.")
            for i in range(9)
        ],
        reference_time=T2023,
    )
    for i in range(8):
        await amemory.add_document(
            group, f"file:///acme-{i}.md", f"Acme in Lyon hires team {i}.", reference_time=T2015
        )
    await amemory.build_communities(group)
    scopes = ("facts", "entities", "episodes", "communities")
    query = "Who works at Acme in Lyon?"
    vector = (await amemory.embedder.aembed([query]))[0]
    dimension = amemory.embedder.dimension

    sizes: dict[str, int] = {}

    async def hits(method: str, limit: int) -> dict[str, list[object]]:
        req = prepare_search(
            query, scopes=scopes, reranker=method, limit=limit, candidates=30, valid_at=None
        )
        async with app_conn.transaction():
            await app_conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
            found = await run_search(app_conn, group, req, vector, dimension)  # pyright: ignore[reportArgumentType]
        if limit == MAX_SEARCH_LIMIT:  # every candidate, uncut: fuse them here
            sizes.update({scope: len(h.rows) for scope, h in found.items()})
            return {
                scope: [
                    c.key
                    for c in rerank(
                        [candidate_of(row, key) for key, row in h.rows.items()], method, limit
                    )
                ]
                for scope, h in found.items()
            }
        assert all(len(h.rows) <= limit for h in found.values())
        return {scope: [c.key for c in h.ranked] for scope, h in found.items()}

    # read with the reranker's own signals (the hops and mentions it orders by)
    everything = await hits(reranker, MAX_SEARCH_LIMIT)
    for limit in range(1, 16):  # a cut at each place, so through ties of the fused score
        cut = await hits(reranker, limit)
        assert cut == {scope: keys[:limit] for scope, keys in everything.items()}, limit
    # the cut did cut: more candidates than kept in the scopes that have them
    assert {s: n > 15 for s, n in sizes.items()} == {
        "facts": True,
        "entities": True,
        "episodes": False,
        "communities": False,
    }, sizes


_SYLLABLES = ("ka", "lo", "mi", "ren", "tas", "vu", "bel", "dor", "fin", "gus", "hal", "jor", "zed")


def _distinct(n: int, seed: str) -> list[str]:
    """``n`` names of made-up words, drawn by a generator seeded with ``seed`` (a group:
    no two groups share a name), that the embedder tells apart.

    The vector index tests need both. "Clerk 1" to "Clerk 1000" embed as near-ties (a
    mean of word vectors: "517", "751" and "715" are one bag), among which an HNSW graph
    may leave the one fact that differs unreached. And the same sentences in more than
    ten groups (a dozen test runs sharing the database) can drop out of pgvector's index
    altogether: a known limit, measured by ``bench.duplicates``.
    """
    rnd = random.Random(seed)
    names: dict[str, None] = {}
    while len(names) < n:
        words = ("".join(rnd.choice(_SYLLABLES) for _ in range(3)) for _ in range(3))
        names[" ".join(w.capitalize() for w in words)] = None
    return list(names)


async def _vector_hits(
    conn: psycopg.AsyncConnection[DictRow],
    memory: timestone.AsyncMemory,
    group: str,
    query: str,
    **when: datetime | None,
) -> dict[str, int]:
    """The facts the vector list found: sentence -> rank."""
    req = prepare_search(query, limit=50, candidates=50, **when)  # pyright: ignore[reportArgumentType]
    vector = (await memory.embedder.aembed([query]))[0]
    async with conn.transaction():
        await conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
        hits = await run_search(conn, group, req, vector, memory.embedder.dimension)  # pyright: ignore[reportArgumentType]
    return {
        str(row["fact"]): int(row["vec_rank"])
        for row in hits["facts"].rows.values()
        if row["vec_rank"] is not None
    }


async def _graph_hits(
    conn: psycopg.AsyncConnection[DictRow],
    memory: timestone.AsyncMemory,
    group: str,
    query: str,
    center: str | None = None,
) -> set[str]:
    """The facts the graph list ranked (every candidate comes back under MMR)."""
    req = prepare_search(query, limit=50, candidates=50, reranker="mmr", center=center)
    vector = (await memory.embedder.aembed([query]))[0]
    async with conn.transaction():
        await conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
        hits = await run_search(conn, group, req, vector, memory.embedder.dimension)  # pyright: ignore[reportArgumentType]
    return {str(row["fact"]) for row in hits["facts"].rows.values() if row["graph_rank"]}


async def test_one_hop_out_the_graph_list_reads_the_edges_a_question_follows(
    amemory: timestone.AsyncMemory,
    group: str,
    app_conn: psycopg.AsyncConnection[DictRow],
    heron_facts: Callable[[int], list[F]],
) -> None:
    """Around an entity the question names, the facts one hop out are those of the
    other ends of its three facts most similar to the question, not of every
    neighbour; around an explicit center, of every neighbour the walk reached."""
    await amemory.add_facts(group, heron_facts(12), reference_time=T2015)
    question = "May Project Heron ship lithium batteries?"
    named = await _graph_hits(app_conn, amemory, group, question)
    assert "Ada Logistics may no longer carry lithium batteries after the 2024 audit." in named
    assert "Project Heron employs Engineer 7." in named  # the named entity's own facts
    assert len({f for f in named if " lives in Town " in f}) <= 2  # two edges at most
    around = await _graph_hits(app_conn, amemory, group, question, center="Project Heron")
    assert len({f for f in around if " lives in Town " in f}) == 12
    assert "Ada Logistics may no longer carry lithium batteries after the 2024 audit." in around


@pytest.mark.parametrize("others", [0, 1000])
async def test_vector_list_reads_open_and_closed_periods_by_the_time_asked(
    amemory: timestone.AsyncMemory,
    group: str,
    app_conn: psycopg.AsyncConnection[DictRow],
    others: int,
) -> None:
    """Open periods and closed ones sit in two vector indexes: the present reads the open
    one plus the periods that end later; the past and all history read the closed one. A
    group with few facts is ranked exactly (``others`` = 0); with many, through the
    indexes."""
    from timestone.search._ranked_lists_sql import EXACT_BELOW

    assert others in (0, EXACT_BELOW)
    if others:
        await amemory.add_facts(
            group,
            [F(name, "FILES", "a form") for name in _distinct(others, group)],
            reference_time=T2015,
        )
    soon = datetime.now(UTC) + timedelta(days=365)
    # sentences of this group alone (see ``_distinct``)
    nord, sud = f"Mira directs Château Nord ({group}).", f"Mira directs Château Sud ({group})."
    atlas = f"Mira leads Project Atlas ({group})."
    await amemory.add_facts(
        group,
        [
            F("Mira", "DIRECTS", "Château Nord", invalid_at=T2023, fact=nord),
            F("Mira", "LEADS", "Project Atlas", invalid_at=soon, fact=atlas),
        ],
        reference_time=T2015,
    )
    await amemory.add_facts(
        group, [F("Mira", "DIRECTS", "Château Sud", fact=sud)], reference_time=T2023
    )

    now = await _vector_hits(app_conn, amemory, group, "Mira directs a château")
    assert (sud in now, atlas in now, nord in now) == (True, True, False)  # to come: counts

    then = await _vector_hits(
        app_conn,
        amemory,
        group,
        "Mira directs a château",
        valid_at=datetime(2018, 1, 1, tzinfo=UTC),
    )
    assert (nord in then, atlas in then, sud in then) == (True, True, False)
    # few periods end after 2018: those are ranked exactly

    ever = await _vector_hits(app_conn, amemory, group, "Mira directs a château", valid_at=None)
    assert {nord, sud, atlas} <= set(ever)


async def test_a_search_of_the_present_with_many_periods_ending_later(
    amemory: timestone.AsyncMemory, group: str, app_conn: psycopg.AsyncConnection[DictRow]
) -> None:
    """More periods end later than are ranked exactly: the other branch searches them
    (every fact here is such a period, so nothing is found unless it does)."""
    from timestone.search._ranked_lists_sql import EXACT_BELOW

    end = datetime.now(UTC) + timedelta(days=365)
    names = _distinct(EXACT_BELOW + 20, group)
    await amemory.add_facts(
        group,
        [F(name, "CONTRACTED_BY", "Acme", invalid_at=end) for name in names],
        reference_time=T2015,
    )
    sentence = f"{names[517]} contracted by Acme."
    found = await _vector_hits(app_conn, amemory, group, sentence)
    assert found.get(sentence) == 1


async def test_sentences_many_groups_share_stay_in_the_vector_index(
    amemory: timestone.AsyncMemory,
    group: str,
    app_conn: psycopg.AsyncConnection[DictRow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pgvector keeps at most ten rows of one vector in one graph node: past ten copies,
    an index of the vectors as they are loses some (in this layout, 40 of the 48 groups
    missed their probe when it was written). Keyed by group, every copy is a vector of
    its own. Four draws of twelve groups, each draw's groups sharing its twenty
    sentences, and every group the probe: each group's search through the index (the
    exact bound at 0) ranks its probe first."""
    from timestone.search import _ranked_lists_sql

    monkeypatch.setattr(_ranked_lists_sql, "EXACT_BELOW", 0)  # every group through the index
    probe = "Mira directs Château Sud."
    groups = [f"{group}-{draw}-{k}" for draw in range(4) for k in range(12)]
    for name in groups:
        draw = name.rsplit("-", 2)[1]
        shared = [F(n, "FILES", "a form") for n in _distinct(20, f"{group}-{draw}")]
        await amemory.add_facts(
            name, [*shared, F("Mira", "DIRECTS", "Château Sud", fact=probe)], reference_time=T2015
        )
    vector = (await amemory.embedder.aembed([probe]))[0]
    # Analyzed, a table this small is cheaper read whole and sorted: the planner is told
    # not to, so that the test reads the index whenever autovacuum happens to analyze.
    async with await psycopg.AsyncConnection.connect(amemory.dsn, autocommit=True) as owner:
        await owner.execute("ANALYZE timestone.facts")
    missed: list[str] = []
    for name in groups:
        async with app_conn.transaction():
            await app_conn.execute("SELECT set_config('timestone.group_id', %s, true)", (name,))
            await app_conn.execute(
                "SELECT set_config('enable_seqscan', 'off', true),"
                " set_config('enable_sort', 'off', true)"
            )
            req = prepare_search(probe, limit=5)
            hits = await run_search(app_conn, name, req, vector, amemory.embedder.dimension)  # pyright: ignore[reportArgumentType]
            cur = await app_conn.execute(HNSW_SCANS)
            scans = await cur.fetchone()
        assert scans is not None
        assert scans["n"] > 0  # read through the index
        rows = list(hits["facts"].rows.values())
        assert rows
        assert all(r["few"] is False for r in rows)
        if not any(r["fact"] == probe and r["vec_rank"] == 1 for r in rows):
            missed.append(name)
    assert missed == []


async def test_a_small_group_is_ranked_exactly_not_through_the_shared_index(
    amemory: timestone.AsyncMemory, group: str, app_conn: psycopg.AsyncConnection[DictRow]
) -> None:
    """The HNSW indexes span every group: filtered to a small one, a scan walks far before
    it gives up (over 100 ms at 100k rows for a group with nothing). A small group's
    vector lists rank its rows exactly, and never start a scan of a vector index."""
    await amemory.add_facts(
        group, [F("Ada", "WROTE", "Notes"), F("Ada", "KNEW", "Babbage")], reference_time=T2015
    )
    query = "Who wrote the notes?"
    vector = (await amemory.embedder.aembed([query]))[0]
    for as_group in (group, group + "-empty"):
        req = prepare_search(query, scopes=("facts", "entities", "episodes"), valid_at=None)
        async with app_conn.transaction():
            await app_conn.execute("SELECT set_config('timestone.group_id', %s, true)", (as_group,))
            hits = await run_search(app_conn, as_group, req, vector, amemory.embedder.dimension)  # pyright: ignore[reportArgumentType]
            cur = await app_conn.execute(HNSW_SCANS)
            row = await cur.fetchone()
        assert row is not None
        assert row["n"] == 0
        found = {str(r["fact"]) for r in hits["facts"].rows.values() if r["vec_rank"] is not None}
        assert found == ({"Ada wrote Notes.", "Ada knew Babbage."} if as_group == group else set())


async def _hnsw_scans(
    app_conn: psycopg.AsyncConnection[DictRow],
    amemory: timestone.AsyncMemory,
    group: str,
    query: str,
) -> tuple[int, dict[str, dict[str, object]]]:
    """One search through ``run_search`` with the memory's own bookkeeping: the HNSW index
    scans it started, and its facts. The group is measured as in a large table: in one of
    a few thousand rows, once analyzed, the planner reads a group whole and sorts it
    rather than read the index, so it is told not to (the exact branch, a statement
    without the keyed order, cannot read the index either way)."""
    db = amemory._db  # pyright: ignore[reportPrivateUsage]
    req = prepare_search(query)
    async with await psycopg.AsyncConnection.connect(amemory.dsn, autocommit=True) as owner:
        await owner.execute("ANALYZE timestone.facts")  # the case that needs the settings
    async with app_conn.transaction():
        await app_conn.execute(
            "SELECT set_config('enable_seqscan', 'off', true),"
            " set_config('enable_sort', 'off', true)"
        )
        # the counts pending since the server last reported them, which may hold the
        # searches of the second before: the difference is this one's
        cur = await app_conn.execute(HNSW_SCANS)
        before = await cur.fetchone()
        await app_conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
        hits = await run_search(
            app_conn, group, req, None, amemory.embedder.dimension, None, db, amemory.embedder
        )
        cur = await app_conn.execute(HNSW_SCANS)
        row = await cur.fetchone()
    assert before is not None
    assert row is not None
    return int(row["n"] or 0) - int(before["n"] or 0), {
        str(r["fact"]): r for r in hits["facts"].rows.values()
    }


async def test_a_group_past_the_bound_is_ranked_through_the_index_whatever_the_table(
    amemory: timestone.AsyncMemory,
    group: str,
    app_conn: psycopg.AsyncConnection[DictRow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Keyed by group, the shared index reaches a group's rows first however large the
    table, so the exact-ranking bound no longer grows with it: a group of 1,100 facts is
    ranked through the index in a table of ten million rows as in a small one (it was
    ranked exactly there, past a bound of 24,494). A group found too large is
    remembered for a minute, and its next searches skip the count."""
    from timestone.search._ranked_lists_sql import EXACT_BELOW

    await amemory.add_facts(
        group,
        [F(f"Walker {i}", "WORKS_AT", f"Quarry {i % 37}") for i in range(EXACT_BELOW + 100)],
        reference_time=T2015,
    )
    db = amemory._db  # pyright: ignore[reportPrivateUsage]

    async def facts_rows(conn: object) -> float:
        return 10_000_000.0

    monkeypatch.setattr(db, "facts_rows", facts_rows)
    monkeypatch.setattr(db, "_large", {})
    query = "Walker 517 works at which quarry?"

    scans, facts = await _hnsw_scans(app_conn, amemory, group, query)
    assert scans > 0
    assert "Walker 517 works at Quarry 36." in facts
    assert all(r["few"] is False for r in facts.values())  # counted: past the bound
    assert db.large(group)

    from timestone.search import _ranked_lists_sql

    # a bound the group is under: counted, it would be ranked exactly; remembered as
    # large, it is not counted, and goes through the index again
    monkeypatch.setattr(_ranked_lists_sql, "EXACT_BELOW", 10 * EXACT_BELOW)
    scans, facts = await _hnsw_scans(app_conn, amemory, group, query)
    assert scans > 0
    assert "Walker 517 works at Quarry 36." in facts
    assert all(r["few"] is False for r in facts.values())
    monkeypatch.setattr(db, "_large", {})  # forgotten: counted, and now under the bound
    scans, facts = await _hnsw_scans(app_conn, amemory, group, query)
    assert scans == 0
    assert all(r["few"] is True for r in facts.values())


def test_a_large_group_among_many_groups_is_ranked_through_the_vector_index(
    fresh_dsn: str,
) -> None:
    """A generic plan estimates a group as the table over the number of groups: among
    hundreds of small groups, a large one looked small, and the branch meant for it
    sorted its rows by distance instead of reading the HNSW index (321 ms instead of 6 to
    9 at p50 for a 95k-fact group with 2,000 groups believed). Migration 0019 pins the
    planner's number of groups to one. The group is twice the exact bound: in a table
    of fewer than about 1,800 rows the planner sorts a group by its keyed distance
    rather than read the index, whatever it believes of the group (exact, and cheap
    at that size)."""
    from pgvector.psycopg import register_vector
    from psycopg.rows import dict_row as sync_dict_row

    from timestone.search._ranked_lists_sql import EXACT_BELOW
    from timestone.search._run import run_search as run_search_sync

    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts(
            "large",
            [F(f"Walker {i}", "WORKS_AT", f"Quarry {i % 37}") for i in range(2 * EXACT_BELOW)],
            reference_time=T2015,
        )
        for k in range(300):
            mem.add_facts(
                f"tenant-{k}", [F(f"Owner {k}", "RUNS", f"Shop {k}")], reference_time=T2015
            )
        with psycopg.connect(fresh_dsn, autocommit=True) as owner:
            owner.execute("ANALYZE timestone.facts")
            row = owner.execute(
                "SELECT n_distinct FROM pg_stats WHERE schemaname = 'timestone'"
                " AND tablename = 'facts' AND attname = 'group_id'"
            ).fetchone()
            assert row == (1.0,)  # 301 groups, taken for one
        query = "Walker 517 works at which quarry?"
        vector = mem.embedder.embed([query])[0]
        dimension = mem.embedder.dimension
    with psycopg.Connection[DictRow].connect(fresh_dsn, row_factory=sync_dict_row) as conn:
        register_vector(conn)
        conn.execute("SET ROLE timestone_app")
        with conn.transaction():
            conn.execute("SELECT set_config('timestone.group_id', 'large', true)")
            hits = run_search_sync(conn, "large", prepare_search(query), vector, dimension)  # pyright: ignore[reportArgumentType]
            scans = conn.execute(HNSW_SCANS).fetchone()
    assert scans is not None
    assert scans["n"] > 0
    facts = {str(r["fact"]): r for r in hits["facts"].rows.values()}
    assert "Walker 517 works at Quarry 36." in facts
    assert sum(r["vec_rank"] is not None for r in facts.values()) >= 5


def test_a_small_group_among_few_groups_reads_its_rows_through_an_index(fresh_dsn: str) -> None:
    """In a database of few groups, the generic plan takes each group for a large share of
    the table. A search of a small (or empty) group must still read only its own rows,
    through indexes: the exact ranking of its vectors, the walk's steps and the reading of
    its candidates each had read the whole table that way (the vector list of a 278-fact
    group among 9k facts took 9 ms, 1.7 ms through its index)."""
    from pgvector.psycopg import register_vector
    from psycopg.rows import dict_row as sync_dict_row

    from timestone.search._run import run_search as run_search_sync

    ontology = timestone.Ontology(edge_types=[timestone.EdgeType("WORKS_AT", cardinality="one")])
    with timestone.Memory.open(fresh_dsn, ontology=ontology) as mem:
        for batch in range(2):  # jobs that change: most current rows are closed periods
            mem.add_facts(
                "big",
                [
                    F(f"Person {i}", "WORKS_AT", f"Company {(i + k) % 50}", valid_at=when)
                    for i in range(batch * 500, batch * 500 + 500)
                    for k, when in enumerate((T2015, T2015 + timedelta(days=400)))
                ],
                reference_time=T2015,
            )
        mem.add_facts(
            "small", [F("Ada", "WROTE", "Notes"), F("Ada", "KNEW", "Babbage")], reference_time=T2015
        )
        for group_id in ("big", "small"):
            mem.build_communities(group_id)
        with psycopg.connect(fresh_dsn, autocommit=True) as owner:
            for table in ("facts", "entities", "mentions", "episodes", "assertions", "communities"):
                owner.execute(sql.SQL("VACUUM ANALYZE timestone.{}").format(sql.Identifier(table)))
        query = "Who wrote the notes?"
        vector = mem.embedder.embed([query])[0]
        dimension = mem.embedder.dimension
    expected = {"small": {"Ada wrote Notes.", "Ada knew Babbage."}, "none": set[str]()}
    for as_group, facts in expected.items():
        with psycopg.Connection[DictRow].connect(fresh_dsn, row_factory=sync_dict_row) as conn:
            register_vector(conn)
            conn.execute("SET ROLE timestone_app")
            with conn.transaction():
                conn.execute("SELECT set_config('timestone.group_id', %s, true)", (as_group,))
                req = prepare_search(query, scopes=("facts", "entities", "episodes", "communities"))
                hits = run_search_sync(conn, as_group, req, vector, dimension)  # pyright: ignore[reportArgumentType]
                # the big group's 1,000 people and 2,000 fact versions must not be read;
                # the episodes table (three rows) may be scanned whole
                read = conn.execute(
                    "SELECT relname, seq_tup_read FROM pg_stat_xact_user_tables"
                    " WHERE schemaname = 'timestone' AND seq_tup_read >= 100"
                ).fetchall()
        assert read == []
        found = {str(r["fact"]) for r in hits["facts"].rows.values() if r["vec_rank"] is not None}
        assert found == facts


def test_a_search_statement_is_prepared_at_its_first_use(fresh_dsn: str) -> None:
    # psycopg prepares a statement at its sixth execution on a connection: each of the
    # first five was planned again (the first ten searches of the 100k benchmark group
    # took 238 to 263 ms against 170 to 180, as of a moment 127 to 134 against 85 to 89)
    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts("g", [F("Ada", "KNOWS", "Grace")], reference_time=T2015)
        assert mem.search("g", "Who does Ada know?").facts
        db = mem._db  # pyright: ignore[reportPrivateUsage]
        size = db.pool.get_stats()["pool_size"]
        prepared: list[str] = []
        with contextlib.ExitStack() as stack:
            for _ in range(size):  # every connection of the pool, the search's among them
                conn = stack.enter_context(db.pool.connection())
                rows = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
                prepared += [str(r["statement"]) for r in rows]
    assert any("timestone.search_text" in s for s in prepared), prepared

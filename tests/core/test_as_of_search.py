"""Search as of a system time: the search the graph would have answered then.

The versions held at a moment T are the current ones created by T (in the HNSW
indexes, ranked through them, the creation time one more filter) and the
versions that ended after T (history rows, in no vector index: ranked exactly).
Here each moment of a history (a contradiction that closes a period, a
correction that expires a version, more facts, an episode removed) is searched
live, and searched again later with ``as_of``: the two must be the same hits
with the same scores, for each time filter; then the same history is searched
through the indexes (the bound under which a group is ranked exactly lowered)
and must give what the exact ranking gives, and so must a moment before most
of the group existed, where the indexes give too few, and versions ended after
the moment read by a scan past their bound. A moment when the group held fewer
current facts than the as-of bound is ranked exactly, counted by creation time.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg.rows import DictRow, dict_row

import timestone
from timestone import EdgeType, Ontology
from timestone import FactInput as F
from timestone.search import _ranked_lists_sql as lists_sql
from timestone.search import _run as ssearch
from timestone.search import _sql as search_sql
from timestone.search._request import prepare_search

LARGE = 8_000  # a group past the bound of exact ranking, in a table of thousands of rows

T2015 = datetime(2015, 1, 1, tzinfo=UTC)
T2023 = datetime(2023, 1, 1, tzinfo=UTC)
WHEN: list[datetime | None] = [
    None,
    datetime(2018, 1, 1, tzinfo=UTC),
    datetime(2031, 1, 1, tzinfo=UTC),
]
ONTOLOGY = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])
QUERIES = [
    "Where does Mira work?",
    "Which estate does Winemaker 4 work at?",
    "Gamay grape",
    "Mira",
    "zzzz qqqq",
]


def _shown(found: timestone.SearchResults) -> list[tuple[Any, ...]]:
    return [(f.version_id, f.fact, f.source, f.target, f.score) for f in found.facts]


def _searched(memory: timestone.Memory, group: str, **kw: Any) -> list[list[tuple[Any, ...]]]:
    return [_shown(memory.search(group, q, valid_at=w, **kw)) for q in QUERIES for w in WHEN]


def _history(memory: timestone.Memory, group: str, *, live: bool) -> list[tuple[datetime, Any]]:
    """Write the history; after each step, its moment (and the live searches if asked)."""
    steps: list[tuple[datetime, Any]] = []

    def moment() -> None:
        steps.append((datetime.now(UTC), _searched(memory, group) if live else None))

    memory.add_facts(
        group,
        [F("Mira", "WORKS_AT", "Château Nord"), F("Mira", "WORKS_WITH_GRAPE", "Gamay")]
        + [F(f"Winemaker {i}", "WORKS_AT", f"Estate {i % 7}") for i in range(12)],
        reference_time=T2015,
    )
    moment()
    memory.add_facts(  # a newer employer closes the period at Château Nord
        group,
        [F("Mira", "WORKS_AT", "Château Sud")]
        + [F(f"Winemaker {i}", "WORKS_AT", f"Estate {(i + 3) % 7}") for i in range(0, 12, 3)],
        reference_time=T2023,
    )
    moment()
    memory.add_facts(  # a correction: same world date, the old version expires
        group,
        [F("Mira", "WORKS_WITH_GRAPE", "Gamay", fact="Mira works with the Gamay grape daily.")],
        reference_time=T2015,
    )
    moment()
    later = memory.add_facts(
        group,
        [F(f"Grower {i}", "GROWS", "Gamay grape") for i in range(40)]
        + [F(f"Winemaker {i}", "WORKS_AT", f"Estate {i % 5}") for i in range(12, 40)],
        reference_time=T2023,
    )
    moment()
    memory.remove_episode(group, later.episode.id)
    moment()
    return steps


@pytest.fixture
def own_memory(fresh_dsn: str) -> Iterator[timestone.Memory]:
    """A database of its own (its HNSW indexes hold this test's rows only), where a
    newer employer closes the period at the last one."""
    mem = timestone.Memory.open(fresh_dsn, ontology=ONTOLOGY)
    yield mem
    mem.close()


def test_as_of_search_is_the_search_made_at_that_moment(
    own_memory: timestone.Memory, group: str
) -> None:
    steps = _history(own_memory, group, live=True)
    for at, then in steps:
        assert _searched(own_memory, group, as_of=at) == then, at
    searched = [then for _, then in steps]
    assert len({str(then) for then in searched[:4]}) == 4  # each write changed an answer
    assert searched[4] == searched[2]  # the removal gave back the graph before the episode
    assert all(any(rows) for rows in searched)


def test_as_of_search_through_the_indexes_ranks_what_the_exact_ranking_does(
    own_memory: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = _history(own_memory, group, live=False)
    exact = [_searched(own_memory, group, as_of=at) for at, _ in steps]
    monkeypatch.setattr(lists_sql, "EXACT_BELOW", 3)  # the group is ranked through the indexes
    monkeypatch.setattr(lists_sql, "AS_OF_EXACT_BELOW", 3)  # and so is what it held then
    monkeypatch.setattr(search_sql, "_STATEMENTS", {})  # composed again with the bound
    indexed = [_searched(own_memory, group, as_of=at) for at, _ in steps]
    assert indexed == exact
    # an index scan stopped after one tuple gives too few: the current versions created
    # by the moment are ranked by the scan instead, and the answer is the same
    starved = ssearch._SETTINGS.replace(  # pyright: ignore[reportPrivateUsage]
        "SELECT ", "SELECT set_config('hnsw.max_scan_tuples', '1', true), ", 1
    )
    monkeypatch.setattr(ssearch, "_SETTINGS", starved)
    assert [_searched(own_memory, group, as_of=at) for at, _ in steps] == exact
    assert all(any(rows) for rows in exact)  # every moment finds something


def test_as_of_search_past_the_bound_of_ended_versions_scans_them(
    own_memory: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From ``ENDED_EXACT_BELOW`` versions ended after the moment, the vector list and
    the facts around the walked entities read them by a scan: the same answers."""
    steps = _history(own_memory, group, live=False)
    exact = [_searched(own_memory, group, as_of=at) for at, _ in steps]
    monkeypatch.setattr(lists_sql, "ENDED_EXACT_BELOW", 1)
    for exact_below in (1000, 3):  # ranked exactly, and through the indexes
        monkeypatch.setattr(lists_sql, "EXACT_BELOW", exact_below)
        monkeypatch.setattr(lists_sql, "AS_OF_EXACT_BELOW", exact_below)
        monkeypatch.setattr(search_sql, "_STATEMENTS", {})
        assert [_searched(own_memory, group, as_of=at) for at, _ in steps] == exact


def test_a_moment_before_most_of_the_group_was_written_is_ranked_exactly(
    own_memory: timestone.Memory, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As of a moment when the group held fewer current facts than ``AS_OF_EXACT_BELOW``
    (those created by then, counted through ``facts_created``), they are ranked exactly
    whatever the group holds now, if those created since are four times as many: the
    search made then, with no HNSW scan filtered down to them. A count that reaches the
    bound, or a share too large, gives the group's horizon, and an as-of search of a
    later moment is not counted again. The growers' facts are corrected
    after the moment: their current versions, created later, keep the facts' older ids,
    so the facts held then are not the first current ones by id."""
    growers = [F(f"Grower {i}", "GROWS", "Gamay grape") for i in range(30)]
    own_memory.add_facts(group, growers, reference_time=T2015)
    own_memory.add_facts(
        group,
        [F(f"Winemaker {i}", "WORKS_AT", f"Estate {i % 7}") for i in range(14)],
        reference_time=T2015,
    )
    early = datetime.now(UTC)
    # As of a moment, facts keep the match of every word: the any-word fallback, counted
    # from the facts held then, costs too much (decision 035). The live search then, to
    # compare, without it.
    monkeypatch.setattr(lists_sql, "FALLBACK_BELOW", 0)
    monkeypatch.setattr(search_sql, "_STATEMENTS", {})
    then = _searched(own_memory, group)  # live, 44 facts: ranked exactly
    monkeypatch.setattr(lists_sql, "FALLBACK_BELOW", 1)
    corrected = [
        F(f.source, f.relation, f.target, fact=f"{f.source} grows Gamay on old vines.")
        for f in growers
    ]
    own_memory.add_facts(
        group,
        corrected + [F(f"Winemaker {i}", "WORKS_AT", f"Estate {i % 5}") for i in range(14, 40)],
        reference_time=T2015,
    )
    later = datetime.now(UTC)
    monkeypatch.setattr(lists_sql, "EXACT_BELOW", 3)  # today's group goes through the indexes
    # held early: 30 growers' versions since ended, 14 current; later 70 current
    monkeypatch.setattr(lists_sql, "AS_OF_EXACT_BELOW", 20)
    monkeypatch.setattr(search_sql, "_STATEMENTS", {})
    db = own_memory._db  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(db, "_horizons", {})
    monkeypatch.setattr(db, "_large", {})
    assert _searched(own_memory, group, as_of=early) == then
    assert db._horizons == {}  # pyright: ignore[reportPrivateUsage]  # counted: under the bound
    assert not db.held_many(group, early)
    _searched(own_memory, group, as_of=later)
    assert db.held_many(group, later)  # the count reached the bound: remembered
    assert not db.held_many(group, early)
    noted = db._horizons[group]  # pyright: ignore[reportPrivateUsage]
    assert early < noted[0] <= later
    _searched(own_memory, group, as_of=later)  # not counted: nothing noted again
    assert db._horizons[group] == noted  # pyright: ignore[reportPrivateUsage]
    # a bound above all 70: the 14 held early are still ranked exactly (56 created since,
    # four times as many), the 70 held later are not (none since), and from then on
    # no moment is counted again
    monkeypatch.setattr(lists_sql, "AS_OF_EXACT_BELOW", 100)
    monkeypatch.setattr(db, "_horizons", {})
    assert _searched(own_memory, group, as_of=early) == then
    assert db._horizons == {}  # pyright: ignore[reportPrivateUsage]
    _searched(own_memory, group, as_of=later)
    assert db.held_many(group, later)
    assert not db.held_many(group, early)


def _plans(dsn: str, group: str, req: Any, vector: list[float]) -> list[str]:
    """The plans of the statements a search runs, as executed (``auto_explain``)."""
    plans: list[str] = []
    with psycopg.Connection[DictRow].connect(dsn, row_factory=dict_row, autocommit=True) as conn:
        register_vector(conn)
        conn.add_notice_handler(lambda n: plans.append(str(n.message_primary)))
        conn.execute("LOAD 'auto_explain'")
        conn.execute("SET auto_explain.log_min_duration = 0")
        conn.execute("SET auto_explain.log_nested_statements = on")
        conn.execute("SET auto_explain.log_level = notice")
        conn.execute("SET ROLE timestone_app")
        ssearch.run_search(conn, group, req, vector, len(vector))
    return plans


def test_an_as_of_search_of_a_large_group_reads_the_vector_index(
    own_memory: timestone.Memory, group: str
) -> None:
    """A generic plan does not know the moment, counts a third of the rows as created by
    it, and in a table of some thousands of rows found sorting the group's rows by the
    keyed distance cheaper than the index: 36 ms a search at 10k facts. Seq scans are off
    for an as-of search, and its vector list reads the HNSW index."""
    facts = [F(f"Person {i:04d}", "WORKS_AT", f"Estate {i % 40:02d}") for i in range(LARGE)]
    with own_memory.bulk_load():
        for start in range(0, LARGE, 2_000):
            own_memory.add_facts(group, facts[start : start + 2_000], reference_time=T2015)
    with psycopg.connect(own_memory.dsn) as conn:
        conn.execute("ANALYZE timestone.facts")
    question = "Where does Person 0042 work?"
    vector = own_memory.embedder.embed([question])[0]
    req = prepare_search(question, limit=10, as_of=datetime.now(UTC))
    [facts_plan] = [p for p in _plans(own_memory.dsn, group, req, vector) if "vec AS" in p]
    assert "Index Scan using facts_embedding_hnsw" in facts_plan
    assert "Seq Scan on facts" not in facts_plan
    found = own_memory.search(group, question, limit=3, as_of=datetime.now(UTC)).facts
    assert found[0].fact == "Person 0042 works at Estate 02."


def test_a_hub_as_of_a_moment_long_past_keeps_its_newest_facts_then(
    own_memory: timestone.Memory, group: str
) -> None:
    """As of a moment before most of the group was written, an entity one hop out is read
    in creation order (its rows created by then, not the thousands since): the facts it
    keeps are still the newest in world time of those it held then, as the search made
    then kept them, and the hits are the same. The hub holds more facts than a hop keeps
    (``HOP_FACTS_CAP``), created in an order their world dates do not follow; more
    people join it after the moment, the world dates of their jobs after every earlier
    one's."""
    dates = [datetime(1990 + (i * 37) % 30, 1 + i % 12, 1, tzinfo=UTC) for i in range(70)]
    for i, when in enumerate(dates):
        own_memory.add_facts(
            group,
            [F(f"Cellar Hand {i}", "WORKS_AT", "Estate Hub", valid_at=when)],
            reference_time=when,
        )
    moment = datetime.now(UTC)
    asked = ["Which estate does Cellar Hand 7 work at?", "Cellar Hand 7"]
    then = [_shown(own_memory.search(group, q, limit=60, valid_at=None)) for q in asked]
    later = datetime(2030, 1, 1, tzinfo=UTC)
    for start in range(0, 400, 100):
        own_memory.add_facts(
            group,
            [F(f"Picker {i}", "WORKS_AT", "Estate Hub") for i in range(start, start + 100)],
            reference_time=later,
        )
    found = [
        _shown(own_memory.search(group, q, limit=60, valid_at=None, as_of=moment)) for q in asked
    ]
    assert found == then
    assert any(len(hits) > 10 for hits in then)  # the hub's facts are among the hits

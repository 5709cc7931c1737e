"""Communities when the model fails, and builds that stay exact as they get faster.

A failing naming call leaves the extractive names: the repair that follows a committed
write (``remove_episode``, ``purge_episode``, ``communities="auto"``) still rebuilds the
communities and the write still returns. A build reads each fact once per build, not
once per community, and finds an unchanged community by its members, not by a scan:
what it writes is what the one-community-at-a-time rule gives.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg.conninfo import make_conninfo
from test_communities import ENGINE, T2015, WINE, _members  # pyright: ignore[reportPrivateUsage]

import timestone
from timestone import FactInput as F
from timestone.graph._communities_async import (
    _describe,  # pyright: ignore[reportPrivateUsage]
    _internal,  # pyright: ignore[reportPrivateUsage]
    _Reuse,  # pyright: ignore[reportPrivateUsage]
    propagate_labels,
)
from timestone.llm import ReplayTransport, chat_completion, replay_llm

T2016 = datetime(2016, 1, 1, tzinfo=UTC)
# an episode that brings Zed into the wine community (two facts into it)
ZED = [F("Mira", "KNOWS", "Zed"), F("Gamay", "KNOWS", "Zed")]

NAMED = chat_completion(
    {
        "communities": [
            {"index": 0, "name": "Group zero", "summary": "The first group."},
            {"index": 1, "name": "Group one", "summary": "The second group."},
        ]
    }
)
RETRIES = 1
# the model server failing past the client's retries: one naming call fails
DOWN = [
    {"status": 500, "body": {"error": {"message": "upstream failed", "type": "server_error"}}}
] * (1 + RETRIES)


def _llm(transport: ReplayTransport) -> timestone.llm.LLM:
    return replay_llm(transport, backoff=0.0, max_retries=RETRIES)


def _current(dsn: str, group: str) -> list[tuple[str, list[str], str, str]]:
    """The group's current communities: id, member names, name and summary."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.id::text, c.name, c.summary, ARRAY(SELECT e.name"
            "  FROM timestone.entities AS e WHERE e.group_id = c.group_id"
            "  AND e.expired_at IS NULL AND e.id = ANY(c.members) ORDER BY e.name) AS names,"
            " cardinality(c.members) AS n"
            " FROM timestone.communities AS c WHERE c.group_id = %s AND c.expired_at IS NULL"
            " ORDER BY names",
            (group,),
        ).fetchall()
    out: list[tuple[str, list[str], str, str]] = []
    for ident, name, summary, names, n in rows:
        assert len(names) == n, f"community {name!r} lists a member that is not current"
        out.append((ident, list(names), name, summary))
    return out


def _warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "timestone"
        and r.levelno == logging.WARNING
        and "communities" in r.getMessage()
    ]


WINE_NAMES = ["Beaujolais", "Château Nord", "Gamay", "Mira"]
ENGINE_NAMES = ["Ada", "Babbage", "Engine", "Notes"]


def test_removal_repairs_communities_when_the_model_fails(
    dsn: str, group: str, caplog: pytest.LogCaptureFixture
) -> None:
    transport = ReplayTransport([NAMED, *DOWN])
    with timestone.Memory.open(dsn, llm=_llm(transport), infer_cardinality=False) as mem:
        mem.add_facts(group, WINE + ENGINE, reference_time=T2015)
        zed = mem.add_facts(group, ZED, reference_time=T2015)
        assert mem.build_communities(group).created == 2
        assert sorted(c[1] for c in _current(dsn, group)) == [ENGINE_NAMES, [*WINE_NAMES, "Zed"]]
        with caplog.at_level(logging.WARNING, logger="timestone"):
            report = mem.remove_episode(group, zed.episode.id)  # returns: the removal stands
        assert report.facts_expired == 2
        assert mem.get_entity(group, "Zed") is None
        current = _current(dsn, group)  # no community lists Zed any more
        assert [c[1] for c in current] == [ENGINE_NAMES, WINE_NAMES]
        wine = current[1]
        assert "Group" not in wine[2]  # extractive: named after its members
        assert "Mira" in wine[2]
        assert "Mira directs Château Nord." in wine[3]
        [warning] = _warned(caplog)
        assert "keep their extractive names" in warning
        assert "500" in warning
        transport.check()


def test_purge_rebuilds_communities_when_the_model_fails(
    dsn: str, group: str, caplog: pytest.LogCaptureFixture
) -> None:
    transport = ReplayTransport([NAMED, *DOWN])
    with timestone.Memory.open(dsn, llm=_llm(transport), infer_cardinality=False) as mem:
        mem.add_facts(group, WINE + ENGINE, reference_time=T2015)
        zed = mem.add_facts(group, ZED, reference_time=T2015)
        mem.build_communities(group)
        with caplog.at_level(logging.WARNING, logger="timestone"):
            erased = mem.purge_episode(group, zed.episode.id)
        assert erased > 0
        assert mem.episodes(group, ids=[zed.episode.id]) == []
        # the community that held Zed was erased and is rebuilt; the other one stays
        current = _current(dsn, group)
        assert [c[1] for c in current] == [ENGINE_NAMES, WINE_NAMES]
        assert current[0][2].startswith("Group")  # the model's name, unchanged
        assert "Mira" in current[1][2]  # rebuilt, with its extractive name
        assert len(_warned(caplog)) == 1
        transport.check()


def test_auto_mode_write_returns_when_the_model_fails(
    dsn: str, group: str, caplog: pytest.LogCaptureFixture
) -> None:
    transport = ReplayTransport(DOWN)
    with timestone.Memory.open(
        dsn, llm=_llm(transport), infer_cardinality=False, communities="auto"
    ) as mem:
        with caplog.at_level(logging.WARNING, logger="timestone"):
            first = mem.add_facts(group, ENGINE, reference_time=T2015)
            again = mem.add_facts(group, ENGINE, reference_time=T2015)  # a no-op retry
        assert (first.created, len(first.facts)) == (True, 5)
        assert again.created is False
        [(_, members, name, summary)] = _current(dsn, group)
        assert members == ENGINE_NAMES
        assert "Ada" in name
        assert "Babbage built Engine." in summary
        assert len(_warned(caplog)) == 1  # the retry changed nothing: no call, no warning
        found = mem.search(group, "Ada Babbage", scopes=("communities",))
        assert [c.name for c in found.communities] == [name]
        transport.check()


def test_malformed_answers_count_and_leave_extractive_names(
    dsn: str, group: str, caplog: pytest.LogCaptureFixture
) -> None:
    broken = chat_completion("not json", prompt_tokens=30, completion_tokens=2)
    transport = ReplayTransport([broken] * 3)  # the first answer and both re-asks
    with timestone.Memory.open(dsn, llm=_llm(transport), infer_cardinality=False) as mem:
        mem.add_facts(group, ENGINE, reference_time=T2015)
        with caplog.at_level(logging.WARNING, logger="timestone"):
            report = mem.build_communities(group)
        assert (report.communities, report.created) == (1, 1)
        assert "malformed output" in _warned(caplog)[0]
        assert mem.llm_usage(group).calls == 3  # what the failed call spent still counts
        transport.check()


def test_spent_budget_builds_with_extractive_names(
    dsn: str, group: str, caplog: pytest.LogCaptureFixture
) -> None:
    transport = ReplayTransport([])  # no call may be made
    with timestone.Memory.open(dsn, llm=_llm(transport), infer_cardinality=False) as mem:
        mem.set_llm_budget(group, max_calls=0)
        mem.add_facts(group, WINE, reference_time=T2015)
        with caplog.at_level(logging.WARNING, logger="timestone"):
            assert mem.build_communities(group).created == 1
        assert "budget" in _warned(caplog)[0]
        assert transport.requests == []
        transport.check()


# -- exact as before: the one-community-at-a-time rule, stated plainly ---------------------


def _reference_reuse(
    members: Sequence[uuid.UUID], current: Sequence[Mapping[str, Any]], taken: set[uuid.UUID]
) -> uuid.UUID | None:
    """The old community sharing most members (at least half; a tie: the later), read by
    a scan of every old community; None for a new id."""
    mine = set(members)
    best, best_share = None, 0.5
    for r in current:
        if r["id"] in taken:
            continue
        theirs = set(r["members"])
        share = len(mine & theirs) / len(mine | theirs)
        if share >= best_share:
            best, best_share = r["id"], share
    return best


NODES = [uuid.UUID(int=i) for i in range(12)]
node = st.sampled_from(NODES)


@settings(max_examples=200, deadline=None)
@given(
    olds=st.lists(st.sets(node, min_size=1, max_size=6), max_size=8),
    news=st.lists(st.sets(node, min_size=2, max_size=6), max_size=8),
)
def test_reuse_by_member_index_equals_the_scan(
    olds: list[set[uuid.UUID]], news: list[set[uuid.UUID]]
) -> None:
    olds_ids = [uuid.UUID(int=1000 + i) for i in range(len(olds))]
    current: list[dict[str, Any]] = [
        {"id": ident, "members": sorted(m)} for ident, m in zip(olds_ids, olds, strict=True)
    ]
    reuse = _Reuse(current)
    taken: set[uuid.UUID] = set()
    for members in news:
        expected = _reference_reuse(sorted(members), current, taken)
        got = reuse(sorted(members))
        if expected is None:
            assert got not in olds_ids
        else:
            assert got == expected
        taken.add(got)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(node, node), max_size=40))
def test_facts_bucketed_by_community_equal_the_scan(
    pairs: list[tuple[uuid.UUID, uuid.UUID]],
) -> None:
    edges = [(s, t, f"fact {i}.") for i, (s, t) in enumerate(pairs)]
    labels = propagate_labels((s, t) for s, t, _ in edges)
    groups: dict[Any, list[uuid.UUID]] = defaultdict(list)
    for n, lab in labels.items():
        groups[lab].append(n)
    internal = _internal(labels, edges)
    for lab, members in groups.items():
        inside = set(members)
        assert internal.get(lab, []) == [e for e in edges if e[0] in inside and e[1] in inside]
        assert _describe(members, internal[lab], {}) == _describe(members, edges, {})


def _mid_size() -> Iterator[F]:
    """120 triangles, some joined by a bridge, and 12 cliques of five with a spoke held by
    two facts: about a hundred communities."""
    for i in range(120):
        a, b, c = f"t{i}a", f"t{i}b", f"t{i}c"
        yield from (F(a, "KNOWS", b), F(b, "KNOWS", c), F(a, "KNOWS", c))
    for k in range(12):
        ring = [f"k{k}m{j}" for j in range(5)]
        yield from (F(x, "WORKS_WITH", y) for i, x in enumerate(ring) for y in ring[i + 1 :])
        yield F(ring[0], "MENTORS", f"k{k}spoke")
        yield F(ring[1], "MENTORS", f"k{k}spoke")
    for i in range(0, 118, 3):
        yield F(f"t{i}a", "MET", f"t{i + 1}a")


def _expected(dsn: str, group: str) -> list[tuple[list[str], str, str, int]]:
    """The communities the rule gives for the group's current facts, each described by a
    scan of every fact (as a build once did)."""
    with psycopg.connect(dsn) as conn:
        edges: list[tuple[uuid.UUID, uuid.UUID, str]] = conn.execute(
            "SELECT source_id, target_id, fact FROM timestone.facts WHERE group_id = %s"
            " AND expired_at IS NULL AND valid_at <= now()"
            " AND (invalid_at IS NULL OR invalid_at > now())",
            (group,),
        ).fetchall()
        names: dict[uuid.UUID, str] = dict(
            conn.execute(
                "SELECT id, name FROM timestone.entities WHERE group_id = %s"
                " AND expired_at IS NULL",
                (group,),
            ).fetchall()
        )
    labels = propagate_labels((s, t) for s, t, _ in edges)
    groups: dict[Any, list[uuid.UUID]] = defaultdict(list)
    for n, lab in labels.items():
        groups[lab].append(n)
    out: list[tuple[list[str], str, str, int]] = []
    for members in groups.values():
        if len(members) >= 2:
            ordered = sorted(members, key=str)
            name, summary, count = _describe(ordered, edges, names)
            out.append((sorted(names[m] for m in members), name, summary, count))
    return sorted(out)


def _held(
    dsn: str, group: str
) -> tuple[list[tuple[list[str], str, str, int]], int, dict[str, str]]:
    """The current communities (member names, name, summary, fact count), the number of
    versions ever written, and each current community's id by its first member."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.id::text, c.name, c.summary, c.fact_count, ARRAY(SELECT e.name"
            "  FROM timestone.entities AS e WHERE e.group_id = c.group_id"
            "  AND e.expired_at IS NULL AND e.id = ANY(c.members) ORDER BY e.name)"
            " FROM timestone.communities AS c WHERE c.group_id = %s AND c.expired_at IS NULL",
            (group,),
        ).fetchall()
        versions = conn.execute(
            "SELECT count(*) FROM timestone.communities WHERE group_id = %s", (group,)
        ).fetchone()
    assert versions is not None
    held = sorted((list(m), name, summary, n) for _, name, summary, n, m in rows)
    return held, int(versions[0]), {m[0]: ident for ident, _, _, _, m in rows}


def test_builds_on_a_mid_size_graph_equal_the_rule(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    memory.add_facts(group, list(_mid_size()), reference_time=T2015)
    first = memory.build_communities(group)
    held, versions, ids = _held(dsn, group)
    assert held == _expected(dsn, group)
    count = len(held)
    assert count > 80  # the triangles a bridge joins, or not (by the order of the ids)
    assert versions == first.created == first.communities == count

    again = memory.build_communities(group)  # nothing changed: nothing written
    assert (again.created, again.expired, again.communities) == (0, 0, count)
    assert _held(dsn, group) == (held, versions, ids)

    # a triangle grows a member, a clique loses its spoke's support
    memory.add_facts(
        group,
        [F("t5a", "KNOWS", "t5d"), F("t5b", "KNOWS", "t5d"), F("t5c", "KNOWS", "t5d")],
        reference_time=T2016,
    )
    memory.add_facts(
        group,
        [F("k3m1", "MENTORS", "k3spoke", valid_at=T2015, invalid_at=T2016)],
        reference_time=T2016,
    )
    updated = memory.update_communities(group)
    assert (updated.created, updated.expired) == (2, 2)
    after, versions_after, ids_after = _held(dsn, group)
    assert after == _expected(dsn, group)
    assert versions_after == versions + 2
    # the changed communities keep their ids; the others are the same versions
    assert ids_after == ids
    rebuilt = memory.build_communities(group)
    assert (rebuilt.created, rebuilt.expired) == (0, 0)
    assert _held(dsn, group) == (after, versions_after, ids_after)


def _holding_the_communities(dsn: str, group: str) -> psycopg.Connection[Any]:
    """A connection in a transaction that holds the group's communities lock (the lock
    every community write takes): a repair that waits on it meets its statement timeout."""
    conn = psycopg.connect(dsn)
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s || chr(31) || %s, 0))",
        ("timestone-key\x1f" + group, "communities"),
    )
    return conn


def test_a_write_stands_when_the_communities_repair_after_it_fails(
    dsn: str, group: str, caplog: pytest.LogCaptureFixture
) -> None:
    impatient = make_conninfo(dsn, options="-c statement_timeout=300")
    with timestone.Memory.open(impatient, communities="auto", warm=False) as mem:
        mem.add_facts(group, WINE, reference_time=T2015)
        assert _members(mem, group) == [WINE_NAMES]
        holder = _holding_the_communities(dsn, group)
        try:
            with caplog.at_level(logging.WARNING, logger="timestone"):
                zed = mem.add_facts(group, ZED, reference_time=T2016)  # returns: it stands
                report = mem.remove_episode(group, zed.episode.id)
                erased = mem.purge_episode(group, zed.episode.id)
        finally:
            holder.close()
        assert zed.created
        assert [f.fact for f in zed.facts] == [
            "Mira knows Zed.",
            "Gamay knows Zed.",
        ]
        assert report.facts_expired == 2
        assert erased > 0
        warned = _warned(caplog)
        assert [w.split(";")[0] for w in warned] == [
            f"group {group!r}: the write committed",
            f"group {group!r}: the removal committed",
            f"group {group!r}: the purge committed",
        ]
        assert all("update_communities(group) catches up" in w for w in warned)
        assert all("statement timeout" in w for w in warned)
        mem.update_communities(group)
        assert _members(mem, group) == [WINE_NAMES]

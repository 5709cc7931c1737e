"""Upgrading a database an earlier version wrote: its relation names take the normal form.

An earlier version stored an identifier-shaped relation name as it was given (``directs``,
``Directs``, ``worksAt``). The database is built here at the schema before the migration
that renames them; the rows the earlier version wrote are made by writing through the
library and then spelling the rows as it stored them, by SQL as the schema owner (the
library now writes the normal form only). Opening it with every migration upgrades it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import random
import uuid
from collections.abc import Generator
from datetime import UTC, datetime

import psycopg
import pytest
from llama_index.core.graph_stores.types import Relation
from llama_index.core.schema import TextNode
from llama_index.graph_stores.timestone import TimestonePropertyGraphStore

import timestone
from timestone import EdgeType, FactInput, GraphChunk, GraphRelation, Ontology
from timestone._names import stored_relation
from timestone._records import check_relation
from timestone.db import _database as sync_db
from timestone.db import _functions as sync_functions
from timestone.errors import DatabaseError, InvalidInput
from timestone.extract._cardinality import Cardinalities

_OURS = next(m for m in sync_db.MIGRATIONS if m[1].endswith("_relation_names_normal_form.sql"))
_BEFORE = [m for m in sync_db.MIGRATIONS if m[0] < _OURS[0]]
ONE = Ontology(edge_types=[EdgeType("WORKS_AT", cardinality="one")])


def _y(year: int) -> datetime:
    return datetime(year, 1, 1, tzinfo=UTC)


def _no_answers(*_: object) -> dict[str, str]:
    return {}


@contextlib.contextmanager
def _earlier(dsn: str, ontology: Ontology | None = None) -> Generator[timestone.Memory]:
    """A memory on ``dsn`` migrated to the schema before the renaming migration only."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sync_db, "MIGRATIONS", _BEFORE)
        patch.setattr(sync_db, "SCHEMA_VERSION", _BEFORE[-1][0])
        # the function files are the current schema's: an earlier one has its migrations'
        patch.setattr(sync_functions, "FUNCTIONS", ())
        mem = timestone.Memory.open(dsn, ontology=ontology)
    # nor the column of the texts an item was embedded from (a later migration, which adds
    # it only where it is missing): added here for the writes of this version's library
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE timestone.items ADD COLUMN IF NOT EXISTS index_texts text[]")
    # that schema has no table of answered relation cardinalities (a later migration): a
    # write of that version read none
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Cardinalities, "read", _no_answers)
        try:
            yield mem
        finally:
            mem.close()


def _version(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT value FROM timestone.meta WHERE key = 'schema_version'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _link_key(source: str, relation: str, target: str) -> str:
    return hashlib.sha256("\x1f".join((source, relation, target)).encode()).hexdigest()


def _respell(dsn: str, group: str, episode: uuid.UUID, normal: str, old: str) -> None:
    """Spell the rows ``episode`` wrote under ``normal`` (assertions, and every version of
    the facts they made) as the earlier version stored them: ``old``."""
    with psycopg.connect(dsn) as conn:
        cur = conn.execute(
            "UPDATE timestone.assertions SET relation = %s"
            " WHERE group_id = %s AND episode_id = %s AND relation = %s RETURNING id",
            (old, group, episode, normal),
        )
        ids = [row[0] for row in cur.fetchall()]
        assert ids
        conn.execute(
            "UPDATE timestone.facts SET relation = %s"
            " WHERE group_id = %s AND relation = %s AND (id = ANY(%s) OR %s = ANY(episodes))",
            (old, group, normal, ids, episode),
        )


def _respell_links(dsn: str, group: str, normal: str, old: str) -> None:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT version_id, value FROM timestone.items WHERE group_id = %s"
            " AND namespace = '{graph,links}' AND value ->> 'relation' = %s",
            (group, normal),
        ).fetchall()
        assert rows
        for version_id, value in rows:
            value["relation"] = old
            conn.execute(
                "UPDATE timestone.items SET value = %s, key = %s"
                " WHERE group_id = %s AND version_id = %s",
                (
                    json.dumps(value),
                    _link_key(value["source"], old, value["target"]),
                    group,
                    version_id,
                ),
            )


# -- the normal form in SQL is the library's ----------------------------------------------

CASES = [
    "worksAt", "WORKSat", "WorksAt", "HTTPServer", "a_b", "Directs", "directs", "DIRECTS",
    "__x__", "x__y", "hasIPv6", "has2Things", "a1B", "r2d2", "R2D2", "WORKS_AT", "x", "_x",
    "_2nd", "___", "_", "2nd", "", "works at", "located-in", "Äb", "ab\x00", "A" * 128,
    "A" * 129, "aB" * 64, "aB" * 63 + "c",
]  # fmt: skip


def _python(name: str) -> str | None:
    try:
        return check_relation(name)
    except InvalidInput:
        return None


def test_the_sql_normal_form_is_the_librarys(memory: timestone.Memory, dsn: str) -> None:
    del memory  # opened so that the schema is migrated
    draw = random.Random(32)
    alphabet = "aZbY09_"
    drawn = [
        "".join(draw.choice(alphabet) for _ in range(draw.randint(1, 12))) for _ in range(2000)
    ]
    names = [*CASES, *drawn]
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT n, timestone.normal_relation(n) FROM unnest(%s::text[]) AS n",
            ([n.replace("\x00", "") for n in names],),
        ).fetchall()
    got = dict(rows)
    for name in names:
        stored = name.replace("\x00", "")  # text holds no NUL: such a name was never stored
        if stored == name:
            assert got[stored] == _python(name), name
            assert (got[stored] or stored) == stored_relation(name), name
    assert got["worksAt"] == "WORKS_AT"
    assert got["WORKSat"] == "WORKSAT"
    assert got["HTTPServer"] == "HTTPSERVER"
    assert got["__x__"] == "X"
    assert got["has2Things"] == "HAS2_THINGS"
    assert got["_2nd"] is None
    assert got["aB" * 64] is None  # 192 characters once split


# -- an upgrade ------------------------------------------------------------------------


def test_an_upgrade_brings_every_stored_name_to_the_normal_form(fresh_dsn: str) -> None:
    group = "g-" + uuid.uuid4().hex[:8]
    chunk = f"{group}-c1"
    with _earlier(fresh_dsn, ONE) as mem:
        # a cardinality-many relation said under two spellings: two slots then
        said: list[uuid.UUID] = []
        for i, spelling in enumerate(("directs", "Directs")):
            result = mem.add_facts(
                group,
                [{"source": "Mira", "relation": "DIRECTS", "target": "Château Sud"}],
                reference_time=_y(2020 + i),
                idempotency_key=f"directs {i}",
            )
            _respell(fresh_dsn, group, result.episode.id, "DIRECTS", spelling)
            said.append(result.episode.id)
        # a cardinality-one timeline with history: the first period was open, then closed
        for year, place in ((2015, "Nord"), (2019, "Sud")):
            mem.add_facts(
                group,
                [{"source": "Mira", "relation": "WORKS_AT", "target": f"Château {place}"}],
                reference_time=_y(year),
            )
        with psycopg.connect(fresh_dsn) as conn:
            conn.execute(
                "UPDATE timestone.assertions SET relation = 'worksAt'"
                " WHERE group_id = %s AND relation = 'WORKS_AT'",
                (group,),
            )
            conn.execute(
                "UPDATE timestone.facts SET relation = 'worksAt'"
                " WHERE group_id = %s AND relation = 'WORKS_AT'",
                (group,),
            )
        # a name with no normal form stays as it was
        odd = mem.add_facts(
            group,
            [FactInput("Mira", "ODD", "Loire")],
            reference_time=_y(2020),
            idempotency_key="odd",
        )
        _respell(fresh_dsn, group, odd.episode.id, "ODD", "_2nd")
        # a link written twice under two spellings, each with its attributes
        mem.graph_upsert(
            group,
            chunks=[GraphChunk(chunk, "Mira directs Château Sud.")],
            relations=[GraphRelation(chunk, "MENTIONS", "Mira", {"a": 1, "b": 1})],
        )
        _respell_links(fresh_dsn, group, "MENTIONS", "mentions")
        mem.graph_upsert(group, relations=[GraphRelation(chunk, "MENTIONS", "Mira", {"b": 2})])
        _respell_links(fresh_dsn, group, "MENTIONS", "Mentions")
        # a LlamaIndex chunk and its link, and a relation between entities
        store = TimestonePropertyGraphStore(mem, group)
        node = TextNode(text="Mira met Ana at the harvest.")
        store.upsert_llama_nodes([node])
        store.upsert_relations(
            [
                Relation(label="MET", source_id=node.node_id, target_id="Mira"),
                Relation(label="KNOWS", source_id="Mira", target_id="Ana"),
            ]
        )
        _respell_links(fresh_dsn, group, "MET", "met")
        knows = mem.facts(group, relation="KNOWS")[0]
        _respell(fresh_dsn, group, knows.episodes[0], "KNOWS", "knowsWell")
        with psycopg.connect(fresh_dsn) as conn:
            conn.execute(
                "INSERT INTO timestone.meta (key, value) VALUES ('ontology', %s)",
                (
                    json.dumps(
                        {
                            "closed": False,
                            "entity_types": [],
                            "edge_types": [
                                {"name": n, "cardinality": "one", "description": ""}
                                for n in ("worksAt", "WorksAt", "knowsWell")
                            ],
                        }
                    ),
                ),
            )
        assert mem.facts(group, relation="DIRECTS") == []  # what a read missed before
        assert _version(fresh_dsn) == _BEFORE[-1][0]
        export = io.StringIO()
        mem.export_group(group, export)

    with timestone.Memory.open(fresh_dsn, ontology=ONE) as mem:
        assert _version(fresh_dsn) == sync_db.SCHEMA_VERSION
        with psycopg.connect(fresh_dsn) as conn:
            stored = conn.execute(
                "SELECT DISTINCT relation FROM timestone.facts WHERE group_id = %s"
                " UNION SELECT DISTINCT relation FROM timestone.assertions WHERE group_id = %s",
                (group, group),
            ).fetchall()
            onto = conn.execute("SELECT value FROM timestone.meta WHERE key = 'ontology'")
            row = onto.fetchone()
            assert row is not None
            edge_types: list[dict[str, object]] = row[0]["edge_types"]
            links = conn.execute(
                "SELECT key, value, expired_at IS NULL FROM timestone.items"
                " WHERE group_id = %s AND namespace = '{graph,links}'",
                (group,),
            ).fetchall()
            gone = conn.execute(
                "SELECT to_regprocedure('timestone.graph_ids_elsewhere(text[])'),"
                " to_regclass('timestone.items_graph_chunk_key')"
            ).fetchone()
        assert {r[0] for r in stored} == {"DIRECTS", "WORKS_AT", "KNOWS_WELL", "_2nd"}
        assert [e["name"] for e in edge_types] == ["WORKS_AT", "KNOWS_WELL"]
        assert gone == (None, None)
        # every link version is keyed by its normal name; the two spellings merged
        for key, value, _ in links:
            assert value["relation"] in ("MENTIONS", "MET")
            assert key == _link_key(value["source"], value["relation"], value["target"])
        current = [v for _, v, now in links if now and v["relation"] == "MENTIONS"]
        assert [v["attributes"] for v in current] == [{"a": 1, "b": 2}]

        # facts(), timeline(), search(edge_types=...) read them under the normal name
        directs = mem.facts(group, relation="directs")
        assert sorted((f.relation, tuple(f.episodes)) for f in directs) == sorted(
            [("DIRECTS", (said[0],)), ("DIRECTS", (said[1],))]
        )
        line = mem.timeline(group, "Mira", relation="worksAt")
        assert [(f.target, f.valid_at, f.invalid_at) for f in line] == [
            ("Château Nord", _y(2015), _y(2019)),
            ("Château Sud", _y(2019), None),
        ]
        history = mem.fact_history(group, "Mira")
        assert {f.relation for f in history if f.expired_at is not None} == {"WORKS_AT"}
        found = mem.search(group, "Mira Château Sud", edge_types=["Directs"], limit=10)
        assert {f.relation for f in found.facts} == {"DIRECTS"}
        assert {f.id for f in found.facts} == {f.id for f in directs}
        assert mem.facts(group, relation="knows_well")[0].target == "Ana"
        edges = mem.graph_edges(group, around=[chunk], relations=["mentions"])
        assert [(e.relation, e.attributes) for e in edges] == [("MENTIONS", {"a": 1, "b": 2})]

        # the LlamaIndex store reads the links and facts under the normal name
        store = TimestonePropertyGraphStore(mem, group)
        triplets = store.get_triplets(relation_names=["met", "KnowsWell"])
        assert {(r.source_id, r.label, r.target_id) for _, r, _ in triplets} == {
            (node.node_id, "MET", "Mira"),
            ("Mira", "KNOWS_WELL", "Ana"),
        }

        # a new write of an old spelling lands in the same slot
        mem.add_facts(group, [FactInput("Mira", "worksAt", "Château Est")], reference_time=_y(2023))
        line = mem.timeline(group, "Mira", relation="WORKS_AT")
        assert [(f.target, f.invalid_at) for f in line] == [
            ("Château Nord", _y(2019)),
            ("Château Sud", _y(2023)),
            ("Château Est", None),
        ]
        again = mem.add_facts(
            group, [FactInput("Mira", "directs", "Château Sud")], reference_time=_y(2022)
        )
        merged = mem.facts(group, relation="DIRECTS")
        assert [tuple(f.episodes) for f in merged] == [(*said, again.episode.id)]
        mem.graph_upsert(group, relations=[GraphRelation(chunk, "Mentions", "Mira", {"c": 3})])
        edges = mem.graph_edges(group, around=[chunk], relations=["MENTIONS"])
        assert [e.attributes for e in edges] == [{"a": 1, "b": 2, "c": 3}]

        # its export, written before, holds two current links that meet once renamed
        with pytest.raises(InvalidInput, match=r"two current items rows of it meet"):
            mem.import_group(export.getvalue().splitlines(), group_id=group + "-copy")
        assert mem.facts(group + "-copy") == []


def test_overlapping_cardinality_one_spellings_are_refused_with_the_way_out(
    fresh_dsn: str,
) -> None:
    group = "g-" + uuid.uuid4().hex[:8]
    with _earlier(fresh_dsn, ONE) as mem:
        first = mem.add_facts(
            group, [FactInput("Mira", "WORKS_AT", "Château Nord")], reference_time=_y(2015)
        )
        _respell(fresh_dsn, group, first.episode.id, "WORKS_AT", "worksAt")
        second = mem.add_facts(
            group, [FactInput("Mira", "WORKS_AT", "Château Sud")], reference_time=_y(2019)
        )
        mira = mem.get_entity(group, "Mira")
        assert mira is not None
        # two slots then: both open-ended
        assert [f.invalid_at for f in mem.facts(group)] == [None, None]
        export = io.StringIO()
        mem.export_group(group, export)

    with pytest.raises(DatabaseError) as refused:
        timestone.Memory.open(fresh_dsn, ontology=ONE)
    message = str(refused.value)
    for part in (
        f"in group '{group}'",
        f"slot (entity 'Mira' {mira.id}, relation WORKS_AT) would hold overlapping facts",
        f"spelled WORKS_AT (episodes {second.episode.id})",
        f"and worksAt (episodes {first.episode.id})",
        "1 overlapping pair(s)",
        "Nothing was changed",
        "remove_episode",
        "docs/upgrading.md",
    ):
        assert part in message, (part, message)
    assert _version(fresh_dsn) == _BEFORE[-1][0]
    with psycopg.connect(fresh_dsn) as conn:
        spellings = conn.execute(
            "SELECT relation, count(*) FROM timestone.facts GROUP BY relation ORDER BY 1"
        ).fetchall()
        held = conn.execute(
            "SELECT to_regprocedure('timestone.graph_ids_elsewhere(text[])') IS NOT NULL"
        ).fetchone()
    assert spellings == [("WORKS_AT", 1), ("worksAt", 1)]
    assert held == (True,)

    # the way out: with the version that wrote them, the episode of one spelling is
    # removed and added again under the normal name; the date fight settles the slot
    with _earlier(fresh_dsn, ONE) as mem:
        mem.remove_episode(group, first.episode.id)
        mem.add_facts(
            group, [FactInput("Mira", "WORKS_AT", "Château Nord")], reference_time=_y(2015)
        )
    with timestone.Memory.open(fresh_dsn, ontology=ONE) as mem:
        line = mem.timeline(group, "Mira", relation="worksAt")
        assert [(f.target, f.valid_at, f.invalid_at) for f in line] == [
            ("Château Nord", _y(2015), _y(2019)),
            ("Château Sud", _y(2019), None),
        ]
        history = mem.fact_history(group, "Mira")
        assert {f.relation for f in history} == {"WORKS_AT"}
        # an export written before meets the same overlap when imported: refused, nothing
        # written
        copy = group + "-copy"
        with pytest.raises(InvalidInput, match=r"two current facts rows of it meet in one slot"):
            mem.import_group(export.getvalue().splitlines(), group_id=copy)
        assert mem.facts(copy) == []
        assert mem.episodes(copy) == []


def test_the_refusal_names_no_slot_that_only_meets(fresh_dsn: str) -> None:
    """Cardinality-one facts of two spellings whose periods do not overlap are renamed:
    the constraint holds, and they are the periods the date fight gives."""
    group = "g-" + uuid.uuid4().hex[:8]
    with _earlier(fresh_dsn, ONE) as mem:
        first = mem.add_facts(
            group,
            [timestone.FactInput("Mira", "WORKS_AT", "Château Nord", invalid_at=_y(2019))],
            reference_time=_y(2015),
        )
        _respell(fresh_dsn, group, first.episode.id, "WORKS_AT", "WorksAt")
        mem.add_facts(
            group, [FactInput("Mira", "WORKS_AT", "Château Sud")], reference_time=_y(2019)
        )
        export = io.StringIO()
        mem.export_group(group, export)
    with timestone.Memory.open(fresh_dsn, ontology=ONE) as mem:
        line = mem.timeline(group, "Mira", relation="WORKS_AT")
        assert [(f.target, f.valid_at, f.invalid_at) for f in line] == [
            ("Château Nord", _y(2015), _y(2019)),
            ("Château Sud", _y(2019), None),
        ]
        # an export written before is renamed as it is imported
        copy = group + "-copy"
        mem.import_group(export.getvalue().splitlines(), group_id=copy)
        line = mem.timeline(copy, "Mira", relation="worksAt")
        assert [(f.target, f.valid_at, f.invalid_at) for f in line] == [
            ("Château Nord", _y(2015), _y(2019)),
            ("Château Sud", _y(2019), None),
        ]

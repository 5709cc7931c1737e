"""The schema's functions live in one current file each (repeatable migrations).

``timestone/migrations/functions/<name>.sql`` holds each function's current definition;
an open applies the files after the numbered migrations when their checksum (or the
schema version) differs from what ``timestone.meta`` records. Databases are built here
at earlier schema versions, with rows the library wrote then, and opened with every
migration and the current files: each ends with the files' definitions, the same as a
fresh database's, and searches and writes as the fresh one does.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Generator
from datetime import UTC, datetime
from typing import cast

import psycopg
import pytest

import timestone
from timestone import GraphChunk, GraphRelation
from timestone.db import _database as sync_db
from timestone.db import _functions as sync_functions
from timestone.db._distributed import run_script
from timestone.extract._cardinality import Cardinalities

FILES = sync_functions.FUNCTIONS
NAMES = {name for name, _ in FILES}
GROUP = "upgraded"

# Every function of the schema, as the catalog holds it: the text PostgreSQL gives back,
# who may call it, and the settings and attributes it runs with.
_DEFINITIONS = """
SELECT p.oid::regprocedure::text AS signature, pg_catalog.pg_get_functiondef(p.oid) AS text,
       p.prosrc AS body, p.prosqlbody IS NOT NULL AS standard_body,
       coalesce(p.proacl::text[], '{}') AS acl, p.prosecdef AS definer,
       coalesce(p.proconfig, '{}') AS config,
       pg_catalog.pg_get_userbyid(p.proowner) = current_user AS owned
FROM pg_catalog.pg_proc AS p
WHERE p.pronamespace = 'timestone'::pg_catalog.regnamespace
ORDER BY 1
"""


def _definitions(conn: psycopg.Connection[tuple[object, ...]]) -> dict[str, tuple[object, ...]]:
    return {str(row[0]): tuple(row[1:]) for row in conn.execute(_DEFINITIONS).fetchall()}


def _catalog(dsn: str) -> dict[str, tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return _definitions(conn)


def _name(signature: str) -> str:
    return signature.removeprefix("timestone.").split("(", 1)[0]


def _stamp(dsn: str) -> object:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT value FROM timestone.meta WHERE key = 'functions'").fetchone()
    return None if row is None else row[0]


def _holds_the_files(dsn: str) -> None:
    """The catalog holds exactly what the files define: applying them again changes no
    definition, grant or setting (tried in a transaction rolled back), and each
    function's body is its file's text."""
    with psycopg.connect(dsn) as conn:
        held = _definitions(conn)
        with conn.transaction(force_rollback=True):
            for _, text in FILES:
                run_script(conn, text, False)  # pyright: ignore[reportArgumentType]
            again = _definitions(conn)
    assert again == held
    assert {_name(signature) for signature in held} == NAMES  # one file each, no more
    for signature, (_, body, standard, *_rest) in held.items():
        text = dict(FILES)[_name(signature)].decode()
        if not standard:  # a body in quotes is kept as written
            assert str(body) in text, signature


def _no_answers(*_: object) -> dict[str, str]:
    return {}


@contextlib.contextmanager
def _at(version: int) -> Generator[None]:
    """This library as one built at schema ``version``: its migrations up to it, no
    function files (the files are the current schema's), and no table of answered
    relation cardinalities when it is older than that table."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sync_db, "MIGRATIONS", [m for m in sync_db.MIGRATIONS if m[0] <= version])
        patch.setattr(sync_db, "SCHEMA_VERSION", version)
        patch.setattr(sync_functions, "FUNCTIONS", ())
        patch.setattr(Cardinalities, "read", _no_answers)
        yield


@pytest.fixture(scope="module")
def reference(module_dsn: str) -> dict[str, tuple[object, ...]]:
    """The functions of a fresh database opened with the current code."""
    timestone.Memory.open(module_dsn).close()
    return _catalog(module_dsn)


# -- the files ---------------------------------------------------------------------------


def test_a_fresh_database_holds_the_files_definitions(
    reference: dict[str, tuple[object, ...]], module_dsn: str
) -> None:
    assert len(reference) == len(FILES) == 12
    _holds_the_files(module_dsn)
    for signature, (_, _, _, acl, definer, config, owned) in reference.items():
        assert owned, signature
        assert not any(a.startswith("=") for a in cast(list[str], acl)), signature  # PUBLIC
        if definer:
            assert "search_path=pg_catalog, public, pg_temp" in cast(list[str], config)
    stamp = _stamp(module_dsn)
    assert stamp == {
        "sha256": sync_functions.checksum(FILES),
        "schema_version": sync_db.SCHEMA_VERSION,
    }


def test_the_search_functions_are_one_file_each_with_their_history_named() -> None:
    # the two that were redefined most: each file names the migrations that defined it
    text = dict(FILES)["search_text"].decode()
    assert "0003, 0014, 0015, 0025, 0029, 0030, 0031, 0032" in text
    assert sync_functions.defined_functions(text) == {"search_text"}
    assert "0002, 0006, 0035" in dict(FILES)["similar_entities"].decode()
    for name, file_text in FILES:
        assert sync_functions.defined_functions(file_text.decode()) == {name}, name


def test_a_numbered_migration_after_the_cut_over_defines_no_function_that_has_a_file() -> None:
    """A function change edits its file: a numbered migration after 0037 that creates or
    replaces a function with a file fails here (migrations/functions/README.md)."""
    later = [m for m in sync_db.MIGRATIONS if m[0] > sync_functions.CUT_OVER]
    for _, name, text in later:
        assert not sync_functions.defined_functions(text.decode()) & NAMES, name
    # the check reads the definitions the migrations before the cut-over hold ...
    defined: dict[str, list[int]] = {}
    for number, _, text in sync_db.MIGRATIONS:
        if number <= sync_functions.CUT_OVER:
            for function in sync_functions.defined_functions(text.decode()):
                defined.setdefault(function, []).append(number)
    assert defined["search_text"] == [3, 14, 15, 25, 29, 30, 31, 32]
    assert defined["similar_entities"] == [2, 6, 35]
    # every file but those of functions added since, which no numbered migration defines
    added_since = {"known_names", "group_rows"}
    assert set(defined) == NAMES - added_since | {"graph_ids_elsewhere"}  # dropped by 0034
    # ... in any spelling, and not in a comment
    spelled = [
        "create or replace function timestone.search_terms(p text)",
        'CREATE FUNCTION "timestone".search_text (',
        "CREATE\n  OR REPLACE\n  FUNCTION timestone . uuid_v7()",
    ]
    assert [sync_functions.defined_functions(s) for s in spelled] == [
        {"search_terms"},
        {"search_text"},
        {"uuid_v7"},
    ]
    assert sync_functions.defined_functions("-- CREATE FUNCTION timestone.search_text(") == set()
    assert sync_functions.defined_functions("CREATE FUNCTION pg_temp.helper()") == set()


# -- a changed file is applied at the next open, and only then ------------------------------


def _xmins(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT oid::regprocedure::text, xmin::text::bigint FROM pg_catalog.pg_proc"
            " WHERE pronamespace = 'timestone'::regnamespace"
        ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def test_a_changed_file_is_applied_at_the_next_open(
    fresh_dsn: str, reference: dict[str, tuple[object, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    timestone.Memory.open(fresh_dsn).close()
    written = _xmins(fresh_dsn)
    timestone.Memory.open(fresh_dsn).close()
    assert _xmins(fresh_dsn) == written  # the same files: nothing applied again

    original = dict(FILES)["normal_relation"]
    changed = original.replace(b"$fn$\n    SELECT", b"$fn$\n    -- edited in its file\n    SELECT")
    assert changed != original
    edited = tuple(f._replace(text=changed) if f.name == "normal_relation" else f for f in FILES)
    monkeypatch.setattr(sync_functions, "FUNCTIONS", edited)
    timestone.Memory.open(fresh_dsn).close()
    catalog = _catalog(fresh_dsn)
    assert "-- edited in its file" in str(catalog["timestone.normal_relation(text)"][1])
    stamp = _stamp(fresh_dsn)
    assert isinstance(stamp, dict)
    assert stamp["sha256"] == sync_functions.checksum(edited) != sync_functions.checksum(FILES)
    with psycopg.connect(fresh_dsn) as conn:  # and it is the function that runs
        row = conn.execute("SELECT timestone.normal_relation('worksAt')").fetchone()
    assert row == ("WORKS_AT",)

    monkeypatch.setattr(sync_functions, "FUNCTIONS", FILES)
    timestone.Memory.open(fresh_dsn).close()
    assert _catalog(fresh_dsn) == reference


def test_a_file_drops_the_overload_an_earlier_schema_had(
    fresh_dsn: str, reference: dict[str, tuple[object, ...]]
) -> None:
    timestone.Memory.open(fresh_dsn).close()
    # the similar_entities of migration 0002 (text[], integer), beside today's, as a
    # schema that had it; the files, applied again, drop it (and again: idempotent)
    first = next(text for number, _, text in sync_db.MIGRATIONS if number == 2)
    for _ in range(2):
        with psycopg.connect(fresh_dsn) as conn:
            conn.execute(first)
            conn.execute("DELETE FROM timestone.meta WHERE key = 'functions'")
        assert "timestone.similar_entities(text[],integer)" in _catalog(fresh_dsn)
        timestone.Memory.open(fresh_dsn).close()
        assert _catalog(fresh_dsn) == reference


# -- upgrades from earlier schemas ---------------------------------------------------------

# Schemas before and after the functions' main changes: 3 (search_text's first
# version, similar_entities of two arguments), 8, 14, 24, 31, 33, 36 (the last before the
# cut-over's own migration). The library writes documents from schema 3, facts from 8.
VERSIONS = [3, 8, 14, 24, 31, 36]


def _y(year: int) -> datetime:
    return datetime(year, 1, 1, tzinfo=UTC)


def _mira_works_at_heron(mem: timestone.Memory) -> None:
    mem.add_facts(
        GROUP,
        [{"source": "Mira", "relation": "WORKS_AT", "target": "Heron Labs"}],
        reference_time=_y(2020),
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_an_upgrade_ends_with_the_files_definitions_and_searches(
    fresh_dsn: str, reference: dict[str, tuple[object, ...]], version: int
) -> None:
    with _at(version):
        mem = timestone.Memory.open(fresh_dsn)
        try:
            mem.add_document(
                GROUP, "doc-1", "Mira moved to Lisbon to open a bakery.", reference_time=_y(2021)
            )
            if version >= 8:
                _mira_works_at_heron(mem)
        finally:
            mem.close()
        earlier = _catalog(fresh_dsn)
        assert _stamp(fresh_dsn) == {
            "sha256": sync_functions.checksum(()),
            "schema_version": version,
        }
    # every earlier schema has functions to change: note_terms.sql and search_text.sql
    # changed after the cut-over (decisions 023, 024), and the episodes' statistics count
    # words since migration 0038 (decision 025), so even 36, whose other functions are the
    # files', differs; known_names.sql and group_rows.sql are functions added since
    differs = {k for k in reference if earlier.get(k) != reference[k]}
    assert differs
    if version >= 36:
        assert differs == {
            "timestone.note_terms(text[],text[],tsvector[],integer[],integer[])",
            "timestone.count_episode_terms()",
            "timestone.search_terms(text,text[],timestamp with time zone,"
            "timestamp with time zone,text[],text[],integer)",
            "timestone.search_text(text,tsquery,timestamp with time zone,"
            "timestamp with time zone,text[],text[],integer)",
            "timestone.known_names(text[])",
            "timestone.group_rows(text)",
        }

    mem = timestone.Memory.open(fresh_dsn)
    try:
        with psycopg.connect(fresh_dsn) as conn:
            row = conn.execute(
                "SELECT value FROM timestone.meta WHERE key = 'schema_version'"
            ).fetchone()
        assert row is not None
        assert int(row[0]) == sync_db.SCHEMA_VERSION
        assert _catalog(fresh_dsn) == reference  # the same as a fresh database's
        _holds_the_files(fresh_dsn)

        found = mem.search(GROUP, "bakery in Lisbon", scopes=("episodes",), valid_at=None)
        assert [e.document_uri for e in found.episodes][:1] == ["doc-1"]
        if version >= 8:
            facts = mem.search(GROUP, "Mira Heron Labs")
            assert [(f.relation, f.target) for f in facts.facts][:1] == [("WORKS_AT", "Heron Labs")]
        # a write after the upgrade, found by the current functions
        mem.add_facts(
            GROUP,
            [{"source": "Mira", "relation": "OWNS", "target": "Harbour Bakery"}],
            reference_time=_y(2022),
        )
        owns = mem.search(GROUP, "harbour bakery", valid_at=None)
        assert ("OWNS", "Harbour Bakery") in [(f.relation, f.target) for f in owns.facts]
        entities = mem.search(GROUP, "Harbour Bakery", scopes=("entities",))
        assert "Harbour Bakery" in [e.name for e in entities.entities]
    finally:
        mem.close()
    # the term statistics the upgrade filled (0036) and the trigger functions keep
    with psycopg.connect(fresh_dsn) as conn:
        rows = conn.execute(
            "SELECT kind, sum(docs) FROM timestone.term_stats"
            " WHERE group_id = %s AND lexeme = '' GROUP BY kind",
            (GROUP,),
        ).fetchall()
    counted = {str(kind): int(docs) for kind, docs in rows}
    assert counted["episodes"] >= 2  # the document's chunk, and the facts' record
    assert counted["facts"] == (2 if version >= 8 else 1)


_SUMS = (
    "SELECT group_id, kind, lexeme, sum(docs)::bigint, sum(length)::bigint"
    " FROM timestone.term_stats GROUP BY 1, 2, 3 HAVING sum(docs) <> 0 OR sum(length) <> 0"
)


def test_an_upgrade_folds_each_lexemes_statistics_into_one_row(fresh_dsn: str) -> None:
    """Migration 0040: a schema-39 database's statistics, with the deltas writers that
    found the fold lock taken left beside a lexeme's row (one pair cancelling out),
    become one row a lexeme, id 0, with the same sums; the cancelled lexeme has none."""
    with _at(39):
        mem = timestone.Memory.open(fresh_dsn)
        try:
            _mira_works_at_heron(mem)
        finally:
            mem.close()
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO timestone.term_stats (group_id, kind, lexeme, docs, length)"
            " SELECT group_id, kind, lexeme, 1, 2 FROM timestone.term_stats"
            " UNION ALL VALUES (%(g)s, 'facts', 'ghost', 1, 1), (%(g)s, 'facts', 'ghost', -1, -1)",
            {"g": GROUP},
        )
        before = sorted(conn.execute(_SUMS).fetchall())
        several = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM timestone.term_stats"
            " GROUP BY group_id, kind, lexeme HAVING count(*) > 1) AS x"
        ).fetchone()
    assert several is not None
    assert cast(int, several[0]) > 10
    with _at(40):
        timestone.Memory.open(fresh_dsn).close()
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        assert sorted(conn.execute(_SUMS).fetchall()) == before
        ids = conn.execute("SELECT DISTINCT id FROM timestone.term_stats").fetchall()
        ghost = conn.execute(
            "SELECT count(*) FROM timestone.term_stats WHERE lexeme = 'ghost'"
        ).fetchone()
    assert ids == [(0,)]
    assert ghost == (0,)


_RECORD = (
    "SELECT array_to_string(tsvector_to_array(fts), ' '), fts_words FROM timestone.episodes"
    " WHERE group_id = %s AND source = 'facts'"
)
_EPISODE_SUMS = (
    "SELECT kind, lexeme, sum(docs)::bigint, sum(length)::bigint FROM timestone.term_stats"
    " WHERE group_id = %(g)s AND kind IN ('episodes', 'told episodes')"
    " GROUP BY kind, lexeme HAVING sum(docs) <> 0 OR sum(length) <> 0"
)


def test_an_upgrade_indexes_a_record_of_facts_by_what_its_facts_say(fresh_dsn: str) -> None:
    """Migration 0042: a schema-41 record of facts held its JSON's keys and dates as words;
    after the upgrade it holds its facts' words, and the statistics of both episode
    kinds are a recount of the current rows (0042 counts 'episodes' again, 0047 both:
    the told episodes' lengths in words, where the trigger of that schema counted
    lexemes)."""
    with _at(41):
        mem = timestone.Memory.open(fresh_dsn)
        try:
            _mira_works_at_heron(mem)
            mem.add_document(GROUP, "doc-1", "Mira moved to Lisbon.", reference_time=_y(2021))
        finally:
            mem.close()
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        record = conn.execute(_RECORD, (GROUP,)).fetchone()
    assert record is not None
    assert {"relat", "sourc", "target", "2020"} <= set(str(record[0]).split())
    timestone.Memory.open(fresh_dsn).close()
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        record = conn.execute(_RECORD, (GROUP,)).fetchone()
        sums = set(conn.execute(_EPISODE_SUMS, {"g": GROUP}).fetchall())
        recounted = set(conn.execute(_EPISODE_KINDS_RECOUNTED, {"g": GROUP}).fetchall())
    assert record == ("heron lab mira work", 4)  # Mira, WORKS_AT, Heron, Labs
    assert {r[0] for r in recounted} == {"episodes", "told episodes"}
    assert sums == recounted


# -- a data move after the cut-over runs no trigger function of an earlier schema ----------

_MOVES = re.compile(
    r"\b(UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+timestone\.(facts|entities|episodes|communities)\b",
    re.IGNORECASE,
)
_TRIGGER_OF = {"UPDATE": "update", "INSERT": "insert", "DELETE": "delete"}


def test_a_data_move_after_the_cut_over_turns_the_term_trigger_off() -> None:
    """An upgrade runs the numbered migrations before the current function files, so a
    row a later migration moves would fire the term trigger with whatever definition an
    earlier schema left: each such move turns that trigger off around itself (and the
    migration counts the statistics again)."""
    for number, name, text in sync_db.MIGRATIONS:
        if number <= sync_functions.CUT_OVER:
            continue
        script = re.sub(r"--[^\n]*", "", text.decode())
        for move in _MOVES.finditer(script):
            table = move.group(2).lower()
            trigger = f"{table}_terms_{_TRIGGER_OF[move.group(1).split()[0].upper()]}"
            before, after = script[: move.start()], script[move.end() :]
            off = before.rfind(f"ALTER TABLE timestone.{table} DISABLE TRIGGER {trigger};")
            on = before.rfind(f"ALTER TABLE timestone.{table} ENABLE TRIGGER {trigger};")
            assert off > on, (name, move.group(0))
            assert f"ALTER TABLE timestone.{table} ENABLE TRIGGER {trigger};" in after, name


_EPISODE_KINDS_RECOUNTED = (  # 'episodes' and 'told episodes' counted afresh from the rows
    "WITH r AS (SELECT 'episodes' AS kind, fts, fts_words FROM timestone.episodes"
    "  WHERE group_id = %(g)s AND expired_at IS NULL"
    " UNION ALL SELECT 'told episodes', fts, fts_words FROM timestone.episodes"
    "  WHERE group_id = %(g)s AND expired_at IS NULL AND source <> 'facts')"
    " SELECT r.kind, t.lexeme, count(*), 0"
    " FROM r, unnest(tsvector_to_array(r.fts)) AS t(lexeme) GROUP BY 1, 2"
    " UNION ALL SELECT r.kind, '', count(*), sum(r.fts_words) FROM r GROUP BY 1"
)
# a trigger function as an earlier schema left it, which does not fit this one's statistics
_EARLIER_TRIGGER = (
    "CREATE OR REPLACE FUNCTION timestone.count_episode_terms() RETURNS trigger"
    " LANGUAGE plpgsql AS $fn$BEGIN RAISE EXCEPTION 'an earlier schema''s definition'; END$fn$"
)
_GRAPH_RECORDS = (
    "SELECT source FROM timestone.episodes"
    " WHERE group_id = %s AND source_description = 'property graph store'"
)


def _graph_record_and_told_episode(dsn: str) -> None:
    mem = timestone.Memory.open(dsn)
    try:
        mem.graph_upsert(
            GROUP,
            chunks=[GraphChunk("chunk-1", "Ada met Bo in Lyon.")],
            relations=[
                GraphRelation("chunk-1", "MENTIONS", "Ada"),
                GraphRelation("Ada", "KNOWS", "Bo"),
            ],
        )
        _mira_works_at_heron(mem)
        mem.add_document(GROUP, "doc-1", "Mira moved to Lisbon.", reference_time=_y(2021))
    finally:
        mem.close()


def test_an_upgrade_moves_graph_records_whatever_trigger_an_earlier_schema_left(
    fresh_dsn: str, reference: dict[str, tuple[object, ...]]
) -> None:
    """Migration 0046 on a database whose episodes' trigger runs an earlier schema's
    function (an upgrade applies the current files only after the numbered migrations):
    the graph record becomes a record of facts, the open succeeds, and the statistics of
    both episode kinds are a recount of the rows (0047)."""
    _graph_record_and_told_episode(fresh_dsn)
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        # the record as schema 45 stored it (a told episode, counted as one)
        conn.execute(
            "UPDATE timestone.episodes SET source = 'json'"
            " WHERE group_id = %s AND source_description = 'property graph store'",
            (GROUP,),
        )
        conn.execute(_EARLIER_TRIGGER)
        conn.execute("UPDATE timestone.meta SET value = '45' WHERE key = 'schema_version'")
        conn.execute("DELETE FROM timestone.meta WHERE key = 'functions'")  # not this stamp
    timestone.Memory.open(fresh_dsn).close()
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        assert conn.execute(_GRAPH_RECORDS, (GROUP,)).fetchall() == [("facts",)]
        sums = set(conn.execute(_EPISODE_SUMS, {"g": GROUP}).fetchall())
        recounted = set(conn.execute(_EPISODE_KINDS_RECOUNTED, {"g": GROUP}).fetchall())
    assert {r[0] for r in recounted} == {"episodes", "told episodes"}
    assert sums == recounted
    assert _catalog(fresh_dsn) == reference  # the trigger's function is the file's again


def test_an_upgrade_counts_the_episodes_statistics_again(fresh_dsn: str) -> None:
    """Migration 0047: statistics of the episode kinds that an earlier trigger function
    left wrong (lengths in lexemes, a told episode no longer told) are a recount after
    the upgrade, one row a lexeme; the other kinds' rows are untouched."""
    _graph_record_and_told_episode(fresh_dsn)
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO timestone.term_stats (group_id, kind, lexeme, docs, length)"
            " VALUES (%(g)s, 'told episodes', '', 1, 20), (%(g)s, 'episodes', '', 0, 14),"
            " (%(g)s, 'told episodes', 'ada', 1, 0)",
            {"g": GROUP},
        )
        facts = sorted(conn.execute(_SUMS + " ORDER BY 1").fetchall())
        conn.execute("UPDATE timestone.meta SET value = '46' WHERE key = 'schema_version'")
    timestone.Memory.open(fresh_dsn).close()
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        sums = set(conn.execute(_EPISODE_SUMS, {"g": GROUP}).fetchall())
        recounted = set(conn.execute(_EPISODE_KINDS_RECOUNTED, {"g": GROUP}).fetchall())
        after = sorted(conn.execute(_SUMS + " ORDER BY 1").fetchall())
        rows = conn.execute(
            "SELECT DISTINCT id FROM timestone.term_stats"
            " WHERE kind IN ('episodes', 'told episodes')"
        ).fetchall()
    assert sums == recounted
    assert rows == [(0,)]
    others = [r for r in after if r[1] not in ("episodes", "told episodes")]
    assert others == [r for r in facts if r[1] not in ("episodes", "told episodes")]

"""The term statistics are read by the words asked, never by the whole group: a write
adds to the rows of its words, and a search reads the rows of its question's words,
whatever the planner knew of the table when it made its plans (migration 0040).

A pooled connection keeps its plans: one made while a new group's statistics held a
few rows (a new database's table, not yet analysed) read the group's rows through the
key (group_id, id) and kept those of the words asked, and served the connection while
the group grew to thousands of words, until the table was next analysed. The table now
has one index, which every statement reads by all the columns it names, and its
functions never scan it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import LiteralString

import psycopg
import pytest

import timestone

WORDS = 3_000  # the group's vocabulary once grown

Conn = psycopg.Connection[tuple[object, ...]]

_NOTE: LiteralString = (
    "SELECT timestone.note_terms(ARRAY[%s], ARRAY[%s], ARRAY[to_tsvector('english', %s)], ARRAY[1])"
)
_BM25: LiteralString = (
    "SELECT count(*) FROM timestone.search_terms(%s, tsvector_to_array(to_tsvector("
    "'english', %s)), NULL, NULL, NULL, NULL, 30)"
)


@pytest.fixture
def conn(fresh_dsn: str) -> Iterator[Conn]:
    """The schema on a new database (no autovacuum of the statistics, so that nothing
    analyses them meanwhile), and a connection of generic plans, as a pool's become."""
    timestone.Memory.open(fresh_dsn).close()
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE timestone.term_stats SET (autovacuum_enabled = false)")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute("SELECT set_config('timestone.group_id', 'g', false)")
        yield conn


_READ: LiteralString = (
    "SELECT coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0)"
    " FROM pg_stat_xact_user_tables WHERE schemaname = 'timestone' AND relname = 'term_stats'"
)


def _rows_read(conn: Conn, call: LiteralString, params: tuple[object, ...]) -> int:
    """The rows of term_stats that ``call`` read, through its indexes and by scans, in a
    transaction rolled back (the counts before it subtracted: a backend's counts not
    yet reported add up over its transactions)."""
    conn.execute("BEGIN")
    try:
        before = conn.execute(_READ).fetchone()
        conn.execute(call, params)
        after = conn.execute(_READ).fetchone()
    finally:
        conn.execute("ROLLBACK")
    assert before is not None
    assert after is not None
    assert isinstance(before[0], int)
    assert isinstance(after[0], int)
    return after[0] - before[0]


def _grow(conn: Conn) -> None:
    """The group's first words, its plans made on them, then ``WORDS`` more."""
    for kind in ("facts", "episodes"):
        conn.execute(_NOTE, ("g", kind, "first words"))
        conn.execute(_BM25, (kind, "first words"))
        conn.execute(_NOTE, ("g", kind, " ".join(f"q{i:04d}zed" for i in range(WORDS))))
    row = conn.execute(
        "SELECT c.reltuples, (SELECT count(*) FROM timestone.term_stats)"
        " FROM pg_class AS c WHERE c.oid = 'timestone.term_stats'::regclass"
    ).fetchone()
    assert row is not None
    assert isinstance(row[0], float)
    assert row[0] < 0  # never analysed
    assert isinstance(row[1], int)
    assert row[1] > 2 * WORDS


def test_a_write_reads_the_rows_of_its_own_words(conn: Conn) -> None:
    """Three words (two the group holds, one new), noted by the holder of the fold
    lock: it reads those words' rows, not the group's thousands."""
    _grow(conn)
    for kind in ("facts", "episodes"):
        read = _rows_read(conn, _NOTE, ("g", kind, "q0001zed q0002zed brandnew"))
        assert read <= 50, f"{kind}: {read} rows read for a write of three words"


def test_a_bm25_list_reads_the_rows_of_its_questions_words(conn: Conn) -> None:
    """The BM25 list (of episodes, here) reads the statistics of the question's words
    alone."""
    _grow(conn)
    read = _rows_read(conn, _BM25, ("episodes", "q0001zed q0051zed unheard"))
    assert read <= 50, f"search_terms read {read} rows of term_stats for three words"


def test_the_statistics_have_one_index_and_their_functions_never_scan_them(
    conn: Conn,
) -> None:
    """With a second index of every row that begins with the group, a plan could read
    the group's rows through either; with a scan allowed, a plan made on a page of them
    scanned. The other index holds the pending rows alone (id > 0)."""
    indexes = conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = 'timestone'"
        " AND tablename = 'term_stats' ORDER BY indexname"
    ).fetchall()
    assert [str(d).split(" USING ")[1] for (d,) in indexes] == [
        "btree (group_id, kind, lexeme) WHERE (id > 0)",
        "btree (group_id, kind, lexeme, id)",
    ]
    rows = conn.execute(
        "SELECT p.proname::text, coalesce(p.proconfig, '{}') FROM pg_proc AS p"
        " WHERE p.pronamespace = 'timestone'::regnamespace"
        " AND p.proname IN ('note_terms', 'search_terms')"
    ).fetchall()
    settings = {str(name): str(config) for name, config in rows}
    assert sorted(settings) == ["note_terms", "search_terms"]
    for name, config in settings.items():
        assert "enable_seqscan=off" in config, name


def test_a_groups_rows_are_counted_for_a_kind_it_has(conn: Conn) -> None:
    """``timestone.group_rows`` counts the caller's group's current rows of a kind its
    statistics keep; any other kind is a clear error, not a count of none."""
    _grow(conn)
    row = conn.execute("SELECT timestone.group_rows('facts')").fetchone()
    assert row == (2,)  # the two writes of facts _grow noted
    for kind in ("fact", "", None):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="unknown search kind"):
            conn.execute("SELECT timestone.group_rows(%s)", (kind,))


_NOTE_TWO: LiteralString = (
    "SELECT timestone.note_terms(ARRAY['g', 'g'], ARRAY['facts', 'episodes'],"
    " ARRAY[to_tsvector('english', %s), to_tsvector('english', %s)], ARRAY[%s, %s])"
)


def _held(conn: Conn) -> list[tuple[object, ...]]:
    return conn.execute(
        "SELECT kind, lexeme, id, docs, length FROM timestone.term_stats"
        " WHERE group_id = 'g' ORDER BY kind, lexeme, id"
    ).fetchall()


def test_a_write_of_two_kinds_adds_to_the_main_rows_and_drops_those_at_zero(
    conn: Conn,
) -> None:
    """A group with no pending rows: one call's deltas of two kinds land in each
    lexeme's main row (id 0), and a lexeme counted back to zero in one kind loses its
    row there while the other kind keeps its own."""
    conn.execute(_NOTE_TWO, ("Ada knows Grace", "Ada met Grace", 1, 1))
    conn.execute(_NOTE_TWO, ("Ada knows Bo", "Bo met Ada", 1, 1))
    assert _held(conn) == [
        ("episodes", "", 0, 2, 6),
        ("episodes", "ada", 0, 2, 0),
        ("episodes", "bo", 0, 1, 0),
        ("episodes", "grace", 0, 1, 0),
        ("episodes", "met", 0, 2, 0),
        ("facts", "", 0, 2, 6),
        ("facts", "ada", 0, 2, 0),
        ("facts", "bo", 0, 1, 0),
        ("facts", "grace", 0, 1, 0),
        ("facts", "know", 0, 2, 0),
    ]
    # grace leaves the facts, bo the episodes; each stays in the other kind
    conn.execute(_NOTE_TWO, ("Ada knows Grace", "Bo met Ada", -1, -1))
    assert _held(conn) == [
        ("episodes", "", 0, 1, 3),
        ("episodes", "ada", 0, 1, 0),
        ("episodes", "grace", 0, 1, 0),
        ("episodes", "met", 0, 1, 0),
        ("facts", "", 0, 1, 3),
        ("facts", "ada", 0, 1, 0),
        ("facts", "bo", 0, 1, 0),
        ("facts", "know", 0, 1, 0),
    ]


def test_pending_rows_are_folded_where_a_write_touches_them(conn: Conn) -> None:
    """Rows left pending by a writer that found the fold lock taken (here: another
    group's deltas in the call, which are always pending) are folded by the next write
    of the group that touches their lexemes, and only those."""
    conn.execute(
        "SELECT timestone.note_terms(ARRAY['x', 'g'], ARRAY['facts', 'facts'],"
        " ARRAY[to_tsvector('english', 'x'), to_tsvector('english', 'Ada knows Bo')],"
        " ARRAY[1, 1])"
    )
    pending = [r for r in _held(conn) if r[2] != 0]
    assert [(r[1], r[3]) for r in pending] == [("", 1), ("ada", 1), ("bo", 1), ("know", 1)]
    conn.execute(_NOTE_TWO, ("Ada met Cy", "Ada", 1, 1))
    rows = [(k, x, i != 0, d, n) for k, x, i, d, n in _held(conn)]
    assert rows == [
        ("episodes", "", False, 1, 1),
        ("episodes", "ada", False, 1, 0),
        ("facts", "", False, 2, 6),  # the pending one folded in
        ("facts", "ada", False, 2, 0),  # likewise
        ("facts", "bo", True, 1, 0),  # not touched: still pending
        ("facts", "cy", False, 1, 0),
        ("facts", "know", True, 1, 0),
        ("facts", "met", False, 1, 0),
    ]

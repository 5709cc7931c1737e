"""The full-text list of facts: the match of every word first, then, when it finds no
fact, the facts that hold any word of the question, ranked by BM25 over the group's own
term statistics (``timestone.search._ranked_lists_sql.facts_fts_sql``, decision 018)."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

import timestone
from timestone import FactInput as F
from timestone.errors import InvalidInput
from timestone.search._fulltext import any_words
from timestone.search._request import MAX_QUERY_CHARS, prepare_search
from timestone.search._run import search_hits

T0 = datetime(2021, 3, 1, tzinfo=UTC)

Conn = psycopg.Connection[tuple[object, ...]]

TOUR = "Ana gave a lighthouse tour to the visiting students of the northern coastal school."
SAW = "Ben saw the lighthouse."


def _text_ranks(
    memory: timestone.Memory, group: str, question: str, limit: int = 10
) -> dict[str, int]:
    """Each fact of the search's candidates that the full-text list holds: its rank there."""
    req = prepare_search(question, limit=limit, valid_at=None)
    db = memory._db  # pyright: ignore[reportPrivateUsage]
    rows = search_hits(db, memory.embedder, group, req)["facts"].rows.values()
    return {str(r["fact"]): int(r["fts_rank"]) for r in rows if r["fts_rank"] is not None}


def _bm25(conn: Conn, group: str, question: str) -> dict[str, float]:
    """The facts' BM25 scores of ``search_terms`` as the library role sees them."""
    with conn.transaction():
        conn.execute("SET LOCAL ROLE timestone_app")
        conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
        rows = conn.execute(
            "SELECT f.fact, t.rank FROM timestone.search_terms('facts',"
            " tsvector_to_array(to_tsvector('english', %s)), NULL, NULL, NULL, NULL, 50) AS t"
            " JOIN timestone.facts AS f ON f.group_id = %s AND f.version_id = t.version_id",
            (question, group),
        ).fetchall()
    return {str(r[0]): float(str(r[1])) for r in rows}


def _lighthouse(memory: timestone.Memory, group: str) -> None:
    tours = [
        F(f"Guide {i}", "LEADS", f"Tour {i}", fact=f"Guide {i} leads tour {i}.") for i in range(6)
    ]
    memory.add_facts(
        group,
        [
            F("Ana", "GAVE", "Lighthouse tour", fact=TOUR),
            F("Ben", "SAW", "Lighthouse", fact=SAW),
            F("Cy", "LIKES", "Tea", fact="Cy likes tea."),
            *tours,
        ],
        reference_time=T0,
    )


def test_a_fact_question_whose_words_are_only_partly_in_the_fact_finds_it(
    memory: timestone.Memory, group: str
) -> None:
    """ "employed" is in no fact: the match of every word finds nothing, and the fact that
    holds the question's names leads the full-text list through the fallback."""
    memory.add_facts(
        group,
        [
            F("Karin Tal", "WORKS_AT", "Quarry Nine"),
            F("Karin Ode", "LIVES_IN", "Lisbon"),
            F("Tomas", "WORKS_AT", "Mill Four"),
        ],
        reference_time=T0,
    )
    ranks = _text_ranks(memory, group, "Where is Karin Tal employed?")
    assert ranks["Karin Tal works at Quarry Nine."] == 1
    assert ranks["Karin Ode lives in Lisbon."] == 2  # one of the names: below
    assert "Tomas works at Mill Four." not in ranks
    found = memory.search(group, "Where is Karin Tal employed?", valid_at=None, limit=1)
    assert [f.fact for f in found.facts] == ["Karin Tal works at Quarry Nine."]
    # as of a moment, no fallback: it would rank by today's statistics, not those of then
    req = prepare_search("Where is Karin Tal employed?", valid_at=None, as_of=datetime.now(UTC))
    db = memory._db  # pyright: ignore[reportPrivateUsage]
    rows = search_hits(db, memory.embedder, group, req)["facts"].rows.values()
    assert all(r["fts_rank"] is None for r in rows)


def test_every_word_matches_rank_first(memory: timestone.Memory, dsn: str, group: str) -> None:
    """When a fact holds every word, the text list is the match of every word, even
    where BM25 alone would lead with another fact (a short one, a common word); when
    none does, BM25 ranks the facts holding any word."""
    _lighthouse(memory, group)
    with psycopg.connect(dsn, autocommit=True) as conn:
        scores = _bm25(conn, group, "lighthouse tour")
    assert scores[SAW] > scores[TOUR]  # BM25 alone would lead with the short fact
    assert _text_ranks(memory, group, "lighthouse tour") == {TOUR: 1}
    assert _text_ranks(memory, group, "lighthouse tour", limit=1) == {TOUR: 1}
    # no fact holds "keeper": the facts that hold "lighthouse", the short one first
    assert _text_ranks(memory, group, "lighthouse keeper") == {SAW: 1, TOUR: 2}


def test_the_fallback_never_brings_in_a_word_the_question_excludes(
    memory: timestone.Memory, group: str
) -> None:
    _lighthouse(memory, group)
    ranks = _text_ranks(memory, group, "lighthouse students -tour")
    assert ranks == {SAW: 1}  # the tour fact holds "tour"; the guides' facts too
    assert any_words("lighthouse -tour --students") == ("lighthouse    students", "tour")
    assert any_words('"a -b" -c d') == ('"a -b"   d', "c")


def test_a_tenants_facts_never_move_another_tenants_fallback(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """Two groups hold the same facts: the fallback of one ranks by its own statistics;
    facts written to the other group change nothing of it, and none of them is found."""
    other = f"{group}-other"
    _lighthouse(memory, group)
    _lighthouse(memory, other)
    question = "lighthouse keeper"
    with psycopg.connect(dsn, autocommit=True) as conn:
        mine = _bm25(conn, group, question)
        ranks = _text_ranks(memory, group, question)
        more = [F(f"Keeper {i}", "KEEPS", f"Lighthouse {i}") for i in range(8)]
        memory.add_facts(other, more, reference_time=T0)
        assert _bm25(conn, group, question) == mine
        assert _bm25(conn, other, question)[SAW] != mine[SAW]  # "lighthouse" common there
    assert _text_ranks(memory, group, question) == ranks
    assert not any(f.startswith("Keeper") for f in ranks)


def test_bad_input_of_a_fact_question(memory: timestone.Memory, dsn: str, group: str) -> None:
    """An empty question is refused; one of stop words only still gets vector results; a
    question past the limit is refused naming it; and a search writes nothing."""
    _lighthouse(memory, group)
    with pytest.raises(InvalidInput, match="search query"):
        memory.search(group, "  ")
    with pytest.raises(InvalidInput, match=f"{MAX_QUERY_CHARS:,}|{MAX_QUERY_CHARS}"):
        memory.search(group, "tour " * (MAX_QUERY_CHARS // 5) + "x")
    only_stop_words = memory.search(group, "what was it that they did?", valid_at=None, limit=3)
    assert len(only_stop_words.facts) == 3
    assert _text_ranks(memory, group, "what was it that they did?") == {}
    with psycopg.connect(dsn, autocommit=True) as conn:

        def written() -> tuple[object, ...]:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM timestone.term_stats),"
                " (SELECT max(id) FROM timestone.term_stats),"
                " (SELECT count(*) FROM timestone.facts WHERE group_id = %s)",
                (group,),
            ).fetchone()
            assert row is not None
            return tuple(row)

        before = written()
        for q in ("lighthouse keeper", "Where is Ana employed?", "lighthouse -tour"):
            memory.search(group, q, valid_at=None)
            memory.context(group, q, token_budget=300)
        assert written() == before

"""Full text search (``timestone.search_text``): what it finds is the exact match.

The function reads two partial text indexes for the current facts (open periods,
closed periods) and leaves the commonest lexemes of a conjunction out of the index
condition. Neither may change the answer: each test compares it with a plain scan.
"""

from __future__ import annotations

import itertools
import random
import string
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.conninfo import make_conninfo

import timestone
from timestone import FactInput as F
from timestone.search._fulltext import MAX_NEGATIONS, web_query
from timestone.search._request import prepare_search
from timestone.search._run import search_hits

T2015 = datetime(2015, 1, 1, tzinfo=UTC)
T2023 = datetime(2023, 1, 1, tzinfo=UTC)

Conn = psycopg.Connection[tuple[object, ...]]


def _found(
    conn: Conn,
    group: str,
    query: str,
    *,
    valid_at: datetime | None,
    as_of: datetime | None = None,
) -> list[str]:
    """What the library role's text search returns, as fact texts in rank order."""
    with conn.transaction():
        conn.execute("SET LOCAL ROLE timestone_app")
        conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
        rows = conn.execute(
            "SELECT x.fact FROM timestone.search_text('facts',"
            " websearch_to_tsquery('english', %s), %s, %s, NULL, NULL, 50) AS t"
            " JOIN timestone.facts AS x ON x.group_id = %s AND x.version_id = t.version_id"
            " ORDER BY t.rank DESC, t.version_id",
            (query, as_of, valid_at, group),
        ).fetchall()
    return [str(r[0]) for r in rows]


def _exact(conn: Conn, group: str, query: str, *, valid_at: datetime | None) -> list[str]:
    """The same match by a plain scan of the group's current facts, no index involved."""
    rows = conn.execute(
        "SELECT f.fact FROM timestone.facts AS f, websearch_to_tsquery('english', %s) AS q"
        " WHERE f.group_id = %s AND f.expired_at IS NULL AND ts_match_vq(f.fts, q)"
        " AND (%s::timestamptz IS NULL OR (f.valid_at <= %s"
        "      AND (f.invalid_at IS NULL OR f.invalid_at > %s)))"
        " ORDER BY ts_rank_cd(f.fts, q) DESC, f.version_id LIMIT 50",
        (query, group, valid_at, valid_at, valid_at),
    ).fetchall()
    return [str(r[0]) for r in rows]


def test_text_search_reads_open_and_closed_periods_by_the_time_asked(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    soon = datetime.now(UTC) + timedelta(days=365)
    first = memory.add_facts(
        group,
        [
            F("Mira", "DIRECTS", "Château Nord", invalid_at=T2023),
            F("Mira", "LEADS", "Project Atlas", invalid_at=soon),
        ],
        reference_time=T2015,
    )
    memory.add_facts(group, [F("Mira", "DIRECTS", "Château Sud")], reference_time=T2023)
    nord, sud = "Mira directs Château Nord.", "Mira directs Château Sud."
    atlas = "Mira leads Project Atlas."
    with psycopg.connect(dsn) as conn:
        now = _found(conn, group, "Mira", valid_at=datetime.now(UTC))
        assert sorted(now) == sorted([sud, atlas])  # the period ending later is still true
        then = _found(conn, group, "Mira", valid_at=datetime(2018, 1, 1, tzinfo=UTC))
        assert sorted(then) == sorted([nord, atlas])
        assert sorted(_found(conn, group, "Mira", valid_at=None)) == sorted([nord, sud, atlas])
        # as of a moment before the 2023 episode: history rows, read without the indexes
        before = _found(conn, group, "Mira directs", valid_at=None, as_of=first.recorded_at)
        assert before == [nord]
        for when in (datetime.now(UTC), datetime(2018, 1, 1, tzinfo=UTC), None):
            for query in ("Mira", "Mira directs", "château", "atlas OR nord"):
                assert _found(conn, group, query, valid_at=when) == _exact(
                    conn, group, query, valid_at=when
                )


def test_a_question_is_ranked_by_the_words_it_asks_for(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """A row matches the whole question, and is ranked by its positive part: a question
    that only excludes words finds nothing by full text (it would rank every row of the
    group), and hundreds of negations cost what the words asked for cost."""
    memory.add_facts(
        group,
        [
            F("Mira", "DIRECTS", "Château Nord"),
            F("Mira", "WORKS_WITH_GRAPE", "Gamay", fact="Mira works with the Gamay grape."),
            F("Bo", "LIKES", "Gamay"),
        ],
        reference_time=T2015,
    )
    now = datetime.now(UTC)
    many = " ".join(f"-w{i}" for i in range(400))
    with psycopg.connect(dsn) as conn:
        for only_excludes in ("-gamay", "-gamay -mira", "-gamay or -nord", "mira or -gamay", many):
            assert _found(conn, group, only_excludes, valid_at=now) == [], only_excludes
        assert _found(conn, group, "-gamay mira", valid_at=now) == ["Mira directs Château Nord."]
        assert _found(conn, group, f"gamay {many}", valid_at=now) == _found(
            conn, group, "gamay", valid_at=now
        )
        assert len(_found(conn, group, "gamay", valid_at=now)) == 2
        ranked = conn.execute(
            "SELECT ts_rank_cd(to_tsvector('english', 'Mira works with the Gamay grape.'),"
            " websearch_to_tsquery('english', %s))",
            ("gamay mira",),
        ).fetchone()
        assert ranked is not None
        with conn.transaction():
            conn.execute("SET LOCAL ROLE timestone_app")
            conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
            (row,) = conn.execute(
                "SELECT rank FROM timestone.search_text('facts',"
                " websearch_to_tsquery('english', %s), NULL, NULL, NULL, NULL, 5)",
                ("gamay mira -nord " + many,),
            ).fetchall()
        assert row[0] == ranked[0]  # the rank of the words asked for, to the bit


def _exact_as_of(
    conn: Conn, group: str, query: str, *, as_of: datetime, valid_at: datetime | None
) -> list[str]:
    """The versions held at ``as_of`` by a plain scan of every row of the group."""
    rows = conn.execute(
        "SELECT f.fact FROM timestone.facts AS f, websearch_to_tsquery('english', %s) AS q"
        " WHERE f.group_id = %s AND f.created_at <= %s"
        " AND (f.expired_at IS NULL OR f.expired_at > %s) AND ts_match_vq(f.fts, q)"
        " AND (%s::timestamptz IS NULL OR (f.valid_at <= %s"
        "      AND (f.invalid_at IS NULL OR f.invalid_at > %s)))"
        " ORDER BY ts_rank_cd(f.fts, q) DESC, f.version_id LIMIT 50",
        (query, group, as_of, as_of, valid_at, valid_at, valid_at),
    ).fetchall()
    return [str(r[0]) for r in rows]


def test_as_of_text_search_is_the_scan_of_the_versions_held_then(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """As of each moment of a history (a contradiction that closes a period, a
    correction that expires a version, a fact added later, an episode removed), the
    text search (current indexes, plus the versions that ended after the moment) finds
    what a scan of every version held then finds, in the same order."""
    moments = [datetime.now(UTC)]
    memory.add_facts(
        group,
        [
            F("Mira", "DIRECTS", "Château Nord"),
            F("Mira", "LEADS", "Project Atlas", invalid_at=datetime(2030, 1, 1, tzinfo=UTC)),
            F("Mira", "WORKS_WITH_GRAPE", "Gamay"),
        ],
        reference_time=T2015,
    )
    moments.append(datetime.now(UTC))
    memory.add_facts(group, [F("Mira", "DIRECTS", "Château Sud")], reference_time=T2023)
    moments.append(datetime.now(UTC))
    memory.add_facts(
        group,
        [F("Mira", "WORKS_WITH_GRAPE", "Gamay", fact="Mira works with the Gamay grape.")],
        reference_time=T2015,
    )
    moments.append(datetime.now(UTC))
    later = memory.add_facts(
        group, [F("Mira", "STUDIED_AT", "Dijon Wine School")], reference_time=T2023
    )
    moments.append(datetime.now(UTC))
    memory.remove_episode(group, later.episode.id)
    moments.append(datetime.now(UTC))
    queries = ("Mira", "Mira directs", "château", "atlas OR nord", "grape", "-gamay mira")
    seen: set[tuple[str, ...]] = set()
    with psycopg.connect(dsn) as conn:
        for moment in moments:
            for when in (None, datetime.now(UTC), datetime(2018, 1, 1, tzinfo=UTC)):
                for query in queries:
                    found = _found(conn, group, query, valid_at=when, as_of=moment)
                    assert found == _exact_as_of(conn, group, query, as_of=moment, valid_at=when), (
                        moment,
                        when,
                        query,
                    )
                    seen.add(tuple(found))
    assert len(seen) > 8  # the moments and filters tell different stories


FIRST = [
    "Karin",
    "Olga",
    "Pia",
    "Dag",
    "Hugo",
    "Sara",
    "Alma",
    "Aron",
    "Beda",
    "Nils",
    "Ines",
    "Lars",
]
LAST = ["Tal", "Jahn", "Wald", "Berg", "Vik", "Bauer", "Diehl", "Roth", "Lund", "Falk", "Moe"]


@pytest.fixture
def common_words(fresh_dsn: str) -> Iterator[tuple[timestone.Memory, str]]:
    """A database whose facts all say "lives in" or "works at": after ANALYZE, "live",
    "work", "citi" and "compani" are each in half the rows, a first or last name in
    less than a tenth of them, a person's number in two."""
    group = "words"
    with timestone.Memory.open(fresh_dsn) as mem:
        facts: list[F] = []
        for i in range(300):
            who = f"{FIRST[i % len(FIRST)]} {LAST[i % len(LAST)]} {i}"
            city, company = f"City {i % 7}", f"Company {i % 5}"
            facts.append(F(who, "LIVES_IN", city, fact=f"{who} lives in {city}."))
            facts.append(F(who, "WORKS_AT", company, fact=f"{who} works at {company}."))
        mem.add_facts(group, facts, reference_time=T2015)
        with psycopg.connect(fresh_dsn, autocommit=True) as conn:
            conn.execute("ANALYZE timestone.facts")
        yield mem, group


def test_common_lexemes_are_left_to_the_check_not_the_index(
    common_words: tuple[timestone.Memory, str], fresh_dsn: str
) -> None:
    _, group = common_words

    def index_query(conn: Conn, text: str) -> str:
        row = conn.execute(
            "SELECT timestone.index_query(websearch_to_tsquery('english', %s), 'facts')::text",
            (text,),
        ).fetchone()
        assert row is not None
        return str(row[0])

    with psycopg.connect(fresh_dsn) as conn:
        # a table this small is read as written: its lists are short
        assert index_query(conn, "Karin Jahn 12 live") == "'karin' & 'jahn' & '12' & 'live'"
        # but a question of more than 16 words reads its first 16 (each row the index
        # returns is checked against them all)
        many = [f"w{i}" for i in range(30)]
        assert index_query(conn, " ".join(many)) == " & ".join(f"'{w}'" for w in many[:16])
        assert index_query(conn, " ".join(many[:16])) == " & ".join(f"'{w}'" for w in many[:16])
        assert index_query(conn, " or ".join(many)) == " | ".join(f"'{w}'" for w in many)
        conn.execute("SET timestone.text_narrowing_rows = 0")
        assert index_query(conn, "Where does Karin Jahn 12 live?") == "'karin' & 'jahn' & '12'"
        # one lexeme is left at least: when every one is common, all are read
        assert index_query(conn, "lives in a city") == "'live' & 'citi'"
        # anything but a plain conjunction is read as written
        assert index_query(conn, "Karin or live") == "'karin' | 'live'"
        assert index_query(conn, "Karin -live") == "'karin' & !'live'"
        assert index_query(conn, '"Karin Jahn" live') == "'karin' <-> 'jahn' & 'live'"
        # of a long question, the first 16 lexemes that are not common
        common = " ".join(["lives", "city"] * 10)
        assert index_query(conn, f"{common} Karin Jahn " + " ".join(many)) == " & ".join(
            ["'karin'", "'jahn'", *(f"'{w}'" for w in many[:14])]
        )

        now = datetime.now(UTC)
        # a long question finds what the whole question matches
        long_question = "Karin Jahn 12 lives in City 5 " + " ".join(["city"] * 40) + " Karin"
        found = _found(conn, group, long_question, valid_at=now)
        assert found == _exact(conn, group, long_question, valid_at=now)
        assert found == ["Karin Jahn 12 lives in City 5."]
        assert _found(conn, group, "Karin Jahn 12 " + " ".join(many), valid_at=now) == []
        # the rows the narrower index condition lets through are checked against it all
        assert _found(conn, group, "Where does Karin Jahn 12 live?", valid_at=now) == [
            "Karin Jahn 12 lives in City 5."
        ]
        # quotes, backslashes and operators reach the function whole and are read as written
        for odd in ("O'Brien's lives", "Karin \\ live", "'Karin' lives", "Karin - Jahn", '"'):
            assert _found(conn, group, odd, valid_at=now) == _exact(conn, group, odd, valid_at=now)
        words = ["Karin", "Jahn", "12", "lives", "works", "city", "company", "5", "Olga"]
        for size in (1, 2, 3):
            for chosen in itertools.combinations(words, size):
                query = " ".join(chosen)
                assert _found(conn, group, query, valid_at=now) == _exact(
                    conn, group, query, valid_at=now
                ), query


def test_a_question_only_of_words_most_facts_hold_has_no_text_list(
    common_words: tuple[timestone.Memory, str], fresh_dsn: str
) -> None:
    """Migration 0030: when the statistics put a question's matches in its group at
    ``timestone.text_common_rows`` or more (the group's rows times each word's share),
    the facts have no full-text list; every other question is ranked exactly."""
    mem, group = common_words
    mem.add_facts(
        "few",
        [F(f"Ada {i}", "LIVES_IN", "Lyon", fact=f"Ada {i} lives in Lyon.") for i in range(30)],
        reference_time=T2015,
    )
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        conn.execute("ANALYZE timestone.facts")
        now = datetime.now(UTC)

        def exact(g: str, question: str) -> bool:
            found = _found(conn, g, question, valid_at=now)
            return bool(found) and found == _exact(conn, g, question, valid_at=now)

        # the words are looked up once the bound is known: 600 rows, none reach 1,000
        conn.execute("SET timestone.text_common_rows = 1000")
        assert exact(group, "lives")
        # a lower bound looks the words up again (not a minute later): "live" is in half
        # the group's 600 facts, 300 estimated
        conn.execute("SET timestone.text_common_rows = 100")
        assert _found(conn, group, "lives", valid_at=now) == []
        assert _found(conn, group, "lives", valid_at=None) == []
        assert _found(conn, group, "lives", valid_at=now, as_of=now) == []
        # "live" and "citi", each in half: 150
        assert _found(conn, group, "lives in a city", valid_at=now) == []
        # a phrase of one word ("at" is a stop word)
        assert _found(conn, group, '"works at"', valid_at=now) == []
        # with a rarer word the estimate falls under the bound: ranked as before
        for question in ("lives in City 5", "Karin lives", "lives or works", "lives -Karin"):
            assert exact(group, question), question
        assert _found(conn, group, "Karin Jahn 12 works", valid_at=now) == [
            "Karin Jahn 12 works at Company 2."
        ]
        # a group of fewer rows than the bound is ranked exactly, whatever it asks
        assert exact("few", "lives")
        # raised above the group's rows, the bound leaves every question its list
        conn.execute("SET timestone.text_common_rows = 601")
        assert exact(group, "lives")
        assert exact(group, "lives in a city")
        conn.execute("SET timestone.text_common_rows = 300")
        assert _found(conn, group, "lives", valid_at=now) == []
        assert exact(group, "lives in a city")  # 150 < 300

    # end to end: the search has no full-text candidates, and the others still answer
    req = prepare_search("lives", limit=10)
    low = make_conninfo(fresh_dsn, options="-c timestone.text_common_rows=100")
    with timestone.Memory.open(low) as narrow:
        hits = search_hits(narrow._db, narrow.embedder, group, req)  # pyright: ignore[reportPrivateUsage]
        assert len(hits["facts"].ranked) == 10
        assert all("fts_rank" not in c.ranks for c in hits["facts"].ranked)
        assert all(row["fts_rank"] is None for row in hits["facts"].rows.values())
    hits = search_hits(mem._db, mem.embedder, group, req)  # pyright: ignore[reportPrivateUsage]
    assert any("fts_rank" in c.ranks for c in hits["facts"].ranked)


def test_a_bad_common_rows_setting_is_named(memory: timestone.Memory, dsn: str, group: str) -> None:
    del memory  # opened so that the schema exists
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET timestone.text_common_rows = 'many'")
        conn.execute("SELECT set_config('timestone.group_id', %s, false)", (group,))
        for kind in ("facts", "entities", "episodes", "communities"):
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="text_common_rows"):
                conn.execute(
                    "SELECT count(*) FROM timestone.search_text(%s,"
                    " websearch_to_tsquery('english', 'lives'), NULL, NULL, NULL, NULL, 30)",
                    (kind,),
                )
    # a search says which setting is wrong
    bad = timestone.Memory.open(make_conninfo(dsn, options="-c timestone.text_common_rows=-1"))
    with bad, pytest.raises(timestone.errors.DatabaseError, match="text_common_rows"):
        bad.search(group, "lives")


def test_a_bad_narrowing_setting_is_named(memory: timestone.Memory, dsn: str) -> None:
    del memory  # opened so that the schema exists
    with psycopg.connect(dsn) as conn:
        conn.execute("SET timestone.text_narrowing_rows = 'many'")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="text_narrowing_rows"):
            conn.execute(
                "SELECT timestone.index_query(websearch_to_tsquery('english', 'a b c'), 'facts')"
            )


def test_an_episode_of_more_words_than_a_text_vector_holds_is_stored(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """Postgres caps a text vector at 1 MB. An ``add_facts`` call of 120 sentences of
    9,000 characters of distinct random words makes an episode of over a million
    characters, whose whole vector would be nearly 2 MB: it was refused. The episode is
    indexed on its first 80,000 characters: the call is stored whole, a word near its
    start matches the episode's text, one past the cap does not (its fact still
    finds it)."""
    rnd = random.Random(5)

    def sentence(i: int) -> str:
        words = ("".join(rnd.choices(string.ascii_lowercase, k=8)) for _ in range(999))
        return f"Fact {i} says " + " ".join(words) + "."

    facts = [F("Ada", "NOTES", f"Note {i}", fact=sentence(i)) for i in range(120)]
    res = memory.add_facts(group, facts, reference_time=T2015)
    assert len(res.facts) == 120
    content = res.episode.content
    assert len(content) > 1_000_000
    early, late = facts[0].fact, facts[-1].fact
    assert early is not None
    assert late is not None
    early_word, late_word = early.split()[5], late.split()[5]
    assert content.index(early_word) < 80_000 < content.index(late_word)
    assert late_word not in content[:80_000]
    with psycopg.connect(dsn) as conn:
        matched = conn.execute(
            "SELECT fts @@ plainto_tsquery('english', %s), fts @@ plainto_tsquery('english', %s)"
            " FROM timestone.episodes WHERE group_id = %s AND id = %s",
            (early_word, late_word, group, res.episode.id),
        ).fetchone()
        assert matched == (True, False)
        late_facts = _found(conn, group, late_word, valid_at=None)
    assert late_facts == [late]


# Pieces of a question: words, quotes, OR, the characters the web-search syntax skips
# between negations (and some it does not), and runs of negations of every length.
_WORDS = st.sampled_from(
    [
        "cat",
        "dogs",
        "a",
        "or",
        "OR",
        "-cat",
        "well-known",
        "x-",
        "  ",
        *" \"()!&|<,':*\t\n\u00a0\u2003",
    ]
)


def _negations(n: int, between: str) -> str:
    return ("-" + between) * n


_RUNS = st.builds(
    _negations,
    st.integers(min_value=1, max_value=80),
    st.sampled_from(["", " ", "(", " (", "! ", "&", "\u00a0", ","]),
)
_PIECES: st.SearchStrategy[str] = st.one_of(_WORDS, _RUNS)


def _parse(conn: Conn, text: str) -> str | psycopg.Error:
    try:
        with conn.transaction():
            row = conn.execute("SELECT websearch_to_tsquery('english', %s)::text", (text,))
            return str(row.fetchone()[0])  # type: ignore[index]
    except psycopg.errors.InternalError_ as exc:  # "tsquery stack too small"
        return exc


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_a_question_of_many_negations_is_read_as_it_means(
    memory: timestone.Memory, text: str
) -> None:
    """Postgres's parser fails on more than 32 negations in a row; the question a search
    hands it never has more than 16, and means what Postgres read: the same tsquery
    once double negations cancel, and the very same where no run was longer."""
    given = web_query(text)
    with psycopg.connect(memory.dsn) as conn:
        asked = _parse(conn, given)
        assert not isinstance(asked, psycopg.Error), (text, asked)
        original = _parse(conn, text)
    assert "!" * (MAX_NEGATIONS + 1) not in asked
    if given == text:
        return
    assert "-" * (MAX_NEGATIONS + 1) in text.replace(" ", "") or len(text) > len(given)
    if not isinstance(original, psycopg.Error):
        assert _cancelled(asked) == _cancelled(original)


def _cancelled(query: str) -> str:
    """A tsquery's text with each double negation taken out (!!x matches as x does)."""
    while "!!" in query:
        query = query.replace("!!", "")
    return query


def test_a_search_of_a_run_of_dashes_answers(memory: timestone.Memory, group: str) -> None:
    """A pasted divider, or 41 negations of a word: once a database error."""
    memory.add_facts(
        group,
        [F("Ada", "WORKS_AT", "Acme"), F("Bo", "WORKS_AT", "Acme")],
        reference_time=T2015,
    )
    assert memory.search(group, "-" * 50).query == "-" * 50
    found = memory.search(group, "works at Acme " + "-" * 41 + "Ada", limit=2)
    assert {f.source for f in found.facts} == {"Ada", "Bo"}
    assert memory.context(group, "- " * 40 + "Acme").items


def test_the_group_holding_half_the_table_reads_text_through_one_plan(fresh_dsn: str) -> None:
    """Migration 0029: the full text of a moment, for the group that holds half the facts
    table or more, runs through a plan made once, the periods ending after the moment
    looked up by key; with 1,000 of them or more, and once another group holds more of
    the table, through the plan made per call. No session setting names the group (0032:
    the library role could read it); every way finds what a plain scan finds, at every
    moment asked."""
    big, other = "big", "other"
    soon = datetime.now(UTC) + timedelta(days=365)
    nord, sud = "Mira directs Château Nord.", "Mira directs Château Sud."
    atlas = "Mira leads Project Atlas."
    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts(
            big,
            [
                F("Mira", "DIRECTS", "Château Nord", invalid_at=T2023, fact=nord),
                F("Mira", "LEADS", "Project Atlas", invalid_at=soon, fact=atlas),
                *(
                    F(f"Ivo {i}", "LIVES_IN", "Lyon", fact=f"Ivo {i} lives in Lyon.")
                    for i in range(40)
                ),
            ],
            reference_time=T2015,
        )
        mem.add_facts(big, [F("Mira", "DIRECTS", "Château Sud", fact=sud)], reference_time=T2023)
        mem.add_facts(
            other, [F("Mira", "DIRECTS", "Château Nord", fact=nord)], reference_time=T2015
        )
        questions = [
            "Mira",
            "Mira directs",
            "Project Atlas",
            "lives in Lyon",
            "Mira -Nord",
            "Château",
        ]
        moments = [datetime.now(UTC), datetime(2019, 1, 1, tzinfo=UTC), soon + timedelta(days=1)]

        def check(conn: Conn, holder: str, once_at: Sequence[datetime]) -> None:
            """Every question at every moment; ``once_at``: the moments whose questions run
            the plan made once."""
            plans.clear()
            for question, moment in itertools.product(questions, moments):
                found = _found(conn, big, question, valid_at=moment)
                assert found == _exact(conn, big, question, valid_at=moment), (question, moment)
            # nothing about the group is kept in a session setting (migration 0032)
            kept = conn.execute(
                "SELECT name FROM pg_settings WHERE name LIKE 'timestone.%%' AND setting LIKE %s",
                (f"%{holder}%",),
            ).fetchall()
            assert kept == []
            # the statements the function ran (auto_explain): for the group that holds half
            # the table, the one that reads the periods ending later by key, its plan made
            # once (the values in it are parameters, where a plan per call has constants)
            once = [p for p in plans if "ANY(closing)" in p]
            assert len(once) == len(questions) * len(once_at)
            assert all("(group_id = $" in p for p in once)
            now = datetime.now(UTC)
            assert set(_found(conn, big, "Mira", valid_at=now)) == {sud, atlas}
            assert set(_found(conn, big, "Mira", valid_at=datetime(2019, 1, 1, tzinfo=UTC))) == {
                nord,
                atlas,
            }
            assert set(_found(conn, big, "Mira", valid_at=soon + timedelta(days=1))) == {sud}

        plans: list[str] = []
        with psycopg.connect(fresh_dsn, autocommit=True) as conn:
            conn.execute("ANALYZE timestone.facts")
            conn.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
            conn.execute("LOAD 'auto_explain'")
            conn.execute("SET auto_explain.log_min_duration = 0")
            conn.execute("SET auto_explain.log_nested_statements = on")
            conn.execute("SET auto_explain.log_level = notice")
            check(conn, big, moments)
            # 1,000 periods and more end after the present and 2019: those moments are
            # planned per call
            mem.add_facts(
                big,
                [F(f"Lea {i}", "CONTRACTED_BY", "Acme", invalid_at=soon) for i in range(1000)],
                reference_time=T2015,
            )
            conn.execute("ANALYZE timestone.facts")
            check(conn, big, moments[2:])
            # another group now holds most of the table: the plan is made per call again
            mem.add_facts(
                other,
                [
                    F(f"Ada {i}", "LIVES_IN", "Lyon", fact=f"Ada {i} lives in Lyon.")
                    for i in range(1200)
                ],
                reference_time=T2015,
            )
            conn.execute("ANALYZE timestone.facts")
            check(conn, other, [])

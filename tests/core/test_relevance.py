"""Relevance on small hand-made cases: full text ranked like BM25 over each group's own
term statistics (migration 0036), the episodes scope fused by score with the
neighbours of a hit (``timestone.search._episodes_sql``), and the bad input of a question."""

from __future__ import annotations

import math
import random
import string
import threading
from datetime import UTC, datetime, timedelta
from typing import cast

import psycopg
import pytest

import timestone
from timestone import FactInput as F
from timestone.errors import InvalidInput
from timestone.search._question import time_window
from timestone.search._request import MAX_QUERY_CHARS, prepare_search

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)

Conn = psycopg.Connection[tuple[object, ...]]


def _turns(
    memory: timestone.Memory, group: str, lines: list[str], at: datetime = T0, first: int = 0
) -> None:
    """Each line a document of its own, as a conversation's turns are stored: titled by
    their conversation (the turns of one source)."""
    for i, line in enumerate(lines, start=first):
        memory.add_document(
            group, f"turn-{at.date()}-{i}", line, title="a conversation", reference_time=at
        )


def _uris(results: timestone.SearchResults) -> list[str]:
    return [e.document_uri or "" for e in results.episodes]


def _scores(conn: Conn, group: str, kind: str, question: str) -> dict[str, float]:
    """BM25 scores of ``search_terms`` as the library role sees them: content -> score."""
    with conn.transaction():
        conn.execute("SET LOCAL ROLE timestone_app")
        conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
        rows = conn.execute(
            "SELECT p.content, t.rank FROM timestone.search_terms(%s,"
            " tsvector_to_array(to_tsvector('english', %s)), NULL, NULL, NULL, NULL, 50) AS t"
            " JOIN timestone.episodes AS p ON p.group_id = %s AND p.version_id = t.version_id",
            (kind, question, group),
        ).fetchall()
    return {str(r[0]): float(str(r[1])) for r in rows}


def _stats(conn: Conn, group: str) -> set[tuple[str, str, int, int]]:
    """The group's term statistics as summed (kind, lexeme, rows, length), zeros left out."""
    rows = conn.execute(
        "SELECT kind, lexeme, sum(docs)::bigint, sum(length)::bigint FROM timestone.term_stats"
        " WHERE group_id = %s GROUP BY kind, lexeme"
        " HAVING sum(docs) <> 0 OR sum(length) <> 0",
        (group,),
    ).fetchall()
    return {(str(k), str(x), int(str(d)), int(str(n))) for k, x, d, n in rows}


def _recounted(conn: Conn, group: str) -> set[tuple[str, str, int, int]]:
    """The same statistics counted afresh from the group's current rows (the length of
    an episode in words, of the other rows in lexemes)."""
    rows = conn.execute(
        "WITH r AS ("
        " SELECT 'facts' AS kind, fts, length(fts) AS words FROM timestone.facts"
        "  WHERE group_id = %(g)s AND expired_at IS NULL"
        " UNION ALL SELECT 'entities', fts, length(fts) FROM timestone.entities"
        "  WHERE group_id = %(g)s AND expired_at IS NULL"
        " UNION ALL SELECT 'communities', fts, length(fts) FROM timestone.communities"
        "  WHERE group_id = %(g)s AND expired_at IS NULL"
        " UNION ALL SELECT 'episodes', fts, fts_words FROM timestone.episodes"
        "  WHERE group_id = %(g)s AND expired_at IS NULL"
        " UNION ALL SELECT 'told episodes', fts, fts_words FROM timestone.episodes"
        "  WHERE group_id = %(g)s AND expired_at IS NULL AND source <> 'facts')"
        " SELECT r.kind, t.lexeme, count(*), 0 FROM r, unnest(tsvector_to_array(r.fts)) AS t(lexeme)"
        " GROUP BY r.kind, t.lexeme"
        " UNION ALL SELECT r.kind, '', count(*), sum(r.words) FROM r GROUP BY r.kind",
        {"g": group},
    ).fetchall()
    return {(str(k), str(x), int(str(d)), int(str(n))) for k, x, d, n in rows}


def test_a_question_whose_words_are_partly_in_the_turn_finds_it(
    memory: timestone.Memory, group: str
) -> None:
    """The question asks "go"; the turn says "went": with every word required, the turn
    was not a text match at all."""
    _turns(
        memory,
        group,
        [
            "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
            "Melanie: The kids and I painted a sunrise by the lake last weekend.",
            "Caroline: I'm thinking about a career in counseling.",
            "Melanie: Work has been busy, but the pottery class keeps me sane.",
        ],
    )
    found = memory.search(
        group,
        "When did Caroline go to the LGBTQ support group?",
        scopes=("episodes",),
        valid_at=None,
        limit=3,
    )
    assert _uris(found)[0] == f"turn-{T0.date()}-0"
    assert found.episodes[0].content.startswith("Caroline: I went to a LGBTQ support group")


def test_a_rare_word_outranks_a_common_one(memory: timestone.Memory, dsn: str, group: str) -> None:
    """Each turn holds one word of the question: the one whose word few turns hold ranks
    first (inverse document frequency), whatever the order of the words."""
    common = [f"Jo: the garden was lovely on day {i}." for i in range(8)]
    _turns(memory, group, [*common, "Jo: we saw a zeppelin over the hills."])
    with psycopg.connect(dsn, autocommit=True) as conn:
        for question in ("garden zeppelin", "zeppelin garden"):
            scores = _scores(conn, group, "told episodes", question)
            ranked = sorted(scores, key=lambda c: -scores[c])
            assert ranked[0] == "Jo: we saw a zeppelin over the hills."
            assert len(ranked) == 9  # any word may match: every garden turn is ranked too
            assert scores[ranked[0]] > 2 * scores[ranked[1]]


def test_a_tenants_statistics_never_move_another_tenants_scores(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """Two groups hold the same turn among different neighbours: each turn's score comes
    from its own group's statistics only, and writes to one group leave the other's
    scores as they were."""
    same = "Ana: the lighthouse keeper gave us a tour of the lamp."
    other = f"{group}-other"
    _turns(memory, group, [same, "Ana: we had fish for dinner."])
    _turns(memory, other, [same, *(f"Ben: the lighthouse {i} was closed." for i in range(6))])
    question = "Who gave a tour of the lighthouse?"
    with psycopg.connect(dsn, autocommit=True) as conn:
        mine = _scores(conn, group, "told episodes", question)
        theirs = _scores(conn, other, "told episodes", question)
        # "lighthouse" is rare here and common there: the same text, different scores
        assert mine[same] != theirs[same]
        more = [f"Ben: a lighthouse tour, number {i}." for i in range(10)]
        _turns(memory, other, more, first=7)
        assert _scores(conn, group, "told episodes", question) == mine
        assert _scores(conn, other, "told episodes", question)[same] != theirs[same]


def test_term_statistics_stay_exact_through_removal_rollback_and_purge(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """The statistics kept by the writes' own transactions equal a fresh count of the
    current rows after every kind of write: facts, documents, a removal, a rollback, a
    purge, and a transaction that failed."""
    first = memory.add_facts(
        group,
        [F("Ada", "KNOWS", "Grace"), F("Ada", "WORKS_AT", "Analytical Engines")],
        reference_time=T0,
    )
    later = datetime.now(UTC)
    memory.add_document(group, "doc-1", "Ada met Grace at the harbour.", reference_time=T0)
    second = memory.add_facts(group, [F("Grace", "LIVES_IN", "Arlington")], reference_time=T0)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert _stats(conn, group) == _recounted(conn, group)
        memory.remove_episode(group, second.episode.id)
        assert _stats(conn, group) == _recounted(conn, group)
        memory.rollback(group, to=later)
        assert _stats(conn, group) == _recounted(conn, group)
        memory.purge_episode(group, first.episode.id)
        assert _stats(conn, group) == _recounted(conn, group)
        before = _stats(conn, group)
        with conn.transaction():
            conn.execute(
                "INSERT INTO timestone.episodes (group_id, id, name, content, source,"
                " reference_time, idempotency_key, recorded_at, created_at)"
                " VALUES (%s, gen_random_uuid(), 'x', 'a zebra note', 'text', now(), 'k',"
                " now(), now())",
                (group,),
            )
            assert ("episodes", "zebra", 1, 0) in _stats(conn, group)  # counted in it
            raise psycopg.Rollback()
        assert _stats(conn, group) == before  # and gone with it


def _rows(conn: Conn, group: str, kind: str) -> dict[str, int]:
    """How many rows of the statistics each lexeme of ``kind`` has (deltas not folded)."""
    rows = conn.execute(
        "SELECT lexeme, count(*) FROM timestone.term_stats WHERE group_id = %s AND kind = %s"
        " GROUP BY lexeme",
        (group, kind),
    ).fetchall()
    return {str(x): int(str(n)) for x, n in rows}


def _record_words(conn: Conn, group: str, name_like: str) -> tuple[set[str], int]:
    row = conn.execute(
        "SELECT tsvector_to_array(fts), fts_words FROM timestone.episodes"
        " WHERE group_id = %s AND source = 'facts' AND name LIKE %s",
        (group, name_like),
    ).fetchone()
    assert row is not None
    words, length = row
    assert isinstance(words, list)
    assert isinstance(length, int)
    return {str(w) for w in cast(list[object], words)}, length


def test_a_record_of_facts_is_searched_by_what_its_facts_say(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """The episode ``add_facts`` writes holds its facts as JSON; its text vector holds
    the facts' words (each end's name, labels and summary, the relation, the sentence)
    and the name given to it, not the JSON's keys, the dates or the default name, and
    its length for BM25 is the number of those words (migration 0042)."""
    memory.add_facts(group, [F("Ada", "KNOWS", "Grace", valid_at=T0)], reference_time=T0)
    mira = timestone.EntityInput("Mira Sołtys", labels=("Chef",), summary="Head of the kitchen")
    memory.add_facts(
        group,
        [
            F(
                mira,
                "WORKS_AT",
                "Château Sud",
                fact="Mira runs the kitchen at Château Sud.",
                valid_at=datetime(2021, 3, 1, tzinfo=UTC),
            ),
        ],
        reference_time=T0,
        name="Mira's CV",
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        ada = _record_words(conn, group, "facts at %")
        cv = _record_words(conn, group, "Mira's CV")
        assert _stats(conn, group) == _recounted(conn, group)
    assert ada == ({"ada", "grace", "know"}, 3)
    assert cv[0] == {
        "mira",
        "cv",
        "sołti",
        "chef",
        "head",
        "kitchen",
        "work",
        "château",
        "sud",
        "run",
    }


def test_deltas_left_while_another_writer_folds_are_folded_by_the_next_write(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """A write that holds its group's fold lock adds to the statistics rows in place; one
    that finds it taken (another writer of the group, mid-transaction) stores its deltas as
    rows of their own, removals included. The sums stay exact either way, and the next
    write that takes the lock folds each lexeme it touches back into one row; a lexeme
    whose count reaches zero keeps no row."""
    memory.add_facts(group, [F("Ada", "KNOWS", "Grace")], reference_time=T0)
    with (
        psycopg.connect(dsn, autocommit=True) as holder,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        key = holder.execute(
            "SELECT hashtextextended('timestone-term-stats' || chr(31) || %s, 0)", (group,)
        ).fetchone()
        assert key is not None
        assert _rows(conn, group, "facts")["ada"] == 1
        holder.execute("SELECT pg_advisory_lock(%s)", key)
        added = memory.add_facts(
            group, [F("Ada", "KNOWS", "Lovelace"), F("Zed", "KNOWS", "Ada")], reference_time=T0
        )
        assert _stats(conn, group) == _recounted(conn, group)
        assert _rows(conn, group, "facts")["ada"] == 2  # the write's deltas stand apart
        memory.remove_episode(group, added.episode.id)
        assert _stats(conn, group) == _recounted(conn, group)
        assert _rows(conn, group, "facts")["zed"] == 2  # added, then taken away: sum zero
        holder.execute("SELECT pg_advisory_unlock(%s)", key)
        memory.add_facts(group, [F("Grace", "KNOWS", "Ada")], reference_time=T0)
        assert _stats(conn, group) == _recounted(conn, group)
        folded = _rows(conn, group, "facts")
        assert (folded["ada"], folded[""]) == (1, 1)  # touched: folded into one row
        assert folded["zed"] == 2  # not touched by the write: left as it was
        memory.add_facts(group, [F("Zed", "KNOWS", "Grace")], reference_time=T0)
        memory.remove_episode(
            group, memory.add_facts(group, [F("Zed", "KNOWS", "Bo")], reference_time=T0).episode.id
        )
        assert _stats(conn, group) == _recounted(conn, group)
        assert _rows(conn, group, "facts")["zed"] == 1
        assert "bo" not in _rows(conn, group, "facts")  # counted to zero: no row kept


def test_writers_of_one_group_side_by_side_keep_the_statistics_exact(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """Two writers of one group at once, of different names (so neither waits for the
    other's name locks) and common words: whichever holds the fold lock adds in place
    while the other appends its deltas; neither waits on the other's rows, and the sums
    equal a recount when both are done."""
    errors: list[BaseException] = []

    def write(who: str) -> None:
        try:
            for i in range(30):
                memory.add_facts(
                    group,
                    [F(f"{who} {i}", "KNOWS", f"{who} friend {i % 3}")],
                    reference_time=T0 + timedelta(days=i),
                )
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(who,)) for who in ("Bo", "Cy")]
    for t in writers:
        t.start()
    for t in writers:
        t.join(timeout=120)
    assert not errors
    assert not any(t.is_alive() for t in writers)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert _stats(conn, group) == _recounted(conn, group)


def test_a_new_group_of_many_new_words_is_counted_after_the_statistics_are_analysed(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """Once the statistics table has been analysed, the planner thinks a new group holds
    about one row of it; the fold of a first write of 50,000 new words must not depend
    on that guess (a join it planned as a nested loop compared every touched word with
    every row: hours, here over the test's time limit). The counts come out exact."""
    memory.add_facts(f"{group}-other", [F("Ada", "KNOWS", "Grace")], reference_time=T0)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE timestone.term_stats")
    rnd = random.Random(7)
    words = [
        " ".join("".join(rnd.choices(string.ascii_lowercase, k=9)) for _ in range(1000))
        for _ in range(50)
    ]
    memory.add_facts(
        group,
        [F("Ada", "NOTES", f"Note {i}", fact=w) for i, w in enumerate(words)],
        reference_time=T0,
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert _stats(conn, group) == _recounted(conn, group)
        held = {x for kind, x, _, _ in _stats(conn, group) if kind == "facts"}
    assert len(held) > 45_000


def test_a_question_only_of_stop_words_still_gets_vector_results(
    memory: timestone.Memory, group: str
) -> None:
    _turns(memory, group, ["Caroline: I went to a support group.", "Melanie: I paint."])
    found = memory.search(group, "what was it that they did?", scopes=("episodes",), limit=5)
    assert len(found.episodes) == 2


def test_an_empty_or_overlong_question_is_a_clear_error(
    memory: timestone.Memory, group: str
) -> None:
    with pytest.raises(InvalidInput, match="search query"):
        memory.search(group, "   ", scopes=("episodes",))
    with pytest.raises(InvalidInput, match=f"{MAX_QUERY_CHARS:,}|{MAX_QUERY_CHARS}"):
        memory.search(group, "word " * (MAX_QUERY_CHARS // 5) + "x", scopes=("episodes",))


def test_the_commoner_words_only_score_the_rows_the_rarer_ones_chose(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """The accumulator limit (``timestone.text_candidate_rows``, 500 unless set): the
    rarest word always chooses its rows; a commoner word chooses rows of its own only
    while the rows chosen add up to no more than the limit, else it only adds to the
    score of the rows already chosen. A bad setting is named."""
    rare = [f"Jo: a zeppelin and a garden, day {i}." for i in range(3)]
    common = [f"Jo: the garden was lovely on day {i}." for i in range(6)]
    other = [f"Jo: it rained on the hills, week {i}." for i in range(20)]
    _turns(memory, group, [*rare, *common, *other])
    with psycopg.connect(dsn, autocommit=True) as conn:
        every = _scores(conn, group, "told episodes", "garden zeppelin")
        assert set(every) == {*rare, *common}  # 3 + 9 rows: under the default limit
        conn.execute("SET timestone.text_candidate_rows = 5")
        chosen = _scores(conn, group, "told episodes", "garden zeppelin")
        assert set(chosen) == set(rare)  # "garden" would bring the rows to 12
        assert chosen == {c: every[c] for c in rare}  # scored by both words all the same
        conn.execute("SET timestone.text_candidate_rows = 12")
        assert _scores(conn, group, "told episodes", "garden zeppelin") == every
        conn.execute("SET timestone.text_candidate_rows = 0")  # the rarest word still chooses
        assert set(_scores(conn, group, "told episodes", "garden zeppelin")) == set(rare)
        conn.execute("SET timestone.text_candidate_rows = 'a few'")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="text_candidate_rows"):
            _scores(conn, group, "told episodes", "garden zeppelin")


def test_a_long_question_is_read_for_its_rarest_words(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """A question at the length limit, of hundreds of different words: it is answered,
    and the turn that holds its rare word leads."""
    _turns(memory, group, [f"Kim: note {i} about the weather." for i in range(5)])
    _turns(memory, group, ["Kim: the quokka smiled at us."], at=T0 + timedelta(days=1))
    words = " ".join(f"w{i}x" for i in range(1200)) + " weather quokka"
    question = words[-MAX_QUERY_CHARS:]
    found = memory.search(group, question, scopes=("episodes",), valid_at=None, limit=3)
    assert found.episodes[0].content == "Kim: the quokka smiled at us."


def test_a_search_writes_nothing(memory: timestone.Memory, dsn: str, group: str) -> None:
    _turns(memory, group, ["Caroline: I went to a support group.", "Melanie: I paint."])
    with psycopg.connect(dsn, autocommit=True) as conn:

        def written() -> tuple[object, ...]:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM timestone.term_stats),"
                " (SELECT max(id) FROM timestone.term_stats),"
                " (SELECT count(*) FROM timestone.episodes WHERE group_id = %s)",
                (group,),
            ).fetchone()
            assert row is not None
            return tuple(row)

        before = written()
        for q in ("support group", "what did they do?", "paint"):
            memory.search(group, q, scopes=("facts", "entities", "episodes", "communities"))
            memory.context(group, q, token_budget=500)
        assert written() == before


def test_a_reply_that_names_nothing_is_found_through_the_turn_before(
    memory: timestone.Memory, group: str
) -> None:
    """The neighbours of a hit share its score: the answer ("Yes! I went yesterday") names
    nothing of its subject; the question before it does."""
    _turns(
        memory,
        group,
        [
            "Melanie: Did you make it to the pride parade this weekend?",
            "Caroline: Yes! I went yesterday, it was so powerful.",
            "Melanie: I baked bread with the kids today.",
            "Caroline: My dog chewed my shoes again.",
            "Melanie: We planted tomatoes in the garden.",
        ],
    )
    found = memory.search(
        group, "When did Caroline go to the pride parade?", scopes=("episodes",), limit=2
    )
    assert set(_uris(found)) == {f"turn-{T0.date()}-0", f"turn-{T0.date()}-1"}


def test_only_the_turns_of_one_source_lend_each_other_context(
    memory: timestone.Memory, group: str
) -> None:
    """The same texts, stored once as the turns of one conversation (one title) and once
    as independent documents (a title each): the text after the hit is lifted by it in
    the conversation, and not among the documents, where the text that shares a word
    of the question comes second."""
    texts = [
        "The island ferry leaves at noon every day.",
        "Bread rises best in a warm kitchen.",
        "Copper wire conducts electricity well.",
        "The quokka lives on a small island near the coast.",
        "Tomatoes ripen on the vine in late summer.",
        "Violins are tuned in fifths.",
    ]
    question = "Where does the quokka live on the island?"
    stored = {"conversation": f"{group}-conversation", "documents": f"{group}-documents"}
    for i, text in enumerate(texts):
        memory.add_document(
            stored["conversation"], f"t{i}", text, title="a chat", reference_time=T0
        )
        memory.add_document(
            stored["documents"], f"t{i}", text, title=f"note {i}", reference_time=T0
        )
    chat = _uris(memory.search(stored["conversation"], question, scopes=("episodes",), limit=3))
    docs = _uris(memory.search(stored["documents"], question, scopes=("episodes",), limit=3))
    assert chat[0] == docs[0] == "t3"
    assert "t4" in chat  # the turn after the hit
    assert docs[1] == "t0"  # "island": a word of the question
    assert "t4" not in docs[:2]


def test_a_repeated_word_in_a_long_document_counts(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """Two documents of the same words but one repeat: the one that says "zebra" six
    times outranks the one that says it once, by Okapi BM25 with term frequency and
    the length in words (a word counted once per row gave them the same score)."""
    rnd = random.Random(11)
    filler = " ".join("".join(rnd.choices(string.ascii_lowercase, k=6)) for _ in range(150))
    texts = {
        "once": f"{filler} zebra.",
        "often": f"{filler} zebra zebra zebra zebra zebra zebra.",
        "none": f"{filler} giraffe.",
    }
    for uri, text in texts.items():
        memory.add_document(group, uri, text, title=uri, reference_time=T0)
    with psycopg.connect(dsn, autocommit=True) as conn:
        scores = _scores(conn, group, "told episodes", "zebra")
        words = {
            str(c): int(str(w))
            for c, w in conn.execute(
                "SELECT content, fts_words FROM timestone.episodes WHERE group_id = %s",
                (group,),
            ).fetchall()
        }
    assert words[texts["once"]] == 150 + 1 + 3  # the title and "[1/1]" are words too
    assert scores[texts["often"]] > scores[texts["once"]]
    assert texts["none"] not in scores
    # Okapi BM25 as written: k1 1.2, b 0.75, idf ln(1 + (n - df + 0.5) / (df + 0.5))
    avgdl = sum(words.values()) / 3
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    for key, tf in (("once", 1), ("often", 6)):
        norm = 1.2 * (0.25 + 0.75 * words[texts[key]] / avgdl)
        assert scores[texts[key]] == pytest.approx(idf * tf * 2.2 / (tf + norm), rel=1e-5)


# the reference moment of relative words: a Friday in August
REF = datetime(2023, 8, 11, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "window"),
    [
        ("Who did Maria have dinner with on May 3, 2023?", ((2023, 5, 3), (2023, 5, 4))),
        ("What did Gina find on 1 February, 2023?", ((2023, 2, 1), (2023, 2, 2))),
        ("What did they paint in July 2023?", ((2023, 7, 1), (2023, 8, 1))),
        ("What happened in Sept. 2022?", ((2022, 9, 1), (2022, 10, 1))),
        ("What happened in May of 2022?", ((2022, 5, 1), (2022, 6, 1))),
        ("How often did she swim in 2023?", ((2023, 1, 1), (2024, 1, 1))),
        ("Who are the 2 kids of Maria in 2023?", ((2023, 1, 1), (2024, 1, 1))),
        ("What may she do in 2022?", ((2022, 1, 1), (2023, 1, 1))),
        ("Where is room 2023?", None),
        # dates in numbers: ISO year first; else month first unless it cannot be a month
        ("What happened on 2023-05-08?", ((2023, 5, 8), (2023, 5, 9))),
        ("What happened on 2023/05/08?", ((2023, 5, 8), (2023, 5, 9))),
        ("What was logged at 2023-05-08T10:00:00Z?", ((2023, 5, 8), (2023, 5, 9))),
        ("What happened on 05/08/2023?", ((2023, 5, 8), (2023, 5, 9))),
        ("What happened on 5-8-2023?", ((2023, 5, 8), (2023, 5, 9))),
        ("What happened on 13/05/2023?", ((2023, 5, 13), (2023, 5, 14))),
        ("What happened on 31/02/2023?", None),
        ("What is new in version 1.2.2023?", None),
        # relative words, read against the reference moment
        ("What did she do last year?", ((2022, 1, 1), (2023, 1, 1))),
        ("What did she buy this month?", ((2023, 8, 1), (2023, 9, 1))),
        ("Who called two weeks ago?", ((2023, 7, 24), (2023, 7, 31))),
        ("Who called 3 days ago?", ((2023, 8, 8), (2023, 8, 9))),
        ("What did she cook yesterday?", ((2023, 8, 10), (2023, 8, 11))),
        ("What did she do last Friday?", ((2023, 8, 4), (2023, 8, 5))),
        ("What did they do last weekend?", ((2023, 8, 5), (2023, 8, 7))),
        ("What is planned for next month?", ((2023, 9, 1), (2023, 10, 1))),
        ("When did she go camping in June?", ((2023, 6, 1), (2023, 7, 1))),
        ("What did she do in December?", ((2022, 12, 1), (2023, 1, 1))),
        ("Where did they go last summer?", ((2022, 6, 1), (2022, 9, 1))),
        ("Where did they go this summer?", ((2023, 6, 1), (2023, 9, 1))),
        ("Where did they ski last winter?", ((2022, 12, 1), (2023, 3, 1))),
        ("What state did Joanna visit in summer 2021?", ((2021, 6, 1), (2021, 9, 1))),
        # a date written out wins over relative words
        ("What did she do last weekend before April 10, 2023?", ((2023, 4, 10), (2023, 4, 11))),
        # no time: a modal "may", a verb "march", an ordinal "second", a lower-case month
        # with no year, an event, a bare number
        ("May I ask what she painted?", None),
        ("Did they march in the parade?", None),
        ("Who came second in the race?", None),
        ("Who came in second place at the fair?", None),
        ("What did she say in may?", None),
        ("What did she do before she moved?", None),
        ("What happened after the wedding?", None),
        ("What did she do in 3 weeks?", None),
        ("Does she march every spring?", None),
    ],
)
def test_a_question_names_a_window_of_time(
    question: str, window: tuple[tuple[int, int, int], tuple[int, int, int]] | None
) -> None:
    expected = (
        None if window is None else tuple(datetime(*d, tzinfo=UTC) for d in window)  # pyright: ignore[reportUnknownArgumentType]
    )
    assert time_window(question, REF) == expected


def test_relative_words_are_read_against_valid_at_else_now() -> None:
    """The reference moment of a search is its ``valid_at``, else the moment of the call;
    a search over any time (``valid_at=None``) reads them against now too."""
    at = datetime(2021, 3, 15, tzinfo=UTC)
    req = prepare_search("What did she do last year?", valid_at=at)
    assert req.window == (datetime(2020, 1, 1, tzinfo=UTC), datetime(2021, 1, 1, tzinfo=UTC))
    this_year = datetime.now(UTC).year
    for when in ({}, {"valid_at": None}):
        req = prepare_search("What did she do last year?", **when)  # pyright: ignore[reportArgumentType]
        assert req.window is not None
        assert req.window[0] == datetime(this_year - 1, 1, 1, tzinfo=UTC)
    assert prepare_search("What did she paint?").window is None


def test_a_turn_told_in_the_month_asked_leads(memory: timestone.Memory, group: str) -> None:
    """The same words told in two months: the question names one, and its turn leads."""
    may, june = datetime(2023, 5, 20, tzinfo=UTC), datetime(2023, 6, 20, tzinfo=UTC)
    _turns(memory, group, ["Maria: we volunteered at the shelter today."], at=may)
    _turns(memory, group, ["Maria: we volunteered at the shelter today."], at=june)
    for month, at in (("May", may), ("June", june)):
        found = memory.search(
            group,
            f"Where did Maria volunteer in {month} 2023?",
            scopes=("episodes",),
            valid_at=None,
            limit=2,
        )
        assert found.episodes[0].reference_time == at


def test_a_turn_told_in_the_relative_window_leads(memory: timestone.Memory, group: str) -> None:
    """The same words told two summers running: "last summer", read against ``valid_at``,
    names the first, and its turn leads; without the time words the one written first
    (the later summer) does."""
    summers = datetime(2022, 7, 20, tzinfo=UTC), datetime(2023, 7, 20, tzinfo=UTC)
    for at in reversed(summers):
        _turns(memory, group, ["Maria: we hiked up to the glacier lake."], at=at)
    asked = datetime(2023, 8, 11, tzinfo=UTC)
    leads: list[datetime] = []
    for question in ("Where did Maria hike last summer?", "Where did Maria hike?"):
        found = memory.search(group, question, scopes=("episodes",), valid_at=asked, limit=2)
        leads.append(found.episodes[0].reference_time)
    assert leads[0] == summers[0], leads
    assert leads[1] == summers[1], leads


def test_facts_true_in_the_window_asked_lead(memory: timestone.Memory, group: str) -> None:
    """Two employers in turn: the year the question names puts the fact true then first,
    whichever that is; the facts are the same, only the window moves."""

    def at(year: int) -> datetime:
        return datetime(year, 1, 1, tzinfo=UTC)

    memory.add_facts(
        group,
        [
            F(
                "Mira",
                "WORKS_AT",
                "Nord",
                fact="Mira works at Nord.",
                valid_at=at(2015),
                invalid_at=at(2023),
            ),
            F("Mira", "WORKS_AT", "Sud", fact="Mira works at Sud.", valid_at=at(2023)),
        ],
        reference_time=at(2023),
    )
    firsts: list[str] = []
    for year in (2019, 2024):
        found = memory.search(group, f"Where did Mira work in {year}?", valid_at=None, limit=1)
        firsts.append(found.facts[0].target)
    assert firsts == ["Nord", "Sud"]
    # ``valid_at`` a moment: only what is true then, and the window cannot change that
    found = memory.search(group, "Where did Mira work in 2019?", valid_at=at(2024))
    assert [f.target for f in found.facts] == ["Sud"]


def test_a_context_weighs_facts_and_episodes_each_against_its_best(
    memory: timestone.Memory, group: str
) -> None:
    """Facts are fused by rank (scores near 0.03), episodes by score (near 1): merged as
    they come, no fact would ever precede an episode under a small budget."""
    memory.add_facts(
        group,
        [F("Ada", "WORKS_AT", "Analytical Engines", fact="Ada works at Analytical Engines.")],
        reference_time=T0,
    )
    _turns(memory, group, [f"Ada: the weather was grey on walk {i}." for i in range(12)])
    ctx = memory.context(group, "Where does Ada work?", token_budget=400, valid_at=None)
    assert "Ada works at Analytical Engines." in [item.text for item in ctx.items]
    for kind in ("fact", "episode"):
        assert max(item.score for item in ctx.items if item.kind == kind) == pytest.approx(1.0)


def test_the_library_role_cannot_read_the_term_statistics(
    memory: timestone.Memory, dsn: str, group: str
) -> None:
    """Only the database's own functions read the statistics, each for its group."""
    _turns(memory, group, ["Ana: the lighthouse keeper gave us a tour."])
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("SET LOCAL ROLE timestone_app")
        conn.execute("SELECT set_config('timestone.group_id', %s, true)", (group,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT count(*) FROM timestone.term_stats")
        raise psycopg.Rollback()

"""Which words a group's full-text list of facts leaves out as common is decided from the
group's own term statistics (``timestone.search_text``, migration 0036's counts): other
groups' facts never change a group's matches."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg

import timestone
from timestone import FactInput

_WHEN = datetime(2020, 1, 1, tzinfo=UTC)
_ALICE, _BOB = "alice@example.com", "bob@example.com"


def _matches(mem: timestone.Memory, group: str, words: str, valid_at: datetime | None) -> list[str]:
    """The facts ``search_text`` lists for ``words``, with a bound of 5 rows for common
    words, in the order it ranks them."""
    with mem.connection(group) as conn:
        conn.execute("SET LOCAL timestone.text_common_rows = 5")
        rows = conn.execute(
            "SELECT f.fact FROM timestone.search_text('facts',"
            " websearch_to_tsquery('english', %s), NULL, %s, NULL, NULL, 50) AS t"
            " JOIN timestone.facts AS f ON f.version_id = t.version_id"
            " ORDER BY t.rank DESC, t.version_id",
            (words, valid_at),
        ).fetchall()
    return [str(r["fact"]) for r in rows]


def _analyze(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as owner:
        owner.execute("ANALYZE timestone.facts")


def test_other_groups_words_do_not_change_a_groups_matches(fresh_dsn: str) -> None:
    now = datetime.now(UTC)
    with timestone.Memory.open(fresh_dsn) as mem:
        # ten facts of alice's: every one names Mira, three a vineyard
        mem.add_facts(
            _ALICE,
            [
                FactInput(f"Mira {i}", "OWNS", f"Vineyard {i}" if i < 3 else f"Cellar {i}")
                for i in range(10)
            ],
            reference_time=_WHEN,
        )
        _analyze(fresh_dsn)
        questions = ("vineyard", "Mira vineyard", "Mira", "Mira cellar")
        before = {(q, v): _matches(mem, _ALICE, q, v) for q in questions for v in (None, now)}
        # three facts hold "vineyard", under the bound of 5: listed
        assert len(before["vineyard", None]) == 3
        assert len(before["Mira vineyard", now]) == 3
        # every fact of the group holds "mira" (10 >= 5), and "mira cellar" is estimated
        # at 10 * 7/10 = 7: common in the group, no list
        assert before["Mira", None] == before["Mira", now] == []
        assert before["Mira cellar", now] == []
        # bob writes 200 facts with a vineyard and no Mira: the table's statistics now
        # call "vineyard" common and "mira" rare, which are not alice's
        mem.add_facts(
            _BOB,
            [FactInput(f"Ada {i}", "OWNS", f"Vineyard {i}") for i in range(200)],
            reference_time=_WHEN,
        )
        _analyze(fresh_dsn)
        after = {(q, v): _matches(mem, _ALICE, q, v) for q in questions for v in (None, now)}
        assert after == before
        # bob's own: 200 facts hold "vineyard" in his group, common there
        assert _matches(mem, _BOB, "vineyard", None) == []


def test_a_word_not_plain_keeps_the_list(fresh_dsn: str) -> None:
    """A question with OR, NOT or a phrase is not estimated: it keeps its list."""
    with timestone.Memory.open(fresh_dsn) as mem:
        mem.add_facts(
            _ALICE,
            [FactInput(f"Mira {i}", "OWNS", f"Cellar {i}") for i in range(10)],
            reference_time=_WHEN,
        )
        assert _matches(mem, _ALICE, "Mira", None) == []
        assert len(_matches(mem, _ALICE, "Mira or Ada", None)) == 10
        assert len(_matches(mem, _ALICE, '"Mira 1 owns"', None)) == 1
        assert len(_matches(mem, _ALICE, "Mira -Ada", None)) == 10
